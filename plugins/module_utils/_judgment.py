# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""How the job ended: the experiment's outcome and its one-line detail judged from every node's run record, stop
record and the wait's verdict (the vocabulary is module_utils/_outcomes.py's), the stops the launcher made, and the
latest checkpoint (module_utils/_experiment.py writes the result in the manifest)."""

from __future__ import annotations

import calendar
import math
import os
import time

from ansible_collections.trainops.multinode.plugins.module_utils._outcomes import (
    CAUSING_STOPS, STATUS_LOST, OutcomeError, decisive_outcome, stop_outcome, stop_words)
from ansible_collections.trainops.multinode.plugins.module_utils import _launchers, _node_files, _retry_policy, _stragglers
from ansible_collections.trainops.multinode.plugins.module_utils._experiment_metrics import (
    ExperimentError, node_output_dirs, rank_zero_output, read_rank_zero_json)


def _seconds(value):
    """A time in seconds since the epoch, or None (a bool, a string, a non-finite or far too large number is none)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and abs(value) < 1e12:
        return float(value)
    return None


def _ended_epoch(job):
    """When a node's job ended, in seconds since the epoch (None when unknown)."""
    value = _seconds(job.get('ended_at_epoch'))
    if value is not None:
        return value
    text = job.get('ended_at')
    if text:
        try:
            return calendar.timegm(time.strptime(str(text), '%Y-%m-%dT%H:%M:%SZ'))
        except ValueError:
            return None
    return None


STOP_SLACK_S = 2.0
"""A node's failure that ended less than this before the first stop request counts as caused by the stop
(the nodes' clocks differ a little; a collective breaks on the peers as soon as one node is stopped)."""


def _stop_epoch(job):
    return _seconds((job.get('stop') or {}).get('requested_at_epoch'))


def _first_stop(jobs):
    """The earliest stop record that was a cause of its own (None when nobody stopped the job that way)."""
    stops = [(_stop_epoch(job), job['stop']) for job in jobs.values()
             if _stop_epoch(job) is not None and job['stop'].get('reason') in CAUSING_STOPS]
    return min(stops, key=lambda item: item[0])[1] if stops else None


def _own_failures(jobs, first_stop):
    """Nodes whose job failed on its own, before anyone stopped the job (those are candidate causes)."""
    cutoff = None if first_stop is None else float(first_stop['requested_at_epoch']) - STOP_SLACK_S
    own = []
    for node, job in sorted(jobs.items()):
        if job.get('exit_code') == 0 or job.get('stop'):
            continue
        ended = _ended_epoch(job)
        if cutoff is None or ended is None or ended < cutoff:
            own.append(node)
    return own


def _first_ended(nodes, jobs):
    """Of ``nodes``, the one(s) whose job ended first (all of them when no end time is known)."""
    ends = dict((node, _ended_epoch(jobs[node])) for node in nodes)
    known = [end for end in ends.values() if end is not None]
    first = min(known) if known else None
    return [node for node in nodes if ends[node] == first]


def _window(node, verdicts):
    """What the controller saw of ``node``'s end, on its own clock (the wait's verdict, torchrun_wait): ``(alive,
    ended_by)``: the job still ran when a question sent at ``alive`` found it running; it had ended (or stopped
    answering) by ``ended_by``. Either is None when the wait did not see it."""
    verdict = (verdicts or {}).get(node) or {}
    ended_by = _seconds(verdict.get('seen_ended_at'))
    if ended_by is None and verdict.get('state') == 'gone':
        ended_by = _seconds(verdict.get('unreachable_since'))
    return _seconds(verdict.get('seen_running_at')), ended_by


def vanished(node, job, verdicts, missing):
    """Whether ``node`` vanished: unreachable at the end, gone in the wait (unreachable past the grace), or its job
    lost (the node rebooted, its supervisor is gone)."""
    state = ((verdicts or {}).get(node) or {}).get('state')
    return node in missing or state == 'gone' or (job or {}).get('status') == STATUS_LOST


