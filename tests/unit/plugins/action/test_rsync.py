# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the rsync action plugin: rsync runs on the controller with the host's own ssh settings."""

from __future__ import annotations

import os
import shlex
import subprocess

from unittest.mock import MagicMock

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.trainops.multinode.plugins.action.rsync import ActionModule
from ansible_collections.trainops.multinode.tests.unit.plugins.action import fake_task

SSH_OPTIONS = {
    'host': '10.77.0.11', 'port': 2222, 'remote_user': 'train', 'private_key_file': '/keys/id_ed25519',
    'ssh_executable': 'ssh', 'ssh_args': '-o ControlMaster=auto -o ControlPersist=120s',
    'ssh_common_args': '-o UserKnownHostsFile=/keys/known_hosts -o StrictHostKeyChecking=yes',
    'ssh_extra_args': '', 'timeout': 10, 'control_path': None, 'control_path_dir': '/cp',
}


class FakeRun:
    def __init__(self, rc=0, stdout='', stderr=''):
        self.rc, self.stdout, self.stderr, self.argv = rc, stdout, stderr, None

    def __call__(self, argv, **kwargs):
        self.argv = argv
        return subprocess.CompletedProcess(argv, self.rc, self.stdout, self.stderr)


def make_action(args, transport='ssh', options=None, check_mode=False, run=None):
    action, connection = fake_task.make_action(ActionModule, 'trainops.multinode.rsync', args, transport=transport,
                                               check_mode=check_mode)
    opts = dict(SSH_OPTIONS, **(options or {}))
    connection.get_option.side_effect = opts.get
    connection._create_control_path.side_effect = lambda host, port, user: '%(directory)s/' + '%s-%s-%s' % (host, port, user)
    action._execute_module = MagicMock(side_effect=AssertionError('rsync must not run a module'))
    action._runner = run or FakeRun(stdout='<<CHANGED>>>f+++++++++ train.py\n')
    return action, connection


def rsh_words(argv):
    return shlex.split([a for a in argv if a.startswith('--rsh=')][0][len('--rsh='):])


def test_ssh_host_copy_uses_the_hosts_settings_and_ansibles_control_master():
    action, connection = make_action({'src': '/ws/', 'dest': '/srv/w/', 'create_dest': True, 'rsync_opts': ['--delete']})
    result = action.run(task_vars={})
    argv = action._runner.argv
    assert result['changed'] and result['stdout_lines'] == ['>f+++++++++ train.py'] and result['cmd'] == argv
    assert argv[-2:] == ['/ws/', 'train@10.77.0.11:/srv/w/'] and '--delete' in argv
    assert '--rsync-path=mkdir -p -- /srv/w/ && rsync' in argv
    words = rsh_words(argv)
    assert words[:3] == ['ssh', '-o', 'ControlPath=/cp/10.77.0.11-2222-train']
    assert ['-i', '/keys/id_ed25519'] == words[3:5]
    for want in ('Port=2222', 'ControlPersist=120s', 'UserKnownHostsFile=/keys/known_hosts', 'StrictHostKeyChecking=yes',
                 'ConnectTimeout=10'):
        assert want in words
    assert not connection.exec_command.called and not connection.put_file.called


def test_no_persisted_master_means_no_socket_and_never_a_host_key_bypass():
    action, dummy = make_action({'src': '/ws/', 'dest': '/w/'}, options={'ssh_args': '', 'ssh_common_args': None})
    action.run(task_vars={})
    words = rsh_words(action._runner.argv)
    assert words[:3] == ['ssh', '-S', 'none']
    assert not any('StrictHostKeyChecking=no' in w or '/dev/null' in w for w in words)


def test_a_control_path_named_in_the_ssh_arguments_is_left_to_ssh():
    action, dummy = make_action({'src': '/ws/', 'dest': '/w/'},
                                options={'ssh_common_args': '-o ControlPath=/mine/%C -o ControlPersist=5s'})
    action.run(task_vars={})
    words = rsh_words(action._runner.argv)
    assert 'ControlPath=/mine/%C' in words and '-S' not in words
    assert not any(w.startswith('ControlPath=/cp/') for w in words)


@pytest.fixture
def workspace(tmp_path):
    src = tmp_path / 'ws'
    (src / 'config').mkdir(parents=True)
    (src / 'train.py').write_text('print(1)\n')
    (src / 'config' / 'default.yaml').write_text('lr: 0.1\n')
    return src


def test_local_connection_copies_in_python_without_rsync_and_creates_the_directory(workspace, tmp_path):
    dest = tmp_path / 'a' / 'b'
    action, dummy = make_action({'src': str(workspace) + '/', 'dest': str(dest) + '/', 'create_dest': True},
                                transport='ansible.builtin.local', run=FakeRun(rc=127, stderr='must not run'))
    result = action.run(task_vars={})
    assert action._runner.argv is None and result['method'] == 'local' and 'cmd' not in result
    assert result['changed'] and '>f+++++++++ config/default.yaml' in result['stdout_lines']
    assert (dest / 'train.py').read_text() == 'print(1)\n'
    again = action.run(task_vars={})
    assert again['changed'] is False and again['stdout_lines'] == []


def test_local_check_mode_lists_the_items_and_creates_nothing(workspace, tmp_path):
    dest = tmp_path / 'new'
    action, dummy = make_action({'src': str(workspace) + '/', 'dest': str(dest), 'create_dest': True},
                                transport='local', check_mode=True)
    result = action.run(task_vars={})
    assert result['changed'] and '>f+++++++++ train.py' in result['stdout_lines'] and not dest.exists()
    assert action._runner.argv is None


