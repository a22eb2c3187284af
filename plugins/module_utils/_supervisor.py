# -*- coding: utf-8 -*-

# Copyright (c) 2025, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Supervisor for one torchrun: the program the trainops.multinode.torchrun module starts on a node.

Usage on the node: ``python supervisor.py [--foreground] /path/to/runs/<run_id>/job.json``. With
``--foreground`` (a Slurm step's task, launcher=srun) it does not fork and exits with torchrun's exit code,
so that ``srun --kill-on-bad-exit`` sees a failed node. It

- detaches (fork, the first process exits at once),
- becomes a child subreaper so orphaned workers are re-parented to it,
- starts torchrun in a new session with stdout+stderr appended to node.log,
- records pids.json (its own and torchrun's pid, pgid, /proc start time, and in a Slurm step the step it
  runs in: ``slurm`` {job_id, step_id, node, task}) atomically,
- waits for torchrun, and meanwhile samples every rank (module_utils/_heartbeat.py: its /proc state, CPU time and
  last metrics step, every job.json ``heartbeat_interval`` seconds; 0 turns it off) into
  ``trainops_heartbeat.json`` in the run's output directory,
- then terminates and reaps whatever is left of the process tree,
- writes exit.json {exit_code, signal, ended_at, signals, checkpoint_signals} and exits (``signals``: the
  signals the supervisor itself received, e.g. a SIGTERM from slurmstepd; ``checkpoint_signals``: when it
  received the run's checkpoint signal). ``exit_code`` and ``signal`` are torchrun's, or the dead rank's when
  torchrun ended badly after a rank died (the node's watcher's record, :data:`RANK_FAILURE_FILE`, or torchrun's own
  line in node.log, :data:`RANK_FAILURE_LINE`; :func:`rank_end`).

The checkpoint signal (job.json's env ``TRAINOPS_CHECKPOINT_SIGNAL``: ``USR1`` or ``USR2``, docs/slurm.md) is
the one Slurm sends before a time limit (``--signal=USR1@90``) to every process of a step or job, the
supervisor and torchrun included, whose default action would kill them. The supervisor records it and lives
on; torchrun starts with it ignored (SIG_IGN survives exec, and Python keeps an ignored signal it installs no
handler for), and so do the ranks it starts, until the training script installs its own handler (the shipped
workload checkpoints at its next step). Nothing is forwarded: Slurm signals the ranks themselves.

How it reaches the node: the torchrun module imports this file (so AnsiballZ packs it), and writes it
into the run directory as ``supervisor.py`` together with ``_proc.py`` and ``_files.py``, which it
imports from there (see :data:`SHIPPED_WITH`). The run directory is the one place the supervisor
surely sees, on the node and inside a training container (roles/container mounts the node's trainops
directory at the same path), and a copy per run means a running job never picks up a newer collection's
helpers. Only the standard library is imported besides those two files.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import time
import traceback

try:
    if not __package__:
        # run as a program (``python supervisor.py``): use the helpers shipped next to it in the run
        # directory, never a collection that happens to be installed on the node
        raise ImportError('run as a program')
    from ansible_collections.trainops.multinode.plugins.module_utils._files import write_json_atomic
    from ansible_collections.trainops.multinode.plugins.module_utils._proc import (
        System,
        descendants,
        signal_name,
    )
    from ansible_collections.trainops.multinode.plugins.module_utils._heartbeat import (
        HEARTBEAT_FILE, INTERVAL_S, Recorder, last_step, metrics_files, rank_processes, read_environ)
except ImportError:
    from _files import write_json_atomic  # pylint: disable=import-error
    from _proc import System, descendants, signal_name  # pylint: disable=import-error
    from _heartbeat import (  # pylint: disable=import-error
        HEARTBEAT_FILE, INTERVAL_S, Recorder, last_step, metrics_files, rank_processes, read_environ)

SHIPPED_WITH = ('_proc.py', '_files.py', '_heartbeat.py')
"""The module_utils files the supervisor imports on the node, written next to it in the run directory."""

PR_SET_CHILD_SUBREAPER = 36
DEFAULT_CLEANUP_GRACE = 5
"""Seconds leftover processes get between SIGTERM and SIGKILL once torchrun ended (job.json's ``cleanup_grace``)."""
KILL_WAIT = 5
"""Seconds to wait for processes to vanish after SIGKILL."""
WAIT_POLL = 0.2
"""Seconds between two looks for torchrun's end while the heartbeat samples the ranks."""
EXIT_NOT_STARTED = 143
"""exit.json's exit code when the run was stopped before torchrun started (as if torchrun got SIGTERM)."""
EXIT_CANNOT_START = 127
"""exit.json's exit code when torchrun could not be started (as a shell says for a missing command)."""
EXIT_UNKNOWN = 255
"""exit.json's exit code when torchrun's status could not be read."""
CHECKPOINT_SIGNAL_ENV = 'TRAINOPS_CHECKPOINT_SIGNAL'
"""The variable of job.json's env that names the run's checkpoint signal (the ranks read it too)."""
CHECKPOINT_SIGNALS = ('SIGUSR1', 'SIGUSR2')
"""The signals a run may take as its checkpoint signal: never one that stops a run (TERM, INT, HUP) or that
the kernel or the supervisor's own wait needs (KILL, STOP, CHLD)."""
CHECKPOINT_SIGNAL_NAMES = tuple(name[len('SIG'):] for name in CHECKPOINT_SIGNALS)
"""The same as ``trainops_checkpoint_signal`` and ``scancel --signal`` write them (``USR1``, ``USR2``)."""


RANK_LOG_PREFIX = '[rank ${rank}] '
"""The prefix of every line a rank writes, in node.log (torchrun's ``TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE``:
``${rank}`` is the global rank). module_utils/_rank_logs.py splits a node's log by it."""
RANK_LOG_DIR = 'ranks'
"""torchrun's ``--log-dir`` below the run directory: its own per-rank stdout.log/stderr.log
(``<rdzv id>_<random>/attempt_<n>/<local rank>/``)."""


def rank_log_environment(run_dir, env):
    """What torchrun is given so that each rank's lines reach node.log with a rank prefix: ``--tee 3`` (stdout and
    stderr of every rank, to torchrun's own output and to a file) and ``--log-dir <run_dir>/ranks`` as torchrun's
    ``PET_*`` variables, and :data:`RANK_LOG_PREFIX`. A variable the launch's env already sets is left as it is.

    ``PYTHONUNBUFFERED=1`` too: torchrun copies the ranks' lines to its own stdout (node.log, a file) without flushing
    (torch/distributed/elastic/multiprocessing/tail_log.py), so a buffered torchrun held every progress line back
    until 8 KiB had gathered or the job ended; the ranks inherit it, and their lines reach their files as printed."""
    wanted = {'PET_TEE': '3', 'PET_LOG_DIR': os.path.join(run_dir, RANK_LOG_DIR),
              'TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE': RANK_LOG_PREFIX, 'PYTHONUNBUFFERED': '1'}
    return dict((name, value) for name, value in wanted.items() if name not in env)


def iso(epoch):
    """ISO 8601 UTC time, seconds precision."""
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(epoch))


def log(msg):
    """One line of supervisor.log (the supervisor's stdout)."""
    sys.stdout.write('%s supervisor[%d]: %s\n' % (iso(time.time()), os.getpid(), msg))
    sys.stdout.flush()


def become_subreaper():
    """Orphaned workers are re-parented to this process instead of init, so their tree can be cleaned up."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            log('prctl(PR_SET_CHILD_SUBREAPER) failed: errno %d' % ctypes.get_errno())
    except (OSError, AttributeError) as exc:
        log('cannot become a child subreaper: %s' % exc)


def reap():
    """Reap every exited child without blocking; return ``{pid: wait status}``."""
    reaped = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        reaped[pid] = status
    return reaped


def send(signaller, target, sig):
    """``signaller(target, sig)``, ignoring a process or group that is gone or may not be signalled: the
    supervisor must go on to write exit.json whatever happens to one signal."""
    try:
        signaller(target, sig)
    except OSError:
        pass


def signal_tree(system, tree, sig):
    """Signal the process group of every process in ``tree``; a process in a group that must not be
    signalled (none, init's, the supervisor's own) is signalled alone."""
    protected = set([0, 1, system.own_pgid()])
    groups = set()
    for info in tree.values():
        if info.pgid in protected:
            send(system.kill, info.pid, sig)
        else:
            groups.add(info.pgid)
    for pgid in sorted(groups):
        send(system.killpg, pgid, sig)


def leftovers(system):
    """The live processes below the supervisor (torchrun already reaped)."""
    return descendants(system.list_processes(), os.getpid())


def wait_until_gone(system, seconds):
    """Reap until no process is left below the supervisor or ``seconds`` passed; return what is left."""
    deadline = system.monotonic() + seconds
    while True:
        reap()
        tree = leftovers(system)
        if not tree or system.monotonic() >= deadline:
            return tree
        system.sleep(0.1)


def cleanup(system, grace):
    """SIGTERM what is left of the process tree, SIGKILL it after ``grace`` seconds, reap everything."""
    tree = leftovers(system)
    if tree:
        log('terminating leftover processes %s' % sorted(tree))
        signal_tree(system, tree, signal.SIGTERM)
        tree = wait_until_gone(system, grace)
        if tree:
            log('killing leftover processes %s' % sorted(tree))
            signal_tree(system, tree, signal.SIGKILL)
            wait_until_gone(system, KILL_WAIT)
    reap()


def decode_status(status):
    """``(exit_code, signal name)`` for a wait status; a signal gives exit code 128 + its number, as a shell does."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return 128 + sig, signal_name(sig)
    return os.WEXITSTATUS(status), None


# --- the ranks' environment (one rule for every launcher) -----------------------------------------
#
# A supervisor that the torchrun module starts on the node (launcher=ssh) runs in the node's login session (the
# environment the preflight checked) and torchrun inherits it. One that a launcher starts elsewhere (a Slurm step's
# task, launcher=srun) may have only what that launcher set: its job.json then records the login session's
# environment (``login_env``, the run record, 0600) and which variables come from where the task runs instead
# (``task_env``: ``{prefixes, names}``); the launcher decides both (plugins/module_utils/_launchers.py), and
# :func:`rank_environment` rebuilds what torchrun gets.

VISIBLE_DEVICE_NAMES = ('CUDA_VISIBLE_DEVICES', 'ROCR_VISIBLE_DEVICES', 'HIP_VISIBLE_DEVICES', 'GPU_DEVICE_ORDINAL',
                        'ZE_AFFINITY_MASK')
"""The variables that say which accelerators the ranks may use (pids.json ``placement``)."""
SECRET_NAME_PARTS = ('TOKEN', 'SECRET', 'PASSW', 'KEY', 'CREDENTIAL', 'AUTH', 'COOKIE')
"""A login variable whose name contains one of these (any case) looks like a secret: its value is never written to
job.json. Its name is (``login_env_omitted``), and the ranks whose supervisor a launcher starts do not get it: name
it in trainops_secret_env to pass it (by name, from the controller's environment)."""


def looks_secret(name):
    """Whether a variable's name looks like a secret's (see :data:`SECRET_NAME_PARTS`)."""
    upper = name.upper()
    return any(part in upper for part in SECRET_NAME_PARTS)


def task_owned(job, name):
    """Whether the variable ``name`` comes from where the task runs (job.json ``task_env``), not from ``login_env``."""
    owned = job.get('task_env') or {}
    return name.startswith(tuple(owned.get('prefixes') or ())) or name in (owned.get('names') or ())


def rank_environment(job, environ):
    """The environment torchrun (and every rank) gets, for the job.json ``job``, from the supervisor's ``environ``.

    Without ``login_env`` (the torchrun module started the supervisor): the supervisor's own (the login session's,
    with the secrets the module added). With it (a launcher started the supervisor, e.g. a Slurm step's task): the
    recorded login environment, then what the launcher set where the task runs (:func:`task_owned`: a step's
    SLURM_* and the GPUs it gave the node, CUDA_VISIBLE_DEVICES, ...), then the secrets exported by name (``srun
    --export=NAME``). Then, in both, the launch's own ``env`` (NCCL_*, ...), which names no secret."""
    login = job.get('login_env')
    if isinstance(login, dict):
        env = dict(login)
        env.update((name, value) for name, value in environ.items() if task_owned(job, name))
        env.update((name, environ[name]) for name in job.get('secret_env_names') or () if name in environ)
    else:
        env = dict(environ)
    env.update(job.get('env') or {})
    return env


def cpu_list(cpus):
    """``[0, 1, 2, 5]`` -> ``'0-2,5'`` (as /proc/self/status's Cpus_allowed_list writes it)."""
    ranges = []
    for cpu in sorted(cpus):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ','.join(str(a) if a == b else '%d-%d' % (a, b) for a, b in ranges)


def placement(environ):
    """What the ranks may use on the node, as the supervisor sees it (torchrun and its ranks inherit its CPU mask):
    ``{'cpus': '0-63', 'cpu_count': 64, 'visible_devices': {'CUDA_VISIBLE_DEVICES': '0,1'}}``."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = []
    return {'cpus': cpu_list(cpus) if cpus else None, 'cpu_count': len(cpus) or None,
            'visible_devices': dict((name, environ[name]) for name in VISIBLE_DEVICE_NAMES if name in environ)}


def launcher_record(job, environ):
    """``{key: {field: value}}`` for pids.json: what the launcher that started this supervisor (job.json
    ``launcher_pids``: ``{key, vars: [[field, VARIABLE]], required: [VARIABLE]}``) has it record of where it runs,
    from ``environ`` (a Slurm step's ``slurm``: its job, step, node and task); ``{key: None}`` when a required variable
    is not set, ``{}`` for a launcher that records nothing."""
    record = job.get('launcher_pids')
    if not isinstance(record, dict) or not record.get('key'):
        return {}
    if any(not environ.get(name) for name in record.get('required') or ()):
        return {record['key']: None}
    return {record['key']: dict((field, environ.get(name)) for field, name in record.get('vars') or ())}


def checkpoint_signal(job):
    """The run's checkpoint signal (job.json's env ``TRAINOPS_CHECKPOINT_SIGNAL``: ``USR1``, ``SIGUSR2``), None when
    none is set or the name is not one of :data:`CHECKPOINT_SIGNALS`."""
    name = str((job.get('env') or {}).get(CHECKPOINT_SIGNAL_ENV) or '').strip().upper()
    if name and not name.startswith('SIG'):
        name = 'SIG' + name
    return getattr(signal, name) if name in CHECKPOINT_SIGNALS else None


def output_dir(job, run_dir):
    """The run's output directory: ``TRAINOPS_OUTPUT_DIR`` of job.json's env, else ``<run_dir>/outputs``."""
    out_dir = (job.get('env') or {}).get('TRAINOPS_OUTPUT_DIR')
    return out_dir if isinstance(out_dir, str) and out_dir else os.path.join(run_dir, 'outputs')


RANK_FAILURE_LINE = re.compile(rb'\] failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\) of (?:binary|fn)')
"""The line torchrun's agent logs as soon as it sees a rank fail (torch/distributed/elastic/multiprocessing/api.py),
long before torchrun ends: its shutdown may wait seconds for a store that a lost network no longer reaches."""
LOG_SCAN_BYTES = 65536
"""The most of node.log's end looked through for that line once torchrun ended badly."""
RANK_FAILURE_FILE = 'rank_failure.json'
"""The node's watcher's record of the rank whose death torchrun logged (module_utils/_node_watch.py), written in the
run directory before the watcher ends the run's process tree: ``{exitcode, local_rank, pid, seen_at_epoch}``
(``exitcode`` as torchrun logs it: negative for a signal)."""
RANK_FAILURE_MAX_BYTES = 4096
"""The most bytes of that record read (the job's user can write it)."""
MAX_WHOLE = 2 ** 31
"""The largest pid or local rank the record may name."""


def _whole(value, low, high):
    """``value`` when it is an int (not a bool) within ``[low, high]``, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high else None


def rank_failure_record(data):
    """The rank failure of a record's parsed JSON ``data``, its fields checked: ``{exitcode, local_rank, pid,
    seen_at_epoch}`` (``exitcode`` not 0, from -255 to 255; ``seen_at_epoch`` a number or None), None when ``data`` is
    not one."""
    if not isinstance(data, dict):
        return None
    found = {'exitcode': _whole(data.get('exitcode'), -255, 255), 'local_rank': _whole(data.get('local_rank'), 0, MAX_WHOLE),
             'pid': _whole(data.get('pid'), 1, MAX_WHOLE)}
    if None in found.values() or found['exitcode'] == 0:
        return None
    seen = data.get('seen_at_epoch')
    found['seen_at_epoch'] = float(seen) if isinstance(seen, (int, float)) and not isinstance(seen, bool) and 0 <= seen < 1e11 else None
    return found


def read_rank_failure(path):
    """:func:`rank_failure_record` of the file ``path`` (at most RANK_FAILURE_MAX_BYTES, never through a symlink), None
    when there is none or it is not one."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NOFOLLOW', 0) | getattr(os, 'O_NONBLOCK', 0))
    except OSError:
        return None
    try:
        data = os.read(fd, RANK_FAILURE_MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > RANK_FAILURE_MAX_BYTES:
        return None
    try:
        return rank_failure_record(json.loads(data.decode('utf-8')))
    except ValueError:
        return None


def logged_rank_failure(data):
    """``{exitcode, local_rank, pid, seen_at_epoch: None}`` of the last rank failure torchrun logged in ``data`` (bytes,
    :data:`RANK_FAILURE_LINE`), None when it logged none (or one :func:`rank_failure_record` refuses)."""
    found = None
    for match in RANK_FAILURE_LINE.finditer(data):
        found = match
    if found is None:
        return None
    return rank_failure_record({'exitcode': int(found.group(1)), 'local_rank': int(found.group(2)),
                                'pid': int(found.group(3))})


def read_logged_rank_failure(path, max_bytes=LOG_SCAN_BYTES):
    """:func:`logged_rank_failure` of the last ``max_bytes`` of the log ``path`` (None when it cannot be read)."""
    try:
        with open(path, 'rb') as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - max_bytes))
            return logged_rank_failure(handle.read(max_bytes))
    except OSError:
        return None


