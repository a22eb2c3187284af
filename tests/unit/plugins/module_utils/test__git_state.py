# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests of the git state: porcelain v2 parsing, collect() against a fake git, redaction, compare() and its table."""

from __future__ import annotations

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _git_state as gs

SHA = '656ce8f5a3eb34b7041d3c53df3339339aaa7398'
SHA2 = '1f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c'
H0 = '0000000000000000000000000000000000000000'
BLOB = '78981922613b2afb6025042ff6bd878ac1994e85'


def z(*records):
    """Porcelain -z output: every record NUL terminated."""
    return ''.join(r + '\0' for r in records)


def one(xy, path, sub='N...'):
    return '1 {0} {1} 100644 100644 100644 {2} {2} {3}'.format(xy, sub, BLOB, path)


def two(xy, path, orig, score='R100'):
    return ['2 {0} N... 100644 100644 100644 {1} {1} {2} {3}'.format(xy, BLOB, score, path), orig]


def unmerged(path):
    return 'u UU N... 100644 100644 100644 100644 {0} {0} {0} {1}'.format(BLOB, path)


def branch(oid=SHA, head='main', upstream=None, ab=None):
    records = ['# branch.oid ' + oid, '# branch.head ' + head]
    if upstream:
        records.append('# branch.upstream ' + upstream)
    if ab:
        records.append('# branch.ab ' + ab)
    return records


# --- parse_status ---------------------------------------------------------------------------------

def test_parse_clean_branch_with_upstream_counts():
    st = gs.parse_status(z(*branch(upstream='origin/main', ab='+3 -12')))
    assert st['oid'] == SHA and st['head'] == 'main' and st['detached'] is False
    assert st['upstream'] == 'origin/main' and st['ab'] is True
    assert (st['ahead'], st['behind']) == (3, 12)
    assert st['entries'] == [] and st['submodules'] == []


def test_parse_detached_head():
    st = gs.parse_status(z(*branch(head='(detached)')))
    assert st['detached'] is True and st['head'] is None and st['oid'] == SHA
    assert st['upstream'] is None and st['ahead'] is None


def test_parse_initial_commit_with_untracked_files():
    st = gs.parse_status(z('# branch.oid (initial)', '# branch.head main', '? README.md', '? src/'))
    assert st['oid'] is None and st['head'] == 'main' and st['detached'] is False
    assert [(e['path'], e['status'], e['kind']) for e in st['entries']] == [
        ('README.md', '??', 'untracked'), ('src/', '??', 'untracked')]


def test_parse_rename_copy_and_paths_with_blanks_and_newlines():
    out = z(*(branch() + two('R.', 'new name.py', 'old name.py') + two('C.', 'b.py', 'a.py', score='C75')
              + [one('.M', 'dir with space/f\nle.txt')]))
    entries = gs.parse_status(out)['entries']
    assert entries[0] == dict(path='new name.py', orig_path='old name.py', status='R.', kind='renamed', submodule=False)
    assert entries[1] == dict(path='b.py', orig_path='a.py', status='C.', kind='copied', submodule=False)
    assert entries[2] == dict(path='dir with space/f\nle.txt', orig_path=None, status='.M', kind='changed',
                              submodule=False)
    assert len(entries) == 3


def test_parse_upstream_gone_has_no_ab_line():
    st = gs.parse_status(z(*branch(head='feat', upstream='origin/feat')))
    assert st['upstream'] == 'origin/feat' and st['ab'] is False
    assert st['ahead'] is None and st['behind'] is None


def test_parse_ahead_behind_not_computed():
    st = gs.parse_status(z(*branch(upstream='origin/main', ab='+? -?')))
    assert st['ab'] is True and st['ahead'] is None and st['behind'] is None


