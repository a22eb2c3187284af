# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Per-rank logs: one rule for reading a rank's lines out of a node's log.

The supervisor starts torchrun with ``--tee 3`` and the line prefix ``[rank <global rank>] `` (module_utils/
_supervisor.py, :data:`RANK_LOG_PREFIX`), so node.log holds every rank's lines, each with its rank, between
torchrun's own lines (no prefix). This module

- splits the collected node logs (``logs/node_<node rank>.txt``) into ``logs/rank_<global rank>.txt`` (the prefix
  left out) and builds the rank map (rank, node, local rank, log) for the manifest and summary.txt
  (:func:`split_node_logs`);
- reads a rank's lines from a node's log from an offset, a bounded chunk at a time (:func:`read_rank_lines`: the
  node side of ``playbooks/logs.yml -e follow=true``);
- finds an experiment and prints the end of a rank's log (:func:`experiment_dir`, :func:`tail_file`).

Everything read is the job's to write: a line is read at most MAX_LINE_BYTES at a time (a longer one is cut in
pieces, each kept with the rank of its line), a rank is taken only when it is one of the job's ranks, files are
opened without following a symbolic link, and a destination is checked to stay inside the experiment
(module_utils/_collect.py). Standard library only (the node side runs in the module).
"""

from __future__ import annotations

import errno
import os
import re
import stat

from ansible_collections.trainops.multinode.plugins.module_utils import _collect, _node_files
from ansible_collections.trainops.multinode.plugins.module_utils._supervisor import RANK_LOG_PREFIX

RANK_LINE = re.compile(re.escape(RANK_LOG_PREFIX.encode()).replace(re.escape(b'${rank}'), rb'(\d{1,7})'))
"""A rank's line in node.log, from :data:`RANK_LOG_PREFIX` (``[rank 5] ``): group 1 is the global rank."""
MAX_LINE_BYTES = 64 * 1024
"""What is read of a line at a time: a longer line is cut into pieces of this size."""
MAX_CHUNK_BYTES = 1024 * 1024
"""What one read of a running node log takes (``logs.yml -e follow=true``: one question to the node)."""
MAX_TAIL_BYTES = 4 * 1024 * 1024
"""What is read of the end of a rank's log on the controller (``logs.yml``)."""
MAX_MAP_ROWS_SHOWN = 64
"""Rows of the rank map in summary.txt; the manifest's ``rank_logs`` keeps every rank."""
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
"""A manifest.json read to find the latest experiment."""
LOG_DIR = 'logs'


class RankLogError(Exception):
    """A rank, an experiment or a run that cannot be read; the message says what to give instead."""


def given_rank(value):
    """The rank the user gave (``-e rank=N``: digits, a global rank) as a number; RankLogError naming what to give."""
    if isinstance(value, bool) or not re.match(r'^[0-9]+$', str(value)):
        raise RankLogError('Give the rank whose lines to print: -e rank=N (a global rank, 0 to world size - 1), not %s.'
                           % (value,))
    return int(value)


def rank_log_name(rank):
    """``rank_5.txt``: a rank's log in the experiment's ``logs/``."""
    return 'rank_%d.txt' % rank


def node_log_name(node_rank):
    """``node_1.txt``: a node's log in the experiment's ``logs/`` (roles/job/tasks/collect.yml)."""
    return 'node_%d.txt' % node_rank


def split_line(line, world_size):
    """``(rank, rest)`` for a line of node.log (bytes): the rank of a rank's line when it is one of the job's
    ``world_size`` ranks (None: any), with the prefix left out; ``(None, line)`` for torchrun's own lines."""
    match = RANK_LINE.match(line)
    if match:
        rank = int(match.group(1))
        if world_size is None or rank < world_size:
            return rank, line[match.end():]
    return None, line


