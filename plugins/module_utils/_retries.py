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
4. a job that finished its work and died on the way out (the verdict's ``unclean_exit``, module_utils/
   _retry_policy.py);
5. no retries left (``trainops_retries``);
6. the user's policy (``trainops_retry_policy``: exit codes, log patterns) lists a failed node's failure as fatal;
7. every rank failed on its own before its first step (no end step past the start step) and the failure is a script
   error (the same exception line at the end of every failed node's log) or nothing in the failed nodes' logs looks
   like infrastructure (a signal, a collective timeout, NCCL/gloo errors): the script fails the same way on every
   start. A failure the user's policy lists as retryable skips this rule;
8. a node judged bad - unreachable at the end of the attempt (the collect could not reach it), or the culprit of the
   same failure (exit code, signal, stall, unreachable) as in the attempt before - is left out of the next attempt
   (:func:`replace`): the first unused spare node (``trainops_spare_nodes``) takes its place with the same node rank
   (node rank 0 too: the master moves), or without a spare the job goes on with the nodes left where
   ``trainops_min_nodes`` (above 0) allows it; else it stops, naming what is missing. Without spare nodes and
   ``trainops_min_nodes`` (the default), the same failure twice stops with ``the same node failing twice the same
   way``. With ``trainops_exclude_after``, a node of the attempt that failed that many times (module_utils/
   _node_failures.py: in this launch and earlier launches of the same inventory) is judged bad too;
9. on the same nodes, ``trainops_retries_without_progress`` (0: no limit) attempts in a row whose end step did not
   move past the attempt before's;
10. else: retry.

The next attempt's node set, where it differs, comes with a retry (:func:`decide`: ``nodes``, ``spares``,
``replaced``, ``excluded``); every row records its attempt's ``nodes`` and ``replaced``.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.trainops.multinode.plugins.module_utils import _launchers, _node_failures, _retry_policy
from ansible_collections.trainops.multinode.plugins.module_utils._outcomes import RETRIED_OUTCOMES, STATUS_LOST
from ansible_collections.trainops.multinode.plugins.module_utils._stragglers import whole

RETRY = 'retry'
STOP = 'stop'


def spare_pool(nodes, spare_group, group_hosts, min_nodes=0, play_hosts=None, launcher=_launchers.DEFAULT):
    """The spare nodes of a launch (``trainops_spare_nodes``: the inventory group ``spare_group``, whose hosts are
    ``group_hosts``, None where the inventory has no such group) and what does not fit, checked before any node is
    touched (roles/job/tasks/nodes.yml): ``{'spares': [...], 'problems': [one line per value to fix]}``. ``nodes``:
    the job's nodes; ``min_nodes``: ``trainops_min_nodes``; ``play_hosts``: the play's hosts (the spares must be in the
    play: playbooks/launch.yml adds the group to its hosts)."""
    problems, spares = [], []
    nodes = list(nodes or ())
    try:
        least = int(min_nodes if min_nodes not in (None, '') else 0)
    except (TypeError, ValueError):
        least = None
    if least is None or least < 0 or isinstance(min_nodes, bool):
        problems.append('trainops_min_nodes=%r: give a whole number of nodes, 0 (all the job\'s nodes are needed) or '
                        'more' % (min_nodes, ))
    elif least > len(nodes):
        problems.append('trainops_min_nodes=%d: more than the job\'s %d node(s) (%s)'
                        % (least, len(nodes), ', '.join(nodes)))
    if not spare_group:
        return dict(spares=spares, problems=problems)
    if not isinstance(spare_group, str):
        problems.append('trainops_spare_nodes=%r: give the name of an inventory group' % (spare_group, ))
        return dict(spares=spares, problems=problems)
    if group_hosts is None:
        problems.append('trainops_spare_nodes=%s: no such group in the inventory' % spare_group)
        return dict(spares=spares, problems=problems)
    for host in group_hosts:
        if host not in spares:
            spares.append(host)
    both = [host for host in spares if host in nodes]
    if both:
        problems.append('trainops_spare_nodes=%s: %s also a node of the job; a spare must not be one'
                        % (spare_group, ', '.join(both) + (' is' if len(both) == 1 else ' are')))
    if not spares:
        problems.append('trainops_spare_nodes=%s: the group has no hosts' % spare_group)
    outside = [host for host in spares if play_hosts is not None and host not in play_hosts]
    if outside:
        problems.append('trainops_spare_nodes=%s: %s not in the play (playbooks/launch.yml adds the group to its '
                        'hosts where it is given with -e, not in the inventory)' % (spare_group, ', '.join(outside)))
    chosen = _launchers.get(launcher)
    if chosen is None or not chosen.supports_spares:
        why = ' (%s)' % chosen.no_spares_why if chosen is not None and chosen.no_spares_why else ''
        problems.append('trainops_spare_nodes=%s: spare nodes need launcher=%s%s, not %s'
                        % (spare_group, ' or '.join(_launchers.SPARE_NAMES), why, launcher))
    return dict(spares=[host for host in spares if host not in nodes], problems=problems)


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
    if job.get('status') == STATUS_LOST:
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


