# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The local copy of trainops.multinode.rsync (a node that is the controller) against real directories.

Where rsync is installed, every scenario runs both: rsync (the command ``_rsync.rsync_argv`` builds) into one
destination, the local copy into another, and they must leave the same trees and report the same items.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _local_copy as lc
from ansible_collections.trainops.multinode.plugins.module_utils import _rsync as rs
from ansible_collections.trainops.multinode.plugins.filter import local_connection as local_connection_filter

needs_rsync = pytest.mark.skipif(shutil.which('rsync') is None, reason='rsync is not installed')
ROLE_OPTS = ['--exclude=__pycache__', '--exclude=*.pyc', '--exclude=/.trainops-dir-id']


def tree(root):
    """Everything rsync -a keeps of ``root``: per relative path its type, mode, mtime (ns), content or link target."""
    found = {}
    for base, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(base, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, root)
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ('link', os.readlink(path), st.st_mtime_ns)
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = ('dir', stat.S_IMODE(st.st_mode), st.st_mtime_ns)
            else:
                found[rel] = ('file', stat.S_IMODE(st.st_mode), st.st_mtime_ns, open(path, 'rb').read())
    top = os.lstat(root)
    found['.'] = ('dir', stat.S_IMODE(top.st_mode), top.st_mtime_ns)
    return found


