# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The health check's filters: _health.next_step and _health.measurement for templates (the rules: test__health.py)."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.filter import health_measurement, health_next


def test_health_next_first_step_and_bound():
    answer = health_next.health_next([], ['a', 'b', 'c'], None, 0.5, 8)
    assert answer['group'] == ['a', 'b', 'c'] and not answer['done']
    assert answer['max_steps'] == 4
    assert health_next.FilterModule().filters() == {'health_next': health_next.health_next}


def test_health_next_bad_setting_is_a_filter_error():
    with pytest.raises(AnsibleFilterError, match='health_next: trainops_health_slow_ratio'):
        health_next.health_next([], ['a', 'b'], None, 2.0, 8)


def test_health_measurement():
    entry = health_measurement.health_measurement(['a', 'b'], {'outcome': 'succeeded'},
                                                  {'avg_busbw_gbps': 1.5, 'results': [{'time_us': 9.0}]}, '/e')
    assert entry['ok'] and entry['busbw_gbps'] == 1.5 and entry['time_us'] == 9.0
    with pytest.raises(AnsibleFilterError, match='list of the group'):
        health_measurement.health_measurement('a', {}, None)