def _open_regular(path):
    """A regular file opened for reading without following a symbolic link; None when it is not there."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NOFOLLOW', 0) | getattr(os, 'O_NONBLOCK', 0))
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise RankLogError('cannot read %s: %s' % (path, exc))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RankLogError('%s is not a regular file' % path)
    return os.fdopen(fd, 'rb')


def _lines(handle):
    """``(line, continued)`` pieces of at most MAX_LINE_BYTES; ``continued``: the piece goes on an earlier one."""
    continued = False
    while True:
        piece = handle.readline(MAX_LINE_BYTES)
        if not piece:
            return
        yield piece, continued
        continued = not piece.endswith(b'\n')


def node_ranks(manifest):
    """``[(node, [ranks])]`` in node rank order, as the launch planned them (the manifest's ``nodes``)."""
    planned = []
    for node in (manifest or {}).get('nodes') or []:
        if isinstance(node, dict) and isinstance(node.get('host'), str):
            ranks = [r for r in node.get('ranks') or [] if isinstance(r, int) and not isinstance(r, bool)]
            planned.append((node['host'], ranks))
    return planned


class _RankFiles(object):
    """The experiment's ``logs/rank_<r>.txt`` being written: each one emptied the first time it is opened."""

    MAX_OPEN = 256

    def __init__(self, experiment_dir):
        self.experiment_dir = experiment_dir
        self.handles = {}
        self.started = set()

    def write(self, rank, data):
        handle = self.handles.get(rank)
        if handle is None:
            if len(self.handles) >= self.MAX_OPEN:
                self.close()
            dest = _collect.destination(self.experiment_dir, [LOG_DIR, rank_log_name(rank)])
            handle = self.handles[rank] = open(dest, 'ab' if rank in self.started else 'wb')
            self.started.add(rank)
        handle.write(data)

    def close(self):
        for handle in self.handles.values():
            handle.close()
        self.handles = {}


def split_node_logs(experiment_dir, manifest, world_size=None, check_mode=False):
    """Split every collected ``logs/node_<n>.txt`` into ``logs/rank_<r>.txt`` (nothing is written in check mode).

    Returns ``{'rows': [{rank, node, local_rank, log, lines}], 'refused': [line, ...]}``: a row per rank the launch
    planned (the manifest's ``nodes``) or whose lines a node's log holds. ``node`` is the node whose log holds the
    rank's lines (the planned one when none does), ``local_rank`` its place among that node's planned ranks (None
    when it was not planned there), ``log`` the path below the experiment (None without a line), ``lines`` how many
    (None: its node's log was not collected).
    """
    planned = node_ranks(manifest)
    rows = {}
    for node, ranks in planned:
        for local, rank in enumerate(ranks):
            rows.setdefault(rank, dict(rank=rank, node=node, local_rank=local, log=None, lines=0))
    refused = []
    files = _RankFiles(experiment_dir)
    try:
        for node_rank, (node, ranks) in enumerate(planned):
            path = os.path.join(experiment_dir, LOG_DIR, node_log_name(node_rank))
            try:
                handle = _open_regular(path)
            except RankLogError as exc:
                refused.append('%s: %s' % (node, exc))
                continue
            if handle is None:
                for rank in ranks:
                    if rows[rank]['node'] == node and rows[rank]['lines'] == 0:
                        rows[rank]['lines'] = None  # not collected (yet)
                continue
            with handle:
                rank = None
                for piece, continued in _lines(handle):
                    if not continued:
                        rank, piece = split_line(piece, world_size)
                    if rank is None:
                        continue
                    row = rows.get(rank)
                    if row is None or (not row['lines'] and row['node'] != node):
                        row = rows[rank] = dict(rank=rank, node=node, log=None, lines=0,
                                                local_rank=ranks.index(rank) if rank in ranks else None)
                    if not continued:
                        row['lines'] += 1
                    row['log'] = '%s/%s' % (LOG_DIR, rank_log_name(rank))
                    if not check_mode:
                        files.write(rank, piece)
    except (_collect.CollectRefused, OSError) as exc:
        refused.append('rank logs: %s' % exc)
    finally:
        files.close()
    return dict(rows=[rows[rank] for rank in sorted(rows)], refused=refused)


def map_lines(rows, label='rank map', width=10):
    """The rank map as summary.txt lines (``label : rank  node  local rank  log``), at most MAX_MAP_ROWS_SHOWN rows."""
    if not rows:
        return []
    table = [('rank', 'node', 'local rank', 'log')]
    table += [(str(row['rank']), row['node'], '-' if row['local_rank'] is None else str(row['local_rank']),
               row['log'] or ('(not collected)' if row['lines'] is None else '(no lines)')) for row in rows[:MAX_MAP_ROWS_SHOWN]]
    widths = [max(len(cells[i]) for cells in table) for i in range(3)]
    lines = []
    for index, cells in enumerate(table):
        text = '  '.join([cells[0].rjust(widths[0]), cells[1].ljust(widths[1]), cells[2].rjust(widths[2]), cells[3]])
        lines.append('{0} : {1}'.format((label if index == 0 else '').ljust(width), text))
    if len(rows) > MAX_MAP_ROWS_SHOWN:
        lines.append('{0} : {1} more (manifest.json rank_logs)'.format(''.ljust(width), len(rows) - MAX_MAP_ROWS_SHOWN))
    return lines


def read_rank_lines(path, rank, offset=0, max_bytes=MAX_CHUNK_BYTES, final=False):
    """Rank ``rank``'s lines (prefix left out, text) in the node log ``path`` from byte ``offset`` on, reading at most
    ``max_bytes``: ``{'lines', 'offset' (where the next read starts), 'size' (the file's), 'missing'}``.

    Only whole lines are taken while the job runs; with ``final`` (the job has ended) the last one is taken too. A
    line longer than MAX_LINE_BYTES comes in pieces. When the file is shorter than ``offset`` (a new log), reading
    starts again from 0."""
    handle = _open_regular(path)
    if handle is None:
        return dict(lines=[], offset=offset, size=None, missing=True)
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if offset > size:
            offset = 0
        handle.seek(offset)
        data = handle.read(max(0, min(max_bytes, size - offset)))
    if not (final and offset + len(data) >= size):
        cut = data.rfind(b'\n') + 1
        if cut == 0 and len(data) >= max_bytes:
            cut = len(data)  # a line longer than a whole chunk: taken in pieces
        data = data[:cut]
    lines = []
    current = None
    for piece in data.splitlines(True):
        for start in range(0, len(piece), MAX_LINE_BYTES):
            part = piece[start:start + MAX_LINE_BYTES]
            if start == 0:
                current, part = split_line(part, None)
            if current == rank:
                lines.append(part.rstrip(b'\r\n').decode('utf-8', 'replace'))
    return dict(lines=lines, offset=offset + len(data), size=size, missing=False)


def tail_file(path, max_lines, max_bytes=MAX_TAIL_BYTES):
    """The last ``max_lines`` lines (text) of the file ``path``, reading at most its last ``max_bytes``; None when it
    is not there. ``truncated``: earlier lines were left out."""
    handle = _open_regular(path)
    if handle is None:
        return None
    with handle:
        size = os.fstat(handle.fileno()).st_size
        start = max(0, size - max_bytes)
        handle.seek(max(0, start - 1))
        whole = start == 0 or handle.read(1) == b'\n'
        data = handle.read(max_bytes)
    lines = data.decode('utf-8', 'replace').splitlines()
    if not whole and lines:
        lines = lines[1:]  # the first one read is cut
    truncated = start > 0 or len(lines) > max_lines
    return dict(lines=lines[-max_lines:] if max_lines > 0 else [], truncated=truncated)


def _launched_at(path):
    manifest, dummy = _node_files.read_json_object(os.path.join(path, 'manifest.json'), max_bytes=MAX_MANIFEST_BYTES)
    when = (manifest or {}).get('launched_at')
    return manifest, when if isinstance(when, str) else ''


def experiment_dir(experiments_dir, run_id=None):
    """``(path, manifest)`` of the experiment ``run_id`` under ``experiments_dir``, or of the latest launched
    (its manifest's ``launched_at``, then its name). RankLogError says what is missing."""
    if run_id:
        if not _collect.NODE_NAME.fullmatch(run_id):
            raise RankLogError('run_id %r is not an experiment\'s name (letters, digits, ".", "_", "-")' % (run_id,))
        path = os.path.join(experiments_dir, run_id)
        if not os.path.isdir(path) or os.path.islink(path):
            raise RankLogError('no experiment %s under %s (run_id is the experiment directory\'s name)'
                               % (run_id, experiments_dir))
        return path, _launched_at(path)[0]
    try:
        names = sorted(os.listdir(experiments_dir))
    except OSError as exc:
        raise RankLogError('no experiments under %s: %s' % (experiments_dir, exc.strerror))
    found = []
    for name in names:
        path = os.path.join(experiments_dir, name)
        if not os.path.islink(path) and os.path.isdir(path) and os.path.isfile(os.path.join(path, 'manifest.json')):
            manifest, when = _launched_at(path)
            found.append((when, name, path, manifest))
    if not found:
        raise RankLogError('no experiment with a manifest.json under %s' % experiments_dir)
    latest = max(found, key=lambda item: (item[0], item[1]))
    return latest[2], latest[3]


def rank_node(manifest, rank):
    """``(node, node rank, world size)`` of the node the launch planned ``rank`` on; RankLogError when no node has it."""
    planned = node_ranks(manifest)
    world = sum(len(ranks) for dummy, ranks in planned)
    for node_rank, (node, ranks) in enumerate(planned):
        if rank in ranks:
            return node, node_rank, world
    raise RankLogError('rank %d is not one of the job\'s ranks (0 to %d)' % (rank, world - 1) if world
                       else 'the manifest names no node of the job')