def row(number, run_id, experiment_dir, verdict, start_step, end_step, previous=None, failed_how=None, nodes=None,
        replaced=None):
    """One attempt's row: ``attempt``, ``run_id``, ``experiment_dir``, ``outcome``, ``outcome_detail``, ``start_step``
    (the checkpoint's global step it resumed from; 0 from scratch), ``end_step`` (the last step its metrics reached,
    None without metrics), ``steps_lost`` (the previous attempt's end step minus this start step; None for the first
    attempt or where a step is unknown), ``failure`` (:func:`failure`), ``nodes`` (its nodes in rank order; None where
    the launch did not say) and ``replaced`` (the nodes it ran without, :func:`replace`'s, [] for none)."""
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
                steps_lost=lost, failure=list(failed_how or []), nodes=list(nodes) if nodes is not None else None,
                replaced=[dict(r) for r in replaced or []])


HUNG_BLAME = ('stacks', 'heartbeat')
"""How a verdict found a hung rank's node (_judgment.judge_results' ``blame``): a retry leaves that node out when a spare
can take its place (a node whose rank froze may freeze again), and runs on the same nodes otherwise."""


def replace(bad, nodes, spares=(), min_nodes=0, spare_group=''):
    """Leave the nodes judged ``bad`` (``{node: why}``) out of the next attempt: each, in rank order, is replaced by the
    first unused of ``spares`` with its node rank; without a spare left it is dropped, where ``min_nodes`` (above 0)
    allows the nodes left. ``{'nodes' (the next attempt's, in rank order), 'spares' (those left), 'replaced'
    ([{node, by, node_rank, reason}]; by None: dropped), 'excluded', 'stop' (None, or why no next attempt can run)}``."""
    nodes, pool = list(nodes or ()), list(spares or ())
    order, replaced = list(nodes), []
    for node in [n for n in nodes if n in bad]:
        rank = nodes.index(node)
        by = pool.pop(0) if pool else None
        if by is not None:
            order[order.index(node)] = by
        else:
            order.remove(node)
        replaced.append(dict(node=node, by=by, node_rank=rank, reason=bad[node]))
    dropped = [r['node'] for r in replaced if r['by'] is None]
    stop = None
    if dropped and not (int(min_nodes or 0) > 0 and len(order) >= int(min_nodes)):
        stop = '%s; no spare left (trainops_spare_nodes=%s) and trainops_min_nodes=%d%s' % (
            ', '.join('%s %s' % (r['node'], r['reason']) for r in replaced if r['by'] is None), spare_group or "''",
            int(min_nodes or 0), ' (%d node(s) left)' % len(order) if int(min_nodes or 0) > 0 else '')
    return dict(nodes=order, spares=pool, replaced=replaced, excluded=[r['node'] for r in replaced], stop=stop)


HEALTH_CHECK_FAILED = 'failed the health check'
"""Why a node the health check before an attempt named suspect is left out of it (``trainops_health_check``)."""


LINK = '<->'
"""How the health check names a link between two nodes (``node0<->node1``, _health._pair_suspects)."""