def blame(candidates, jobs, verdicts=None, missing=(), tails=None):
    """Of ``candidates`` (the nodes that failed on their own, and those unreachable at the end), the culprit(s) and
    how they were found: ``(nodes, {'by', 'detail'})``.

    1. the controller's clock (the wait's verdicts, :func:`_window`): a node that had ended before another was last
       seen running ended first; the nodes that no other one ended before remain;
    2. of those, a node that vanished (:func:`vanished`) is the culprit before any that ended by itself (its peers'
       collectives time out after it, and it has no end time of its own); ``by``: ``vanished``;
    3. one left: ``by`` ``controller_clock`` where the controller's clock ruled others out, else ``only``;
    4. several left: those whose log tails (``tails``: node -> its log's last lines, _retry_policy.read_tails) do not
       say their ranks died of a lost peer (_retry_policy.peer_cascade: a gloo connection closed by peer, a collective
       timeout) come before those that do; ``by``: ``logs`` when that leaves one;
    5. several left (the controller saw them end within one question of each other, or has no times): the first to
       end by the nodes' own clocks (``ended_at``, :func:`_first_ended`); ``by``: ``node_clocks``.
    """
    missing = set(missing or ())
    windows = dict((node, _window(node, verdicts)) for node in candidates)

    def before(first, second):
        ended_by, alive = windows[first][1], windows[second][0]
        return ended_by is not None and alive is not None and ended_by < alive

    left = [node for node in candidates if not any(before(other, node) for other in candidates if other != node)]
    ruled_out = [node for node in candidates if node not in left]
    seen = ' (the controller saw %s still running after)' % ', '.join(ruled_out) if ruled_out else ''
    gone = [node for node in left if vanished(node, jobs.get(node), verdicts, missing)]
    if gone:
        others = ' before the others ended' if len(gone) < len(candidates) else ''
        return gone, dict(by='vanished', detail='%s vanished (unreachable or lost)%s%s' % (', '.join(gone), others, seen))
    if len(left) == 1:
        if ruled_out:
            return left, dict(by='controller_clock', detail='%s ended first on the controller\'s clock%s' % (left[0], seen))
        return left, dict(by='only', detail='%s is the only node that failed on its own' % left[0])
    followers = dict((node, _retry_policy.peer_cascade(_retry_policy.tail_lines((tails or {}).get(node))))
                     for node in left)
    own = [node for node in left if not followers[node]]
    if own and len(own) < len(left):
        trail = '; '.join('%s: %s' % (node, followers[node]) for node in left if followers[node])
        if len(own) == 1:
            return own, dict(by='logs', detail='%s failed on its own; the others\' ranks died of a lost peer (%s)%s'
                             % (own[0], trail, seen))
        left = own
    first = _first_ended(left, jobs)
    why = ('the controller saw %s end within one question of each other' % ', '.join(left)
           if all(windows[node][1] is not None for node in left) else 'the wait saw no end time of %s' % ', '.join(
               node for node in left if windows[node][1] is None))
    return first, dict(by='node_clocks', detail='%s ended first by the nodes\' own clocks (%s)' % (', '.join(first), why))


def hung_nodes(hung, nodes):
    """The nodes of the hung ranks the stack dumps name (_stacks.judge's ``culprits``: ``{node, rank, where}``),
    those that are nodes of the job, in rank order, each once: ``[(node, [rows])]``."""
    found = {}
    for row in hung or ():
        node = (row or {}).get('node') if isinstance(row, dict) else None
        if node in nodes:
            found.setdefault(node, []).append(row)
    return sorted(found.items(), key=lambda item: min(r.get('rank') or 0 for r in item[1]))


def heartbeat_explains(frozen_nodes, own, jobs, verdicts=None, missing=(), tails=None):
    """Whether the ranks the heartbeat names (on ``frozen_nodes``) explain the failures of ``own`` (the nodes that
    failed on their own, and the missing ones): no node vanished (a vanished node comes first, :func:`blame`), and
    every failed node but theirs has a log that says its ranks died of a lost peer (_retry_policy.peer_cascade: a
    collective timeout, a gloo or NCCL error), or no log at all. A node whose log shows a failure of its own is a
    cause of its own."""
    if any(vanished(node, jobs.get(node), verdicts, missing) for node in own):
        return False
    for node in own:
        tail = _retry_policy.tail_lines((tails or {}).get(node))
        if node not in frozen_nodes and tail and not _retry_policy.peer_cascade(tail):
            return False
    return True


