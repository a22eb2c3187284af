# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The health check of trainops.multinode (playbooks/health.yml, docs/health.md): which node is bad.

Three parts, each a pure function the plugins call:

* ``node_checks(root)``: on a node, the accelerator and NIC state sysfs tells: the GPUs (count, PCIe link width and
  speed against the device's maximum), the RDMA ports (state, physical state, error counters); with a runner, what the
  GPU vendor tools tell too (memory errors, Xids: _gpu_health.py). A problem makes the node suspect; a warning is
  shown only.
* ``next_step(nodes, measured, ...)``: which group of nodes the next all-reduce measures, from the measurements so far
  (the search: all nodes, then all pairs or a bisection); ``None`` when the search is over.
* ``report(...)``: the per-node and per-group tables and the verdict, ``healthy`` or ``suspect: <node> (<reason>)``.
"""

from __future__ import annotations

import json
import math
import os
import re

from ansible_collections.trainops.multinode.plugins.module_utils import _facts_io, _gpu_facts, _gpu_health, _rdma_facts
from ansible_collections.trainops.multinode.plugins.module_utils._stragglers import seconds

NONE = 'none'

#: InfiniBand port counters (``ports/<n>/counters``) that count errors; cumulative since the driver loaded.
ERROR_COUNTERS = ('symbol_error', 'link_downed', 'link_error_recovery', 'port_rcv_errors', 'port_xmit_discards',
                  'port_rcv_remote_physical_errors', 'local_link_integrity_errors', 'excessive_buffer_overrun_errors',
                  'port_rcv_constraint_errors', 'port_xmit_constraint_errors', 'VL15_dropped')
#: ``ports/<n>/hw_counters`` (mlx5, bnxt_re, ...) that count transport errors.
HW_ERROR_COUNTERS = ('local_ack_timeout_err', 'rnr_nak_retry_err', 'packet_seq_err', 'out_of_sequence',
                     'implied_nak_seq_err', 'req_cqe_error', 'resp_cqe_error', 'req_remote_access_errors',
                     'req_remote_invalid_request', 'resp_local_length_error', 'rx_icrc_encapsulated',
                     'roce_adp_retrans_to', 'to_retransmits', 'seq_err_naks_rcvd')

_SPEED = re.compile(r'^\s*(\d+(?:\.\d+)?)\s*GT/s')


class HealthError(ValueError):
    """Bad input to the health check (a plugin turns it into a task failure)."""


# ------------------------------------------------------------------------------------------------
# per node: sysfs
# ------------------------------------------------------------------------------------------------

def _int(text):
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


def _speed(text):
    match = _SPEED.match(text or '')
    return float(match.group(1)) if match else None


def pcie_link(root, sysfs_dir):
    """The PCIe link of a device: ``dict(width, max_width, speed, max_speed)`` (speeds as sysfs writes them), or None
    when sysfs has no link files there (a virtual function, a device sysfs does not show)."""
    values = dict((key, _facts_io._read(root, sysfs_dir, name)) for key, name in (
        ('width', 'current_link_width'), ('max_width', 'max_link_width'),
        ('speed', 'current_link_speed'), ('max_speed', 'max_link_speed')))
    if values['width'] is None and values['speed'] is None:
        return None
    return values


def link_problems(name, link, idle_downshift=False):
    """(problems, warnings) of one PCIe link. A narrower link than the device's maximum is a problem (a card not
    seated, a bad riser); a slower one too, except on GPUs (``idle_downshift``), which lower their link speed when
    idle to save power: a warning there."""
    problems, warnings = [], []
    if not link:
        return problems, warnings
    width, max_width = _int(link.get('width')), _int(link.get('max_width'))
    if width is not None and max_width and 0 < width < max_width:
        problems.append('%s PCIe link x%d of x%d' % (name, width, max_width))
    speed, max_speed = _speed(link.get('speed')), _speed(link.get('max_speed'))
    if speed is not None and max_speed and speed < max_speed:
        text = '%s PCIe link %s of %s' % (name, link['speed'].split(' PCIe')[0], link['max_speed'].split(' PCIe')[0])
        (warnings if idle_downshift else problems).append(text + (' (an idle GPU lowers its link speed)'
                                                                  if idle_downshift else ''))
    return problems, warnings


def _counters(root, port_dir, sub, names):
    """The named counters of ``<port_dir>/<sub>`` that are above zero, ``{name: value}``."""
    found = {}
    for name in sorted(_facts_io._listdir(root, port_dir, sub)):
        if name in names:
            value = _int(_facts_io._read(root, port_dir, sub, name))
            if value:
                found[name] = value
    return found


def node_checks(root='/', ignore=(), runner=None):
    """The health facts of the node whose filesystem is at ``root``.

    ``ignore``: RDMA device names and PCI bus ids left out (a port that is meant to be down). ``runner``: a
    ``_facts_io.Runner`` for the GPU vendor tools (:func:`_gpu_health.gpu_tool_checks`); None reads files only.
    Returns ``dict(gpus=..., rdma=..., problems=[...], warnings=[...])``; ``gpus``/``rdma`` are ``"none"`` on a node
    without them (a CPU node: healthy on that count).
    """
    ignore = set(ignore or ())
    problems, warnings = [], []
    gpu = _gpu_facts.gpu_facts(root)
    gpus = NONE
    if gpu['count']:
        links = []
        for pci_id in gpu['pci_ids']:
            if pci_id in ignore:
                continue
            link = pcie_link(root, os.path.join('sys/bus/pci/devices', pci_id))
            links.append(dict(pci_id=pci_id, link=link))
            found, warned = link_problems('GPU %s' % pci_id, link, idle_downshift=True)
            problems += found
            warnings += warned
        gpus = dict(vendor=gpu['vendor'], count=gpu['count'], links=links, tools=[])
        if runner is not None:
            told = _gpu_health.gpu_tool_checks(runner, gpu['vendor'], ignore)
            problems += told['problems']
            warnings += told['warnings']
            gpus['tools'] = told['sources']
    rdma = NONE
    devices = []
    for name in sorted(_facts_io._listdir(root, _rdma_facts._IB_CLASS), key=_facts_io._natural_key):
        if name in ignore:
            continue
        dev_dir = os.path.join(_rdma_facts._IB_CLASS, name)
        link = pcie_link(root, os.path.join(dev_dir, 'device'))
        found, warned = link_problems('%s' % name, link)
        problems += found
        warnings += warned
        ports = []
        for port in sorted((p for p in _facts_io._listdir(root, dev_dir, 'ports') if p.isdigit()), key=int):
            port_dir = os.path.join(dev_dir, 'ports', port)
            state = _rdma_facts._state_text(_facts_io._read(root, port_dir, 'state'))
            phys = _rdma_facts._state_text(_facts_io._read(root, port_dir, 'phys_state'))
            errors = _counters(root, port_dir, 'counters', ERROR_COUNTERS)
            errors.update(_counters(root, port_dir, 'hw_counters', HW_ERROR_COUNTERS))
            ports.append(dict(port=int(port), state=state, phys_state=phys, errors=errors))
            if state != 'ACTIVE':
                problems.append('%s port %s %s (%s)' % (name, port, state or 'state unknown', phys or 'phys_state unknown'))
            if errors:
                warnings.append('%s port %s error counters since boot: %s' % (
                    name, port, ', '.join('%s=%d' % item for item in sorted(errors.items()))))
        devices.append(dict(name=name, link=link, ports=ports))
    if devices:
        rdma = dict(count=len(devices), devices=devices)
    return dict(gpus=gpus, rdma=rdma, problems=problems, warnings=warnings)


# ------------------------------------------------------------------------------------------------
# the search: which group to measure next
# ------------------------------------------------------------------------------------------------

def _key(group):
    return tuple(sorted(group))


def _check_config(nodes, min_busbw, slow_ratio, all_pairs_max):
    if not isinstance(nodes, (list, tuple)) or not nodes or not all(isinstance(n, str) for n in nodes):
        raise HealthError('nodes must be a non-empty list of node names, got %r' % (nodes,))
    if len(set(nodes)) != len(nodes):
        raise HealthError('nodes must not repeat a node, got %r' % (nodes,))
    if min_busbw is not None and (isinstance(min_busbw, bool) or not isinstance(min_busbw, (int, float))
                                  or min_busbw <= 0):
        raise HealthError('trainops_health_min_busbw must be a number of GB/s above 0 or null, got %r' % (min_busbw,))
    if isinstance(slow_ratio, bool) or not isinstance(slow_ratio, (int, float)) or not 0 < slow_ratio < 1:
        raise HealthError('trainops_health_slow_ratio must be a number between 0 and 1, got %r' % (slow_ratio,))
    if isinstance(all_pairs_max, bool) or not isinstance(all_pairs_max, int) or all_pairs_max < 2:
        raise HealthError('trainops_health_all_pairs_max must be an integer >= 2, got %r' % (all_pairs_max,))


def failed(result):
    return not result.get('ok') or not result.get('busbw_gbps')


def below_floor(result, min_busbw):
    return min_busbw is not None and not failed(result) and result['busbw_gbps'] < min_busbw


def upper_quartile(values):
    """The 75th percentile by nearest rank: with 3 pairs the best one, with 4 nodes' 6 pairs the 5th. A bad node is in
    2 of the 3 pairs of 3 nodes, in half the pairs of 4 and in fewer beyond, so this is always a good pair's."""
    ordered = sorted(values)
    return ordered[max(0, int(math.ceil(0.75 * len(ordered))) - 1)]


