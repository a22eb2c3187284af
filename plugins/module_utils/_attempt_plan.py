# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The node set of an attempt when it changes (roles/job/tasks/next_attempt.yml, the action
``trainops.multinode.next_attempt``), in two cases:

* before the first attempt, the nodes that failed too often in earlier launches are left out
  (``trainops_exclude_after``; the rule: module_utils/_retries.failures_gate): :func:`failures_plan`;
* a retry (``trainops_retries``; the decision: module_utils/_retries.decide, made by the collect): :func:`retry_plan`.

Each gives the attempt (``__trainops_attempt``'s shape), the nodes' order (filter node_order's), the hosts that leave
the play, whether every node checks again that it reaches the master, the wait's label and what to say. Then
:func:`reach_problem` says why the attempt cannot start when a node does not reach its master, and for a retry
:func:`experiment_name` names its new experiment directory and :func:`started_line` says what is retried.
"""

from __future__ import annotations

import datetime

from ansible_collections.trainops.multinode.plugins.module_utils._launch_params import merge_problems

FAILURES = 'failures'
RETRY = 'retry'


def is_retry(report, run_id):
    """Whether the collect of the attempt ``run_id`` decided to retry it (``report``: its result, ``__trainops_report``):
    the node set then changes for the next attempt; otherwise it is the failures gate before the first attempt."""
    report = report if hasattr(report, 'get') else {}
    rows = report.get('attempts') or []
    return ((report.get('retry') or {}).get('decision') == RETRY and bool(rows)
            and (rows[-1] or {}).get('run_id') == run_id)


def failures_plan(gate, attempt, order, order_of):
    """The first attempt after the failures gate (``gate``: module_utils/_retries.failures_gate's result): a node of
    the job that failed too often leaves the attempt, a spare takes its node rank (``replaced``), a spare that failed
    too often is a spare no more; unchanged when the gate left nothing out. ``attempt``: the attempt as it is;
    ``order``: the nodes' order as it is; ``order_of(nodes)``: the order of a node set (filter node_order)."""
    differs = bool(gate.get('excluded') or gate.get('unfit_spares'))
    if differs:
        attempt = dict(attempt, spares=list(gate.get('spares') or []),
                       replaced=list(attempt.get('replaced') or []) + list(gate.get('replaced') or []))
        order = order_of(gate['nodes'])
    return dict(step=FAILURES, retry=False, differs=differs, changed=False, attempt=attempt, order=order,
                leave=list(gate.get('excluded') or []) + list(gate.get('unfit_spares') or []),
                reach=bool(gate.get('excluded')), wait_label='', lines=list(gate.get('lines') or []),
                stop=gate.get('stop') or None)


def retry_plan(report, attempt, order, order_of, run_id, experiment_dir, retries):
    """The next attempt of a retry: its number, the first attempt's run id, the previous one (``run_id``, in
    ``experiment_dir``) whose checkpoint it resumes, the rows of the attempts so far (``report['attempts']``), the
    spare nodes left and the nodes replaced (the retry's node set, where the decision changed it: ``nodes`` in rank
    order, ``spares``, ``replaced``, ``excluded``: module_utils/_retries.decide); the nodes' order (``order`` where
    the node set did not change); the nodes left out leave the play; every node of the next attempt checks that it
    reaches its master, which may have moved."""
    retry = report.get('retry') or {}
    number = int(attempt['number']) + 1
    following = dict(number=number, first=attempt.get('first'), previous=run_id, previous_dir=experiment_dir,
                     rows=list(report.get('attempts') or []), resume_from=run_id,
                     spares=list(retry['spares'] if retry.get('spares') is not None else attempt.get('spares') or []),
                     replaced=list(retry.get('replaced') or []))
    if retry.get('nodes') is not None:
        order = order_of(list(retry['nodes']))
    return dict(step=RETRY, retry=True, differs=True, changed=False, attempt=following, order=order, leave=list(retry.get('excluded') or []),
                reach=True, wait_label='attempt %d/%d' % (number, int(retries) + 1), lines=[], stop=None)


def reach_args(plan, node, port, socket_ifname, timeout):
    """The preflight's reach check (module preflight's arguments) that ``node`` runs for the attempt of ``plan`` (this
    module's answer): every node of the attempt connects to its master's ``port``, which may have moved, and the
    master waits for them all; None where there is nothing to check (no move, not a node of the attempt, a plan
    that starts nothing)."""
    order = plan.get('order') or {}
    nodes = list(order.get('nodes') or [])
    if not plan.get('reach') or plan.get('stop') or node not in nodes:
        return None
    args = dict(master_addr=order.get('master_addr'), socket_ifname=socket_ifname, reach_port=int(port),
                reach_timeout=int(timeout), fail_on_problems=False)
    if node == order.get('master'):
        args['reach_peers'] = len(nodes)
    return args


def reach_problem(number, nodes, master_host, master_addr, play_hosts, problems):
    """Why attempt ``number`` does not start on ``nodes`` (rank order) when one does not reach its master: the problems
    each node found (``problems``: ``{node: [lines]}``, the preflight's reach check), each line once
    (_launch_params.merge_problems), and the nodes no longer in the play (``play_hosts``): they could not be reached.
    None when every node reached it."""
    lost = [node for node in nodes if node not in play_hosts]
    lines = merge_problems(dict((node, list((problems or {}).get(node) or [])) for node in nodes if node in play_hosts))
    if lost:
        lines.append('could not be reached: %s' % ', '.join(lost))
    if not lines:
        return None
    return 'Not starting attempt %s on %s (master %s at %s): %s' % (
        number, ', '.join(nodes), master_host, master_addr, '; '.join(lines))


def _count(value):
    """A knob's whole number as the experiment's name gives it (Jinja's ``int``), ``auto`` when left to the library."""
    if value in (None, '', 'None'):
        return 'auto'
    try:
        return str(int(value))
    except (TypeError, ValueError):
        try:
            return str(int(float(value)))
        except (TypeError, ValueError):
            return '0'


def experiment_name(run_name, channels, threads, now=None):
    """The experiment directory's name of a launch: ``<run name>_<channels>ch_<threads>th_<local time>``, a knob left
    to the library ``auto`` (``multinode_autoch_autoth_20260101_120000``), as roles/job/tasks/experiment_dir.yml names
    the first attempt's."""
    now = now or datetime.datetime.now()
    return '%s_%sch_%sth_%s' % (run_name, _count(channels), _count(threads), now.strftime('%Y%m%d_%H%M%S'))


def started_line(attempt, retries, run_id, nodes, master_host, experiment_dir):
    """What the launch says when a retry starts: the attempt, the run it resumes and why the one before ended."""
    last = (attempt.get('rows') or [{}])[-1] or {}
    return ('Attempt %s of at most %d: %s resumes %s from its latest checkpoint (%s; %s) on %s, master %s. Outputs: %s'
            % (attempt['number'], int(retries) + 1, run_id, attempt.get('previous'), last.get('outcome_detail'),
               last.get('reason'), ', '.join(nodes), master_host, experiment_dir))
