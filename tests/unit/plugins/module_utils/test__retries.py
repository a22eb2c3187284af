# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Retries with resume (module_utils/_retries.py): the give-up rules, each with its reason, and the attempts table;
and how the experiment's report records them (module_utils/_experiment.py, report_experiment's attempt, link_next)."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _experiment, _outcomes, _retries


def _verdict(outcome='failed', failed=('node0',), also=(), stopped=('node1',), detail=None):
    return dict(outcome=outcome, outcome_detail=detail or '%s on %s' % (outcome, ', '.join(failed)),
                failed_nodes=list(failed), also_failed=list(also), stopped_nodes=list(stopped))


RESULTS = {'node0': {'exit_code': 1, 'node_rank': 0}, 'node1': {'exit_code': -15, 'stop': {'reason': 'peer'}}}


def _record(verdict, results=None, steps=9, number=1, rows=(), retries=2, resumed=None, missing=(), **node_set):
    attempt = dict(number=number, first='run1', previous=None if number == 1 else 'run%d' % (number - 1),
                   retries=retries, rows=list(rows), resumed_from=resumed, run_id='run%d' % number,
                   experiment_dir='/e/run%d' % number, **node_set)
    return _retries.record(attempt, verdict, RESULTS if results is None else results, {'steps': steps}, missing)


def test_only_failed_stalled_and_unreachable_are_retried():
    assert set(_outcomes.RETRIED_OUTCOMES) == {'failed', 'stalled', 'unreachable'}
    for outcome in ('stopped', 'timed_out'):
        retry = _record(_verdict(outcome, failed=()))['retry']
        assert retry['decision'] == 'stop' and retry['reason'].startswith('outcome %s: not retried' % outcome)
    assert _record(_verdict('succeeded', failed=(), stopped=()))['retry'] == {'decision': None, 'reason': 'succeeded'}


def test_a_failure_with_retries_left_is_retried_and_the_first_row_has_no_steps_lost():
    recorded = _record(_verdict())
    assert recorded['retry'] == {'decision': 'retry', 'reason': 'failed is retried (2 of 2 retries left)'}
    assert recorded['attempt'] == 1 and recorded['first'] == 'run1' and recorded['previous'] is None
    (row,) = recorded['attempts']
    assert row['start_step'] == 0 and row['end_step'] == 9 and row['steps_lost'] is None
    assert row['failure'] == [['node0', 'exit code 1']] and row['decision'] == 'retry'


def test_no_retries_left_stops_with_the_knob():
    retry = _record(_verdict(), retries=0)['retry']
    assert retry == {'decision': 'stop', 'reason': 'no retries left (trainops_retries=0)'}
    first = _record(_verdict(), retries=1)['attempts'][0]
    retry = _record(_verdict(failed=('node1',), stopped=('node0',)), number=2, rows=[first], retries=1)['retry']
    assert retry['reason'] == 'no retries left (trainops_retries=1)'


def test_a_node_that_left_the_play_stops_the_retries_naming_it():
    retry = _record(_verdict('unreachable', failed=('lab-node02',), stopped=()), missing=['lab-node02'])['retry']
    assert retry == {'decision': 'stop',
                     'reason': "lab-node02 unreachable; no spare left (trainops_spare_nodes='') and trainops_min_nodes=0"}


# --- spare nodes and trainops_min_nodes (rule 6) --------------------------------------------------------------------

KILLED = {'node0': {'exit_code': -15, 'stop': {'reason': 'peer'}}, 'node1': {'signal': 'SIGKILL', 'exit_code': None}}


def _twice(node='node1', results=None, **node_set):
    """node's ranks killed the same way in attempts 1 and 2: the second attempt's record."""
    other = 'node0' if node != 'node0' else 'node1'
    results = results or {node: {'signal': 'SIGKILL', 'exit_code': None}, other: {'exit_code': -15}}
    verdict = _verdict(failed=(node,), stopped=(other,))
    first = _record(verdict, results=results, steps=9, **node_set)['attempts'][0]
    return _record(verdict, results=results, steps=10, number=2, rows=[first],
                   resumed={'path': 'p', 'global_step': 8}, **node_set)


