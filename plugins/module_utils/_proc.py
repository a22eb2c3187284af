# -*- coding: utf-8 -*-

# Copyright (c) 2025, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Process helpers: every interaction with the operating system goes through :class:`System`.

Unit tests replace :class:`System` by a fake with the same methods; the pure helpers below
(:func:`parse_stat`, :func:`is_alive`, :func:`descendants`) only use what a ``System`` returns.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import pwd
import signal
import subprocess
import time
from collections import namedtuple

ProcInfo = namedtuple('ProcInfo', ['pid', 'ppid', 'pgid', 'state', 'start_time'])
"""One line of ``/proc/<pid>/stat``: pid, parent pid, process group, state letter, start time (clock ticks since boot)."""

DEAD_STATES = frozenset(('Z', 'X', 'x'))


def parse_stat(pid, data):
    """Parse the text of ``/proc/<pid>/stat``; return a :class:`ProcInfo` or ``None``.

    The command name (field 2) may contain blanks and parentheses, so the remaining fields are
    taken after the *last* closing parenthesis.
    """
    rpar = data.rfind(')')
    if rpar < 0:
        return None
    fields = data[rpar + 2:].split()
    try:
        # fields[0] is field 3 (state), [1] field 4 (ppid), [2] field 5 (pgrp), [19] field 22 (starttime)
        return ProcInfo(int(pid), int(fields[1]), int(fields[2]), fields[0], int(fields[19]))
    except (IndexError, ValueError):
        return None


def parse_cmdline(data):
    """The argv list of ``/proc/<pid>/cmdline`` (NUL separated, bytes); ``[]`` for a kernel thread or a zombie."""
    words = data.split(b'\0')
    if words and words[-1] == b'':
        words.pop()
    return [word.decode('utf-8', 'surrogateescape') for word in words]


def parse_real_uid(data):
    """The real uid (first value of the ``Uid:`` line) in the text of ``/proc/<pid>/status``, ``None`` if absent."""
    for line in data.splitlines():
        if line.startswith('Uid:'):
            values = line.split()[1:]
            try:
                return int(values[0])
            except (IndexError, ValueError):
                return None
    return None


def signal_name(signum):
    """Return ``SIGTERM`` style names for signal numbers, ``None`` for ``None``."""
    if signum is None:
        return None
    try:
        return signal.Signals(signum).name
    except ValueError:
        return 'SIG%d' % signum