def _pairs_reference(results):
    good = [r['busbw_gbps'] for r in results.values() if not failed(r)]
    return upper_quartile(good) if good else None


def _judge_pair(result, reference, min_busbw, slow_ratio):
    """(status, reason) of one pair's measurement: failed, slow (below the floor, or below slow_ratio x the pairs'
    upper quartile ``reference``), ok."""
    if failed(result):
        return ('failed', result.get('error') or 'the all-reduce failed')
    if below_floor(result, min_busbw):
        return ('slow', '%.3g GB/s below trainops_health_min_busbw %.3g' % (result['busbw_gbps'], min_busbw))
    if reference and result['busbw_gbps'] < slow_ratio * reference:
        return ('slow', '%.3g GB/s, under %g x %.3g GB/s of the pairs\' upper quartile'
                % (result['busbw_gbps'], slow_ratio, reference))
    return ('ok', '')


def _judge_pairs(results, min_busbw, slow_ratio):
    """{pair key: (status, reason)} over measured pairs (:func:`_judge_pair`)."""
    reference = _pairs_reference(results)
    return dict((key, _judge_pair(result, reference, min_busbw, slow_ratio)) for key, result in results.items())


def better(first, second):
    """The better of two measurements of one group: the one that did not fail, else the faster. A pair is bad only
    when its re-measure agrees."""
    if failed(first):
        return second
    if failed(second):
        return first
    return second if second['busbw_gbps'] > first['busbw_gbps'] else first


