"""End-to-end: playbooks/sync.yml (role trainops.multinode.code_sync) on the embedded local default.

The local inventory's two logical nodes (ansible_connection=local) each get their own destination
under a temporary directory; the playbook runs through the ansible-runner entry (tools/trainops_run.py)
the way CI does, and the per-node results come back in artifact_data.trainops_code_sync.
No root needed.
"""
import hashlib
import json
import os
import subprocess
import time

import pytest

from code_tree import EXCLUDED, KEPT, USER_EXCLUDES, expected_digest, tree_digest, write_tree
from playbook_runner import entry_argv, finish, run_playbook, REPO

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NODES = ('node0', 'node1')


def git(cwd, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME='t', GIT_AUTHOR_EMAIL='t@example.com', GIT_COMMITTER_NAME='t',
               GIT_COMMITTER_EMAIL='t@example.com', GIT_CONFIG_NOSYSTEM='1', HOME=str(cwd))
    return subprocess.run(['git'] + list(args), cwd=str(cwd), env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


class Sync:
    """playbooks/sync.yml on the local inventory, every node's destination under ``root``."""

    def __init__(self, root):
        self.root = str(root)
        self.src = os.path.join(self.root, 'src')
        self.nodes = os.path.join(self.root, 'nodes')

    def dest(self, node):
        return os.path.join(self.nodes, node, 'code')

    def run(self, extra=None, check=False, timeout=300):
        extravars = {'dest': self.nodes + '/{{ inventory_hostname }}/code'}
        extravars.update(extra or {})
        if not check:
            return run_playbook('playbooks/sync.yml', self.root, extravars, timeout=timeout)
        argv = entry_argv('playbooks/sync.yml', self.root, extravars) + ['--check']
        started = time.monotonic()
        proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False)
        return finish(proc, argv, started)


def results(proc):
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    data = proc.summary['artifact_data']['trainops_code_sync']
    assert sorted(data) == list(NODES), data
    return data


def changed(proc):
    return {host: stats['changed'] for host, stats in proc.summary['stats'].items()}


@pytest.fixture
def sync(tmp_path):
    return Sync(tmp_path)


def test_rsync_copies_the_tree_to_every_node_and_an_unchanged_tree_changes_nothing(sync):
    write_tree(sync.src, dict(KEPT, **EXCLUDED))
    git(sync.src, 'init', '-q')   # .git is excluded by default
    want = expected_digest(KEPT)

    first = sync.run({'src': sync.src, 'excludes': USER_EXCLUDES})
    data = results(first)
    assert changed(first) == {'node0': 1, 'node1': 1}
    for node in NODES:
        assert tree_digest(sync.dest(node)) == want, node
        assert data[node]['mode'] == 'rsync' and data[node]['changed'] is True
        assert data[node]['files_transferred'] == len(KEPT)
        assert data[node]['dest'] == sync.dest(node) and data[node]['src'] == sync.src
        assert not os.path.exists(os.path.join(sync.dest(node), '.git'))
        with open(os.path.join(sync.dest(node), '.trainops-source')) as handle:
            assert handle.read() == os.path.realpath(sync.src) + '\n'

    # nothing changed: no change reported, nothing transferred
    second = sync.run({'src': sync.src, 'excludes': USER_EXCLUDES})
    data = results(second)
    assert changed(second) == {'node0': 0, 'node1': 0}
    assert [data[n]['files_transferred'] for n in NODES] == [0, 0]
    assert [data[n]['changed'] for n in NODES] == [False, False]

    # touched but not changed (new mtime, same content): still nothing, rsync compares checksums
    os.utime(os.path.join(sync.src, 'train.py'), (1, 1))
    third = sync.run({'src': sync.src, 'excludes': USER_EXCLUDES})
    assert [results(third)[n]['files_transferred'] for n in NODES] == [0, 0]

    # one file edited: check mode reports it and writes nothing ...
    write_tree(sync.src, {'pkg/model.py': 'HIDDEN = 2048\n'})
    dry = sync.run({'src': sync.src, 'excludes': USER_EXCLUDES}, check=True)
    data = results(dry)
    assert changed(dry) == {'node0': 1, 'node1': 1}
    for node in NODES:
        assert data[node]['check_mode'] is True and data[node]['files_transferred'] == 1
        assert tree_digest(sync.dest(node)) == want
    # ... and the real run transfers exactly that file
    fourth = sync.run({'src': sync.src, 'excludes': USER_EXCLUDES})
    data = results(fourth)
    want['pkg/model.py'] = hashlib.sha256(b'HIDDEN = 2048\n').hexdigest()
    for node in NODES:
        assert data[node]['files_transferred'] == 1
        assert [line.split(' ', 1)[1] for line in data[node]['items']] == ['pkg/model.py']
        assert tree_digest(sync.dest(node)) == want


