# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The launch_plan action in a sweep (roles/job/tasks/sweep.yml imports validate.yml with __trainops_sweeping): its
knobs step works out each node's launch settings first (a resume's from sweep.json), its nodes step checks the sweep
and works out the points; and the preflight step's directories to mark (checks.yml)."""

from __future__ import annotations

import os

from unittest.mock import MagicMock

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.trainops.multinode.plugins.action.launch_plan import ActionModule
from ansible_collections.trainops.multinode.plugins.module_utils import _launch_plan, _sweep, _sweep_play
from ansible_collections.trainops.multinode.tests.unit.plugins.action import fake_task

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
DEFAULTS = _sweep_play.role_defaults(os.path.join(ROOT, 'roles'))


def run(step, task_vars, module_result=None):
    action, connection = fake_task.make_action(ActionModule, 'trainops.multinode.launch_plan', {'step': step})
    action._execute_module = MagicMock(return_value=module_result,
                                       side_effect=None if module_result else AssertionError('no module here'))
    action._templar = Templar(loader=DataLoader(), variables=task_vars)
    result = action.run(task_vars=task_vars)
    assert not connection.exec_command.called
    return result


def node_vars(**given):
    return dict(dict(DEFAULTS, inventory_hostname='node0', __trainops_allreduce_args=[], __trainops_sweeping=True,
                     trainops_workspace_src=os.path.join(ROOT, 'files', 'workspace')), **given)


def test_the_knobs_step_of_a_sweep_sets_its_settings_templated_and_hides_a_resumes_secrets(tmp_path, monkeypatch):
    # a variable of the play is a template until it is read (vars/main.yml, an inventory's {{ }})
    result = run('knobs', node_vars(sweep={'threads': [256]}, trainops_run_name=trust_as_template("{{ 'mine' }}")))
    assert not result.get('failed') and result['sweep']['settings']['run_name'] == 'mine'
    assert 'vars' not in result['sweep'] and result['launch_problems'] == []
    assert result['_ansible_no_log'] is False and 'trainops_secret_env' not in result['changed']
    first = dict(result['sweep']['settings'], secret_env=['HF_TOKEN'], nproc_per_node=3)
    path = _sweep.plan_sweep(str(tmp_path), 's', {'threads': [256]}, 'train', settings={'node0': first})[0]
    monkeypatch.setenv('HF_TOKEN', 'hf_secret')
    resumed = run('knobs', node_vars(sweep_dir=path))
    assert resumed['changed']['trainops_secret_env'] == {'HF_TOKEN': 'hf_secret'} and resumed['_ansible_no_log'] is True
    # the recorded settings are read as set: the knobs step sees the resume's nproc, a short knob still wins
    assert resumed['changed']['trainops_nproc_per_node'] == 3 and resumed['knobs']['nproc_per_node'] == 3
    assert run('knobs', node_vars(sweep_dir=path, nproc=2))['changed']['trainops_nproc_per_node'] == 2
    # an allreduce sweep runs the benchmark
    bench = run('knobs', node_vars(sweep={'threads': [256]}, workload='allreduce'))
    assert bench['changed']['trainops_script'] == 'allreduce_bench.py' and bench['sweep']['workload'] == 'allreduce'


def test_the_knobs_step_of_a_launch_has_no_sweep():
    result = run('knobs', node_vars(__trainops_sweeping=False, sweep={'threads': [256]}))
    assert 'sweep' not in result and result['changed'] == {} and result['_ansible_no_log'] is False


def nodes_vars(tmp_path, plans, **more):
    hostvars = dict((host, {_launch_plan.KNOBS_RESULT: {'launch_problems': [], 'sweep': plan}}) for host, plan in plans.items())
    (tmp_path / 'c.yaml').write_text('')
    params = {'channels': None, 'min_channels': None, 'threads': None, 'nproc_per_node': 1, 'config': 'c.yaml',
              'env': {}, 'overrides': [], 'workspace_src': str(tmp_path), 'sync_workspace': True}
    return node_vars(ansible_play_hosts=list(plans), ansible_play_hosts_all=list(plans), hostvars=hostvars,
                     groups={'trainops_nodes': list(plans)}, __trainops_launch_params=params,
                     **dict({_launch_plan.KNOBS_RESULT: hostvars['node0'][_launch_plan.KNOBS_RESULT]}, **more))


def test_the_nodes_step_of_a_sweep_fails_once_for_every_nodes_problems_then_for_the_sweep(tmp_path):
    good = dict(error='', problems=[], grid={'channels': [28, 42]}, recorded=False, settings={}, sweep_dir='')
    bad = dict(good, problems=['overrides=["a=2"]: the sweep /s ran with overrides=["a=1"]'])
    result = run('nodes', nodes_vars(tmp_path, {'node0': bad, 'node1': bad}))
    assert result['failed'] and result['msg'] == 'Not resuming the sweep:\n' + bad['problems'][0]
    result = run('nodes', nodes_vars(tmp_path, {'node0': good, 'node1': good}, channels=28))
    assert result['failed'] and result['msg'].startswith(
        'Not starting the sweep:\nchannels: given both on its own (-e channels=...) and in the sweep')
    result = run('nodes', nodes_vars(tmp_path, {'node0': good, 'node1': good}))
    assert not result.get('failed') and [p['vars']['trainops_channels'] for p in result['points']] == [28, 42]
    assert result['order']['nodes'] == ['node0', 'node1']
    # the launch's problems come first
    launch = nodes_vars(tmp_path, {'node0': bad, 'node1': bad})
    launch['hostvars']['node1'][_launch_plan.KNOBS_RESULT]['launch_problems'] = ['master_port=80: not allowed']
    assert run('nodes', launch)['msg'] == 'master_port=80: not allowed (on node1)'


def test_the_preflight_step_names_the_directories_to_mark():
    paths = {'state_root': '/h/.trainops/state', 'state_root_token': None, 'workspace_dir': '/h/ws', 'workspace_token': 't'}
    found = run('preflight', node_vars(__trainops_rank=0, __trainops_master_addr='127.0.0.1', __trainops_state_dir='/s',
                                       __trainops_nodes=['node0'], __trainops_module=''), {'paths': paths})
    assert found['unmarked'] == ['/h/.trainops/state']
    assert run('preflight', node_vars(__trainops_rank=0, __trainops_master_addr='127.0.0.1', __trainops_state_dir='/s',
                                      __trainops_nodes=['node0'], __trainops_module=''),
               {'paths': dict(paths, workspace_token='')})['unmarked'] == ['/h/.trainops/state', '/h/ws']
