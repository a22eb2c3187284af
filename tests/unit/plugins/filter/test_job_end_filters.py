# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The filters and tests that give roles/job the vocabulary of how a job ends (module_utils/_outcomes.py):
verdict_stop_reason (collect.yml's stop after the wait), outcome_collected (status.yml's collect of a job not collected
yet) and the tests outcome_succeeded, run_running, run_prepared and run_absent (plugins/test/outcome.py), called
directly and from a template as the role calls them."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleError, AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.trainops.multinode.plugins.filter import outcome_collected as collected_plugin
from ansible_collections.trainops.multinode.plugins.filter import verdict_stop_reason as stop_plugin
from ansible_collections.trainops.multinode.plugins.module_utils import _outcomes
from ansible_collections.trainops.multinode.plugins.test import outcome as outcome_tests


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


@pytest.mark.parametrize('value', list(_outcomes.OUTCOMES) + ['', None])
def test_outcome_succeeded_is_the_old_comparison(value):
    assert outcome_tests.TESTS['outcome_succeeded'](value) is (value == 'succeeded')


@pytest.mark.parametrize('value', list(_outcomes.RUN_STATUSES) + ['', None])
@pytest.mark.parametrize('name', ['running', 'prepared', 'absent'])
def test_run_status_tests_are_the_old_comparisons(value, name):
    # no status at all (a query without a job, an unreachable node's empty record) is absent, as status.yml's
    # default('absent') said
    assert outcome_tests.TESTS['run_' + name](value) is ((value or 'absent') == name)


def test_unknown_names_are_test_errors_naming_them():
    with pytest.raises(AnsibleFilterError, match="outcome_succeeded: 'done' is not an outcome"):
        outcome_tests.TESTS['outcome_succeeded']('done')
    with pytest.raises(AnsibleFilterError, match="run_running: 'gone' is not a run status"):
        outcome_tests.TESTS['run_running']('gone')
    assert set(outcome_tests.TestModule().tests()) == {'outcome_succeeded', 'run_running', 'run_prepared', 'run_absent'}


def test_fqcn_tests_as_the_role_calls_them(collection_finder):  # pylint: disable=unused-argument
    # sweep.yml: the points that did not succeed (one not run yet has no outcome)
    expression = "{{ points | rejectattr('outcome', 'trainops.multinode.outcome_succeeded') | map(attribute='index') | list }}"
    points = [{'index': 1, 'outcome': 'succeeded'}, {'index': 2, 'outcome': 'stalled'}, {'index': 3, 'outcome': None}]
    assert render(expression, {'points': points}) == [2, 3]
    assert render("{{ 'failed' is not trainops.multinode.outcome_succeeded }}", {}) is True
    # status.yml: collect once no node runs it and some node has it
    ended = ("{{ states | select('trainops.multinode.run_running') | list | length == 0 and "
             "states | reject('trainops.multinode.run_absent') | list | length > 0 }}")
    assert render(ended, {'states': ['exited', '', 'lost']}) is True
    assert render(ended, {'states': ['exited', 'running']}) is False
    assert render(ended, {'states': ['', 'absent']}) is False
    # start_srun.yml: a query that failed has no job
    assert render("{{ r.job.status | default('') is not trainops.multinode.run_prepared }}", {'r': {}}) is True
    with pytest.raises(AnsibleError, match="'done'"):
        render("{{ 'done' is trainops.multinode.outcome_succeeded }}", {})
