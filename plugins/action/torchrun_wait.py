# -*- coding: utf-8 -*-

# Copyright (c) 2025, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Wait for one node's torchrun job, judge how it stands, and fail fast when another node of the job failed.

Each host of the job runs this action (a normal task on all node hosts). Every ``poll_interval``
seconds it queries the host's job with the ``trainops.multinode.torchrun`` module (``state=query``),
writes the host's status to ``<sync_dir>/<inventory_hostname>.json`` on the controller and reads
the status files of the other hosts. What it judges (docs/failures.md):

- a host that cannot be reached is ``unreachable`` (peers keep running) until ``unreachable_grace``
  seconds have passed without an answer, then ``gone``, which fails the job;
- a running job whose log has not grown for ``stall_timeout`` seconds is ``stalled``: stopped here,
  and so on every other host;
- a peer that failed, stalled or is gone stops the job here;
- a node whose step time (its ranks' metrics records, read from the tail of their files with each query) is more than
  ``straggler_threshold`` above the other nodes' median is named a straggler in its progress line (nothing more: it
  is judged at the end, in the summary);
- a run that its launcher ended (plugins/module_utils/_launchers.py: a Slurm step's run that Slurm killed, or
  signalled without a stop request, ``--kill-on-bad-exit``) while another node failed was stopped because of that
  node, not a failure of its own; when a peer failed, a launcher that ends the other nodes itself gets a few
  seconds to end this node's run before the wait stops it.

With ``manifest``, the first host also starts a watcher that marks the experiment ``interrupted`` when
the controller goes away (Ctrl-C) before the job was collected.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.trainops.multinode.plugins.module_utils._experiment import STEADY_STATE_WINDOW, mark_interrupted
from ansible_collections.trainops.multinode.plugins.module_utils._files import FOLLOW_UMASK, write_json_atomic
from ansible_collections.trainops.multinode.plugins.module_utils._outcomes import (
    ENDED_STATUSES, FAILED_STATES, HUNG_STATES, RUNNING, STATUS_EXITED, STATUS_LOST, STATUS_RUNNING, UNSETTLED_STATES,
    verdict, verdict_state)
from ansible_collections.trainops.multinode.plugins.module_utils import _launchers, _stacks, _stragglers, _watch_hub
from ansible_collections.trainops.multinode.plugins.module_utils._local_copy import is_local
from ansible_collections.trainops.multinode.plugins.action.rsync import SSH, ssh_settings

MODULE = 'trainops.multinode.torchrun'

DEFAULT_PROGRESS_PATTERN = r'\[trainops\].*?\b((?:epoch|step)=.*?)\s*$'

ASK_INTERVAL = 10.0
"""Seconds between two questions to a node whose job runs (``progress_interval`` when that is shorter,
``poll_interval`` when that is longer): each question is a module run on the node, so the module watches the job
there between them (``wait_for_change``) and answers at once when it ends. A peer's failure reaches the other nodes'
waits within about this long; a node's own end, within the module's half-second watch."""

MAX_QUERY_FAILURES = 3
"""Consecutive failed queries (the module failed on a reachable host) before the wait fails."""

STEP_PEER_WAIT = 10.0
"""Seconds a node that its launcher ended (e.g. a Slurm step's) looks for the peer whose failure ended it: that peer's
wait may publish a poll later than this one saw its own node end; and seconds a launcher that ends the other nodes
itself when one failed (Launcher.peer_failure_ends_node) gets to do so before the wait stops the node."""

PEER_DUMP_WAIT = ASK_INTERVAL + _stacks.DUMP_TIMEOUT + 5.0
"""Seconds a node whose job stalled waits, once its ranks' stacks are dumped and its stall published, for the other
nodes to dump theirs (at their next question, within ASK_INTERVAL) before it stops its ranks."""

WATCHER_FILE = 'watcher.json'
WATCH_INTERVAL = 1.0

ARGUMENT_SPEC = dict(
    state_dir=dict(type='str', required=True),  # a path on the managed node: expanded there by the module
    run_id=dict(type='str'),
    node_id=dict(type='str'),
    node_rank=dict(type='int'),
    sync_dir=dict(type='path', required=True),
    poll_interval=dict(type='float', default=2.0),
    progress_interval=dict(type='float', default=10.0),
    timeout=dict(type='int', default=0),
    unreachable_grace=dict(type='int', default=300),
    stall_timeout=dict(type='int', default=0),
    manifest=dict(type='path'),
    log_lines=dict(type='int', default=20),
    progress_pattern=dict(type='str', default=DEFAULT_PROGRESS_PATTERN),
    stop_timeout=dict(type='int', default=15),
    label=dict(type='str', default=''),
    straggler_threshold=dict(type='float', default=_stragglers.DEFAULT_THRESHOLD),
    watch_start=dict(type='bool', default=False),
    run_dir=dict(type='str'),
)


