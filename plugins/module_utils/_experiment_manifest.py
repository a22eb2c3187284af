# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The launch's manifest, built from the run's variables (the experiment action's ``state=launched``, ``failed`` and
``collected``; plugins/action/experiment.py reads the variables and hands them here).

Each function takes ``var``, a callable that returns a run variable's value (``var(name)``; ``var(name, default)``
when the variable may be unset) and, where it reads the nodes, ``hostvars`` (any mapping of host name to a mapping
of its variables). They return plain data; writing is module_utils/_experiment.py's.

* :func:`read_manifest`: the manifest of an experiment directory, read within bounds (the one reader of it);
* :func:`experiment_name`: the name of a new experiment directory;
* :func:`launch_manifest`: the manifest of a launch that started (outcome ``running``);
* :func:`failed_manifest`: the manifest of a launch that did not start, merged over what was recorded;
* :func:`collect_inputs`: what the collect hands to report_experiment, read from the nodes;
* :func:`follow_lines`, :func:`collect_failure`: what the launch prints.
"""

from __future__ import annotations

import os
import time

from ansible_collections.trainops.multinode.plugins.module_utils import _launch_records, _node_files, _outcomes
from ansible_collections.trainops.multinode.plugins.module_utils._experiment_metrics import MANIFEST_FILE
from ansible_collections.trainops.multinode.plugins.module_utils._launch_records import dig, host_facts, host_vars, truncate

MAX_MANIFEST_BYTES = 64 * 1024 * 1024
"""The most of manifest.json read: a manifest of thousands of nodes stays far below."""

STAMP = '%Y-%m-%dT%H:%M:%SZ'
"""How the manifest writes a time (UTC)."""

FAILED = _outcomes.outcome('failed')
"""The outcome of a launch that did not start."""

UNSET = ('', None, 'None')
"""A knob left to the library (channels, threads): "auto" in the experiment's name."""

FINAL = '__trainops_final'
"""Every node's registered collect (collect.yml, the action trainops.multinode.collect): its final job, ``log_tail``
and the ``collected`` plans."""


class ManifestError(Exception):
    """The manifest cannot be read or built; the message says why."""


def stamp(when=None):
    """``when`` (seconds since the epoch, now by default) as the manifest writes a time."""
    return time.strftime(STAMP, time.gmtime(time.time() if when is None else when))


def read_manifest(path):
    """``(manifest, refused)``: the manifest of the experiment directory ``path`` (a dict; None when there is none or
    it is refused) and at most one line saying why it was refused. Read within the bounds of
    module_utils/_node_files.py (no symbolic link, at most MAX_MANIFEST_BYTES, depth, finite numbers), never trusted
    to be the launch's own: a value that is not a JSON object is refused."""
    return _node_files.read_json_object(os.path.join(path, MANIFEST_FILE), None, os.path.join(path, MANIFEST_FILE),
                                        MAX_MANIFEST_BYTES)


def recorded_manifest(path):
    """The manifest of ``path``; ManifestError when there is none or it is refused."""
    manifest, refused = read_manifest(path)
    if manifest is None:
        raise ManifestError(refused[0] if refused else '%s holds no manifest' % os.path.join(path, MANIFEST_FILE))
    return manifest


def _int(value, default=0):
    """Jinja's ``int``: the integer of ``value`` (through a float for ``"4.0"``), ``default`` when it has none."""
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return default


def as_bool(value):
    """Jinja's ``bool`` of a knob given on the command line (``"true"``, ``"yes"``, ``1``, ...)."""
    if isinstance(value, str):
        return value.strip().lower() in ('yes', 'on', '1', 'true', 'y', 't')
    return bool(value)


def experiment_name(var, when=None):
    """``<run name>_<channels>ch_<threads>th_<local time>``, a knob left to the library ``auto``:
    ``multinode_autoch_autoth_20261122_083000``."""
    def part(knob):
        value = var(knob)
        return 'auto' if value in UNSET else _int(value)
    return '%s_%sch_%sth_%s' % (var('trainops_run_name'), part('trainops_channels'), part('trainops_threads'),
                                time.strftime('%Y%m%d_%H%M%S', time.localtime(time.time() if when is None else when)))


def _code(var):
    git = dig(var('__trainops_git_ref', None), 'git') or {}
    check = var('trainops_git_check')
    return {
        'source': var('trainops_workspace_src'),
        'commit': git.get('commit'),
        'branch': git.get('branch'),
        'dirty': git.get('dirty') if git.get('is_repo') else None,
        'checked_on_nodes': check == 'always' or (check == 'auto' and not as_bool(var('trainops_sync_workspace'))),
    }


def _unique(values):
    found = []
    for value in values:
        if value not in found:
            found.append(value)
    return found


