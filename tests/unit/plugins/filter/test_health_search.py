# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter health_search: the health check's settings and search, one step at a time, each measurement read from its
run's experiment directory within bounds (the search's rules: test__health.py)."""

from __future__ import annotations

import json

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.filter.health_search import FilterModule, health_search

ORDER = {'nodes': ['a', 'b', 'c'], 'master': 'a', 'master_addr': '10.0.0.1'}
HOSTVARS = {'a': {'trainops_master_addr': '10.0.0.1', 'trainops_node': {'network': {'address': '10.1.0.1'}}},
            'b': {'trainops_node': {'network': {'address': '10.1.0.2'}}},
            'c': {'trainops_node': {'network': {'address': '10.1.0.3'}}}}


def run(tmp_path, name, outcome='succeeded', busbw=1.5, nodes=('a', 'b')):
    """An experiment directory as a measurement's run leaves it: manifest.json and rank 0's allreduce.json."""
    path = tmp_path / name
    (path / 'outputs' / nodes[0]).mkdir(parents=True)
    (path / 'manifest.json').write_text(json.dumps({'outcome': outcome, 'outcome_detail': 'exit 3' if outcome != 'succeeded' else None,
                                                   'nodes': [{'host': nodes[0], 'ranks': [0]}, {'host': nodes[1], 'ranks': [1]}]}))
    (path / 'outputs' / nodes[0] / 'allreduce.json').write_text(json.dumps({'avg_busbw_gbps': busbw, 'results': [{'time_us': 7.0}]}))
    return str(path)


def test_the_search_starts_with_the_settings_checked_and_its_loop_s_steps():
    state = health_search(ORDER, '', '0.5', '8', '30')
    assert state['settings'] == {'min_busbw': None, 'slow_ratio': 0.5, 'all_pairs_max': 8, 'timeout': 30}
    assert (state['measured'], state['measuring'], state['steps']) == ([], False, [1, 2, 3, 4, 5, 6])
    assert health_search(ORDER, '150', 0.5, 8, 30)['settings']['min_busbw'] == 150.0
    assert FilterModule().filters() == {'health_search': health_search}


@pytest.mark.parametrize('knobs', [(0, 0.5, 8, 30), ('x', 0.5, 8, 30), (None, 1, 8, 30), (None, 0.5, 1, 30),
                                   (None, 0.5, 8, 9), (None, 'nan', 8, 30), (None, True, 8, 30)])
def test_a_setting_out_of_range_names_every_knob_and_its_range(knobs):
    with pytest.raises(AnsibleFilterError, match=r'^Not checking: trainops_health_min_busbw=%s \(GB/s above 0, or null\), '
                       r'trainops_health_slow_ratio=%s \(between 0 and 1\), trainops_health_all_pairs_max=%s \(2 or more\), '
                       r'trainops_health_timeout=%s \(10 s or more\): fix the one that is out of range.$' % knobs):
        health_search(ORDER, *knobs)


def test_each_step_adds_the_run_s_measurement_and_gives_the_next_group_s_rank_order(tmp_path):
    state = health_search(ORDER, None, 0.5, 8, 30)
    state = health_search(state, hostvars=HOSTVARS, experiment_dir='/nonexistent', error='')
    # nothing was being measured: nothing added; the first group is every node, with the job's master and address
    assert state['measured'] == [] and state['measuring'] and state['next']['group'] == ['a', 'b', 'c']
    assert state['name'] == 'step01_3nodes' and state['order']['master_addr'] == '10.0.0.1'
    state = health_search(state, hostvars=HOSTVARS, experiment_dir=run(tmp_path, 'all', 'failed', nodes=('a', 'b')), error='')
    assert state['measured'][0]['ok'] is False and state['measured'][0]['error'] == 'failed: exit 3'
    assert state['next']['group'] == ['a', 'b'] and state['name'] == 'step02_2nodes'
    for name, group in (('ab', ('a', 'b')), ('ac', ('a', 'c'))):
        state = health_search(state, hostvars=HOSTVARS, experiment_dir=run(tmp_path, name, nodes=group), error='')
    # the pair b, c has not the job's master: it meets at b's own address toward the master
    assert state['next']['group'] == ['b', 'c'] and state['order']['master'] == 'b'
    assert state['order']['master_addr'] == '10.1.0.2' and state['order']['ranks'] == {'b': 0, 'c': 1}
    assert state['measured'][1]['busbw_gbps'] == 1.5 and state['measured'][1]['time_us'] == 7.0


def test_a_run_without_a_manifest_or_with_a_hostile_one_is_a_failed_measurement(tmp_path):
    state = health_search(health_search(ORDER, None, 0.5, 8, 30), hostvars=HOSTVARS, experiment_dir=None, error='')
    after = health_search(state, hostvars=HOSTVARS, experiment_dir=None, error='the start failed')
    assert after['measured'][0]['error'] == 'failed: the start failed'
    after = health_search(state, hostvars=HOSTVARS, experiment_dir=str(tmp_path), error='')
    assert after['measured'][0]['error'] == 'failed: no manifest written'
    (tmp_path / 'manifest.json').write_text('{"outcome": "succeeded", "x": %s}' % ('[' * 100 + ']' * 100))
    after = health_search(state, hostvars=HOSTVARS, experiment_dir=str(tmp_path), error='')
    assert after['measured'][0]['error'] == 'failed: manifest.json refused: nesting deeper than 32 levels'


def test_a_group_master_without_an_address_toward_the_master_is_a_filter_error():
    state = health_search({'nodes': ['b', 'c'], 'master': 'a'}, None, 0.5, 8, 30)
    with pytest.raises(AnsibleFilterError, match=r'health_search: b has no address toward the master'):
        health_search(state, hostvars={'b': {}, 'c': {}}, experiment_dir=None, error='')
    with pytest.raises(AnsibleFilterError, match='the input must be the rank order or the search'):
        health_search(['a'])
    with pytest.raises(AnsibleFilterError, match='needs hostvars'):
        health_search(state)


@pytest.mark.parametrize('count', [2, 3, 5, 9])
def test_the_loop_s_steps_measure_every_group_of_a_worst_search_and_add_the_last(tmp_path, count):
    """Every group with the last node fails (each pair re-measured): the loop (health_step.yml) ends with the search
    done and every measurement added."""
    nodes = ['n%d' % i for i in range(count)]
    hostvars = dict((n, {'trainops_node': {'network': {'address': '10.0.0.%d' % i}}}) for i, n in enumerate(nodes))
    state = health_search({'nodes': nodes, 'master': 'n0'}, None, 0.5, 8, 30)
    run_dir = None
    for step in state['steps']:
        state = health_search(state, hostvars=hostvars, experiment_dir=run_dir, error='')
        if state['measuring']:
            group = state['next']['group']
            run_dir = run(tmp_path, 'step%d' % step, 'failed' if nodes[-1] in group else 'succeeded', nodes=group[:2])
    assert not state['measuring'] and state['next']['done']
    assert state['next']['suspects'][0]['node'] in (nodes[-1], 'n0<->n1'), state['next']['suspects']
    assert 1 < len(state['measured']) <= len(state['steps']) - 1
