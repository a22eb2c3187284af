# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The launcher's lifecycle as roles/job runs it (module_utils/_launcher_steps.py, the launcher action): the start and
the undo of each launcher, from the role's variables and the nodes' registered results."""

from __future__ import annotations

import json
import os

from ansible_collections.trainops.multinode.plugins.module_utils import _launcher_steps as steps
from ansible_collections.trainops.multinode.plugins.module_utils import _launchers

ROLE_VARS = {
    '__trainops_run_id': 'r1', '__trainops_abs_state_dir': '/n/state', 'trainops_node_id': '', '__trainops_nnodes': '2',
    'trainops_nproc_per_node': 2, '__trainops_rank': '1', 'trainops_master_port': '29500', 'trainops_rdzv_timeout': 60,
    'trainops_max_restarts': 0, 'trainops_stop_timeout': '30', '__trainops_master_addr': '10.0.0.1',
    'trainops_rdzv_backend': 'c10d', '__trainops_entrypoint': 'train.py', '__trainops_entry_args': ['--x'],
    'trainops_python': 'python3', 'trainops_command_prefix': [], 'trainops_container_engine': 'docker',
    'trainops_workspace_dir': '/w', '__trainops_env': {'NCCL_DEBUG': 'WARN'}, 'trainops_secret_env': {},
    '__trainops_module': False, '__trainops_profiled': False, 'trainops_replace': 'false', 'trainops_torchrun': '',
    'trainops_runtime': 'host', 'trainops_container_name': 'trainops-train', '__trainops_slurm_job_id': '42',
    'trainops_srun_wait': '300', 'trainops_srun_args': [], 'trainops_srun_start_timeout': '30',
    '__trainops_experiment_dir': '/e/r1', 'trainops_checkpoint_signal': '', 'trainops_checkpoint_signal_seconds': '0',
}


def context(launcher, hosts=None, play_hosts=('n0', 'n1'), failed_msg='', **extra):
    role_vars = dict(ROLE_VARS, trainops_launcher=launcher, **extra)
    hosts = hosts or {}

    def var(name):
        return role_vars[name]

    return steps.Context(var, lambda node, name: (hosts.get(node) or {}).get(name), ['n0', 'n1'], play_hosts, failed_msg)


def test_the_node_start_writes_the_run_and_starts_it_unless_the_launcher_defers_that():
    ssh = steps.node_start(context('ssh'))
    assert ssh['state'] == 'started' and ssh['launcher'] == 'ssh' and ssh['node_rank'] == 1 and ssh['nnodes'] == 2
    assert ssh['replace'] is False and ssh['module'] is False and 'torchrun' not in ssh and 'container' not in ssh
    assert ssh['state_dir'] == '/n/state' and ssh['run_id'] == 'r1' and ssh['env'] == {'NCCL_DEBUG': 'WARN'}
    assert steps.node_start(context('srun'))['state'] == 'prepared'
    contained = steps.node_start(context('ssh', trainops_runtime='container', trainops_container={'name': 'c1'},
                                         trainops_torchrun='/opt/torchrun', trainops_replace='yes'))
    assert contained['container'] == 'c1' and contained['torchrun'] == '/opt/torchrun' and contained['replace'] is True


def test_the_start_fails_for_a_node_whose_start_failed_or_that_left_the_play():
    hosts = {'n0': {'__trainops_started': {'failed': True, 'msg': 'torchrun: not found'}}, 'n1': {'__trainops_started': {}}}
    ssh = _launchers.LAUNCHERS['ssh']
    assert steps.start_failures(context('ssh', hosts), ssh) == {'n0': 'torchrun: not found'}
    assert steps.start_failures(context('ssh', hosts, play_hosts=['n0']), ssh) == {
        'n0': 'torchrun: not found', 'n1': 'could not be reached during the start'}
    srun = _launchers.LAUNCHERS['srun']
    assert steps.start_failures(context('srun', {'n0': {'__trainops_started': {}}, 'n1': {'__trainops_started': {}}},
                                        play_hosts=['n0']), srun) == {'n1': 'could not be reached'}


def test_a_deferred_start_runs_one_step_of_the_prepared_runs_and_checks_every_node_runs_it():
    hosts = {'n0': {'__trainops_started': {'step_command': {'run_dir': '/a'}}},
             'n1': {'__trainops_started': {'step_command': {'run_dir': '/b'}}, 'trainops_slurm_node_name': 'cn1'}}
    srun = _launchers.LAUNCHERS['srun']
    args = srun.start_args(context('srun', hosts))
    assert args['nodes'] == [{'run_dir': '/a', 'name': 'n0', 'rank': 0}, {'run_dir': '/b', 'name': 'cn1', 'rank': 1}]
    assert args['job_id'] == '42' and args['output'] == '/e/r1/srun.log' and 'checkpoint_signal' not in args
    assert args['wait_seconds'] == 300 and args['start_timeout'] == 30
    assert _launchers.LAUNCHERS['ssh'].start_args(context('ssh')) is None
    start = {'job_id': '42', 'step_id': '3', 'step_name': 'trainops-r1', 'pid': 77, 'output': '/e/r1/srun.log',
             'start_timeout': 30, 'argv': ['srun'], 'checkpoint_timer': None}
    assert srun.start_wait(start) == 60 and _launchers.LAUNCHERS['ssh'].start_wait(start) == 0
    running = {'n0': {'__trainops_started': {'job': {'status': 'running'}}},
               'n1': {'__trainops_started': {'job': {'status': 'prepared'}}}}
    not_running = steps.not_running(context('srun', running), srun)
    assert not_running == {'n1': 'not started'}
    assert srun.start_failure(start, not_running) == (
        "Slurm step 42.3 (trainops-r1) did not start the supervisor on n1 within 60 s (n1: not started). "
        "srun's output: /e/r1/srun.log")
    assert srun.start_record(start)['step'] == '42.3' and srun.start_record(start)['srun_pid'] == 77
    assert _launchers.LAUNCHERS['ssh'].start_record(start) == {'name': 'ssh'}
    assert steps.still_prepared({'job': {'status': 'prepared'}}) and not steps.still_prepared({'failed': True})


def test_once_started_the_launch_fails_where_the_launcher_does_not_run_the_job_else_records_the_launcher():
    start = {'job_id': '42', 'step_id': '3', 'step_name': 'trainops-r1', 'pid': 77, 'output': '/e/r1/srun.log',
             'start_timeout': 30}
    running = {'n0': {'__trainops_started': {'job': {'status': 'running'}}},
               'n1': {'__trainops_started': {'job': {'status': 'prepared'}}}}
    failure, record = steps.started(context('srun', running, __trainops_launch=start))
    assert failure.startswith('Slurm step 42.3 (trainops-r1) did not start the supervisor on n1 ') and record is None
    running['n1'] = running['n0']
    failure, record = steps.started(context('srun', running, __trainops_launch=start))
    assert failure == '' and record['step'] == '42.3'
    # a node's own start ran it: nothing to wait for, whatever the nodes' results say
    assert steps.started(context('ssh', {}, play_hosts=['n0'])) == ('', {'name': 'ssh'})


def test_the_undo_over_ssh_stops_where_the_job_did_not_start_everywhere_and_names_the_nodes_still_away():
    ssh = _launchers.LAUNCHERS['ssh']
    launch = {'__trainops_launch': {'not_started': {'n1': 'boom'}}, '__trainops_started': {}}
    ctx = context('ssh', **launch)
    launcher, not_started, todo = steps.undo_plan(ctx)
    assert launcher is ssh and not_started == {'n1': 'boom'} and todo
    assert not steps.undo_plan(context('ssh', __trainops_launch={'not_started': {}}))[2]
    # a spare node of the play skipped the start: it has nothing to undo
    assert not steps.undo_plan(context('srun', __trainops_started={'skipped': True}))[2]
    args = steps.undo_node(ctx, not_started, ssh)
    assert args['state'] == 'stopped' and 'signal' not in args and args['stop_detail'] == 'the job did not start on n1'
    away = steps.undo_node(ctx, not_started, ssh, node='n1')
    assert away['state_dir'] is None and away['node_id'] == ''
    assert ssh.undo_facts(ctx, not_started, [], None) == {
        '__trainops_undo_error': 'The job did not start on n1; it was stopped on every other node. n1: boom'}
    ctx = context('ssh', __trainops_undo_away={'results': [{'item': 'n1', 'unreachable': True}, {'item': 'n2'}]}, **launch)
    assert steps.still_away(ctx) == ['n1']
    assert ssh.undo_facts(ctx, not_started, ['n1'], None)['__trainops_undo_error'] == (
        'The job did not start on n1; it was stopped on every other node (not on n1, which cannot be reached: a torchrun '
        'that started there gives up after trainops_rdzv_timeout=60 s). n1: boom')


def test_the_undo_of_a_slurm_step_records_the_stop_cancels_the_step_then_stops_by_pids():
    srun = _launchers.LAUNCHERS['srun']
    ctx = context('srun', failed_msg='step failed', __trainops_started={'job': {}}, __trainops_launch={'pid': 9})
    launcher, not_started, todo = steps.undo_plan(ctx)
    assert launcher is srun and todo and not steps.undo_plan(context('srun'))[2]
    first = steps.undo_node(ctx, not_started, srun)
    assert first['signal'] is False and first['stop_reason'] == 'undo'
    assert 'signal' not in steps.undo_node(ctx, not_started, srun, after=True) and srun.undo_stops_after
    assert srun.undo_args(ctx, {'pid': 9}) == {'state': 'cancelled', 'job_id': '42', 'run_id': 'r1', 'srun_pid': 9}
    assert 'srun_pid' not in srun.undo_args(ctx, {'failed': True})
    assert srun.undo_facts(ctx, [], [], {'abandoned': {'cancelled': True}, 'step_id': '3'}) == {
        '__trainops_launch_cause': 'step failed', '__trainops_undo_note': 'Undone: Slurm step 42.3 cancelled.'}
    failed = srun.undo_facts(ctx, [], [], {'failed': True, 'msg': 'scancel: no'})['__trainops_undo_note']
    assert failed == ('The undo could not end the step: scancel: no. Check with: squeue --steps --jobs 42, and scancel '
                      'the step trainops-r1 if it is there.')
    assert srun.undo_facts(ctx, [], [], {})['__trainops_undo_note'] == ''


# --- a run's stop, status and end ------------------------------------------------------------------------------

def run_context(tmp_path, queried, manifest=None, **extra):
    experiments = tmp_path / 'experiments'
    (experiments / 'r1').mkdir(parents=True, exist_ok=True)
    if manifest is not None:
        (experiments / 'r1' / 'manifest.json').write_text(json.dumps(manifest))
    hosts = dict((host, {'__trainops_queried': result}) for host, result in queried.items())
    return context('ssh', hosts, trainops_experiments_dir=str(experiments), trainops_log_lines='20',
                   __trainops_state_dir='/n/state', trainops_run_id='', trainops_stop_checkpoint_seconds='0',
                   **extra)


def test_the_run_is_found_from_the_answers_and_its_manifest_read_in_python(tmp_path):
    queried = {'n0': {'job': {'run_id': 'r1', 'status': 'exited', 'exit_code': 0, 'pid': 5, 'node_rank': 0,
                              'started_at': '2026-01-01T00:00:00Z', 'launcher': {'name': 'ssh'}},
                      'log_tail': ['first', 'last line', '']},
               'n1': {'job': {'run_id': 'r1', 'status': 'running', 'node_rank': 1, 'launcher': {'name': 'ssh'}}}}
    ctx = run_context(tmp_path, queried, manifest={'outcome': 'running', 'nodes': [{'host': 'n0'}, {'host': 'n1'}]})
    run, problem = steps.find_run(ctx, ['n0', 'n1'], 'status')
    assert problem is None and run['run_id'] == 'r1' and run['nodes'] == ['n0', 'n1'] and run['recorded']
    assert run['launcher']['name'] == 'ssh' and not run['launcher']['own_tasks']
    assert run['collect'] is False  # n1 still runs
    assert steps.find_run(ctx, ['n0', 'n1'], 'stop')[0]['collect'] is True
    lines = steps.status_lines(ctx, run)
    assert lines[0].split() == ['node', 'rank', 'status', 'exit', 'pid', 'run:', 'last', 'log', 'line']
    assert lines[1] == 'n0              0  exited       0  5         r1: last line'
    assert lines[2] == 'n1              1  running      -  -         r1: '
    # a spare of the run that is not a host of the play: nothing is stopped or collected
    away = run_context(tmp_path, queried, manifest={'nodes': [{'host': 'n2'}, {'host': 'n1'}]})
    run, problem = steps.find_run(away, ['n0', 'n1'], 'stop')
    assert problem == ("Nothing stopped or collected: run r1 runs on n2 (its nodes: n2, n1), not a host of this play. "
                       "Give the spare nodes' group the launch was given: -e trainops_spare_nodes=<group>.")


def test_a_collected_run_is_collected_again_only_when_asked(tmp_path):
    queried = {'n0': {'job': {'run_id': 'r1', 'status': 'exited'}}, 'n1': {'job': {'run_id': 'r1', 'status': 'exited'}}}
    done = {'outcome': 'succeeded', 'nodes': [{'host': 'n0'}, {'host': 'n1'}]}
    assert steps.find_run(run_context(tmp_path, queried, manifest=done), ['n0', 'n1'], 'status')[0]['collect'] is False
    again = run_context(tmp_path, queried, manifest=done, recollect='true')
    assert steps.find_run(again, ['n0', 'n1'], 'status')[0]['collect'] is True
    assert steps.find_run(run_context(tmp_path, queried, collect=False), ['n0', 'n1'], 'stop')[0]['collect'] is False
    # a manifest that is a link is not followed (read within bounds, as the experiment's files are)
    experiments = tmp_path / 'experiments'
    (experiments / 'r1' / 'manifest.json').unlink()
    (tmp_path / 'elsewhere.json').write_text(json.dumps({'nodes': [{'host': 'n9'}]}))
    os.symlink(str(tmp_path / 'elsewhere.json'), str(experiments / 'r1' / 'manifest.json'))
    assert steps.read_manifest(str(experiments), 'r1') is None


def test_the_stop_by_pids_and_a_slurm_steps_own_stop(tmp_path):
    ctx = run_context(tmp_path, {}, trainops_stop_time_limit='')
    ctx.user = 'alice'
    run = {'run_id': 'r1', 'nodes': ['n0'], 'launcher': {'name': 'ssh', 'refused': None}}
    stop = steps.user_stop(ctx, run)
    assert stop['stop_reason'] == 'user' and stop['stop_detail'] == 'playbooks/stop.yml from alice on the controller'
    near = steps.user_stop(run_context(tmp_path, {}, trainops_stop_time_limit='2026-01-01T00:00:00'), run)
    assert near['stop_reason'] == 'timeout' and 'of the batch script near the time limit' in near['stop_detail']
    srun = _launchers.LAUNCHERS['srun']
    record = {'name': 'srun', 'run_id': 'r1', 'job_id': '42', 'step_id': '3', 'step': '42.3', 'step_name': 'trainops-r1',
              'owner_uid': 1001, 'refused': None, 'own_tasks': True}
    own = srun.stop_node(ctx, record, stop)
    assert own['signal'] is False and own['stop_detail'] == 'playbooks/stop.yml from alice on the controller (scancel 42.3)'
    assert srun.stop_args(ctx, record) == {'state': 'signalled', 'job_id': '42', 'step_id': '3', 'run_id': 'r1',
                                           'owner_uid': 1001}
    assert srun.stop_wait(ctx, record) == 60 and srun.stopped_args(ctx, record)['state'] == 'cancelled'
    refused = dict(record, refused='not the run owner\'s step', step=None)
    assert srun.stop_node(ctx, refused, stop) == stop and srun.stop_args(ctx, refused) is None
    assert steps.stop_refused({'launcher': refused}, None) == "not the run owner's step"
    assert steps.stop_refused({'launcher': record}, {'failed': True}) == 'the step could not be signalled'
    assert steps.stop_refused({'launcher': record}, {'skipped': True}) == ''
    ssh = _launchers.LAUNCHERS['ssh']
    assert ssh.stop_node(ctx, run['launcher'], stop) == stop and ssh.stop_args(ctx, {}) is None and not ssh.stop_wait(ctx, {})
    stopped = run_context(tmp_path, {})
    stopped.node_var = lambda node, name: {'__trainops_stopped': {'stopped_pids': [7, 8]}}.get(name)
    assert steps.stopped_lines(stopped, run, ['n0']) == ['n0: stopped pids [7, 8]']
    assert steps.stopped_lines(stopped, {'run_id': None}, ['n0', 'n1']) == ['No run to stop on n0, n1']


def test_a_slurm_steps_status_and_end():
    srun = _launchers.LAUNCHERS['srun']
    record = {'name': 'srun', 'run_id': 'r1', 'job_id': '42', 'step_id': '3', 'step': '42.3', 'step_name': 'trainops-r1',
              'owner_uid': 1001, 'refused': None, 'own_tasks': True}
    answer = {'step': {'state': 'RUNNING', 'exit_code': None, 'source': 'squeue'}, 'job': {'state': 'RUNNING'}}
    lines, stats = srun.status_report(record, answer)
    assert lines == ['Slurm step 42.3 (trainops-r1): RUNNING (from squeue)']
    assert stats['trainops_slurm_step']['state'] == 'RUNNING' and stats['trainops_slurm_step']['refused'] is None
    assert set(stats) <= set(steps.published()) and 'trainops_status' in steps.published()
    refused = dict(record, refused='contradicting records')
    lines, stats = srun.status_report(refused, None)
    assert lines == ['Slurm step not shown: contradicting records'] and stats['trainops_slurm_step']['state'] == 'UNKNOWN'
    assert srun.end_args(record)['end_wait'] == 20 and srun.end_args(refused) is None
    assert srun.end_answer(record, answer) == {'job_id': '42', 'step_id': '3', 'step': answer['step'],
                                               'job': answer['job'], 'refused': None}
    assert srun.end_answer(refused, None)['refused'] == 'contradicting records'
    ssh = _launchers.LAUNCHERS['ssh']
    assert ssh.status_args(record) is None and ssh.status_report(record, None) == ([], {}) and ssh.end_args({}) is None


def test_the_manifest_is_the_controllers_own_its_numbers_and_nesting_are_read_as_written(tmp_path):
    """A retried run's manifest nests deep and records nanosecond times: both are read (the bounds of node-written
    files are not the manifest's); a file that is too big, or not a regular file, is not."""
    deep = {'nodes': [{'host': 'n2'}], 'mtime_ns': 1764329000123456789}
    inner = deep
    for _level in range(40):
        inner['rows'] = [{}]
        inner = inner['rows'][0]
    (tmp_path / 'r1').mkdir()
    (tmp_path / 'r1' / 'manifest.json').write_text(json.dumps(deep))
    assert steps.read_manifest(str(tmp_path), 'r1')['mtime_ns'] == 1764329000123456789
    (tmp_path / 'r2').mkdir()
    (tmp_path / 'r2' / 'manifest.json').mkdir()
    assert steps.read_manifest(str(tmp_path), 'r2') is None and steps.read_manifest(str(tmp_path), 'r3') is None
    (tmp_path / 'r4').mkdir()
    (tmp_path / 'r4' / 'manifest.json').write_text('[1]')
    assert steps.read_manifest(str(tmp_path), 'r4') is None
