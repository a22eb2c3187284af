# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The health check's filters: _health.next_step and _health.measurement for templates (the rules: test__health.py)."""

from __future__ import annotations

import json

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.filter import health_measurement, health_next, rank_zero_json


def test_health_next_first_step_and_bound():
    answer = health_next.health_next([], ['a', 'b', 'c'], None, 0.5, 8)
    assert answer['group'] == ['a', 'b', 'c'] and not answer['done']
    assert answer['max_steps'] == 5  # all nodes, 3 pairs, 1 re-measure
    assert health_next.FilterModule().filters() == {'health_next': health_next.health_next}


def test_health_next_bad_setting_is_a_filter_error():
    with pytest.raises(AnsibleFilterError, match='health_next: trainops_health_slow_ratio'):
        health_next.health_next([], ['a', 'b'], None, 2.0, 8)


def write_results(experiment, node, text):
    (experiment / 'outputs' / node).mkdir(parents=True, exist_ok=True)
    (experiment / 'outputs' / node / 'allreduce.json').write_text(text)
    (experiment / 'manifest.json').write_text(json.dumps({'nodes': [{'host': node, 'ranks': [0]}]}))
    return str(experiment)


def test_health_measurement(tmp_path):
    experiment = write_results(tmp_path, 'b', json.dumps({'avg_busbw_gbps': 1.5, 'results': [{'time_us': 9.0}]}))
    # allreduce.json of the node that ran rank 0 (the manifest says which)
    entry = health_measurement.health_measurement(['a', 'b'], {'outcome': 'succeeded'}, experiment)
    assert entry['ok'] and entry['busbw_gbps'] == 1.5 and entry['time_us'] == 9.0 and entry['experiment_dir'] == experiment
    none = health_measurement.health_measurement(['a', 'b'], {'outcome': 'failed'}, None)
    assert not none['ok'] and none['error'] == 'failed'
    with pytest.raises(AnsibleFilterError, match='list of the group'):
        health_measurement.health_measurement('a', {}, None)


@pytest.mark.parametrize('text, why', [
    ('{"avg_busbw_gbps": %s}' % ('9' * 400), 'a number beyond +-2**53 (400 digits)'),
    ('{"avg_busbw_gbps": 1.0, "results": %s}' % ('[' * 200000 + ']' * 200000), 'nesting deeper than 32 levels'),
    ('{"avg_busbw_gbps": NaN}', 'a number that is not finite (NaN)'),
    ('{"avg_busbw_gbps": 1.0, "wrong_total": 0', 'not JSON (Expecting \',\' delimiter)'),
])
def test_a_hostile_allreduce_json_is_a_failed_measurement_naming_node_and_file(tmp_path, text, why):
    experiment = write_results(tmp_path, 'b', text)
    entry = health_measurement.health_measurement(['a', 'b'], {'outcome': 'succeeded'}, experiment)
    assert not entry['ok'] and entry['busbw_gbps'] is None
    assert entry['error'] == 'b: allreduce.json refused: ' + why


def test_rank_zero_json_reads_the_file_of_rank_0_s_node_within_bounds(tmp_path):
    # playbooks/bench.yml publishes allreduce.json through it
    experiment = write_results(tmp_path, 'b', json.dumps({'avg_busbw_gbps': 1.5}))
    assert rank_zero_json.rank_zero_json(experiment, 'allreduce.json') == {'value': {'avg_busbw_gbps': 1.5}, 'refused': []}
    write_results(tmp_path, 'b', '{"world_size": 1e400}')
    assert rank_zero_json.rank_zero_json(experiment, 'allreduce.json') == {
        'value': None, 'refused': ['b: allreduce.json refused: a number that is not finite (1e400)']}
    assert rank_zero_json.rank_zero_json(experiment, 'none.json') == {'value': None, 'refused': []}
    with pytest.raises(AnsibleFilterError, match='rank_zero_json: '):
        rank_zero_json.rank_zero_json(experiment, '../manifest.json')
