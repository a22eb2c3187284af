# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""A heartbeat per rank, with no change to the script (docs/failures.md "Which rank stopped").

On the node: the supervisor (module_utils/_supervisor.py, which ships this file into the run directory; standard
library only) finds the ranks among its processes (:func:`rank_processes`) and every :data:`INTERVAL_S` seconds
samples each one (:func:`proc_sample`: its /proc state letter and CPU time; :func:`last_step`: the ``global_step`` of
the last record of its ``rank_<rank>_metrics.jsonl``, where the script writes one). :class:`Recorder` keeps the last
:data:`KEEP` samples of each rank and when it last worked, and the supervisor writes them to
``trainops_heartbeat.json`` in the run's output directory, which the collect brings into the experiment.

On the controller: :func:`judge` reads the nodes' records (what a job wrote is checked here, field by field) and names
the ranks that stopped progressing while their peers did not: a rank stopped by a signal (state ``T``, ``t``: SIGSTOP,
a debugger) in its last two samples while other ranks are not; else a rank that did no work (CPU time flat, no new
step) for :data:`QUIET_MARGIN_S` seconds longer than every other rank and was still there while they worked.
"""

from __future__ import annotations

import json
import math
import os
import re
import time

HEARTBEAT_FILE = 'trainops_heartbeat.json'
"""The record in the run's output directory (collected into ``outputs/<node>/``)."""
INTERVAL_S = 2.0
"""Seconds between two samples (job.json ``heartbeat_interval``)."""
KEEP = 30
"""Samples kept per rank (a minute at the default interval)."""
MAX_RANKS = 1024
"""Ranks of one node sampled and read at most (a node has a few)."""
STOPPED_STATES = frozenset(['T', 't'])
"""/proc state letters of a process that cannot run: stopped by a signal (SIGSTOP, SIGTSTP) or by a tracer."""
BUSY = 0.2
"""CPU seconds per second between two samples that count as work (a computing rank uses about one; a rank that waits
in a collective on gloo, sleeps or is stopped uses almost none)."""
QUIET_MARGIN_S = 30.0
"""How much longer than every other rank a rank must have been idle to be named (fifteen samples): the nodes'
clocks differ, and a rank that waits for a peer goes idle a step after it."""
METRICS_FILE = re.compile(r'^rank_(\d{1,7})_metrics\.jsonl$')
"""The metrics file a rank may write in its output directory (docs/your-script.md; the shipped train.py writes
``rank_01_metrics.jsonl``)."""
TAIL_BYTES = 4096
"""What of the end of a rank's metrics file is read for its last step."""


# ---------------------------------------------------------------------------
# on the node: which processes are the ranks, and their samples
# ---------------------------------------------------------------------------

def read_environ(pid, proc_root='/proc'):
    """torchrun's ``RANK`` and ``TORCHELASTIC_RUN_ID`` of the environment ``pid`` started with (``{}`` when it cannot
    be read)."""
    try:
        with open(os.path.join(proc_root, str(pid), 'environ'), 'rb') as handle:
            data = handle.read(1024 * 1024)
    except (IOError, OSError):
        return {}
    found = {}
    for item in data.split(b'\0'):
        name, sep, value = item.partition(b'=')
        if sep and name in (b'RANK', b'TORCHELASTIC_RUN_ID'):
            found[name.decode('ascii', 'replace')] = value.decode('utf-8', 'replace')
    return found


def rank_processes(tree, environ=read_environ):
    """``{rank: pid}`` of the ranks among ``tree`` (``{pid: ProcInfo}``, the run's processes): those whose environment
    has torchrun's ``RANK`` and ``TORCHELASTIC_RUN_ID``, the topmost of each rank (its children, such as DataLoader
    workers, inherit that environment)."""
    ranked = {}
    for pid in sorted(tree):
        env = environ(pid)
        if 'TORCHELASTIC_RUN_ID' in env and env.get('RANK', '').isdigit():
            ranked[pid] = int(env['RANK'])
    ranks = {}
    for pid, rank in sorted(ranked.items()):
        parent = getattr(tree[pid], 'ppid', None)
        if ranked.get(parent) == rank:
            continue  # a child of the rank's own process
        ranks.setdefault(rank, pid)
    return dict(sorted(ranks.items())[:MAX_RANKS])


