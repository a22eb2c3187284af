# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Retries with resume (``trainops_retries``, docs/failures.md "Retries"): whether a job that did not succeed is
relaunched from its latest checkpoint, and the table of its attempts.

The launch (roles/job/tasks/attempt.yml, next_attempt.yml) runs each attempt in its own experiment directory; the
collect of each attempt passes ``attempt`` to ``trainops.multinode.experiment`` (state=reported), which calls
:func:`record` here with the attempt's judged outcome: the attempt's row (run id, outcome, start step, end step, steps
lost), the rows of the attempts before it, and the decision. The rules, first that applies:

1. ``succeeded``: nothing to retry;
2. an outcome a retry cannot fix (_outcomes.RETRIED_OUTCOMES: only ``failed``, ``stalled`` and ``unreachable`` are
   retried; ``stopped`` by the user, ``timed_out`` are not);
3. a launch that failed before the job ran (``launch_errors``: bad input, a node that cannot start);
4. no retries left (``trainops_retries``);
5. a node that left the play (unreachable): a retry needs every node (spare nodes: not yet);
6. every rank failed on its own before its first step: the script fails the same way on every start (bad input, a
   script error);
7. the same node(s) failing the same way (exit code, signal, stall, unreachable) as in the attempt before;
8. else: retry.
"""

from __future__ import annotations

from ansible_collections.trainops.multinode.plugins.module_utils._outcomes import RETRIED_OUTCOMES
from ansible_collections.trainops.multinode.plugins.module_utils._stragglers import whole

RETRY = 'retry'
STOP = 'stop'

SPARES_NOTE = 'a retry needs every node (spare nodes: not yet)'


def node_cause(node, outcome, results, missing_nodes=()):
    """How ``node`` ended an attempt, in words that compare across attempts: ``exit code 1``, ``signal SIGKILL``,
    ``lost``, ``stalled``, ``unreachable``."""
    if node in (missing_nodes or ()) or outcome == 'unreachable':
        return 'unreachable'
    if outcome == 'stalled':
        return 'stalled'
    job = (results or {}).get(node) or {}
    if job.get('signal'):
        return 'signal %s' % job['signal']
    if job.get('status') == 'lost':
        return 'lost'
    if job.get('exit_code') is None:
        return 'status %s' % (job.get('status') or 'unknown')
    return 'exit code %s' % job['exit_code']


def failure(verdict, results, missing_nodes=()):
    """The attempt's failure as ``[[node, cause], ...]`` of its failed nodes (the cause of the outcome), sorted;
    empty when it succeeded."""
    if not verdict or verdict.get('outcome') == 'succeeded':
        return []
    return sorted([node, node_cause(node, verdict.get('outcome'), results, missing_nodes)]
                  for node in verdict.get('failed_nodes') or [])


def _failure_words(pairs):
    return ', '.join('%s %s' % (node, cause) for node, cause in pairs)


def row(number, run_id, experiment_dir, verdict, start_step, end_step, previous=None, failed_how=None):
    """One attempt's row: ``attempt``, ``run_id``, ``experiment_dir``, ``outcome``, ``outcome_detail``, ``start_step``
    (the checkpoint's global step it resumed from; 0 from scratch), ``end_step`` (the last step its metrics reached,
    None without metrics), ``steps_lost`` (the previous attempt's end step minus this start step; None for the first
    attempt or where a step is unknown) and ``failure`` (:func:`failure`)."""
    start_step = whole(start_step) or 0
    end_step = whole(end_step)
    lost = None
    if previous is not None:
        previous_end = whole(previous.get('end_step'))
        base = previous_end if previous_end is not None else whole(previous.get('start_step'))
        if base is not None:
            lost = max(0, base - start_step)
    verdict = verdict or {}
    return dict(attempt=int(number), run_id=run_id, experiment_dir=experiment_dir, outcome=verdict.get('outcome'),
                outcome_detail=verdict.get('outcome_detail'), start_step=start_step, end_step=end_step,
                steps_lost=lost, failure=list(failed_how or []))


def decide(current, previous, retries, verdict=None, missing_nodes=(), launch_errors=None):
    """Whether the attempt ``current`` (a :func:`row`) is retried: ``{'decision': 'retry' | 'stop' | None,
    'reason'}`` (None: it succeeded). ``previous``: the rows before it; ``retries``: trainops_retries (the attempts
    after the first); ``verdict``: _experiment.judge_results's; ``missing_nodes``: the nodes that left the play."""
    outcome = current.get('outcome')
    if outcome == 'succeeded':
        return dict(decision=None, reason='succeeded')
    if outcome not in RETRIED_OUTCOMES:
        return dict(decision=STOP, reason='outcome %s: not retried (only %s are)' % (outcome, ', '.join(RETRIED_OUTCOMES)))
    if launch_errors:
        return dict(decision=STOP, reason='the launch failed before the job ran (%s): a retry cannot fix that'
                    % ', '.join(sorted(launch_errors)))
    left = int(retries) - (int(current['attempt']) - 1)
    if left <= 0:
        return dict(decision=STOP, reason='no retries left (trainops_retries=%d)' % int(retries))
    gone = sorted(set(missing_nodes or ()))
    if gone:
        return dict(decision=STOP, reason='%s unreachable; %s' % (', '.join(gone), SPARES_NOTE))
    verdict = verdict or {}
    own = set(verdict.get('failed_nodes') or []) | set(verdict.get('also_failed') or [])
    everyone = set(verdict.get('nodes') or own)
    end_step = current.get('end_step')
    if (outcome == 'failed' and own and own >= everyone and not verdict.get('stopped_nodes')
            and (end_step is None or end_step <= current.get('start_step', 0))):
        return dict(decision=STOP, reason='every rank failed before its first step (%s): a retry would fail the same '
                    'way (bad input or a script error; see the logs)' % _failure_words(current.get('failure') or []))
    if previous:
        before = previous[-1]
        if current.get('failure') and [list(pair) for pair in before.get('failure') or []] == current['failure']:
            return dict(decision=STOP, reason='the same node failing twice the same way (%s in attempts %d and %d)'
                        % (_failure_words(current['failure']), before['attempt'], current['attempt']))
    return dict(decision=RETRY, reason='%s is retried (%d of %d retries left)' % (outcome, left, int(retries)))