def health_gate(report, nodes, spares=(), min_nodes=0, spare_group=''):
    """The attempt's node set after the health check of its nodes and of the spare nodes not used yet
    (``trainops_health_check``, roles/job/tasks/health_gate.yml): ``report`` is the check's report (module
    health_report's result, as health.json holds it; None: there is none). A suspect node of the attempt is judged bad
    and left out (:func:`replace`: a healthy spare takes its node rank, or the job goes on with the nodes left where
    ``min_nodes`` allows); a suspect spare is a spare no more. A fault that involves a spare never blocks the start: a
    link with a spare at one end (``node0<->spare1``, or two spares) makes its spare(s) unfit, as a suspect spare. A
    suspect that is no node of either (a link between two of the attempt's nodes, ``all nodes``, the search itself), or
    no report, starts nothing. Returns :func:`replace`'s dict, with ``verdict`` (the report's) and ``unfit_spares``."""
    nodes, spares = list(nodes or ()), list(spares or ())
    if not isinstance(report, Mapping) or not isinstance(report.get('suspects'), list):
        return dict(nodes=nodes, spares=spares, replaced=[], excluded=[], unfit_spares=[], verdict=None,
                    stop='the health check wrote no report (see its output above)')
    named, unplaced = {}, []

    def name(node, reason):
        named[node] = '; '.join(r for r in (named.get(node), reason) if r)

    for suspect in report['suspects']:
        node, reason = (suspect or {}).get('node'), (suspect or {}).get('reason')
        ends = node.split(LINK) if isinstance(node, str) and node.count(LINK) == 1 else []
        if node in nodes or node in spares:
            name(node, reason)
        elif len(ends) == 2 and all(end in nodes or end in spares for end in ends) and any(end in spares for end in ends):
            # a link with a spare at one end: the spare is cheaper to lose than the attempt's start
            for end in ends:
                if end in spares:
                    name(end, 'the link %s: %s' % (node, reason))
        else:
            unplaced.append('%s (%s)' % (node, reason))
    bad = dict((node, '%s (%s)' % (HEALTH_CHECK_FAILED, named[node])) for node in nodes if node in named)
    plan = replace(bad, nodes, [s for s in spares if s not in named], min_nodes, spare_group)
    plan.update(verdict=report.get('verdict'), unfit_spares=[s for s in spares if s in named])
    if unplaced:
        plan['stop'] = 'the health check names no node to leave out: %s' % '; '.join(unplaced)
    return plan


def failures_gate(experiments_dir, inventory, limit, nodes, spares=(), min_nodes=0, spare_group=''):
    """The first attempt's node set after the nodes that failed too often in earlier launches of the same inventory
    (``trainops_exclude_after`` = ``limit``; module_utils/_node_failures.py, the file in ``experiments_dir``;
    roles/job/tasks/next_attempt.yml): such a node of the job is left out (:func:`replace`: an unused spare takes
    its node rank, or the job goes on with the nodes left where ``min_nodes`` allows); such a spare is a spare no
    more. Returns :func:`replace`'s dict with ``unfit_spares``, ``problems`` (what of the file was not read) and
    ``file``."""
    path = _node_failures.path_in(experiments_dir)
    state, problems = _node_failures.read(path)
    bad = _node_failures.too_often(_node_failures.counts(state, _node_failures.inventory_key(inventory)), limit)
    nodes, spares = list(nodes or ()), list(spares or ())
    plan = replace(dict((node, bad[node]) for node in nodes if node in bad), nodes,
                   [s for s in spares if s not in bad], min_nodes, spare_group)
    if plan['stop']:
        plan['stop'] += ' (forget the failures: edit or delete %s)' % path
    plan.update(unfit_spares=[s for s in spares if s in bad], problems=problems, file=path)
    plan['lines'] = _gate_lines(plan)
    return plan


def _gate_lines(plan):
    """What the gate says (the action next_attempt shows it): the file's problems, the nodes left out and
    where the attempt runs, the spares that are spares no more; ``[]`` when it changed nothing."""
    lines = list(plan['problems'])
    if plan['excluded']:
        left_out = ', '.join(r['node'] for r in plan['replaced'])
        lines.append('left out: %s (%s); the attempt runs on %s' % (left_out, plan['file'], ', '.join(plan['nodes'])))
    if plan['unfit_spares']:
        lines.append('no longer spare nodes: %s' % ', '.join(plan['unfit_spares']))
    return lines


