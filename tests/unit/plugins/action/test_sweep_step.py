# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sweep_step action: each step of playbooks/sweep.yml reads the play's variables itself, on the controller."""

from __future__ import annotations

import json
import os

from unittest.mock import MagicMock

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

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


def write_manifest(experiment, **manifest):
    os.makedirs(experiment, exist_ok=True)
    with open(os.path.join(experiment, 'manifest.json'), 'w') as handle:
        json.dump(manifest, handle)


def test_a_sweep_planned_run_point_by_point_stopped_and_reported(tmp_path):
    # the launch plan's knobs and nodes steps in a sweep (tests/unit/plugins/action/test_launch_plan.py)
    good = dict(error='', problems=[], grid={'threads': [256, 512, 1024]}, recorded=False, sweep_dir='',
                settings={'config': 'c.yaml'}, name='s', workload='train', stop_on_failure=True)
    plan = {'sweep': good}
    params = {'channels': None, 'min_channels': None, 'threads': None, 'nproc_per_node': 1, 'config': 'c.yaml',
              'env': {}, 'overrides': [], 'workspace_src': str(tmp_path), 'sync_workspace': True}
    (tmp_path / 'c.yaml').write_text('')
    dummy, points = _sweep_play.points(params, good['grid'], [])
    play = node_vars(ansible_play_hosts=['node0'], hostvars={'node0': {'__trainops_plan_knobs': plan}},
                     __trainops_plan_knobs=plan, __trainops_plan={'points': points})
    play.update(trainops_experiments_dir=str(tmp_path / 'experiments'), __trainops_nodes=['node0'])
    planned = run('planned', play)
    assert planned['msg'][0].endswith(': 3 point(s) of train on 1 node(s)') and planned['todo'] == [1, 2, 3]
    assert planned['_ansible_verbose_always'] is True
    todo = [p for p in points if p['index'] in planned['todo']]
    play['__trainops_sweep_record'] = planned
    play['hostvars']['node0'].update(__trainops_point_error='')
    play['ansible_play_hosts_all'] = ['node0']

    # point 1 succeeds: its manifest says so
    first = str(tmp_path / 'p1')
    write_manifest(first, outcome='succeeded')
    play.update(__trainops_point=todo[0], __trainops_experiment_dir=first)
    assert run('started', play)['point']['status'] == 'running'
    play['__trainops_point_record'] = done = run('finished', play)
    assert done['msg'] == 'point 1/3 threads=256: succeeded' and done['stop'] is False
    assert done['_ansible_verbose_always'] is True

    # point 2 fails before its manifest said more than running: the node's error is the detail; stop_on_failure
    second = str(tmp_path / 'p2')
    write_manifest(second, outcome='failed', outcome_detail='failed on node0 (node rank 0: exit code 1)')
    play.update(__trainops_point=todo[1], __trainops_experiment_dir=second)
    run('started', play)
    play['__trainops_point_record'] = stopped = run('finished', play)
    assert stopped['msg'] == 'point 2/3 threads=512: failed (failed on node0 (node rank 0: exit code 1))'
    assert stopped['stop'] is True

    # point 3 does not run; the report says the sweep stopped and names the failed point
    play['__trainops_point'] = todo[2]
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
                __trainops_plan_knobs={'sweep': {'stop_on_failure': False}}, ansible_play_hosts_all=['node0'],
                hostvars={'node0': {'__trainops_point_error': ''}})
    run('started', play)
    result = run('finished', play)
    assert result['stop'] is False and result['msg'].startswith('point 1/1 threads=256: failed (')
    assert 'manifest.json' in result['msg'] and 'nesting deeper' in result['msg']
    os.unlink(str(experiment / 'manifest.json'))
    play['hostvars']['node0']['__trainops_point_error'] = 'node0: cannot compute the environment'
    assert run('finished', play)['msg'] == 'point 1/1 threads=256: failed (node0: cannot compute the environment)'