def _frozen_words(node, rows):
    return '%s (rank %s)' % (node, '; rank '.join('%s %s' % (row.get('rank'), row.get('why')) for row in rows))


def _how_it_ended(job):
    """``node rank 1: exit code 1`` / ``node rank 1: signal SIGKILL`` / ``node rank 1: lost (reason)``."""
    rank = job.get('node_rank')
    where = 'node rank %s: ' % rank if rank is not None else ''
    if job.get('signal'):
        return where + 'signal %s' % job['signal']
    if job.get('status') == STATUS_LOST:
        return where + 'lost (%s)' % (job.get('lost_reason') or 'its supervisor is gone')
    if job.get('exit_code') is None:
        return where + 'status %s' % (job.get('status') or 'unknown')
    return where + 'exit code %s' % job['exit_code']


def _verdict_nodes(verdicts, outcome):
    """The nodes whose wait's verdict decides ``outcome`` (_outcomes.decisive_outcome: ``stalled``, ``gone``)."""
    nodes = []
    for node, verdict in sorted((verdicts or {}).items()):
        try:
            decided = decisive_outcome((verdict or {}).get('state'))
        except OutcomeError as exc:
            raise ExperimentError('verdicts: node {0}: {1}'.format(node, exc))
        if decided == outcome:
            nodes.append(node)
    return nodes


def _with_followers(line, failed_nodes, also_failed, stopped):
    if also_failed:
        line += '; then failed: ' + ', '.join(also_failed)
    if stopped:
        line += '; stopped: ' + ', '.join(stopped)
    return line


def launcher_stops(results):
    """The nodes the job's launcher ended because of another node, as stop records (e.g. a Slurm step's nodes that
    ``srun --kill-on-bad-exit`` ended when one failed; _launchers.Launcher.ended_it).

    Returns ``{node: {'reason': 'peer', 'detail', 'requested_at', 'requested_at_epoch', 'by'}}``: every node that the
    launcher says it ended (killed, or signalled without a stop request) when another node is a cause: one whose run
    failed on its own (the first to end of those), else one that was stopped for a reason of its own (stalled, by the
    user, ...; its stop made its task exit non-zero). The record is what the wait writes on a node that it stops
    because a peer failed (reason ``peer``), with the cause's end as the moment; so the nodes the launcher ended count
    as stopped, never as failures. Empty for a launcher that ends nothing itself (ssh), or when no other node is a
    cause.
    """
    jobs = dict((node, job or {}) for node, job in (results or {}).items())
    launcher = _launchers.of_results(jobs)
    ended = sorted(node for node, job in jobs.items() if launcher.ended_it(job))
    if not ended:
        return {}
    others = dict((node, job) for node, job in jobs.items() if node not in ended)
    own = [node for node, job in sorted(others.items()) if job.get('exit_code') != 0 and not job.get('stop')]
    if own:
        culprits = _first_ended(own, others)
        cause = ', '.join('%s failed (%s)' % (node, _how_it_ended(others[node])) for node in culprits)
        when = _ended_epoch(others[culprits[0]])
    else:
        first_stop = _first_stop(others)
        if first_stop is None:
            return {}
        node = next(n for n, job in sorted(others.items()) if job.get('stop') is first_stop)
        cause = '%s was stopped (%s)' % (node, first_stop.get('reason'))
        when = _ended_epoch(others[node]) or _stop_epoch(others[node])
    stops = {}
    for node in ended:
        stops[node] = {'reason': 'peer', 'detail': launcher.ended_detail(jobs[node], cause), 'by': launcher.stop_by,
                       'requested_at_epoch': when,
                       'requested_at': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(when)) if when is not None else None}
    return stops


def with_launcher_stops(results):
    """``results`` with the stop records of ``launcher_stops`` added to the nodes the launcher ended (a new dict)."""
    stops = launcher_stops(results)
    if not stops:
        return results
    return dict((node, dict(job or {}, stop=stops[node]) if node in stops else job) for node, job in results.items())


