# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The node's watcher: the program the job's watch hub (module_utils/_watch_hub.py) runs on every node over one
long-lived SSH exec, ``python <run_dir>/watch.py [--log-lines N] [--metrics-records N] [--progress-interval S]``.

It prints one JSON line at once with the run's full status (what ``torchrun state=query`` returns: ``job``,
``log_tail``, ``step_times``), then a line on every change (the supervisor or torchrun gone, ``exit.json`` or a stop
record written; the log's growth at most every ``progress_interval`` seconds; at once, a rank's failure that torchrun
logged, as ``rank_failure``), and a heartbeat line every HEARTBEAT seconds when nothing changed. Between lines it
only stats a few files and ``/proc/<supervisor pid>`` every POLL seconds; a change is answered by the module's own
query (module_utils/_torchrun.py, shipped next to it).

Fail fast on its own node: a run whose torchrun logged a rank's death (with no restarts left) and has not ended
FAILED_GRACE seconds later has its process tree ended (SIGTERM, SIGKILL after FAILED_STOP_TIMEOUT): torchrun's own
shutdown may wait many seconds for a store over a network that is gone. The death is recorded first in the run
directory (``rank_failure.json``, _supervisor.RANK_FAILURE_FILE): exit.json, and the outcome judged from it, says the
rank's exit code or signal (as it does when torchrun ends by itself, from its line in node.log), not the signal the
watcher sent. No stop record is written: the run failed on its own.

It reads commands on stdin, one JSON object a line: ``{"cmd": "stop", "reason": "peer", "detail": "...",
"dump_stacks": false, "stop_timeout": 15}`` stops the run as ``torchrun state=stopped`` does (the stop record names
the reason and detail). On end of file (the hub or its SSH connection went away) it exits; the job keeps running.
It exits by itself once the run has ended and that was said.

How it reaches the node: the torchrun module writes it into every run directory as ``watch.py`` with the
module_utils the query imports, in a package tree under ``watchlib/`` (WATCH_LIBS, see _torchrun.write_supervisor),
so the node runs the same query code as the module, from the run's own copy. Only the standard library is imported
besides those.
"""

from __future__ import annotations

import json
import os
import select
import sys
import time

LIB_DIR = 'watchlib'
"""The package tree of module_utils next to watch.py in the run directory."""
PACKAGE = 'ansible_collections.trainops.multinode.plugins.module_utils'
WATCH_LIBS = ('_files', '_heartbeat', '_launchers', '_node_files', '_node_identity', '_node_watch', '_outcomes', '_proc', '_run_records',
              '_run_spec', '_sbatch', '_srun', '_stacks', '_stragglers', '_supervisor', '_torchrun')
"""The module_utils the query imports (_torchrun and what it imports, to the end; a unit test holds this to the
imports)."""

POLL = 0.5
"""Seconds between two looks at the run (stat calls only)."""
HEARTBEAT = 5.0
"""Seconds without a line after which a heartbeat line is printed."""
MAX_LINE = 256 * 1024
"""The most bytes one line may have (the hub drops longer ones); a longer status loses its log lines first."""
MAX_LOG_LINE = 2000
"""Characters of one log line a status carries."""
MAX_COMMAND = 8192
"""The most bytes of one command line read from stdin."""
STOP_REASONS = ('peer',)
"""The stop reasons a command may give (the hub stops a node only because of another node)."""
SCAN_BYTES = 65536
"""The most of node.log's new bytes looked through at one poll (its end) for the line torchrun logs when a rank fails
(_supervisor.RANK_FAILURE_LINE)."""
FAILED_GRACE = 0.3
"""Seconds torchrun gets to end by itself after that line (with no restarts left; it copies the rank's last lines
to node.log meanwhile) before the watcher ends the run's process tree."""
FAILED_STOP_TIMEOUT = 0.5
"""Seconds between the SIGTERM and the SIGKILL of that end (torchrun blocked in a store call acts on no SIGTERM)."""


def end_due(failure, now, grace=FAILED_GRACE):
    """Whether the watcher ends its run's process tree now: a rank's death that torchrun logged (``failure``: ``{rank,
    seen, ended}``, ``seen`` on the watcher's clock) was seen at least ``grace`` seconds before ``now`` and the tree was
    not ended for it yet (the run still goes on: the caller looks only while it does)."""
    return failure is not None and not failure.get('ended') and now - failure['seen'] >= grace