class Again(list):
    """A group the search asks to measure a second time (a re-measure), not the measurement it has of it."""


def remeasures(count):
    """How many re-measures the search makes at most for ``count`` nodes: one per bad pair it would name alone (a
    link), up to one per two nodes (more bad links than that are no chance: they are named as measured)."""
    return max(1, count // 2)


def _confirmed_pairs(nodes, results, min_busbw, slow_ratio, budget):
    """The suspects of measured pairs (``results``: {pair key: measurement}, updated), each pair named alone (a link)
    measured again first while ``budget`` (a one-item list: re-measures left) lasts: the better of the two counts."""
    again = set()
    while True:
        suspects = _pair_suspects(nodes, _judge_pairs(results, min_busbw, slow_ratio))
        links = [tuple(s['node'].split('<->')) for s in suspects if '<->' in s['node']]
        todo = [key for key in links if key not in again]
        if not todo or budget[0] <= 0:
            return [dict(s, reason=s['reason'] + ', again when re-measured')
                    if '<->' in s['node'] and tuple(s['node'].split('<->')) in again else s for s in suspects]
        key = todo[0]
        again.add(key)
        budget[0] -= 1
        results[key] = better(results[key], (yield Again(key)))


def _pair_suspects(nodes, judged):
    """Suspects from judged pairs: the node in the most bad pairs, two or more; on a tie each node whose pairs are all
    bad; each bad pair left as a link."""
    bad = [(key, why) for key, why in judged.items() if why[0] != 'ok']
    if not bad:
        return []
    count = dict((node, 0) for node in nodes)
    for key, _why in bad:
        for node in key:
            count[node] += 1
    top = max(count.values())
    leaders = [node for node in nodes if count[node] == top]

    def named(node):
        return dict(node=node, reason='%d of its %d pair(s) %s' % (
            count[node], sum(1 for key in judged if node in key),
            '/'.join(sorted(set(why[0] for key, why in bad if node in key)))))

    if top >= 2 and len(leaders) == 1:
        return [named(leaders[0])]
    # a tie: every node whose pairs are all bad (two or more, with a good pair elsewhere) is named; the bad pairs
    # without such a node are links
    whole = [node for node in nodes if count[node] >= 2 and len(bad) < len(judged)
             and all(why[0] != 'ok' for key, why in judged.items() if node in key)]
    return [named(node) for node in whole] + [dict(node='%s<->%s' % key, reason='the pair %s: %s' % (why[0], why[1]))
                                              for key, why in bad if not set(key) & set(whole)]


def _search(nodes, min_busbw, slow_ratio, all_pairs_max):
    """The search as a generator: yields a group to measure, receives its result; returns the suspects found."""
    full = yield list(nodes)
    full_bad = failed(full) or below_floor(full, min_busbw)
    if len(nodes) == 1:
        return [dict(node=nodes[0], reason='the all-reduce on the node failed')] if failed(full) else []
    if not full_bad and (min_busbw is not None or len(nodes) == 2):
        return []
    budget = [remeasures(len(nodes))]
    # every pair where the all-reduce of all nodes was bad (or 3 nodes: their pairs are the bisection's end anyway);
    # without a floor a check that saw nothing wrong bisects, so a healthy cluster costs 3 measurements, not 1 + n(n-1)/2
    if len(nodes) <= all_pairs_max and (full_bad or len(nodes) <= 3):
        results = {}
        for i, first in enumerate(nodes):
            for second in nodes[i + 1:]:
                results[_key((first, second))] = yield [first, second]
        suspects = yield from _confirmed_pairs(nodes, results, min_busbw, slow_ratio, budget)
    else:
        suspects = yield from _bisect(list(nodes), None, min_busbw, slow_ratio, budget)
    if not suspects and full_bad:
        return [dict(node='all nodes', reason='the all-reduce of all %d nodes %s, every group measured alone was fine'
                     % (len(nodes), 'failed' if failed(full) else 'was slow'))]
    return suspects


def _with_reference(group, ref, min_busbw, slow_ratio, budget):
    """Each node of a small group measured with a node known to be good: the bad ones (each measured again first,
    while ``budget`` lasts)."""
    results = {}
    for node in group:
        results[node] = yield [ref, node]
    again = set()
    while True:
        named = _reference_suspects(results, ref, min_busbw, slow_ratio)
        todo = [s['node'] for s in named if s['node'] not in again]
        if not todo or budget[0] <= 0:
            return [dict(s, reason=s['reason'] + ', again when re-measured') if s['node'] in again else s for s in named]
        again.add(todo[0])
        budget[0] -= 1
        results[todo[0]] = better(results[todo[0]], (yield Again([ref, todo[0]])))


def _reference_suspects(results, ref, min_busbw, slow_ratio):
    good = [r['busbw_gbps'] for r in results.values() if not failed(r)]
    suspects = []
    for node, result in results.items():
        why = None
        if failed(result):
            why = 'failed with %s' % ref
        elif below_floor(result, min_busbw):
            why = '%.3g GB/s with %s, below trainops_health_min_busbw' % (result['busbw_gbps'], ref)
        elif len(good) > 1 and result['busbw_gbps'] < slow_ratio * max(good):
            why = '%.3g GB/s with %s, under %g x the best %.3g GB/s' % (
                result['busbw_gbps'], ref, slow_ratio, max(good))
        if why:
            suspects.append(dict(node=node, reason=why))
    return suspects


def _bisect(group, ref, min_busbw, slow_ratio, budget):
    """Split ``group`` in halves, measure each, recurse into the bad half (with a node of the good half as the
    reference for groups of 3 or fewer nodes)."""
    if len(group) <= 3:
        if ref is not None:
            return (yield from _with_reference(group, ref, min_busbw, slow_ratio, budget))
        results = {}
        for i, first in enumerate(group):
            for second in group[i + 1:]:
                results[_key((first, second))] = yield [first, second]
        return (yield from _confirmed_pairs(group, results, min_busbw, slow_ratio, budget))
    half = len(group) // 2
    first, second = group[:half], group[half:]
    result_a = yield first
    result_b = yield second

    def bad(mine, other):
        if failed(mine) or below_floor(mine, min_busbw):
            return True
        return not failed(other) and mine['busbw_gbps'] < slow_ratio * other['busbw_gbps']

    bad_a, bad_b = bad(result_a, result_b), bad(result_b, result_a)
    suspects = []
    if bad_a:
        suspects += yield from _bisect(first, None if bad_b else second[0], min_busbw, slow_ratio, budget)
    if bad_b:
        suspects += yield from _bisect(second, None if bad_a else first[0], min_busbw, slow_ratio, budget)
    return suspects


def next_step(nodes, measured, min_busbw=None, slow_ratio=0.5, all_pairs_max=8):
    """Replay the search over ``measured`` (``[{nodes: [...], ok, busbw_gbps, ...}]`` in the order measured).

    Returns ``dict(group=[...], done=False, step=<n>)`` for the next group to measure (its first node is the master),
    or ``dict(group=None, done=True, suspects=[...], measured=<n>)``. A group measured before is not measured again
    (two nodes: the pair is the whole set), except once where the search asks for a re-measure. The rule
    (docs/health.md):

    * measure all nodes; with ``min_busbw`` set and met (or with two nodes) the search ends there, healthy;
    * otherwise, with up to ``all_pairs_max`` nodes and an all-reduce of all nodes that failed or was below
      ``min_busbw`` (or 3 nodes), every pair; a pair is slow below ``min_busbw`` or below ``slow_ratio`` x the upper
      quartile of the pairs; the node in the most bad pairs (two or more) is the suspect, on a tie each node whose
      pairs are all bad, else each bad pair is (a link), after a re-measure agrees (:func:`remeasures`);
    * else (more nodes, or no ``min_busbw`` and nothing wrong with all nodes), bisection: both halves are measured,
      a half is bad when it fails, is below ``min_busbw`` or below ``slow_ratio`` x the other half; the search
      recurses into the bad half, and ends with the nodes of a group of 3 or fewer measured each with a node of the
      good half (a bad one re-measured).
    """
    _check_config(nodes, min_busbw, slow_ratio, all_pairs_max)
    memo = {}
    for entry in measured or []:
        if not isinstance(entry, dict) or not isinstance(entry.get('nodes'), (list, tuple)):
            raise HealthError('a measurement must be a mapping with a list of nodes, got %r' % (entry,))
        memo.setdefault(_key(entry['nodes']), []).append(entry)
    search = _search(list(nodes), min_busbw, slow_ratio, all_pairs_max)
    step = 0
    try:
        group = next(search)
        while True:
            step += 1
            found, index = memo.get(_key(group)) or [], 1 if isinstance(group, Again) else 0
            if len(found) <= index:
                return dict(group=list(group), done=False, step=step)
            group = search.send(found[index])
    except StopIteration as stop:
        return dict(group=None, done=True, suspects=stop.value or [], step=step)


def max_steps(count, all_pairs_max=8):
    """An upper bound of the groups the search measures for ``count`` nodes (the playbook's loop length)."""
    if count <= 2:
        return count  # two nodes: the whole set is the pair, measured again when bad
    if count <= all_pairs_max:
        return 1 + count * (count - 1) // 2 + remeasures(count)
    # two halves per level, both halves possibly at every level, 3 pairs at the end of each branch
    return 1 + 2 * count + 3 * count + remeasures(count)


# ------------------------------------------------------------------------------------------------
# the report
# ------------------------------------------------------------------------------------------------

def _gpu_cell(gpus):
    if gpus == NONE or not isinstance(gpus, dict):
        return NONE
    widths = sorted(set('x%s/x%s' % (l['link'].get('width'), l['link'].get('max_width'))
                        for l in gpus.get('links', []) if l.get('link')))
    tools = [str(t) for t in gpus.get('tools') or []]
    return '%d %s%s%s' % (gpus.get('count', 0), gpus.get('vendor', ''), (' ' + ','.join(widths)) if widths else '',
                          (' (%s)' % ', '.join(tools)) if tools else '')


def _rdma_cell(rdma):
    if rdma == NONE or not isinstance(rdma, dict):
        return NONE
    ports = [p for d in rdma.get('devices', []) for p in d.get('ports', [])]
    active = sum(1 for p in ports if p.get('state') == 'ACTIVE')
    return '%d dev, %d/%d ports ACTIVE' % (rdma.get('count', 0), active, len(ports))


def _table(header, rows):
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows)]
    fmt = '  '.join('%%-%ds' % w for w in widths)
    return [(fmt % tuple(header)).rstrip()] + [(fmt % tuple(str(c) for c in row)).rstrip() for row in rows]