def test_parse_unmerged_submodules_and_ignored():
    out = z(*(branch() + [unmerged('conflict.py'), one('.M', 'third_party/nccl', sub='SC..'),
                          one('.M', 'third_party/rccl', sub='S.MU'), '! build/']))
    st = gs.parse_status(out)
    assert [(e['path'], e['kind'], e['submodule']) for e in st['entries']] == [
        ('conflict.py', 'unmerged', False), ('third_party/nccl', 'changed', True), ('third_party/rccl', 'changed', True)]
    assert st['submodules'] == [
        dict(path='third_party/nccl', commit_changed=True, modified=False, untracked=False),
        dict(path='third_party/rccl', commit_changed=False, modified=True, untracked=True)]


def test_count_changes():
    out = z(*(branch() + [one('M.', 'a'), one('.M', 'b'), one('MM', 'c'), '? d', unmerged('e')]
              + two('R.', 'f', 'g')))
    assert gs.count_changes(gs.parse_status(out)['entries']) == dict(staged=3, unstaged=2, untracked=1, unmerged=1)


def test_parse_log():
    assert gs.parse_log(SHA + '\0' + SHA[:12] + '\0Fix: a; b\0' + '2026-01-05T10:11:12+01:00\n') == (
        SHA, SHA[:12], 'Fix: a; b', '2026-01-05T10:11:12+01:00')


# --- redaction ------------------------------------------------------------------------------------

@pytest.mark.parametrize('url, expected', [
    ('https://user:token@github.com/org/repo.git', 'https://github.com/org/repo.git'),
    ('https://ghp_abcdef@github.com/org/repo.git', 'https://github.com/org/repo.git'),
    ('http://u:p%40ss@host:8080/r', 'http://host:8080/r'),
    ('https://github.com/org/repo.git', 'https://github.com/org/repo.git'),
    ('ssh://git@host:2222/org/repo.git', 'ssh://git@host:2222/org/repo.git'),
    ('ssh://git:secret@host/org/repo.git', 'ssh://host/org/repo.git'),
    ('git@github.com:org/repo.git', 'git@github.com:org/repo.git'),
    ('/srv/git/repo.git', '/srv/git/repo.git'),
    ('https://host/path/with@sign', 'https://host/path/with@sign'),
    (None, None),
    # credentials in the query string go, the other parameters stay in their order, the fragment too
    ('https://gitlab.example.com/org/repo.git?private_token=glpat-abc', 'https://gitlab.example.com/org/repo.git'),
    ('https://host/r.git?ref=main&access_token=ya29.x&depth=1#frag', 'https://host/r.git?ref=main&depth=1#frag'),
    ('https://host/r.git?ACCESS_TOKEN=a&Token=b&job_token=c&refresh_token=d', 'https://host/r.git'),
    ('https://host/r?password=p&passwd=q&pwd=r&client_secret=s&api_key=t&apikey=u&key=v&auth=w', 'https://host/r'),
    ('https://acct.blob.core.windows.net/c/r.tgz?sv=2024&sig=abc%2Bdef&se=2026', 'https://acct.blob.core.windows.net/c/r.tgz?sv=2024&se=2026'),
    ('https://b.s3.amazonaws.com/r.git?X-Amz-Credential=AK&X-Amz-Signature=s&X-Amz-Security-Token=t&X-Amz-Date=1',
     'https://b.s3.amazonaws.com/r.git?X-Amz-Date=1'),
    ('https://host/r?access%5Ftoken=a&name=x', 'https://host/r?name=x'),  # percent-encoded names too
    ('https://user:pw@host/r.git?token=t', 'https://host/r.git'),  # both at once
    ('ssh://git@host/r.git?keyring=1&monkey=2', 'ssh://git@host/r.git?keyring=1&monkey=2'),  # only whole names
    ('https://host/r?', 'https://host/r'),
    ('https://host/token/r.git#access_token=frag', 'https://host/token/r.git#access_token=frag'),
])
def test_redact_url(url, expected):
    assert gs.redact_url(url) == expected


@pytest.mark.parametrize('name, secret', [
    ('access_token', True), ('Private-Token', True), ('X-Goog-Signature', True), ('SIG', True), ('client_secret', True),
    ('key', True), (' key ', True), ('api-key', True),
    ('ref', False), ('depth', False), ('keyring', False), ('author', False), ('signed', False), ('', False)])
