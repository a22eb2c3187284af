"""hack/check_fragments.py against real git repositories made in a temporary directory."""
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                      'hack', 'check_fragments.py')
GIT_ENV = {'GIT_AUTHOR_NAME': 't', 'GIT_AUTHOR_EMAIL': 't@example.invalid', 'GIT_COMMITTER_NAME': 't',
           'GIT_COMMITTER_EMAIL': 't@example.invalid', 'GIT_CONFIG_NOSYSTEM': '1', 'HOME': '/nonexistent'}


class Repo:
    def __init__(self, path):
        self.path = str(path)

    def git(self, *args):
        env = {k: v for k, v in os.environ.items() if not k.startswith('GIT_') and not k.startswith('TRAINOPS_')}
        env.update(GIT_ENV)
        return subprocess.run(('git', '-C', self.path) + args, env=env, check=True, capture_output=True,
                              text=True).stdout

    def write(self, rel, text='x\n'):
        path = os.path.join(self.path, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'a') as handle:
            handle.write(text)

    def commit(self, *files, message='change'):
        for rel in files:
            self.write(rel)
        self.git('add', '-A')
        self.git('commit', '-q', '--no-verify', '-m', message)

    def check(self, *args, env=None):
        run_env = {k: v for k, v in os.environ.items() if not k.startswith('TRAINOPS_')}
        run_env.update(GIT_ENV, **(env or {}))
        return subprocess.run([sys.executable, SCRIPT] + list(args), cwd=self.path, env=run_env,
                              capture_output=True, text=True, check=False)


@pytest.fixture
def repo(tmp_path):
    repo = Repo(tmp_path / 'repo')
    os.makedirs(repo.path)
    repo.git('init', '-q', '-b', 'main')
    repo.commit('README.md', 'roles/job/defaults/main.yml', message='start')
    return repo


def test_branch_touching_roles_needs_a_fragment(repo):
    repo.git('checkout', '-q', '-b', 'topic')
    repo.commit('roles/job/defaults/main.yml')
    repo.commit('docs/x.md')
    missing = repo.check()
    assert missing.returncode == 1, missing.stdout + missing.stderr
    assert 'M roles/job/defaults/main.yml' in missing.stderr and 'docs/x.md' not in missing.stderr
    assert 'merge base of main and HEAD' in missing.stdout
    # a fragment in any commit of the branch will do
    repo.commit('changelogs/fragments/topic.yml')
    assert repo.check().returncode == 0


def test_docs_only_change_needs_none(repo):
    repo.git('checkout', '-q', '-b', 'topic')
    repo.commit('docs/x.md', 'tests/unit/test_x.py')
    proc = repo.check()
    assert proc.returncode == 0, proc.stderr
    assert '0 changed under plugins/ roles/' in proc.stdout


def test_on_main_the_last_commit_is_checked(repo):
    repo.commit('plugins/modules/m.py', message='no fragment')
    missing = repo.check()
    assert missing.returncode == 1 and 'A plugins/modules/m.py' in missing.stderr
    assert 'first parent of HEAD' in missing.stdout
    # a later commit without shipped changes passes: only the last one is looked at
    repo.commit('docs/x.md')
    assert repo.check().returncode == 0


def test_on_main_a_merge_is_checked_as_the_whole_branch(repo):
    repo.git('checkout', '-q', '-b', 'topic')
    repo.commit('plugins/filter/f.py', 'changelogs/fragments/f.yml')
    repo.commit('plugins/filter/f.py', message='fix, no fragment of its own')
    repo.git('checkout', '-q', 'main')
    repo.commit('docs/y.md')
    repo.git('merge', '-q', '--no-ff', '--no-edit', 'topic')
    assert repo.check().returncode == 0
    repo.git('checkout', '-q', '-b', 'other', 'main~1')
    repo.commit('roles/job/tasks/main.yml')
    repo.git('checkout', '-q', 'main')
    repo.git('merge', '-q', '--no-ff', '--no-edit', 'other')
    missing = repo.check()
    assert missing.returncode == 1 and 'roles/job/tasks/main.yml' in missing.stderr


def test_uncommitted_changes_and_new_files_count(repo):
    repo.write('roles/job/defaults/main.yml')
    assert repo.check().returncode == 1
    repo.write('changelogs/fragments/new.yml')     # untracked, not ignored
    proc = repo.check()
    assert proc.returncode == 0 and 'changelogs/fragments/new.yml' in proc.stdout


def test_a_deleted_fragment_is_not_a_fragment(repo):
    repo.commit('changelogs/fragments/old.yml')
    repo.git('checkout', '-q', '-b', 'topic')
    repo.git('rm', '-q', 'changelogs/fragments/old.yml')
    repo.commit('plugins/modules/m.py')
    assert repo.check().returncode == 1


def test_explicit_base(repo):
    repo.git('tag', 'v1')
    repo.commit('roles/r/tasks/main.yml', 'changelogs/fragments/r.yml')
    repo.commit('docs/z.md')
    # on main the last commit alone passes; since v1 too, since it includes the fragment
    assert repo.check().returncode == 0
    assert repo.check('--base', 'v1').returncode == 0
    repo.commit('plugins/modules/m.py')
    assert repo.check(env={'TRAINOPS_FRAGMENT_BASE': 'v1'}).returncode == 0
    assert repo.check('--base', 'HEAD~1').returncode == 1
    unknown = repo.check('--base', 'nosuchref')
    assert unknown.returncode == 2 and 'nosuchref is not in this clone' in unknown.stderr


def test_shallow_clone_is_an_error_not_a_pass(repo, tmp_path):
    repo.commit('plugins/modules/m.py')
    clone = Repo(tmp_path / 'clone')
    subprocess.run(['git', 'clone', '-q', '--depth', '1', 'file://' + repo.path, clone.path], check=True,
                   env=dict(os.environ, **GIT_ENV))
    proc = clone.check()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert 'git fetch --unshallow' in proc.stderr


def test_a_single_commit_has_nothing_to_compare(tmp_path):
    repo = Repo(tmp_path / 'one')
    os.makedirs(repo.path)
    repo.git('init', '-q', '-b', 'main')
    repo.commit('plugins/modules/m.py')
    proc = repo.check()
    assert proc.returncode == 0 and 'HEAD is the first commit' in proc.stdout
