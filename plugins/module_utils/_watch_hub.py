# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The job's watch hub: ONE process per run on the controller that holds one streaming exec of the node's watcher
(module_utils/_node_watch.py) per node, and stops every other node at once when one fails.

Each host's start registers the host (torchrun_wait with ``watch_start``): ``<sync_dir>/hub/<host>.spec.json`` holds
the argv that runs the node's watcher (over the host's own ssh settings and the ControlMaster socket Ansible opened,
or as a local process for a local connection); the first registration starts the hub (``hub/hub.json``, O_EXCL), in
its own session: ``python _watch_hub.py <sync_dir>``. The hub

- writes each node's latest line to ``<sync_dir>/hub/<host>.json`` (atomically; bounded, parsed as data): the
  module's query result, when its stream last gave a line (``line_at``), and the stream's state; each host's wait
  (torchrun_wait) reads it instead of asking the node;
- when a node's run ends badly on its own (no stop record, not ended by its launcher) or its torchrun logged a rank's
  failure (``rank_failure``, _node_watch.py), or a wait publishes a state
  that ends the job (``<sync_dir>/<host>.json``: failed, stalled, gone, error), sends a stop (reason ``peer``) to
  every other node's watcher at once; for a launcher that ends the other nodes itself
  (Launcher.peer_failure_ends_node) only after STEP_PEER_WAIT seconds; with the ranks' stacks dumped first for a
  stall (HUNG_STATES);
- starts a stream that broke again after RETRY seconds; ends when every node's run has ended and was said, or when
  the controller (``ansible-playbook``) is gone (the watchers then see the end of their input and leave the job
  running).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time

from ansible_collections.trainops.multinode.plugins.module_utils import _launchers
from ansible_collections.trainops.multinode.plugins.module_utils._files import FOLLOW_UMASK, write_json_atomic
from ansible_collections.trainops.multinode.plugins.module_utils._outcomes import (
    ENDED_STATUSES, FAILED_STATES, HUNG_STATES, STATUS_EXITED, peer_words)

HUB_DIR = 'hub'
HUB_RECORD = 'hub.json'
SPEC_SUFFIX = '.spec.json'
MAX_LINE = 256 * 1024
"""The most bytes of one watcher line (its own bound, _node_watch.MAX_LINE); a longer one is dropped."""
MAX_SPEC = 64 * 1024
RETRY = 2.0
"""Seconds before a broken stream is started again."""
TICK = 1.0
"""Seconds between two looks at the registrations, the waits' status files and the controller."""
STALE = 3 * 5.0 + 2.0
"""Seconds without a line after which a wait no longer trusts the hub's file for its node (three heartbeats,
_node_watch.HEARTBEAT, and a little): it asks the node with the module instead, as before the hub."""
STEP_PEER_WAIT = 10.0
"""Seconds a launcher that ends the other nodes itself when one failed gets before the hub stops them (the wait's
own STEP_PEER_WAIT)."""
PEER_STOP_TIMEOUT = 1
"""Seconds a node's ranks get between SIGTERM and SIGKILL when the hub stops them for a failed peer: its collectives
cannot complete any more, and a rank that checkpoints on SIGTERM would wait in one."""


def status_path(sync_dir, name):
    return os.path.join(sync_dir, HUB_DIR, name + '.json')


def parse_line(raw):
    """A watcher's line as a dict with a known ``kind``, or None (too long, not JSON, not an object)."""
    data = json_object(raw, MAX_LINE)
    if data is None or data.get('kind') not in ('status', 'heartbeat', 'stopped', 'ended_failed', 'stop_failed', 'refused', 'error'):
        return None
    if data['kind'] == 'status' and not (isinstance(data.get('result'), dict) and isinstance(data['result'].get('job'), dict)):
        return None
    return data


def split_lines(buffer, chunk):
    """``(lines, rest)``: the complete lines of ``buffer + chunk``; a line longer than MAX_LINE is cut out (its rest up
    to the next newline is dropped too: ``rest`` is then ``None`` until that newline)."""
    lines = []
    if buffer is None:
        if b'\n' not in chunk:
            return lines, None
        chunk = chunk.split(b'\n', 1)[1]
        buffer = b''
    data = buffer + chunk
    while b'\n' in data:
        line, data = data.split(b'\n', 1)
        lines.append(line)
    if len(data) > MAX_LINE:
        return lines, None
    return lines, data


def valid_argv(argv):
    """A registration's argv is a non-empty list of strings (anything else is skipped, never given to Popen)."""
    return isinstance(argv, list) and bool(argv) and all(isinstance(word, str) for word in argv)


def run_judgment(job):
    """What a node's run says to the other nodes: ``running``, ``succeeded``, ``failed`` (ended badly on its own: an
    exit code other than 0, a signal, lost or absent, with no stop record and not ended by its launcher), or
    ``ended`` (ended another way: stopped, or ended by its launcher because of another node)."""
    status = job.get('status')
    if status not in ENDED_STATUSES:
        return 'running'
    if status == STATUS_EXITED and job.get('exit_code') == 0 and not job.get('signal'):
        return 'succeeded'
    if job.get('stop') or _launchers.of_job(job).ended_it(job):
        return 'ended'
    return 'failed'