def launch_manifest(var, hostvars, ansible_version, when=None, launcher=None):
    """The manifest of a launch whose job started on every node (outcome ``running``): the run, its parameters, its
    master, code, every node's record (_launch_records.node_records), shared directories, launcher (``launcher``: what
    the launcher's start recorded, _launcher_steps.started) and attempt."""
    run_id = var('__trainops_run_id')
    nnodes = _int(var('__trainops_nnodes'))
    nproc = _int(var('trainops_nproc_per_node'))
    sync = as_bool(var('trainops_sync_workspace'))
    attempt = var('__trainops_attempt')
    workspace = var('__trainops_workspace_shares')
    network = var('trainops_training_network')
    return {
        'run_id': run_id,
        'experiment_dir': var('__trainops_experiment_dir'),
        'launched_at': stamp(when),
        'ansible_version': ansible_version,
        'parameters': var('__trainops_parameters'),
        'nnodes': nnodes,
        'world_size': nnodes * nproc,
        'master': {'host': var('__trainops_master_host'), 'addr': var('__trainops_master_addr'),
                   'port': _int(var('trainops_master_port'))},
        'code': _code(var),
        'nodes': _launch_records.node_records(var('__trainops_nodes'), hostvars, var('__trainops_order')['ranks'], run_id,
                                              nproc),
        'shared_dirs': {
            'node_root': var('__trainops_root_shares')['groups'],
            'workspace': workspace['groups'],
            'workspace_synced_through': _unique(workspace['primary'].values()) if sync else [],
        },
        'training_network': network if network else None,
        'launcher': launcher or {'name': var('trainops_launcher')},
        # the launch's attempts (trainops_retries): this one's number, the first's and the previous one's run ids (the
        # next one's, next, is added when it exists), and the checkpoint it resumed (null from scratch)
        'attempt': _int(attempt['number']),
        'first': attempt['first'],
        'previous': attempt['previous'],
        'resumed_from': var('__trainops_resumed_from'),
        # the nodes this attempt runs without, each with the spare node that took its node rank (by; null: left out,
        # the job goes on with fewer nodes, trainops_min_nodes), and the spare nodes not used yet
        'replaced': attempt['replaced'],
        'spares': attempt['spares'],
        'outcome': _outcomes.RUNNING,
    }


def launch_errors(hosts, hostvars):
    """``{node: why}`` of the nodes whose launch failed (their ``__trainops_launch_error``), in ``hosts``' order."""
    return host_facts(hosts, hostvars, '__trainops_launch_error')


def failed_manifest(recorded, var, errors, ansible_version, when=None):
    """The manifest of a launch that did not start on every node: ``recorded`` (what an earlier batch of failed nodes
    wrote, ``{}`` when nothing) with the run, outcome ``failed`` and ``launch_errors`` (``{node: why}``: the recorded
    ones, then ``errors`` over them)."""
    merged = dict(recorded.get('launch_errors') or {})
    merged.update(errors)
    attempt = var('__trainops_attempt')
    first = str(next(iter(merged.values()), ''))
    manifest = dict(recorded)
    manifest.update({
        'run_id': var('__trainops_run_id'),
        'experiment_dir': var('__trainops_experiment_dir'),
        'launched_at': recorded.get('launched_at') or stamp(when),
        'ansible_version': ansible_version,
        'parameters': var('__trainops_parameters'),
        'nnodes': _int(var('__trainops_nnodes')),
        'node_names': var('__trainops_nodes'),
        'attempt': _int(attempt['number']),
        'first': attempt['first'],
        'previous': attempt['previous'],
        'outcome': FAILED,
        'outcome_detail': 'not started: ' + truncate(first, 300),
        'launch_errors': merged,
    })
    return manifest


def _threshold(value):
    """The straggler threshold as a number (``-e`` gives a string); one that is none stays, for the check to name."""
    try:
        return None if value in UNSET else float(value)
    except (TypeError, ValueError):
        return value


def collect_inputs(var, hostvars, launcher=None, launcher_end=None):
    """What the collect (collect.yml) hands to report_experiment, from its ``trainops_collect_*`` variables and what
    each node's tasks registered: ``results`` (each node's final job, the collect action's query), ``verdicts`` (what
    the wait judged), ``missing_nodes`` (gone from the play), ``refused`` (what the collect refused to fetch, its
    ``collected`` plans), ``launcher_end`` (how the launcher ended the job, ``launcher_end`` for the run's ``launcher``
    record when it has its own tasks; else the batch script's word, stop.yml), ``straggler_threshold`` and ``attempt``
    (a launch's attempt, trainops_retries)."""
    nodes = list(var('trainops_collect_nodes'))
    play = list(var('ansible_play_hosts'))
    end = launcher_end if (launcher or {}).get('own_tasks') else (var('trainops_collect_batch_end', None) or None)
    return {
        'results': dict((node, dig(host_vars(hostvars, node), FINAL, 'job')) for node in nodes if node in play),
        'verdicts': dict((node, dig(host_vars(hostvars, node), '__trainops_waited', 'verdict') or {}) for node in nodes),
        'missing_nodes': [node for node in nodes if node not in play],
        # the job's nodes only: a host of the play outside them keeps what an earlier collect registered there (a
        # health check's measurement, an earlier attempt)
        'refused': [line for node in nodes if node in play for plan in dig(host_vars(hostvars, node), FINAL, 'collected') or []
                    for line in plan.get('refused') or []],
        'launcher_end': end or None,
        'straggler_threshold': _threshold(var('trainops_straggler_threshold', None)),
        'attempt': var('trainops_collect_attempt', None) or None,
    }