def record(attempt, verdict, results, summary, missing_nodes=(), launch_errors=None):
    """What the collect of one attempt adds to its manifest, from the launch's ``attempt`` (``number``, ``first``,
    ``previous``, ``retries``, ``rows``: the attempts before, ``resumed_from``: the checkpoint it resumed, or None)
    and the judged ``verdict``, the nodes' ``results``, the metrics ``summary``: ``{attempt, first, previous,
    attempts (every row, this one last, each with its decision and reason), retry (this one's decision and reason)}``."""
    previous_rows = [dict(r) for r in attempt.get('rows') or []]
    resumed = attempt.get('resumed_from') or {}
    start_step = 0
    if resumed.get('path'):
        start_step = resumed.get('global_step')
        if start_step is None and previous_rows:
            # the resumed attempt wrote no checkpoint of its own (no checkpoint.json): the one it had resumed
            start_step = previous_rows[-1].get('start_step')
    verdict = dict(verdict or {}, nodes=sorted(results or {}))
    current = row(attempt['number'], attempt.get('run_id'), attempt.get('experiment_dir'), verdict, start_step,
                  (summary or {}).get('steps'), previous_rows[-1] if previous_rows else None,
                  failure(verdict, results, missing_nodes))
    retry = decide(current, previous_rows, attempt.get('retries') or 0, verdict, missing_nodes, launch_errors)
    current.update(retry)
    return dict(attempt=int(attempt['number']), first=attempt.get('first'), previous=attempt.get('previous'),
                attempts=previous_rows + [current], retry=retry)


def _step(value):
    return '?' if value is None else str(value)


def lines(rows, retries):
    """The summary's lines for the attempts (``attempt 1 : <run id> failed, steps 0 -> 12; retry: ...``)."""
    out = ['{0:<10} : {1} of at most {2} (trainops_retries={3})'.format('attempts', len(rows), int(retries) + 1,
                                                                        int(retries))]
    for one in rows:
        text = '%s %s, steps %s -> %s' % (
            one.get('run_id'), one.get('outcome'), _step(one.get('start_step')), _step(one.get('end_step')))
        if one.get('steps_lost') is not None:
            text += ', %d step(s) lost' % one['steps_lost']
        if one.get('decision'):
            text += '; %s: %s' % (one['decision'], one.get('reason'))
        out.append('{0:<10} : {1}'.format('attempt %d' % one['attempt'], text))
    return out
