# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The health_verdict action plugin: its first step on each node (the nodes to check, the settings checked before the
node is touched, the launch's facts kept, the node's state read), then the last measurement added, health.json
written, the verdict published (the health check) or the attempt's nodes worked out (the check before an attempt),
and why the play stops. The rules: test__health.py, test__retries.py."""

from __future__ import annotations

import json

import pytest

from unittest.mock import MagicMock

from ansible.errors import AnsibleActionFail

from ansible_collections.trainops.multinode.plugins.action.health_verdict import ActionModule
from ansible_collections.trainops.multinode.plugins.filter.health_search import read_measurement
from ansible_collections.trainops.multinode.plugins.module_utils import _health

from fake_task import make_action

CPU = {'gpus': 'none', 'rdma': 'none', 'problems': [], 'warnings': []}


def make(args, check_mode=False):
    plugin, dummy = make_action(ActionModule, 'trainops.multinode.health_verdict', args, check_mode=check_mode)
    plugin._templar = MagicMock(template=lambda value: value)
    plugin._display = MagicMock()
    plugin._execute_module = MagicMock(return_value={'changed': False, 'health': CPU})
    return plugin


def action(args, **task_vars):
    return make(args).run(task_vars=task_vars)


def measured_pair(tmp_path, outcome):
    """A check of two nodes whose one group (the pair) ran and left ``outcome`` in its manifest."""
    state = _health.search_advance(_health.search_start(['n0', 'n1'], 'n0', _health.settings(None, 0.5, 8, 30)))
    run = tmp_path / 'step01_2nodes'
    (run / 'outputs' / 'n0').mkdir(parents=True, exist_ok=True)
    (run / 'manifest.json').write_text(json.dumps({'outcome': outcome, 'nodes': [{'host': 'n0', 'ranks': [0]}]}))
    (run / 'outputs' / 'n0' / 'allreduce.json').write_text(json.dumps({'avg_busbw_gbps': 2.0, 'results': [{'time_us': 5.0}]}))
    # the loop's last step added it
    state = _health.search_advance(state, read_measurement(['n0', 'n1'], str(run), ''))
    hostvars = {'n0': {'__trainops_health_check': {'health': CPU}}, 'n1': {'__trainops_health_check': {'health': CPU}}}
    return dict(__trainops_health=state, __trainops_health_dir={'path': str(tmp_path)}, hostvars=hostvars,
                ansible_play_hosts=['n0', 'n1'])


def test_the_check_s_verdict_is_written_printed_and_published(tmp_path):
    result = action({}, **measured_pair(tmp_path, 'succeeded'))
    assert result['verdict'] == 'healthy' and result['healthy'] and result['file'] == str(tmp_path / 'health.json')
    written = json.loads((tmp_path / 'health.json').read_text())
    assert [g['busbw_gbps'] for g in written['groups']] == [2.0] and written['search']['done']
    assert result['msg'][-2:] == ['', 'written: ' + result['file']] and 'verdict: healthy' in result['msg']
    assert result['failure'] == ''
    assert result['ansible_stats'] == {'aggregate': False, 'per_host': False, 'data': {'trainops_health': {
        'verdict': 'healthy', 'suspects': [], 'file': result['file']}}}
    assert result['_ansible_verbose_always'] is True


def test_the_check_before_an_attempt_names_the_nodes_it_runs_on_or_starts_nothing(tmp_path):
    task_vars = measured_pair(tmp_path, 'failed')
    task_vars.update(__trainops_nodes=['n0', 'n1'], __trainops_health_spares=['s0'], __trainops_attempt={'number': 2},
                     trainops_min_nodes=0, trainops_spare_nodes='spares')
    # what each node's first step kept
    for node in ('n0', 'n1'):
        task_vars['hostvars'][node]['__trainops_health_check']['restore'] = {node: {'__trainops_order': 'launch order'}}
    task_vars['ansible_play_hosts_all'] = ['n0', 'n1', 's0']
    # a failed pair of two nodes is measured again (a search not done when the check ends there): nothing starts
    # (the task after it fails with that message), nothing changes
    result = action({}, **task_vars)
    assert result['restore'] == {'n0': {'__trainops_order': 'launch order'}, 'n1': {'__trainops_order': 'launch order'}}
    assert not result.get('failed') and 'ansible_stats' not in result and not result['changes']
    assert result['failure'] == ('Not starting attempt 2: the health check names no node to leave out: the search '
                                 '(ended before it was done)')
    assert 'attempt' not in result and 'order' not in result
    # a node with a problem in its facts leaves the attempt, the spare takes its node rank
    task_vars = measured_pair(tmp_path, 'succeeded')
    task_vars['hostvars']['n1'] = {'__trainops_health_check': {'health': dict(CPU, problems=['mlx5_0 port 1 DOWN']),
                                                               'restore': {'n1': {'__trainops_preflight': 'p1'}}}}
    task_vars['ansible_play_hosts_all'] = ['n0', 'n1', 's0']
    task_vars.update(__trainops_nodes=['n0', 'n1'], __trainops_health_spares=['s0'], trainops_min_nodes=0,
                     trainops_spare_nodes='spares',
                     __trainops_attempt={'number': 1, 'spares': ['s0'], 'replaced': [{'node': 'x', 'by': 'y'}]})
    result = action({'gate': True}, **task_vars)
    assert not result.get('failed') and result['changes'] and result['leaving'] == ['n1'] and result['failure'] == ''
    assert result['gate']['nodes'] == ['n0', 's0'] and result['msg'][-1] == 'left out: n1; the attempt runs on n0, s0'
    # the attempt and the nodes' order from here on: s0 takes n1's node rank, after those replaced before
    assert result['attempt']['spares'] == [] and [r['node'] for r in result['attempt']['replaced']] == ['x', 'n1']
    assert result['order']['nodes'] == ['n0', 's0'] and result['order']['ranks'] == {'n0': 0, 's0': 1}
    # n1 (the only node whose first step kept something here) gets the launch's facts back and the attempt from here on
    assert result['restore'] == {'n1': {'__trainops_preflight': 'p1', '__trainops_order': result['order'],
                                        '__trainops_next_attempt': result['attempt']}}
    # a verdict that fails gives the launch's facts back all the same
    del task_vars['__trainops_health']
    failed = action({'gate': True}, **task_vars)
    assert failed['failed'] and failed['msg'].startswith('health_verdict: no health check ran')
    assert failed['restore'] == {'n1': {'__trainops_preflight': 'p1'}}


def test_a_node_that_left_the_play_is_suspect_and_no_check_is_an_error(tmp_path):
    task_vars = measured_pair(tmp_path, 'succeeded')
    task_vars['ansible_play_hosts'] = ['n0']
    result = action({}, **task_vars)
    assert result['suspects'] == [{'node': 'n1', 'reason': 'its facts could not be read'}]
    with pytest.raises(AnsibleActionFail, match='no health check ran in this play'):
        action({})


def test_a_suspect_node_is_the_check_s_failure_and_check_mode_judges_nothing(tmp_path):
    task_vars = measured_pair(tmp_path, 'succeeded')
    task_vars['hostvars']['n1'] = {'__trainops_health_check': {'health': dict(CPU, problems=['mlx5_0 port 1 DOWN'])}}
    result = action({}, **task_vars)
    assert not result['healthy'] and result['ansible_stats']['data']['trainops_health']['suspects'] == result['suspects']
    assert result['failure'] == '%s (see %s)' % (result['verdict'], result['file'])
    assert result['failure'].startswith('suspect: n1 (')
    plugin = make({}, check_mode=True)
    assert plugin.run(task_vars=measured_pair(tmp_path / 'again', 'succeeded')) == {
        'skipped': True, 'changed': False, 'msg': 'the health check has no verdict in check mode', 'failure': ''}


def begin_vars(**more):
    hostvars = dict((h, {'ansible_host': '10.0.0.%d' % i}) for i, h in enumerate(('n0', 'n1', 's0')))
    task_vars = dict(inventory_hostname='n0', hostvars=hostvars, trainops_health_min_busbw=None, trainops_health_slow_ratio=0.5,
                     trainops_health_all_pairs_max=8, trainops_health_timeout=30, trainops_health_ignore=['mlx5_1'])
    task_vars.update(more)
    return task_vars


def test_the_check_begins_on_each_node_with_its_rank_order_and_search_then_reads_the_node():
    order = {'nodes': ['n0', 'n1'], 'master': 'n0', 'master_addr': '10.0.0.0', 'ranks': {'n0': 0, 'n1': 1}, 'flagged': []}
    plugin = make({'step': 'begin'})
    got = plugin.run(task_vars=begin_vars(__trainops_order=order, __trainops_health_name='health'))
    assert (got['order'], got['name'], got['restore'], got['gate'], got['health']) == (order, 'health', {}, False, CPU)
    assert got['search']['nodes'] == ['n0', 'n1'] and got['search']['measured'] == [] and got['search']['steps'][0] == 1
    assert plugin._execute_module.call_args.kwargs['module_name'] == 'trainops.multinode.node_health'
    assert plugin._execute_module.call_args.kwargs['module_args'] == {'ignore': ['mlx5_1']}
    assert not plugin._display.display.called


def test_the_check_before_an_attempt_ranks_its_nodes_then_the_spares_and_keeps_the_launch_s_facts():
    launch = dict((name, {'of': name}) for name in _health.LAUNCH_FACTS)
    launch['__trainops_experiment'] = {'name': 'tiny_20260101', 'path': '/e/tiny_20260101'}
    task_vars = begin_vars(__trainops_nodes=['n1', 'n0'], __trainops_health_spares=['s0'], __trainops_run_id='r1',
                           __trainops_attempt={'number': 2}, __trainops_order={'nodes': ['n1', 'n0']}, **launch)
    task_vars['inventory_hostname'] = 'n1'
    plugin = make({'step': 'begin'})
    got = plugin.run(task_vars=task_vars)
    assert got['gate'] and got['order']['nodes'] == ['n1', 'n0', 's0'] and got['name'] == 'tiny_20260101_health'
    # what the node sets again after the check: the launch's facts, its rank order and attempt as they are
    assert got['restore'] == {'n1': dict(launch, __trainops_order={'nodes': ['n1', 'n0']},
                                         __trainops_next_attempt={'number': 2})}
    # the first node to check says what is checked, once
    plugin._display.display.assert_called_once_with(
        'Attempt 2: checking n1, n0 first (trainops_health_check; its measurements are experiments r1_health_*)')
    task_vars['inventory_hostname'] = 's0'
    plugin = make({'step': 'begin'})
    got = plugin.run(task_vars=task_vars)
    assert got['health'] == CPU and not plugin._display.display.called


def test_settings_out_of_range_fail_before_the_node_is_touched_and_the_launch_s_facts_are_kept():
    launch = dict((name, {'of': name}) for name in _health.LAUNCH_FACTS)
    task_vars = begin_vars(__trainops_nodes=['n0', 'n1'], __trainops_health_spares=[], __trainops_run_id='r1',
                           __trainops_attempt={'number': 1}, __trainops_order={'nodes': ['n0', 'n1']},
                           trainops_health_slow_ratio=2, **launch)
    plugin = make({'step': 'begin'})
    got = plugin.run(task_vars=task_vars)
    assert got['failed'] and got['msg'].startswith('Not checking: ') and 'trainops_health_slow_ratio=2' in got['msg']
    assert got['restore']['n0']['__trainops_preflight'] == launch['__trainops_preflight']
    assert not plugin._execute_module.called and not plugin._display.display.called
