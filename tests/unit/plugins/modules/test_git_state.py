# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests of the thin trainops.multinode.git_state module: main() with a fake git behind run_command."""

from __future__ import annotations

import yaml

from unittest.mock import patch

from ansible.module_utils.testing import patch_module_args

from module_harness import ExitJson, FailJson, assert_documentation_matches_argument_spec

from ansible_collections.trainops.multinode.plugins.modules import git_state as module

SHA = '656ce8f5a3eb34b7041d3c53df3339339aaa7398'


class FakeGit(object):
    """Stands in for AnsibleModule.run_command: answers git by subcommand and records every call."""

    def __init__(self, top, status=None, rev_parse=None, url='https://user:tok@git.example.com/ml/train.git'):
        self.calls = []
        self.answers = {
            'rev-parse': rev_parse or (0, top + '\n', ''),
            'status': (0, status if status is not None else
                       '# branch.oid {0}\0# branch.head main\0# branch.upstream origin/main\0# branch.ab +1 -0\0'
                       '1 .M N... 100644 100644 100644 {0} {0} train.py\0? notes/\0'.format(SHA), ''),
            'log': (0, '{0}\0{1}\0Train faster\0{2}\n'.format(SHA, SHA[:12], '2026-01-05T10:11:12+01:00'), ''),
            'remote': (0, url + '\n', ''),
        }

    def __call__(self, _module, args, **kwargs):
        self.calls.append((args, kwargs))
        sub = [a for a in args if a in self.answers][0]
        return self.answers[sub]


def run(args, git, check_mode=False, git_bin='/usr/bin/git'):
    if check_mode:
        args = dict(args, _ansible_check_mode=True)

    def run_command(self, cmd, **kwargs):
        return git(self, cmd, **kwargs)

    with patch_module_args(args), \
            patch('ansible.module_utils.basic.AnsibleModule.run_command', run_command), \
            patch('ansible.module_utils.basic.AnsibleModule.get_bin_path', lambda self, name, *a, **k: git_bin):
        try:
            module.main()
        except ExitJson as e:
            return 'exit', e.args[0]
        except FailJson as e:
            return 'fail', e.args[0]
    raise AssertionError('module did not exit')


def test_reports_state_under_git(tmp_path):
    git = FakeGit(str(tmp_path))
    kind, res = run(dict(path=str(tmp_path)), git)
    assert kind == 'exit' and res['changed'] is False
    st = res['git']
    assert st['state'] == 'repository' and st['toplevel'] == str(tmp_path)
    assert (st['branch'], st['commit'], st['short'], st['subject']) == ('main', SHA, SHA[:12], 'Train faster')
    assert (st['upstream'], st['ahead'], st['behind']) == ('origin/main', 1, 0)
    assert st['remote_url'] == 'https://git.example.com/ml/train.git'
    assert st['dirty'] is True and [f['path'] for f in st['files']] == ['train.py', 'notes/']
    assert 'ansible_facts' not in res


def test_git_runs_with_locale_c_no_locks_and_no_expansion(tmp_path):
    # the path option (type path) expands ~ and $VARS itself; run_command must not expand them again
    path = str(tmp_path / 'a b')
    (tmp_path / 'a b').mkdir()
    git = FakeGit(path)
    kind, _res = run(dict(path=path), git)
    assert kind == 'exit'
    assert len(git.calls) == 4
    for argv, kwargs in git.calls:
        assert argv[0] == '/usr/bin/git'
        assert kwargs['expand_user_and_vars'] is False
        env = kwargs['environ_update']
        assert env['LANG'] == 'C' and env['LC_ALL'] == 'C' and env['GIT_OPTIONAL_LOCKS'] == '0'
    assert git.calls[0][0][1:3] == ['-C', path]
    assert 'safe.directory=' + path in git.calls[1][0]
    assert git.calls[3][0][-3:] == ['remote', 'get-url', 'origin']


def test_options_reach_git(tmp_path):
    git = FakeGit(str(tmp_path))
    kind, res = run(dict(path=str(tmp_path), remote='upstream', max_files=1, untracked=False), git)
    assert kind == 'exit'
    assert git.calls[1][0][-1] == '--untracked-files=no'
    assert git.calls[3][0][-1] == 'upstream'
    assert res['git']['remote'] == 'upstream' and res['git']['untracked_checked'] is False
    assert len(res['git']['files']) == 1 and res['git']['files_total'] == 2 and res['git']['files_truncated'] is True


def test_check_mode_reads_the_same(tmp_path):
    kind, res = run(dict(path=str(tmp_path)), FakeGit(str(tmp_path)), check_mode=True)
    assert kind == 'exit' and res['changed'] is False and res['git']['commit'] == SHA


def test_not_a_repository_is_not_a_failure(tmp_path):
    git = FakeGit(str(tmp_path), rev_parse=(128, '', 'fatal: not a git repository (or any of the parent directories): .git\n'))
    kind, res = run(dict(path=str(tmp_path)), git)
    assert kind == 'exit' and res['git']['state'] == 'not_a_repository' and res['git']['is_repo'] is False
    assert len(git.calls) == 1


def test_missing_path_runs_no_git(tmp_path):
    git = FakeGit(str(tmp_path))
    kind, res = run(dict(path=str(tmp_path / 'nope')), git)
    assert kind == 'exit' and res['git']['state'] == 'missing' and git.calls == []


def test_git_error_fails_with_the_partial_state(tmp_path):
    git = FakeGit(str(tmp_path))
    git.answers['status'] = (128, '', 'fatal: index file corrupt\n')
    kind, res = run(dict(path=str(tmp_path)), git)
    assert kind == 'fail' and 'index file corrupt' in res['msg']
    assert res['git']['state'] == 'error' and res['git']['toplevel'] == str(tmp_path)


def test_no_git_installed(tmp_path):
    kind, res = run(dict(path=str(tmp_path)), FakeGit(str(tmp_path)), git_bin=None)
    assert kind == 'fail' and 'git is not installed' in res['msg']
    assert res['git']['state'] == 'error' and res['git']['path'] == str(tmp_path)


def test_negative_max_files(tmp_path):
    git = FakeGit(str(tmp_path))
    kind, res = run(dict(path=str(tmp_path), max_files=-1), git)
    assert kind == 'fail' and 'max_files' in res['msg'] and git.calls == []


def test_path_is_required():
    kind, res = run({}, FakeGit('/x'))
    assert kind == 'fail' and 'path' in res['msg']


def test_documentation_matches_argument_spec():
    captured = assert_documentation_matches_argument_spec(module)
    assert captured['supports_check_mode'] is True
    returned = yaml.safe_load(module.RETURN)['git']['contains']
    from ansible_collections.trainops.multinode.plugins.module_utils._git_state import empty_state
    assert sorted(returned) == sorted(empty_state('/x'))