def test_rsync_delete_removes_stale_files_only_when_enabled_and_keeps_excluded_ones(sync):
    write_tree(sync.src, KEPT)
    results(sync.run({'src': sync.src}))
    for node in NODES:
        write_tree(sync.dest(node), {'stale.py': 'old\n', 'experiments/run/log.txt': 'keep\n'})

    kept = sync.run({'src': sync.src})
    data = results(kept)
    assert changed(kept) == {'node0': 0, 'node1': 0}
    for node in NODES:
        assert os.path.exists(os.path.join(sync.dest(node), 'stale.py'))
        assert data[node]['deleted'] == 0

    deleted = sync.run({'src': sync.src, 'delete': True})
    data = results(deleted)
    assert changed(deleted) == {'node0': 1, 'node1': 1}
    for node in NODES:
        assert not os.path.exists(os.path.join(sync.dest(node), 'stale.py'))
        # excluded paths on the node are never deleted
        assert os.path.exists(os.path.join(sync.dest(node), 'experiments', 'run', 'log.txt'))
        assert data[node]['deleted'] == 1 and data[node]['files_transferred'] == 0


def make_repo(root):
    """A bare repository with an annotated tag v1 (2 files) and main one commit later (3 files)."""
    work, bare = os.path.join(root, 'work'), os.path.join(root, 'project.git')
    os.makedirs(work)
    git(work, 'init', '-q', '-b', 'main')
    write_tree(work, {'train.py': 'v1\n', 'README.md': 'readme\n'})
    git(work, 'add', '.')
    git(work, 'commit', '-q', '-m', 'one')
    git(work, 'tag', '-a', 'v1', '-m', 'release 1')
    write_tree(work, {'train.py': 'v2\n', 'model.py': 'm\n'})
    git(work, 'add', '.')
    git(work, 'commit', '-q', '-m', 'two')
    git(root, 'clone', '-q', '--bare', work, bare)
    return bare, git(work, 'rev-parse', 'v1^{commit}'), git(work, 'rev-parse', 'main')


def test_git_checks_out_one_commit_everywhere_and_never_drops_local_changes_silently(sync, tmp_path):
    bare, v1, v2 = make_repo(str(tmp_path / 'repo'))
    args = {'sync_mode': 'git', 'repo': 'file://' + bare}

    first = sync.run(dict(args, version='v1'))
    data = results(first)
    for node in NODES:
        assert git(sync.dest(node), 'rev-parse', 'HEAD') == v1
        assert data[node]['commit'] == v1 and data[node]['after'] == v1 and data[node]['before'] is None
        assert data[node]['files_transferred'] == 2

    # check mode: reports the change, checks out nothing
    dry = sync.run(dict(args, version='main'), check=True)
    data = results(dry)
    assert changed(dry) == {'node0': 1, 'node1': 1}
    assert [data[n]['check_mode'] and data[n]['after'] == v2 for n in NODES] == [True, True]
    assert [git(sync.dest(n), 'rev-parse', 'HEAD') for n in NODES] == [v1, v1]

    second = sync.run(dict(args, version='main'))
    data = results(second)
    assert changed(second) == {'node0': 1, 'node1': 1}
    for node in NODES:
        assert git(sync.dest(node), 'rev-parse', 'HEAD') == v2
        assert data[node]['before'] == v1 and data[node]['files_transferred'] == 2   # train.py, model.py
        assert sorted(data[node]['items']) == ['model.py', 'train.py']

    again = sync.run(dict(args, version='main'))
    data = results(again)
    assert changed(again) == {'node0': 0, 'node1': 0}
    assert [data[n]['files_transferred'] for n in NODES] == [0, 0]

    # a full commit id needs no resolving; an unknown name fails on the controller, naming it
    by_id = sync.run(dict(args, version=v1))
    assert [git(sync.dest(n), 'rev-parse', 'HEAD') for n in NODES] == [v1, v1]
    assert changed(by_id) == {'node0': 1, 'node1': 1}
    bad = sync.run(dict(args, version='no-such-branch'))
    assert bad.returncode != 0
    assert 'version=no-such-branch is not a branch, tag or commit' in bad.failure_text, bad.failure_text

    # a local edit on node1: node1 fails naming the file, node0 proceeds; nothing is lost
    with open(os.path.join(sync.dest('node1'), 'train.py'), 'w') as handle:
        handle.write('local edit\n')
    refused = sync.run(dict(args, version='main'))
    assert refused.returncode != 0
    assert 'node1' in refused.failure_text and 'local changes' in refused.failure_text
    assert 'train.py' in refused.failure_text
    assert 'node0' not in {f['host'] for f in refused.summary['failures']}
    assert open(os.path.join(sync.dest('node1'), 'train.py')).read() == 'local edit\n'
    assert git(sync.dest('node1'), 'rev-parse', 'HEAD') == v1

    forced = sync.run(dict(args, version='main', force=True))
    data = results(forced)
    assert open(os.path.join(sync.dest('node1'), 'train.py')).read() == 'v2\n'
    assert [git(sync.dest(n), 'rev-parse', 'HEAD') for n in NODES] == [v2, v2]
    assert data['node1']['local_changes'] == [' M train.py']