def test_a_node_failing_twice_the_same_way_is_replaced_by_the_first_spare_with_its_node_rank():
    second = _twice(nodes=['node0', 'node1'], spares=['node2', 'node3'], spare_group='spares')
    retry = second['retry']
    assert retry['decision'] == 'retry' and retry['nodes'] == ['node0', 'node2'] and retry['spares'] == ['node3']
    assert retry['replaced'] == [{'node': 'node1', 'by': 'node2', 'node_rank': 1,
                                  'reason': 'failed twice the same way (signal SIGKILL)'}]
    assert retry['excluded'] == ['node1']
    assert retry['reason'] == ('failed is retried (1 of 2 retries left) on node0, node2: node1 failed twice the same '
                               'way (signal SIGKILL): replaced by node2 as node rank 1')
    assert second['attempts'][1]['nodes'] == ['node0', 'node1']


def test_the_master_failing_twice_moves_node_rank_0_to_the_spare():
    retry = _twice('node0', nodes=['node0', 'node1'], spares=['node2'], spare_group='spares')['retry']
    assert retry['nodes'] == ['node2', 'node1'] and retry['replaced'][0]['node_rank'] == 0 and retry['spares'] == []


def test_an_unreachable_node_is_replaced_and_without_a_spare_the_reason_names_what_is_missing():
    verdict = _verdict('unreachable', failed=('node1',), stopped=())
    retry = _record(verdict, missing=['node1'], nodes=['node0', 'node1', 'node2'], spares=['node9'],
                    spare_group='spares')['retry']
    assert retry['nodes'] == ['node0', 'node9', 'node2'] and retry['replaced'][0]['reason'] == 'unreachable'
    retry = _record(verdict, missing=['node1'], nodes=['node0', 'node1', 'node2'], spares=[],
                    spare_group='spares')['retry']
    assert retry == {'decision': 'stop',
                     'reason': 'node1 unreachable; no spare left (trainops_spare_nodes=spares) and trainops_min_nodes=0'}


def test_without_a_spare_min_nodes_lets_the_job_go_on_with_fewer_nodes():
    verdict = _verdict('unreachable', failed=('node0',), stopped=())
    retry = _record(verdict, missing=['node0'], nodes=['node0', 'node1', 'node2'], min_nodes=2)['retry']
    assert retry['decision'] == 'retry' and retry['nodes'] == ['node1', 'node2']
    assert retry['replaced'] == [{'node': 'node0', 'by': None, 'node_rank': 0, 'reason': 'unreachable'}]
    assert retry['reason'].endswith('on node1, node2: node0 unreachable: left out')
    retry = _record(verdict, missing=['node0'], nodes=['node0', 'node1'], min_nodes=2)['retry']
    assert retry == {'decision': 'stop', 'reason': "node0 unreachable; no spare left (trainops_spare_nodes='') and "
                                                   "trainops_min_nodes=2 (1 node(s) left)"}
    # the same failure twice without spares and min nodes: the reason it always had
    assert _twice(nodes=['node0', 'node1'])['retry']['reason'] == (
        'the same node failing twice the same way (node1 signal SIGKILL in attempts 1 and 2)')
    assert _twice(nodes=['node0', 'node1'], spare_group='spares')['retry']['reason'] == (
        "node1 failed twice the same way (signal SIGKILL); no spare left (trainops_spare_nodes=spares) and "
        "trainops_min_nodes=0")


def test_replace_uses_the_spares_in_order_and_drops_only_what_min_nodes_allows():
    plan = _retries.replace({'b': 'unreachable', 'd': 'unreachable', 'a': 'x'}, ['a', 'b', 'c', 'd'], ['s1'], 2)
    assert plan['nodes'] == ['s1', 'c'] and plan['excluded'] == ['a', 'b', 'd'] and plan['stop'] is None
    assert [(r['node'], r['by'], r['node_rank']) for r in plan['replaced']] == [
        ('a', 's1', 0), ('b', None, 1), ('d', None, 3)]
    assert _retries.replace({'a': 'x'}, ['a', 'b'], [], 0)['stop'].startswith('a x; no spare left')


def test_the_summary_shows_each_attempt_s_node_set_and_who_replaced_whom():
    second = _twice(nodes=['node0', 'node1'], spares=['node2'], spare_group='spares')
    third = _record(_verdict('succeeded', failed=(), stopped=()), number=3, rows=second['attempts'], steps=24,
                    resumed={'path': 'p', 'global_step': 8}, nodes=['node0', 'node2'],
                    replaced=second['retry']['replaced'])
    lines = _retries.lines(third['attempts'], 2)
    assert lines[1].startswith('attempt 1  : run1 failed, steps 0 -> 9, on node0,node1; retry:')
    assert lines[3] == 'attempt 3  : run3 succeeded, steps 8 -> 24, on node0,node2 (node1 by node2 as node rank 1), ' \
                       '2 step(s) lost'