def write(path, text, mtime=None, mode=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as handle:
        handle.write(text)
    if mode is not None:
        os.chmod(path, mode)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def age(root, when=1_600_000_000_123_456_789):
    """Give every directory and symlink under ``root`` an old time: rsync compares their times in whole seconds and
    leaves one of this second as it is (so would the local copy), which would make the two trees' times differ."""
    for base, dirs, files in os.walk(root, topdown=False):
        for name in dirs + files:
            path = os.path.join(base, name)
            if os.path.isdir(path) or os.path.islink(path):
                os.utime(path, ns=(when, when), follow_symlinks=False)
    os.utime(root, ns=(when, when))


@pytest.fixture
def workspace(tmp_path):
    """A source tree like a workspace: code, a config directory, caches, a symlink, an executable, an empty dir."""
    src = tmp_path / 'src'
    write(str(src / 'train.py'), 'print(1)\n', mtime=1_700_000_000)
    write(str(src / 'config' / 'default.yaml'), 'lr: 0.1\n')
    write(str(src / 'config' / '__pycache__' / 'x.cpython-311.pyc'), 'bytecode')
    write(str(src / 'model.pyc'), 'bytecode')
    write(str(src / 'run.sh'), '#!/bin/sh\n', mode=0o750)
    write(str(src / 'data' / 'keep.txt'), 'data\n')
    os.symlink('config/default.yaml', str(src / 'current.yaml'))
    os.symlink('/nonexistent/target', str(src / 'dangling'))
    os.mkdir(str(src / 'empty'), 0o700)
    os.chmod(str(src), 0o755)
    age(str(src))
    return tmp_path


class Both(object):
    """rsync into ``rsync/``, the local copy into ``local/``, from the same source with the same options."""

    def __init__(self, root, opts=()):
        self.src = str(root / 'src') + '/'
        self.rsync_dest, self.local_dest = str(root / 'rsync'), str(root / 'local')
        for dest in (self.rsync_dest, self.local_dest):
            os.makedirs(dest, exist_ok=True)
        self.opts = list(opts)

    def copy(self, check_mode=False):
        age(self.src)
        by_rsync = rs.run_rsync(rs.rsync_argv(self.src, self.rsync_dest + '/', opts=self.opts, check_mode=check_mode))
        local = lc.local_copy(self.src, self.local_dest + '/', lc.copy_options(self.opts), check_mode=check_mode)
        assert sorted(local['items']) == sorted(by_rsync['items'])
        assert local['changed'] == by_rsync['changed']
        assert tree(self.local_dest) == tree(self.rsync_dest)
        return local


@needs_rsync
def test_first_copy_then_none_same_as_rsync(workspace):
    both = Both(workspace, ROLE_OPTS)
    first = both.copy()
    assert first['changed'] and '>f+++++++++ train.py' in first['items']
    assert 'cL+++++++++ current.yaml -> config/default.yaml' in first['items']
    copied = tree(both.local_dest)
    assert 'model.pyc' not in copied and 'config/__pycache__' not in copied
    assert copied['run.sh'][1] == 0o750 and copied['empty'][1] == 0o700
    assert copied['dangling'][:2] == ('link', '/nonexistent/target')
    assert both.copy() == {'changed': False, 'items': [], 'rc': 0}


@needs_rsync
def test_changes_deletes_and_excluded_files_same_as_rsync(workspace):
    both = Both(workspace, ROLE_OPTS + ['--delete'])
    both.copy()
    src = workspace / 'src'
    write(str(src / 'train.py'), 'print(2)\n', mtime=1_700_000_100)          # same size, newer
    os.chmod(str(src / 'run.sh'), 0o700)                                        # attributes only
    os.unlink(str(src / 'data' / 'keep.txt'))
    shutil.rmtree(str(src / 'empty'))
    os.unlink(str(src / 'current.yaml'))
    os.symlink('train.py', str(src / 'current.yaml'))
    for dest in (both.rsync_dest, both.local_dest):
        write(os.path.join(dest, '.trainops-dir-id'), 'token', mtime=1)       # excluded: kept by --delete
        write(os.path.join(dest, 'stale', 'old.py'), 'old')                   # not in src: deleted
        write(os.path.join(dest, 'config', '__pycache__', 'y.pyc'), 'cache', mtime=1)  # excluded in a kept dir
        age(os.path.join(dest, 'config', '__pycache__'))
    result = both.copy()
    assert '>f..t...... train.py' in result['items'] and '.f...p..... run.sh' in result['items']
    assert '*deleting   stale/old.py' in result['items'] and '*deleting   empty/' in result['items']
    left = tree(both.local_dest)
    assert '.trainops-dir-id' in left and 'config/__pycache__/y.pyc' in left and 'stale' not in left
    assert left['current.yaml'][:2] == ('link', 'train.py')
    assert both.copy()['changed'] is False


@needs_rsync
def test_without_delete_extra_files_stay_and_checksum_finds_same_size_same_time_edits(workspace):
    both = Both(workspace, ['--checksum'])
    both.copy()
    for dest in (both.rsync_dest, both.local_dest):
        write(os.path.join(dest, 'extra.txt'), 'mine', mtime=1)
        age(dest)
    write(str(workspace / 'src' / 'train.py'), 'print(3)\n', mtime=1_700_000_000)  # same size, same time
    result = both.copy()
    assert result['items'] == ['>fc........ train.py']
    assert 'extra.txt' in tree(both.local_dest)


@needs_rsync
def test_a_file_replaced_by_a_directory_and_check_mode_same_as_rsync(workspace):
    both = Both(workspace, ROLE_OPTS)
    both.copy()
    os.unlink(str(workspace / 'src' / 'run.sh'))
    write(str(workspace / 'src' / 'run.sh' / 'inner.txt'), 'now a directory')
    before = tree(both.local_dest)
    planned = both.copy(check_mode=True)
    assert planned['changed'] and tree(both.local_dest) == before
    both.copy()
    assert tree(both.local_dest)['run.sh'][0] == 'dir'


@needs_rsync
def test_a_missing_destination_is_created_in_check_mode_only_on_paper(workspace):
    src = str(workspace / 'src') + '/'
    dest = str(workspace / 'new')
    planned = lc.local_copy(src, dest + '/', lc.copy_options(), check_mode=True)
    by_rsync = rs.run_rsync(rs.rsync_argv(src, dest + '/', check_mode=True))
    assert sorted(planned['items']) == sorted(by_rsync['items']) and not os.path.exists(dest)


@pytest.mark.parametrize('pattern, path, is_dir, expected', [
    ('*.pyc', 'a/b/c.pyc', False, True),
    ('/.trainops-dir-id', '.trainops-dir-id', False, True),
    ('/.trainops-dir-id', 'sub/.trainops-dir-id', False, False),
    ('data/', 'data', True, True),
    ('data/', 'data', False, False),
    ('config/*.yaml', 'x/config/a.yaml', False, True),
    ('config/*.yaml', 'x/config/deep/a.yaml', False, False),
    ('/config/**', 'config/deep/a.yaml', False, True),
    ('ckpt_[0-9]', 'ckpt_7', True, True),
    ('ckpt_[!0-9]', 'ckpt_7', True, False),
    ('?.txt', 'ab.txt', False, False),
])
def test_patterns_follow_rsync_rules(pattern, path, is_dir, expected):
    assert lc.Pattern(pattern).matches(path, is_dir) is expected


def test_first_matching_rule_wins():
    rules = lc.copy_options(['--include=keep.ckpt', '--exclude=*.ckpt'])['rules']
    assert not lc.excluded(rules, 'a/keep.ckpt', False) and lc.excluded(rules, 'a/other.ckpt', False)


@pytest.mark.parametrize('opts, archive', [(['--bwlimit=10m'], True), (['--filter=- x'], True), ([], False),
                                           (['--exclude'], True)])
def test_options_it_does_not_implement_are_named(opts, archive):
    with pytest.raises(lc.Unsupported):
        lc.copy_options(opts, archive)
    assert lc.needs_rsync('local', opts, archive)


def test_only_a_local_node_with_implemented_options_needs_no_rsync():
    assert not lc.needs_rsync('ansible.builtin.local', ROLE_OPTS + ['--delete', '-z'])
    assert not lc.needs_rsync('local')
    assert lc.needs_rsync('ssh') and lc.needs_rsync('ansible.builtin.ssh') and lc.needs_rsync(None)


def test_a_filter_file_or_a_fifo_in_the_tree_is_left_to_rsync_before_anything_changes(tmp_path):
    src, dest = tmp_path / 'src', tmp_path / 'dest'
    write(str(src / 'a.py'), 'x')
    write(str(src / 'sub' / '.rsync-filter'), '- *.log\n')
    with pytest.raises(lc.Unsupported):
        lc.local_copy(str(src) + '/', str(dest), lc.copy_options())
    assert not dest.exists()
    os.unlink(str(src / 'sub' / '.rsync-filter'))
    os.mkfifo(str(src / 'sub' / 'pipe'))
    with pytest.raises(lc.Unsupported):
        lc.local_copy(str(src) + '/', str(dest), lc.copy_options())
    with pytest.raises(lc.Unsupported):
        lc.local_copy(str(src), str(dest), lc.copy_options())
    assert not dest.exists()


def test_the_role_reads_the_same_rule_through_the_local_connection_filter():
    rule = local_connection_filter.FilterModule().filters()['local_connection']
    assert rule('ansible.builtin.local') and rule('local') and not rule('ssh') and not rule('community.docker.docker')


def test_a_destination_that_is_a_file_is_an_error_and_stays(tmp_path):
    src, dest = tmp_path / 'src', tmp_path / 'dest'
    write(str(src / 'a.py'), 'x')
    dest.write_text('a file')
    with pytest.raises(NotADirectoryError):
        lc.local_copy(str(src) + '/', str(dest) + '/', lc.copy_options())
    assert dest.read_text() == 'a file'


@pytest.mark.parametrize('swapped, victim_name', [
    ('run.sh', 'victim.sh'),                        # a file whose permissions differ: the 'attrs' operation
    ('config', 'victim_dir'),                       # a directory on the way to such a file
    ('data', 'victim_dir'),                         # a directory whose own attributes are set at the end
])
def test_no_attribute_is_set_through_a_link_swapped_in_after_the_walk(tmp_path, monkeypatch, swapped, victim_name):
    src, dest = tmp_path / 'src', tmp_path / 'dest'
    write(str(src / 'run.sh'), '#!/bin/sh\n', mtime=1_700_000_000, mode=0o750)
    write(str(src / 'config' / 'default.yaml'), 'lr: 0.1\n', mtime=1_700_000_000, mode=0o644)
    write(str(src / 'data' / 'keep.txt'), 'data\n', mtime=1_700_000_000)
    os.chmod(str(src / 'data'), 0o750)
    lc.local_copy(str(src) + '/', str(dest) + '/', lc.copy_options())
    # the next copy only sets attributes: the destination's modes differ from the source's
    os.chmod(str(dest / 'run.sh'), 0o700)
    os.chmod(str(dest / 'config' / 'default.yaml'), 0o600)
    os.chmod(str(dest / 'data'), 0o700)
    # what a link swapped in would point at: files that are not the copy's
    write(str(tmp_path / 'victim.sh'), 'secret', mode=0o600)
    write(str(tmp_path / 'victim_dir' / 'default.yaml'), 'secret', mode=0o600)
    os.chmod(str(tmp_path / 'victim_dir'), 0o700)
    before = {path: stat.S_IMODE(os.stat(path).st_mode) for path in
              (str(tmp_path / 'victim.sh'), str(tmp_path / 'victim_dir'), str(tmp_path / 'victim_dir' / 'default.yaml'))}
    real_apply = lc._apply

    def swap_then_apply(plan):
        assert plan.ops or plan.dirs  # the walk is done, nothing is changed yet
        target = str(dest / swapped)
        if os.path.isdir(target):
            shutil.rmtree(target)
        else:
            os.unlink(target)
        os.symlink(str(tmp_path / victim_name), target)
        return real_apply(plan)

    monkeypatch.setattr(lc, '_apply', swap_then_apply)
    with pytest.raises(OSError) as raised:
        lc.local_copy(str(src) + '/', str(dest) + '/', lc.copy_options())
    assert raised.value.errno in (errno.ELOOP, errno.ENOTDIR), raised.value
    after = {path: stat.S_IMODE(os.stat(path).st_mode) for path in before}
    assert after == before
    assert (tmp_path / 'victim.sh').read_text() == 'secret'


@needs_rsync
def test_code_only_leaves_out_git_environments_caches_and_what_gitignore_files_exclude_same_as_rsync(workspace):
    src = workspace / 'src'
    write(str(src / '.git' / 'HEAD'), 'ref: refs/heads/main\n')
    write(str(src / '.venv' / 'bin' / 'python'), '')
    write(str(src / 'envs' / 'py311' / 'pyvenv.cfg'), 'home = /usr/bin\n')
    write(str(src / 'envs' / 'notes.txt'), 'kept\n')
    write(str(src / 'odd[1]' / 'pyvenv.cfg'), 'home = /usr/bin\n')
    write(str(src / '.gitignore'), '# comment\n\n/data/\n*.ckpt\n')
    write(str(src / 'model.ckpt'), 'weights')
    write(str(src / 'pkg' / '.gitignore'), 'local_only.txt\n/top_only/\n')
    write(str(src / 'pkg' / 'local_only.txt'), 'x')
    write(str(src / 'pkg' / 'sub' / 'local_only.txt'), 'x')
    write(str(src / 'pkg' / 'top_only' / 'a.py'), 'x')
    write(str(src / 'pkg' / 'sub' / 'top_only' / 'b.py'), 'x')
    write(str(src / 'pkg' / 'sub' / 'deep.ckpt'), 'x')
    write(str(src / 'local_only.txt'), 'kept: only pkg/ ignores it\n')
    opts = rs.code_only_opts(str(src))
    assert opts == ['--exclude=.git', '--exclude=.venv/', '--exclude=venv/', '--exclude=__pycache__/',
                    '--exclude=/envs/py311/', '--exclude=/odd\\[1]/', '--filter=:- .gitignore']
    both = Both(workspace, opts + ROLE_OPTS)
    both.copy()
    copied = set(tree(both.local_dest))
    for gone in ('.git', '.venv', 'envs/py311', 'odd[1]', 'data', 'model.ckpt', 'pkg/local_only.txt',
                 'pkg/sub/local_only.txt', 'pkg/top_only', 'pkg/sub/deep.ckpt', 'config/__pycache__'):
        assert gone not in copied, gone
    for kept in ('train.py', 'envs/notes.txt', 'local_only.txt', 'pkg/sub/top_only/b.py', '.gitignore', 'pkg/.gitignore'):
        assert kept in copied, kept
    # again, with --delete: what is excluded on the node stays, what left the source goes
    os.remove(str(src / 'train.py'))
    write(os.path.join(both.local_dest, 'model.ckpt'), 'node copy', mtime=1_700_000_000)
    write(os.path.join(both.rsync_dest, 'model.ckpt'), 'node copy', mtime=1_700_000_000)
    both.opts.append('--delete')
    both.copy()
    assert 'train.py' not in tree(both.local_dest) and 'model.ckpt' in tree(both.local_dest)


def test_code_only_without_a_gitignore_has_no_filter_and_an_unknown_filter_is_left_to_rsync(tmp_path):
    write(str(tmp_path / 'a.py'), '')
    assert rs.code_only_opts(str(tmp_path))[-1] == '--exclude=__pycache__/'
    with pytest.raises(lc.Unsupported):
        lc.copy_options(['--filter=+ keep/'])
    assert lc.copy_options(['--filter', 'dir-merge,- .ignore'])['rules'] == [(lc.MERGE, '.ignore')]
