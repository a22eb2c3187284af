# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The health_verdict action plugin: the last measurement added, health.json written, the verdict published (the
health check) or the attempt's nodes worked out (the check before an attempt). The rules: test__health.py,
test__retries.py."""

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


def action(args, **task_vars):
    plugin, dummy = make_action(ActionModule, 'trainops.multinode.health_verdict', args)
    plugin._templar = MagicMock(template=lambda value: value)
    return plugin.run(task_vars=task_vars)


def measured_pair(tmp_path, outcome):
    """A check of two nodes whose one group (the pair) ran and left ``outcome`` in its manifest."""
    state = _health.search_advance(_health.search_start(['n0', 'n1'], 'n0', _health.settings(None, 0.5, 8, 30)))
    run = tmp_path / 'step01_2nodes'
    (run / 'outputs' / 'n0').mkdir(parents=True, exist_ok=True)
    (run / 'manifest.json').write_text(json.dumps({'outcome': outcome, 'nodes': [{'host': 'n0', 'ranks': [0]}]}))
    (run / 'outputs' / 'n0' / 'allreduce.json').write_text(json.dumps({'avg_busbw_gbps': 2.0, 'results': [{'time_us': 5.0}]}))
    # the loop's last step added it
    state = _health.search_advance(state, read_measurement(['n0', 'n1'], str(run), ''))
    hostvars = {'n0': {'__trainops_health_node': {'health': CPU}}, 'n1': {'__trainops_health_node': {'health': CPU}}}
    return dict(__trainops_health=state, __trainops_health_dir={'path': str(tmp_path)}, hostvars=hostvars,
                ansible_play_hosts=['n0', 'n1'])


def test_the_check_s_verdict_is_written_printed_and_published(tmp_path):
    result = action({}, **measured_pair(tmp_path, 'succeeded'))
    assert result['verdict'] == 'healthy' and result['healthy'] and result['file'] == str(tmp_path / 'health.json')
    written = json.loads((tmp_path / 'health.json').read_text())
    assert [g['busbw_gbps'] for g in written['groups']] == [2.0] and written['search']['done']
    assert result['msg'][-2:] == ['', 'written: ' + result['file']] and 'verdict: healthy' in result['msg']
    assert result['ansible_stats'] == {'aggregate': False, 'per_host': False, 'data': {'trainops_health': {
        'verdict': 'healthy', 'suspects': [], 'file': result['file']}}}
    assert result['_ansible_verbose_always'] is True


def test_the_check_before_an_attempt_names_the_nodes_it_runs_on_or_starts_nothing(tmp_path):
    task_vars = measured_pair(tmp_path, 'failed')
    task_vars.update(__trainops_nodes=['n0', 'n1'], __trainops_health_spares=['s0'], __trainops_attempt={'number': 2},
                     trainops_min_nodes=0, trainops_spare_nodes='spares')
    # a failed pair of two nodes is measured again (a search not done when the check ends there): nothing starts
    result = action({'gate': True}, **task_vars)
    assert result['failed'] and 'ansible_stats' not in result
    assert result['msg'] == ('Not starting attempt 2: the health check names no node to leave out: the search (ended '
                             'before it was done)')
    # a node with a problem in its facts leaves the attempt, the spare takes its node rank
    task_vars = measured_pair(tmp_path, 'succeeded')
    task_vars['hostvars']['n1'] = {'__trainops_health_node': {'health': dict(CPU, problems=['mlx5_0 port 1 DOWN'])}}
    task_vars.update(__trainops_nodes=['n0', 'n1'], __trainops_health_spares=['s0'], __trainops_attempt={'number': 1},
                     trainops_min_nodes=0, trainops_spare_nodes='spares')
    result = action({'gate': True}, **task_vars)
    assert not result.get('failed') and result['changes'] and result['leaving'] == ['n1']
    assert result['gate']['nodes'] == ['n0', 's0'] and result['msg'][-1] == 'left out: n1; the attempt runs on n0, s0'


def test_a_node_that_left_the_play_is_suspect_and_no_check_is_an_error(tmp_path):
    task_vars = measured_pair(tmp_path, 'succeeded')
    task_vars['ansible_play_hosts'] = ['n0']
    result = action({}, **task_vars)
    assert result['suspects'] == [{'node': 'n1', 'reason': 'its facts could not be read'}]
    with pytest.raises(AnsibleActionFail, match='no health check ran in this play'):
        action({})
