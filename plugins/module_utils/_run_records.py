# -*- coding: utf-8 -*-

# Copyright (c) 2025, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""A run's records are verified before anyone acts on them.

The job's own code runs as the run's owner and can rewrite everything in its run directory (job.json,
pids.json): what the records say is a claim, checked here against what the job cannot forge:

- the run directory's owner (``lstat``: the directory itself, never a symlink's target), which must
  also be the uid job.json records;
- ``/proc/<pid>/stat`` of the recorded pid: alive with exactly the recorded start time;
- ``/proc/<pid>/cmdline``: the supervisor's command line names this run's ``supervisor.py`` and
  ``job.json`` (``<python> supervisor.py [--foreground] job.json``, as the start, a container or a Slurm
  step started it); torchrun leads a process group of its own, as the supervisor started it;
- ``/proc/<pid>/status``: the process's real uid is the run directory's owner.

A pid that is not a process id above 1, a missing start time or any mismatch raises
:class:`RecordRefused` naming the run and the failed check; the caller signals nothing. A recorded pid
with no process or another start time is gone (the run ended, the pid was reused): ``None``.
Root signals a run's processes with the owner's uid (:func:`signaller`), so it never signals anything
the owner could not.
"""

from __future__ import annotations

import errno
import os
import pwd
import stat
from collections import namedtuple

from ansible_collections.trainops.multinode.plugins.module_utils._proc import is_alive

RunOwner = namedtuple('RunOwner', ['run_id', 'run_dir', 'uid', 'gid'])
"""Whose run it is: the run directory's owner and group (lstat), which job.json's ``uid`` matches."""

Verified = namedtuple('Verified', ['owner', 'supervisor', 'torchrun'])
"""The run's owner and the :class:`~_proc.ProcInfo` of its live, verified supervisor and torchrun (``None``: gone)."""


class RecordRefused(Exception):
    """A record that must not be acted on; the message names the run and the check that failed."""

    def __init__(self, run_id, reason):
        super(RecordRefused, self).__init__(
            'Run %s: refusing to act on its records (pids.json, job.json): %s. Nothing was signalled.' % (run_id, reason))
        self.run_id = run_id
        self.reason = reason


def user_name(uid):
    """``uid 1000 (alice)``, or ``uid 1000`` when the user has no passwd entry."""
    try:
        return 'uid %d (%s)' % (uid, pwd.getpwuid(uid).pw_name)
    except KeyError:
        return 'uid %d' % uid


def supervisor_args(run_dir):
    """What follows the interpreter in the supervisor's command line: detached, or a Slurm step's task."""
    supervisor = os.path.join(run_dir, 'supervisor.py')
    job = os.path.join(run_dir, 'job.json')
    return ([supervisor, job], [supervisor, '--foreground', job])


def _int_record(run_id, pids, key):
    value = pids.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordRefused(run_id, '%s %r is not a number' % (key, value))
    return value


def recorded_pid(run_id, pids, key):
    """The pid recorded under ``key``: an int above 1 (never init, the kernel's 0 or a process group)."""
    if pids.get(key) is None:
        raise RecordRefused(run_id, '%s is missing' % key)
    pid = _int_record(run_id, pids, key)
    if pid <= 1:
        raise RecordRefused(run_id, '%s is %d, which is never a run\'s process' % (key, pid))
    return pid


def recorded_start_time(run_id, pids, key):
    """The start time recorded under ``key``: without it a reused pid could not be told apart."""
    if pids.get(key) is None:
        raise RecordRefused(run_id, '%s is missing, so the process cannot be told from one that reused its pid' % key)
    return _int_record(run_id, pids, key)


def run_dir_owner(system, run_dir):
    """The uid that owns ``run_dir`` itself (lstat), None when it is not a directory (a symlink) or is gone."""
    try:
        st = system.lstat(run_dir)
    except OSError:
        return None
    return st.st_uid if stat.S_ISDIR(st.st_mode) else None


def run_owner(system, run_id, run_dir, spec):
    """The run directory's owner, which must be a real directory and the uid job.json records."""
    st = system.lstat(run_dir)
    if not stat.S_ISDIR(st.st_mode):
        raise RecordRefused(run_id, 'its run directory %s is not a directory (a symlink?)' % run_dir)
    recorded = (spec or {}).get('uid')
    if isinstance(recorded, bool) or not isinstance(recorded, int):
        raise RecordRefused(run_id, 'job.json records no uid (%r)' % (recorded, ))
    if recorded != st.st_uid:
        raise RecordRefused(run_id, 'job.json records %s but the run directory %s belongs to %s' % (
            user_name(recorded), run_dir, user_name(st.st_uid)))
    return RunOwner(run_id, run_dir, st.st_uid, st.st_gid)


