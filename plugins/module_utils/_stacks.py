# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Where every rank is when a job hangs: each rank's Python stack, dumped with py-spy before a stalled job is stopped,
and which rank stopped progressing while its peers wait (docs/failures.md "Where a hung job's ranks are").

On the node (the torchrun module's stop with ``dump_stacks``, which the wait asks for when the job stalled here or on
a peer): :func:`dump_run` finds the ranks among the run's processes (a process whose environment has torchrun's
``RANK`` and ``TORCHELASTIC_RUN_ID``, the topmost of each rank: a DataLoader worker inherits its rank's environment),
runs ``py-spy dump --pid`` on each, all at once, and writes ``trainops_stacks_rank_<rank>.txt`` into the run's output
directory, which the collect brings into the experiment (``outputs/<node>/``). py-spy needs no change to the script;
it is looked for next to the ranks' Python, then on the PATH; without it nothing is dumped, and the reason is written.

On the controller (the experiment's summary): :func:`read_experiment` reads those files within bounds and
:func:`judge` tells the ranks whose innermost frame of the main thread lies in torch (waiting in a collective, or in
a backward whose gradients DDP all-reduces) from those whose frame lies elsewhere (the script's own code, a data
loader, a sleep): when some ranks wait in torch and others do not, the others are the ones that stopped.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

from ansible_collections.trainops.multinode.plugins.module_utils._heartbeat import (  # noqa: F401 (rank_processes)
    STOPPED_STATES, rank_processes, read_environ as _environ)

STACKS_FILE = 'trainops_stacks_rank_%d.txt'
STACKS_NAME = re.compile(r'^trainops_stacks_rank_(\d{1,7})\.txt$')
MAX_STACK_BYTES = 256 * 1024
"""What of one rank's stack file the controller reads (py-spy's dump of a rank is a few KiB)."""
DUMP_TIMEOUT = 20.0
"""Seconds py-spy gets for all the ranks of a node (it attaches to each for well under a second)."""
EMPTY_RETRIES = 3
"""Times a rank whose dump shows no frame is dumped again."""
EMPTY_RETRY_DELAY = 0.2
MAX_RANKS = 1024
"""Ranks of one node dumped at most (a node has a few; a record saying more is not believed)."""
MAX_SHOWN = 4
"""Ranks named per group in the summary's line."""

_THREAD = re.compile(r'^Thread (\S+) \(([^)]*)\)(?:: "(.*)")?\s*$')  # the name only where Python knows it
_FRAME = re.compile(r'^\s+(.+?) \((.+):(\d+)\)\s*$')
_PRINTABLE = re.compile(r'[^\x20-\x7e]')


# ---------------------------------------------------------------------------
# on the node: which processes are the ranks, and their dumps
# ---------------------------------------------------------------------------

def _interpreters(pid, proc_root='/proc'):
    """The paths ``pid`` runs as: its command's first word when absolute (a virtual environment's ``bin/python``, a
    link), then the executable that link resolves to."""
    found = []
    try:
        with open(os.path.join(proc_root, str(pid), 'cmdline'), 'rb') as handle:
            first = handle.read(4096).split(b'\0')[0].decode('utf-8', 'replace')
        if os.path.isabs(first):
            found.append(first)
    except (IOError, OSError):
        pass
    try:
        found.append(os.readlink(os.path.join(proc_root, str(pid), 'exe')))
    except OSError:
        pass
    return found


def find_pyspy(pids, proc_root='/proc', which=shutil.which):
    """py-spy next to the Python of one of ``pids`` (a virtual environment's bin/), else on the PATH; None without."""
    for pid in pids:
        for interpreter in _interpreters(pid, proc_root):
            candidate = os.path.join(os.path.dirname(interpreter), 'py-spy')
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
    return which('py-spy')


def dump_run(tree, out_dir, environ=_environ, pyspy=None, popen=subprocess.Popen, clock=time.monotonic,
             timeout=DUMP_TIMEOUT, owner=None):
    """Dump the stack of every rank in ``tree`` into ``out_dir`` (one file per rank). Returns ``{'ranks': [...],
    'error': None or why nothing could be dumped}``; a rank py-spy failed on gets its error in its file. ``owner``
    (``(uid, gid)``, the run's): a file root writes is given to it, as everything else in the run's directory is."""
    ranks = rank_processes(tree, environ)
    if not ranks:
        return dict(ranks=[], error='no rank processes found among the run\'s processes')
    if not out_dir or not os.path.isdir(out_dir):
        return dict(ranks=[], error='the run has no output directory')
    pyspy = pyspy or find_pyspy(list(ranks.values()))
    if not pyspy:
        _write_all(out_dir, ranks, 'py-spy is not installed on this node (pip install py-spy next to the ranks\' '
                                   'Python): no stack dumped\n', owner)
        return dict(ranks=sorted(ranks), error='py-spy is not installed on this node')
    # a stopped rank (SIGSTOP) cannot be paused by py-spy (its ptrace stop fails): it is read as it stands
    stopped = set(rank for rank, pid in ranks.items() if getattr(tree[pid], 'state', None) in STOPPED_STATES)
    texts = _dump_all(pyspy, ranks, popen, clock, timeout, stopped)
    # a thread caught running (``active+gil``) may come without frames: asked again, a few times, it gives them
    for _attempt in range(EMPTY_RETRIES):
        empty = dict((rank, ranks[rank]) for rank, text in texts.items() if text is not None and _frameless(text))
        if not empty:
            break
        time.sleep(EMPTY_RETRY_DELAY)
        texts.update(_dump_all(pyspy, empty, popen, clock, timeout, stopped))
    for rank, text in texts.items():
        if text is not None:
            _write(out_dir, rank, text, owner)
    return dict(ranks=sorted(ranks), error=None)


def _frameless(text):
    """A dump whose threads show no frame (``Thread 1459 (active+gil)`` alone)."""
    threads = parse_dump(text)
    return bool(threads) and not main_frames(threads)


def _dump_all(pyspy, ranks, popen, clock, timeout, stopped=()):
    """``{rank: dump text}`` of ``ranks`` (``{rank: pid}``), py-spy run on all at once (``--nonblocking`` for the
    ``stopped`` ranks); the text says what failed."""
    running, texts = {}, {}
    for rank, pid in ranks.items():
        try:
            running[rank] = popen([pyspy, 'dump'] + (['--nonblocking'] if rank in stopped else []) + ['--pid', str(pid)],
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        except OSError as exc:
            texts[rank] = 'py-spy could not start: %s\n' % exc
    deadline = clock() + timeout
    for rank, proc in running.items():
        try:
            out, _err = proc.communicate(timeout=max(0.1, deadline - clock()))
            text = without_command_line(out.decode('utf-8', 'replace'))
            if proc.returncode != 0:
                text = 'py-spy exited %s on pid %d (may it attach? ptrace: kernel.yama.ptrace_scope, '\
                       'CAP_SYS_PTRACE):\n%s' % (proc.returncode, ranks[rank], text)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            text = 'py-spy did not answer within %d s for pid %d\n' % (timeout, ranks[rank])
        texts[rank] = text
    return texts


def without_command_line(text):
    """py-spy's dump from its first thread on: its header repeats the rank's command line, whose arguments may hold
    what belongs to the ranks only (a token given as an argument)."""
    lines = text.splitlines(True)
    for index, line in enumerate(lines):
        if _THREAD.match(line):
            return ''.join(lines[index:])
    return text


def _write_all(out_dir, ranks, text, owner=None):
    for rank in ranks:
        _write(out_dir, rank, text, owner)


def _write(out_dir, rank, text, owner=None):
    path = os.path.join(out_dir, STACKS_FILE % rank)
    try:
        # never through a link the job planted at that name: a new file, renamed over it
        temp = '%s.%d.tmp' % (path, os.getpid())
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, 'O_NOFOLLOW', 0), 0o644)
        with os.fdopen(fd, 'w') as handle:
            if owner is not None and os.geteuid() == 0:
                os.fchown(handle.fileno(), owner[0], owner[1])
            handle.write(text)
        os.rename(temp, path)
    except (IOError, OSError):
        pass  # a dump is evidence, never a reason for the stop to fail


