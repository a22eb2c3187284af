# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node set of an attempt when it changes (module_utils/_attempt_plan.py; roles/job/tasks/next_attempt.yml): the
failures gate before the first attempt, a retry's next attempt, the reach check's message, the retry's experiment
name and what it says."""

from __future__ import annotations

import datetime

from ansible_collections.trainops.multinode.plugins.module_utils import _attempt_plan as ap


def order_of(nodes):
    return {'nodes': list(nodes), 'master': nodes[0] if nodes else None, 'ranks': dict((n, i) for i, n in enumerate(nodes))}


FIRST = {'number': 1, 'first': 'run_a', 'previous': None, 'rows': [], 'resume_from': '', 'spares': ['spare0', 'spare1'],
         'replaced': []}
ORDER = order_of(['node0', 'node1'])


def test_a_retry_is_the_collect_s_decision_for_this_attempt():
    report = {'retry': {'decision': 'retry'}, 'attempts': [{'run_id': 'run_a'}]}
    assert ap.is_retry(report, 'run_a')
    assert not ap.is_retry(report, 'run_b')                      # an earlier attempt's report
    assert not ap.is_retry(dict(report, retry={'decision': 'stop'}), 'run_a')
    assert not ap.is_retry(None, 'run_a') and not ap.is_retry({'retry': {'decision': 'retry'}}, 'run_a')


def test_the_next_attempt_resumes_this_one_on_the_retry_s_node_set():
    report = {'attempts': [{'run_id': 'run_a', 'outcome': 'failed'}],
              'retry': {'decision': 'retry', 'nodes': ['spare0', 'node1'], 'spares': ['spare1'], 'excluded': ['node0'],
                        'replaced': [{'node': 'node0', 'by': 'spare0', 'node_rank': 0, 'reason': 'unreachable'}]}}
    plan = ap.retry_plan(report, FIRST, ORDER, order_of, 'run_a', '/e/run_a', 2)
    assert plan['attempt'] == {'number': 2, 'first': 'run_a', 'previous': 'run_a', 'previous_dir': '/e/run_a',
                               'rows': report['attempts'], 'resume_from': 'run_a', 'spares': ['spare1'],
                               'replaced': report['retry']['replaced']}
    assert plan['order']['nodes'] == ['spare0', 'node1'] and plan['leave'] == ['node0']
    assert (plan['retry'], plan['differs'], plan['reach'], plan['wait_label'], plan['stop']) == (True, True, True, 'attempt 2/3', None)
    # on the same nodes: the order as it is, the spares as they were
    same = ap.retry_plan({'attempts': [], 'retry': {'decision': 'retry'}}, FIRST, ORDER, order_of, 'run_a', '/e/run_a', 1)
    assert same['order'] is ORDER and same['attempt']['spares'] == ['spare0', 'spare1'] and same['leave'] == []
    assert same['attempt']['replaced'] == [] and same['wait_label'] == 'attempt 2/2'


def test_the_failures_gate_leaves_out_a_node_and_an_unfit_spare_or_changes_nothing():
    gate = {'nodes': ['spare1', 'node1'], 'spares': [], 'excluded': ['node0'], 'unfit_spares': ['spare0'], 'stop': None,
            'replaced': [{'node': 'node0', 'by': 'spare1', 'node_rank': 0, 'reason': 'failed 3 times'}],
            'lines': ['node0 left out']}
    plan = ap.failures_plan(gate, FIRST, ORDER, order_of)
    assert plan['attempt'] == dict(FIRST, spares=[], replaced=gate['replaced'])
    assert plan['order']['nodes'] == ['spare1', 'node1'] and plan['leave'] == ['node0', 'spare0']
    assert (plan['retry'], plan['differs'], plan['reach'], plan['lines'], plan['wait_label']) == (
        False, True, True, ['node0 left out'], '')
    spare_only = ap.failures_plan(dict(gate, nodes=['node0', 'node1'], excluded=[], replaced=[], spares=['spare1']),
                                  FIRST, ORDER, order_of)
    assert spare_only['differs'] and not spare_only['reach'] and spare_only['leave'] == ['spare0']
    nothing = ap.failures_plan({'nodes': ['node0', 'node1'], 'spares': FIRST['spares'], 'excluded': [], 'unfit_spares': [],
                                'replaced': [], 'lines': [], 'stop': None}, FIRST, ORDER, order_of)
    assert not nothing['differs'] and nothing['attempt'] is FIRST and nothing['order'] is ORDER and nothing['leave'] == []
    stopped = ap.failures_plan(dict(gate, stop='node0 failed 3 times'), FIRST, ORDER, order_of)
    assert stopped['stop'] == 'node0 failed 3 times'


def test_a_node_that_does_not_reach_its_master_stops_the_attempt_naming_it():
    assert ap.reach_problem(2, ['node2', 'node1'], 'node2', '10.0.0.2', ['node2', 'node1'], {'node2': [], 'node1': None}) is None
    why = ap.reach_problem(2, ['node2', 'node1', 'node3'], 'node2', '10.0.0.2', ['node2', 'node1'],
                           {'node1': ['cannot connect to 10.0.0.2:29500'], 'node2': []})
    assert why == ('Not starting attempt 2 on node2, node1, node3 (master node2 at 10.0.0.2): cannot connect to '
                   '10.0.0.2:29500 (on node1); could not be reached: node3')


def test_the_retry_s_experiment_is_named_as_the_first_attempt_s_and_the_start_is_said():
    now = datetime.datetime(2026, 1, 2, 3, 4, 5)
    assert ap.experiment_name('multinode', None, '', now) == 'multinode_autoch_autoth_20260102_030405'
    assert ap.experiment_name('tiny', '8', 256, now) == 'tiny_8ch_256th_20260102_030405'
    assert ap.experiment_name('tiny', 'None', '4.0', now) == 'tiny_autoch_4th_20260102_030405'
    attempt = dict(FIRST, number=2, previous='run_a',
                   rows=[{'outcome_detail': 'node1 exit code 1', 'reason': 'failed is retried (1 of 1 retries left)'}])
    assert ap.started_line(attempt, 1, 'run_b', ['node0', 'node1'], 'node0', '/e/run_b') == (
        'Attempt 2 of at most 2: run_b resumes run_a from its latest checkpoint (node1 exit code 1; failed is retried '
        '(1 of 1 retries left)) on node0, node1, master node0. Outputs: /e/run_b')