def group_status(result, min_busbw):
    if failed(result):
        return 'failed'
    if below_floor(result, min_busbw):
        return 'slow'
    return 'ok'


def report(nodes, node_facts, measured, search, min_busbw=None, slow_ratio=0.5):
    """The health report: ``dict(verdict, healthy, suspects, nodes=[...], groups=[...], lines=[...])``.

    ``node_facts``: ``{node: node_checks(...)}`` (a node without an entry could not be read: suspect);
    ``measured``: the measurements in order; ``search``: ``next_step``'s final answer.
    """
    suspects = []
    node_rows = []
    for node in nodes:
        facts = node_facts.get(node)
        if not isinstance(facts, dict):
            suspects.append(dict(node=node, reason='its facts could not be read'))
            node_rows.append(dict(node=node, gpus='?', rdma='?', status='unread', problems=[], warnings=[]))
            continue
        problems = list(facts.get('problems') or [])
        if problems:
            suspects.append(dict(node=node, reason='; '.join(problems)))
        node_rows.append(dict(node=node, gpus=facts.get('gpus'), rdma=facts.get('rdma'),
                              status='problem' if problems else 'ok', problems=problems,
                              warnings=list(facts.get('warnings') or [])))
    search_suspects = list((search or {}).get('suspects') or [])
    if not (search or {}).get('done', True):
        search_suspects.append(dict(node='the search', reason='ended before it was done'))
    suspects += search_suspects
    group_rows = []
    for entry in measured or []:
        group_rows.append(dict(nodes=list(entry['nodes']), status=group_status(entry, min_busbw),
                               busbw_gbps=entry.get('busbw_gbps'), time_us=entry.get('time_us'),
                               experiment_dir=entry.get('experiment_dir'), error=entry.get('error')))
    # a pair's row says how the search judged that measurement (slow: also relative to the other pairs, the better
    # measurement of a pair measured again counting for the reference)
    pairs = {}
    for entry in measured or []:
        if len(entry['nodes']) == 2:
            key = _key(entry['nodes'])
            pairs[key] = better(pairs[key], entry) if key in pairs else entry
    reference = _pairs_reference(pairs)
    for row, entry in zip(group_rows, measured or []):
        if len(row['nodes']) == 2:
            row['status'] = _judge_pair(entry, reference, min_busbw, slow_ratio)[0]
    verdict = 'healthy' if not suspects else 'suspect: ' + '; '.join('%s (%s)' % (s['node'], s['reason'])
                                                                     for s in suspects)
    lines = ['Nodes:'] + _table(
        ('node', 'gpus', 'rdma', 'status', 'problems / warnings'),
        [(r['node'], _gpu_cell(r['gpus']), _rdma_cell(r['rdma']), r['status'],
          '; '.join(r['problems'] + r['warnings']) or '-') for r in node_rows])
    lines += ['', 'All-reduce by group (all nodes first, then the search):'] + _table(
        ('group', 'busbw (GB/s)', 'time (us)', 'status'),
        [(','.join(r['nodes']), '-' if r['busbw_gbps'] is None else '%.3f' % r['busbw_gbps'],
          '-' if r['time_us'] is None else '%.1f' % r['time_us'], r['status']) for r in group_rows])
    lines += ['', 'verdict: ' + verdict]
    return dict(verdict=verdict, healthy=not suspects, suspects=suspects, nodes=node_rows, groups=group_rows,
                lines=lines, min_busbw=min_busbw)