def with_time_limit_stops(results, limit, by):
    """``results`` with a stop record ``{reason: timeout, by, detail}`` for every node whose run the launcher (``by``:
    its stop_by) ended at the time limit (``limit`` from _launchers.Launcher.time_limit; a new dict), as the wait
    records for its own limit."""
    if not limit:
        return results
    stopped = {}
    for node, job in (results or {}).items():
        job = job or {}
        if job.get('exit_code') == 0 or job.get('stop'):
            stopped[node] = job
            continue
        stopped[node] = dict(job, stop={'reason': 'timeout', 'by': by, 'detail': limit['detail'],
                                        'requested_at': job.get('ended_at'), 'requested_at_epoch': _ended_epoch(job)})
    return stopped


CHECKPOINT_RECORD = 'checkpoint.json'
"""Rank 0's record of the last checkpoint it wrote (files/workspace/train.py), collected with its outputs."""


def _checkpoint_fields(record):
    """The fields of one checkpoint record that have the expected types (what the job wrote is not trusted)."""
    if not isinstance(record, dict) or _stragglers.whole(record.get('global_step')) is None:
        return None
    fields = {'global_step': _stragglers.whole(record['global_step'])}
    for key in ('reason', 'signal', 'path'):
        value = record.get(key)
        fields[key] = value if isinstance(value, str) and len(value) <= 4096 and '\n' not in value else None
    fields['epoch'] = _stragglers.whole(record.get('epoch'))
    return fields


def read_checkpoint(path):
    """The job's last checkpoint as rank 0 reported it in ``outputs/<node>/checkpoint.json``: ``{node, global_step,
    epoch, reason, signal, path (on the node), last_signal_checkpoint}``, None when there is none or it does not
    read as one."""
    found = rank_zero_output(path, CHECKPOINT_RECORD)
    record, _refused = read_rank_zero_json(path, CHECKPOINT_RECORD)  # read_checkpoints names what it refused
    fields = _checkpoint_fields(record)
    if fields is None:
        return None
    fields['node'] = os.path.basename(os.path.dirname(found))
    fields['last_signal_checkpoint'] = _checkpoint_fields(record.get('last_signal_checkpoint'))
    return fields


def read_checkpoints(path, refused=None):
    """Every node's record of its last checkpoint (files/workspace/train.py writes it on every node), by node:
    ``{node: {global_step, epoch, reason, signal, path}}`` of the ``outputs/<node>/checkpoint.json`` that read as one
    (a retry resumes from one of them: module_utils/_launch_dirs.resume_checkpoint). The lines naming the node and
    the file of what was not read (module_utils/_node_files.py) are added to the list ``refused``."""
    found = {}
    for node, node_dir in node_output_dirs(path):
        record_path = os.path.join(node_dir, CHECKPOINT_RECORD)
        if not os.path.isfile(record_path) or os.path.islink(record_path):
            continue
        record, why = _node_files.read_json_object(record_path, node, CHECKPOINT_RECORD)
        if refused is not None:
            refused += why
        fields = _checkpoint_fields(record)
        if fields is not None:
            found[node] = fields
    return found


def checkpoint_line(checkpoint):
    """``global step 12 (SIGUSR1) on lab-node01: /srv/.../checkpoint.pt`` for the summary and the outcome."""
    if not checkpoint:
        return None
    why = checkpoint.get('signal') or checkpoint.get('reason')
    return 'global step %s%s on %s: %s' % (checkpoint['global_step'], ' (%s)' % why if why else '', checkpoint['node'],
                                           checkpoint.get('path') or '?')