@pytest.mark.parametrize('args, problem', [
    ((['a', 'b'], '', None, 3), "trainops_min_nodes=3: more than the job's 2 node(s) (a, b)"),
    ((['a', 'b'], '', None, 'x'), "trainops_min_nodes='x': give a whole number"),
    ((['a', 'b'], '', None, -1), 'trainops_min_nodes=-1: give a whole number'),
    ((['a', 'b'], 'spares', None), 'trainops_spare_nodes=spares: no such group in the inventory'),
    ((['a', 'b'], 'spares', ['b', 'c'], 0, ['a', 'b', 'c']), 'trainops_spare_nodes=spares: b is also a node of the job'),
    ((['a', 'b'], 'spares', [], 0, ['a', 'b']), 'trainops_spare_nodes=spares: the group has no hosts'),
    ((['a', 'b'], 'spares', ['c'], 0, ['a', 'b']), 'trainops_spare_nodes=spares: c not in the play'),
    ((['a', 'b'], 'spares', ['c'], 0, ['a', 'b', 'c'], 'srun'), 'trainops_spare_nodes=spares: spare nodes need launcher=ssh'),
])
def test_the_spare_nodes_and_min_nodes_are_checked_naming_the_value(args, problem):
    problems = _retries.spare_pool(*args)['problems']
    assert len(problems) == 1 and problems[0].startswith(problem), problems


def test_the_spare_pool_is_the_group_in_inventory_order():
    assert _retries.spare_pool(['a'], 'spares', ['d', 'c'], 1, ['a', 'c', 'd']) == {'spares': ['d', 'c'], 'problems': []}
    assert _retries.spare_pool(['a'], '', None) == {'spares': [], 'problems': []}


def test_an_unreachable_node_back_in_the_play_is_retried():
    assert _record(_verdict('unreachable', failed=('node1',), stopped=()))['retry']['decision'] == 'retry'


def test_every_rank_failing_before_its_first_step_stops_the_retries():
    results = {'node0': {'exit_code': 2}, 'node1': {'exit_code': 2}}
    verdict = _verdict(failed=('node0',), also=('node1',), stopped=())
    retry = _record(verdict, results=results, steps=None)['retry']
    assert retry['decision'] == 'stop'
    assert retry['reason'].startswith('every rank failed before its first step (node0 exit code 2; nothing in the logs '
                                      'looks like infrastructure): a retry would fail')
    # a step reached, or a node stopped by the others' failure: retried
    assert _record(verdict, results=results, steps=3)['retry']['decision'] == 'retry'
    assert _record(_verdict(), steps=None)['retry']['decision'] == 'retry'


def test_a_launch_that_failed_before_the_job_ran_is_not_retried():
    attempt = dict(number=1, first='run1', previous=None, retries=3, rows=[])
    recorded = _retries.record(attempt, _verdict(), RESULTS, {}, (), {'node1': 'The job did not start on node1'})
    assert recorded['retry']['decision'] == 'stop' and 'the launch failed before the job ran (node1)' in recorded['retry']['reason']


def test_the_same_node_failing_the_same_way_twice_stops_the_retries():
    first = _record(_verdict(), steps=5)['attempts'][0]
    resumed = {'path': '/s/runs/run1/outputs/checkpoint.pt', 'global_step': 4}
    second = _record(_verdict(), steps=None, number=2, rows=[first], resumed=resumed)
    assert second['retry'] == {'decision': 'stop', 'reason': 'the same node failing twice the same way '
                                                             '(node0 exit code 1 in attempts 1 and 2)'}
    assert [r['attempt'] for r in second['attempts']] == [1, 2]
    row = second['attempts'][1]
    assert row['start_step'] == 4 and row['end_step'] is None and row['steps_lost'] == 1
    # another node, or another way (a signal), is retried
    other = {'node0': {'exit_code': -15, 'stop': {'reason': 'peer'}}, 'node1': {'exit_code': 1}}
    assert _record(_verdict(failed=('node1',), stopped=('node0',)), results=other, number=2, rows=[first],
                   resumed=resumed)['retry']['decision'] == 'retry'
    killed = {'node0': {'signal': 'SIGKILL', 'exit_code': None}, 'node1': RESULTS['node1']}
    assert _record(_verdict(), results=killed, number=2, rows=[first], resumed=resumed)['retry']['decision'] == 'retry'


