# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The resume action plugin (roles/job/tasks/resume.yml): the paths it derives from the role's variables, the module
runs it asks of the node (module checkpoint_carry, faked here: its own tests are test__resume.py), and the failure on
every node when no node has the run."""

from __future__ import annotations

import json

from unittest.mock import MagicMock

from ansible_collections.trainops.multinode.plugins.action.resume import ActionModule

from fake_task import make_action

STAT = {'isreg': True, 'path': '/n0/state/runs/r1/outputs/checkpoint.pt', 'size': 3, 'mtime': 1.0, 'age': 5.0,
        'identity': '1:2:3:4:5'}


def action(step, host, hostvars, **more):
    plugin, dummy = make_action(ActionModule, 'trainops.multinode.resume', {'step': step})
    plugin._templar = MagicMock()
    plugin._templar.template.side_effect = lambda value: value
    plugin._execute_module = MagicMock(return_value={'changed': True, 'dest': '/%s/new/outputs/checkpoint.pt' % host,
                                                     'checksum': 'ab' * 32, 'size': 3, 'method': 'copy'})
    task_vars = dict(inventory_hostname=host, hostvars=hostvars, __trainops_resume_from='r1',
                     __trainops_node_dir='/%s/state' % host, __trainops_output_dir='/%s/new/outputs' % host,
                     __trainops_nodes=['node0', 'spare'], __trainops_pass_config=True, trainops_ssh_mesh=False,
                     __trainops_resume_found=hostvars[host]['__trainops_resume_found'])
    task_vars.update(more)
    return plugin, task_vars


def test_the_node_with_the_newest_checkpoint_carries_it_and_reads_it_for_the_spare(tmp_path):
    (tmp_path / 'r1').mkdir()
    (tmp_path / 'r1' / 'manifest.json').write_text(json.dumps({'world_size': 2}))
    hostvars = {'node0': {'__trainops_resume_found': {'run': True, 'checkpoint': STAT}},
                'spare': {'__trainops_resume_found': {'run': False, 'checkpoint': {'isreg': False, 'path': '/s'}}}}
    plugin, task_vars = action('carry', 'node0', hostvars, __trainops_experiment_dir=str(tmp_path / 'r2'))
    got = plugin.run(task_vars=task_vars)
    assert (got['source'], got['receivers'], got['carried']['checksum']) == ('node0', ['spare'], 'ab' * 32)
    assert got['env'] == {'TRAINOPS_RESUME_FROM': '/node0/state/runs/r1/outputs', 'TRAINOPS_PREVIOUS_WORLD_SIZE': '2'}
    assert plugin._execute_module.call_args.kwargs['module_args'] == {
        'state': 'carried', 'run_dir': '/node0/state/runs/r1', 'output_dir': '/node0/new/outputs',
        'expect': '1:2:3:4:5', 'digest': True}
    plugin, task_vars = action('carry', 'spare', hostvars, __trainops_experiment_dir=str(tmp_path / 'r2'))
    got = plugin.run(task_vars=task_vars)
    assert got['carried'] is None and not plugin._execute_module.called
    assert got['env']['TRAINOPS_RESUME_FROM'] == '/spare/new/outputs' and got['args'] == ['--override', 'training.resume=true']


def test_every_node_fails_naming_the_run_when_no_node_has_it(tmp_path):
    hostvars = {'node0': {'__trainops_resume_found': {'run': False, 'checkpoint': {'isreg': False}}},
                'spare': {'__trainops_resume_found': {'run': False, 'checkpoint': {'isreg': False}}}}
    for host in ('node0', 'spare'):
        plugin, task_vars = action('carry', host, hostvars, __trainops_experiment_dir=str(tmp_path / 'r2'))
        got = plugin.run(task_vars=task_vars)
        assert got['failed'] and got['msg'].startswith(
            'trainops_resume_from=r1: no node has that run (looked on node0, spare in <state dir>/runs/r1, e.g. /%s/state/runs/r1).'
            % host)
        assert got['args'] == ['--override', 'training.resume=true'] and not plugin._execute_module.called


def test_inspect_looks_in_the_run_s_directory_and_a_failed_pull_is_a_warning():
    hostvars = {'node0': {'__trainops_resume_found': {}, 'ansible_host': '10.0.0.1',
                          '__trainops_resume': {'carried': {'dest': '/n0/new/checkpoint.pt', 'checksum': 'cd', 'size': 3}}},
                'spare': {'__trainops_resume_found': {}}}
    plugin, task_vars = action('inspect', 'spare', hostvars)
    plugin.run(task_vars=task_vars)
    assert plugin._execute_module.call_args.kwargs['module_args'] == {'run_dir': '/spare/state/runs/r1', 'digest': False}
    plugin, task_vars = action('pull', 'spare', hostvars, __trainops_resume={'source': 'node0'})
    plugin._execute_module.return_value = {'changed': False, 'pulled': False, 'error': 'ssh exited 255'}
    got = plugin.run(task_vars=task_vars)
    assert plugin._execute_module.call_args.kwargs['module_args'] == {
        'state': 'pulled', 'source': '10.0.0.1', 'source_path': '/n0/new/checkpoint.pt',
        'output_dir': '/spare/new/outputs', 'checksum': 'cd', 'size': 3}
    assert got['warnings'] == ['The checkpoint goes through the controller to spare: the copy from node to node failed '
                               '(spare: ssh exited 255).']
