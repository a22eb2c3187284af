# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The steps of ``playbooks/sweep.yml`` as data (logic behind the action ``trainops.multinode.sweep_step`` and the
launch plan's knobs and nodes steps in a sweep, the action ``trainops.multinode.launch_plan``; the task files
roles/job/tasks/sweep.yml and point.yml only call them).

Each function takes what the action read from the play: ``read(name)`` gives a variable's value (KeyError when it
is not defined) and ``defined(name)`` says whether it is. Nothing here imports Ansible.

- :func:`host_plan`: one node's sweep knobs, its launch settings, what a resume takes from sweep.json and what is
  wrong with it (the variables the role sets before the launch is validated);
- :func:`gate`: the one message for every node's problems (nothing touched yet);
- :func:`plan_points`: the sweep's check and its points, once the launch's check passed;
- :func:`points`: the points with the variables each sets (its knobs, its progress label, the errors it forgets);
- :func:`point_outcome`: the update of a finished point in sweep.json, from its experiment's manifest;
- :func:`plan_lines`, :func:`point_line`, :func:`report`: what the play shows and publishes.
"""

from __future__ import annotations

import os

from ansible_collections.trainops.multinode.plugins.module_utils import _knobs, _launch_plan, _sweep_settings
from ansible_collections.trainops.multinode.plugins.module_utils._launch_params import merge_problems
from ansible_collections.trainops.multinode.plugins.module_utils._outcomes import SUCCEEDED
from ansible_collections.trainops.multinode.plugins.module_utils._sweep import (
    SWEEP_FILE, SweepError, read_sweep, sweep_points)

WORKLOADS = ('train', 'allreduce')

KNOBS = dict(sweep='trainops_sweep', sweep_name='trainops_sweep_name', sweep_dir='trainops_sweep_dir',
             workload='trainops_sweep_workload', stop_on_failure='trainops_sweep_stop_on_failure')
"""A sweep's own short knobs and the role variables they stand for (roles/job/defaults)."""

ALLREDUCE_SCRIPT = 'allreduce_bench.py'
ALLREDUCE_ARGS = '__trainops_allreduce_args'
"""The all-reduce benchmark's arguments from its short knobs (roles/job/vars/main.yml, shared with bench.yml)."""

RESET = dict(__trainops_start_error='', __trainops_run_error='', __trainops_launch_error='', __trainops_point_error='',
             trainops_wait=True, __trainops_fail_on_failure=False)
"""What every point sets besides its knobs: the previous point's errors forgotten (set by the start, the wait and
the rescues of run_job.yml and point.yml when something failed), and a sweep always waits for a point and records a failed one
(the next point needs the nodes)."""

POINT_VARS = (('channels', 'trainops_channels'), ('min_channels', 'trainops_min_channels'),
              ('threads', 'trainops_threads'), ('nproc_per_node', 'trainops_nproc_per_node'),
              ('config', 'trainops_config'), ('env', 'trainops_env'), ('overrides', 'trainops_overrides'))
"""The launch parameter a point can change (module_utils/_sweep.py, POINT_KEYS) and its role variable."""

NOT_RESUMING = 'Not resuming the sweep:'
NOT_STARTING = 'Not starting the sweep:'


def _knob(read, defined, short):
    return read(short) if defined(short) else read(KNOBS[short])


def sweep_of(read, defined):
    """The sweep's name, directory (absolute, relative to the directory ansible-playbook runs in; '' for a new
    sweep), its sweep.json (None for a new sweep), grid, workload and stop_on_failure; SweepError for a sweep
    directory without sweep.json and a workload that is not one."""
    name = _knob(read, defined, 'sweep_name')
    sweep_dir = _knob(read, defined, 'sweep_dir')
    sweep_dir = os.path.realpath(str(sweep_dir)) if sweep_dir else ''
    record = None
    if sweep_dir:
        if not os.path.isfile(os.path.join(sweep_dir, SWEEP_FILE)):
            raise SweepError('sweep_dir=%s: no sweep.json there; give the directory of an earlier sweep '
                             '(experiments/sweep_<name>_<timestamp>), or leave sweep_dir out to start a new sweep'
                             % sweep_dir)
        record = read_sweep(sweep_dir)
    # a resume runs the workload sweep.json recorded, unless given (a different one is refused, _sweep_settings)
    if defined('workload'):
        workload = read('workload')
    elif record is not None:
        workload = record.get('workload') or read(KNOBS['workload'])
    else:
        workload = read(KNOBS['workload'])
    if workload not in WORKLOADS:
        raise SweepError('workload=%s: must be train or allreduce (e.g. -e workload=allreduce)' % workload)
    # the grid as given, or (resuming with only sweep_dir) as sweep.json recorded it, in its knobs' order
    grid = _knob(read, defined, 'sweep')
    if not grid and record is not None:
        try:
            grid = dict((knob, record['grid'][knob]) for knob in record['knobs'])
        except (KeyError, TypeError):
            raise SweepError('%s: not a sweep record (no grid)' % os.path.join(sweep_dir, SWEEP_FILE))
    return dict(name=name, sweep_dir=sweep_dir, record=record, grid=grid, workload=workload,
                stop_on_failure=_knobs._truth(_knob(read, defined, 'stop_on_failure')))