def artifact_text(sync):
    """Everything ansible-runner recorded under the runs' artifact directory, as one text."""
    texts = []
    for folder, _dirs, files in os.walk(os.path.join(sync.root, 'artifacts')):
        for name in files:
            with open(os.path.join(folder, name), encoding='utf-8', errors='replace') as handle:
                texts.append(handle.read())
    return '\n'.join(texts)


def test_git_mode_never_shows_or_records_the_credentials_of_a_repository_url(sync, tmp_path):
    """A token in the URL's user part or query string stays out of messages, output and ansible-runner's records:
    the role shows the URL without it (filter redact_url), and its git tasks are no_log while the URL carries one.
    Nothing listens on 127.0.0.1:9, so both runs fail: on the controller resolving the version, then (resolved
    in a local clone instead) on the nodes checking it out."""
    bare, v1, _v2 = make_repo(str(tmp_path / 'repo'))
    token, query_token = 'glpat-usertoken1234', 'querytoken5678'
    url = 'https://oauth2:%s@127.0.0.1:9/org/project.git?ref=x&access_token=%s' % (token, query_token)
    shown = 'https://127.0.0.1:9/org/project.git?ref=x'

    unresolved = sync.run({'sync_mode': 'git', 'repo': url, 'version': 'main'}, timeout=300)
    assert unresolved.returncode != 0
    assert 'version=main is not a branch, tag or commit of %s' % shown in unresolved.failure_text, unresolved.failure_text

    unreachable = sync.run({'sync_mode': 'git', 'repo': url, 'version': 'v1', 'trainops_code_sync_resolve_from': bare},
                           timeout=300)
    assert unreachable.returncode != 0
    assert 'Checking out %s (v1) from %s' % (v1, shown) in unreachable.failure_text, unreachable.failure_text
    assert sorted(f['host'] for f in unreachable.summary['failures']) == list(NODES)

    for proc in (unresolved, unreachable):
        seen = proc.stdout + proc.stderr + json.dumps(proc.summary) + artifact_text(sync)
        assert token not in seen and query_token not in seen


@pytest.mark.parametrize('extra, words', [
    ({}, ['Name the directory to copy', '-e src=']),
    ({'src': '/nonexistent/trainops-code'}, ['src=/nonexistent/trainops-code is not a directory']),
    ({'src': '/etc', 'dest': '/'}, ["dest=/ "]),
    ({'src': '/etc', 'delete': 'maybe'}, ['delete=maybe']),
    ({'sync_mode': 'svn'}, ['sync_mode=svn']),
    ({'sync_mode': 'git'}, ['git mode needs the repository URL']),
])
def test_bad_input_fails_before_any_node_is_touched(sync, extra, words):
    proc = sync.run(extra, timeout=300)
    assert proc.returncode != 0
    for word in words:
        assert word in proc.failure_text, proc.failure_text
    assert not os.path.exists(sync.nodes)


