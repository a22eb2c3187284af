# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The next_attempt action plugin (roles/job/tasks/next_attempt.yml): the role's variables it reads, the failures
gate's file, the reach check each node of the attempt runs where the master may have moved (module preflight, faked
here), its failure that keeps the attempt's experiment, and a retry's new experiment linked to the one before."""

from __future__ import annotations

import json

from unittest.mock import MagicMock

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.trainops.multinode.plugins.action.next_attempt import ActionModule

from fake_task import make_action

ATTEMPT = {'number': 1, 'first': 'run_a', 'previous': None, 'rows': [], 'resume_from': '', 'spares': ['spare0'],
           'replaced': []}


def action(args, **task_vars):
    plugin, dummy = make_action(ActionModule, 'trainops.multinode.next_attempt', args)
    plugin._display = MagicMock()
    plugin._execute_module = MagicMock(return_value={'changed': False, 'problems': []})
    plugin._templar = MagicMock()
    plugin._templar.template.side_effect = lambda value: value
    hostvars = dict((host, {}) for host in ('node0', 'node1', 'spare0'))
    base = dict(inventory_hostname='node0', hostvars=hostvars, __trainops_attempt=ATTEMPT, __trainops_run_id='run_a',
                __trainops_order={'nodes': ['node0', 'node1']}, __trainops_nodes=['node0', 'node1'],
                trainops_retries=1, trainops_exclude_after=2, trainops_min_nodes=0, trainops_spare_nodes='spares',
                ansible_inventory_sources=['/inv/hosts.yml'], ansible_play_hosts=['node0', 'node1', 'spare0'],
                trainops_master_port=29500, trainops_socket_ifname='auto', trainops_reach_timeout=20)
    base.update(task_vars)
    return plugin, base


def test_the_failures_gate_reads_the_experiments_directory_s_file_and_says_what_it_does(tmp_path):
    (tmp_path / 'node_failures.json').write_text(json.dumps({'version': 1, 'inventories': {'/inv/hosts.yml': {
        'node0': {'failures': 2, 'last': []}}}}))
    plugin, task_vars = action({'state': 'planned'}, trainops_experiments_dir=str(tmp_path))
    plan = plugin.run(task_vars=task_vars)
    assert not plan['retry'] and plan['differs'] and plan['leave'] == ['node0'] and plan['reach']
    assert plan['order']['nodes'] == ['spare0', 'node1'] and plan['order']['master'] == 'spare0'
    assert plan['attempt']['spares'] == [] and plan['attempt']['replaced'][0]['by'] == 'spare0'
    assert plugin._display.display.call_count == len(plan['lines']) > 0
    # node0 leaves: it checks nothing and says nothing more; on the moved master, spare0, every node of the attempt
    # connects to it
    assert 'reach_again' not in plan and not plugin._execute_module.called
    plugin, task_vars = action({'state': 'planned'}, trainops_experiments_dir=str(tmp_path), inventory_hostname='spare0')
    plan = plugin.run(task_vars=task_vars)
    assert not plugin._display.display.called and plan['reach_again'] == {'changed': False, 'problems': []}
    assert plugin._execute_module.call_args.kwargs['module_name'] == 'trainops.multinode.preflight'
    assert plugin._execute_module.call_args.kwargs['module_args'] == {
        'master_addr': 'spare0', 'socket_ifname': 'auto', 'reach_port': 29500, 'reach_timeout': 20,
        'fail_on_problems': False, 'reach_peers': 2}
    plugin, task_vars = action({'state': 'planned'}, trainops_experiments_dir=str(tmp_path), inventory_hostname='node1')
    plugin.run(task_vars=task_vars)
    assert 'reach_peers' not in plugin._execute_module.call_args.kwargs['module_args']
    # no reach check where the launch turns it off
    plugin, task_vars = action({'state': 'planned'}, trainops_experiments_dir=str(tmp_path), inventory_hostname='node1',
                               trainops_check_reachability=False)
    assert 'reach_again' not in plugin.run(task_vars=task_vars) and not plugin._execute_module.called
    # no spare left and trainops_min_nodes=0: nothing starts
    plugin, task_vars = action({'state': 'planned'}, trainops_experiments_dir=str(tmp_path),
                               __trainops_attempt=dict(ATTEMPT, spares=[]))
    stopped = plugin.run(task_vars=task_vars)
    assert stopped['failed'] and stopped['msg'].startswith('Not starting attempt 1: node0 failed 2 times')


def test_a_retry_plans_the_next_attempt_and_its_start_creates_and_links_its_experiment(tmp_path):
    first = tmp_path / 'run_a'
    first.mkdir()
    (first / 'manifest.json').write_text('{"run_id": "run_a"}')
    report = {'attempts': [{'run_id': 'run_a', 'outcome_detail': 'node1 exit code 1', 'reason': 'retried'}],
              'retry': {'decision': 'retry'}}
    plugin, task_vars = action({'state': 'planned'}, __trainops_report=report, __trainops_experiment_dir=str(first))
    plan = plugin.run(task_vars=task_vars)
    assert plan['retry'] and plan['attempt']['number'] == 2 and plan['attempt']['previous_dir'] == str(first)
    plugin, task_vars = action({'state': 'started'}, __trainops_nodes_plan=plan, __trainops_attempt=plan['attempt'],
                               __trainops_experiment={'name': 'run_a', 'path': str(first)},
                               __trainops_master_host='node0', __trainops_master_addr='10.0.0.1',
                               trainops_experiments_dir=str(tmp_path),
                               trainops_run_name='tiny', trainops_channels=None, trainops_threads=None)
    started = plugin.run(task_vars=task_vars)
    assert started['changed'] and started['name'].startswith('tiny_autoch_autoth_') and (tmp_path / started['name']).is_dir()
    assert json.loads((first / 'manifest.json').read_text())['next'] == started['name']
    assert plugin._display.display.call_args.args[0].startswith('Attempt 2 of at most 2: %s resumes run_a' % started['name'])


def test_a_node_that_does_not_reach_the_moved_master_fails_the_start_and_keeps_the_experiment():
    plan = {'retry': False, 'reach': True}
    experiment = {'name': 'run_a', 'path': '/e/run_a'}
    plugin, task_vars = action({'state': 'started'}, __trainops_nodes_plan=plan, __trainops_experiment=experiment,
                               __trainops_master_host='node1', __trainops_master_addr='10.0.0.2')
    task_vars['hostvars']['node0']['__trainops_nodes_plan'] = {'reach_again': {'problems': ['cannot connect to 10.0.0.2:29500']}}
    failed = plugin.run(task_vars=task_vars)
    assert failed['failed'] and failed['path'] == '/e/run_a' and failed['msg'] == (
        'Not starting attempt 1 on node0, node1 (master node1 at 10.0.0.2): cannot connect to 10.0.0.2:29500 (on node0)')
    task_vars['hostvars']['node0']['__trainops_nodes_plan'] = {'reach_again': {'problems': []}}
    assert plugin.run(task_vars=task_vars) == dict(experiment, changed=False)
    with pytest.raises(AnsibleActionFail, match='state must be one of planned, started'):
        action({'state': 'later'})[0].run(task_vars=task_vars)