# ---------------------------------------------------------------------------
# on the controller: reading and judging the dumps
# ---------------------------------------------------------------------------

def parse_dump(text):
    """The threads of a py-spy dump: ``[{'id', 'state', 'name', 'frames': [{'function', 'file', 'line'}]}]``, the
    innermost frame first (as py-spy prints them)."""
    threads = []
    for line in (text or '').splitlines():
        thread = _THREAD.match(line)
        if thread:
            threads.append(dict(id=thread.group(1), state=thread.group(2), name=thread.group(3) or '', frames=[]))
            continue
        frame = _FRAME.match(line)
        if frame and threads:
            threads[-1]['frames'].append(dict(function=frame.group(1), file=frame.group(2), line=int(frame.group(3))))
    return threads


def main_frames(threads):
    """The frames of the main thread (the first thread when none is called MainThread)."""
    for thread in threads:
        if thread['name'] == 'MainThread':
            return thread['frames']
    return threads[0]['frames'] if threads else []


def in_torch(frame):
    """Whether ``frame`` is torch's own code (py-spy names it ``torch/...``, or a full path through ``/torch/``)."""
    path = frame['file'].replace('\\', '/')
    return path.startswith('torch/') or '/torch/' in path or '/site-packages/torch' in path


def _where(frame):
    return _clean('%s (%s:%d)' % (frame['function'], frame['file'], frame['line']))