def test_credential_query_names(name, secret):
    assert gs.is_secret_query_name(name) is secret


# --- collect() with a fake git --------------------------------------------------------------------

class FakeRunner(gs.Runner):
    """Answers git commands by subcommand; records every argv and environment."""

    def __init__(self, answers, kind='dir'):
        super(FakeRunner, self).__init__(self._fake, git='/usr/bin/git')
        self.answers, self.kind, self.calls = answers, kind, []

    def _fake(self, argv, env):
        self.calls.append((argv, env))
        sub = [a for a in argv[1:] if a in ('rev-parse', 'status', 'log', 'remote')][0]
        answer = self.answers[sub]
        return answer(argv) if callable(answer) else answer

    def path_kind(self, path):
        return self.kind

    def argv(self, sub):
        return [argv for argv, env in self.calls if sub in argv][0]


def answers(status, top='/srv/code', log=None, url='https://github.com/org/repo.git'):
    return {
        'rev-parse': (0, top + '\n', ''),
        'status': (0, status, ''),
        'log': log or (0, SHA + '\0' + SHA[:12] + '\0Train faster\0' + '2026-01-05T10:11:12+01:00\n', ''),
        'remote': (0, url + '\n', '') if url else (2, '', "error: No such remote 'origin'\n"),
    }


def test_collect_clean_branch():
    runner = FakeRunner(answers(z(*branch(upstream='origin/main', ab='+0 -2'))))
    st = gs.collect(runner, '/srv/code/sub')
    assert st['state'] == 'repository' and st['is_repo'] is True and st['toplevel'] == '/srv/code'
    assert (st['branch'], st['detached'], st['commit'], st['short']) == ('main', False, SHA, SHA[:12])
    assert (st['subject'], st['date']) == ('Train faster', '2026-01-05T10:11:12+01:00')
    assert (st['upstream'], st['upstream_gone'], st['ahead'], st['behind']) == ('origin/main', False, 0, 2)
    assert st['remote'] == 'origin' and st['remote_url'] == 'https://github.com/org/repo.git'
    assert st['dirty'] is False and st['files'] == [] and st['files_total'] == 0
    assert st['path'] == '/srv/code/sub' and st['message'] is None


def test_collect_runs_read_only_git_with_the_safe_directory_of_the_top():
    runner = FakeRunner(answers(z(*branch())))
    gs.collect(runner, '/srv/code/sub')
    assert runner.argv('rev-parse') == ['/usr/bin/git', '-C', '/srv/code/sub', '-c', 'safe.directory=*', 'rev-parse',
                                        '--show-toplevel']
    status = runner.argv('status')
    assert status[:3] == ['/usr/bin/git', '-C', '/srv/code']
    assert 'safe.directory=/srv/code' in status and 'core.fsmonitor=false' in status
    assert status[status.index('status'):] == ['status', '--porcelain=v2', '--branch', '-z', '--untracked-files=normal']
    assert runner.argv('log')[-2:] == ['HEAD', '--'] and '--no-show-signature' in runner.argv('log')
    assert runner.argv('remote')[-3:] == ['remote', 'get-url', 'origin']
    for _argv, env in runner.calls:
        assert env['LANG'] == 'C' and env['LC_ALL'] == 'C' and env['GIT_OPTIONAL_LOCKS'] == '0'
    assert len(runner.calls) == 4


def test_collect_dirty_capped_by_max_files():
    records = branch() + [one('.M', 'f{0}.py'.format(i)) for i in range(5)] + ['? new.txt']
    st = gs.collect(FakeRunner(answers(z(*records))), '/srv/code', max_files=2)
    assert st['dirty'] is True and st['files_total'] == 6 and st['files_truncated'] is True
    assert [f['path'] for f in st['files']] == ['f0.py', 'f1.py']
    assert st['counts'] == dict(staged=0, unstaged=5, untracked=1, unmerged=0)


def test_collect_max_files_zero_lists_nothing_but_counts():
    st = gs.collect(FakeRunner(answers(z(*(branch() + ['? a'])))), '/srv/code', max_files=0)
    assert st['files'] == [] and st['files_total'] == 1 and st['files_truncated'] is True and st['dirty'] is True