def non_negative(value):
    """A finite number >= 0 from a node's file, or None (strings, booleans, NaN, inf, negatives)."""
    return seconds(value)


def measurement(nodes, manifest, results, experiment_dir=None, refused=()):
    """One measurement from a run's manifest (its ``outcome``) and its allreduce.json (or None; ``refused``: the lines
    saying why it was not read, _experiment_metrics.read_rank_zero_json)."""
    ok = isinstance(manifest, dict) and manifest.get('outcome') == 'succeeded' and isinstance(results, dict)
    entry = dict(nodes=list(nodes), ok=bool(ok), busbw_gbps=None, time_us=None, experiment_dir=experiment_dir,
                 error=None)
    if refused and isinstance(manifest, dict) and manifest.get('outcome') == 'succeeded':
        entry['error'] = '; '.join(refused)
    elif ok:
        # allreduce.json is written by rank 0 on a node: numbers are taken only when they are finite and >= 0
        records = results.get('results') if isinstance(results.get('results'), list) else []
        last = records[-1] if records and isinstance(records[-1], dict) else {}
        entry['busbw_gbps'] = non_negative(results.get('avg_busbw_gbps'))
        entry['time_us'] = non_negative(last.get('time_us'))
        if results.get('wrong_total'):
            entry.update(ok=False, error='%s wrong element(s)' % results['wrong_total'])
        elif entry['busbw_gbps'] is None:
            entry.update(ok=False, error='no bus bandwidth in allreduce.json')
    else:
        detail = manifest.get('outcome_detail') if isinstance(manifest, dict) else None
        outcome = manifest.get('outcome') if isinstance(manifest, dict) else 'no manifest'
        entry['error'] = '%s%s' % (outcome, (': %s' % detail) if detail else '')
    return entry