def test_the_role_twice_in_one_playbook_each_run_with_its_own_variables(sync, tmp_path):
    """Included from other playbooks the role takes its trainops_code_sync_* variables only (no short
    knobs, no values left behind by an earlier run in the same playbook)."""
    write_tree(sync.src, KEPT)
    bare, v1, _v2 = make_repo(str(tmp_path / 'repo'))
    playbook = tmp_path / 'two.yml'
    playbook.write_text('''---
- name: Copy a tree
  hosts: trainops_nodes
  gather_facts: false
  roles:
    - role: trainops.multinode.code_sync
      vars:
        trainops_code_sync_src: %(src)s
        trainops_code_sync_dest: "%(nodes)s/{{ inventory_hostname }}/rsync"
- name: Then check out a commit
  hosts: trainops_nodes
  gather_facts: false
  tasks:
    - name: Check out v1
      ansible.builtin.include_role:
        name: trainops.multinode.code_sync
      vars:
        trainops_code_sync_mode: git
        trainops_code_sync_repo: %(repo)s
        trainops_code_sync_version: v1
        trainops_code_sync_dest: "%(nodes)s/{{ inventory_hostname }}/git"
''' % {'src': sync.src, 'nodes': sync.nodes, 'repo': bare})
    # knobs are not taken outside playbooks/sync.yml: this src would fail the first play
    proc = run_playbook(str(playbook), sync.root, {'src': '/nonexistent', 'sync_mode': 'git'})
    data = results(proc)
    want = expected_digest(KEPT)
    for node in NODES:
        assert tree_digest(os.path.join(sync.nodes, node, 'rsync')) == want
        assert git(os.path.join(sync.nodes, node, 'git'), 'rev-parse', 'HEAD') == v1
        assert data[node]['mode'] == 'git' and data[node]['commit'] == v1   # the last run's result


def test_excludes_knob_takes_a_comma_separated_string(sync):
    write_tree(sync.src, dict(KEPT, **{'secret/token.txt': 'x\n', 'big.ckpt': 'x\n'}))
    results(sync.run({'src': sync.src, 'excludes': 'secret/, *.ckpt'}))
    for node in NODES:
        assert tree_digest(sync.dest(node)) == expected_digest(KEPT)


def test_nodes_sharing_the_destination_get_it_once(sync):
    # both logical nodes' destination is one directory, as an NFS home is for real nodes
    write_tree(sync.src, dict(KEPT, **EXCLUDED))
    shared = os.path.join(sync.nodes, 'shared-home', 'code')
    first = sync.run({'src': sync.src, 'dest': shared, 'delete': True, 'excludes': USER_EXCLUDES})
    data = results(first)
    assert 'shared_with' not in data['node0'] and data['node0']['files_transferred'] == len(KEPT)
    assert data['node1']['shared_with'] == 'node0' and data['node1']['changed'] is False
    assert changed(first) == {'node0': 1, 'node1': 0}
    assert tree_digest(shared) == expected_digest(KEPT)
    # the token that tells the nodes apart lives beside the destination, never in it
    assert sorted(os.listdir(os.path.dirname(shared))) == ['.trainops-dir-id', 'code']
    again = sync.run({'src': sync.src, 'dest': shared, 'delete': True, 'excludes': USER_EXCLUDES})
    assert changed(again) == {'node0': 0, 'node1': 0}


def test_git_mode_checks_out_a_shared_destination_once(sync, tmp_path):
    # one checkout that both nodes see (an NFS home): one clone, through node0, never two git processes in it
    bare, v1, v2 = make_repo(str(tmp_path / 'repo'))
    shared = os.path.join(sync.nodes, 'shared-home', 'code')
    args = {'sync_mode': 'git', 'repo': 'file://' + bare, 'dest': shared}
    first = sync.run(dict(args, version='v1'))
    data = results(first)
    assert 'shared_with' not in data['node0'] and data['node0']['after'] == v1
    assert data['node1']['shared_with'] == 'node0' and data['node1']['commit'] == v1
    assert changed(first) == {'node0': 1, 'node1': 0}
    assert git(shared, 'rev-parse', 'HEAD') == v1
    assert git(shared, 'status', '--porcelain') == ''  # the token lives beside the checkout, not in it
    second = sync.run(dict(args, version='main'))
    assert changed(second) == {'node0': 1, 'node1': 0} and git(shared, 'rev-parse', 'HEAD') == v2


def test_another_source_into_the_same_destination_is_refused_naming_both_unless_replace_source(sync, tmp_path):
    write_tree(sync.src, KEPT)
    assert sync.run({'src': sync.src}).returncode == 0
    other = str(tmp_path / 'other')
    write_tree(other, {'train.py': 'print("other")\n'})
    refused = sync.run({'src': other})
    assert refused.returncode != 0
    where = 'the directory %s on node0 holds the code of %s (its .trainops-source); this sync would put %s over it' % (
        sync.dest('node0'), os.path.realpath(sync.src), os.path.realpath(other))
    assert where in refused.failure_text, refused.failure_text
    assert tree_digest(sync.dest('node0')) == expected_digest(KEPT)
    assert sync.run({'src': other, 'replace_source': True}).returncode == 0
    with open(os.path.join(sync.dest('node0'), '.trainops-source')) as handle:
        assert handle.read() == os.path.realpath(other) + '\n'
