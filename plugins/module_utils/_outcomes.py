# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""How a job ends: the one vocabulary of the nodes' run statuses, the wait's verdicts, the stop reasons and the
experiment's outcomes.

Three records say how a job ended, each with its own names, all defined here (docs/failures.md), from what each node's
run record says (its **status**: the ``torchrun`` module's ``job.status``, ``RUN_STATUSES``):

- the wait's **verdict** on each node (``torchrun_wait``: its ``verdict.state``, and the ``state`` of the node's
  status file in ``<experiment>/.wait/`` that the other nodes' waits read);
- the **stop reason** a node's run records in ``stop.json`` when it is stopped (the ``torchrun`` module's
  ``stop_reason``; the first stop's reason is kept);
- the experiment's **outcome** (``manifest.json``, ``summary.txt``, the playbook's stats), judged from every node's
  run record, stop record and verdict by ``_judgment.judge_results``.

Every verdict and every stop reason stands for exactly one outcome (``outcome``). A cause of its own stands for the
outcome it is; a consequence of another node's end (a ``peer`` stop, a ``stopped`` verdict) stands for ``failed``,
which the judgment replaces by the cause's outcome where the cause is known. Where the judgment takes an outcome
from (``judged_from``): ``run`` the node's run record, ``verdict`` the wait's verdict and its detail, ``stop`` the
first stop record that is a cause of its own, ``cause`` the node that caused it. The precedence of those rules is
the judgment's (``_judgment.judge_results``); what each name means and stands for is here, nowhere else.