def stopped_because(peers):
    """``stopped because n2 (rank 1) failed, n3 stalled``: what a stop for failed peers says (``peers``: dicts with
    ``host``, ``node_rank``, ``state``)."""
    return 'stopped because ' + ', '.join('%s%s %s' % (p['host'], '' if p.get('node_rank') is None else ' (rank %s)' % p['node_rank'],
                                                       peer_words(p['state'])) for p in peers)


def stop_command(causes):
    """The command every other node's watcher gets for ``causes`` (peers as for :func:`stopped_because`)."""
    return {'cmd': 'stop', 'reason': 'peer', 'detail': stopped_because(causes),
            'dump_stacks': any(c['state'] in HUNG_STATES for c in causes), 'stop_timeout': PEER_STOP_TIMEOUT}


def stop_due(causes, job, now):
    """When the other nodes are to be stopped for ``causes`` (each with ``seen``, the hub's clock when it learnt
    of it): at once, or STEP_PEER_WAIT after the first failure when the job's launcher ends the other nodes itself
    and every cause failed (a stall or a gone node it does not end)."""
    if not causes:
        return None
    first = min(c['seen'] for c in causes)
    if _launchers.of_job(job or {}).peer_failure_ends_node and all(c['state'] == 'failed' for c in causes):
        return first + STEP_PEER_WAIT
    return first


def targets(nodes, causes, sent):
    """The hosts to stop now: every node whose run goes on, that is no cause and was not sent a stop yet."""
    cause_hosts = set(c['host'] for c in causes)
    return sorted(host for host, node in nodes.items()
                  if host not in cause_hosts and host not in sent and node.get('state') == 'running' and node.get('up'))