def rank_end(exit_code, signame, failure):
    """The dead rank's end that exit.json says instead of torchrun's (``exit_code``, ``signame``): ``(exit_code,
    signal name)`` of the rank failure ``failure`` (:func:`rank_failure_record`: the node's watcher's record, or
    torchrun's own line in node.log; 128 + the signal's number and its name for a rank killed by a signal). The rank's
    death is the cause: torchrun exits 1 for any of them, and a torchrun that the watcher ended for it dies of the
    watcher's SIGTERM or SIGKILL. So the outcome says the same whoever ended torchrun. None when there is no such
    failure, or torchrun exited 0 (its ranks restarted and finished)."""
    if failure is None or (exit_code == 0 and not signame):
        return None
    code = failure['exitcode']
    if code < 0:
        return 128 - code, signal_name(-code)
    return code, None


def write_exit(path, exit_code, signame=None, error=None, signals=(), checkpoint_signals=(), failure=None):
    """exit.json: how the run ended (or why it never ran), the signals the supervisor received, and when it
    received the checkpoint signal (``[{signal, at, at_epoch}]``). With a rank's death (``failure``) and a torchrun
    that did not exit 0, ``exit_code`` and ``signal`` are the rank's (:func:`rank_end`), the failure is kept as
    ``rank_failure`` and torchrun's own end as ``torchrun`` (``{exit_code, signal}``)."""
    ended = time.time()
    rank = rank_end(exit_code, signame, failure)
    code, name = rank or (exit_code, signame)
    record = {'exit_code': code, 'signal': name, 'ended_at': iso(ended), 'ended_at_epoch': ended,
              'signals': [signal_name(sig) for sig in signals], 'checkpoint_signals': list(checkpoint_signals)}
    if rank is not None:
        record['rank_failure'] = failure
        record['torchrun'] = {'exit_code': exit_code, 'signal': signame}
    if error is not None:
        record['error'] = error
    write_json_atomic(path, record)


