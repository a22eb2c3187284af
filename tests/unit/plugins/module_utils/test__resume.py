# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils/_resume.py against real directories: an earlier run's checkpoint found and copied into a new
run without following a link below the run's directory, never hard-linked, never another user's."""

from __future__ import annotations

import errno
import hashlib
import os
import stat

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _resume as rs

CONTENT = b'pickled state ' * 1000


@pytest.fixture
def run(tmp_path):
    """<state>/runs/r1/outputs/checkpoint.pt, and the new run's output directory (not created yet)."""
    outputs = tmp_path / 'state' / 'runs' / 'r1' / 'outputs'
    outputs.mkdir(parents=True)
    (outputs / 'checkpoint.pt').write_bytes(CONTENT)
    return tmp_path / 'state' / 'runs' / 'r1', tmp_path / 'state' / 'runs' / 'r2' / 'outputs'


def test_inspect_finds_the_run_and_its_checkpoint(run):
    run_dir, _new = run
    found = rs.inspect(str(run_dir))
    assert found['run'] is True
    checkpoint = found['checkpoint']
    assert checkpoint['isreg'] is True and checkpoint['path'] == str(run_dir / 'outputs' / 'checkpoint.pt')
    assert checkpoint['checksum'] == hashlib.sha256(CONTENT).hexdigest() and checkpoint['size'] == len(CONTENT)
    (run_dir / 'outputs' / 'checkpoint.pt').unlink()
    assert rs.inspect(str(run_dir))['checkpoint'] == {'path': str(run_dir / 'outputs' / 'checkpoint.pt'), 'isreg': False}
    assert rs.inspect(str(run_dir.parent / 'nope')) == {'run': False, 'checkpoint': {
        'path': str(run_dir.parent / 'nope' / 'outputs' / 'checkpoint.pt'), 'isreg': False}}
    assert rs.inspect(str(run_dir.parent.parent / 'missing' / 'r1'))['run'] is False


@pytest.mark.parametrize('swapped', ['r1', 'r1/outputs', 'r1/outputs/checkpoint.pt'])
def test_a_link_anywhere_below_the_runs_directory_is_refused_and_not_followed(tmp_path, run, swapped):
    run_dir, new = run
    elsewhere = tmp_path / 'elsewhere'
    (elsewhere / 'outputs').mkdir(parents=True)
    (elsewhere / 'outputs' / 'checkpoint.pt').write_bytes(b'root-owned secret')
    target = {'r1': elsewhere, 'r1/outputs': elsewhere / 'outputs',
              'r1/outputs/checkpoint.pt': elsewhere / 'outputs' / 'checkpoint.pt'}[swapped]
    path = run_dir.parent / swapped
    os.rename(str(path), str(tmp_path / 'moved'))
    os.symlink(str(target), str(path))
    with pytest.raises(rs.ResumeError, match=r'^%s is a symbolic link' % path):
        rs.inspect(str(run_dir))
    with pytest.raises(rs.ResumeError, match=r'is a symbolic link'):
        rs.carry(str(run_dir), str(new), 'x')
    assert not (new / 'checkpoint.pt').exists()


def test_a_run_of_another_user_is_refused_naming_the_owner(run):
    run_dir, new = run
    me = os.geteuid()
    with pytest.raises(rs.ResumeError, match=r'^%s belongs to .* \(uid %d\), not to .* \(uid %d\), who resumes it: a '
                                             r'checkpoint is loaded with pickle' % (run_dir, me, me + 1)):
        rs.inspect(str(run_dir), euid=me + 1)
    with pytest.raises(rs.ResumeError, match='belongs to'):
        rs.carry(str(run_dir), str(new), hashlib.sha256(CONTENT).hexdigest(), euid=me + 1)
    assert not new.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason='needs root to give the file to another user')
def test_root_does_not_load_a_checkpoint_another_user_wrote(run):
    run_dir, new = run
    os.chown(str(run_dir / 'outputs' / 'checkpoint.pt'), 4242, 4242)
    with pytest.raises(rs.ResumeError, match=r'checkpoint.pt belongs to .*\(uid 4242\), not to root \(uid 0\)'):
        rs.inspect(str(run_dir))
    with pytest.raises(rs.ResumeError, match=r'uid 4242'):
        rs.carry(str(run_dir), str(new), hashlib.sha256(CONTENT).hexdigest())
    assert not (new / 'checkpoint.pt').exists()


def test_a_checkpoint_that_is_no_regular_file_is_refused_without_hanging(run):
    run_dir, _new = run
    (run_dir / 'outputs' / 'checkpoint.pt').unlink()
    os.mkfifo(str(run_dir / 'outputs' / 'checkpoint.pt'))
    with pytest.raises(rs.ResumeError, match='checkpoint.pt is not a regular file'):
        rs.inspect(str(run_dir))


def test_carry_copies_never_links(run):
    run_dir, new = run
    checksum = rs.inspect(str(run_dir))['checkpoint']['checksum']
    got = rs.carry(str(run_dir), str(new), checksum)
    assert got['dest'] == str(new / 'checkpoint.pt') and got['checksum'] == checksum and got['size'] == len(CONTENT)
    assert got['method'] in ('reflink', 'copy_file_range', 'copy')
    source, copy = os.stat(str(run_dir / 'outputs' / 'checkpoint.pt')), os.stat(got['dest'])
    assert source.st_ino != copy.st_ino and source.st_nlink == 1
    assert stat.S_IMODE(copy.st_mode) == 0o600 and stat.S_IMODE(os.stat(str(new)).st_mode) == 0o700
    assert (new / 'checkpoint.pt').read_bytes() == CONTENT
    assert os.listdir(str(new)) == ['checkpoint.pt']
    # again (a retry of the task): replaced in place
    assert rs.carry(str(run_dir), str(new), checksum)['checksum'] == checksum


def test_carry_falls_back_to_a_plain_copy(run, monkeypatch):
    run_dir, new = run

    def no(*_args):
        raise OSError(errno.EOPNOTSUPP, 'not here')
    monkeypatch.setattr(rs.fcntl, 'ioctl', no)
    monkeypatch.setattr(rs.os, 'copy_file_range', lambda *args: (never for never in ()).throw(OSError(errno.EXDEV, 'x')))
    got = rs.carry(str(run_dir), str(new), hashlib.sha256(CONTENT).hexdigest())
    assert got['method'] == 'copy' and (new / 'checkpoint.pt').read_bytes() == CONTENT


def test_a_checkpoint_changed_since_inspect_is_refused_and_leaves_nothing(run):
    run_dir, new = run
    with pytest.raises(rs.ResumeError, match=r'changed while it was copied'):
        rs.carry(str(run_dir), str(new), '0' * 64)
    assert os.listdir(str(new)) == []


def test_an_output_directory_that_is_a_link_is_refused(tmp_path, run):
    run_dir, new = run
    (tmp_path / 'victim').mkdir()
    new.parent.mkdir(parents=True)
    os.symlink(str(tmp_path / 'victim'), str(new))
    with pytest.raises(rs.ResumeError, match='is a symbolic link'):
        rs.carry(str(run_dir), str(new), hashlib.sha256(CONTENT).hexdigest())
    assert os.listdir(str(tmp_path / 'victim')) == []
