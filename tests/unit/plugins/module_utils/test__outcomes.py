# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The vocabulary of how a job ends (module_utils/_outcomes.py): every verdict and stop reason stands for exactly one
outcome, the mappings the wait, the collect and the judgment use, unknown names refused, and the documentation that
writes the names out held to the vocabulary."""

from __future__ import annotations

import os
import re

import pytest
import yaml

from ansible_collections.trainops.multinode.plugins.module_utils import _outcomes as oc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

# verdict: (outcome it stands for, the collect's stop reason, how a peer's wait names it, ends the job everywhere)
VERDICTS = {
    'succeeded': ('succeeded', 'peer', 'succeeded', False),
    'failed': ('failed', 'peer', 'failed', True),
    'stalled': ('stalled', 'peer', 'stalled', True),
    'gone': ('unreachable', 'unreachable', 'was unreachable too long', True),
    'stopped': ('failed', 'peer', 'stopped', False),
    'timed_out': ('timed_out', 'timeout', 'timed_out', False),
    'error': ('failed', 'peer', 'could not be queried', True),
    'running': ('running', 'peer', 'running', False),
    'unreachable': ('running', 'peer', 'unreachable', False),  # a status file's state only
}

# stop reason: (outcome it stands for, a cause of its own, the words of an outcome judged from the stop)
STOP_REASONS = {
    'user': ('stopped', True, 'by the user'),
    'peer': ('failed', False, None),
    'stalled': ('stalled', True, None),
    'unreachable': ('unreachable', True, None),
    'timeout': ('timed_out', True, "by the wait's time limit (trainops_wait_timeout)"),
    'undo': ('failed', False, None),
    'replaced': ('failed', False, None),
}

OUTCOMES = {'succeeded': True, 'failed': True, 'stalled': True, 'unreachable': True, 'stopped': True,
            'timed_out': True, 'interrupted': False, 'running': False}

UNKNOWN = ['bogus', 'Failed', 'timed out', 1, ['failed'], {'state': 'failed'}]


RUN_STATUSES = ['running', 'exited', 'lost', 'absent', 'prepared']


def test_the_tables_are_the_vocabulary():
    assert list(oc.RUN_STATUSES) == RUN_STATUSES
    assert oc.ENDED_STATUSES == ('exited', 'lost', 'absent')
    assert list(oc.VERDICTS) == list(VERDICTS)
    assert list(oc.STOP_REASONS) == list(STOP_REASONS)
    assert list(oc.OUTCOMES) == list(OUTCOMES)


@pytest.mark.parametrize('name', list(VERDICTS))
def test_every_verdict_maps_to_exactly_one_outcome(name):
    outcome, stop, words, ends_job = VERDICTS[name]
    assert oc.verdict(name) == name
    assert oc.verdict_outcome(name) == outcome and outcome in oc.OUTCOMES
    assert oc.collect_stop_reason(name) == stop and stop in oc.STOP_REASONS
    assert oc.peer_words(name) == words
    assert (name in oc.FAILED_STATES) is ends_job


@pytest.mark.parametrize('name', list(STOP_REASONS))
def test_every_stop_reason_maps_to_exactly_one_outcome(name):
    outcome, cause, words = STOP_REASONS[name]
    assert oc.stop_reason(name) == name
    assert oc.stop_outcome(name) == outcome and outcome in oc.OUTCOMES
    assert (name in oc.CAUSING_STOPS) is cause
    assert oc.stop_words(name) == words


@pytest.mark.parametrize('name', list(OUTCOMES))
def test_every_outcome_says_whether_it_was_collected(name):
    assert oc.outcome(name) == name
    assert oc.outcome_collected(name) is OUTCOMES[name]
    assert (name in oc.JUDGED_OUTCOMES) is OUTCOMES[name]


@pytest.mark.parametrize('name', UNKNOWN + ['', None])
@pytest.mark.parametrize('check', [oc.verdict, oc.verdict_state, oc.verdict_outcome, oc.peer_words, oc.stop_reason,
                                   oc.stop_outcome, oc.stop_words, oc.outcome, oc.outcome_collected])
def test_unknown_names_are_refused_naming_them(check, name):
    with pytest.raises(oc.OutcomeError, match=re.escape(repr(name))):
        check(name)


@pytest.mark.parametrize('name', UNKNOWN)
@pytest.mark.parametrize('check', [oc.collect_stop_reason, oc.decisive_outcome])
def test_no_verdict_is_allowed_where_a_node_may_have_none_but_an_unknown_one_is_not(check, name):
    with pytest.raises(oc.OutcomeError, match=re.escape(repr(name))):
        check(name)
    assert oc.collect_stop_reason('') == oc.collect_stop_reason(None) == 'peer'
    assert oc.decisive_outcome('') is None and oc.decisive_outcome(None) is None


def test_a_status_files_state_is_no_verdict():
    assert oc.VERDICT_STATES == ('succeeded', 'failed', 'stalled', 'gone', 'stopped', 'timed_out', 'error', 'running')
    with pytest.raises(oc.OutcomeError, match="'unreachable' is a status file's state"):
        oc.verdict_state('unreachable')


def test_old_jinja_mapping_of_the_collect_is_the_vocabularys():
    """roles/job/tasks/collect.yml mapped the wait's verdict to its stop reason in Jinja before; the vocabulary gives
    the same reason for every verdict and for none."""
    def old(verdict):
        return 'unreachable' if verdict == 'gone' else 'timeout' if verdict == 'timed_out' else 'peer'
    for name in list(oc.VERDICTS) + ['', None]:
        assert oc.collect_stop_reason(name) == old(name)


def test_the_judgment_reads_stalled_and_unreachable_from_the_wait_and_user_and_timeout_from_the_stop():
    decisive = dict((name, oc.decisive_outcome(name)) for name in oc.VERDICTS if oc.decisive_outcome(name))
    assert decisive == {'stalled': 'stalled', 'gone': 'unreachable'}
    # a stop reason the judgment takes from the wait's verdict has a decisive verdict for the same outcome
    from_verdict = sorted(oc.stop_outcome(n) for n, row in oc.STOP_REASONS.items() if row['judged_from'] == 'verdict')
    assert from_verdict == sorted(decisive.values())
    assert [n for n, row in oc.STOP_REASONS.items() if row['judged_from'] == 'stop'] == ['user', 'timeout']
    assert all(row['judged_from'] in ('run', 'verdict', 'stop', 'cause') for row in oc.STOP_REASONS.values())
    # a consequence of another node's end is not a cause of its own
    assert all(not row['cause'] for row in oc.STOP_REASONS.values() if row['judged_from'] == 'cause')


def test_the_torchrun_module_takes_every_reason_but_replaced():
    assert oc.ASKED_STOP_REASONS == ('user', 'peer', 'stalled', 'unreachable', 'timeout', 'undo')


# --- the documentation that writes the names out --------------------------------------------------------------------

def documented_values(text):
    return set(re.findall(r'V\(([a-z_]+)\)', text))


def test_the_torchrun_module_documents_the_run_statuses():
    from ansible_collections.trainops.multinode.plugins.modules import torchrun
    described = ' '.join(yaml.safe_load(torchrun.RETURN)['job']['contains']['status']['description'])
    assert documented_values(described) == set(oc.RUN_STATUSES)
    assert oc.run_status('lost') == 'lost'
    with pytest.raises(oc.OutcomeError, match="'failed' is not a run status"):
        oc.run_status('failed')


def test_torchrun_wait_documents_the_verdicts():
    from ansible_collections.trainops.multinode.plugins.modules import torchrun_wait
    returned = yaml.safe_load(torchrun_wait.RETURN)
    assert documented_values(' '.join(returned['verdict']['contains']['state']['description'])) == set(oc.VERDICT_STATES)
    assert documented_values(returned['peer_failures']['contains']['state']['description']) == set(oc.FAILED_STATES)


def test_experiment_documents_the_outcomes_it_judges():
    from ansible_collections.trainops.multinode.plugins.modules import experiment
    described = ' '.join(yaml.safe_load(experiment.RETURN)['outcome']['description'])
    assert documented_values(described) == set(oc.JUDGED_OUTCOMES)


def test_docs_failures_outcome_table_names_every_outcome():
    with open(os.path.join(ROOT, 'docs', 'failures.md')) as handle:
        text = handle.read()
    table = [line for line in text.splitlines() if re.match(r'^\| `[a-z_]+`', line)]
    assert set(re.match(r'^\| `([a-z_]+)`', line).group(1) for line in table) == set(oc.OUTCOMES)