def test_collect_untracked_false_asks_git_for_no_untracked():
    runner = FakeRunner(answers(z(*branch())))
    st = gs.collect(runner, '/srv/code', untracked=False)
    assert runner.argv('status')[-1] == '--untracked-files=no'
    assert st['untracked_checked'] is False


def test_collect_initial_commit_skips_log():
    runner = FakeRunner(answers(z('# branch.oid (initial)', '# branch.head main', '? a.py'), url=None))
    st = gs.collect(runner, '/srv/code')
    assert st['initial'] is True and st['commit'] is None and st['short'] is None and st['branch'] == 'main'
    assert st['subject'] is None and st['remote_url'] is None and st['dirty'] is True
    assert not [c for c in runner.calls if 'log' in c[0]]


def test_collect_detached_and_upstream_gone():
    st = gs.collect(FakeRunner(answers(z(*branch(head='(detached)')))), '/srv/code')
    assert st['detached'] is True and st['branch'] is None and st['initial'] is False and st['commit'] == SHA
    st = gs.collect(FakeRunner(answers(z(*branch(head='feat', upstream='origin/feat')))), '/srv/code')
    assert st['upstream_gone'] is True and st['ahead'] is None
    # status.aheadBehind=false: counts not computed, but the upstream is there
    st = gs.collect(FakeRunner(answers(z(*branch(upstream='origin/main', ab='+? -?')))), '/srv/code')
    assert st['upstream_gone'] is False and st['upstream'] == 'origin/main' and st['ahead'] is None


def test_collect_redacts_remote_url_and_uses_the_remote_asked():
    runner = FakeRunner(answers(z(*branch()), url='https://bot:s3cret@git.example.com/ml/train.git'))
    st = gs.collect(runner, '/srv/code', remote='upstream')
    assert st['remote'] == 'upstream' and st['remote_url'] == 'https://git.example.com/ml/train.git'
    assert runner.argv('remote')[-1] == 'upstream'
    assert 's3cret' not in repr(st)


@pytest.mark.parametrize('kind, state', [('missing', 'missing'), ('not_dir', 'not_a_directory')])
def test_collect_path_not_a_directory(kind, state):
    runner = FakeRunner({}, kind=kind)
    st = gs.collect(runner, '/srv/nothing')
    assert st['state'] == state and st['is_repo'] is False and '/srv/nothing' in st['message']
    assert runner.calls == []


@pytest.mark.parametrize('err, state', [
    ('fatal: not a git repository (or any of the parent directories): .git\n', 'not_a_repository'),
    ('fatal: this operation must be run in a work tree\n', 'bare'),
])
def test_collect_not_a_work_tree(err, state):
    runner = FakeRunner({'rev-parse': (128, '', err)})
    st = gs.collect(runner, '/srv/code')
    assert st['state'] == state and st['is_repo'] is False and st['branch'] is None and st['dirty'] is False
    assert len(runner.calls) == 1


def test_collect_other_git_error_raises_with_state():
    runner = FakeRunner({'rev-parse': (128, '', "fatal: cannot change to '/srv/code': Permission denied\n")})
    with pytest.raises(gs.GitStateError) as info:
        gs.collect(runner, '/srv/code')
    assert 'Permission denied' in info.value.msg
    assert info.value.state['state'] == 'error' and info.value.state['message'] == info.value.msg


def test_collect_status_failure_raises():
    ans = answers('')
    ans['status'] = (128, '', "fatal: detected dubious ownership in repository at '/srv/code'\n")
    with pytest.raises(gs.GitStateError) as info:
        gs.collect(FakeRunner(ans), '/srv/code')
    assert 'dubious ownership' in info.value.msg and info.value.state['toplevel'] == '/srv/code'


def test_collect_rejects_negative_max_files():
    with pytest.raises(gs.GitStateError):
        gs.collect(FakeRunner({}), '/srv/code', max_files=-1)


