# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rsync command of trainops.multinode.rsync, and real local copies with it."""

from __future__ import annotations

import os
import shlex
import shutil

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _rsync as rs


def test_remote_path_brackets_ipv6_and_adds_the_user():
    assert rs.remote_path('10.0.0.1', 'train', '/w/') == 'train@10.0.0.1:/w/'
    assert rs.remote_path('fd00::1', None, '/w/') == '[fd00::1]:/w/'


def test_ssh_command_reuses_the_given_socket_and_keeps_every_ssh_argument():
    rsh = rs.ssh_command('/usr/bin/ssh', port=2222, private_key='/k/id ed25519',
                         ssh_args=['-o ControlMaster=auto -o ControlPersist=60s',
                                   '-o UserKnownHostsFile=/k/known_hosts -o StrictHostKeyChecking=yes', None],
                         control_path='/cp/abc')
    words = shlex.split(rsh)
    assert words[:3] == ['/usr/bin/ssh', '-o', 'ControlPath=/cp/abc']
    assert ['-i', '/k/id ed25519'] == words[3:5]
    assert 'Port=2222' in words and 'StrictHostKeyChecking=yes' in words and 'UserKnownHostsFile=/k/known_hosts' in words
    assert '-S' not in words


def test_ssh_command_without_a_socket_opens_its_own_connection_unless_the_arguments_name_one():
    assert shlex.split(rs.ssh_command(None))[:3] == ['ssh', '-S', 'none']
    words = shlex.split(rs.ssh_command('ssh', ssh_args=['-o ControlPath=/mine/%C']))
    assert '-S' not in words and 'ControlPath=/mine/%C' in words


def test_ssh_command_never_turns_host_key_checking_off():
    rsh = rs.ssh_command('ssh', port=22, private_key='/k', ssh_args=['-o ControlPersist=1s'])
    assert 'StrictHostKeyChecking=no' not in rsh and '/dev/null' not in rsh


def test_rsync_argv_creates_the_remote_directory_and_keeps_the_options_order():
    argv = rs.rsync_argv('/src/', 'u@h:/dest dir/', rsh='ssh -S none', create_dest=True,
                         opts=['--delete', '--exclude=/.trainops-dir-id'])
    assert argv[0] == 'rsync' and '--archive' in argv and '--dry-run' not in argv
    assert '--rsh=ssh -S none' in argv
    assert "--rsync-path=mkdir -p -- '/dest dir/' && rsync" in argv
    assert argv[-4:] == ['--delete', '--exclude=/.trainops-dir-id', '/src/', 'u@h:/dest dir/']


def test_rsync_argv_local_and_check_mode():
    argv = rs.rsync_argv('/src/', '/dest/', create_dest=True, check_mode=True, archive=False, compress=True)
    assert '--dry-run' in argv and '--compress' in argv and '--archive' not in argv
    assert not any(a.startswith('--rsh') or a.startswith('--rsync-path') for a in argv)


def test_changed_items_reads_only_the_marked_lines():
    out = 'sending incremental file list\n<<CHANGED>>>f+++++++++ train.py\n<<CHANGED>>*deleting   old.py\n\nsent 1 bytes\n'
    assert rs.changed_items(out) == ['>f+++++++++ train.py', '*deleting   old.py']


needs_rsync = pytest.mark.skipif(shutil.which('rsync') is None, reason='rsync is not installed')


@pytest.fixture
def dirs(tmp_path):
    """A source and a destination directory."""
    src, dest = tmp_path / 'src', tmp_path / 'dest'
    src.mkdir()
    dest.mkdir()
    return src, dest


@needs_rsync
def test_a_real_copy_reports_changes_then_none(dirs):
    src, dest = dirs
    (src / 'train.py').write_text('print(1)\n')
    first = rs.run_rsync(rs.rsync_argv(str(src) + '/', str(dest) + '/'))
    assert first['changed'] and any(item.endswith('train.py') for item in first['items'])
    assert (dest / 'train.py').read_text() == 'print(1)\n'
    again = rs.run_rsync(rs.rsync_argv(str(src) + '/', str(dest) + '/'))
    assert again == {'changed': False, 'items': [], 'rc': 0}


@needs_rsync
def test_check_mode_changes_nothing(dirs):
    src, dest = dirs
    (src / 'a.py').write_text('x')
    result = rs.run_rsync(rs.rsync_argv(str(src) + '/', str(dest) + '/', check_mode=True))
    assert result['changed'] and not os.path.exists(dest / 'a.py')


@needs_rsync
def test_a_failed_copy_raises_with_rsyncs_message(tmp_path):
    with pytest.raises(rs.RsyncError) as err:
        rs.run_rsync(rs.rsync_argv(str(tmp_path / 'missing') + '/', str(tmp_path / 'dest') + '/'))
    assert err.value.result['rc'] != 0 and 'missing' in err.value.msg


def test_the_source_marker_is_read_within_bounds_and_another_source_is_named_with_both(tmp_path):
    assert rs.read_marker(str(tmp_path)) is None
    (tmp_path / rs.SOURCE_MARKER).write_text('/home/me/proj\nignored\n')
    assert rs.read_marker(str(tmp_path)) == '/home/me/proj'
    linked = tmp_path / 'other'
    linked.mkdir()
    os.symlink(str(tmp_path / rs.SOURCE_MARKER), str(linked / rs.SOURCE_MARKER))
    assert rs.read_marker(str(linked)) is None           # a link is no marker
    assert rs.marker_text(b'x' * 10000) == 'x' * rs.MAX_MARKER_BYTES
    assert rs.source_problem(None, '/a', 'the directory /ws on n0') is None
    assert rs.source_problem('/a', '/a', 'the directory /ws on n0') is None
    assert rs.source_problem('/a', '/b', 'the directory /ws on n0') == (
        'the directory /ws on n0 holds the code of /a (its .trainops-source); this sync would put /b over it. Give '
        'that source again (-e src=/a), sync into another directory, or replace it: -e replace_source=true')