def follow_lines(var):
    """What the launch prints once its job runs: before it waits, the job, how the wait judges it, and the commands
    that come back to it (status, stop, logs), for this inventory and checkout or installed collection; a job that is
    not waited for (trainops_wait false), where it runs and the commands that follow it."""
    run_id, spares = var('__trainops_run_id'), var('__trainops_spares_arg')
    if not as_bool(var('trainops_wait', True)):
        return [
            'Job %s started on %s; not waiting (wait=false).' % (run_id, ', '.join(var('__trainops_nodes'))),
            'Status (collects when finished): ansible-playbook playbooks/status.yml -e run_id=%s%s' % (run_id, spares),
            'Stop:  ansible-playbook playbooks/stop.yml -e run_id=%s%s' % (run_id, spares),
            "Follow rank 0's lines: ansible-playbook playbooks/logs.yml -e run_id=%s%s -e rank=0 -e follow=true" % (
                run_id, spares),
        ]
    stall = var('trainops_stall_timeout')
    command = ' '.join(['ansible-playbook'] + ['-i %s' % source for source in var('ansible_inventory_sources')])
    args = '%s -e run_id=%s%s' % (var('__trainops_ext'), run_id, spares)
    playbook = '%s %s%%s%s' % (command, var('__trainops_pb'), args)
    return [
        'Job %s runs on %s node(s) x %s rank(s); progress every %s s. Outputs: %s' % (
            var('__trainops_run_id'), var('__trainops_nnodes'), var('trainops_nproc_per_node'),
            var('trainops_progress_interval'), var('__trainops_experiment_dir')),
        'Unreachable nodes get %s s (trainops_unreachable_grace); a node without new output for %s stalls the job '
        '(trainops_stall_timeout).' % (var('trainops_unreachable_grace'), '%s s' % stall if _int(stall) > 0 else '(off)'),
        'Ctrl-C ends only this wait; the job keeps running. Come back to it with:',
        '  status (collects it once it has ended): ' + playbook % 'status',
        '  stop:                                   ' + playbook % 'stop',
        "  one rank's lines, live:                 " + playbook % 'logs' + ' -e rank=0 -e follow=true',
    ]


MAX_TAIL_SHOWN = 15
"""The last lines of a failed node's log in the collect's failure."""


def collect_failure(report, var, hostvars):
    """Why the collect fails the play, or ``''``: the files it refused to write (first), else a job that did not
    succeed - its failed nodes, why each ended and its log's last lines - unless the collect does not fail
    (trainops_collect_fail false: a sweep's point, a health measurement) or the launch retries it."""
    run_id, path = var('trainops_collect_run_id'), var('trainops_collect_experiment_dir')
    refused = report.get('collect_refused') or []
    if refused:
        return ("Job %s: the collect refused %d file(s) that would have\nlanded outside their node's place in %s "
                "(nothing was written for them; the\nrest was collected). Look at what the job wrote on the node(s):\n"
                % (run_id, len(refused), path)) + ''.join('  %s\n' % line for line in refused)
    outcome = report.get('outcome')
    if (_outcomes.outcome_is(outcome, _outcomes.SUCCEEDED) or not as_bool(var('trainops_collect_fail', True))
            or dig(report, 'retry', 'decision') == 'retry'):
        return ''
    nodes, play = list(var('trainops_collect_nodes')), list(var('ansible_play_hosts'))
    lines = ['Job %s %s.' % (run_id, report.get('outcome_detail')), 'Logs and outputs of every node: %s' % path]
    attempt = var('trainops_collect_attempt', None) or {}
    if _int(attempt.get('retries', 0)) > 0 and 'retry' in report:
        lines.append('Retries: %s (%d attempt(s): %s)' % (report['retry']['reason'], len(report['attempts']),
                                                          ', '.join(row['run_id'] for row in report['attempts'])))
    for node in report.get('failed_nodes') or []:
        node_vars = host_vars(hostvars, node)
        why = 'unreachable at the end of the job'
        if node in play:
            why = str(node_vars.get('__trainops_run_error') or 'exit code %s' % dig(node_vars, FINAL, 'job', 'exit_code'))
            why = why.split(';', maxsplit=1)[0]
        lines.append('--- %s (node rank %s): %s' % (node, nodes.index(node) if node in nodes else '?', why))
        tail = dig(node_vars, FINAL, 'log_tail') or []
        lines += ['    %s' % line for line in list(tail)[-MAX_TAIL_SHOWN:]]
    return '\n'.join(lines) + '\n'


def stats(path, run_id, outcome, outcome_detail, failed_nodes, report=None):
    """The experiment as ansible-runner and CI read it (published with set_stats as ``trainops_experiment``)."""
    data = {'path': path, 'run_id': run_id, 'outcome': outcome, 'outcome_detail': outcome_detail,
            'failed_nodes': list(failed_nodes)}
    if report is not None:
        data.update(summary=report.get('summary'), attempts=report.get('attempts') or [], retry=report.get('retry'))
    return data