def allreduce_vars(read, defined):
    """The role variables a point of the all-reduce benchmark (workload=allreduce) runs with."""
    return dict(trainops_script=ALLREDUCE_SCRIPT, trainops_pass_config_args=False,
                trainops_run_name=read('run_name') if defined('run_name') else 'allreduce',
                trainops_script_args=read(ALLREDUCE_ARGS))


def _short_knobs(read, defined):
    """``(given, knobs)``: the short knobs the command line set, and every short knob's value over its role variable
    (the launch plan's rule, module_utils/_launch_plan.py)."""
    given = _launch_plan.short_given([knob.short for knob in _knobs.SHORT if defined(knob.short)])
    return given, _launch_plan.knob_values(read, given)


def host_plan(read, defined, defaults, node, environ):
    """What one node runs the sweep with.

    ``read``/``defined``: this node's variables; ``defaults``: the roles' defaults (role variable to value);
    ``environ``: the controller's environment (the values of a resume's recorded secrets).

    Returns the sweep (:func:`sweep_of`, without its record), ``error`` (a line that ends the sweep on its own: no
    sweep.json, another workload; '' when none), ``problems`` (what a resume may not take), ``settings`` (what
    sweep.json records for this node, secrets by name), ``recorded`` (whether sweep.json holds settings) and
    ``vars``: the role variables to set before the launch is validated (the all-reduce benchmark's, and a resume's
    recorded settings; ``trainops_secret_env`` with its values from ``environ`` where a resume takes it from there).
    """
    try:
        sweep = sweep_of(read, defined)
    except SweepError as exc:
        return dict(error=str(exc), problems=[], settings={}, recorded=False, vars={})
    overlay = allreduce_vars(read, defined) if sweep['workload'] == 'allreduce' else {}

    def current(var):
        return overlay[var] if var in overlay else read(var)

    given, knobs = _short_knobs(current, defined)
    values = [current(var) for var in _sweep_settings.variables()]
    result = _sweep_settings.settings(values, knobs=knobs, defaults=defaults, given=given, record=sweep['record'],
                                      node=node, sweep=sweep['grid'], sweep_dir=sweep['sweep_dir'], environ=environ,
                                      workload=sweep['workload'])
    new = dict(overlay, **result['vars'])
    if result['secret_names']:
        new['trainops_secret_env'] = dict((name, environ[name]) for name in result['secret_names'])
    del sweep['record']
    return dict(sweep, error='', problems=result['problems'], settings=result['settings'],
                recorded=result['recorded'], vars=new)


def gate(plans):
    """The message that ends the sweep before any node is touched, from every node's :func:`host_plan` (node to
    plan, in play order), or None: a node's error, else every node's problems under one heading, each line once."""
    errors = [plan.get('error') for plan in plans.values() if plan.get('error')]
    if errors:
        return errors[0]
    problems = merge_problems(dict((node, plan.get('problems') or []) for node, plan in plans.items()))
    if problems:
        return '\n'.join([NOT_RESUMING] + problems)
    return None


def effective_problems(read, defined, plan):
    """After the role set the variables: the settings whose value is not the one the resume decided (an extra
    variable, which no task can change, given with the role's default value while the sweep recorded another)."""
    if not plan.get('recorded'):
        return []
    dummy, knobs = _short_knobs(read, defined)
    values = [read(var) for var in _sweep_settings.variables()]
    return _sweep_settings.effective_problems(values, knobs, plan['settings'], plan['sweep_dir'])


def plan_points(read, defined, plans, mine):
    """The sweep's check once the launch's passed (the launch plan's nodes step, roles/job/tasks/validate.yml):
    ``(message, points)``. ``plans``: every node's :func:`host_plan` (node to plan, in play order); ``mine``: this
    node's; ``read``/``defined``: this node's variables, once the role set them. The message (:func:`gate`, a resume's
    settings the role could not take: :func:`effective_problems`, the grid's: :func:`points`), else None."""
    message = gate(plans)
    if not message:
        problems = effective_problems(read, defined, mine)
        message = '\n'.join([NOT_RESUMING] + problems) if problems else None
    if message:
        return message, []
    return points(read('__trainops_launch_params'), mine['grid'], fixed_knobs(defined))