def test_local_runner_drops_variables_that_redirect_git(monkeypatch):
    captured = {}

    def fake_run(argv, **kwargs):
        captured.update(kwargs, argv=argv)

        class Done(object):
            returncode, stdout, stderr = 0, b'out\xff', b''
        return Done()

    monkeypatch.setenv('GIT_DIR', '/elsewhere/.git')
    monkeypatch.setattr(gs.subprocess, 'run', fake_run)
    rc, out, err = gs.Runner.local(git='/opt/git').git(['status'])
    assert (rc, out, err) == (0, 'out\ufffd', '')
    assert captured['argv'] == ['/opt/git', 'status']
    assert 'GIT_DIR' not in captured['env'] and captured['env']['GIT_OPTIONAL_LOCKS'] == '0'


# --- compare() ------------------------------------------------------------------------------------

def state(branch='main', commit=SHA, dirty_files=(), detached=False, kind='repository', path='/srv/code'):
    st = gs.empty_state(path)
    if kind != 'repository':
        st.update(state=kind, message='not a work tree')
        return st
    files = [dict(path=p, orig_path=None, status='.M', kind='changed', submodule=False) for p in dirty_files]
    st.update(state='repository', is_repo=True, toplevel=path, branch=None if detached else branch,
              detached=detached, commit=commit, short=commit[:12] if commit else None,
              dirty=bool(files), files=files, files_total=len(files))
    return st


def rows(table):
    return table.splitlines()[1:]


def assert_aligned(table):
    lines = table.splitlines()
    bars = [[i for i, c in enumerate(line) if c == '|'] for line in lines]
    assert all(b == bars[0] for b in bars), table
    assert len(bars[0]) == 3
    assert not [line for line in lines if line != line.rstrip()]


def test_compare_all_equal():
    ok, problems, table = gs.compare(state(), {'node0': state(), 'node1': state()})
    assert ok is True and problems == []
    lines = rows(table)
    assert [line.split('|')[0].strip() for line in lines] == ['controller', 'node0', 'node1']
    assert lines[0].split('|')[-1].strip() == 'reference'
    assert [line.split('|')[-1].strip() for line in lines[1:]] == ['ok', 'ok']
    assert 'main @ ' + SHA[:12] in lines[1] and '| clean' in lines[1]
    assert not [line for line in lines if line.startswith('!')]
    assert_aligned(table)


def test_compare_one_node_on_another_branch():
    ok, problems, table = gs.compare(state(), {'node0': state(), 'node1': state(branch='feature', commit=SHA2)})
    assert ok is False
    assert problems == ['node1: on branch feature (controller is on branch main)',
                        'node1: at commit {0} (controller is at {1})'.format(SHA2[:12], SHA[:12])]
    lines = rows(table)
    assert lines[2].startswith('! node1') and 'feature @ ' + SHA2[:12] in lines[2] and 'FAIL: on branch feature' in lines[2]
    assert lines[1].startswith('  node0') and lines[0].startswith('  controller')
    assert_aligned(table)


def test_compare_same_branch_other_commit():
    ok, problems, _table = gs.compare(state(), {'node0': state(commit=SHA2)})
    assert ok is False and problems == ['node0: at commit {0} (controller is at {1})'.format(SHA2[:12], SHA[:12])]


def test_compare_one_dirty_node():
    ok, problems, table = gs.compare(state(), {'node0': state(dirty_files=['train.py', 'cfg.yaml']), 'node1': state()})
    assert ok is False
    assert problems == ['node0: dirty: 2 changed or untracked files (train.py, cfg.yaml)']
    lines = rows(table)
    assert lines[1].startswith('! node0') and 'dirty (2 files)' in lines[1]
    assert lines[2].startswith('  node1') and lines[2].endswith('| ok')
    assert_aligned(table)


def test_compare_dirty_allowed():
    ok, problems, table = gs.compare(state(dirty_files=['a']), {'node0': state(dirty_files=['train.py'])},
                                     allow_dirty=True)
    assert ok is True and problems == []
    lines = rows(table)
    assert 'dirty (1 file)' in lines[0] and 'dirty (1 file)' in lines[1] and lines[1].endswith('| ok')