class Supervisor(object):
    """One run: the paths of its run directory, its job.json, torchrun's process once started."""

    def __init__(self, job_path, system=None):
        self.system = system or System()
        self.run_dir = os.path.dirname(os.path.abspath(job_path))
        with open(job_path) as f:
            self.job = json.load(f)
        self.pids_path = os.path.join(self.run_dir, 'pids.json')
        self.exit_path = os.path.join(self.run_dir, 'exit.json')
        self.log_path = os.path.join(self.run_dir, 'node.log')
        self.stop_path = os.path.join(self.run_dir, 'stop.json')
        self.grace = float(self.job.get('cleanup_grace', DEFAULT_CLEANUP_GRACE))
        self.proc = None
        self.signals = []
        self.checkpoint_signal = checkpoint_signal(self.job)
        self.checkpoint_signals = []
        self.torchrun_env = {}  # the environment torchrun was started with (start_torchrun)
        interval = self.job.get('heartbeat_interval', INTERVAL_S)
        self.heartbeat = Recorder(interval) if isinstance(interval, (int, float)) and interval > 0 else None
        self.heartbeat_failed = False
        self.environs = {}  # {pid: its RANK and TORCHELASTIC_RUN_ID} of the processes below the supervisor (beat)

    def stopped_before_start(self):
        """The start was given up (the module's start wait ran out, the launch was undone): never start late."""
        return os.path.exists(self.stop_path)

    def on_signal(self, signum, frame):  # pylint: disable=unused-argument
        """SIGTERM/SIGINT/SIGHUP to the supervisor: pass a SIGTERM on to torchrun's process group."""
        self.signals.append(signum)
        if self.proc is not None:
            log('got signal %d, sending SIGTERM to torchrun process group %d' % (signum, self.proc.pid))
            send(self.system.killpg, self.proc.pid, signal.SIGTERM)

    def on_checkpoint_signal(self, signum, frame):  # pylint: disable=unused-argument
        """The run's checkpoint signal (Slurm's ``--signal=USR1@N``): recorded, nothing else. Slurm sends it to every
        process of the step or job, so the ranks got it too; torchrun ignores it (:meth:`torchrun_signals`)."""
        now = time.time()
        self.checkpoint_signals.append({'signal': signal_name(signum), 'at': iso(now), 'at_epoch': now})
        log('got %s, the run\'s checkpoint signal: torchrun ignores it, the ranks checkpoint if their script handles it'
            % signal_name(signum))

    def torchrun_signals(self):
        """In torchrun's process, before exec: the checkpoint signal ignored. SIG_IGN survives exec, torchrun (Python)
        installs no handler for it, and the ranks it starts inherit it until their script installs one."""
        if self.checkpoint_signal is not None:
            signal.signal(self.checkpoint_signal, signal.SIG_IGN)

    def start_torchrun(self, job_umask):
        """Start torchrun in a new session, output appended to node.log, with the umask the supervisor came with."""
        env = self.torchrun_env = rank_environment(self.job, os.environ)
        env.update(rank_log_environment(self.run_dir, env))
        if self.job.get('login_env_omitted'):
            log('not passed on from the login environment (the names look like secrets; name them in '
                'trainops_secret_env): %s' % ', '.join(self.job['login_env_omitted']))
        cwd = self.job.get('chdir') or self.run_dir
        log('starting %r in %s' % (self.job['argv'], cwd))
        with open(os.devnull, 'rb') as devnull:
            with open(self.log_path, 'ab') as out:
                os.umask(job_umask)
                try:
                    return subprocess.Popen(self.job['argv'], cwd=cwd, env=env, stdin=devnull, stdout=out,
                                            stderr=subprocess.STDOUT, close_fds=True, start_new_session=True,
                                            preexec_fn=self.torchrun_signals)
                finally:
                    os.umask(0o077)

    def record_pids(self):
        """pids.json: the supervisor's and torchrun's pid, process group and /proc start time, and what the launcher
        has it record of where it runs (:func:`launcher_record`, e.g. a Slurm step), so that stop and status find
        that from the node's records."""
        started = time.time()
        mine = self.system.read_proc_stat(os.getpid())
        child = self.system.read_proc_stat(self.proc.pid)
        where = placement(self.torchrun_env)
        pids = launcher_record(self.job, os.environ)
        pids.update({
            'placement': where,
            'supervisor_pid': os.getpid(),
            'supervisor_start_time': mine.start_time if mine else None,
            'pid': self.proc.pid,
            'pgid': child.pgid if child else self.proc.pid,
            'start_time': child.start_time if child else None,
            'started_at': iso(started),
            'started_at_epoch': started,
        })
        write_json_atomic(self.pids_path, pids)
        log('torchrun pid %d; cpus %s (%s); %s' % (
            self.proc.pid, where['cpus'], where['cpu_count'],
            ', '.join('%s=%s' % item for item in sorted(where['visible_devices'].items())) or 'no visible-devices variable'))

    def wait_torchrun(self):
        """Reap children (orphaned workers too) until torchrun itself ends; its wait status, None if it vanished. With
        a heartbeat, the ranks are sampled every interval meanwhile (:meth:`beat`)."""
        if self.heartbeat is None:
            while True:
                try:
                    pid, wstatus = os.waitpid(-1, 0)
                except ChildProcessError:
                    return None
                if pid == self.proc.pid:
                    return wstatus
        next_beat = self.system.monotonic()
        while True:
            try:
                pid, wstatus = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return None
            if pid == self.proc.pid:
                return wstatus
            if pid:
                continue  # an orphaned worker reaped: look again at once
            if self.system.monotonic() >= next_beat:
                self.beat()
                next_beat = self.system.monotonic() + self.heartbeat.interval
            self.system.sleep(min(WAIT_POLL, self.heartbeat.interval))

    def beat(self):
        """One sample of every rank (module_utils/_heartbeat.py), written to the run's output directory when it exists
        (the ranks create it); a failure to sample or write is logged once and never stops the wait."""
        out_dir = output_dir(self.job, self.run_dir)
        try:
            tree = leftovers(self.system)
            # a rank's environment does not change: read once per rank (another process is read again: between its
            # fork and its exec, a rank has torchrun's environment)
            self.environs = dict((pid, self.environs[pid] if 'RANK' in self.environs.get(pid, {}) else read_environ(pid))
                                 for pid in tree)
            ranks = rank_processes(tree, self.environs.get)
            now = self.system.time()
            metrics = metrics_files(out_dir) if ranks else {}
            self.heartbeat.sample(ranks, now, step_of=lambda rank: last_step(metrics.get(rank)))
            if self.heartbeat.ranks and os.path.isdir(out_dir):
                write_json_atomic(os.path.join(out_dir, HEARTBEAT_FILE), self.heartbeat.record(now),
                                  indent=None, sync=False)
        except (IOError, OSError, ValueError) as exc:
            if not self.heartbeat_failed:
                log('heartbeat: %s' % exc)
            self.heartbeat_failed = True

    def run(self, foreground=False):
        """Start torchrun, wait for it, clean up its tree and write exit.json; the supervisor's exit status
        (torchrun's exit code in the foreground, a Slurm step's task)."""
        if self.stopped_before_start():
            msg = 'not starting: the run was stopped before torchrun started (stop.json)'
            log(msg)
            write_exit(self.exit_path, EXIT_NOT_STARTED, error=msg, signals=self.signals,
                       checkpoint_signals=self.checkpoint_signals)
            return 0
        # the run's records and logs are the user's alone (0600); the ranks get the umask they came with
        job_umask = os.umask(0o077)
        try:
            self.proc = self.start_torchrun(job_umask)
        except (OSError, TypeError, ValueError, subprocess.SubprocessError) as exc:
            msg = 'cannot start %r: %s' % (self.job['argv'], exc)
            log(msg)
            write_exit(self.exit_path, EXIT_CANNOT_START, error=msg)
            return EXIT_CANNOT_START
        self.record_pids()
        if self.signals or self.stopped_before_start():
            send(self.system.killpg, self.proc.pid, signal.SIGTERM)
        status = self.wait_torchrun()
        # torchrun is reaped: its pid may be reused from now on, never signal it again
        self.proc = None
        exit_code, signame = (EXIT_UNKNOWN, None) if status is None else decode_status(status)
        log('torchrun ended: exit_code=%s signal=%s' % (exit_code, signame))
        cleanup(self.system, self.grace)
        # a rank died (the record of the watcher that ended torchrun for it, else torchrun's own line): exit.json says
        # the rank's death (rank_end)
        failure = (read_rank_failure(os.path.join(self.run_dir, RANK_FAILURE_FILE))
                   or read_logged_rank_failure(self.log_path))
        rank = rank_end(exit_code, signame, failure)
        if rank is not None:
            log('local rank %d (pid %d) failed (exitcode %d): exit.json says the rank\'s end' % (
                failure['local_rank'], failure['pid'], failure['exitcode']))
        write_exit(self.exit_path, exit_code, signame, signals=self.signals, checkpoint_signals=self.checkpoint_signals,
                   failure=failure)
        log('exit.json written')
        if not foreground:
            return 0
        if self.stopped_before_start():
            # a Slurm step's task stopped on request (stop.json): stay until the step's scancel ends the task, so
            # that Slurm accounts the step CANCELLED, not FAILED by this exit code (at most step_linger seconds)
            self.system.sleep(float(self.job.get('step_linger', 0)))
        return (rank or (exit_code, signame))[0]


def main(argv):
    """Supervise the run whose job.json is the last argument: detached (fork), or with ``--foreground`` in
    the calling process (a Slurm step's task)."""
    foreground = len(argv) > 2 and argv[1] == '--foreground'
    job_path = os.path.abspath(argv[-1])
    if not foreground and os.fork() > 0:
        os._exit(0)
    become_subreaper()
    supervisor = Supervisor(job_path)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, supervisor.on_signal)
    if supervisor.checkpoint_signal is not None:
        # before torchrun starts: Slurm's checkpoint signal must never find the supervisor with its default action
        signal.signal(supervisor.checkpoint_signal, supervisor.on_checkpoint_signal)
    return supervisor.run(foreground=foreground)


if __name__ == '__main__':
    try:
        CODE = main(sys.argv)
    except Exception:  # pylint: disable=broad-except
        log(traceback.format_exc())
        CODE = 1
    sys.stdout.flush()
    os._exit(CODE)
