# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The launcher's lifecycle as roles/job runs it (module_utils/_launcher_steps.py, the launcher action): the start and
the undo of each launcher, from the role's variables and the nodes' registered results."""

from __future__ import annotations

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


def test_the_undo_over_ssh_stops_where_the_job_did_not_start_everywhere_and_names_the_nodes_still_away():
    ssh = _launchers.LAUNCHERS['ssh']
    launch = {'__trainops_launch': {'not_started': {'n1': 'boom'}}, '__trainops_started': {}}
    ctx = context('ssh', **launch)
    launcher, not_started, todo = steps.undo_plan(ctx)
    assert launcher is ssh and not_started == {'n1': 'boom'} and todo
    assert not steps.undo_plan(context('ssh', __trainops_launch={'not_started': {}}))[2]
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