def points(params, grid, fixed):
    """``(message, points)``: the sweep's points (module_utils/_sweep.py, sweep_points), each with ``vars``, the
    variables it sets (its knobs, its progress label, :data:`RESET`); ``message`` when it cannot run, else None."""
    result = sweep_points(params, grid, fixed)
    if result['problems']:
        return '\n'.join([NOT_STARTING] + result['problems']), []
    total = len(result['points'])
    for point in result['points']:
        new = dict((var, point['params'].get(key)) for key, var in POINT_VARS)
        new.update(RESET, __trainops_wait_label='point %d/%d %s' % (point['index'], total, point['label']))
        point['vars'] = new
    return None, result['points']


def fixed_knobs(defined):
    """The short knobs a sweep may vary that the command line also gives on their own (``-e channels=42``)."""
    return [name for name in _knobs.names('short')['sweep'] if defined(name)]


def plan_lines(path, resumed, settings_recorded, record_points, workload, nodes):
    """What the play shows before the first point: the sweep, its points and those a resume skips."""
    lines = ['Sweep %s%s: %d point(s) of %s on %d node(s)' % (
        path, ' (resumed)' if resumed else '', len(record_points), workload, nodes)]
    if settings_recorded:
        lines.append('  sweep.json had no launch settings (an older sweep): the remaining points run with the settings '
                     'given now, recorded in sweep.json from here on')
    for point in record_points:
        done = ': succeeded earlier, skipped' if point.get('outcome') == SUCCEEDED else ''
        lines.append('  point %d/%d %s%s' % (point['index'], len(record_points), point['label'], done))
    return lines


def to_run(record_points, planned):
    """The points (:func:`points`) a sweep runs: all but those sweep.json says succeeded (a resume skips them)."""
    done = set(p['index'] for p in record_points if p.get('outcome') == SUCCEEDED)
    return [point for point in planned if point['index'] not in done]


def point_outcome(manifest, refused, errors):
    """The update of a finished point: the outcome its experiment's manifest records (``manifest``: None when there
    is none; ``refused``: why it was not read), else failed with the first node's error."""
    manifest = manifest or {}
    detail = manifest.get('outcome_detail')
    if 'outcome_detail' not in manifest:
        detail = (errors[0] if errors else None) or (refused[0] if refused else 'no manifest written')
    return dict(status='done', outcome=manifest.get('outcome') or 'failed', outcome_detail=detail)


def point_line(label, point):
    """``point 2/4 channels=28 threads=512: failed (failed on node1 ...)``."""
    outcome = point.get('outcome')
    if outcome == SUCCEEDED:
        return '%s: %s' % (label, outcome)
    return '%s: %s (%s)' % (label, outcome, point.get('outcome_detail'))


def report(path, record, table, files):
    """What the play shows and publishes at the end: ``lines`` (the table), ``failure`` (the message that fails the
    play when a point did not succeed, '' when none did) and ``stats`` (``trainops_sweep`` for ansible-runner)."""
    lines = ['sweep : %s' % path, 'outcome : %s' % record['outcome'], ''] + list(table) + ['', 'files : %s' % ', '.join(files)]
    bad = [p for p in record['points'] if p.get('outcome') != SUCCEEDED]
    failure = ''
    if record['outcome'] != SUCCEEDED:
        failure = '\n'.join(lines + ['', 'Sweep %s; %d point(s) did not succeed:' % (record['outcome'], len(bad))]
                            + ['  point %s %s: %s: %s (%s)' % (p['index'], p['label'], p.get('outcome'),
                                                               p.get('outcome_detail'), p.get('experiment_dir'))
                               for p in bad]
                            + ['Run the same command with -e sweep_dir=%s to run them again (points that succeeded '
                               'are skipped).' % path])
    stats = dict(path=path, outcome=record['outcome'], points=record['points'], table=list(table))
    return dict(lines=lines, failure=failure, stats=stats)


def role_defaults(roles):
    """The defaults of the roles nccl_env and job under the directory ``roles`` (role variable to value; the job
    role's win): a setting with its role's default value counts as not given on a resume."""
    import yaml
    defaults = {}
    for role in ('nccl_env', 'job'):
        with open(os.path.join(roles, role, 'defaults', 'main.yml')) as handle:
            defaults.update(yaml.safe_load(handle) or {})
    return defaults