def test_stalls_compare_by_node():
    first = _record(_verdict('stalled', stopped=()), steps=5)['attempts'][0]
    assert first['failure'] == [['node0', 'stalled']]
    again = _record(_verdict('stalled', stopped=()), number=2, rows=[first], steps=8, resumed={'path': 'p', 'global_step': 4})
    assert again['retry']['decision'] == 'stop' and 'node0 stalled in attempts 1 and 2' in again['retry']['reason']


def test_a_resumed_attempt_without_a_checkpoint_of_its_own_starts_where_the_one_before_did():
    first = _record(_verdict(), steps=9)['attempts'][0]
    second = _record(_verdict(failed=('node1',)), number=2, rows=[first], steps=12,
                     resumed={'path': 'p', 'global_step': 8})['attempts'][1]
    third = _record(_verdict(), number=3, rows=[first, second], steps=None, resumed={'path': 'p', 'global_step': None})
    assert third['attempts'][2]['start_step'] == 8 and third['attempts'][2]['steps_lost'] == 4
    # a resume that found no checkpoint starts from scratch
    fourth = _record(_verdict(), number=2, rows=[first], steps=3, resumed={'path': None})
    assert fourth['attempts'][1]['start_step'] == 0 and fourth['attempts'][1]['steps_lost'] == 9


def test_the_summary_lines_list_every_attempt():
    first = _record(_verdict(), steps=9, retries=1)['attempts'][0]
    second = _record(_verdict('succeeded', failed=(), stopped=()), number=2, rows=[first], steps=16, retries=1,
                     resumed={'path': 'p', 'global_step': 8})['attempts']
    assert _retries.lines(second, 1) == [
        'attempts   : 2 of at most 2 (trainops_retries=1)',
        'attempt 1  : run1 failed, steps 0 -> 9; retry: failed is retried (1 of 1 retries left)',
        'attempt 2  : run2 succeeded, steps 8 -> 16, 1 step(s) lost',
    ]


def _write_metrics(path, node, steps):
    os.makedirs(os.path.join(path, 'outputs', node))
    with open(os.path.join(path, 'outputs', node, 'rank_00_metrics.jsonl'), 'w') as handle:
        for step in steps:
            handle.write(json.dumps({'rank': 0, 'world_size': 1, 'global_step': step, 'loss': 1.0}) + '\n')


def test_the_report_records_the_attempt_and_the_next_one_is_linked(tmp_path):
    path = str(tmp_path / 'run1')
    os.makedirs(path)
    _write_metrics(path, 'node0', [1, 2, 3])
    results = {'node0': {'exit_code': 1, 'node_rank': 0}}
    attempt = dict(number=1, first='run1', previous=None, retries=1, rows=[], resumed_from=None)
    report = _experiment.report_experiment(path, {'run_id': 'run1'}, results=results, attempt=attempt)
    assert report['retry']['decision'] == 'retry' and report['attempts'][0]['end_step'] == 3
    manifest = json.load(open(os.path.join(path, 'manifest.json')))
    assert (manifest['attempt'], manifest['first'], manifest['previous']) == (1, 'run1', None)
    assert manifest['retry'] == report['retry'] and manifest['attempts'][0]['run_id'] == 'run1'
    assert 'attempt 1  : run1 failed, steps 0 -> 3; retry:' in open(os.path.join(path, 'summary.txt')).read()
    assert _experiment.link_next(path, 'run2') is True and _experiment.link_next(path, 'run2') is False
    assert json.load(open(os.path.join(path, 'manifest.json')))['next'] == 'run2'
    assert open(os.path.join(path, 'summary.txt')).read().endswith('next       : run2\n')


def test_without_retries_the_table_is_as_before(tmp_path):
    path = str(tmp_path / 'run1')
    os.makedirs(path)
    _write_metrics(path, 'node0', [1, 2])
    results = {'node0': {'exit_code': 0}}
    plain = _experiment.report_experiment(path, {'run_id': 'run1'}, results=results)
    attempt = dict(number=1, first='run1', previous=None, retries=0, rows=[], resumed_from=None)
    report = _experiment.report_experiment(path, {'run_id': 'run1'}, results=results, attempt=attempt)
    assert report['table'] == plain['table'] and report['retry']['decision'] is None


def test_link_next_needs_a_manifest(tmp_path):
    with pytest.raises(_experiment.ExperimentError, match='holds no manifest'):
        _experiment.link_next(str(tmp_path), 'run2')