class System(object):
    """The single gateway to the operating system (processes, /proc, clocks, locks).

    Everything that spawns, signals, inspects processes or sleeps lives here so that unit tests can
    substitute a fake implementation.
    """

    proc_root = '/proc'

    # --- clocks -------------------------------------------------------------------------------
    def time(self):
        """Wall clock, seconds since the epoch."""
        return time.time()

    def monotonic(self):
        """Monotonic clock for deadlines."""
        return time.monotonic()

    def sleep(self, seconds):
        """Sleep for ``seconds``."""
        time.sleep(seconds)

    # --- /proc --------------------------------------------------------------------------------
    def read_proc_stat(self, pid):
        """Return the :class:`ProcInfo` of ``pid`` or ``None`` when there is no such process."""
        try:
            with open(os.path.join(self.proc_root, str(int(pid)), 'stat'), 'rb') as f:
                data = f.read()
        except (IOError, OSError):
            return None
        return parse_stat(pid, data.decode('utf-8', 'replace'))

    def _read_proc(self, pid, name):
        try:
            with open(os.path.join(self.proc_root, str(int(pid)), name), 'rb') as f:
                return f.read()
        except (IOError, OSError, ValueError):
            return None

    def read_proc_cmdline(self, pid):
        """The argv of ``pid`` as the kernel shows it, ``None`` when there is no such process."""
        data = self._read_proc(pid, 'cmdline')
        return None if data is None else parse_cmdline(data)

    def read_proc_uid(self, pid):
        """The real uid of ``pid``, ``None`` when there is no such process."""
        data = self._read_proc(pid, 'status')
        return None if data is None else parse_real_uid(data.decode('utf-8', 'replace'))

    def list_processes(self):
        """Return ``{pid: ProcInfo}`` for every process visible in /proc."""
        result = {}
        try:
            names = os.listdir(self.proc_root)
        except OSError:
            return result
        for name in names:
            if not name.isdigit():
                continue
            info = self.read_proc_stat(int(name))
            if info is not None:
                result[info.pid] = info
        return result

    def own_pgid(self):
        """Process group of the calling process (never signalled)."""
        return os.getpgrp()

    # --- users --------------------------------------------------------------------------------
    def euid(self):
        """Effective uid of the calling process (0: root, which signals as a run's owner, see :meth:`as_user`)."""
        return os.geteuid()

    def lstat(self, path):
        """``os.lstat``: the owner of a path itself, never of what a symlink points to."""
        return os.lstat(path)

    def as_user(self, uid, gid):
        """Something with this class's ``kill``/``killpg`` that signals with ``uid``'s rights only
        (:class:`UserSignals`): root signals a run's processes as the run's owner."""
        return UserSignals(uid, gid)

    # --- signals ------------------------------------------------------------------------------
    def kill(self, pid, sig):
        """Send ``sig`` to ``pid``; return False when the process does not exist (any more)."""
        try:
            os.kill(pid, sig)
        except OSError as exc:
            if exc.errno == errno.ESRCH:
                return False
            raise
        return True

    def killpg(self, pgid, sig):
        """Send ``sig`` to process group ``pgid``; return False when the group does not exist."""
        try:
            os.killpg(pgid, sig)
        except OSError as exc:
            if exc.errno == errno.ESRCH:
                return False
            raise
        return True

    # --- spawning -----------------------------------------------------------------------------
    def spawn_detached(self, argv, cwd, output_path, wait_timeout=30, env=None):
        """Start ``argv`` in a new session, stdin from /dev/null, stdout+stderr appended to ``output_path``
        (created 0600), with environment ``env`` (default: this process's).

        The started program is expected to detach itself (fork and let the first process exit), so this
        waits at most ``wait_timeout`` seconds for the first process and returns its exit status
        (``None`` if it did not exit in time).
        """
        with open(os.devnull, 'rb') as devnull:
            with os.fdopen(os.open(output_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), 'ab') as out:
                proc = subprocess.Popen(
                    argv, cwd=cwd, stdin=devnull, stdout=out, stderr=subprocess.STDOUT,
                    close_fds=True, start_new_session=True, env=env)
        try:
            return proc.wait(timeout=wait_timeout)
        except subprocess.TimeoutExpired:
            return None

    def run(self, argv, timeout=60, user=None):
        """Run ``argv`` to completion; return (rc, stdout, stderr) as text (rc 127 when it cannot start). ``user``
        (a uid; root only): run it as that user, with the user's primary group and no supplementary groups."""
        ids = {}
        if user is not None:
            try:
                ids = dict(user=user, group=pwd.getpwuid(user).pw_gid, extra_groups=[])
            except KeyError:
                return 127, '', 'uid %d has no user on this host: %s cannot run as it' % (user, argv[0])
        try:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  timeout=timeout, check=False, **ids)
        except OSError as exc:
            return 127, '', str(exc)
        except subprocess.TimeoutExpired:
            return 124, '', '%s did not finish within %d s' % (argv[0], timeout)
        return proc.returncode, proc.stdout.decode('utf-8', 'replace'), proc.stderr.decode('utf-8', 'replace')

    # --- locking ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, path):
        """Hold an exclusive ``flock`` on ``path`` (created if needed) for the ``with`` block."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)


SIGNAL_AS_OK, SIGNAL_AS_GONE, SIGNAL_AS_EPERM, SIGNAL_AS_FAILED = 0, 1, 2, 3
"""Exit codes of the child that :func:`signal_as` forks."""


def signal_as(uid, gid, send, target, sig):
    """``send(target, sig)`` (``os.kill`` or ``os.killpg``) in a forked child that first drops every group and
    sets its real, effective and saved uid and gid to ``uid``/``gid``, so the kernel grants the signal exactly
    when ``uid`` itself could send it. False when the target is gone; PermissionError when ``uid`` may not."""
    child = os.fork()
    if child == 0:  # pragma: no cover (the child, whose coverage is not collected)
        code = SIGNAL_AS_FAILED
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            send(target, sig)
            code = SIGNAL_AS_OK
        except OSError as exc:
            code = {errno.ESRCH: SIGNAL_AS_GONE, errno.EPERM: SIGNAL_AS_EPERM}.get(exc.errno, SIGNAL_AS_FAILED)
        finally:
            os._exit(code)
    dummy, status = os.waitpid(child, 0)
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else SIGNAL_AS_FAILED
    if code == SIGNAL_AS_GONE:
        return False
    if code == SIGNAL_AS_EPERM:
        raise PermissionError(errno.EPERM, 'uid %d may not signal %d' % (uid, target))
    if code != SIGNAL_AS_OK:
        raise OSError(errno.EPERM, 'cannot signal %d as uid %d (dropping to it failed)' % (target, uid))
    return True


class UserSignals(object):
    """``kill``/``killpg`` with the rights of ``uid`` (see :func:`signal_as`), for root acting on a user's run."""

    def __init__(self, uid, gid):
        self.uid = uid
        self.gid = gid

    def kill(self, pid, sig):
        """Send ``sig`` to ``pid`` as ``uid``; False when it does not exist (any more)."""
        return signal_as(self.uid, self.gid, os.kill, pid, sig)

    def killpg(self, pgid, sig):
        """Send ``sig`` to process group ``pgid`` as ``uid``; False when the group does not exist."""
        return signal_as(self.uid, self.gid, os.killpg, pgid, sig)


def is_alive(info, start_time=None):
    """True when ``info`` (a :class:`ProcInfo` or ``None``) is a live process started at ``start_time``.

    Zombies count as dead. When ``start_time`` is given it must match, which protects against PID reuse.
    """
    if info is None or info.state in DEAD_STATES:
        return False
    if start_time is not None and info.start_time != start_time:
        return False
    return True


def descendants(processes, root_pid):
    """Return ``{pid: ProcInfo}`` for all live descendants of ``root_pid`` (``root_pid`` excluded).

    ``processes`` is one snapshot as returned by :meth:`System.list_processes`.
    """
    children = {}
    for info in processes.values():
        if info.state in DEAD_STATES:
            continue
        children.setdefault(info.ppid, []).append(info)
    result = {}
    stack = [root_pid]
    while stack:
        for info in children.get(stack.pop(), ()):
            if info.pid not in result and info.pid != root_pid:
                result[info.pid] = info
                stack.append(info.pid)
    return result
