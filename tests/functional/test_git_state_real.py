# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Real git: repositories built in a temporary directory, read through the module_utils and through
``ansible localhost -m trainops.multinode.git_state``, then compared the way a launch preflight would.

Git runs with an empty global configuration (GIT_CONFIG_GLOBAL) and without the system one, so the
machine's settings cannot change the results.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _git_state as gs

pytestmark = [pytest.mark.real]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSIBLE = os.path.join(os.path.dirname(sys.executable), 'ansible')
OTHER_UID = 65534
IS_ROOT = hasattr(os, 'geteuid') and os.geteuid() == 0

if shutil.which('git') is None:
    pytest.skip('git is not installed', allow_module_level=True)


@pytest.fixture(scope='module')
def git_env(tmp_path_factory):
    home = tmp_path_factory.mktemp('home')
    (home / 'gitconfig').write_text('')
    env = dict(os.environ, HOME=str(home), GIT_CONFIG_GLOBAL=str(home / 'gitconfig'), GIT_CONFIG_NOSYSTEM='1',
               GIT_AUTHOR_NAME='Trainops Test', GIT_AUTHOR_EMAIL='test@example.invalid',
               GIT_COMMITTER_NAME='Trainops Test', GIT_COMMITTER_EMAIL='test@example.invalid')
    for name in gs.REDIRECTING_ENV:
        env.pop(name, None)
    return env


@pytest.fixture(autouse=True)
def isolated_git_config(git_env, monkeypatch):
    """The module_utils run git with os.environ: give them the same isolated configuration."""
    for name in ('HOME', 'GIT_CONFIG_GLOBAL', 'GIT_CONFIG_NOSYSTEM'):
        monkeypatch.setenv(name, git_env[name])


def git(env, cwd, *args):
    proc = subprocess.run(['git'] + list(args), cwd=str(cwd), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, check=False)
    if proc.returncode != 0:
        raise AssertionError('git {0} failed in {1}: {2}'.format(' '.join(args), cwd, proc.stderr))
    return proc.stdout.strip()


def commit_file(env, cwd, name, text, message):
    (cwd / name).write_text(text)
    git(env, cwd, 'add', name)
    git(env, cwd, 'commit', '-q', '-m', message)
    return git(env, cwd, 'rev-parse', 'HEAD')


@pytest.fixture(scope='module')
def repos(tmp_path_factory, git_env):
    """Every kind of checkout the nodes of a job can have, cloned from one upstream."""
    env = git_env
    base = tmp_path_factory.mktemp('repos')
    up = base / 'upstream'
    up.mkdir()
    git(env, up, 'init', '-q', '-b', 'main')
    c1 = commit_file(env, up, 'train.py', 'print("v1")\n', 'First version')
    (up / 'config').mkdir()
    c2 = commit_file(env, up, 'config/a.yaml', 'lr: 0.1\n', 'Add the config')
    git(env, up, 'checkout', '-q', '-b', 'feature')
    c_feature = commit_file(env, up, 'train.py', 'print("feature")\n', 'Try a feature')
    git(env, up, 'checkout', '-q', '-b', 'gone', 'main')
    git(env, up, 'checkout', '-q', 'main')

    def clone(name, *extra):
        path = base / name
        git(env, base, 'clone', '-q', *(list(extra) + [str(up), name]))
        return path

    r = dict(upstream=up, commits=dict(c1=c1, main=c2, feature=c_feature), base=base)
    r['controller'] = clone('controller')
    r['same'] = clone('same')
    r['branch'] = clone('branch', '-b', 'feature')
    r['dirty'] = clone('dirty')
    git(env, r['dirty'], 'mv', 'config/a.yaml', 'config/b.yaml')
    (r['dirty'] / 'train.py').write_text('print("local hack")\n')
    (r['dirty'] / 'notes.txt').write_text('todo\n')
    (r['dirty'] / 'scratch').mkdir()
    (r['dirty'] / 'scratch' / 'x.py').write_text('\n')
    r['detached'] = clone('detached')
    git(env, r['detached'], 'checkout', '-q', '--detach', c1)
    r['gone'] = clone('gone', '-b', 'gone')
    r['notrepo'] = base / 'plain'
    r['notrepo'].mkdir()
    (r['notrepo'] / 'train.py').write_text('print("copied by hand")\n')
    r['initial'] = base / 'initial'
    r['initial'].mkdir()
    git(env, r['initial'], 'init', '-q', '-b', 'main')
    (r['initial'] / 'README').write_text('new\n')
    r['creds'] = clone('creds')
    git(env, r['creds'], 'remote', 'add', 'mirror', 'https://bot:s3cr3t-token@git.example.invalid/ml/train.git')
    # the upstream branch of the "gone" clone disappears, as after a merged and deleted pull request
    git(env, up, 'branch', '-q', '-D', 'gone')
    git(env, r['gone'], 'fetch', '-q', '--prune')
    return r