# ------------------------------------------------------------------------------------------------
# the check's course (roles/job/tasks/health_steps.yml, health_step.yml): its settings, its search's state, each
# measurement read from the run's experiment directory, health.json
# ------------------------------------------------------------------------------------------------

def _null(value):
    return value is None or (isinstance(value, str) and value.strip() in ('', 'None', 'null'))


def _real(value):
    """A finite number from a knob's value (a string from the command line too); ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(value)
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(value)
    return number


def settings(min_busbw=None, slow_ratio=0.5, all_pairs_max=8, timeout=60):
    """``dict(min_busbw, slow_ratio, all_pairs_max, timeout)`` from the knobs (``trainops_health_*``, strings from the
    command line too); one message naming every knob and its range when one is out of range."""
    try:
        found = dict(min_busbw=None if _null(min_busbw) else _real(min_busbw), slow_ratio=_real(slow_ratio),
                     all_pairs_max=int(_real(all_pairs_max)), timeout=int(_real(timeout)))
        fine = ((found['min_busbw'] is None or found['min_busbw'] > 0) and 0 < found['slow_ratio'] < 1
                and found['all_pairs_max'] >= 2 and found['timeout'] >= 10)
    except (TypeError, ValueError, OverflowError):
        fine = False
    if not fine:
        raise HealthError(
            'Not checking: trainops_health_min_busbw=%s (GB/s above 0, or null), trainops_health_slow_ratio=%s (between 0 '
            'and 1), trainops_health_all_pairs_max=%s (2 or more), trainops_health_timeout=%s (10 s or more): fix the one '
            'that is out of range.' % (min_busbw, slow_ratio, all_pairs_max, timeout))
    return found


def search_start(nodes, master, config):
    """The state of a check of ``nodes`` (rank order; ``master``: the job's master, whose address the inventory gives)
    with ``config`` (:func:`settings`): nothing measured, nothing being measured, the loop's steps (one more than
    the search can measure: the last one adds the last measurement)."""
    _check_config(nodes, config['min_busbw'], config['slow_ratio'], config['all_pairs_max'])
    return dict(nodes=list(nodes), master=master, settings=dict(config), measured=[], next=None, measuring=False,
                steps=list(range(1, max_steps(len(nodes), config['all_pairs_max']) + 2)))


def search_advance(state, measured=None):
    """The state after the group being measured (``measured``: its :func:`measurement`, or None when no group was
    being measured) with the next group to measure: ``next`` is :func:`next_step`'s answer, ``measuring`` whether a
    group is to be measured now, ``name`` its experiment's name."""
    state = dict(state, measured=list(state['measured']))
    if state['measuring'] and measured is not None:
        state['measured'].append(measured)
    config = state['settings']
    state['next'] = next_step(state['nodes'], state['measured'], config['min_busbw'], config['slow_ratio'],
                              config['all_pairs_max'])
    state['measuring'] = not state['next']['done']
    state['name'] = ('step%02d_%dnodes' % (state['next']['step'], len(state['next']['group']))
                     if state['measuring'] else None)
    return state


