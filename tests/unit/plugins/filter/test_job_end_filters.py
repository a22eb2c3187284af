# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The filters that give roles/job the vocabulary of how a job ends (module_utils/_outcomes.py): verdict_stop_reason
(collect.yml's stop after the wait) and outcome_collected (status.yml's collect of a job not collected yet), called
directly and from a template as the role calls them."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleError, AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.trainops.multinode.plugins.filter import outcome_collected as collected_plugin
from ansible_collections.trainops.multinode.plugins.filter import verdict_stop_reason as stop_plugin
from ansible_collections.trainops.multinode.plugins.module_utils import _outcomes


def render(expression, variables):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expression))


@pytest.mark.parametrize('verdict', list(_outcomes.VERDICTS) + ['', None])
def test_verdict_stop_reason_is_the_old_jinja_mapping(verdict):
    old = 'unreachable' if verdict == 'gone' else 'timeout' if verdict == 'timed_out' else 'peer'
    assert stop_plugin.verdict_stop_reason(verdict) == old
    assert stop_plugin.FilterModule().filters()['verdict_stop_reason'] is stop_plugin.verdict_stop_reason


@pytest.mark.parametrize('outcome', list(_outcomes.OUTCOMES))
def test_outcome_collected(outcome):
    assert collected_plugin.outcome_collected(outcome) is (outcome not in ('running', 'interrupted'))
    assert collected_plugin.FilterModule().filters()['outcome_collected'] is collected_plugin.outcome_collected


def test_unknown_names_are_filter_errors_naming_them():
    with pytest.raises(AnsibleFilterError, match="verdict_stop_reason: 'bogus' is not a wait verdict"):
        stop_plugin.verdict_stop_reason('bogus')
    with pytest.raises(AnsibleFilterError, match="outcome_collected: 'done' is not an outcome"):
        collected_plugin.outcome_collected('done')


def test_fqcn_filters_as_the_role_calls_them(collection_finder):  # pylint: disable=unused-argument
    # collect.yml: a node whose wait gave up past the grace, one the wait stopped, one without a wait
    expression = "{{ __trainops_waited.verdict.state | default('') | trainops.multinode.verdict_stop_reason }}"
    assert render(expression, {'__trainops_waited': {'verdict': {'state': 'gone'}}}) == 'unreachable'
    assert render(expression, {'__trainops_waited': {'verdict': {'state': 'stopped'}}}) == 'peer'
    assert render(expression, {}) == 'peer'
    # status.yml: a manifest without an outcome is a running job's
    expression = "{{ not (manifest.outcome | default('running') | trainops.multinode.outcome_collected) }}"
    assert render(expression, {'manifest': {}}) is True
    assert render(expression, {'manifest': {'outcome': 'interrupted'}}) is True
    assert render(expression, {'manifest': {'outcome': 'failed'}}) is False
    with pytest.raises(AnsibleError, match="'done'"):
        render(expression, {'manifest': {'outcome': 'done'}})