def collect(path, **kwargs):
    return gs.collect(gs.Runner.local(), str(path), **kwargs)


def ansible_git_state(git_env, args, check=False):
    """Run the module through ``ansible localhost -m``; return (rc, the host's result)."""
    env = dict(git_env, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_LOAD_CALLBACK_PLUGINS='1',
               ANSIBLE_STDOUT_CALLBACK='ansible.posix.json', ANSIBLE_NOCOLOR='1', ANSIBLE_DEPRECATION_WARNINGS='0')
    argv = [ANSIBLE, 'localhost', '-m', 'trainops.multinode.git_state', '-a', json.dumps(args)]
    if check:
        argv.append('--check')
    proc = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False, timeout=180)
    # the profile_tasks callback enabled by ansible.cfg prints its own lines around the JSON document
    start = proc.stdout.find('\n{')
    assert start >= 0, 'no JSON from ansible (rc={0}): {1}\n{2}'.format(proc.returncode, proc.stdout, proc.stderr)
    doc, _end = json.JSONDecoder().raw_decode(proc.stdout[start + 1:])
    return proc.returncode, doc['plays'][0]['tasks'][0]['hosts']['localhost']


# --- through the module_utils ---------------------------------------------------------------------

def test_clean_clone_on_main(repos):
    st = collect(repos['same'])
    assert st['state'] == 'repository' and st['toplevel'] == os.path.realpath(str(repos['same']))
    assert (st['branch'], st['detached'], st['initial']) == ('main', False, False)
    assert st['commit'] == repos['commits']['main'] and st['short'] == repos['commits']['main'][:12]
    assert st['subject'] == 'Add the config' and st['date'].startswith('20')
    assert (st['upstream'], st['upstream_gone'], st['ahead'], st['behind']) == ('origin/main', False, 0, 0)
    assert st['remote_url'] == str(repos['upstream'])
    assert st['dirty'] is False and st['files'] == [] and st['files_total'] == 0


def test_clone_on_another_branch(repos):
    st = collect(repos['branch'])
    assert st['branch'] == 'feature' and st['commit'] == repos['commits']['feature']
    assert st['upstream'] == 'origin/feature' and st['subject'] == 'Try a feature'


def test_dirty_tree_with_rename_modification_and_untracked(repos):
    st = collect(repos['dirty'])
    assert st['dirty'] is True
    by_path = dict((f['path'], f) for f in st['files'])
    assert by_path['config/b.yaml']['kind'] == 'renamed' and by_path['config/b.yaml']['orig_path'] == 'config/a.yaml'
    assert by_path['config/b.yaml']['status'] == 'R.'
    assert by_path['train.py']['status'] == '.M' and by_path['train.py']['kind'] == 'changed'
    assert by_path['notes.txt']['status'] == '??' and by_path['scratch/']['kind'] == 'untracked'
    assert st['files_total'] == 4 and st['counts'] == dict(staged=1, unstaged=1, untracked=2, unmerged=0)

    capped = collect(repos['dirty'], max_files=2)
    assert len(capped['files']) == 2 and capped['files_total'] == 4 and capped['files_truncated'] is True

    tracked_only = collect(repos['dirty'], untracked=False)
    assert sorted(f['path'] for f in tracked_only['files']) == ['config/b.yaml', 'train.py']