def finish(state, node_facts):
    """The report (:func:`report`) of the check whose search is ``state`` (its last step added the last measurement),
    and the search's final answer."""
    config = state['settings']
    search = next_step(state['nodes'], state['measured'], config['min_busbw'], config['slow_ratio'],
                       config['all_pairs_max'])
    return report(state['nodes'], node_facts, state['measured'], search, config['min_busbw'],
                  config['slow_ratio']), search


def write_report(path, result, search):
    """Write ``health.json`` (the report and the search's answer) in the directory ``path`` (created when missing);
    returns its path. Raises OSError."""
    path = os.path.abspath(path)
    target = os.path.join(path, 'health.json')
    os.makedirs(path, exist_ok=True)
    with open(target + '.tmp', 'w') as handle:
        json.dump(dict(result, search=search), handle, indent=2, sort_keys=True)
        handle.write('\n')
    os.replace(target + '.tmp', target)
    return target


#: What the launch reads after the check before an attempt and the check's own steps set for their nodes and
#: measurements (roles/job/tasks/health_check.yml gives them back to the launch, whether the check passed or failed).
LAUNCH_FACTS = ('__trainops_preflight', '__trainops_git_ref', '__trainops_nccl', '__trainops_experiment',
                '__trainops_root_shares', '__trainops_workspace_shares')