def status_line(kind, now, **fields):
    """One output line (no newline), at most MAX_LINE bytes: ``{"kind", "at", ...}``; a ``result`` too long to fit
    loses its log lines' ends, then its log lines, then its job's environment."""
    record = dict(fields, kind=kind, at=round(now, 3))
    text = json.dumps(record, sort_keys=True, default=str)
    result = record.get('result')
    if len(text) <= MAX_LINE or not isinstance(result, dict):
        return text if len(text) <= MAX_LINE else json.dumps({'kind': 'error', 'at': record['at'], 'msg': 'line too long'})
    result = dict(result, log_tail=[line[:MAX_LOG_LINE] for line in result.get('log_tail') or []])
    for trim in ('none', 'log_tail', 'env'):
        if trim == 'log_tail':
            result['log_tail'] = []
        elif trim == 'env' and isinstance(result.get('job'), dict):
            result['job'] = dict(result['job'], env=None)
        text = json.dumps(dict(record, result=result), sort_keys=True, default=str)
        if len(text) <= MAX_LINE:
            return text
    return json.dumps({'kind': 'error', 'at': record['at'], 'msg': 'status too long'})


def parse_command(line):
    """A command line from stdin as ``{cmd, reason, detail, dump_stacks, stop_timeout}``, or None when it is not
    one (too long, not JSON, an unknown command or reason, fields of the wrong type)."""
    if not isinstance(line, (bytes, str)) or len(line) > MAX_COMMAND:
        return None
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get('cmd') != 'stop' or data.get('reason') not in STOP_REASONS:
        return None
    detail = data.get('detail')
    timeout = data.get('stop_timeout', 15)
    if not isinstance(detail, str) or not isinstance(data.get('dump_stacks', False), bool):
        return None
    if not isinstance(timeout, int) or isinstance(timeout, bool) or not 0 <= timeout <= 3600:
        return None
    return {'cmd': 'stop', 'reason': data['reason'], 'detail': detail[:1000], 'dump_stacks': data.get('dump_stacks', False),
            'stop_timeout': timeout}


def restarts_left(job):
    """Whether torchrun may restart the ranks after a failure (its argv's ``--max-restarts`` is not 0): a rank's
    failure then does not end the run."""
    argv = job.get('argv') if isinstance(job.get('argv'), list) else []
    for index, word in enumerate(argv[:-1]):
        if word in ('--max-restarts', '--max_restarts'):
            return argv[index + 1] != '0'
    return False


class Pacing(object):
    """When the watcher looks closer and what it prints, from what it sees (a pure state machine: times are passed
    in). ``look(now, sign)`` takes the cheap signature of the run (:func:`signature`) and says ``query`` (re-read the
    run with the module's query and print its status), ``heartbeat`` or None."""

    def __init__(self, progress_interval, heartbeat=HEARTBEAT):
        self.progress_interval = progress_interval
        self.heartbeat = heartbeat
        self.sign = None
        self.last_line = None
        self.last_status = None
        self.log_pending = False

    def look(self, now, sign):
        if self.sign is None or sign[:-1] != self.sign[:-1]:
            self.sign = sign
            return 'query'
        if sign[-1] != self.sign[-1]:
            self.sign = sign
            self.log_pending = True
        if self.log_pending and now - self.last_status >= self.progress_interval:
            return 'query'
        if now - self.last_line >= self.heartbeat:
            return 'heartbeat'
        return None

    def printed(self, now, status=False):
        self.last_line = now
        if status:
            self.last_status = now
            self.log_pending = False


def _exists(path):
    return os.path.exists(path)


def signature(run_dir, supervisor_pid):
    """What is looked at every POLL seconds, the log's size last: which of exit.json, the stop record and pids.json
    exist, whether the supervisor's /proc entry does, and node.log's size."""
    try:
        size = os.stat(os.path.join(run_dir, 'node.log')).st_size
    except OSError:
        size = None
    alive = _exists('/proc/%d' % supervisor_pid) if isinstance(supervisor_pid, int) and supervisor_pid > 0 else None
    return (_exists(os.path.join(run_dir, 'exit.json')), _exists(os.path.join(run_dir, 'stop.json')),
            _exists(os.path.join(run_dir, 'pids.json')), alive, size)


def _torchrun():
    if __package__:
        from ansible_collections.trainops.multinode.plugins.module_utils import _torchrun as module
    else:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), LIB_DIR))
        from ansible_collections.trainops.multinode.plugins.module_utils import _torchrun as module  # pylint: disable=import-error
    return module