def _replaced_words(replaced, why=False):
    """``node1 by node2 as node rank 1`` (``why``: ``node1 unreachable: replaced by node2 as node rank 1``)."""
    if why:
        return ', '.join('%s %s: %s' % (r['node'], r['reason'], 'replaced by %s as node rank %d' % (r['by'], r['node_rank'])
                                        if r['by'] else 'left out') for r in replaced)
    return ', '.join('%s by %s as node rank %d' % (r['node'], r['by'], r['node_rank']) if r['by']
                     else '%s left out' % r['node'] for r in replaced)


def decide(current, previous, retries, verdict=None, missing_nodes=(), launch_errors=None, nodes=None, spares=(),
           min_nodes=0, spare_group='', evidence=None):
    """Whether the attempt ``current`` (a :func:`row`) is retried: ``{'decision': 'retry' | 'stop' | None,
    'reason'}`` (None: it succeeded); a retry on another node set adds :func:`replace`'s ``nodes``, ``spares``,
    ``replaced`` and ``excluded``. ``previous``: the rows before it; ``retries``: trainops_retries (the attempts
    after the first); ``verdict``: _judgment.judge_results's; ``missing_nodes``: the nodes the collect could not
    reach;
    ``nodes``: the attempt's nodes in rank order; ``spares``: the spare nodes not used yet (trainops_spare_nodes, of
    the group ``spare_group``); ``min_nodes``: trainops_min_nodes; ``evidence``: ``results`` (the nodes' run records),
    ``tails`` (the end of each node's log), ``policy`` (trainops_retry_policy) and ``without_progress``
    (trainops_retries_without_progress) for the rules of module_utils/_retry_policy.py; ``remembered`` (``{node:
    failures}``, this attempt's included) and ``exclude_after`` (trainops_exclude_after, module_utils/
    _node_failures.py)."""
    outcome = current.get('outcome')
    if outcome == 'succeeded':
        return dict(decision=None, reason='succeeded')
    if outcome not in RETRIED_OUTCOMES:
        return dict(decision=STOP, reason='outcome %s: not retried (only %s are)' % (outcome, ', '.join(RETRIED_OUTCOMES)))
    if launch_errors:
        return dict(decision=STOP, reason='the launch failed before the job ran (%s): a retry cannot fix that'
                    % ', '.join(sorted(launch_errors)))
    verdict, evidence = verdict or {}, evidence or {}
    if verdict.get('unclean_exit'):
        return dict(decision=STOP, reason='not retried: the job %s' % verdict['unclean_exit']['detail'])
    left = int(retries) - (int(current['attempt']) - 1)
    if left <= 0:
        return dict(decision=STOP, reason='no retries left (trainops_retries=%d)' % int(retries))
    gone = sorted(set(missing_nodes or ()))
    own = set(verdict.get('failed_nodes') or []) | set(verdict.get('also_failed') or [])
    everyone = set(verdict.get('nodes') or own)
    stated = _retry_policy.stated(evidence.get('policy'), sorted(own), evidence.get('results'), evidence.get('tails'))
    if stated and stated[0] == 'fatal':
        return dict(decision=STOP, reason=stated[1])
    end_step = current.get('end_step')
    if (not stated and not gone and outcome == 'failed' and own and own >= everyone and not verdict.get('stopped_nodes')
            and (end_step is None or end_step <= current.get('start_step', 0))):
        early = _retry_policy.early_failure(sorted(own), evidence.get('results'), evidence.get('tails'))
        if not early['retry']:
            return dict(decision=STOP, reason='every rank failed before its first step (%s; %s): a retry would fail '
                        'the same way (bad input or a script error; see the logs)'
                        % (_failure_words(current.get('failure') or []), early['reason']))
    bad = dict((node, 'unreachable') for node in gone)
    # trainops_exclude_after: a node of the attempt that failed that often, here and in earlier launches
    for node, why in _node_failures.too_often(evidence.get('remembered'), evidence.get('exclude_after')).items():
        if node in (nodes if nodes is not None else everyone):
            bad.setdefault(node, why)
    # a node whose rank hung or froze (the stack dumps or the heartbeat name it) is left out while a spare is free
    if (verdict.get('blame') or {}).get('by') in HUNG_BLAME:
        for node in verdict.get('failed_nodes') or []:
            if len(bad) < len(spares or ()) and node in (nodes if nodes is not None else everyone):
                bad.setdefault(node, 'its rank hung (blamed by %s)' % verdict['blame']['by'])
    repeated = None
    if previous:
        before = previous[-1]
        if current.get('failure') and [list(pair) for pair in before.get('failure') or []] == current['failure']:
            repeated = 'the same node failing twice the same way (%s in attempts %d and %d)' % (
                _failure_words(current['failure']), before['attempt'], current['attempt'])
            for node, cause in current['failure']:
                bad.setdefault(node, 'failed twice the same way (%s)' % cause)
    if bad:
        if repeated and not gone and not spare_group and not int(min_nodes or 0):
            return dict(decision=STOP, reason=repeated)
        nodes = list(nodes if nodes is not None else sorted(everyone | set(gone)))
        plan = replace(bad, nodes, spares, min_nodes, spare_group)
        if plan['stop']:
            return dict(decision=STOP, reason=plan['stop'])
        return dict(decision=RETRY, reason='%s is retried (%d of %d retries left) on %s: %s' % (
            outcome, left, int(retries), ', '.join(plan['nodes']), _replaced_words(plan['replaced'], why=True)),
            nodes=plan['nodes'], spares=plan['spares'], replaced=plan['replaced'], excluded=plan['excluded'])
    limit = int(evidence.get('without_progress') or 0)
    stuck = _retry_policy.without_progress(list(previous or []) + [current])
    if limit and stuck >= limit:
        return dict(decision=STOP, reason='%d attempt(s) in a row ended without progress (end step %s, not past the '
                    'attempt before; trainops_retries_without_progress=%d)' % (stuck, current.get('end_step'), limit))
    why = ' (%s)' % stated[1] if stated else ''
    return dict(decision=RETRY, reason='%s is retried (%d of %d retries left)%s' % (outcome, left, int(retries), why))