def judge_results(results, verdicts=None, missing_nodes=None, time_limit=None, checkpoint=None, hung=None,
                  tails=None, frozen=None):
    """Decide the outcome of a job from each node's final ``job`` state and the wait's verdicts.

    ``results`` maps node -> the torchrun module's ``job`` dict (with its ``stop`` record, when the job was
    stopped). ``verdicts`` maps node -> what the wait judged there (``state``, a name of ``_outcomes.VERDICTS``;
    the decisive ones, ``stalled`` and ``gone`` (unreachable past the grace), with a ``detail`` line; another name
    is an ExperimentError). ``missing_nodes`` could not be reached at the end. What each verdict and stop reason
    stands for is ``plugins/module_utils/_outcomes.py``; the outcome is the first that applies:

    - ``stalled`` with ``hung`` (the ranks the stack dumps name: _stacks.judge's ``culprits``): the wait stopped the
      job because a node showed no new output for too long, and a rank stood outside torch while its peers waited in
      it: the cause is that rank's node, whichever node's wait saw the stall; nodes that failed on their own meanwhile
      (a collective timeout) follow;
    - ``stalled`` with ``frozen`` and no ``hung``: the same, the rank the heartbeat names (``frozen``: _heartbeat.judge's
      ``culprits``, ``{node, rank, why}``) standing for the stacks';
    - ``failed`` with ``frozen``: nodes failed on their own (their ranks' collectives timed out) while a rank the
      heartbeat names stopped progressing: the cause is that rank's node (:func:`heartbeat_explains` says when), the
      nodes that failed follow;
    - ``failed``: a node's job failed on its own before anyone stopped the job; the cause (``failed_nodes``) is
      judged by :func:`blame` among those nodes and the missing ones (the controller's clock first, a vanished node
      before the others, the nodes' clocks last);
    - ``stalled``: the wait stopped the job because a node showed no new output for too long;
    - ``unreachable``: a node could not be reached for longer than the grace, or at the end;
    - ``stopped``: the user stopped it (``timed_out`` when the wait's time limit did);
    - ``failed`` for any other non-zero exit; ``succeeded`` when every node's job exited 0.

    The nodes that the job's launcher ended because another node failed or was stopped (``launcher_stops``, e.g. a
    Slurm step's) count as stopped by that node (reason ``peer``), not as failures; and a job that its launcher ended at
    a time limit (``time_limit``, from _launchers.Launcher.time_limit) is ``timed_out`` before anything else, its nodes
    stopped by it, with the job's last ``checkpoint`` (:func:`read_checkpoint`) in the line. ``blame`` says how the
    cause was found (``{'by', 'detail'}``, None when nothing failed): ``stacks``, ``heartbeat``, ``controller_clock``, ``vanished``,
    ``only``, ``node_clocks`` (:func:`blame`), ``wait`` (the wait's stall or unreachable verdict) or ``stop``.
    """
    if time_limit:
        by = _launchers.of_results(results).stop_by
        jobs = with_time_limit_stops(results or {}, time_limit, by)
        stopped = sorted(node for node, job in jobs.items() if (job or {}).get('exit_code') != 0)
        line = 'timed out: %s' % time_limit['detail']
        if checkpoint_line(checkpoint):
            line += '; last checkpoint: %s' % checkpoint_line(checkpoint)
        stop = {'reason': 'timeout', 'by': by, 'source': time_limit['source'], 'detail': time_limit['detail'],
                'requested_at': None}
        return dict(outcome=stop_outcome('timeout'), outcome_detail=line, failed_nodes=[], also_failed=[],
                    stopped_nodes=stopped, stop=stop, blame=dict(by='stop', detail=line))
    # the nodes the launcher ended because of another node are stopped, as if the wait had stopped them
    jobs = dict((node, job or {}) for node, job in with_launcher_stops(results or {}).items())
    missing = sorted(set(missing_nodes or []))
    failed = sorted(node for node, job in jobs.items() if job.get('exit_code') != 0)
    first_stop = _first_stop(jobs)
    own = _own_failures(jobs, first_stop)
    stalled = _verdict_nodes(verdicts, 'stalled')
    gone = sorted(set(_verdict_nodes(verdicts, 'unreachable')) | set(missing))
    verdict_detail = dict((node, (verdicts or {}).get(node, {}).get('detail')) for node in stalled + gone)
    hung_by_node = hung_nodes(hung, set(jobs) | set(missing)) if stalled else []
    frozen_by_node = hung_nodes(frozen, set(jobs) | set(missing)) if stalled or own else []
    if own and not stalled and not heartbeat_explains(
            [node for node, _rows in frozen_by_node], missing + own, jobs, verdicts, missing, tails):
        frozen_by_node = []

    by_stop = False
    if hung_by_node:
        failed_nodes = [node for node, _rows in hung_by_node]
        also, outcome = [node for node in own if node not in failed_nodes], 'stalled'
        where = '; '.join('%s (rank %s hung at %s; its peers wait in torch)' % (
            node, ', '.join(str(r.get('rank')) for r in rows), rows[0].get('where')) for node, rows in hung_by_node)
        seen = '; '.join('%s (%s)' % (node, verdict_detail[node] or 'no new output') for node in stalled)
        line = 'stalled on %s; the stall was seen on %s' % (where, seen)
        how = dict(by='stacks', detail='the stack dumps name rank(s) %s outside torch while the others wait in it' % (
            ', '.join('%s (%s)' % (r.get('rank'), node) for node, rows in hung_by_node for r in rows)))
    elif frozen_by_node:
        failed_nodes = [node for node, _rows in frozen_by_node]
        also = [node for node in (own if stalled else missing + own) if node not in failed_nodes]
        named = '; '.join(_frozen_words(node, rows) for node, rows in frozen_by_node)
        how = dict(by='heartbeat', detail='the heartbeat shows rank(s) %s stopped progressing while the other ranks did '
                   'not' % ', '.join('%s (%s)' % (r.get('rank'), node) for node, rows in frozen_by_node for r in rows))
        if stalled:
            outcome = 'stalled'
            line = 'stalled on %s; the stall was seen on %s' % (named, ', '.join(stalled))
        else:
            outcome = 'failed'
            line = 'failed on %s; its peers waited for it' % named
            if also:
                how['detail'] += ('; the nodes that failed first died of a lost peer (%s)' % '; '.join('%s: %s' % (
                    node, _retry_policy.peer_cascade(_retry_policy.tail_lines((tails or {}).get(node))) or 'no log')
                    for node in also))
    elif own:
        failed_nodes, how = blame(missing + own, jobs, verdicts, missing, tails)
        also = [node for node in missing + own if node not in failed_nodes]
        line = 'failed on ' + ', '.join(
            '%s (%s)' % (node, 'unreachable at the end' if node in missing else _how_it_ended(jobs[node]))
            for node in failed_nodes)
        outcome = 'failed'
    elif stalled:
        failed_nodes, also, outcome = stalled, [], 'stalled'
        line = 'stalled on ' + '; '.join('%s (%s)' % (node, verdict_detail[node] or 'no new output') for node in stalled)
        how = dict(by='wait', detail='the wait saw no new output on %s; no stack dump names a rank' % ', '.join(stalled))
    elif gone:
        failed_nodes, also, outcome = gone, [], 'unreachable'
        line = 'unreachable: ' + '; '.join('%s (%s)' % (node, verdict_detail.get(node) or 'unreachable at the end')
                                           for node in gone)
        how = dict(by='vanished', detail='%s could not be reached' % ', '.join(gone))
    elif first_stop is not None and stop_words(first_stop['reason']) and failed:
        # the outcome a stop of its own stands for (_outcomes.STOP_REASONS: user, timeout), said with its words
        failed_nodes, also, by_stop = [], [], True
        outcome = stop_outcome(first_stop['reason'])
        line = '%s %s at %s' % (outcome.replace('_', ' '), stop_words(first_stop['reason']), first_stop.get('requested_at'))
        how = dict(by='stop', detail=line)
    elif failed or missing:
        failed_nodes = _first_ended(failed, jobs)
        also, outcome = [], 'failed'
        line = 'failed on ' + ', '.join('%s (%s)' % (node, _how_it_ended(jobs[node])) for node in failed_nodes)
        how = dict(by='node_clocks', detail='%s ended first by the nodes\' own clocks (none failed before a stop)' % (
            ', '.join(failed_nodes)))
    else:
        return dict(outcome='succeeded', outcome_detail='succeeded', failed_nodes=[], also_failed=[], stopped_nodes=[],
                    stop=None, blame=None)
    stopped = [node for node in failed if node not in failed_nodes and node not in also]
    return dict(
        outcome=outcome,
        outcome_detail=line if by_stop else _with_followers(line, failed_nodes, also, stopped),
        failed_nodes=failed_nodes,
        also_failed=also,
        stopped_nodes=stopped,
        stop=first_stop,
        blame=how,
    )