def parse_sample(data, ticks):
    """``(state, cpu seconds)`` from the text of ``/proc/<pid>/stat`` (user + system time, fields 14 and 15, after the
    command's last parenthesis), None when it does not read."""
    fields = data[data.rfind(')') + 2:].split() if ')' in data else []
    try:
        return fields[0], (int(fields[11]) + int(fields[12])) / float(ticks)
    except (IndexError, ValueError):
        return None


def proc_sample(pid, proc_root='/proc'):
    """``(state, cpu seconds)`` of the process ``pid``, None when it is gone."""
    try:
        with open(os.path.join(proc_root, str(pid), 'stat')) as handle:
            data = handle.read(4096)
    except (IOError, OSError):
        return None
    return parse_sample(data, os.sysconf('SC_CLK_TCK'))


def metrics_files(out_dir):
    """``{rank: path}`` of the metrics files in ``out_dir`` (the rank from the file's name), ``{}`` without."""
    try:
        names = os.listdir(out_dir)
    except OSError:
        return {}
    found = {}
    for name in sorted(names):
        match = METRICS_FILE.match(name)
        if match and len(found) < MAX_RANKS:
            found.setdefault(int(match.group(1)), os.path.join(out_dir, name))
    return found


def last_step(path):
    """The ``global_step`` of the last whole record of the metrics file ``path`` (its last TAIL_BYTES, no link
    followed), None without one."""
    if not path:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NOFOLLOW', 0) | getattr(os, 'O_NONBLOCK', 0))
    except OSError:
        return None
    with os.fdopen(fd, 'rb') as handle:
        try:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - TAIL_BYTES))
            found = handle.read(TAIL_BYTES).split(b'\n')
        except (IOError, OSError):
            return None
    for line in reversed(found[1:] if size > TAIL_BYTES else found):  # the first of a cut tail is cut too
        try:
            step = json.loads(line.decode('utf-8', 'replace')).get('global_step')
        except (ValueError, AttributeError, RecursionError):
            continue
        if _whole(step) is not None:
            return step
    return None


class Recorder(object):
    """The last :data:`KEEP` samples of each rank of a node: ``[time, state, cpu seconds, step]``, when it last worked
    (``active_at``: a sample whose CPU time grew by BUSY per second or whose step grew; its first sample) and when it
    was first seen gone (``gone_at``)."""

    def __init__(self, interval=INTERVAL_S, keep=KEEP):
        self.interval, self.keep, self.ranks = float(interval), int(keep), {}

    def sample(self, ranks, now, sampler=proc_sample, step_of=lambda rank: None):
        """Take one sample of every rank of ``ranks`` (``{rank: pid}``); a rank of before that is not among them any
        more is gone."""
        for rank, pid in sorted(ranks.items()):
            taken = sampler(pid)
            if taken is None:
                continue
            entry = self.ranks.get(rank)
            if entry is None or entry['pid'] != pid:
                entry = self.ranks[rank] = dict(pid=pid, samples=[], active_at=now, gone_at=None)
            state, cpu = taken
            step = step_of(rank)
            if entry['samples']:
                before = entry['samples'][-1]
                worked = cpu - before[2] >= BUSY * max(now - before[0], 0.0)
                stepped = step is not None and before[3] is not None and step > before[3]
                if worked or stepped:
                    entry['active_at'] = now
            entry['samples'] = (entry['samples'] + [[now, state, round(cpu, 2), step]])[-self.keep:]
            entry['gone_at'] = None
        for rank, entry in self.ranks.items():
            if rank not in ranks and entry['gone_at'] is None:
                entry['gone_at'] = now

    def record(self, now):
        """What ``trainops_heartbeat.json`` holds."""
        return dict(version=1, interval_s=self.interval, updated_at_epoch=now,
                    ranks=dict((str(rank), entry) for rank, entry in sorted(self.ranks.items())))


# ---------------------------------------------------------------------------
# on the controller: judging the nodes' records
# ---------------------------------------------------------------------------

def _number(value):
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and abs(value) < 1e12:
        return float(value)
    return None


