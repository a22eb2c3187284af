# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The settings of the ``sbatch`` role that do not fit, one line each (roles/sbatch, filter sbatch_problems).

The batch script the role renders has two parts that read these values differently:

* its ``#SBATCH`` lines, which sbatch reads up to the end of the line and splits at whitespace; they cannot be
  shell-quoted, so a value there must be one token on one line: a newline would end the ``#SBATCH`` line and make
  the rest a shell command (and every later ``#SBATCH`` line is then ignored, since sbatch stops reading them at
  the first command);
* the shell part, where the template quotes every value (``| quote``).

The job name also names the script's files (``<job name>-<timestamp>.sbatch``), so it is one file name
component. Every line names the variable and its value (``repr``), says what it must be and gives an example.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

JOB_NAME_MAX = 100
"""The longest job name taken (Slurm itself takes longer ones; this one also names files, with %x in paths)."""

STOP_SECONDS_MAX = 65535
"""sbatch --signal=<sig>@<sig_time>: Slurm takes 0 to 65535 seconds."""

_JOB_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9._+-]*')
_CONTROL = re.compile(r'[\x00-\x1f\x7f]')
_WHITESPACE = re.compile(r'\s')
_DIGITS = re.compile(r'[0-9]+')
_LONG = re.compile(r'--([a-z][a-z0-9-]*)(=(\S+))?')
_SHORT = re.compile(r'-([A-Za-z])( ?(\S+))?')

# The options the role writes itself, or that break the job it runs, and the setting to use instead.
# Long names are refused also when abbreviated (sbatch, like getopt_long, takes a unique prefix).
OWN_OPTIONS = {
    'job-name': 'it is set from trainops_sbatch_job_name',
    'nodes': 'it is set from trainops_sbatch_nodes',
    'output': 'it is set from trainops_sbatch_output',
    'signal': 'the role sets it to stop the ranks trainops_sbatch_stop_seconds before the time limit',
    'requeue': 'it is set from trainops_sbatch_requeue',
    'no-requeue': 'it is set from trainops_sbatch_requeue',
    'wrap': 'the job would run that command instead of the batch script',
    'parsable': 'the role submits with it and reads the job id from it',
    'wait': 'it is set from trainops_sbatch_wait',
}
SHORT_OPTIONS = {'J': 'job-name', 'N': 'nodes', 'o': 'output', 'W': 'wait'}

# Paths the script names (in comments, a cd, the ansible-playbook command): one line each.
PATHS = ('trainops_sbatch_dir', 'trainops_sbatch_inventory', 'trainops_sbatch_playbook',
         'trainops_sbatch_stop_playbook', 'trainops_sbatch_ansible_playbook')


def batch_time_limit(end):
    """The time limit of the batch job the launch runs in, as its batch script told the stop playbook when Slurm warned
    it (``--signal=B:USR1@<stop seconds>``: ``-e '{"trainops_stop_time_limit": {"job_id": "14", "stop_seconds":
    120}}'``; the controller's own command line, never anything a node wrote). ``end``: ``{'batch': that mapping}``.
    Returns ``{'by': 'job', 'source': 'sbatch', 'detail'}`` (a launcher's time limit, _launchers.Launcher.time_limit),
    or None when ``end`` has no such mapping, or its job id or seconds are not digits."""
    batch = (end or {}).get('batch') if isinstance(end, dict) else None
    if not isinstance(batch, dict):
        return None
    job_id, seconds = batch.get('job_id'), _integer(batch.get('stop_seconds'))
    if not isinstance(job_id, str) or not _DIGITS.fullmatch(job_id) or seconds is None:
        return None
    return {'by': 'job', 'source': 'sbatch',
            'detail': 'batch job %s reached its time limit (Slurm warned it %d s before: sbatch --signal=B:USR1@%d)'
                      % (job_id, seconds, seconds)}


def _integer(value):
    """The value as an int when it is written with digits only (8 or '8', not -1, 8.5, True), else None."""
    if isinstance(value, bool):
        return None
    text = str(value)
    return int(text) if _DIGITS.fullmatch(text) else None


def job_name_problem(value):
    """The line for a job name that does not fit, or None."""
    if isinstance(value, str) and _JOB_NAME.fullmatch(value) and len(value) <= JOB_NAME_MAX:
        return None
    return ('trainops_sbatch_job_name=%r: the job name (an #SBATCH line and the stem of the script\'s file name) must '
            'start with a letter or digit and hold only letters, digits, ., _, + and -, at most %d characters '
            '(e.g. -e trainops_sbatch_job_name=nightly-llama)' % (value, JOB_NAME_MAX))


