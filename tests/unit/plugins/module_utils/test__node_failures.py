# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Nodes that fail too often (trainops_exclude_after; module_utils/_node_failures.py): the file in the experiments
directory, what counts against a node, the retries' rule and the first attempt's gate (_retries.failures_gate)."""

from __future__ import annotations

import json
import os

import yaml

from ansible_collections.trainops.multinode.plugins.module_utils import _experiment, _node_failures, _retries

INVENTORY = ['/inv/hosts.yml']


def _verdict(failed=('node1',), stopped=('node0',), outcome='failed'):
    return dict(outcome=outcome, outcome_detail='x', failed_nodes=list(failed), also_failed=[],
                stopped_nodes=list(stopped), nodes=['node0', 'node1'])


def test_the_file_counts_each_nodes_failures_per_inventory_and_keeps_the_latest(tmp_path):
    exp = str(tmp_path)
    assert _node_failures.record(exp, INVENTORY, [['node1', 'signal SIGABRT']], 'run1') == {'node1': 1}
    assert _node_failures.record(exp, INVENTORY, [['node1', 'exit code 1']], 'run2') == {'node1': 2}
    assert _node_failures.record(exp, ['/other.yml'], [['node1', 'exit code 1']], 'run3') == {'node1': 1}
    state = json.loads((tmp_path / 'node_failures.json').read_text())
    entry = state['inventories']['/inv/hosts.yml']['node1']
    assert entry['failures'] == 2 and [one['cause'] for one in entry['last']] == ['signal SIGABRT', 'exit code 1']
    # nothing failed, or check mode: nothing written
    assert _node_failures.record(exp, INVENTORY, [], 'run4') == {'node1': 2}
    _node_failures.record(exp, INVENTORY, [['node0', 'stalled']], 'run5', check_mode=True)
    assert 'node0' not in json.loads((tmp_path / 'node_failures.json').read_text())['inventories']['/inv/hosts.yml']


def test_what_the_user_wrote_in_the_file_is_checked(tmp_path):
    path = str(tmp_path / 'node_failures.json')
    with open(path, 'w') as handle:
        json.dump({'inventories': {'/inv/hosts.yml': {'node0': {'failures': 'many'}, 'node1': {'failures': 4}},
                                   'x': []}}, handle)
    state, problems = _node_failures.read(path)
    assert _node_failures.counts(state, '/inv/hosts.yml') == {'node1': 4}
    assert len(problems) == 2 and "node 'node0' needs a whole number of failures" in problems[0]
    assert _node_failures.read(str(tmp_path / 'none.json')) == ({'version': 1, 'inventories': {}}, [])


def test_only_a_failure_that_singles_out_a_node_counts_against_it():
    failed = [['node1', 'exit code 1']]
    assert _node_failures.strikes(_verdict(), failed) == failed
    # a script error (the same exception at the end of every failed node's log): only a node not reached counts
    both = dict(_verdict(stopped=()), also_failed=['node0'])
    tails = {'node0': ['[rank 0] KeyError: 1'], 'node1': ['[rank 1] KeyError: 1']}
    assert _node_failures.strikes(both, failed, tails) == []
    assert _node_failures.strikes(both, [['node1', 'unreachable']], tails) == [['node1', 'unreachable']]
    # a cascade (the other node failed too, in its own way) counts the cause
    assert _node_failures.strikes(both, failed, {'node0': ['[rank 0] RuntimeError: Connection closed by peer']}) == failed
    assert _node_failures.strikes(dict(_verdict(), unclean_exit={'nodes': ['node1']}), failed) == []
    assert _node_failures.strikes(_verdict(outcome='stopped'), failed) == []


def test_a_node_failing_twice_in_different_ways_is_replaced_by_a_spare_with_exclude_after():
    verdict = _verdict()
    attempt = dict(number=2, first='run1', previous='run1', retries=3, run_id='run2', experiment_dir='/e/run2',
                   resumed_from={'path': 'p', 'global_step': 4}, nodes=['node0', 'node1'], spares=['node2'],
                   spare_group='spares', exclude_after=2, remembered={'node1': 2},
                   rows=[dict(attempt=1, end_step=5, start_step=0, failure=[['node1', 'signal SIGABRT']])])
    results = {'node0': {'exit_code': -15, 'stop': {'reason': 'peer'}}, 'node1': {'exit_code': 1}}
    retry = _retries.record(attempt, verdict, results, {'steps': 9})['retry']
    assert retry['decision'] == 'retry' and retry['nodes'] == ['node0', 'node2']
    assert retry['replaced'][0]['reason'] == 'failed 2 times (trainops_exclude_after=2; node_failures.json)'
    # without a spare and trainops_min_nodes: stop, naming it
    retry = _retries.record(dict(attempt, spares=[], spare_group=''), verdict, results, {'steps': 9})['retry']
    assert retry['decision'] == 'stop' and retry['reason'].startswith('node1 failed 2 times (trainops_exclude_after=2')
    # off (0): the different failures are retried as before
    assert _retries.record(dict(attempt, exclude_after=0), verdict, results, {'steps': 9})['retry']['decision'] == 'retry'


def test_the_collect_records_the_attempts_failure_in_the_experiments_directory(tmp_path):
    run = tmp_path / 'run1'
    run.mkdir()
    results = {'node0': {'exit_code': -15, 'stop': {'reason': 'peer', 'requested_at_epoch': 20.0}},
               'node1': {'exit_code': 1, 'ended_at_epoch': 10.0}}
    attempt = dict(number=1, first='run1', previous=None, retries=1, rows=[], resumed_from=None,
                   exclude_after=3, inventory=INVENTORY)
    _experiment.report_experiment(str(run), manifest={'run_id': 'run1'}, results=results, attempt=attempt)
    state = json.loads((tmp_path / 'node_failures.json').read_text())
    assert state['inventories']['/inv/hosts.yml']['node1']['failures'] == 1
    assert state['inventories']['/inv/hosts.yml']['node1']['last'][0]['run_id'] == 'run1'


def test_the_first_attempt_leaves_out_the_nodes_that_failed_too_often_before(tmp_path):
    exp = str(tmp_path)
    for run in ('run1', 'run2'):
        _node_failures.record(exp, INVENTORY, [['node1', 'exit code 1'], ['node3', 'stalled']], run)
    gate = _retries.failures_gate(exp, INVENTORY, 2, ['node0', 'node1'], ['node3', 'node2'], 0, 'spares')
    assert gate['nodes'] == ['node0', 'node2'] and gate['excluded'] == ['node1'] and gate['unfit_spares'] == ['node3']
    assert gate['stop'] is None and gate['spares'] == [] and gate['problems'] == []
    assert gate['lines'] == ['left out: node1 (%s); the attempt runs on node0, node2' % os.path.join(exp, 'node_failures.json'),
                             'no longer spare nodes: node3']
    assert _retries.failures_gate(exp, INVENTORY, 3, ['node0', 'node1'])['lines'] == []
    gate = _retries.failures_gate(exp, INVENTORY, 2, ['node0', 'node1'])
    assert gate['stop'] == ("node1 failed 2 times (trainops_exclude_after=2; node_failures.json); no spare left "
                            "(trainops_spare_nodes='') and trainops_min_nodes=0 (forget the failures: edit or delete "
                            "%s)" % os.path.join(exp, 'node_failures.json'))
    assert _retries.failures_gate(exp, INVENTORY, 3, ['node0', 'node1'])['excluded'] == []
    assert _retries.failures_gate(exp, ['/other.yml'], 2, ['node0', 'node1'])['excluded'] == []


def test_the_docs_show_the_file_where_the_launch_keeps_it():
    root = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..')
    with open(os.path.join(root, 'docs', 'failures.md')) as handle:
        page = handle.read()
    with open(os.path.join(root, 'roles', 'job', 'defaults', 'main.yml')) as handle:
        defaults = yaml.safe_load(handle)
    assert defaults['trainops_experiments_dir'] == "{{ 'experiments' | ansible.builtin.realpath }}"
    for command in ('cat experiments/%s', 'rm experiments/%s'):
        assert '    ' + command % _node_failures.FILE_NAME + '\n' in page
