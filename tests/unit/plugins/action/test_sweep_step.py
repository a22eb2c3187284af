# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sweep_step action: each step of playbooks/sweep.yml reads the play's variables itself, on the controller."""

from __future__ import annotations

import json
import os

from unittest.mock import MagicMock

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.trainops.multinode.plugins.action.sweep_step import ActionModule
from ansible_collections.trainops.multinode.plugins.module_utils import _sweep, _sweep_play
from ansible_collections.trainops.multinode.tests.unit.plugins.action import fake_task

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
DEFAULTS = _sweep_play.role_defaults(os.path.join(ROOT, 'roles'))


def run(step, task_vars):
    action, connection = fake_task.make_action(ActionModule, 'trainops.multinode.sweep_step', {'step': step})
    action._execute_module = MagicMock(side_effect=AssertionError('sweep_step runs no module'))
    action._templar = Templar(loader=DataLoader(), variables=task_vars)
    result = action.run(task_vars=task_vars)
    assert not connection.exec_command.called
    return result


def node_vars(**given):
    return dict(DEFAULTS, inventory_hostname='node0', __trainops_allreduce_args=[], **given)


def test_settings_template_the_play_variables_and_hide_a_resumes_secrets(tmp_path, monkeypatch):
    # a variable of the play is a template until it is read (vars/main.yml, an inventory's {{ }})
    result = run('settings', node_vars(sweep={'threads': [256]}, trainops_run_name=trust_as_template("{{ 'mine' }}")))
    assert not result.get('failed') and result['settings']['run_name'] == 'mine' and result['vars'] == {}
    assert result['_ansible_no_log'] is False
    first = dict(result['settings'], secret_env=['HF_TOKEN'])
    path = _sweep.plan_sweep(str(tmp_path), 's', {'threads': [256]}, 'train', settings={'node0': first})[0]
    monkeypatch.setenv('HF_TOKEN', 'hf_secret')
    resumed = run('settings', node_vars(sweep_dir=path))
    assert resumed['vars']['trainops_secret_env'] == {'HF_TOKEN': 'hf_secret'} and resumed['_ansible_no_log'] is True


def points_vars(tmp_path, plans, **more):
    hostvars = dict((host, {'__trainops_sweep_settings': plan}) for host, plan in plans.items())
    (tmp_path / 'c.yaml').write_text('')
    params = {'channels': None, 'min_channels': None, 'threads': None, 'nproc_per_node': 1, 'config': 'c.yaml',
              'env': {}, 'overrides': [], 'workspace_src': str(tmp_path), 'sync_workspace': True}
    return node_vars(ansible_play_hosts=list(plans), hostvars=hostvars, __trainops_sweep_settings=plans['node0'],
                     __trainops_launch_params=params, **more)


def test_points_fail_once_for_every_nodes_problems_then_for_the_sweep(tmp_path):
    good = dict(error='', problems=[], grid={'channels': [28, 42]}, recorded=False, settings={}, sweep_dir='')
    bad = dict(good, problems=['overrides=["a=2"]: the sweep /s ran with overrides=["a=1"]'])
    result = run('points', points_vars(tmp_path, {'node0': bad, 'node1': bad}))
    assert result['failed'] and result['msg'] == 'Not resuming the sweep:\n' + bad['problems'][0]
    result = run('points', points_vars(tmp_path, {'node0': good, 'node1': good}, channels=28))
    assert result['failed'] and result['msg'].startswith(
        'Not starting the sweep:\nchannels: given both on its own (-e channels=...) and in the sweep')
    result = run('points', points_vars(tmp_path, {'node0': good, 'node1': good}))
    assert not result.get('failed') and [p['vars']['trainops_channels'] for p in result['points']] == [28, 42]


def write_manifest(experiment, **manifest):
    os.makedirs(experiment, exist_ok=True)
    with open(os.path.join(experiment, 'manifest.json'), 'w') as handle:
        json.dump(manifest, handle)