# --- the health check before an attempt (trainops_health_check) ---------------------------------------------------

def report(*suspects):
    return {'verdict': 'suspect: ...' if suspects else 'healthy',
            'suspects': [{'node': node, 'reason': reason} for node, reason in suspects]}


def test_a_healthy_check_keeps_the_attempts_nodes():
    gate = _retries.health_gate(report(), ['n0', 'n1'], ['s0'])
    assert (gate['nodes'], gate['spares'], gate['replaced'], gate['stop'], gate['verdict']) == (
        ['n0', 'n1'], ['s0'], [], None, 'healthy')


def test_a_suspect_node_is_left_out_for_the_first_healthy_spare_and_a_suspect_spare_is_no_spare():
    gate = _retries.health_gate(report(('n1', '2 of its 2 pair(s) failed'), ('s0', 'mlx5_0 port 1 DOWN')),
                                ['n0', 'n1', 'n2'], ['s0', 's1'])
    assert gate['nodes'] == ['n0', 's1', 'n2'] and gate['spares'] == [] and gate['stop'] is None
    assert gate['replaced'] == [{'node': 'n1', 'by': 's1', 'node_rank': 1,
                                 'reason': 'failed the health check (2 of its 2 pair(s) failed)'}]
    assert gate['excluded'] == ['n1'] and gate['unfit_spares'] == ['s0']


def test_without_a_spare_min_nodes_decides_and_else_nothing_starts():
    suspect = report(('n0', 'its facts could not be read'))
    fewer = _retries.health_gate(suspect, ['n0', 'n1', 'n2'], [], min_nodes=2, spare_group='spares')
    assert fewer['nodes'] == ['n1', 'n2'] and fewer['stop'] is None and fewer['replaced'][0]['by'] is None
    stopped = _retries.health_gate(suspect, ['n0', 'n1'], [], min_nodes=0, spare_group='spares')
    assert stopped['stop'] == ('n0 failed the health check (its facts could not be read); no spare left '
                               '(trainops_spare_nodes=spares) and trainops_min_nodes=0')


NO_NODE = 'the health check names no node to leave out: '


@pytest.mark.parametrize('checked, stop', [
    (report(('n0<->n1', 'the pair slow: 1.2 GB/s')), NO_NODE + 'n0<->n1 (the pair slow: 1.2 GB/s)'),
    (report(('all nodes', 'the all-reduce of all 2 nodes failed')), NO_NODE + 'all nodes (the all-reduce of all 2 nodes failed)'),
    (None, 'the health check wrote no report (see its output above)'),
    ({'verdict': 'healthy'}, 'the health check wrote no report (see its output above)'),
])
def test_a_suspect_that_is_no_node_or_no_report_starts_nothing(checked, stop):
    assert _retries.health_gate(checked, ['n0', 'n1'], ['s0'])['stop'] == stop


@pytest.mark.parametrize('link, unfit', [
    ('n0<->s0', ['s0']),
    ('s0<->n1', ['s0']),
    ('s0<->s1', ['s0', 's1']),
])
def test_a_link_with_a_spare_at_one_end_makes_the_spare_unfit_and_the_attempt_starts(link, unfit):
    gate = _retries.health_gate(report((link, 'the pair failed: timeout')), ['n0', 'n1'], ['s0', 's1'])
    assert gate['stop'] is None and gate['nodes'] == ['n0', 'n1'] and gate['replaced'] == []
    assert gate['unfit_spares'] == unfit and gate['spares'] == [s for s in ['s0', 's1'] if s not in unfit]


def test_a_suspect_spare_and_a_link_to_it_leave_only_that_spare_out():
    gate = _retries.health_gate(report(('s0', 'mlx5_0 port 1 DOWN'), ('n1<->s0', 'the pair slow: 1 GB/s'),
                                       ('n0', '2 of its 3 pair(s) failed')), ['n0', 'n1'], ['s0', 's1'])
    assert gate['stop'] is None and gate['nodes'] == ['s1', 'n1'] and gate['unfit_spares'] == ['s0']


def test_a_link_between_the_attempts_nodes_or_to_an_unknown_host_still_starts_nothing():
    assert _retries.health_gate(report(('n0<->n1', 'slow')), ['n0', 'n1'], ['s0'])['stop'] == NO_NODE + 'n0<->n1 (slow)'
    assert _retries.health_gate(report(('x9<->s0', 'slow')), ['n0', 'n1'], ['s0'])['stop'] == NO_NODE + 'x9<->s0 (slow)'