def _check_uid(system, owner, pid, what):
    uid = system.read_proc_uid(pid)
    if uid != owner.uid:
        raise RecordRefused(owner.run_id, '%s %d runs as %s, not as the run\'s owner %s' % (
            what, pid, 'nobody known' if uid is None else user_name(uid), user_name(owner.uid)))


def _check_supervisor_cmdline(system, owner, pid):
    cmdline = system.read_proc_cmdline(pid) or []
    if cmdline[1:] not in supervisor_args(owner.run_dir):
        raise RecordRefused(owner.run_id, 'supervisor_pid %d is not its supervisor: its command line %r does not run '
                                          '%s' % (pid, cmdline, ' '.join(supervisor_args(owner.run_dir)[0])))


def _check_group_leader(system, owner, pid):
    info = system.read_proc_stat(pid)
    if info is not None and info.pgid != pid:
        raise RecordRefused(owner.run_id, 'pid %d is not its torchrun: it does not lead a process group of its own '
                                          '(process group %d)' % (pid, info.pgid))


def _check_supervisor_uid(system, owner, pid):
    _check_uid(system, owner, pid, 'supervisor_pid')


def _check_torchrun_uid(system, owner, pid):
    _check_uid(system, owner, pid, 'pid')


def _verify(system, owner, pids, keys, checks):
    """The live process a record names, after ``checks``; None when it is gone. The start time is read again
    after the checks, so a pid reused meanwhile is never taken for the recorded process."""
    pid = recorded_pid(owner.run_id, pids, keys[0])
    start_time = recorded_start_time(owner.run_id, pids, keys[1])
    if not is_alive(system.read_proc_stat(pid), start_time):
        return None
    try:
        for check in checks:
            check(system, owner, pid)
    except RecordRefused:
        if not is_alive(system.read_proc_stat(pid), start_time):
            return None  # it ended while being checked
        raise
    info = system.read_proc_stat(pid)
    return info if is_alive(info, start_time) else None


def verify_supervisor(system, owner, pids):
    """The run's supervisor: its command line, real uid and start time match (None: it is gone)."""
    return _verify(system, owner, pids, ('supervisor_pid', 'supervisor_start_time'),
                   (_check_supervisor_cmdline, _check_supervisor_uid))


def verify_torchrun(system, owner, pids):
    """The run's torchrun: a process group leader with the owner's real uid and the start time (None: gone)."""
    return _verify(system, owner, pids, ('pid', 'start_time'), (_check_group_leader, _check_torchrun_uid))


def verify_run(system, run_id, run_dir, spec, pids):
    """:class:`Verified` for a run whose pids.json is ``pids``; raises :class:`RecordRefused`."""
    owner = run_owner(system, run_id, run_dir, spec)
    return Verified(owner, verify_supervisor(system, owner, pids), verify_torchrun(system, owner, pids))


def signaller(system, owner):
    """What signals the run's processes: ``system`` itself, or for root acting on another user's run
    something that signals with that user's uid and gid (``system.as_user``)."""
    if system.euid() == 0 and owner.uid != 0:
        return system.as_user(owner.uid, owner.gid)
    return system


def others_run(system, owner):
    """A message when a user other than root acts on ``owner``'s run, which it may never signal; else None."""
    euid = system.euid()
    if euid in (0, owner.uid):
        return None
    return ('Run %s belongs to another user, %s (its run directory %s), not to this user (%s): stop it as that user, '
            'or with become (root signals its processes as %s).' % (
                owner.run_id, user_name(owner.uid), owner.run_dir, user_name(euid), user_name(owner.uid)))


def _unreadable_message(system, path, uid):
    return ('%s belongs to another user, %s, and cannot be read by this user (%s): the run there (if any) is theirs. '
            'Query or stop it as that user, or with become (root signals its processes as that user).'
            % (path, user_name(uid), user_name(system.euid())))


def _unreadable_ancestor(system, path):
    """The message for the closest ancestor of ``path`` that this user can see but not enter, else None."""
    parent = os.path.dirname(path)
    while parent and parent != path:
        try:
            st = system.lstat(parent)
        except OSError:
            path, parent = parent, os.path.dirname(parent)
            continue
        if not os.access(parent, os.X_OK):
            return _unreadable_message(system, parent, st.st_uid)
        return None
    return None


def unreadable_dir(system, dirs):
    """A message naming the owner of the first of ``dirs`` (``(path, os.access mode)``, outermost first), or of a
    directory above them, that exists but this user cannot use: another user's, not to be reported as absent.
    None when there is none."""
    for path, mode in dirs:
        try:
            st = system.lstat(path)
        except OSError as exc:
            return _unreadable_ancestor(system, path) if exc.errno == errno.EACCES else None
        if not os.access(path, mode):
            return _unreadable_message(system, path, st.st_uid)
    return None