def test_untracked_files_alone_are_dirty_unless_not_looked_for(repos, git_env, tmp_path):
    path = tmp_path / 'untracked_only'
    git(git_env, tmp_path, 'clone', '-q', str(repos['upstream']), str(path))
    (path / 'new.py').write_text('\n')
    assert collect(path)['dirty'] is True
    assert collect(path, untracked=False)['dirty'] is False


def test_detached_checkout(repos):
    st = collect(repos['detached'])
    assert st['detached'] is True and st['branch'] is None and st['upstream'] is None
    assert st['commit'] == repos['commits']['c1'] and st['subject'] == 'First version'


def test_directory_that_is_not_a_repository(repos):
    st = collect(repos['notrepo'])
    assert st['state'] == 'not_a_repository' and st['is_repo'] is False and st['commit'] is None


def test_missing_path_file_and_bare_repository(repos, git_env, tmp_path):
    assert collect(tmp_path / 'nope')['state'] == 'missing'
    assert collect(repos['notrepo'] / 'train.py')['state'] == 'not_a_directory'
    git(git_env, tmp_path, 'init', '-q', '--bare', 'bare.git')
    assert collect(tmp_path / 'bare.git')['state'] == 'bare'
    assert collect(repos['same'] / '.git')['state'] == 'bare'


def test_upstream_gone(repos):
    st = collect(repos['gone'])
    assert st['branch'] == 'gone' and st['upstream'] == 'origin/gone'
    assert st['upstream_gone'] is True and st['ahead'] is None and st['behind'] is None


def test_no_commits_yet(repos):
    st = collect(repos['initial'])
    assert st['state'] == 'repository' and st['initial'] is True and st['branch'] == 'main'
    assert st['commit'] is None and st['short'] is None and st['subject'] is None
    assert [f['path'] for f in st['files']] == ['README'] and st['remote_url'] is None


def test_subdirectory_reports_the_whole_work_tree(repos):
    st = collect(repos['dirty'] / 'config')
    assert st['toplevel'] == os.path.realpath(str(repos['dirty']))
    assert st['files_total'] == 4


def test_credentials_are_removed_from_remote_urls(repos):
    st = collect(repos['creds'], remote='mirror')
    assert st['remote'] == 'mirror' and st['remote_url'] == 'https://git.example.invalid/ml/train.git'
    assert 's3cr3t' not in json.dumps(st)
    assert collect(repos['creds'], remote='nosuch')['remote_url'] is None


def test_changed_submodule(repos, git_env, tmp_path):
    env = git_env
    sub_up = tmp_path / 'lib'
    sub_up.mkdir()
    git(env, sub_up, 'init', '-q', '-b', 'main')
    first = commit_file(env, sub_up, 'lib.py', '1\n', 'lib 1')
    commit_file(env, sub_up, 'lib.py', '2\n', 'lib 2')
    sup = tmp_path / 'super'
    git(env, tmp_path, 'clone', '-q', str(repos['upstream']), str(sup))
    git(env, sup, '-c', 'protocol.file.allow=always', 'submodule', '-q', 'add', str(sub_up), 'third_party/lib')
    git(env, sup, 'commit', '-q', '-m', 'Add lib')
    assert collect(sup)['submodules'] == [] and collect(sup)['dirty'] is False
    git(env, sup / 'third_party' / 'lib', 'checkout', '-q', first)
    (sup / 'third_party' / 'lib' / 'extra.txt').write_text('x\n')
    st = collect(sup)
    assert st['dirty'] is True
    assert st['submodules'] == [dict(path='third_party/lib', commit_changed=True, modified=False, untracked=True)]
    assert st['files'][0]['submodule'] is True


def test_reading_never_writes_the_index(repos, git_env, tmp_path):
    path = tmp_path / 'idx'
    git(git_env, tmp_path, 'clone', '-q', str(repos['upstream']), str(path))
    index = path / '.git' / 'index'
    os.utime(str(index), (1000000000, 1000000000))
    os.utime(str(path / 'train.py'))          # stat data changes, content does not: status would refresh the index
    before = index.stat().st_mtime
    st = collect(path)
    assert st['dirty'] is False
    assert index.stat().st_mtime == before and not (path / '.git' / 'index.lock').exists()
    git(git_env, path, 'status', '--porcelain')   # plain git status does refresh and write it
    assert index.stat().st_mtime != before