def test_a_sweep_planned_run_point_by_point_stopped_and_reported(tmp_path):
    good = dict(error='', problems=[], grid={'threads': [256, 512, 1024]}, recorded=False, sweep_dir='',
                settings={'config': 'c.yaml'}, name='s', workload='train', stop_on_failure=True)
    play = points_vars(tmp_path, {'node0': good})
    play['__trainops_sweep'] = run('points', play)
    play.update(trainops_experiments_dir=str(tmp_path / 'experiments'), __trainops_nodes=['node0'])
    planned = run('planned', play)
    assert planned['lines'][0].endswith(': 3 point(s) of train on 1 node(s)') and len(planned['todo']) == 3
    play['__trainops_sweep_record'] = planned
    play['hostvars']['node0'].update(__trainops_point_error='')
    play['ansible_play_hosts_all'] = ['node0']

    # point 1 succeeds: its manifest says so
    first = str(tmp_path / 'p1')
    write_manifest(first, outcome='succeeded')
    play.update(__trainops_point=planned['todo'][0], __trainops_experiment_dir=first)
    assert run('started', play)['point']['status'] == 'running'
    play['__trainops_point_record'] = done = run('finished', play)
    assert done['msg'] == 'point 1/3 threads=256: succeeded' and done['stop'] is False
    assert done['_ansible_verbose_always'] is True

    # point 2 fails before its manifest said more than running: the node's error is the detail; stop_on_failure
    second = str(tmp_path / 'p2')
    write_manifest(second, outcome='failed', outcome_detail='failed on node0 (node rank 0: exit code 1)')
    play.update(__trainops_point=planned['todo'][1], __trainops_experiment_dir=second)
    run('started', play)
    play['__trainops_point_record'] = stopped = run('finished', play)
    assert stopped['msg'] == 'point 2/3 threads=512: failed (failed on node0 (node rank 0: exit code 1))'
    assert stopped['stop'] is True

    # point 3 does not run; the report says the sweep stopped and names the failed point
    play['__trainops_point'] = planned['todo'][2]
    skipped = run('finished', play)
    assert skipped['stop'] is True and skipped['msg'].startswith('point 3/3 threads=1024: not run')
    play['__trainops_point_record'] = skipped
    report = run('reported', play)
    record = _sweep.read_sweep(planned['path'])
    assert record['outcome'] == 'stopped' and [p['status'] for p in record['points']] == ['done', 'done', 'pending']
    assert report['outcome'] == 'stopped' and report['lines'][1] == 'outcome : stopped'
    assert '  point 2 threads=512: failed: failed on node0 (node rank 0: exit code 1) (%s)' % second in report['failure']
    assert report['ansible_stats']['data']['trainops_sweep']['outcome'] == 'stopped'
    assert report['ansible_stats']['per_host'] is False


def test_a_point_whose_manifest_is_refused_or_missing_records_why(tmp_path):
    path = _sweep.plan_sweep(str(tmp_path), 's', {'threads': [256]}, 'train')[0]
    experiment = tmp_path / 'p1'
    experiment.mkdir()
    (experiment / 'manifest.json').write_text('{"outcome": "succeeded", ' + '[' * 100 + ']' * 100 + '}')
    point = dict(index=1, vars={'__trainops_wait_label': 'point 1/1 threads=256'})
    play = dict(__trainops_sweep_record={'path': path}, __trainops_point=point, __trainops_experiment_dir=str(experiment),
                __trainops_sweep_settings={'stop_on_failure': False}, ansible_play_hosts_all=['node0'],
                hostvars={'node0': {'__trainops_point_error': ''}})
    run('started', play)
    result = run('finished', play)
    assert result['stop'] is False and result['msg'].startswith('point 1/1 threads=256: failed (')
    assert 'manifest.json' in result['msg'] and 'nesting deeper' in result['msg']
    os.unlink(str(experiment / 'manifest.json'))
    play['hostvars']['node0']['__trainops_point_error'] = 'node0: cannot compute the environment'
    assert run('finished', play)['msg'] == 'point 1/1 threads=256: failed (node0: cannot compute the environment)'