def record(attempt, verdict, results, summary, missing_nodes=(), launch_errors=None, tails=None):
    """What the collect of one attempt adds to its manifest, from the launch's ``attempt`` (``number``, ``first``,
    ``previous``, ``retries``, ``rows``: the attempts before, ``resumed_from``: the checkpoint it resumed, or None)
    and, with spare nodes or trainops_min_nodes, ``nodes`` (this attempt's, in rank order), ``replaced`` (the nodes it
    runs without), ``spares`` (the spare nodes not used yet), ``spare_group`` and ``min_nodes``) and the judged
    ``verdict``, the nodes' ``results``, the metrics ``summary``, the end of each node's log (``tails``: node ->
    lines) and, where the launch gives them, ``policy``, ``without_progress``, ``exclude_after`` and ``remembered``
    (:func:`decide`'s evidence):
    ``{attempt, first, previous,
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
                  failure(verdict, results, missing_nodes), attempt.get('nodes'), attempt.get('replaced'))
    retry = decide(current, previous_rows, attempt.get('retries') or 0, verdict, missing_nodes, launch_errors,
                   attempt.get('nodes'), attempt.get('spares') or (), attempt.get('min_nodes') or 0,
                   attempt.get('spare_group') or '',
                   dict(results=results, tails=tails, policy=attempt.get('policy'),
                        without_progress=attempt.get('without_progress'), remembered=attempt.get('remembered'),
                        exclude_after=attempt.get('exclude_after')))
    # the row keeps its own node set: a retry's next one (nodes, replaced, ...) is the retry's
    current.update(decision=retry['decision'], reason=retry['reason'])
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
        if one.get('nodes'):
            text += ', on %s' % ','.join(one['nodes'])
        if one.get('replaced'):
            text += ' (%s)' % _replaced_words(one['replaced'])
        if one.get('steps_lost') is not None:
            text += ', %d step(s) lost' % one['steps_lost']
        if one.get('decision'):
            text += '; %s: %s' % (one['decision'], one.get('reason'))
        out.append('{0:<10} : {1}'.format('attempt %d' % one['attempt'], text))
    return out