def find_progress(lines, pattern):
    """Return the last progress match in ``lines``: group 1 if the pattern has a group, else the whole match."""
    for line in reversed(lines or []):
        match = pattern.search(line)
        if match:
            return (match.group(1) if pattern.groups else match.group(0)).strip()
    return None


def last_line(lines):
    """The last log line that says something (not empty, not a banner of ``*``), shortened to 160 characters."""
    for line in reversed(lines or []):
        if re.search(r'[A-Za-z0-9]', line):
            line = line.strip()
            return line if len(line) <= 160 else line[:157] + '...'
    return None


def progress_text(progress, log_tail):
    """What a progress line shows: the last progress match; for a script that prints none (no ``step=`` line, no match
    of ``progress_pattern``), its last log line (``log: ...``); before any output, that there is none yet."""
    if progress:
        return progress
    line = last_line(log_tail)
    return 'log: %s' % line if line else '(no progress line yet)'


def safe_host_name(host):
    """File name for a host's status file (path separators and leading dots replaced)."""
    name = re.sub(r'[^A-Za-z0-9_.@+=:-]', '_', host)
    return '_' + name if name.startswith('.') else name


def utc(epoch):
    return time.strftime('%H:%M:%SZ', time.gmtime(epoch))


_READ_CACHE = {}
"""path -> ((mtime_ns, size, inode), parsed): a status file is parsed again only when it changed (each wait reads
every peer's file every poll)."""


def read_json_cached(path, limit=4 * _watch_hub.MAX_LINE):
    """The JSON object in ``path`` (at most ``limit`` bytes, a link not followed), parsed once per version of the
    file; None when it is missing or not an object."""
    try:
        st = os.lstat(path)
    except OSError:
        _READ_CACHE.pop(path, None)
        return None
    key = (st.st_mtime_ns, st.st_size, st.st_ino)
    cached = _READ_CACHE.get(path)
    if cached is not None and cached[0] == key:
        return cached[1]
    data = _watch_hub.read_object(path, limit)
    _READ_CACHE[path] = (key, data)
    return data


def read_peers(sync_dir, own_file, run_id):
    """Return the status records of the other hosts (files of another run_id are ignored)."""
    peers = []
    try:
        names = sorted(os.listdir(sync_dir))
    except OSError:
        return peers
    for name in names:
        if not name.endswith('.json') or name in (own_file, WATCHER_FILE):
            continue
        data = read_json_cached(os.path.join(sync_dir, name))
        if not isinstance(data, dict):
            continue
        data = dict(data)
        if run_id and data.get('run_id') and data.get('run_id') != run_id:
            continue
        data.setdefault('host', name[:-len('.json')])
        peers.append(data)
    return peers + hub_peers(sync_dir, own_file, run_id, set(p.get('host') for p in peers))


HUB_STATES = {'running': 'running', 'succeeded': 'succeeded', 'failed': 'failed', 'ended': 'stopped'}
"""The state a peer whose wait has published nothing yet (a node past the forks) has, from what its run says in the
watch hub's file (_watch_hub.run_judgment)."""


def hub_peers(sync_dir, own_file, run_id, published):
    """Status records of the hosts that the watch hub watches and whose wait has not published one (``published``):
    a job of more nodes than forks has nodes whose wait starts late; their runs' ends still count."""
    hub_dir = os.path.join(sync_dir, _watch_hub.HUB_DIR)
    try:
        names = sorted(n for n in os.listdir(hub_dir) if n.endswith('.json') and not n.endswith(_watch_hub.SPEC_SUFFIX))
    except OSError:
        return []
    peers = []
    for name in names:
        if name == own_file or name == _watch_hub.HUB_RECORD:
            continue
        record = read_json_cached(os.path.join(hub_dir, name)) or {}
        job = (record.get('result') or {}).get('job') if isinstance(record.get('result'), dict) else None
        host = record.get('host')
        if not isinstance(job, dict) or not isinstance(host, str) or host in published:
            continue
        if run_id and job.get('run_id') and job.get('run_id') != run_id:
            continue
        # a rank's failure torchrun logged (_node_watch.py) fails the node before its run has ended
        state = 'failed' if isinstance(record['result'].get('rank_failure'), dict) else HUB_STATES[_watch_hub.run_judgment(job)]
        peers.append({'host': host, 'node_rank': job.get('node_rank'), 'state': state,
                      'status': job.get('status'), 'exit_code': job.get('exit_code'), 'signal': job.get('signal'),
                      'run_id': job.get('run_id'), 'progress': None, 'detail': None})
    return peers


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _manifest_outcome(path):
    try:
        with open(path) as f:
            return json.load(f).get('outcome')
    except (IOError, OSError, ValueError, AttributeError):
        return None