def _whole(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2 ** 53 else None


def _samples(entry):
    """The well-formed samples of one rank's entry, oldest first, at most KEEP."""
    found = []
    for sample in (entry.get('samples') if isinstance(entry.get('samples'), list) else [])[-KEEP:]:
        if not isinstance(sample, list) or len(sample) != 4 or _number(sample[0]) is None:
            continue
        state = sample[1] if isinstance(sample[1], str) and len(sample[1]) == 1 and sample[1].isalpha() else '?'
        found.append((_number(sample[0]), state, _number(sample[2]), _whole(sample[3])))
    return sorted(found, key=lambda sample: sample[0])


def rows(records, world_size=None):
    """One row per rank of the nodes' records (``{node: trainops_heartbeat.json}``), in rank order: ``{node, rank,
    state, stopped_since, active_at, last_seen, cpu_s, step}`` (the last sample's; ``stopped_since``: the first of
    the last run of stopped samples, when the last two are). A rank the job lacks (``world_size``), a malformed entry
    or one without a sample is left out."""
    found = []
    for node, record in sorted((records or {}).items()):
        ranks = record.get('ranks') if isinstance(record, dict) else None
        for key, entry in sorted(ranks.items() if isinstance(ranks, dict) else [])[:MAX_RANKS]:
            rank = int(key) if isinstance(key, str) and key.isdigit() and len(key) < 8 else None
            if rank is None or not isinstance(entry, dict) or (world_size and rank >= world_size):
                continue
            samples = _samples(entry)
            if not samples:
                continue
            stopped_since = None
            if len(samples) >= 2 and all(sample[1] in STOPPED_STATES for sample in samples[-2:]):
                stopped_since = samples[-1][0]
                for sample in reversed(samples):
                    if sample[1] not in STOPPED_STATES:
                        break
                    stopped_since = sample[0]
            last = samples[-1]
            found.append(dict(node=node, rank=rank, state=last[1], stopped_since=stopped_since,
                              active_at=_number(entry.get('active_at')) or samples[0][0], last_seen=last[0],
                              cpu_s=last[2], step=last[3]))
    return sorted(found, key=lambda row: (row['rank'], row['node']))


def _clock(epoch):
    return time.strftime('%H:%M:%SZ', time.gmtime(epoch))


def judge(records, world_size=None, margin=QUIET_MARGIN_S):
    """``{'rows': rows(records), 'culprits': [{node, rank, why}]}``: the ranks that stopped progressing while their
    peers did not (the module's docstring); ``[]`` when no rank stands apart (all stopped, all idle alike, one rank)."""
    table = rows(records, world_size)
    stopped = [row for row in table if row['stopped_since'] is not None]
    culprits = []
    if stopped and len(stopped) < len(table):
        for row in stopped:
            culprits.append(dict(node=row['node'], rank=row['rank'], why='stopped (state %s) since %s, CPU time flat at '
                                 '%s s' % (row['state'], _clock(row['stopped_since']), row['cpu_s'])))
    elif not stopped and len(table) > 1:
        for row in table:
            peers = [other for other in table if other is not row]
            others_active = min(other['active_at'] for other in peers)
            if row['active_at'] + margin <= others_active and row['last_seen'] >= others_active:
                culprits.append(dict(node=row['node'], rank=row['rank'], why='no work since %s (CPU time flat at %s s) '
                                     'while the other ranks worked until %s or later' % (
                                         _clock(row['active_at']), row['cpu_s'], _clock(others_active))))
    return dict(rows=table, culprits=culprits)


def lines(judgment, where=None):
    """The summary's lines for the named ranks (``[]`` without): each with its last step and, from ``where``
    (``{(node, rank): the innermost frame of its stack}``), where its stack stood."""
    out = []
    steps = dict(((row['node'], row['rank']), row['step']) for row in judgment['rows'])
    for culprit in judgment['culprits']:
        key = (culprit['node'], culprit['rank'])
        extra = '; last step %s' % steps[key] if steps.get(key) is not None else ''
        if (where or {}).get(key):
            extra += '; its stack: %s' % where[key]
        out.append('heartbeat  : rank %s (%s) %s%s' % (culprit['rank'], culprit['node'], culprit['why'], extra))
    return out