def test_local_copy_leaves_what_it_does_not_implement_to_rsync(workspace, tmp_path):
    dest = tmp_path / 'd'
    action, dummy = make_action({'src': str(workspace) + '/', 'dest': str(dest) + '/', 'create_dest': True,
                                 'rsync_opts': ['--bwlimit=1m']}, transport='local', check_mode=True)
    result = action.run(task_vars={})
    argv = action._runner.argv
    assert result['method'] == 'rsync' and '--dry-run' in argv and '--bwlimit=1m' in argv
    assert argv[-1] == str(dest) + '/' and not any(a.startswith('--rsh') or a.startswith('--rsync-path') for a in argv)


def test_without_rsync_the_error_names_what_needed_it(workspace, tmp_path):
    def missing(argv, **kwargs):
        raise FileNotFoundError(2, 'No such file or directory', 'rsync')
    action, dummy = make_action({'src': str(workspace) + '/', 'dest': str(tmp_path / 'd'),
                                 'rsync_opts': ['--bwlimit=1m']}, transport='local', run=missing)
    with pytest.raises(AnsibleActionFail, match='Install rsync there .*rsync option --bwlimit=1m'):
        action.run(task_vars={})


def test_rsync_failure_fails_the_task_with_its_message():
    action, dummy = make_action({'src': '/ws/', 'dest': '/w/'},
                                run=FakeRun(rc=255, stderr='Host key verification failed.\n'))
    result = action.run(task_vars={})
    assert result['failed'] and result['rc'] == 255 and 'Host key verification failed' in result['msg']


def test_other_connections_are_refused_by_name():
    action, dummy = make_action({'src': '/ws/', 'dest': '/w/'}, transport='community.docker.docker')
    with pytest.raises(AnsibleActionFail, match='community.docker.docker'):
        action.run(task_vars={})


class Calls:
    """Records every command; the marker's cat answers ``recorded``, rsync reports one file."""

    def __init__(self, recorded=b''):
        self.recorded, self.calls = recorded, []

    def __call__(self, argv, **kwargs):
        self.calls.append((argv, kwargs.get('input')))
        if argv[0] == 'rsync':
            return subprocess.CompletedProcess(argv, 0, '<<CHANGED>>>f+++++++++ train.py\n', '')
        return subprocess.CompletedProcess(argv, 0, self.recorded if argv[-1].startswith('head -c 4096 --') else b'', b'')


def test_an_ssh_host_holding_another_source_is_refused_before_rsync_and_its_marker_written_after():
    args = {'src': '/ws/', 'dest': '/srv/w/', 'source_marker': True}
    other = Calls(recorded=b'/home/me/proj\n')
    action, dummy = make_action(args, run=other)
    result = action.run(task_vars={'inventory_hostname': 'gpu1'})
    assert result['failed'] and result['msg'].startswith(
        'the directory /srv/w on gpu1 holds the code of /home/me/proj (its .trainops-source); this sync would put /ws')
    assert [argv[-1] for argv, dummy in other.calls] == ["head -c 4096 -- /srv/w/.trainops-source 2>/dev/null; true"]
    assert other.calls[0][0][-2] == 'train@10.77.0.11' and other.calls[0][0][:3] == ['ssh', '-o', 'ControlPath=/cp/10.77.0.11-2222-train']

    same = Calls(recorded=b'/ws\n')
    action, dummy = make_action(args, run=same)
    assert not action.run(task_vars={'inventory_hostname': 'gpu1'}).get('failed')
    rsync, write = same.calls[1], same.calls[2]
    assert '--exclude=/.trainops-source' in rsync[0]
    assert write == (write[0], b'/ws\n') and write[0][-1] == (
        'rm -f -- /srv/w/.trainops-source.tmp && (set -C; cat > /srv/w/.trainops-source.tmp) '
        '&& mv -f -- /srv/w/.trainops-source.tmp /srv/w/.trainops-source')

    replaced = Calls(recorded=b'/home/me/proj\n')
    action, dummy = make_action(dict(args, replace_source=True), run=replaced)
    assert not action.run(task_vars={'inventory_hostname': 'gpu1'}).get('failed')
    assert replaced.calls[-1][1] == b'/ws\n'


def test_a_local_marker_is_written_through_no_link_planted_beside_it(tmp_path):
    """On a local node the marker's temporary name is the node's to plant a link at: it is removed, not written
    through, and the file the link pointed at is untouched."""
    dest, victim = tmp_path / 'w', tmp_path / 'victim'
    dest.mkdir()
    victim.write_text('keep\n')
    os.symlink(str(victim), str(dest / '.trainops-source.tmp'))
    os.symlink(str(victim), str(dest / '.trainops-source'))
    from ansible_collections.trainops.multinode.plugins.action import rsync as rsync_action
    marker = rsync_action._Marker(None, {'src': '/ws/', 'dest': str(dest), 'replace_source': True}, 'local', False, 'n0')
    marker.write()
    assert victim.read_text() == 'keep\n'
    assert not os.path.islink(str(dest / '.trainops-source')) and (dest / '.trainops-source').read_text() == '/ws\n'
    assert not os.path.lexists(str(dest / '.trainops-source.tmp'))