def check_name(gate, name=None, experiment=None):
    """The name of the check's directory before its time: ``name`` (the entry point's ``run_name``, else
    ``health``); before an attempt, the attempt's experiment's name and ``_health``."""
    if gate:
        return '%s_health' % (experiment or {}).get('name')
    return str(name or 'health')


def checking_line(number, nodes, run_id):
    """What the check before attempt ``number`` says first."""
    return ('Attempt %s: checking %s first (trainops_health_check; its measurements are experiments %s_health_*)'
            % (number, ', '.join(nodes), run_id))


def failure(report, gate=None, attempt=None):
    """Why the play stops after the check, or ``''``: the check (playbooks/health.yml) fails naming the suspects;
    before an attempt (``gate``: module_utils/_retries.py health_gate's answer) the attempt ``attempt`` (its
    ``number``) does not start when the gate says ``stop``."""
    if gate is None:
        return '' if report['healthy'] else '%s (see %s)' % (report['verdict'], report['file'])
    if gate.get('stop'):
        return 'Not starting attempt %s: %s' % ((attempt or {}).get('number'), gate['stop'])
    return ''


def gated_attempt(attempt, gate):
    """The attempt after the gate: its spare nodes left, and the nodes the gate replaced after those replaced
    before."""
    return dict(attempt, spares=list(gate['spares']),
                replaced=list(attempt.get('replaced') or []) + list(gate['replaced']))