def watch_controller(controller_pid, manifest_path, interval=WATCH_INTERVAL):
    """Until the job is collected (the manifest's outcome is no longer ``running``): when the controller
    process is gone, mark the experiment ``interrupted``. Runs in a detached process (see start_watcher)."""
    while True:
        if _manifest_outcome(manifest_path) != RUNNING:
            return
        if not _pid_alive(controller_pid):
            mark_interrupted(os.path.dirname(manifest_path), time.time(), controller_pid)
            return
        time.sleep(interval)


def start_watcher(controller_pid, manifest_path):
    """Fork a watcher in its own session (a Ctrl-C at the terminal does not reach it) and return at once."""
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)
        return
    try:
        os.setsid()
        if os.fork():
            os._exit(0)
        for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN if sig != signal.SIGTERM else signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        # nothing of the worker's (its result pipes, the terminal ansible-runner reads to the end) stays open
        os.closerange(3, os.sysconf('SC_OPEN_MAX') if hasattr(os, 'sysconf') else 1024)
        watch_controller(controller_pid, manifest_path)
    finally:
        os._exit(0)


class _Node(object):
    """What the wait knows about its host's job, updated by every query."""

    def __init__(self, node_rank):
        self.node_rank = node_rank
        self.job = {}
        self.log_tail = []
        self.progress = None
        self.query_failures = 0
        self.unreachable_since = None      # controller clock
        self.unreachable_since_wall = None
        self.log_bytes = None
        self.last_change = None            # controller clock of the last new output
        self.last_error = None
        self.step_times = None             # the node's step time from its metrics' tail (_stragglers.node_figure)
        self.seen_running_at = None        # controller's wall clock: when the last question that found it running was sent
        self.seen_ended_at = None          # controller's wall clock: when the first answer that found it ended came

    def seen(self, asked_wall, answered_wall):
        """When the controller saw the job run or end, on its own clock (the experiment's judgment orders the nodes'
        ends by it, module_utils/_judgment.blame): a question sent at ``asked_wall`` found it running; the first
        answer, at ``answered_wall``, that found it ended."""
        status = self.job.get('status')
        if status == STATUS_RUNNING:
            self.seen_running_at = asked_wall
        elif status in ENDED_STATUSES and self.seen_ended_at is None:
            self.seen_ended_at = answered_wall

    def answered(self, res, pattern, now):
        self.query_failures = 0
        self.unreachable_since = self.unreachable_since_wall = None
        self.job = res.get('job') or {}
        self.log_tail = res.get('log_tail') or []
        self.progress = find_progress(self.log_tail, pattern) or self.progress
        self.step_times = res.get('step_times') if isinstance(res.get('step_times'), dict) else self.step_times
        if self.node_rank is None and self.job.get('node_rank') is not None:
            self.node_rank = self.job.get('node_rank')
        size = self.job.get('log_bytes')
        if self.last_change is None or size != self.log_bytes:
            self.last_change = now
        self.log_bytes = size

    def label(self, host):
        return '%s rank %s' % (host, '?' if self.node_rank is None else self.node_rank)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _supports_check_mode = True
    _supports_async = False

    # --- seams for unit tests ---------------------------------------------------------------
    def _clock(self):
        return time.monotonic()

    def _wall(self):
        return time.time()

    def _sleep(self, seconds):
        time.sleep(seconds)

    def _start_watcher(self, controller_pid, manifest_path):
        start_watcher(controller_pid, manifest_path)

    # --- remote calls ---------------------------------------------------------------------------
    def _run_module(self, module_args, task_vars):
        """The module's result; a host that cannot be reached gives ``{'unreachable': True, 'msg': ...}`` instead of
        the exception that would end the task (and take the host out of the play)."""
        try:
            return self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars)
        except AnsibleConnectionFailure as exc:
            return {'unreachable': True, 'msg': to_text(exc)}

    def _hub_answer(self, args, task_vars):
        """The node's status from the watch hub's file (``(result, when the hub last heard from the node)``), or
        None when the hub has no live stream for it (the wait then asks with the module)."""
        host = to_text(task_vars.get('inventory_hostname') or 'localhost')
        record = _watch_hub.read_status(args['sync_dir'], safe_host_name(host), self._wall(), reader=read_json_cached)
        if record is None:
            return None
        return dict(record['result'], hub=True), record['line_at']

    def _query(self, args, task_vars, wait_for_change=0.0, dump_stacks=False):
        # the node's step time from the last records of its metrics files (a few KiB), for the straggler flag
        module_args = {'state': 'query', 'state_dir': args['state_dir'], 'log_lines': args['log_lines'],
                       'metrics_records': STEADY_STATE_WINDOW}
        if wait_for_change > 0:
            module_args['wait_for_change'] = wait_for_change
        if dump_stacks:
            module_args['dump_stacks'] = True
        for name in ('run_id', 'node_id'):
            if args.get(name):
                module_args[name] = args[name]
        return self._run_module(module_args, task_vars)

    def _stop(self, args, run_id, task_vars, reason, detail, dump_stacks=False):
        module_args = {'state': 'stopped', 'state_dir': args['state_dir'], 'stop_timeout': args['stop_timeout'],
                       'log_lines': args['log_lines'], 'stop_reason': reason, 'stop_detail': detail}
        if dump_stacks:
            module_args['dump_stacks'] = True  # where every rank is, before it is stopped (_stacks.py)
        if run_id:
            module_args['run_id'] = run_id
        if args.get('node_id'):
            module_args['node_id'] = args['node_id']
        return self._run_module(module_args, task_vars)

    # --- checks -----------------------------------------------------------------------------------
    @staticmethod
    def _validate(args):
        try:
            pattern = re.compile(args['progress_pattern'])
        except re.error as exc:
            raise AnsibleActionFail('progress_pattern is not a valid regular expression: %s' % to_text(exc))
        for name in ('poll_interval', 'progress_interval'):
            if args[name] <= 0:
                raise AnsibleActionFail('%s must be > 0' % name)
        for name in ('timeout', 'unreachable_grace', 'stall_timeout'):
            if args[name] < 0:
                raise AnsibleActionFail('%s must be >= 0' % name)
        problem = _stragglers.threshold_problem(args['straggler_threshold'], 'straggler_threshold')
        if problem:
            raise AnsibleActionFail(problem)
        return pattern

    def _watch_controller_once(self, sync_dir, manifest_path):
        """The first host to get here starts the controller watcher (an O_EXCL marker file in sync_dir)."""
        marker = os.path.join(sync_dir, WATCHER_FILE)
        try:
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return
        controller_pid = os.getppid()
        with os.fdopen(fd, 'w') as f:
            json.dump({'controller_pid': controller_pid, 'manifest': manifest_path}, f)
        self._start_watcher(controller_pid, manifest_path)

    # --- the job's watch hub (module_utils/_watch_hub.py) ---------------------------------------------
    def _watch_argv(self, args, task_vars):
        """The argv that runs the node's watcher (module_utils/_node_watch.py) in the run directory: over the host's
        own ssh settings and ControlMaster, or locally; None for another connection (the wait asks with the module)."""
        transport = self._connection.transport
        python = self._node_python(task_vars, is_local(transport))
        watcher = [python, os.path.join(args['run_dir'], 'watch.py'), '--log-lines', str(args['log_lines']),
                   '--metrics-records', str(STEADY_STATE_WINDOW), '--progress-interval', str(args['progress_interval'])]
        if is_local(transport):
            return watcher
        if transport not in SSH:
            return None
        rsh, host, user = ssh_settings(self._connection, self._play_context.remote_addr)
        login = '%s%s' % ('%s@' % user if user else '', host)
        return shlex.split(rsh) + ['-T', login, 'exec ' + ' '.join(shlex.quote(word) for word in watcher)]

    def _node_python(self, task_vars, local):
        """The node's Python, as the modules run there: ansible_python_interpreter (templated), else the one Ansible
        discovered, else the controller's own for a local connection and ``python3`` over ssh."""
        value = task_vars.get('ansible_python_interpreter')
        if value and '{' in to_text(value):
            try:
                value = self._templar.template(value)
            except Exception:  # pylint: disable=broad-except
                value = None
        if not value or '{' in to_text(value):
            value = (task_vars.get('ansible_facts') or {}).get('discovered_interpreter_python')
        return to_text(value) if value else (sys.executable if local else 'python3')

    def _register(self, args, task_vars, check_mode):
        """Register the host with the job's watch hub (its spec file) and start the hub when it does not run yet."""
        if check_mode or not args.get('run_dir'):
            return dict(changed=False, watched=False)
        argv = self._watch_argv(args, task_vars)
        if argv is None:
            return dict(changed=False, watched=False)
        host = to_text(task_vars.get('inventory_hostname') or 'localhost')
        hub_dir = os.path.join(args['sync_dir'], _watch_hub.HUB_DIR)
        try:
            os.makedirs(hub_dir, exist_ok=True)
            write_json_atomic(os.path.join(hub_dir, safe_host_name(host) + _watch_hub.SPEC_SUFFIX),
                              {'host': host, 'run_id': args.get('run_id'), 'argv': argv}, sync=False)
        except OSError as exc:
            raise AnsibleActionFail('Cannot register %s with the watch hub in %s: %s' % (host, hub_dir, to_text(exc)))
        self._start_hub_once(args['sync_dir'])
        return dict(changed=False, watched=True)

    def _start_hub_once(self, sync_dir):
        """The first host to get here starts the hub (an O_EXCL record in the hub's directory), in its own session."""
        record = os.path.join(sync_dir, _watch_hub.HUB_DIR, _watch_hub.HUB_RECORD)
        try:
            fd = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return
        controller_pid = os.getppid()
        pid = self._spawn_hub(sync_dir, controller_pid)
        with os.fdopen(fd, 'w') as f:
            json.dump({'controller_pid': controller_pid, 'pid': pid}, f)

    def _spawn_hub(self, sync_dir, controller_pid):
        program = _watch_hub.__file__
        # the directory that holds ansible_collections/: the hub imports the collection's module_utils from there
        root = program
        for dummy in range(5):
            root = os.path.dirname(root)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(root)] + [p for p in sys.path if p]))
        with open(os.path.join(sync_dir, _watch_hub.HUB_DIR, 'hub.log'), 'ab') as log:
            proc = subprocess.Popen([sys.executable, program, sync_dir, str(controller_pid)], stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=log, close_fds=True, start_new_session=True, env=env, cwd='/')
        return proc.pid

    def run(self, tmp=None, task_vars=None):
        if task_vars is None:
            task_vars = {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp

        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        pattern = self._validate(args)
        check_mode = bool(self._task.check_mode)
        sync_dir = args['sync_dir']
        if args['watch_start']:
            result.update(self._register(args, task_vars, check_mode))
            return result
        if not check_mode:
            try:
                os.makedirs(sync_dir, exist_ok=True)
            except OSError as exc:
                raise AnsibleActionFail('Cannot create sync_dir %s: %s' % (sync_dir, to_text(exc)))
            if args.get('manifest'):
                self._watch_controller_once(sync_dir, args['manifest'])
        wait = _Wait(self, args, task_vars, pattern, check_mode)
        result.update(wait.run())
        return result


class _Wait(object):
    """One host's wait: poll, publish, judge; ``run`` returns the task result."""

    def __init__(self, action, args, task_vars, pattern, check_mode):
        self.action, self.args, self.task_vars, self.pattern, self.check_mode = action, args, task_vars, pattern, check_mode
        self.host = to_text(task_vars.get('inventory_hostname') or 'localhost')
        self.own_file = safe_host_name(self.host) + '.json'
        self.own_path = os.path.join(args['sync_dir'], self.own_file)
        self.node = _Node(args.get('node_rank'))
        self.started = action._clock()
        self.next_progress = self.started + args['progress_interval']
        self.launcher_end_expected_since = None  # when a failed peer was first seen (launcher_ends_it)
        self.published = None                    # the last record written to own_path (publish)

    # --- the host's published state ------------------------------------------------------------
    @property
    def run_id(self):
        return self.node.job.get('run_id') or self.args.get('run_id')

    @property
    def label(self):
        prefix = self.args.get('label')
        return '%s: %s' % (prefix, self.node.label(self.host)) if prefix else self.node.label(self.host)

    def publish(self, state, **extra):
        if self.check_mode:
            return
        node = self.node
        record = {
            'host': self.host, 'node_rank': node.node_rank, 'state': verdict(state), 'status': node.job.get('status'),
            'exit_code': node.job.get('exit_code'), 'signal': node.job.get('signal'), 'run_id': self.run_id,
            'progress': node.progress, 'last_line': last_line(node.log_tail), 'updated_at': self.action._wall(),
            'unreachable_since': node.unreachable_since_wall, 'step_times': node.step_times,
        }
        record.update(extra)
        # read by the other nodes' waits every poll: no fsync, the mode an ordinary file gets; written again only when
        # it says something new (its time aside)
        same = dict(record, updated_at=None)
        if same == self.published:
            return
        self.published = same
        write_json_atomic(self.own_path, record, mode=FOLLOW_UMASK, sync=False)

    def finish(self, failed, msg, state, detail=None, **extra):
        node = self.node
        result = dict(changed=False, failed=failed, msg=msg, job=node.job, log_tail=node.log_tail, progress=node.progress,
                      waited_s=round(self.action._clock() - self.started, 3),
                      verdict={'state': verdict_state(state), 'detail': detail, 'last_line': last_line(node.log_tail),
                               'seen_running_at': node.seen_running_at, 'seen_ended_at': node.seen_ended_at,
                               'unreachable_since': node.unreachable_since_wall},
                      peer_failures=[], timed_out=False)
        result.update(extra)
        return result

    # --- the loop ---------------------------------------------------------------------------------
    def run(self):
        while True:
            asked = self.action._wall()
            hub = None if self.check_mode else self.action._hub_answer(self.args, self.task_vars)
            if hub is not None:
                res, asked = hub
            else:
                res = self.action._query(self.args, self.task_vars, self.watch_time(self.action._clock()))
            now = self.action._clock()
            if res.get('unreachable'):
                outcome = self.on_unreachable(res, now)
            elif res.get('failed'):
                outcome = self.on_query_failure(res)
            else:
                self.node.answered(res, self.pattern, now)
                self.node.seen(asked, self.action._wall())
                outcome = self.on_answer(now)
            if outcome is not None:
                return outcome
            self.action._sleep(self.delay(self.action._clock()))

    def watch_time(self, now):
        """How long the next question may watch the node's job there (0: answer at once): while the job runs, what
        is left of ASK_INTERVAL (or of a shorter progress_interval) after the poll_interval the wait sleeps anyway,
        never past the wait's timeout."""
        if self.check_mode or self.node.job.get('status') != STATUS_RUNNING:
            return 0.0
        watch = min(ASK_INTERVAL, self.args['progress_interval']) - self.args['poll_interval']
        if self.args['timeout']:
            watch = min(watch, self.started + self.args['timeout'] - now - self.args['poll_interval'])
        return max(0.0, round(watch, 3))

    def delay(self, now):
        delay = self.args['poll_interval']
        if self.args['timeout']:
            delay = max(0.0, min(delay, self.started + self.args['timeout'] - now))
        return delay

    def show_progress(self, now, what):
        if now >= self.next_progress:
            self.action._display.display('%s: %s' % (self.label, what))
            self.next_progress = now + self.args['progress_interval']

    # --- judging each answer ------------------------------------------------------------------------
    def on_unreachable(self, res, now):
        node = self.node
        node.last_error = to_text(res.get('msg', 'unreachable'))
        if node.unreachable_since is None:
            node.unreachable_since, node.unreachable_since_wall = now, self.action._wall()
        away = now - node.unreachable_since
        if self.check_mode:
            return self.finish(True, '%s: unreachable: %s' % (self.label, node.last_error), 'gone')
        if away >= self.args['unreachable_grace']:
            detail = 'no answer since %s, %d s (trainops_unreachable_grace=%d); last error: %s' % (
                utc(node.unreachable_since_wall), away, self.args['unreachable_grace'], node.last_error.strip())
            self.publish('gone')
            return self.finish(True, '%s: unreachable: %s' % (self.label, detail), 'gone', detail)
        self.publish('unreachable')
        failed_peers = self.failed_peers()
        if failed_peers:
            return self.finish(True, '%s: %s; this node is unreachable, its job is stopped when it answers again' % (
                self.label, self.peers_line(failed_peers)), 'stopped', peer_failures=failed_peers)
        self.show_progress(now, 'unreachable %ds (peers keep running; the job fails after %d s)  last progress: %s' % (
            away, self.args['unreachable_grace'], node.progress or 'none'))
        return None

    def on_query_failure(self, res):
        node = self.node
        node.query_failures += 1
        node.last_error = to_text(res.get('msg', 'unknown error'))
        if node.query_failures >= MAX_QUERY_FAILURES or self.check_mode:
            self.publish('error')
            return self.finish(True, '%s: cannot query the torchrun job: %s' % (self.label, node.last_error), 'error',
                               node.last_error)
        return None

    def on_answer(self, now):
        job = self.node.job
        status = job.get('status')
        if status == STATUS_EXITED and job.get('exit_code') == 0 and not job.get('signal'):
            self.publish('succeeded')
            return self.finish(False, '%s: run %s finished successfully' % (self.label, self.run_id), 'succeeded')
        if status in ENDED_STATUSES:
            return self.ended_badly(status)
        self.publish('running')
        if self.check_mode:
            return self.finish(False, '%s: run %s is %s (check mode: not waiting)' % (self.label, self.run_id, status),
                               'running')
        return self.stalled(now) or self.stopped_for_peers() or self.timed_out(now) or self.keep_waiting(now)

    def ended_badly(self, status):
        job, node = self.node.job, self.node
        if _launchers.of_job(job).ended_it(job) or (job.get('stop') or {}).get('reason') == 'peer':
            # ended by its launcher, or stopped by the watch hub, because of another node
            stopped = self.stopped_by_launcher()
            if stopped is not None:
                return stopped
        self.publish('failed')
        if status == STATUS_EXITED:
            what = 'exited with code %s%s' % (job.get('exit_code'), ' (%s)' % job['signal'] if job.get('signal') else '')
        elif status == STATUS_LOST:
            what = 'is lost (%s)' % (job.get('lost_reason') or 'its supervisor is gone without writing exit.json')
        else:
            what = 'does not exist in %s' % self.args['state_dir']
        msg = '%s: torchrun run %s %s; log %s' % (self.label, self.run_id, what, job.get('log_path'))
        if node.log_tail:
            msg += '; last %d log lines:\n%s' % (len(node.log_tail), '\n'.join(node.log_tail))
        return self.finish(True, msg, 'failed', what)

    def stalled(self, now):
        limit = self.args['stall_timeout']
        quiet = now - self.node.last_change
        if not limit or quiet < limit:
            return None
        detail = 'no new output for %d s (trainops_stall_timeout=%d); last line: %s' % (
            quiet, limit, last_line(self.node.log_tail) or 'none')
        # where every rank is (_stacks.py): this node's first, then the peers' (each dumps when it learns of the stall,
        # before it stops); this node's ranks are stopped only then, as stopping them ends the peers' collectives
        self.action._query(self.args, self.task_vars, dump_stacks=True)
        self.publish('stalled', detail=detail)
        self.await_peer_dumps()
        stop_res = self.stop('stalled', detail)
        msg = '%s: stalled: %s' % (self.label, detail)
        if stop_res.get('failed') or stop_res.get('unreachable'):
            msg += '; stopping it failed: %s' % to_text(stop_res.get('msg', 'unknown error'))
        return self.finish(True, msg, 'stalled', detail, stopped_pids=stop_res.get('stopped_pids') or [])

    def await_peer_dumps(self):
        """Wait, at most PEER_DUMP_WAIT seconds, until every other node of the job has said how it ended or that it
        stalled (each dumps its ranks' stacks first)."""
        expected = max(0, int(self.node.job.get('nnodes') or 1) - 1)
        deadline = self.action._clock() + PEER_DUMP_WAIT
        while expected and self.action._clock() < deadline:
            peers = read_peers(self.args['sync_dir'], self.own_file, self.run_id)
            if len([p for p in peers if p.get('state') not in UNSETTLED_STATES]) >= expected:
                return
            self.action._sleep(min(1.0, self.args['poll_interval']))

    def failed_peers(self):
        return [dict(host=p.get('host'), node_rank=p.get('node_rank'), state=p.get('state'), status=p.get('status'),
                     exit_code=p.get('exit_code'), signal=p.get('signal'), progress=p.get('progress'), detail=p.get('detail'))
                for p in read_peers(self.args['sync_dir'], self.own_file, self.run_id) if p.get('state') in FAILED_STATES]

    @staticmethod
    def peers_line(peers):
        return _watch_hub.stopped_because(peers)

    def stopped_for_peers(self):
        peers = self.failed_peers()
        if not peers or self.launcher_ends_it(peers):
            return None
        line = self.peers_line(peers)
        # a peer that stalled: this node's ranks are where the hang left them (waiting for it, or hung themselves)
        stop_res = self.stop('peer', line, dump_stacks=any(p['state'] in HUNG_STATES for p in peers))
        self.publish('stopped')
        msg = '%s: %s' % (self.label, line)
        if stop_res.get('failed') or stop_res.get('unreachable'):
            msg += '; stopping the local run failed too: %s' % to_text(stop_res.get('msg', 'unknown error'))
        return self.finish(True, msg, 'stopped', line, peer_failures=peers, stopped_pids=stop_res.get('stopped_pids') or [])

    def launcher_ends_it(self, peers):
        """A launcher that ends the other nodes' runs when one failed (Launcher.peer_failure_ends_node: a Slurm step,
        --kill-on-bad-exit) ends this node's run once a peer's ended badly. True while it gets STEP_PEER_WAIT seconds
        to do that (the node then counts as stopped by it); after that, or for a peer that stalled or is gone (the
        launcher ends nothing for those), the wait stops it here."""
        launcher = _launchers.of_job(self.node.job)
        if not launcher.peer_failure_ends_node or any(p['state'] != 'failed' for p in peers):
            return False
        now = self.action._clock()
        if self.launcher_end_expected_since is None:
            self.launcher_end_expected_since = now
        return now - self.launcher_end_expected_since < STEP_PEER_WAIT

    def stopped_by_launcher(self):
        """This node's run ended by its launcher (Launcher.ended_it): when a peer failed (looked for during
        STEP_PEER_WAIT, its wait may not have published yet), the launcher ended the run because of it; the node counts
        as stopped, as one the wait stops for a failed peer. None when no peer failed."""
        deadline = self.action._clock() + max(STEP_PEER_WAIT, 3 * self.args['poll_interval'])
        while True:
            peers = self.failed_peers()
            if peers or self.check_mode or self.action._clock() >= deadline:
                break
            self.action._sleep(min(1.0, self.args['poll_interval']))
        if not peers:
            return None
        if not _launchers.of_job(self.node.job).ended_it(self.node.job):
            line = self.peers_line(peers)
            self.publish('stopped', detail=line)
            return self.finish(True, '%s: %s' % (self.label, line), 'stopped', line, peer_failures=peers)
        line = _launchers.of_job(self.node.job).ended_detail(self.node.job, self.peers_line(peers)[len('stopped because '):])
        self.publish('stopped', detail=line)
        return self.finish(True, '%s: %s' % (self.label, line), 'stopped', line, peer_failures=peers)

    def stop(self, reason, detail, dump_stacks=False):
        stop_res = self.action._stop(self.args, self.run_id, self.task_vars, reason, detail, dump_stacks)
        if stop_res.get('job'):
            self.node.job = stop_res['job']
            self.node.log_tail = stop_res.get('log_tail') or self.node.log_tail
        return stop_res

    def timed_out(self, now):
        timeout = self.args['timeout']
        if not timeout or now - self.started < timeout:
            return None
        return self.finish(True, '%s: timed out after %d seconds waiting for run %s (still %s; last progress: %s)' % (
            self.label, timeout, self.run_id, self.node.job.get('status'), self.node.progress or 'none'),
            'timed_out', timed_out=True)

    def keep_waiting(self, now):
        if now < self.next_progress:
            return None
        quiet = now - self.node.last_change
        what = 'running  %s' % progress_text(self.node.progress, self.node.log_tail)
        if self.args['stall_timeout'] and quiet >= min(60, self.args['stall_timeout'] / 2.0):
            what += '  (no new output for %ds)' % quiet
        straggler = self.straggler()
        if straggler:
            what += '  STRAGGLER %s' % straggler
        self.show_progress(now, what)
        return None

    def straggler(self):
        """``compute time 0.031 s, 140% above ...`` when this node is a straggler among the nodes whose waits published a
        step time (their status files in sync_dir), else None (no metrics, one node, or not slower)."""
        if not self.node.step_times:
            return None
        figures = dict((p.get('host'), p.get('step_times')) for p in read_peers(self.args['sync_dir'], self.own_file, self.run_id)
                       if isinstance(p.get('step_times'), dict) and p.get('state') == 'running')
        figures[self.host] = self.node.step_times
        found = _stragglers.stragglers(figures, self.args['straggler_threshold'])
        for straggler in found['nodes']:
            if straggler['node'] == self.host:
                return _stragglers.straggler_words(straggler, found['basis'], found['threshold'])
        return None