def option_problem(option):
    """The line for one item of trainops_sbatch_options that does not fit, or None."""
    where = 'trainops_sbatch_options item %r' % (option, )
    if not isinstance(option, str) or _CONTROL.search(option):
        return ('%s: each item is one sbatch option on one #SBATCH line, without a newline or other control '
                'character (e.g. --partition=gpu)' % where)
    long_match = _LONG.fullmatch(option)
    short_match = _SHORT.fullmatch(option)
    if long_match:
        name = long_match.group(1)
        taken = [own for own in OWN_OPTIONS if own.startswith(name)]
        if taken:
            return '%s: --%s is not taken here: %s' % (where, taken[0], OWN_OPTIONS[taken[0]])
        return None
    if short_match:
        letter = short_match.group(1)
        if letter in SHORT_OPTIONS:
            own = SHORT_OPTIONS[letter]
            return '%s: -%s (--%s) is not taken here: %s' % (where, letter, own, OWN_OPTIONS[own])
        return None
    return ('%s: each item is one sbatch option, --name=value or -x value, with no whitespace in the value '
            '(e.g. --partition=gpu, --time=02:00:00, -p gpu)' % where)


def output_problem(value):
    """The line for an output path that does not fit, or None (Slurm's %x, %j, ... patterns are fine)."""
    if isinstance(value, str) and value and not _WHITESPACE.search(value) and not _CONTROL.search(value):
        return None
    return ('trainops_sbatch_output=%r: the job\'s output file (an #SBATCH line) must be a path without whitespace '
            'or control characters; %%x is the job name, %%j the job id (e.g. -e trainops_sbatch_output=/shared/'
            'sbatch/%%x-%%j.out)' % (value, ))


def sbatch_problems(params):
    """One line per setting of the sbatch role that does not fit; empty when every one fits.

    ``params`` maps the role's variable names (``trainops_sbatch_*``) to their values; a variable left out is not
    checked.
    """
    problems = []
    if 'trainops_sbatch_job_name' in params:
        problems.append(job_name_problem(params['trainops_sbatch_job_name']))
    if 'trainops_sbatch_nodes' in params:
        nodes = params['trainops_sbatch_nodes']
        if _integer(nodes) is None or _integer(nodes) < 1:
            problems.append('trainops_sbatch_nodes=%r: the nodes to allocate must be an integer of at least 1 '
                            '(e.g. -e trainops_sbatch_nodes=4)' % (nodes, ))
    if 'trainops_sbatch_stop_seconds' in params:
        seconds = params['trainops_sbatch_stop_seconds']
        if _integer(seconds) is None or not 1 <= _integer(seconds) <= STOP_SECONDS_MAX:
            problems.append('trainops_sbatch_stop_seconds=%r: the seconds before the time limit at which the ranks are '
                            'stopped must be an integer from 1 to %d (e.g. -e trainops_sbatch_stop_seconds=120)'
                            % (seconds, STOP_SECONDS_MAX))
        elif 'trainops_sbatch_checkpoint_seconds' in params:
            checkpoint = params['trainops_sbatch_checkpoint_seconds']
            if _integer(checkpoint) is None or _integer(checkpoint) >= _integer(seconds):
                problems.append('trainops_sbatch_checkpoint_seconds=%r: the seconds the ranks get to checkpoint after '
                                'the checkpoint signal must be an integer from 0 to less than trainops_sbatch_stop_seconds '
                                '(%d), which also stops and collects them (e.g. -e trainops_sbatch_checkpoint_seconds=60)'
                                % (checkpoint, _integer(seconds)))
    if 'trainops_sbatch_output' in params:
        problems.append(output_problem(params['trainops_sbatch_output']))
    if 'trainops_sbatch_options' in params:
        options = params['trainops_sbatch_options']
        if isinstance(options, Sequence) and not isinstance(options, (str, bytes)):
            problems.extend(option_problem(option) for option in options)
        else:
            problems.append('trainops_sbatch_options=%r: must be a list of sbatch options, one per item '
                            '(e.g. -e \'{"trainops_sbatch_options": ["--partition=gpu"]}\')' % (options, ))
    for name in PATHS:
        if name in params:
            value = params[name]
            if not isinstance(value, str) or _CONTROL.search(value):
                problems.append('%s=%r: the path must not hold a newline or other control character' % (name, value))
    return [line for line in problems if line]
