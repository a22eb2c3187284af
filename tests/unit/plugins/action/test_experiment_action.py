# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The experiment action alone writes manifest.json: from the run's variables (launched), a launch that did not start
(failed) and the collect (collected), each reading the variables itself."""

from __future__ import annotations

import json

from unittest.mock import MagicMock

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.trainops.multinode.plugins.action.experiment import ActionModule
from ansible_collections.trainops.multinode.tests.unit.plugins.action import fake_task
from ansible_collections.trainops.multinode.tests.unit.plugins.module_utils.test__experiment_manifest import (
    HOSTVARS,
    run_vars,
)


def run(args, task_vars, check_mode=False):
    action, connection = fake_task.make_action(ActionModule, 'trainops.multinode.experiment', args, transport='local',
                                               check_mode=check_mode)
    action._execute_module = MagicMock(side_effect=AssertionError('the experiment action runs no module here'))
    action._templar = Templar(loader=DataLoader(), variables=task_vars)
    result = action.run(task_vars=task_vars)
    assert not connection.exec_command.called
    return result


@pytest.fixture
def exp(tmp_path):
    """An experiment directory below the test's own, never beside other tests' (their experiments are scanned)."""
    path = tmp_path / 'exp'
    path.mkdir()
    return path


def launch_vars(exp, **overrides):
    variables = run_vars(__trainops_experiment_dir=str(exp), ansible_play_hosts=['node0', 'node1'],
                         ansible_play_hosts_all=['node0', 'node1'], hostvars=dict(HOSTVARS),
                         # a lazy variable of vars/main.yml: templated once, here
                         __trainops_nnodes=trust_as_template('{{ __trainops_order.nodes | length }}'))
    variables.update(overrides)
    return variables


def manifest_of(exp):
    return json.loads((exp / 'manifest.json').read_text())


def test_created_names_the_experiment_from_the_run(exp):
    result = run({'state': 'created'}, launch_vars(exp, trainops_experiments_dir=str(exp / 'exps')))
    assert not result.get('failed'), result
    assert result['name'].startswith('multinode_42ch_autoth_') and result['path'].startswith(str(exp / 'exps'))


def test_launched_writes_the_manifest_and_shows_the_lines_to_follow(exp):
    result = run({'state': 'launched'}, launch_vars(exp))
    assert not result.get('failed'), result
    written = manifest_of(exp)
    assert written['outcome'] == 'running' and written['nnodes'] == 2 and written['world_size'] == 4
    assert written['nodes'][0]['pid'] == 11 and result['run_id'] == 'run1' == written['run_id']
    assert written['launcher'] == {'name': 'ssh'}
    # shown as a debug task's lines are; the manifest itself is not dumped on the screen
    assert result['msg'][0].startswith('Job run1 runs on 2 node(s) x 2 rank(s)') and result['_ansible_verbose_always']
    assert 'ansible_stats' not in result and 'manifest' not in result


def test_launched_fails_where_the_launcher_does_not_run_the_job_and_writes_nothing(exp):
    start = {'job_id': '42', 'step_id': '3', 'step_name': 'trainops-run1', 'pid': 77, 'output': '/e/srun.log',
             'start_timeout': 30}
    hostvars = dict(HOSTVARS, node0=dict(HOSTVARS['node0'], __trainops_started={'job': {'status': 'running'}}),
                    node1=dict(HOSTVARS['node1'], __trainops_started={'job': {'status': 'prepared'}}))
    result = run({'state': 'launched'}, launch_vars(exp, hostvars=hostvars, trainops_launcher='srun',
                                                    __trainops_launch=start))
    assert result['failed'] and 'did not start the supervisor on node1 within 60 s' in result['msg'], result
    assert not (exp / 'manifest.json').exists()


def test_launched_names_a_variable_the_role_did_not_set(exp):
    variables = launch_vars(exp)
    del variables['__trainops_master_addr']
    result = run({'state': 'launched'}, variables)
    assert result['failed'] and '__trainops_master_addr is not defined' in result['msg']
    assert not (exp / 'manifest.json').exists()


def test_failed_merges_each_batch_and_publishes_the_experiment(exp):
    hostvars = dict(HOSTVARS, node0={'__trainops_launch_error': 'node0: no GPU'}, node1={})
    first = run({'state': 'failed'}, launch_vars(exp, hostvars=hostvars))
    assert not first.get('failed'), first
    assert first['ansible_stats'] == {'per_host': False, 'aggregate': False, 'data': {'trainops_experiment': {
        'path': str(exp), 'run_id': 'run1', 'outcome': 'failed', 'outcome_detail': 'not started: node0: no GPU',
        'failed_nodes': ['node0']}}}
    hostvars = dict(HOSTVARS, node0={}, node1={'__trainops_launch_error': 'node1: start failed'})
    second = run({'state': 'failed'}, launch_vars(exp, hostvars=hostvars, __trainops_publish=False))
    assert 'ansible_stats' not in second
    written = manifest_of(exp)
    assert written['launch_errors'] == {'node0': 'node0: no GPU', 'node1': 'node1: start failed'}
    assert written['outcome'] == 'failed' and written['outcome_detail'] == 'not started: node0: no GPU'


def test_failed_refuses_a_manifest_that_breaks_a_bound(exp):
    (exp / 'manifest.json').write_text('[]')
    result = run({'state': 'failed'}, launch_vars(exp))
    assert result['failed'] and 'not a JSON object' in result['msg']


def collect_vars(exp, hostvars, **overrides):
    variables = {'trainops_collect_experiment_dir': str(exp), 'trainops_collect_run_id': 'run1',
                 'trainops_collect_nodes': ['node0', 'node1'], 'ansible_play_hosts': ['node0', 'node1'],
                 'trainops_straggler_threshold': 0.15, 'hostvars': hostvars}
    variables.update(overrides)
    return variables


def test_collected_reads_the_manifest_the_launch_wrote_and_judges_the_job(exp):
    run({'state': 'launched'}, launch_vars(exp))
    hostvars = {'node0': {'__trainops_final': {'job': {'exit_code': 0, 'status': 'exited'}}},
                'node1': {'__trainops_final': {'job': {'exit_code': 1, 'status': 'exited'}, 'log_tail': ['Boom']},
                          '__trainops_run_error': 'exit code 1'}}
    result = run({'state': 'collected'}, collect_vars(exp, hostvars))
    assert not result.get('failed'), result
    written = manifest_of(exp)
    assert written['outcome'] == 'failed' == result['outcome'] and written['finished_at'] and written['nodes'][1]['pid'] == 12
    assert result['shown'][0] == 'experiment : %s' % exp and result['shown'][1:] == result['table']
    assert result['failure'].startswith('Job run1 ') and '--- node1 (node rank 1): exit code 1\n    Boom\n' in result['failure']
    data = result['ansible_stats']['data']['trainops_experiment']
    assert (data['outcome'], data['failed_nodes'], data['retry']) == ('failed', ['node1'], None)


def test_collected_without_a_manifest_fails_saying_so(exp):
    result = run({'state': 'collected'}, collect_vars(exp, {}))
    assert result['failed'] and 'holds no manifest' in result['msg']


def test_the_module_refuses_the_states_that_read_the_play():
    from ansible_collections.trainops.multinode.plugins.module_utils._experiment import ExperimentError
    from ansible_collections.trainops.multinode.plugins.module_utils._experiment_task import run as module_run
    try:
        module_run({'state': 'launched'})
    except ExperimentError as exc:
        assert 'run it on the controller' in str(exc)
    else:
        raise AssertionError('state=launched ran without the play')


def test_collected_asks_the_run_s_launcher_how_the_job_ended_on_the_controller(exp):
    run({'state': 'launched'}, launch_vars(exp))
    step = {'run_id': 'r1', 'status': 'exited', 'exit_code': 0, 'owner_uid': 0,
            'launcher': {'name': 'srun', 'job_id': '7', 'step_id': '2', 'step': '7.2'}}
    hostvars = {'node0': {'__trainops_final': {'job': step}}, 'node1': {'__trainops_final': {'job': step}}}
    answer = {'step': {'state': 'TIMEOUT', 'exit_code': None, 'source': 'sacct'}, 'job': {'state': 'TIMEOUT'}}
    action, dummy = fake_task.make_action(ActionModule, 'trainops.multinode.experiment', {'state': 'collected'},
                                          transport='local')
    action._execute_module = MagicMock(return_value=answer)
    action._templar = Templar(loader=DataLoader(), variables=collect_vars(exp, hostvars))
    result = action.run(task_vars=collect_vars(exp, hostvars))
    assert action._execute_module.call_args.kwargs['module_name'] == 'trainops.multinode.srun_step'
    assert action._execute_module.call_args.kwargs['module_args']['end_wait'] == 20
    assert result['outcome'] == 'timed_out', result
    assert manifest_of(exp)['slurm_end']['step']['state'] == 'TIMEOUT'
    action._execute_module = MagicMock(return_value={'failed': True, 'msg': 'sacct: not found'})
    failed = action.run(task_vars=collect_vars(exp, hostvars))
    assert failed['failed'] and failed['msg'] == 'sacct: not found'