def test_compare_dirty_reference_fails_unless_allowed():
    ok, problems, table = gs.compare(state(dirty_files=['x.py']), {'node0': state()})
    assert ok is False and problems == ['controller: dirty: 1 changed or untracked file (x.py)']
    assert rows(table)[0].startswith('! controller') and 'FAIL: dirty' in rows(table)[0]


def test_compare_not_a_repository_and_missing():
    per_node = {'node0': state(kind='not_a_repository', path='/srv/code'), 'node1': state(kind='missing', path='/srv/x')}
    ok, problems, table = gs.compare(state(), per_node)
    assert ok is False
    assert problems == ['node0: /srv/code is not a git repository', 'node1: path /srv/x does not exist']
    lines = rows(table)
    assert lines[1].startswith('! node0') and '(not a repository)' in lines[1] and '| - ' in lines[1]
    assert lines[2].startswith('! node1') and '(path missing)' in lines[2]
    assert_aligned(table)


def test_compare_detached_node_when_reference_is_on_a_branch():
    # at the reference's commit (code_sync's git mode checks it out detached): the same code
    ok, problems, _table = gs.compare(state(), {'node0': state(detached=True)})
    assert ok is True and problems == []
    # at another commit: both said
    ok, problems, _table = gs.compare(state(), {'node0': state(detached=True, commit=SHA2)})
    assert ok is False and problems == [
        'node0: detached HEAD at {0} (controller is on branch main)'.format(SHA2[:12]),
        'node0: at commit {0} (controller is at {1})'.format(SHA2[:12], SHA[:12])]


def test_compare_detached_reference_compares_commits_only():
    ok, problems, table = gs.compare(state(detached=True), {'node0': state(branch='main'), 'node1': state(detached=True),
                                                            'node2': state(branch='x', commit=SHA2)})
    assert ok is False
    assert problems == ['node2: at commit {0} (controller is at {1})'.format(SHA2[:12], SHA[:12])]
    assert '(detached) @ ' + SHA[:12] in rows(table)[0]


def test_compare_checks_every_node_not_only_the_first():
    per_node = dict(('node{0}'.format(i), state()) for i in range(6))
    per_node['node3'] = state(branch='dev')
    per_node['node5'] = state(dirty_files=['a'])
    ok, problems, table = gs.compare(state(), per_node)
    assert ok is False
    assert [p.split(':')[0] for p in problems] == ['node3', 'node5']
    assert [line.split()[1] for line in rows(table) if line.startswith('!')] == ['node3', 'node5']
    assert len(rows(table)) == 7


def test_compare_accepts_registered_results():
    per_node = {
        'node0': {'changed': False, 'git': state()},
        'node1': {'failed': True, 'msg': 'git is not installed on this node (no git in PATH)',
                  'git': dict(state(), state='error', message='git is not installed on this node (no git in PATH)')},
        'node2': {'unreachable': True, 'msg': 'ssh: connect to host node2 port 22: No route to host'},
        'node3': None,
    }
    ok, problems, table = gs.compare({'changed': False, 'git': state()}, per_node)
    assert ok is False
    assert problems == ['node1: git failed: git is not installed on this node (no git in PATH)',
                        'node2: no git state: unreachable (ssh: connect to host node2 port 22: No route to host)',
                        'node3: no git state (nothing was returned)']
    lines = rows(table)
    assert lines[1].endswith('| ok') and '(git failed)' in lines[2] and '(no state)' in lines[3]


def test_compare_reference_not_a_repository_fails_every_node():
    ok, problems, _table = gs.compare(state(kind='not_a_repository', path='/home/me/proj'), {'node0': state()},
                                      reference_name='localhost')
    assert ok is False
    assert problems == ['localhost: /home/me/proj is not a git repository',
                        'node0: cannot be compared: localhost has no usable git state']


def test_compare_initial_commit_everywhere_is_equal():
    ok, problems, table = gs.compare(state(commit=None), {'node0': state(commit=None)})
    assert ok is True and problems == []
    assert 'main @ (no commits)' in rows(table)[1]
