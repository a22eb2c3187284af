# -*- coding: utf-8 -*-

# Copyright (c) 2025, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Start, query and stop the ranked torchrun of one node, detached under a small supervisor.

State directory layout (one per node: ``<state root>/<host name or node_id>``, see
``_node_identity.node_state_dir``, so nodes whose state root is on a shared file system never
share a file; directories 0700, files 0600)::

    <state_dir>/current.json               {"run_id": ...} of the last started run
    <state_dir>/.lock                      flock serialising start/stop on this node
    <state_dir>/runs/<run_id>/job.json     everything recorded at start (argv, env, chdir, fingerprint, the
                                           host's identity, the names of the secret variables, ...)
    <state_dir>/runs/<run_id>/supervisor.py  the supervisor program (_supervisor.py), with the _proc.py and
                                           _files.py it imports from there (see SUPERVISOR_FILES)
    <state_dir>/runs/<run_id>/supervisor.log
    <state_dir>/runs/<run_id>/pids.json    written by the supervisor: its own and torchrun's pid/pgid/start time,
                                           and what its launcher has it record (a Slurm step's, see _launchers)
    <state_dir>/runs/<run_id>/node.log     torchrun stdout + stderr (workers inherit it)
    <state_dir>/runs/<run_id>/exit.json    written by the supervisor once torchrun and its tree are gone
    <state_dir>/runs/<run_id>/rank_failure.json  the rank's death the node's watcher ended torchrun for (_node_watch)

Secret variables (``secret_env``) reach the supervisor, and through it every rank, in the environment
of the process that starts it (for a container, ``docker exec -e NAME`` takes the value from there):
their values are never written to a file, returned or logged; job.json records their names.
"""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import stat
import sys
import time

from ansible_collections.trainops.multinode.plugins.module_utils._node_identity import (
    NodeIdentityError,
    ensure_private_dir,
    host_identity,
    node_state_dir,
    same_host,
)
# imported as modules so that AnsiballZ packs them with the module: their source is written into every run
# directory (SUPERVISOR_FILES)
from ansible_collections.trainops.multinode.plugins.module_utils import (
    _files, _heartbeat, _launchers, _node_files, _node_watch, _proc, _stacks, _stragglers, _supervisor)
from ansible_collections.trainops.multinode.plugins.module_utils._files import (
    module_source,
    write_json_atomic,
    write_text_atomic,
)
from ansible_collections.trainops.multinode.plugins.module_utils._proc import (
    System,
    descendants,
    is_alive,
)
from ansible_collections.trainops.multinode.plugins.module_utils._outcomes import (
    DUMPED_STOPS, STATUS_ABSENT, STATUS_EXITED, STATUS_LOST, STATUS_PREPARED, STATUS_RUNNING, OutcomeError, stop_reason)
from ansible_collections.trainops.multinode.plugins.module_utils._run_spec import (
    ENV_NAME_RE, RUN_ID_FIRST, RUN_ID_MAX, RUN_ID_RE, RUN_ID_REST, SECRET_NAMES_VAR, TorchrunError, build_argv,
    check_container, compute_fingerprint, container_argv, is_run_id, iso_time, normalize_env, render_env_file,
    run_id_shell_function, split_secret_env, validate_run_id, validate_start_params)
from ansible_collections.trainops.multinode.plugins.module_utils._run_records import (
    RecordRefused,
    others_run,
    run_dir_owner,
    signaller,
    unreadable_dir,
    verify_run,
)

__all__ = ['ENV_NAME_RE', 'RUN_ID_FIRST', 'RUN_ID_MAX', 'RUN_ID_RE', 'RUN_ID_REST', 'SECRET_NAMES_VAR', 'SUPERVISOR_FILES',
           'TorchrunError', 'TorchrunNode', 'build_argv', 'compute_fingerprint', 'is_run_id', 'normalize_env',
           'run_id_shell_function', 'run_module', 'validate_run_id', 'validate_start_params']
"""The names the modules, filters and tests use; what a run is (its id, argv, environment, fingerprint) is decided in
module_utils/_run_spec.py, what its records say and how it is started, queried and stopped here."""

# a run's statuses (job.status) are the vocabulary's, module_utils/_outcomes.py

START_WAIT = 10.0
"""Seconds the module waits for the supervisor to record torchrun's pid."""
CLEANUP_GRACE = 5
"""Seconds the supervisor gives leftover processes between SIGTERM and SIGKILL once torchrun ended."""
KILL_WAIT = 5.0
"""Seconds to wait for processes to vanish after SIGKILL."""
SUPERVISOR_EXIT_WAIT = 10.0
"""Extra seconds (on top of CLEANUP_GRACE) to wait for the supervisor to write exit.json after a stop."""
POLL = 0.2
QUERY_WATCH_POLL = 0.5
"""Seconds between two reads of a running run's state while a query waits for it to change (``wait_for_change``)."""

SUPERVISOR_FILES = {'supervisor.py': _supervisor, '_proc.py': _proc, '_files.py': _files, '_heartbeat.py': _heartbeat}
"""What every run directory gets: the supervisor program (plugins/module_utils/_supervisor.py) and the
module_utils it imports there (its SHIPPED_WITH), read with _files.module_source."""


WATCH_FILE = 'watch.py'
"""The node's watcher (plugins/module_utils/_node_watch.py) in every run directory; the module_utils the query
imports go under ``watchlib/`` as a package tree (_node_watch.WATCH_LIBS), so that it runs the module's own query."""


def write_supervisor(run_dir):
    """Write the supervisor and its helpers into ``run_dir`` (0600); return the path of the program."""
    for name, module in sorted(SUPERVISOR_FILES.items()):
        write_text_atomic(os.path.join(run_dir, name), module_source(module), sync=False)
    return os.path.join(run_dir, 'supervisor.py')


def write_watcher(run_dir):
    """Write the node's watcher into ``run_dir`` with the module_utils its query imports (WATCH_FILE, 0600 files in
    0700 directories); return the path of the program."""
    write_text_atomic(os.path.join(run_dir, WATCH_FILE), module_source(_node_watch), sync=False)
    package = os.path.join(run_dir, _node_watch.LIB_DIR)
    for part in _node_watch.PACKAGE.split('.'):
        package = os.path.join(package, part)
        ensure_private_dir(package)
        write_text_atomic(os.path.join(package, '__init__.py'), '', sync=False)
    for name in _node_watch.WATCH_LIBS:
        # every one of them is loaded: this module imports them, to the end
        module = sys.modules[_node_watch.PACKAGE + '.' + name]
        write_text_atomic(os.path.join(package, name + '.py'), module_source(module), sync=False)
    return os.path.join(run_dir, WATCH_FILE)


def read_json(path):
    """Return the JSON object in ``path`` or ``None`` (missing, unreadable, half-written, or refused by the bounds of
    module_utils/_node_files.py: the run's records are the job's to rewrite, and what the query returns of them goes
    to the controller)."""
    data, _refused = _node_files.read_json_object(path)
    return data


def _torchrun_end(record):
    """exit.json's ``torchrun`` (``{exit_code, signal}``: torchrun's own end, when exit.json says a rank's) with its
    fields checked, None when there is none."""
    if not isinstance(record, dict):
        return None
    code, name = record.get('exit_code'), record.get('signal')
    return {'exit_code': code if isinstance(code, int) and not isinstance(code, bool) else None,
            'signal': name[:32] if isinstance(name, str) else None}


def file_size(path):
    """Size of the file in bytes, None when it does not exist (a log that grows shows the job is alive)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def record_stop(path, reason, detail, check_mode=False):
    """Write the stop record ``{reason, detail, requested_at, requested_at_epoch, uid}`` unless one exists.

    ``reason`` is one of ``_outcomes.STOP_REASONS`` (another is a TorchrunError). The first reason wins: a run stopped
    by the user and then swept up by the collection stays ``user``.
    """
    if reason is not None:
        try:
            stop_reason(reason)
        except OutcomeError as exc:
            raise TorchrunError('stop_reason: %s' % exc)
    if check_mode or reason is None or os.path.exists(path):
        return
    when = time.time()
    write_json_atomic(path, {'reason': reason, 'detail': detail, 'requested_at': iso_time(when),
                             'requested_at_epoch': when, 'uid': os.getuid()})


METRICS_TAIL_BYTES = 16384
"""How much of the end of each metrics file a query with ``metrics_records`` reads (a record is well under 1 KiB)."""

MAX_METRICS_FILES = 256


def run_output_dir(job):
    """The run's output directory: ``TRAINOPS_OUTPUT_DIR`` of its environment (job.json), else ``<run_dir>/outputs``;
    None when job.json names neither as a string."""
    env = job.get('env') if isinstance(job.get('env'), dict) else {}
    out_dir = env.get('TRAINOPS_OUTPUT_DIR') or (job.get('run_dir') and os.path.join(job['run_dir'], 'outputs'))
    return out_dir if isinstance(out_dir, str) and out_dir else None


CHECKPOINT_RECORD = 'checkpoint.json'
"""What the ranks write next to each checkpoint (files/workspace/train.py, docs/failures.md): a newer one after the
checkpoint signal means the checkpoint asked for is written."""


def checkpoint_written_since(out_dir, since):
    """Whether ``out_dir``/checkpoint.json was written at or after ``since`` (epoch seconds); a link is not taken."""
    if not out_dir:
        return False
    try:
        st = os.lstat(os.path.join(out_dir, CHECKPOINT_RECORD))
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_mtime >= since


def recent_step_times(job, records):
    """The node's step time while its run goes on: ``_stragglers.node_figure`` of the last ``records`` records of each
    ``rank_*_metrics.jsonl`` in the run's output directory (``TRAINOPS_OUTPUT_DIR`` of the run's environment, else
    ``<run_dir>/outputs``); None without such records. Reads at most METRICS_TAIL_BYTES of the end of each file
    (a cut first line does not parse and is skipped); symbolic links are not followed."""
    out_dir = run_output_dir(job)
    if not out_dir or records <= 0:
        return None
    by_file = {}
    for path in sorted(glob.glob(os.path.join(glob.escape(out_dir), _stragglers.METRICS_GLOB)))[:MAX_METRICS_FILES]:
        if os.path.islink(path):
            continue
        parsed = []
        for line in tail_lines(path, records + 1, max_bytes=METRICS_TAIL_BYTES):
            try:
                record = _node_files.loads(line)
            except _node_files.Refused:
                continue
            if isinstance(record, dict):
                parsed.append(record)
        by_file[path] = parsed
    return _stragglers.node_figure(by_file, records)


def tail_lines(path, count, max_bytes=1024 * 1024):
    """Return the last ``count`` lines of ``path`` (at most ``max_bytes`` read); missing file gives ``[]``."""
    if count <= 0:
        return []
    try:
        with open(path, 'rb') as f:
            f.seek(0, os.SEEK_END)
            pos = f.tell()
            data = b''
            while pos > 0 and data.count(b'\n') <= count and len(data) < max_bytes:
                size = min(8192, pos)
                pos -= size
                f.seek(pos)
                data = f.read(size) + data
    except (IOError, OSError):
        return []
    return data.decode('utf-8', 'replace').splitlines()[-count:]


# --------------------------------------------------------------------------------------------------
# one node
# --------------------------------------------------------------------------------------------------

class TorchrunNode(object):
    """The runs of one logical node, kept in ``state_dir``."""

    def __init__(self, state_dir, system=None, identity=None):
        self.state_dir = os.path.abspath(state_dir)
        self.system = system or System()
        self.identity = identity or host_identity()
        self.runs_dir = os.path.join(self.state_dir, 'runs')
        self.current_path = os.path.join(self.state_dir, 'current.json')
        self.lock_path = os.path.join(self.state_dir, '.lock')

    # --- paths and records --------------------------------------------------------------------
    def run_dir(self, run_id):
        return os.path.join(self.runs_dir, run_id)

    def paths(self, run_id):
        run_dir = self.run_dir(run_id)
        return {
            'run_dir': run_dir,
            'job': os.path.join(run_dir, 'job.json'),
            'pids': os.path.join(run_dir, 'pids.json'),
            'exit': os.path.join(run_dir, 'exit.json'),
            'log': os.path.join(run_dir, 'node.log'),
            'supervisor': os.path.join(run_dir, 'supervisor.py'),
            'supervisor_log': os.path.join(run_dir, 'supervisor.log'),
            'env_file': os.path.join(run_dir, 'env.sh'),
            'stop': os.path.join(run_dir, 'stop.json'),
        }

    def current_run_id(self):
        data = read_json(self.current_path)
        return data.get('run_id') if data else None

    def run_ids(self):
        try:
            names = sorted(os.listdir(self.runs_dir))
        except OSError:
            return []
        return [n for n in names if RUN_ID_RE.fullmatch(n) and os.path.isfile(os.path.join(self.runs_dir, n, 'job.json'))]

    def _lock(self, check_mode, create=False):
        """Serialise start/stop on this node; check mode neither creates nor locks anything."""
        if check_mode:
            return contextlib.nullcontext()
        if create:
            for path in (self.state_dir, self.runs_dir):
                ensure_private_dir(path)
        if os.path.isdir(self.state_dir):
            return self.system.lock(self.lock_path)
        return contextlib.nullcontext()

    def state(self, run_id):
        """Return everything known about ``run_id``: spec (job.json), pids, exit record and status."""
        self._check_readable(run_id)
        paths = self.paths(run_id)
        spec = read_json(paths['job'])
        result = self._empty_state(run_id)
        result['spec'] = spec
        if spec is None:
            return result
        result['owner_uid'] = run_dir_owner(self.system, paths['run_dir'])
        host = same_host(spec.get('host'), self.identity)
        if host == 'other':
            recorded = spec.get('host') or {}
            raise TorchrunError(
                'Run %s in %s was recorded by host %s (machine id %s), not by this host %s (machine id %s): two nodes use '
                'the same state directory. Give each node its own host name or trainops_node_id; this node does not act '
                'on another host\'s records.' % (
                    run_id, paths['run_dir'], recorded.get('hostname'), recorded.get('machine_id'),
                    self.identity.get('hostname'), self.identity.get('machine_id')))
        pids = read_json(paths['pids'])
        result['pids'] = pids
        if host == 'rebooted':
            # pids and start times of an earlier boot mean nothing now: never check or signal them
            result['exit'] = read_json(paths['exit'])
            result['stop'] = read_json(paths['stop'])
            result['status'] = STATUS_EXITED if result['exit'] is not None else STATUS_LOST
            result['lost_reason'] = None if result['exit'] is not None else 'the node rebooted after the run started'
            return result
        refused = self._verify(result) if pids else None
        # exit.json is read after the liveness check: the supervisor writes it before exiting
        exit_rec = read_json(paths['exit'])
        if refused is not None and exit_rec is None:
            # a run that ended is never acted on: its records may say what they like
            raise TorchrunError(str(refused), job=self.job_view(result), refused=refused.reason)
        result['stop'] = read_json(paths['stop'])
        result['log_bytes'] = file_size(paths['log'])
        result['exit'] = exit_rec
        if exit_rec is not None:
            result['status'] = STATUS_EXITED
        elif result['supervisor_alive']:
            result['status'] = STATUS_RUNNING
        elif pids is None and _launchers.of_spec(spec).deferred_start:
            result['status'] = STATUS_PREPARED
        else:
            result['status'] = STATUS_LOST
            result['lost_reason'] = 'its supervisor is gone and no exit.json was written'
        return result

    def _verify(self, result):
        """Fill in the verified supervisor and torchrun of ``result`` (a state with pids); the
        :class:`RecordRefused` when its records do not verify (see _run_records)."""
        try:
            verified = verify_run(self.system, result['run_id'], result['paths']['run_dir'], result['spec'], result['pids'])
        except RecordRefused as exc:
            return exc
        result['verified'] = verified
        result['supervisor_alive'] = verified.supervisor is not None
        result['torchrun_alive'] = verified.torchrun is not None
        return None

    def _check_readable(self, run_id=None):
        """A state or run directory this user cannot read belongs to someone else: say so (and whose it is)
        rather than call the run absent (or the node without a current run)."""
        readable = os.R_OK | os.X_OK
        # the state root is only passed through; the node's directories are read
        dirs = [(os.path.dirname(self.state_dir), os.X_OK), (self.state_dir, readable), (self.runs_dir, readable)]
        if run_id:
            dirs.append((self.run_dir(run_id), readable))
        msg = unreadable_dir(self.system, dirs)
        if msg:
            raise TorchrunError(msg)

    @staticmethod
    def is_active(state):
        """Running, or lost while torchrun itself is still alive (its supervisor was killed)."""
        return state['status'] == STATUS_RUNNING or (state['status'] == STATUS_LOST and state['torchrun_alive'])

    def job_view(self, state, spec=None):
        """The ``job`` return value for a state (``spec`` overrides job.json, used for check mode plans)."""
        spec = spec if spec is not None else (state['spec'] or {})
        pids = state['pids'] or {}
        exit_rec = state['exit'] or {}
        paths = state['paths']
        return {
            'run_id': state['run_id'],
            'status': state['status'],
            'pid': pids.get('pid'),
            'pgid': pids.get('pgid'),
            'supervisor_pid': pids.get('supervisor_pid'),
            'node_rank': spec.get('node_rank'),
            'argv': spec.get('argv'),
            'env': spec.get('env'),
            'chdir': spec.get('chdir'),
            'started_at': pids.get('started_at'),
            'ended_at': exit_rec.get('ended_at'),
            'ended_at_epoch': exit_rec.get('ended_at_epoch'),
            'exit_code': exit_rec.get('exit_code'),
            'signal': exit_rec.get('signal'),
            # the signals the supervisor itself received (a SIGTERM from slurmstepd, from a stop)
            'supervisor_signals': exit_rec.get('signals') or [],
            # the rank's death the node's watcher ended torchrun for, and torchrun's own end then (exit.json)
            'rank_failure': _supervisor.rank_failure_record(exit_rec.get('rank_failure')),
            'torchrun_end': _torchrun_end(exit_rec.get('torchrun')),
            'launcher': _launchers.launcher_view(spec, pids),
            # whose run it is: the owner of its run directory (lstat), which the job cannot forge
            'owner_uid': state.get('owner_uid'),
            'lost_reason': state.get('lost_reason'),
            'host': spec.get('host'),
            'secret_env_names': spec.get('secret_env_names') or [],
            'run_dir': paths['run_dir'] if state['run_id'] else None,
            'log_path': paths['log'] if state['run_id'] else None,
            'env_file': paths['env_file'] if state['run_id'] and os.path.exists(paths['env_file']) else None,
            'fingerprint': spec.get('fingerprint'),
            'stop': state.get('stop'),
            'log_bytes': state.get('log_bytes'),
        }

    def _result(self, state, changed, log_lines, **extra):
        result = {'changed': changed, 'job': self.job_view(state),
                  'log_tail': tail_lines(state['paths']['log'], log_lines) if state['run_id'] else []}
        result.update(extra)
        return result

    def _absent_state(self):
        return self._empty_state(None, paths=self.paths('_'))

    # --- query --------------------------------------------------------------------------------
    def query(self, run_id=None, log_lines=20, wait_for_change=0.0):
        """The run's state (the current run's without ``run_id``). With ``wait_for_change`` (seconds), a run that is
        running is watched on the node for up to that long first, its state re-read every QUERY_WATCH_POLL seconds,
        and the answer comes as soon as it is no longer running: a controller that asks every few seconds still
        hears of the end at once, without the cost of a module run per poll."""
        self._check_readable()
        run_id = run_id or self.current_run_id()
        if not run_id:
            return self._result(self._absent_state(), False, 0)
        validate_run_id(run_id)
        deadline = self.system.monotonic() + max(0.0, wait_for_change or 0.0)
        state = self.state(run_id)
        while state['status'] == STATUS_RUNNING:
            remaining = deadline - self.system.monotonic()
            if remaining <= 0:
                break
            self.system.sleep(min(QUERY_WATCH_POLL, remaining))
            state = self.state(run_id)
        return self._result(state, False, log_lines)

    # --- start --------------------------------------------------------------------------------
    def start(self, params, check_mode=False, spawn=True):
        """Start the run; with ``spawn=False`` (state=prepared) only write its directory, for a launcher that starts
        its supervisor later (_launchers.Launcher.deferred_start)."""
        validate_start_params(params)
        launcher = _launchers.for_state('started' if spawn else 'prepared', params.get('launcher'))
        if launcher is None:
            raise TorchrunError('launcher=%s cannot write a run with state=%s'
                                % (params.get('launcher'), 'started' if spawn else 'prepared'))
        run_id = params['run_id']
        argv = build_argv(params)
        env, secrets = split_secret_env(params.get('env'), params.get('secret_env'))
        chdir = params.get('chdir')
        fingerprint = compute_fingerprint(argv, env, chdir, secrets)
        stop_timeout = params.get('stop_timeout')
        stop_timeout = 15 if stop_timeout is None else stop_timeout
        log_lines = params.get('log_lines')
        log_lines = 20 if log_lines is None else log_lines
        spec = {
            'run_id': run_id,
            'argv': argv,
            'env': env,
            'chdir': chdir,
            'fingerprint': fingerprint,
            'node_rank': params['node_rank'],
            'nnodes': params['nnodes'],
            'nproc_per_node': params['nproc_per_node'],
            'rdzv_backend': params.get('rdzv_backend') or 'static',
            'master_addr': params['master_addr'],
            'master_port': params['master_port'],
            'state_dir': self.state_dir,
            'cleanup_grace': CLEANUP_GRACE,
            'host': self.identity,
            'uid': os.getuid(),
            'secret_env_names': sorted(secrets),
        }
        # what the run's launcher records (not part of the fingerprint: it is how the run starts, not what)
        spec.update(launcher.spec_fields(os.environ, sorted(secrets)))
        if params.get('container'):
            spec['container'] = params['container']
            spec['container_engine'] = params.get('container_engine') or 'docker'
            spec['container_python'] = params.get('container_python') or 'python3'

        with self._lock(check_mode, create=True):
            state = self.state(run_id)
            if state['status'] != STATUS_ABSENT:
                existing = state['spec'].get('fingerprint')
                if existing != fingerprint:
                    differ = [k for k, v in (('argv', argv), ('env', env), ('chdir', chdir)) if state['spec'].get(k) != v]
                    raise TorchrunError(
                        'Run %s already exists in %s with a different fingerprint (recorded %s, requested %s; %s differ). '
                        'Use a new run_id to start a different job.' % (
                            run_id, state['paths']['run_dir'], existing, fingerprint, ', '.join(differ) or 'recorded values'),
                        job=self.job_view(state), fingerprint=fingerprint)
                if state['status'] == STATUS_LOST:
                    raise TorchrunError(
                        'Run %s was started before but is lost: its supervisor is gone and no exit.json was written (see %s). '
                        'Use a new run_id.' % (run_id, state['paths']['supervisor_log']),
                        job=self.job_view(state), log_tail=tail_lines(state['paths']['log'], log_lines))
                return self._result(state, False, log_lines, replaced=[], stopped_pids=[])

            others = [self.state(r) for r in self.run_ids() if r != run_id]
            active = [o for o in others if self.is_active(o)]
            if active and not params.get('replace'):
                descr = '; '.join('run %s (status %s, pid %s, started_at %s, log %s)' % (
                    o['run_id'], o['status'], (o['pids'] or {}).get('pid'), (o['pids'] or {}).get('started_at'), o['paths']['log'])
                    for o in active)
                raise TorchrunError(
                    'Another run is still running on this node (%s): %s. Stop it first or set replace=true.' % (self.state_dir, descr),
                    running=[self.job_view(o) for o in active])

            replaced = []
            stopped_pids = []
            warnings = []
            for other in active:
                record_stop(other['paths']['stop'], 'replaced', 'replaced by run %s' % run_id, check_mode=check_mode)
                stopped, dummy, warns = self._terminate(other, stop_timeout, check_mode)
                replaced.append(other['run_id'])
                stopped_pids.extend(stopped)
                warnings.extend(warns)

            if check_mode:
                planned = dict(self._empty_state(run_id), status=STATUS_ABSENT)
                return {'changed': True, 'job': self.job_view(planned, spec=spec), 'log_tail': [],
                        'replaced': replaced, 'stopped_pids': sorted(stopped_pids), 'warnings': warnings}

            if spawn:
                self._launch(run_id, spec, secrets)
            else:
                self._write_run(run_id, spec, secrets)
                write_json_atomic(self.current_path, {'run_id': run_id, 'updated_at': iso_time(self.system.time())})
            state = self.state(run_id)
            return self._result(state, True, log_lines, replaced=replaced, stopped_pids=sorted(stopped_pids), warnings=warnings)

    def _empty_state(self, run_id, paths=None):
        return {'run_id': run_id, 'paths': paths or self.paths(run_id), 'spec': None, 'pids': None, 'exit': None,
                'status': STATUS_ABSENT, 'supervisor_alive': False, 'torchrun_alive': False, 'lost_reason': None,
                'verified': None}

    def _write_run(self, run_id, spec, secrets):
        """The run directory: supervisor, env file and job.json (the last, it marks the run as existing)."""
        paths = self.paths(run_id)
        ensure_private_dir(paths['run_dir'])
        for stale in (paths['pids'], paths['exit'], paths['stop']):
            if os.path.exists(stale):
                os.unlink(stale)
        spec = dict(spec, created_at=iso_time(self.system.time()))
        write_supervisor(paths['run_dir'])
        write_watcher(paths['run_dir'])
        write_text_atomic(paths['env_file'], render_env_file(spec['env'], run_id, secrets), sync=False)
        write_json_atomic(paths['job'], spec)
        return spec

    def _launch(self, run_id, spec, secrets):
        paths = self.paths(run_id)
        spec = self._write_run(run_id, spec, secrets)
        if spec.get('container'):
            check_container(self.system, spec['container_engine'], spec['container'], paths['run_dir'])
            argv = container_argv(spec['container_engine'], spec['container'], spec['container_python'],
                                  paths['run_dir'], paths['supervisor'], paths['job'],
                                  user='%d:%d' % (os.getuid(), os.getgid()), pass_env=sorted(secrets))
        else:
            argv = [sys.executable, paths['supervisor'], paths['job']]
        rc = self.system.spawn_detached(argv, cwd=paths['run_dir'], output_path=paths['supervisor_log'],
                                        env=dict(os.environ, **secrets) if secrets else None)
        write_json_atomic(self.current_path, {'run_id': run_id, 'updated_at': iso_time(self.system.time())})
        if rc != 0:
            raise TorchrunError('The supervisor for run %s could not be started (exit status %s). Supervisor log:\n%s' % (
                run_id, rc, '\n'.join(tail_lines(paths['supervisor_log'], 50))),
                supervisor_log=tail_lines(paths['supervisor_log'], 50))
        deadline = self.system.monotonic() + START_WAIT
        while True:
            if read_json(paths['pids']) is not None:
                return
            exit_rec = read_json(paths['exit'])
            if exit_rec is not None:
                raise TorchrunError('torchrun for run %s could not be started: %s. Supervisor log:\n%s' % (
                    run_id, exit_rec.get('error') or 'exit code %s' % exit_rec.get('exit_code'),
                    '\n'.join(tail_lines(paths['supervisor_log'], 50))),
                    supervisor_log=tail_lines(paths['supervisor_log'], 50))
            if self.system.monotonic() >= deadline:
                # given up: a supervisor that comes up later reads this and never starts torchrun (and one that
                # started it meanwhile stops it again); the launch's undo stops whatever recorded its pids
                record_stop(paths['stop'], 'undo', 'the start wait (%s s) ran out' % START_WAIT)
                raise TorchrunError('The supervisor for run %s did not record the torchrun pid within %s seconds; the run '
                                    'is cancelled. Supervisor log:\n%s' % (
                                        run_id, START_WAIT, '\n'.join(tail_lines(paths['supervisor_log'], 50))),
                                    supervisor_log=tail_lines(paths['supervisor_log'], 50))
            self.system.sleep(0.05)

    # --- stop ---------------------------------------------------------------------------------
    def stop(self, run_id=None, stop_timeout=15, log_lines=20, check_mode=False, reason=None, detail=None,
             signal_tree=True, checkpoint_seconds=0, dump_stacks=False):
        """Stop the run: its stop record (``reason``, ``detail``), then SIGTERM to its process tree, SIGKILL after
        ``stop_timeout``. With ``checkpoint_seconds`` (and a run that has a checkpoint signal), first the checkpoint
        signal to its supervisor and process tree, as Slurm sends it before a time limit, and up to that many seconds
        for the ranks to write their checkpoint (a newer checkpoint.json in the run's output directory). With
        ``dump_stacks``, or a ``reason`` of _outcomes.DUMPED_STOPS (a peer failed), every rank's Python stack is first
        written to the run's output directory (_stacks.py)."""
        self._check_readable()
        dump_stacks = dump_stacks or reason in DUMPED_STOPS
        run_id = run_id or self.current_run_id()
        if not run_id:
            return self._result(self._absent_state(), False, 0, stopped_pids=[], killed_pids=[])
        validate_run_id(run_id)
        with self._lock(check_mode):
            state = self.state(run_id)
            if state['status'] == STATUS_PREPARED:
                # a run whose launcher has not started it yet: the record makes a supervisor that the launcher
                # still starts (late) not start torchrun (_supervisor.Supervisor.stopped_before_start)
                recorded = reason is not None and not check_mode and not os.path.exists(state['paths']['stop'])
                record_stop(state['paths']['stop'], reason, detail, check_mode=check_mode)
                if recorded:
                    state = self.state(run_id)
                return self._result(state, recorded, log_lines, stopped_pids=[], killed_pids=[])
            if not self.is_active(state):
                return self._result(state, False, log_lines, stopped_pids=[], killed_pids=[])
            others = others_run(self.system, state['verified'].owner)
            if others:
                raise TorchrunError(others, job=self.job_view(state))
            stacks = self._dump_stacks(state) if dump_stacks and signal_tree and not check_mode else None
            checkpoint = None
            if checkpoint_seconds > 0 and signal_tree and not check_mode:
                checkpoint = self._checkpoint_first(state, checkpoint_seconds)
            record_stop(state['paths']['stop'], reason, detail, check_mode=check_mode)
            if not signal_tree:
                # a run whose launcher signals it (a Slurm step's scancel, the srun launcher's stop)
                return self._result(state, not check_mode and reason is not None, log_lines, stopped_pids=[],
                                    killed_pids=[])
            try:
                stopped, killed, warnings = self._terminate(state, stop_timeout, check_mode)
            except PermissionError as exc:
                raise TorchrunError(
                    'Cannot stop run %s: its owner (uid %d) may not signal all of its processes (%s); the processes '
                    'stopped so far are gone, the others are left as they are.' % (
                        run_id, state['verified'].owner.uid, exc.strerror),
                    job=self.job_view(state))
            if not check_mode:
                state = self.state(run_id)
            return self._result(state, True, log_lines, stopped_pids=stopped, killed_pids=killed, warnings=warnings,
                                checkpoint_signal=checkpoint, stacks=stacks)

    def end_failed(self, run_id, failure, stop_timeout=1):
        """End the process tree of a run whose torchrun logged a rank's death (``failure``: ``{exitcode, local_rank, pid}``,
        _node_watch.rank_failure) and has not ended by itself (_node_watch.py): the death recorded first in the run
        directory (_supervisor.RANK_FAILURE_FILE, so that exit.json says it and not the signal that ended torchrun),
        then as a stop does (SIGTERM, SIGKILL after ``stop_timeout``), but with no stop record: the run failed on its
        own. The stopped pids (empty when the run no longer runs)."""
        validate_run_id(run_id)
        record = _supervisor.rank_failure_record(dict(failure or {}, seen_at_epoch=time.time()))
        if record is None:
            raise TorchrunError('Not a rank failure: %r' % (failure,))
        with self._lock(False):
            state = self.state(run_id)
            if not self.is_active(state):
                return []
            write_json_atomic(os.path.join(state['paths']['run_dir'], _supervisor.RANK_FAILURE_FILE), record)
            stopped, dummy, dummy = self._terminate(state, stop_timeout, False)
            return stopped

    def dump_stacks(self, run_id=None):
        """Every rank's Python stack into the run's output directory (_stacks.py), the run left running: ``{ranks,
        error}``; None when the run does not run."""
        self._check_readable()
        run_id = run_id or self.current_run_id()
        if not run_id:
            return None
        validate_run_id(run_id)
        state = self.state(run_id)
        return self._dump_stacks(state) if self.is_active(state) else None

    def _dump_stacks(self, state):
        owner = state['verified'].owner
        return _stacks.dump_run(self._targets(state, self.system.list_processes()), run_output_dir(state['spec'] or {}),
                                owner=(owner.uid, owner.gid))

    def _checkpoint_first(self, state, seconds):
        """The run's checkpoint signal to its verified supervisor (which records it in exit.json) and to every process
        group of its tree (torchrun ignores it, the ranks checkpoint), as the run's owner; then wait up to ``seconds``
        for a checkpoint.json newer than the signal. ``{signal, sent_at, written, waited_s}``, or None when the run
        has no checkpoint signal."""
        sig = _supervisor.checkpoint_signal(state['spec'] or {})
        if sig is None:
            return None
        verified = state['verified']
        sender = signaller(self.system, verified.owner)
        sent_at = time.time()
        started = self.system.monotonic()
        processes = self.system.list_processes()
        tree = self._targets(state, processes)
        sup = verified.supervisor
        if sup is not None and is_alive(processes.get(sup.pid), sup.start_time):
            sender.kill(sup.pid, sig)
        first_group = verified.torchrun.pgid if verified.torchrun is not None else None
        self._signal(sender, tree, sig, self._protected_pgids(state), first_group=first_group)
        out_dir = run_output_dir(state['spec'] or {})
        written = False
        while not written and self.system.monotonic() - started < seconds:
            self.system.sleep(POLL)
            written = checkpoint_written_since(out_dir, sent_at)
        return {'signal': _proc.signal_name(sig), 'sent_at': sent_at, 'written': written,
                'waited_s': round(self.system.monotonic() - started, 3)}

    @staticmethod
    def _targets(state, processes):
        """Live processes of the run's tree in the snapshot ``processes``: all descendants of its verified
        supervisor, or (supervisor gone) its verified torchrun and torchrun's descendants; never a process the
        records name that was not verified (see _run_records)."""
        sup, torchrun = state['verified'].supervisor, state['verified'].torchrun
        if sup is not None and is_alive(processes.get(sup.pid), sup.start_time):
            return descendants(processes, sup.pid)
        if torchrun is not None and is_alive(processes.get(torchrun.pid), torchrun.start_time):
            tree = descendants(processes, torchrun.pid)
            tree[torchrun.pid] = processes[torchrun.pid]
            return tree
        return {}

    def _protected_pgids(self, state):
        protected = set([0, 1, self.system.own_pgid()])
        sup = state['verified'].supervisor
        if sup is not None:
            protected.update((sup.pid, sup.pgid))
        return protected

    @staticmethod
    def _signal(sender, tree, sig, protected, first_group=None):
        """Signal, with ``sender`` (see _run_records.signaller), the process group of every process in ``tree``
        (``first_group``, torchrun's, first); processes whose group is protected are signalled one by one."""
        groups = []
        if first_group is not None and first_group not in protected and any(i.pgid == first_group for i in tree.values()):
            groups.append(first_group)
        for info in sorted(tree.values()):
            if info.pgid in protected:
                sender.kill(info.pid, sig)
            elif info.pgid not in groups:
                groups.append(info.pgid)
        for pgid in groups:
            sender.killpg(pgid, sig)

    def _terminate(self, state, stop_timeout, check_mode):
        """SIGTERM the run's process tree (and SIGCONT to a process stopped by a signal), SIGKILL what is left after
        ``stop_timeout``, wait for the supervisor.

        Returns ``(stopped_pids, killed_pids, warnings)``; in check mode nothing is signalled and
        ``stopped_pids`` lists what would be stopped.
        """
        processes = self.system.list_processes()
        tree = self._targets(state, processes)
        if check_mode:
            return sorted(tree), [], []
        verified = state['verified']
        sender = signaller(self.system, verified.owner)
        first_group = verified.torchrun.pgid if verified.torchrun is not None else None
        protected = self._protected_pgids(state)
        seen = dict((pid, info.start_time) for pid, info in tree.items())
        self._signal(sender, tree, signal.SIGTERM, protected, first_group=first_group)
        # a process stopped by a signal (a frozen rank, state T) acts on SIGTERM only once continued (as systemd does)
        frozen = dict((pid, info) for pid, info in tree.items() if info.state in _heartbeat.STOPPED_STATES)
        if frozen:
            self._signal(sender, frozen, signal.SIGCONT, protected)

        deadline = self.system.monotonic() + stop_timeout
        while True:
            processes = self.system.list_processes()
            for pid, info in self._targets(state, processes).items():
                seen.setdefault(pid, info.start_time)
            remaining = dict((pid, processes[pid]) for pid, start in seen.items() if is_alive(processes.get(pid), start))
            if not remaining or self.system.monotonic() >= deadline:
                break
            self.system.sleep(POLL)

        killed = []
        if remaining:
            tree = self._targets(state, processes)
            tree.update(remaining)
            killed = sorted(tree)
            self._signal(sender, tree, signal.SIGKILL, protected, first_group=first_group)
            deadline = self.system.monotonic() + KILL_WAIT
            while True:
                processes = self.system.list_processes()
                for pid, info in self._targets(state, processes).items():
                    if pid not in seen:
                        seen[pid] = info.start_time
                        sender.kill(pid, signal.SIGKILL)
                remaining = dict((pid, processes[pid]) for pid, start in seen.items() if is_alive(processes.get(pid), start))
                if not remaining or self.system.monotonic() >= deadline:
                    break
                self.system.sleep(POLL)

        warnings = []
        if remaining:
            warnings.append('Processes %s of run %s are still alive after SIGKILL' % (sorted(remaining), state['run_id']))

        # let the supervisor reap, clean up and write exit.json
        sup = verified.supervisor
        if sup is not None:
            deadline = self.system.monotonic() + CLEANUP_GRACE + SUPERVISOR_EXIT_WAIT
            while True:
                if read_json(state['paths']['exit']) is not None:
                    break
                if not is_alive(self.system.read_proc_stat(sup.pid), sup.start_time):
                    break
                if self.system.monotonic() >= deadline:
                    warnings.append('The supervisor (pid %d) of run %s did not write exit.json in time' % (sup.pid, state['run_id']))
                    break
                self.system.sleep(POLL)
        stopped = sorted(pid for pid in seen if pid not in remaining)
        return stopped, killed, warnings


def query_result(node, run_id, log_lines, metrics_records=0, dump_stacks=False, wait_for_change=0.0):
    """What ``state=query`` returns (the module's, and every line of the node's watcher, _node_watch.py): the run's
    ``job`` and ``log_tail``; ``step_times`` with ``metrics_records``; ``stacks`` with ``dump_stacks``."""
    stacks = node.dump_stacks(run_id) if dump_stacks else None
    result = node.query(run_id, log_lines=log_lines, wait_for_change=wait_for_change)
    if dump_stacks:
        result['stacks'] = stacks
    if metrics_records > 0:
        result['step_times'] = recent_step_times(result['job'], metrics_records)
    return result


def run_module(params, check_mode=False, system=None):
    """Entry point used by the module: dispatch on ``params['state']`` and return the result dict."""
    try:
        state_dir = node_state_dir(params['state_dir'], params.get('node_id'))
    except NodeIdentityError as exc:
        raise TorchrunError(str(exc))
    node = TorchrunNode(state_dir, system=system)
    state = params.get('state') or 'started'
    log_lines = params.get('log_lines')
    log_lines = 20 if log_lines is None else max(0, log_lines)
    if state in ('started', 'prepared'):
        result = node.start(dict(params, log_lines=log_lines), check_mode=check_mode, spawn=state == 'started')
        if state == 'prepared':
            # an absolute interpreter: the launcher's task may have its own environment only (the PATH is job.json's)
            result['step_command'] = {'python': sys.executable,
                                      'supervisor': result['job']['run_dir'] and os.path.join(result['job']['run_dir'], 'supervisor.py'),
                                      'job': result['job']['run_dir'] and os.path.join(result['job']['run_dir'], 'job.json')}
        return result
    if state == 'stopped':
        stop_timeout = params.get('stop_timeout')
        stop_timeout = 15 if stop_timeout is None else stop_timeout
        if stop_timeout < 0:
            raise TorchrunError('stop_timeout must be >= 0')
        return node.stop(params.get('run_id'), stop_timeout=stop_timeout, log_lines=log_lines, check_mode=check_mode,
                         reason=params.get('stop_reason'), detail=params.get('stop_detail'),
                         checkpoint_seconds=max(0, params.get('checkpoint_seconds') or 0),
                         signal_tree=params.get('signal') is not False, dump_stacks=bool(params.get('dump_stacks')))
    if state == 'query':
        return query_result(node, params.get('run_id'), log_lines, params.get('metrics_records') or 0,
                            dump_stacks=bool(params.get('dump_stacks')), wait_for_change=params.get('wait_for_change'))
    raise TorchrunError('Unsupported state %r' % (state, ))