@pytest.fixture(scope='module')
def other_owner(repos, git_env):
    if not IS_ROOT:
        pytest.skip('needs root to give a checkout to another uid')
    path = repos['base'] / 'other_owner'
    git(git_env, repos['base'], 'clone', '-q', str(repos['upstream']), str(path))
    (path / 'notes.txt').write_text('owned by someone else\n')
    for root, dirs, files in os.walk(str(path)):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), OTHER_UID, OTHER_UID)
    os.lchown(str(path), OTHER_UID, OTHER_UID)
    return path


def test_repository_owned_by_another_uid(other_owner, git_env, repos):
    plain = subprocess.run(['git', '-C', str(other_owner), 'status', '--porcelain'], env=git_env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert plain.returncode == 128 and 'dubious ownership' in plain.stderr   # git alone refuses it
    st = collect(other_owner)
    assert st['state'] == 'repository' and st['commit'] == repos['commits']['main']
    assert [f['path'] for f in st['files']] == ['notes.txt']
    assert collect(other_owner / 'config')['toplevel'] == os.path.realpath(str(other_owner))


def test_compare_real_checkouts(repos):
    reference = collect(repos['controller'])
    per_node = dict((name, collect(repos[name])) for name in ('same', 'branch', 'dirty', 'detached', 'notrepo'))
    ok, problems, table = gs.compare(reference, per_node)
    assert ok is False
    assert sorted(set(p.split(':')[0] for p in problems)) == ['branch', 'detached', 'dirty', 'notrepo']
    marked = [line.split()[1] for line in table.splitlines() if line.startswith('!')]
    assert marked == ['branch', 'dirty', 'detached', 'notrepo']
    assert table.splitlines()[1].startswith('  controller') and table.splitlines()[2].rstrip().endswith('| ok')

    ok, problems, _table = gs.compare(reference, {'same': per_node['same'], 'dirty': per_node['dirty']},
                                      allow_dirty=True)
    assert ok is True and problems == []


# --- through ansible ------------------------------------------------------------------------------

def test_ansible_module_matches_the_module_utils(repos, git_env):
    rc, res = ansible_git_state(git_env, dict(path=str(repos['same'])))
    assert rc == 0 and res.get('failed') is not True and res['changed'] is False
    assert res['git'] == collect(repos['same'])


def test_ansible_dirty_tree_in_check_mode(repos, git_env):
    rc, res = ansible_git_state(git_env, dict(path=str(repos['dirty']), max_files=1, untracked=False), check=True)
    assert rc == 0
    st = res['git']
    assert st['dirty'] is True and st['files_total'] == 2 and len(st['files']) == 1 and st['files_truncated'] is True


def test_ansible_not_a_repository_and_failure(repos, git_env):
    rc, res = ansible_git_state(git_env, dict(path=str(repos['notrepo'])))
    assert rc == 0 and res['git']['state'] == 'not_a_repository'
    rc, res = ansible_git_state(git_env, dict(path=str(repos['notrepo']), max_files=-1))
    assert rc != 0 and res['failed'] is True and 'max_files' in res['msg']


def test_ansible_repository_owned_by_another_uid(other_owner, git_env, repos):
    rc, res = ansible_git_state(git_env, dict(path=str(other_owner)))
    assert rc == 0, res
    assert res['git']['commit'] == repos['commits']['main'] and res['git']['dirty'] is True


def test_ansible_results_compared_with_the_controller(repos, git_env):
    reference = collect(repos['controller'])
    per_node = {}
    for name in ('same', 'branch'):
        rc, res = ansible_git_state(git_env, dict(path=str(repos[name])))
        assert rc == 0
        per_node[name] = res          # a registered result: compare() reads its "git"
    ok, problems, table = gs.compare(reference, per_node, reference_name='localhost')
    assert ok is False
    feature, main = repos['commits']['feature'][:12], repos['commits']['main'][:12]
    assert problems == ['branch: on branch feature (localhost is on branch main)',
                        'branch: at commit {0} (localhost is at {1})'.format(feature, main)]
    assert [line.split()[1] for line in table.splitlines() if line.startswith('!')] == ['branch']
