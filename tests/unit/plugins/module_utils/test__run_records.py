# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils/_run_records.py and the /proc and signal helpers of _proc.py it uses, on this machine's
real /proc (the refusals through TorchrunNode, with /proc mocked, are in test__torchrun.py)."""

from __future__ import annotations

import errno
import os
import signal
import stat
import subprocess

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _run_records as rr
from ansible_collections.trainops.multinode.plugins.module_utils._proc import (
    System,
    UserSignals,
    parse_cmdline,
    parse_real_uid,
    signal_as,
)

NOBODY = 65534


def test_parse_cmdline():
    assert parse_cmdline(b'/usr/bin/python3\0/r/supervisor.py\0/r/job.json\0') == [
        '/usr/bin/python3', '/r/supervisor.py', '/r/job.json']
    assert parse_cmdline(b'') == []
    assert parse_cmdline(b'a\0\0b\0') == ['a', '', 'b']
    assert parse_cmdline(b'caf\xe9\0') == ['caf\udce9']  # not UTF-8: kept, never equal to a path we wrote


def test_parse_real_uid():
    text = 'Name:\tsleep\nUmask:\t0022\nUid:\t1000\t0\t0\t0\nGid:\t100\t100\t100\t100\n'
    assert parse_real_uid(text) == 1000  # the real uid, not the effective one (0, setuid)
    assert parse_real_uid('Name:\tx\n') is None
    assert parse_real_uid('Uid:\tx\n') is None


def test_the_real_proc_of_a_process(sleeper):
    system = System()
    proc = sleeper(os.getuid())
    assert system.read_proc_cmdline(proc.pid) == ['sleep', '60']
    assert system.read_proc_uid(proc.pid) == os.getuid()
    proc.kill()
    proc.wait(timeout=10)
    assert system.read_proc_cmdline(proc.pid) is None and system.read_proc_uid(proc.pid) is None


def test_supervisor_args_name_this_runs_files():
    assert rr.supervisor_args('/s/runs/r1') == (['/s/runs/r1/supervisor.py', '/s/runs/r1/job.json'],
                                                ['/s/runs/r1/supervisor.py', '--foreground', '/s/runs/r1/job.json'])


class Euid(System):
    def __init__(self, euid):
        self.value = euid

    def euid(self):
        return self.value


def test_signaller_is_the_owners_uid_only_for_root_acting_on_another_users_run():
    owner = rr.RunOwner('r1', '/s/runs/r1', 1234, 99)
    as_owner = rr.signaller(Euid(0), owner)
    assert isinstance(as_owner, UserSignals) and (as_owner.uid, as_owner.gid) == (1234, 99)
    mine = Euid(1234)
    assert rr.signaller(mine, owner) is mine
    root_run = rr.RunOwner('r1', '/s/runs/r1', 0, 0)
    root = Euid(0)
    assert rr.signaller(root, root_run) is root


def test_others_run_names_the_owner():
    owner = rr.RunOwner('r1', '/s/runs/r1', 0, 0)
    assert rr.others_run(Euid(0), owner) is None
    assert rr.others_run(Euid(1234), owner).startswith(
        'Run r1 belongs to another user, uid 0 (root) (its run directory /s/runs/r1), not to this user (%s)'
        % rr.user_name(1234))


@pytest.fixture
def sleeper():
    """Start ``sleep`` with the given uid (root only); every process is killed by its pid at the end."""
    procs = []

    def start(uid):
        def drop():
            if uid != os.getuid():
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
        proc = subprocess.Popen(['sleep', '60'], preexec_fn=drop)
        procs.append(proc)
        return proc
    yield start
    for proc in procs:
        proc.kill()
        proc.wait(timeout=10)


@pytest.mark.skipif(os.geteuid() != 0, reason='only root can signal as another uid')
def test_signal_as_has_exactly_the_rights_of_that_uid(sleeper):
    nobodys = sleeper(NOBODY)
    roots = sleeper(0)
    assert signal_as(NOBODY, NOBODY, os.kill, nobodys.pid, 0) is True
    with pytest.raises(PermissionError):
        signal_as(NOBODY, NOBODY, os.kill, roots.pid, signal.SIGTERM)
    assert roots.poll() is None
    assert UserSignals(NOBODY, NOBODY).kill(nobodys.pid, signal.SIGTERM) is True
    assert nobodys.wait(timeout=10) == -signal.SIGTERM
    assert UserSignals(NOBODY, NOBODY).kill(nobodys.pid, 0) is False  # reaped: gone


class Hidden(Euid):
    """``/home/alice`` (uid 1000, 0700) as another user sees it: it exists, what is below cannot be looked at."""

    def lstat(self, path):
        if path.startswith('/home/alice/'):
            raise PermissionError(errno.EACCES, 'Permission denied', path)
        if path == '/home/alice':
            return os.stat_result((stat.S_IFDIR | 0o700, 1, 1, 1, 1000, 1000, 0, 0, 0, 0))
        raise FileNotFoundError(errno.ENOENT, 'No such file or directory', path)


def test_a_directory_above_the_state_that_cannot_be_entered_names_its_owner(monkeypatch):
    monkeypatch.setattr(rr.os, 'access', lambda path, mode: path != '/home/alice')
    state = '/home/alice/.trainops/state/n0'
    msg = rr.unreadable_dir(Hidden(1234), [(os.path.dirname(state), os.X_OK), (state, os.R_OK | os.X_OK)])
    assert msg.startswith('/home/alice belongs to another user, %s, and cannot be read by this user (%s)'
                          % (rr.user_name(1000), rr.user_name(1234)))
    # a state directory that does not exist, below directories this user can enter, is just absent
    assert rr.unreadable_dir(Hidden(1234), [('/srv/trainops/state', os.X_OK), ('/srv/trainops/state/n0', os.X_OK)]) is None


def test_a_directory_is_checked_for_what_it_is_used_for(monkeypatch, tmp_path):
    # the state root is only passed through (0711 will do); the node's own directories are read
    (tmp_path / 'state' / 'n0').mkdir(parents=True)
    monkeypatch.setattr(rr.os, 'access', lambda path, mode: mode == os.X_OK)
    dirs = [(str(tmp_path / 'state'), os.X_OK), (str(tmp_path / 'state' / 'n0'), os.R_OK | os.X_OK)]
    assert rr.unreadable_dir(Euid(1234), dirs[:1]) is None
    assert rr.unreadable_dir(Euid(1234), dirs).startswith('%s belongs to another user' % dirs[1][0])


def test_run_dir_owner_is_the_directorys_own_never_a_links_target(tmp_path):
    run_dir = tmp_path / 'r1'
    run_dir.mkdir()
    assert rr.run_dir_owner(System(), str(run_dir)) == os.getuid()
    (tmp_path / 'r2').symlink_to(run_dir)
    assert rr.run_dir_owner(System(), str(tmp_path / 'r2')) is None
    assert rr.run_dir_owner(System(), str(tmp_path / 'gone')) is None


def test_run_as_a_user_drops_root_to_that_user_and_its_group():
    if os.geteuid() != 0:
        pytest.skip('only root runs a command as another user')
    rc, out, _err = System().run(['id', '-u'], user=NOBODY)
    assert (rc, out.strip()) == (0, str(NOBODY))
    rc, out, _err = System().run(['id', '-G'], user=NOBODY)
    assert rc == 0 and '0' not in out.split()   # none of root's groups
    assert System().run(['id'], user=2 ** 31 - 7)[0] == 127   # no such user: not run
