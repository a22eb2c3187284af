# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The launcher's lifecycle as roles/job runs it (task file run_job.yml, through the launcher action,
plugins/action/launcher.py, and the experiment action's ``state=launched``): one generic flow over the run's launcher
(module_utils/_launchers.py), which never names one. Controller-side only.

The start, all nodes or none:

1. ``node_start`` (every node): the torchrun module writes the node's run, and starts it unless the launcher starts
   its supervisor itself (:attr:`_launchers.Launcher.deferred_start`: then ``state=prepared``) -- :func:`node_start`;
2. ``start`` (the controller, once): the nodes where the start failed or that left the play fail the launch before
   the launcher starts anything (:func:`start_failures`); then the launcher's own start, if it has one
   (:meth:`_launchers.Launcher.start_args`);
3. ``node_started`` (every node): a node waits until the launcher runs its supervisor
   (:meth:`_launchers.Launcher.start_wait` seconds; nothing to wait for when the node's start ran it);
4. the experiment action's ``state=launched`` (the controller, once): the nodes where the launcher did not run it
   fail the launch (:meth:`_launchers.Launcher.start_failure`); else the manifest's launcher record
   (:func:`started`).

The undo of a failed launch (run_job.yml's rescue): ``node_undo`` (every node, and delegated to the nodes that left the
play), ``undo`` (the controller: the launcher's own undo, and the messages), ``node_undo_after`` (every node, for a
launcher that stops the nodes' runs by their pids once its own undo ran).

A run's stop and status (stop.yml, status.yml) and its end (collect.yml): ``node_query`` (every host: the torchrun
module's query), ``run`` (the controller: the run, its nodes and its launcher -- :func:`find_run` --, and for status
where it stands -- :func:`status_lines`), then for a stop ``node_stop``, ``stop``, ``node_stopped`` and ``stopped``
(:meth:`_launchers.Launcher.stop_node` and the rest); ``end`` asks the launcher how the job ended.
"""

from __future__ import annotations

import json
import os
import stat

from ansible_collections.trainops.multinode.plugins.module_utils import _launch_records, _launchers, _outcomes

TRUE = ('1', 'true', 'yes', 'on', 'y', 't')
STARTED = '__trainops_started'
"""The node's registered start (node_start, then node_started)."""
LAUNCH = '__trainops_launch'
"""The controller's registered start (``start``): the nodes where the job did not start, the launcher's own start."""
AWAY = '__trainops_undo_away'
"""The registered undo of the nodes that left the play (run_job.yml's delegated ``node_undo``)."""
QUERIED = '__trainops_queried'
"""Every host's registered query (stop.yml, status.yml: ``node_query``)."""
RUN = '__trainops_run'
"""The registered run (``run``): its id, nodes, node ranks, launcher record, whether it is collected."""
STOPPED = '__trainops_stopped'
"""The node's registered stop (``node_stop``)."""
LAUNCHER_STOP = '__trainops_launcher_stop'
"""The registered launcher's own stop (``stop``)."""
STOP_LEFT = '__trainops_stop_left'
"""The node's registered end of the launcher's stop (``node_stopped``)."""
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
"""The most of a manifest.json the controller reads to find a run's nodes and outcome."""
TABLE = '%-12s %4s  %-8s %5s  %-8s  %s'
PUBLISHED = ('trainops_status', )
"""What status.yml publishes (set_stats data) for every launcher: the run's job on every node."""
MISSING = ("Nothing stopped or collected: run %s runs on %s (its nodes: %s), not a host of this play. Give the spare "
           "nodes' group the launch was given: -e trainops_spare_nodes=<group>.")


def boolean(value):
    """Ansible's ``| bool`` of a role variable (``-e replace=true`` is a string)."""
    return value if isinstance(value, bool) else str(value).strip().lower() in TRUE


class Context(object):
    """What a step reads of the play: ``var(name)`` a role variable of this host, templated (KeyError when it is not
    defined); ``node_var(node, name)`` a variable of another host (None when it has none); the launch's nodes and the
    hosts still in the play; ``failed_msg``: the message of the failure that got the play into the rescue."""

    def __init__(self, var, node_var, nodes, play_hosts, failed_msg='', user='?'):
        self.var = var
        self.node_var = node_var
        self.nodes = list(nodes or [])
        self.play_hosts = list(play_hosts or [])
        self.failed_msg = failed_msg or ''
        self.user = user or '?'

    def get(self, name, default=None):
        try:
            return self.var(name)
        except KeyError:
            return default

    @property
    def run_id(self):
        return self.var('__trainops_run_id')

    def launcher(self):
        """The launch's launcher (trainops_launcher; validate.yml refused an unknown one before any node)."""
        return _launchers.get(self.get('trainops_launcher')) or _launchers.LAUNCHERS[_launchers.DEFAULT]


def run_args(ctx, node=None):
    """The torchrun module's arguments that name this node's run (``node``: another node's, for a delegated undo)."""
    if node is None:
        return dict(state_dir=ctx.var('__trainops_abs_state_dir'), node_id=ctx.var('trainops_node_id'),
                    run_id=ctx.run_id)
    preflight = ctx.node_var(node, '__trainops_preflight') or {}
    return dict(state_dir=(preflight.get('paths') or {}).get('state_root'),
                node_id=ctx.node_var(node, 'trainops_node_id') or '', run_id=ctx.run_id)


def node_start(ctx):
    """The torchrun module's arguments that write (and, unless its launcher defers it, start) the node's run."""
    launcher = ctx.launcher()
    args = dict(run_args(ctx), state='prepared' if launcher.deferred_start else 'started', launcher=launcher.name)
    for option, name in (('nnodes', '__trainops_nnodes'), ('nproc_per_node', 'trainops_nproc_per_node'),
                         ('node_rank', '__trainops_rank'), ('master_port', 'trainops_master_port'),
                         ('rdzv_timeout', 'trainops_rdzv_timeout'), ('max_restarts', 'trainops_max_restarts'),
                         ('stop_timeout', 'trainops_stop_timeout')):
        args[option] = int(ctx.var(name))
    for option, name in (('master_addr', '__trainops_master_addr'), ('rdzv_backend', 'trainops_rdzv_backend'),
                         ('entrypoint', '__trainops_entrypoint'), ('entrypoint_args', '__trainops_entry_args'),
                         ('python', 'trainops_python'), ('command_prefix', 'trainops_command_prefix'),
                         ('container_engine', 'trainops_container_engine'), ('chdir', 'trainops_workspace_dir'),
                         ('env', '__trainops_env'), ('secret_env', 'trainops_secret_env')):
        args[option] = ctx.var(name)
    args['module'] = boolean(ctx.var('__trainops_module')) and not boolean(ctx.var('__trainops_profiled'))
    args['replace'] = boolean(ctx.var('trainops_replace'))
    if ctx.get('trainops_torchrun'):
        args['torchrun'] = ctx.var('trainops_torchrun')
    # (a launcher that defers the start with runtime=container is refused before any node is touched: validate.yml)
    if ctx.var('trainops_runtime') == 'container':
        args['container'] = (ctx.get('trainops_container') or {}).get('name') or ctx.var('trainops_container_name')
    return args


def _failed(result):
    return isinstance(result, dict) and bool(result.get('failed') or result.get('unreachable'))


def start_failures(ctx, launcher):
    """``{node: why}`` for the nodes (in the launch's order) where the node's start failed or that left the play: the
    launch fails before the launcher's own start, on every node (the rescue undoes what did start)."""
    play_hosts = set(ctx.play_hosts)
    why = {}
    for node in ctx.nodes:
        result = ctx.node_var(node, STARTED)
        if node not in play_hosts:
            why[node] = launcher.unreachable_why
        elif not isinstance(result, dict) or _failed(result):
            why[node] = str((result or {}).get('msg') or 'unknown error')
    return why


def not_running(ctx, launcher):
    """``{node: why}`` for the nodes where the launcher did not run the node's supervisor: one that left the play, or
    whose run is still prepared (or unknown: its query failed) -- the same rule as filter not_started."""
    play_hosts = set(ctx.play_hosts)
    why = {}
    for node in ctx.nodes:
        if node not in play_hosts:
            why[node] = launcher.unreachable_why
            continue
        result = ctx.node_var(node, STARTED) or {}
        job = result.get('job') if isinstance(result.get('job'), dict) else {}
        if (job.get('status') or _outcomes.STATUS_PREPARED) == _outcomes.STATUS_PREPARED:
            why[node] = _launch_records.truncate(result.get('msg') or 'not started', 200)
    return why


def started(ctx):
    """``(failure, record)`` once the launcher's start went through: why the launch fails when the launcher does not run
    the job on every node ('' when it does), and what the manifest keeps of the launcher's start (its ``launcher``)."""
    launcher = ctx.launcher()
    start = ctx.get(LAUNCH) or {}
    if launcher.start_wait(start):
        missing = not_running(ctx, launcher)
        if missing:
            return launcher.start_failure(start, missing), None
    return '', launcher.start_record(start)


def still_prepared(result):
    """Whether a node's query answers a run its launcher has not started yet (the wait goes on)."""
    job = (result or {}).get('job') if isinstance((result or {}).get('job'), dict) else {}
    return job.get('status') == _outcomes.STATUS_PREPARED


def undo_plan(ctx):
    """``(launcher, not_started, whether there is anything to undo)`` of a failed launch."""
    launcher = ctx.launcher()
    launch = ctx.get(LAUNCH) or {}
    not_started = dict(launch.get('not_started') or {}) if isinstance(launch, dict) else {}
    # a node's start that was skipped (a spare node of the play) started nothing
    start = ctx.get(STARTED)
    return launcher, not_started, launcher.undoes(isinstance(start, dict) and not start.get('skipped'), not_started)


def undo_node(ctx, not_started, launcher, node=None, after=False):
    """The torchrun module's arguments of a node's undo (``after``: the stop by pids once the launcher's own undo
    ran)."""
    args = dict(run_args(ctx, node), state='stopped', stop_timeout=int(ctx.var('trainops_stop_timeout')))
    args.update(launcher.undo_node(not_started))
    if after:
        args.pop('signal', None)
    return args


def still_away(ctx):
    """The nodes the delegated undo could still not reach."""
    away = ctx.get(AWAY) or {}
    return [item.get('item') for item in (away.get('results') or []) if isinstance(item, dict) and item.get('unreachable')]


# --- a run's stop, status and end ------------------------------------------------------------------------------

def selected_run(ctx):
    """The run asked for: ``-e run_id=...``, else trainops_run_id; '' for the latest."""
    selected = ctx.get('run_id', None)
    return str(ctx.get('trainops_run_id', '') if selected is None else selected)


def node_query(ctx, control):
    """The torchrun module's query of the node's run (the one asked for, else its latest)."""
    args = dict(state='query', state_dir=ctx.var('__trainops_state_dir'), node_id=ctx.var('trainops_node_id'),
                log_lines=int(ctx.var('trainops_log_lines')) if control == 'status' else 0)
    if selected_run(ctx):
        args['run_id'] = selected_run(ctx)
    return args


def read_manifest(experiments_dir, run_id):
    """The controller's manifest of the run, or None (none, unreadable, not a JSON object). The experiment module
    writes it (its numbers and nesting are its own, not a node's): read within a size bound, a regular file only, no
    symbolic link followed."""
    if not (experiments_dir and run_id):
        return None
    path = os.path.join(experiments_dir, run_id, 'manifest.json')
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NOFOLLOW', 0) | getattr(os, 'O_NONBLOCK', 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_MANIFEST_BYTES:
            return None
        data = os.read(fd, MAX_MANIFEST_BYTES)
    finally:
        os.close(fd)
    try:
        manifest = json.loads(data.decode('utf-8'))
    except (ValueError, RecursionError):
        return None
    return manifest if isinstance(manifest, dict) else None


def job_of(result):
    job = (result or {}).get('job') if isinstance(result, dict) else None
    return job if isinstance(job, dict) else {}


def find_run(ctx, hosts, control):
    """The run stop.yml and status.yml act on, its nodes (filter run_nodes' rule: _launch_records.run_nodes), its
    launcher (_launchers.run_launcher) and whether it is collected now: ``(run, problem)``."""
    jobs = dict((host, job_of(ctx.node_var(host, QUERIED))) for host in hosts)
    run_id = _launch_records.chosen_run(jobs, selected_run(ctx))
    experiments_dir = ctx.var('trainops_experiments_dir')
    manifest = read_manifest(experiments_dir, run_id)
    run = _launch_records.run_nodes(jobs, hosts, run_id, manifest)
    if run['missing']:
        return run, MISSING % (run['run_id'], ', '.join(run['missing']), ', '.join(run['nodes']))
    run['jobs'] = dict((node, jobs.get(node, {})) for node in run['nodes'])
    run['launcher'] = _launchers.run_launcher([run['jobs'][node] for node in run['nodes']])
    path = os.path.join(experiments_dir, run_id or '', 'manifest.json')
    collect = bool(run_id) and boolean(ctx.get('collect', True)) and os.path.isfile(path)
    if control == 'status':
        states = [run['jobs'][node].get('status') for node in run['nodes']]
        ended = not any(_outcomes.run_status_is(state, _outcomes.STATUS_RUNNING) for state in states)
        some = any(not _outcomes.run_status_is(state, _outcomes.STATUS_ABSENT) for state in states)
        # collected once: a finished job's manifest keeps its outcome and finished_at (recollect=true redoes it); a
        # launch whose wait was interrupted (Ctrl-C) is collected here, with its real end (module_utils/_outcomes.py)
        again = boolean(ctx.get('recollect', False)) or not _outcomes.outcome_collected(
            (manifest or {}).get('outcome') or _outcomes.RUNNING)
        collect = collect and ended and some and again
    run['collect'] = collect
    limit = ctx.get('trainops_stop_time_limit', '')
    # the batch job's time limit, as its batch script said (launcher=ssh under sbatch: _sbatch.batch_time_limit)
    run['batch_end'] = {'batch': limit} if limit else {}
    return run, None


def status_lines(ctx, run):
    """The job on every node of the run: a table, a line per node with its last log line."""
    lines = [TABLE % ('node', 'rank', 'status', 'exit', 'pid', 'run: last log line')]
    for node in run['nodes']:
        job = run['jobs'][node]
        tail = [line for line in ((ctx.node_var(node, QUERIED) or {}).get('log_tail') or []) if line]
        last = _launch_records.truncate(tail[-1], 100) if tail else ''
        lines.append(TABLE % (node, run['ranks'][node], job.get('status', '?'),
                              job.get('exit_code') if job.get('exit_code') is not None else '-', job.get('pid') or '-',
                              '%s: %s' % (job.get('run_id', '-'), last)))
    return lines


def user_stop(ctx, run):
    """The torchrun module's stop by the run's verified pids, as stop.yml asks for it: under sbatch near the job's time
    limit (the batch script, trainops_stop_time_limit), the checkpoint signal first, then the stop, reason timeout
    (docs/slurm.md, "Checkpoint signal and time limits"); else the user's stop."""
    near_limit = bool(ctx.get('trainops_stop_time_limit', ''))
    return dict(state='stopped', state_dir=ctx.var('__trainops_state_dir'), node_id=ctx.var('trainops_node_id'),
                run_id=run['run_id'], stop_timeout=int(ctx.var('trainops_stop_timeout')),
                checkpoint_seconds=int(ctx.var('trainops_stop_checkpoint_seconds')),
                stop_reason='timeout' if near_limit else 'user',
                stop_detail='playbooks/stop.yml %s on the controller' % (
                    'of the batch script near the time limit' if near_limit else 'from ' + ctx.user))


def stop_refused(run, launcher_stop):
    """Why the stop did not go through the launcher ('' when it did, or the launcher has no part): a refused record,
    or the launcher's own stop failed. The nodes' own torchrun is stopped by its verified pids all the same."""
    record = run.get('launcher') or {}
    if record.get('refused') is not None:
        return record['refused']
    if isinstance(launcher_stop, dict) and launcher_stop.get('failed'):
        return launcher_stop.get('msg') or 'the step could not be signalled'
    return ''


def stopped_lines(ctx, run, play_hosts):
    """What was stopped on each node of the run (the pids of its node's stop, or of the stop that followed the
    launcher's)."""
    if not run.get('run_id'):
        return ['No run to stop on %s' % ', '.join(play_hosts)]
    lines = []
    for node in run['nodes']:
        pids = []
        for name in (STOPPED, STOP_LEFT):
            result = ctx.node_var(node, name)
            if isinstance(result, dict) and result.get('stopped_pids'):
                pids = result['stopped_pids']
        lines.append('%s: stopped pids %s' % (node, list(pids)))
    return lines


def launcher_of(record):
    """The launcher of a run's record (_launchers.run_launcher's ``name``)."""
    return _launchers.get((record or {}).get('name')) or _launchers.LAUNCHERS[_launchers.DEFAULT]


def still_running(result):
    """Whether a node's query still answers a running run (the wait for the launcher's stop goes on)."""
    return _outcomes.run_status_is(job_of(result).get('status'), _outcomes.STATUS_RUNNING)


FINAL = '__trainops_final'
"""Every node's registered final query in collect.yml."""


def run_launcher_of(ctx, nodes):
    """The run's launcher record from the nodes' final queries in collect.yml (``nodes``: those in the play)."""
    return _launchers.run_launcher([job_of(ctx.node_var(node, FINAL)) for node in nodes])


def published():
    """Every name the launcher action publishes (set_stats data): status.yml's and each launcher's own."""
    return PUBLISHED + tuple(name for launcher in _launchers.LAUNCHERS.values() for name in launcher.published)