def _clean(text, limit=160):
    """Node text as one printable line, at most ``limit`` characters."""
    text = _PRINTABLE.sub('?', text)
    return text if len(text) <= limit else text[:limit - 3] + '...'


def judge(dumps):
    """``dumps``: ``{(node, rank): py-spy text}``. Returns ``{'outside': [...], 'waiting': [...], 'unknown': [...]}``,
    each ``{'node', 'rank', 'where'}`` (the innermost frame of the main thread), sorted by rank, and ``culprits``: the
    ranks outside torch when others wait in it (a hang those ranks caused), else ``[]``."""
    groups = dict(outside=[], waiting=[], unknown=[])
    for (node, rank), text in sorted(dumps.items(), key=lambda item: item[0][1]):
        frames = main_frames(parse_dump(text))
        if not frames:
            first = (text or '').strip().splitlines()
            groups['unknown'].append(dict(node=node, rank=rank, where=_clean(first[0] if first else 'empty dump')))
            continue
        key = 'waiting' if in_torch(frames[0]) else 'outside'
        groups[key].append(dict(node=node, rank=rank, where=_where(frames[0])))
    groups['culprits'] = list(groups['outside']) if groups['outside'] and groups['waiting'] else []
    return groups


def _names(rows):
    shown = ', '.join('%d (%s)' % (row['rank'], row['node']) for row in rows[:MAX_SHOWN])
    return shown + (' and %d more' % (len(rows) - MAX_SHOWN) if len(rows) > MAX_SHOWN else '')


def lines(judgment, world_size=None):
    """The summary's lines for a judgment (``[]`` without dumps); with ``world_size``, a line about fewer ranks than
    the job's says how many were dumped (the others had ended: a node stopped for a peer dumps its own)."""
    out = []
    culprits, waiting = judgment['culprits'], judgment['waiting']
    dumped = len(judgment['outside']) + len(waiting) + len(judgment['unknown'])
    if isinstance(world_size, int) and not isinstance(world_size, bool) and 0 < dumped < world_size:
        out.append('stacks     : %d of %d ranks dumped (the others had ended)' % (dumped, world_size))
    if culprits:
        out.append('hung rank  : %s at %s; %d other rank(s) wait in torch (%s)' % (
            _names(culprits), culprits[0]['where'], len(waiting), waiting[0]['where']))
    elif waiting and not judgment['outside']:
        out.append('stacks     : every rank waits in torch (%s): no rank stands apart' % waiting[0]['where'])
    elif judgment['outside']:
        out.append('stacks     : no rank waits in torch: ranks %s, first at %s' % (
            _names(judgment['outside']), judgment['outside'][0]['where']))
    if judgment['unknown']:
        out.append('stacks     : not dumped for rank(s) %s: %s' % (_names(judgment['unknown']),
                                                                   judgment['unknown'][0]['where']))
    return out


def read_experiment(path, node_dirs, refused=None, world_size=None):
    """``{(node, rank): text}`` of the stack files in the experiment's node output directories (``node_dirs``:
    ``{node: directory}``), each read up to MAX_STACK_BYTES, not through a link; a refused one is named in
    ``refused``. The job writes in those directories too: a file of a rank the job does not have (``world_size``),
    or beyond MAX_RANKS files of a node, is not read, and said so."""
    dumps = {}
    limit = world_size if isinstance(world_size, int) and not isinstance(world_size, bool) and world_size > 0 else None
    for node, directory in sorted(node_dirs.items()):
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        taken = 0
        for name in names:
            match = STACKS_NAME.match(name)
            if not match:
                continue
            filename = os.path.join(directory, name)
            rank = int(match.group(1))
            if (limit is not None and rank >= limit) or taken >= MAX_RANKS:
                if refused is not None:
                    refused.append('%s: %s not read: %s' % (node, os.path.relpath(filename, path), 'no rank %d in the job'
                                                            % rank if limit is not None and rank >= limit else
                                                            'more than %d stack files' % MAX_RANKS))
                continue
            taken += 1
            try:
                fd = os.open(filename, os.O_RDONLY | getattr(os, 'O_NOFOLLOW', 0))
                with os.fdopen(fd, 'rb') as handle:
                    data = handle.read(MAX_STACK_BYTES)
            except (IOError, OSError) as exc:
                if refused is not None:
                    refused.append('%s: %s not read: %s' % (node, os.path.relpath(filename, path), exc.strerror))
                continue
            dumps[(node, rank)] = data.decode('utf-8', 'replace')
    return dumps


def where(judgment):
    """``{(node, rank): the innermost frame of its main thread}`` of every dumped rank of a judgment."""
    return dict(((row['node'], row['rank']), row['where']) for key in ('outside', 'waiting', 'unknown')
                for row in judgment[key])


def record(judgment):
    """What the manifest keeps (``stacks``): the groups, without the texts."""
    return dict((key, judgment[key]) for key in ('culprits', 'outside', 'waiting', 'unknown'))