class Stream(object):
    """One node's watcher process (ssh, or local) and what it said last."""

    def __init__(self, host, spec):
        self.host, self.spec = host, spec
        self.proc = None
        self.buffer = b''
        self.record = {'host': host, 'run_id': spec.get('run_id'), 'stream': 'starting', 'line_at': None,
                       'result': None, 'stopped_by_hub': None}
        self.retry_at = 0.0
        self.done = False

    def start(self):
        try:
            self.proc = subprocess.Popen(self.spec['argv'], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, close_fds=True)
        except OSError:
            self.proc = None
            return False
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.buffer = b''
        return True

    def send(self, command):
        try:
            self.proc.stdin.write(json.dumps(command).encode('utf-8') + b'\n')
            self.proc.stdin.flush()
            return True
        except (OSError, ValueError, AttributeError):
            return False

    def close(self):
        if self.proc is not None:
            for pipe in (self.proc.stdin, self.proc.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


class Hub(object):
    """The loop (``run``); the decisions are the functions above."""

    def __init__(self, sync_dir, controller_pid, clock=time.monotonic, wall=time.time):
        self.sync_dir, self.controller_pid = sync_dir, controller_pid
        self.dir = os.path.join(sync_dir, HUB_DIR)
        self.clock, self.wall = clock, wall
        self.streams = {}
        self.causes = []
        self.sent = set()
        self.next_tick = 0.0
        self.registered = set()     # the spec files read already (their streams exist)
        self.versions = {}          # status file name -> (mtime, size, inode) when it was last read

    def node_views(self):
        views = {}
        for host, stream in self.streams.items():
            job = (stream.record.get('result') or {}).get('job') or {}
            views[host] = {'state': run_judgment(job) if job else 'running', 'up': stream.proc is not None}
        return views

    def write(self, stream):
        write_json_atomic(status_path(self.sync_dir, stream.spec['name']), stream.record, mode=FOLLOW_UMASK, sync=False)

    def registrations(self):
        try:
            names = sorted(n for n in os.listdir(self.dir) if n.endswith(SPEC_SUFFIX))
        except OSError:
            return
        for name in names:
            if name in self.registered:
                continue
            host_file = name[:-len(SPEC_SUFFIX)]
            spec = read_object(os.path.join(self.dir, name), MAX_SPEC)
            if not spec or not isinstance(spec.get('host'), str) or not valid_argv(spec.get('argv')):
                continue
            self.registered.add(name)
            spec['name'] = host_file
            stream = Stream(spec['host'], spec)
            self.streams[spec['host']] = stream
            self.begin(stream)

    def begin(self, stream):
        if stream.start():
            stream.record['stream'] = 'up'
        else:
            stream.record['stream'] = 'down'
            stream.retry_at = self.clock() + RETRY
        self.write(stream)

    def published_causes(self):
        """The waits' status files that end the job (<sync_dir>/<host>.json: failed, stalled, gone, error)."""
        try:
            names = os.listdir(self.sync_dir)
        except OSError:
            return
        known = set(c['host'] for c in self.causes)
        for gone in set(self.versions).difference(names):
            del self.versions[gone]
        for name in names:
            if not name.endswith('.json') or not self.changed(name):
                continue
            data = read_object(os.path.join(self.sync_dir, name), MAX_SPEC)
            if not data or data.get('state') not in FAILED_STATES or not isinstance(data.get('host'), str):
                continue
            if data['host'] in known:
                continue
            rank = data.get('node_rank') if isinstance(data.get('node_rank'), int) else None
            self.causes.append({'host': data['host'], 'node_rank': rank, 'state': data['state'], 'seen': self.clock()})

    def changed(self, name):
        """Whether the status file ``name`` of sync_dir changed since the hub last read it (read every TICK, each
        file is opened and parsed only when its mtime, size or inode moved: a wait rewrites it only when it says
        something new)."""
        try:
            st = os.lstat(os.path.join(self.sync_dir, name))
        except OSError:
            self.versions.pop(name, None)
            return False
        version = (st.st_mtime_ns, st.st_size, st.st_ino)
        if self.versions.get(name) == version:
            return False
        self.versions[name] = version
        return True

    def on_line(self, stream, line):
        stream.record['line_at'] = self.wall()
        if line['kind'] == 'status':
            stream.record['result'] = line['result']
            stream.record['stream'] = 'up'
            job = line['result']['job']
            failed = run_judgment(job) == 'failed' or isinstance(line['result'].get('rank_failure'), dict)
            if failed and stream.host not in set(c['host'] for c in self.causes):
                rank = job.get('node_rank') if isinstance(job.get('node_rank'), int) else None
                self.causes.append({'host': stream.host, 'node_rank': rank, 'state': 'failed', 'seen': self.clock()})
            if run_judgment(job) != 'running':
                stream.done = True
        elif line['kind'] == 'error':
            # the node's records cannot be read by the watcher: its wait asks with the module
            stream.record['stream'] = 'error'
            stream.record['error'] = str(line.get('msg'))[:4000]
            stream.done = True
        # a heartbeat too: the wait trusts the file while its line_at is recent (STALE)
        self.write(stream)

    def read(self, stream):
        try:
            chunk = os.read(stream.proc.stdout.fileno(), 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b''
        if not chunk:
            stream.close()
            stream.record['stream'] = 'ended' if stream.done else 'down'
            stream.retry_at = self.clock() + RETRY
            self.write(stream)
            return
        lines, stream.buffer = split_lines(stream.buffer, chunk)
        for raw in lines:
            line = parse_line(raw)
            if line is not None:
                self.on_line(stream, line)

    def act(self):
        if not self.causes:
            return
        any_job = next(((s.record.get('result') or {}).get('job') for s in self.streams.values() if s.record.get('result')), {})
        due = stop_due(self.causes, any_job, self.clock())
        if due is None or self.clock() < due:
            return
        command = stop_command(self.causes)
        for host in targets(self.node_views(), self.causes, self.sent):
            stream = self.streams[host]
            if stream.send(command):
                self.sent.add(host)
                stream.record['stopped_by_hub'] = {'reason': 'peer', 'detail': command['detail'], 'at': self.wall()}
                self.write(stream)

    def finished(self):
        return self.streams and all(s.done and s.proc is None for s in self.streams.values())

    def controller_gone(self):
        try:
            os.kill(self.controller_pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def run(self):
        while True:
            now = self.clock()
            if now >= self.next_tick:
                self.next_tick = now + TICK
                if self.controller_gone():
                    break
                self.registrations()
                self.published_causes()
                for stream in self.streams.values():
                    if stream.proc is None and not stream.done and now >= stream.retry_at:
                        self.begin(stream)
                if self.finished():
                    break
            self.act()
            fds = dict((s.proc.stdout.fileno(), s) for s in self.streams.values() if s.proc is not None)
            ready, _w, _x = select.select(list(fds), [], [], max(0.05, self.next_tick - self.clock()))
            for fd in ready:
                self.read(fds[fd])
        for stream in self.streams.values():
            stream.close()


def read_object(path, limit):
    """The JSON object in ``path`` (at most ``limit`` bytes, a link is not followed), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, 'rb') as handle:
        return json_object(handle.read(limit + 1), limit)


def json_object(data, limit):
    """The JSON object ``data`` holds (at most ``limit`` bytes), or None (longer, not JSON, not an object)."""
    if len(data) > limit:
        return None
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def read_status(sync_dir, name, now_wall, stale=STALE, reader=None):
    """The hub's file for a host (``name``: its file name without ``.json``) when its stream gave a line within
    ``stale`` seconds and holds a status, else None (the wait then asks the node with the module). ``reader(path,
    limit)``: how the file is read (read_object)."""
    record = (reader or read_object)(status_path(sync_dir, name), 4 * MAX_LINE)
    if not record or record.get('stream') not in ('up', 'ended') or not isinstance(record.get('result'), dict):
        return None
    line_at = record.get('line_at')
    if not isinstance(line_at, (int, float)) or isinstance(line_at, bool):
        return None
    if record['stream'] == 'up' and now_wall - line_at > stale:
        return None
    return record


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    sync_dir, controller_pid = argv[0], int(argv[1])
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    Hub(sync_dir, controller_pid).run()
    return 0


if __name__ == '__main__':
    CODE = main()
    sys.stdout.flush()
    os._exit(CODE)
