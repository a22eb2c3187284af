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


def test_inspect_without_digest_reads_no_content_and_carry_checks_the_identity_instead(run, monkeypatch):
    run_dir, new = run
    found = rs.inspect(str(run_dir), digest=False, clock=lambda: 1e10)['checkpoint']
    assert 'checksum' not in found and found['age'] == round(1e10 - found['mtime'], 3)
    st = os.stat(str(run_dir / 'outputs' / 'checkpoint.pt'))
    assert found['identity'] == '%d:%d:%d:%d:%d' % (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    read = []
    monkeypatch.setattr(rs, '_sha256', lambda fd: read.append(fd) or 'x')
    got = rs.carry(str(run_dir), str(new), expect=found['identity'])
    assert got['checksum'] is None and read == [] and (new / 'checkpoint.pt').read_bytes() == CONTENT
    # the source of copies to other nodes: its copy read once for the sha256
    assert rs.carry(str(run_dir), str(new), expect=found['identity'], digest=True)['checksum'] == 'x' and len(read) == 1


def test_a_checkpoint_rewritten_since_it_was_looked_at_or_while_copied_is_refused(run, monkeypatch):
    run_dir, new = run
    seen = rs.inspect(str(run_dir), digest=False)['checkpoint']['identity']
    with open(str(run_dir / 'outputs' / 'checkpoint.pt'), 'r+b') as handle:   # rewritten in place, same size
        handle.write(b'P')
    with pytest.raises(rs.ResumeError, match=r'checkpoint.pt changed since it was looked at'):
        rs.carry(str(run_dir), str(new), expect=seen)
    copy_fd = rs._copy_fd

    def written_meanwhile(src, dst, size):
        method = copy_fd(src, dst, size)
        with open(str(run_dir / 'outputs' / 'checkpoint.pt'), 'ab') as handle:
            handle.write(b'more')
        return method
    monkeypatch.setattr(rs, '_copy_fd', written_meanwhile)
    with pytest.raises(rs.ResumeError, match=r'changed while it was copied'):
        rs.carry(str(run_dir), str(new))
    assert os.listdir(str(new)) == []


def sender(path):
    """What ssh runs for pull, without SSH: a real process that prints the file (cat), as the source node's would."""
    return ['sh', '-c', 'cat -- "$1"', 'ssh', str(path)]


def test_pull_writes_what_arrives_checks_its_sha256_and_renames_it_into_place(run):
    run_dir, new = run
    source = run_dir / 'outputs' / 'checkpoint.pt'
    checksum = hashlib.sha256(CONTENT).hexdigest()
    got = rs.pull(sender(source), str(new), checksum, len(CONTENT))
    assert got == {'dest': str(new / 'checkpoint.pt'), 'checksum': checksum, 'size': len(CONTENT)}
    assert (new / 'checkpoint.pt').read_bytes() == CONTENT and os.listdir(str(new)) == ['checkpoint.pt']
    assert stat.S_IMODE(os.stat(got['dest']).st_mode) == 0o600 and stat.S_IMODE(os.stat(str(new)).st_mode) == 0o700
    # what arrived is not what was sent: refused, the earlier copy kept, no temporary file left
    with pytest.raises(rs.ResumeError, match=r'^the checkpoint that arrived \(sha256 [0-9a-f]{64}, %d bytes\) is not the '
                                             r'one sent \(sha256 0{64}\): not resumed' % len(CONTENT)):
        rs.pull(sender(source), str(new), '0' * 64)
    with pytest.raises(rs.ResumeError, match='bytes'):
        rs.pull(sender(source), str(new), checksum, len(CONTENT) + 1)
    assert os.listdir(str(new)) == ['checkpoint.pt'] and (new / 'checkpoint.pt').read_bytes() == CONTENT


def test_a_pull_whose_ssh_fails_says_why_and_leaves_nothing(run, tmp_path):
    _run_dir, new = run
    failing = ['sh', '-c', 'echo "Host key verification failed." >&2; exit 255']
    with pytest.raises(rs.PullError, match=r'^sh exited 255: Host key verification failed\.$'):
        rs.pull(failing, str(new), '0' * 64)
    assert os.listdir(str(new)) == []
    # the destination directory is created without following a link
    (tmp_path / 'victim').mkdir()
    link = tmp_path / 'state' / 'runs' / 'r3'
    link.mkdir()
    os.symlink(str(tmp_path / 'victim'), str(link / 'outputs'))
    with pytest.raises(rs.ResumeError, match='is a symbolic link'):
        rs.pull(sender(tmp_path / 'state' / 'runs' / 'r1' / 'outputs' / 'checkpoint.pt'), str(link / 'outputs'), 'x')
    assert os.listdir(str(tmp_path / 'victim')) == []


def test_the_ssh_command_checks_host_keys_and_quotes_the_path():
    argv = rs.ssh_command('10.0.0.12', "/home/t/.trainops/runs/r 1/outputs/checkpoint.pt")
    assert argv[0] == 'ssh' and 'StrictHostKeyChecking=yes' in argv and 'BatchMode=yes' in argv
    assert argv[-3:] == ['--', '10.0.0.12', "cat -- '/home/t/.trainops/runs/r 1/outputs/checkpoint.pt'"]
    for bad in ('-oProxyCommand=x', 'a b', ''):
        with pytest.raises(rs.ResumeError, match='no node name or address'):
            rs.ssh_command(bad, '/x')


def test_receive_moves_the_controller_s_copy_into_place_checks_its_sha256_and_removes_it(tmp_path):
    sent = tmp_path / 'tmp' / 'checkpoint.pt'
    sent.parent.mkdir()
    sent.write_bytes(b'state' * 1000)
    checksum = hashlib.sha256(b'state' * 1000).hexdigest()
    out = tmp_path / 'new' / 'outputs'
    got = rs.receive(str(sent), str(out), checksum, 5000)
    assert got == {'dest': str(out / 'checkpoint.pt'), 'checksum': checksum, 'size': 5000}
    assert (out / 'checkpoint.pt').read_bytes() == b'state' * 1000 and not sent.exists()
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o700 and stat.S_IMODE(os.stat(out / 'checkpoint.pt').st_mode) == 0o600


def test_receive_refuses_another_checksum_or_a_link_and_leaves_nothing(tmp_path):
    sent = tmp_path / 'checkpoint.pt'
    sent.write_bytes(b'abc')
    out = tmp_path / 'outputs'
    with pytest.raises(rs.ResumeError, match='is not the one sent'):
        rs.receive(str(sent), str(out), 'ff' * 32)
    assert os.listdir(out) == []
    link = tmp_path / 'link.pt'
    link.symlink_to(sent)
    with pytest.raises(rs.ResumeError, match='cannot be read'):
        rs.receive(str(link), str(out), hashlib.sha256(b'abc').hexdigest())
    assert os.listdir(out) == [] and sent.exists()