Adding an outcome, a verdict or a stop reason: a row here; the judgment's rule in ``_judgment.judge_results`` when
the outcome needs one; the wait's detection in ``plugins/action/torchrun_wait.py`` when a verdict needs one; and the
documentation the unit tests hold to these rows (the modules' DOCUMENTATION and RETURN, docs/failures.md).
"""

from __future__ import annotations


class OutcomeError(ValueError):
    """A name that is not in the vocabulary (a verdict, stop reason or outcome defined nowhere here)."""


def _names_where(table, column, value=True):
    """The names of ``table``'s rows, in its order, whose ``column`` is truthy (``value=True``) or falsy (a missing
    column is falsy)."""
    return tuple(name for name, row in table.items() if bool(row.get(column)) is value)


# ---------------------------------------------------------------------------
# outcomes: the experiment's manifest.json ``outcome``
# ---------------------------------------------------------------------------

SUCCEEDED = 'succeeded'
RUNNING = 'running'
INTERRUPTED = 'interrupted'

OUTCOMES = {
    SUCCEEDED: dict(meaning="every node's torchrun exited 0", collected=True, retried=False),
    'failed': dict(meaning="a node's job failed on its own before anyone stopped the job (or ended with another "
                           "non-zero exit), or the launch failed before the job ran everywhere (launch_errors)",
                   collected=True, retried=True),
    'stalled': dict(meaning="a node's job wrote no new log output for trainops_stall_timeout seconds", collected=True,
                    retried=True),
    'unreachable': dict(meaning='a node answered no query for trainops_unreachable_grace seconds, or could not be '
                                'reached at the end', collected=True, retried=True),
    'stopped': dict(meaning='the user stopped it (playbooks/stop.yml)', collected=True, retried=False),
    'timed_out': dict(meaning="the wait's own limit trainops_wait_timeout ran out, or (launcher=srun) Slurm ended the "
                              "step at a time limit", collected=True, retried=False),
    INTERRUPTED: dict(meaning='the controller went away during the wait (Ctrl-C); the job may still run, '
                              'playbooks/status.yml collects it once it has ended', collected=False, retried=False),
    RUNNING: dict(meaning='launched and not collected yet', collected=False, retried=False),
}
"""Every outcome an experiment's manifest can hold. ``collected``: false for a job that has not been collected yet,
which ``playbooks/status.yml`` collects once it has ended everywhere. ``retried``: a launch with retries left
relaunches a job that ended so from its latest checkpoint (module_utils/_retries.py, docs/failures.md "Retries")."""

JUDGED_OUTCOMES = _names_where(OUTCOMES, 'collected')
"""The outcomes the judgment gives a collected job (``_judgment.judge_results``)."""

RETRIED_OUTCOMES = _names_where(OUTCOMES, 'retried')
"""The outcomes a retry may fix (``failed``, ``stalled``, ``unreachable``); the others end the retries."""


def outcome(name):
    """``name`` when it is an outcome, else OutcomeError naming it."""
    return _known(OUTCOMES, name, 'an outcome')


def outcome_is(value, name):
    """Whether ``value`` is the outcome ``name``. None or empty is no outcome yet (a sweep's point that has not run):
    false. Either one that is not an outcome raises OutcomeError naming it."""
    outcome(name)
    return bool(value) and outcome(value) == name


def outcome_collected(name):
    """Whether an experiment with outcome ``name`` was collected (false for ``running`` and ``interrupted``)."""
    return OUTCOMES[outcome(name)]['collected']


# ---------------------------------------------------------------------------
# verdicts: what the wait judged on a node (torchrun_wait's verdict.state, its status file's state)
# ---------------------------------------------------------------------------

VERDICTS = {
    'succeeded': dict(meaning="the node's run exited 0", outcome='succeeded', ends_job=False, decisive=False,
                      collect_stop='peer'),
    'failed': dict(meaning="the node's run ended badly: an exit code other than 0, a signal, lost, or absent",
                   outcome='failed', ends_job=True, decisive=False, collect_stop='peer', peer_words='failed'),
    'stalled': dict(meaning='the run wrote no new output for stall_timeout seconds; the wait stopped it (stop reason '
                            'stalled)', outcome='stalled', ends_job=True, decisive=True, collect_stop='peer',
                    peer_words='stalled'),
    'gone': dict(meaning='the node answered no query for unreachable_grace seconds', outcome='unreachable',
                 ends_job=True, decisive=True, collect_stop='unreachable', peer_words='was unreachable too long'),
    'stopped': dict(meaning='stopped because another node failed, stalled or was gone (stop reason peer), or ended by '
                            'Slurm because of one (launcher=srun)', outcome='failed', ends_job=False, decisive=False,
                    collect_stop='peer'),
    'timed_out': dict(meaning="the wait's timeout ran out (nothing stopped; the collect stops it, stop reason "
                              "timeout)", outcome='timed_out', ends_job=False, decisive=False, collect_stop='timeout'),
    'error': dict(meaning='the node answered but its run could not be queried', outcome='failed', ends_job=True,
                  decisive=False, collect_stop='peer', peer_words='could not be queried'),
    'running': dict(meaning='check mode: the run was queried once and is not waited for', outcome=RUNNING,
                    ends_job=False, decisive=False, collect_stop='peer'),
    'unreachable': dict(meaning='no answer yet, within unreachable_grace: the other nodes keep running (a status '
                                "file's state only, never a verdict)", outcome=RUNNING, ends_job=False,
                        decisive=False, collect_stop='peer', published_only=True),
}
"""The wait's verdicts and status-file states. ``outcome``: the outcome it stands for; ``ends_job``: a node whose
status file says so ends the job on every other node; ``decisive``: the judgment takes the outcome from the verdict
(with its detail) ahead of the stop records; ``collect_stop``: the stop reason the collect records on the node when
the job is stopped after the wait (roles/job/tasks/collect.yml; the first stop's reason is kept on the node);
``peer_words``: how another node's wait names it (``stopped because node1 (rank 1) failed``);
``published_only``: a status file's state that is never a verdict."""

VERDICT_STATES = _names_where(VERDICTS, 'published_only', False)
"""The names the wait's ``verdict.state`` takes."""

FAILED_STATES = frozenset(_names_where(VERDICTS, 'ends_job'))
"""States in a node's status file that end the job on every node (``unreachable`` alone does not)."""

UNSETTLED_STATES = frozenset([RUNNING, 'unreachable'])
"""States in a node's status file while its wait goes on (every other state says how the node ended, or that it
stalled)."""

HUNG_STATES = frozenset(['stalled'])
"""Verdict states that leave the ranks where a hang holds them: before the wait stops them (here, or on the other
nodes), every rank's Python stack is dumped (module_utils/_stacks.py)."""

DUMPED_STOPS = frozenset(['peer'])
"""Stop reasons whose stop dumps every rank's Python stack first (module_utils/_stacks.py), whoever asks for it: a node
stopped because a peer failed still has its ranks alive, and the peer may have failed because one of them hung (its
collective timed out waiting for that rank); where they stand says which."""


def verdict(name):
    """``name`` when it is a verdict or a status file's state, else OutcomeError naming it."""
    return _known(VERDICTS, name, 'a wait verdict')


def verdict_state(name):
    """``name`` when it is a verdict the wait returns (``verdict.state``), else OutcomeError naming it."""
    if verdict(name) not in VERDICT_STATES:
        raise OutcomeError('%r is a status file\'s state, not a wait verdict (%s)' % (name, ', '.join(VERDICT_STATES)))
    return name


def verdict_outcome(name):
    """The outcome verdict ``name`` stands for."""
    return VERDICTS[verdict(name)]['outcome']


def decisive_outcome(name):
    """The outcome the judgment takes from verdict ``name`` ahead of the stop records (``stalled``, ``gone``), None
    for a verdict the judgment reads from the run records instead, or for no verdict (None, empty)."""
    if not name:
        return None
    row = VERDICTS[verdict(name)]
    return row['outcome'] if row['decisive'] else None


def peer_words(name):
    """How a node's wait names another node that is in state ``name`` (``failed``, ``was unreachable too long``)."""
    return VERDICTS[verdict(name)].get('peer_words') or name


def collect_stop_reason(name):
    """The stop reason the collect records on a node whose wait gave verdict ``name`` (None or empty: the node has
    no verdict, it is stopped because another node failed, ``peer``)."""
    if not name:
        return 'peer'
    return VERDICTS[verdict(name)]['collect_stop']


# ---------------------------------------------------------------------------
# stop reasons: why a run was stopped (its stop.json ``reason``)
# ---------------------------------------------------------------------------

STOP_REASONS = {
    'user': dict(meaning='the user asked (playbooks/stop.yml)', outcome='stopped', cause=True, judged_from='stop',
                 words='by the user', asked=True),
    'peer': dict(meaning='another node of the job failed, stalled or was unreachable too long', outcome='failed',
                 cause=False, judged_from='cause', asked=True),
    'stalled': dict(meaning='no new output for too long', outcome='stalled', cause=True, judged_from='verdict',
                    asked=True),
    'unreachable': dict(meaning='a node could not be reached for too long', outcome='unreachable', cause=True,
                        judged_from='verdict', asked=True),
    'timeout': dict(meaning="the wait gave up (trainops_wait_timeout), or Slurm ended the step at a time limit "
                            "(by: slurm)", outcome='timed_out', cause=True, judged_from='stop',
                    words="by the wait's time limit (trainops_wait_timeout)", asked=True),
    'undo': dict(meaning='a partial launch is undone', outcome='failed', cause=False, judged_from='cause', asked=True),
    'replaced': dict(meaning='replaced by a run started with replace=true', outcome='failed', cause=False,
                     judged_from='cause', asked=False),
}
"""Why a run was stopped. ``outcome``: the outcome it stands for; ``cause``: a cause of its own (a ``peer`` stop is the
consequence of another node's failure, ``undo`` and ``replaced`` of the launch's); ``judged_from``: see the module's
docstring, ``words``: how the outcome line says it for a stop the judgment takes the outcome from (``stopped by the
user at ...``); ``asked``: the torchrun module's ``stop_reason`` takes it (``replaced`` only ``replace=true``
records)."""

ASKED_STOP_REASONS = _names_where(STOP_REASONS, 'asked')
"""The torchrun module's ``stop_reason`` choices."""

CAUSING_STOPS = _names_where(STOP_REASONS, 'cause')
"""Stop reasons that are a cause of their own; a ``peer`` stop is the consequence of another node's failure."""


def stop_reason(name):
    """``name`` when it is a stop reason, else OutcomeError naming it."""
    return _known(STOP_REASONS, name, 'a stop reason')


def stop_outcome(name):
    """The outcome stop reason ``name`` stands for."""
    return STOP_REASONS[stop_reason(name)]['outcome']


def stop_words(name):
    """``by the user`` for a stop the judgment takes the outcome from (``user``, ``timeout``), else None."""
    row = STOP_REASONS[stop_reason(name)]
    return row.get('words') if row['judged_from'] == 'stop' else None


# ---------------------------------------------------------------------------
# run statuses: what a node's own run record says (the torchrun module's job.status)
# ---------------------------------------------------------------------------

STATUS_RUNNING = 'running'
STATUS_EXITED = 'exited'
STATUS_LOST = 'lost'
STATUS_ABSENT = 'absent'
STATUS_PREPARED = 'prepared'

RUN_STATUSES = {
    STATUS_RUNNING: 'its supervisor is alive',
    STATUS_EXITED: "torchrun ended and the supervisor wrote exit.json (its exit code or signal)",
    STATUS_LOST: 'the supervisor is gone without writing exit.json (killed, or the node rebooted)',
    STATUS_ABSENT: 'there is no such run on the node',
    STATUS_PREPARED: 'state=prepared wrote it and its launcher has not started its supervisor yet (a Slurm step)',
}
"""A node's run statuses (the torchrun module's ``job.status``; module_utils/_torchrun.py decides them)."""

ENDED_STATUSES = (STATUS_EXITED, STATUS_LOST, STATUS_ABSENT)
"""The statuses of a run that no longer runs on the node; the wait judges them (``succeeded`` or ``failed``)."""


def run_status(name):
    """``name`` when it is a run status, else OutcomeError naming it."""
    return _known(RUN_STATUSES, name, 'a run status')


def run_status_is(value, name):
    """Whether a node's run status ``value`` is ``name``. None or empty (a query that returned no job, a node that
    was not queried) is ``absent``: no such run on the node. Either one that is not a run status raises OutcomeError
    naming it."""
    run_status(name)
    return run_status(value or STATUS_ABSENT) == name


def _known(table, name, what):
    if not isinstance(name, str) or name not in table:
        raise OutcomeError('%r is not %s (%s)' % (name, what, ', '.join(table)))
    return name