class Watcher(object):
    """The watch of one run (its directory ``run_dir``: ``<state_dir>/runs/<run_id>``)."""

    def __init__(self, run_dir, log_lines=20, metrics_records=0, progress_interval=10.0, out=None, stdin=None,
                 clock=time.monotonic, wall=time.time):
        self.torchrun = _torchrun()
        self.run_dir = os.path.abspath(run_dir)
        self.run_id = os.path.basename(self.run_dir)
        self.node = self.torchrun.TorchrunNode(os.path.dirname(os.path.dirname(self.run_dir)))
        self.log_lines, self.metrics_records = log_lines, metrics_records
        self.pacing = Pacing(progress_interval)
        self.out = out or sys.stdout
        self.stdin = stdin if stdin is not None else sys.stdin.buffer
        self.clock, self.wall = clock, wall
        self.supervisor_pid = None
        self.job = {}
        self.log_offset = None
        self.failure = None          # the rank failure torchrun logged, when it was seen, whether the tree was ended

    def say(self, kind, status=False, **fields):
        self.out.write(status_line(kind, self.wall(), **fields) + '\n')
        self.out.flush()
        self.pacing.printed(self.clock(), status=status)

    def query(self):
        """The module's query of the run (module_utils/_torchrun.query_result); prints it; True when the run goes on."""
        try:
            result = self.torchrun.query_result(self.node, self.run_id, self.log_lines, self.metrics_records)
        except self.torchrun.TorchrunError as exc:
            self.say('error', msg=str(exc)[:4000])
            return False
        job = result.get('job') or {}
        self.supervisor_pid, self.job = job.get('supervisor_pid'), job
        if self.failure is not None:
            result['rank_failure'] = self.failure['rank']
        self.say('status', status=True, result=result)
        return job.get('status') in ('running', 'prepared')

    def command(self, line):
        cmd = parse_command(line)
        if cmd is None:
            self.say('refused', msg='not a command: %r' % line[:200])
            return
        try:
            result = self.node.stop(self.run_id, stop_timeout=cmd['stop_timeout'], log_lines=self.log_lines,
                                    reason=cmd['reason'], detail=cmd['detail'], dump_stacks=cmd['dump_stacks'])
        except self.torchrun.TorchrunError as exc:
            self.say('stop_failed', msg=str(exc)[:4000])
            return
        self.say('stopped', result={k: result.get(k) for k in ('stopped_pids', 'killed_pids', 'stacks', 'warnings')})

    def scan_log(self, size):
        """Look through node.log's new bytes for a rank failure torchrun logged; True when one is newly seen (a run
        whose torchrun may restart its ranks does not end with one)."""
        if size is None or self.failure is not None:
            return False
        start = max(0, size - SCAN_BYTES) if self.log_offset is None else max(self.log_offset, size - SCAN_BYTES)
        if self.log_offset is not None and size <= self.log_offset:
            self.log_offset = size
            return False
        self.log_offset = size
        try:
            with open(os.path.join(self.run_dir, 'node.log'), 'rb') as handle:
                handle.seek(start)
                data = handle.read(size - start)
        except OSError:
            return False
        found = self.torchrun._supervisor.logged_rank_failure(data)
        if found is None or restarts_left(self.job):
            return False
        self.failure = {'rank': found, 'seen': self.clock(), 'ended': False}
        return True

    def end_failed(self):
        """torchrun logged a rank's death and has not ended FAILED_GRACE seconds later (:func:`end_due`): record the
        death and end the run's process tree (_torchrun.TorchrunNode.end_failed; no stop record)."""
        if not end_due(self.failure, self.clock()):
            return
        self.failure['ended'] = True
        try:
            stopped = self.node.end_failed(self.run_id, self.failure['rank'], stop_timeout=FAILED_STOP_TIMEOUT)
        except self.torchrun.TorchrunError as exc:
            self.say('stop_failed', msg=str(exc)[:4000])
            return
        self.say('ended_failed', stopped_pids=stopped, rank_failure=self.failure['rank'])

    def run(self):
        """Watch until the run ends or stdin closes; the exit status."""
        fd = self.stdin.fileno()
        pending = b''
        going = self.query()
        self.pacing.look(self.clock(), signature(self.run_dir, self.supervisor_pid))
        while going:
            ready, _w, _x = select.select([fd], [], [], POLL)
            if ready:
                chunk = os.read(fd, MAX_COMMAND)
                if not chunk:
                    return 0
                pending += chunk
                while b'\n' in pending:
                    line, pending = pending.split(b'\n', 1)
                    if line.strip():
                        self.command(line)
                if len(pending) > MAX_COMMAND:
                    pending = b''
            sign = signature(self.run_dir, self.supervisor_pid)
            what = self.pacing.look(self.clock(), sign)
            if self.scan_log(sign[-1]):
                what = 'query'
            if what == 'query':
                going = self.query()
            elif what == 'heartbeat':
                self.say('heartbeat')
            if going:
                self.end_failed()
        return 0


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    options = {'--log-lines': 20, '--metrics-records': 0, '--progress-interval': 10.0}
    while args and args[0] in options:
        name = args.pop(0)
        options[name] = type(options[name])(args.pop(0))
    run_dir = os.path.dirname(os.path.abspath(__file__)) if not args else args[0]
    watcher = Watcher(run_dir, log_lines=options['--log-lines'], metrics_records=options['--metrics-records'],
                      progress_interval=options['--progress-interval'])
    return watcher.run()


if __name__ == '__main__':
    CODE = main()
    sys.stdout.flush()
    os._exit(CODE)
