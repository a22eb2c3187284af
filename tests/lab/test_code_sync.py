"""playbooks/sync.yml (role trainops.multinode.code_sync) across real SSH hosts: the lab of hack/lab.py.

Each lab node has its own /srv/trainops and /tmp, so every copy really crosses SSH (rsync with the
lab's known_hosts, host keys checked) and every git checkout really fetches over the network from a
`git daemon` that the test runs on the controller's lab address. Contents are compared over the lab's
own SSH, not through Ansible. Root only; holds the lab's session lock for the whole module.

What a copy or a checkout is on its own (byte for byte, excludes, a second run changing nothing, counts of
files, local edits refused and forced) is proved once elsewhere: on real hosts by the Molecule scenario
molecule/code_sync (rsync with delete and an exclude, git at a tag the controller resolved, idempotence), in
detail on the local default by tests/e2e/test_code_sync_local.py. Here: what only real hosts show.
"""
import os
import signal
import socket
import subprocess
import time
import uuid

import pytest

from code_tree import KEPT, SOURCE_MARKER, expected_digest, write_tree
from playbook_runner import run_playbook

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.usefixtures('lab_session_lock')]

NODES = 3


def node_digest(lab, node, dest):
    """{relative path: sha256} of every regular file under dest on the node, read over the lab's SSH, but the sync's
    source marker (code_tree.SOURCE_MARKER), which code_tree.tree_digest leaves out too."""
    proc = lab.ssh(node, "cd %s && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum" % dest)
    found = {}
    for line in proc.stdout.splitlines():
        checksum, path = line.split('  ', 1)
        if path[2:] != SOURCE_MARKER:
            found[path[2:]] = checksum
    return found


def node_exists(lab, node, path):
    return lab.ssh(node, 'test -e %s' % path, check=False).returncode == 0


def git(cwd, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME='t', GIT_AUTHOR_EMAIL='t@example.com', GIT_COMMITTER_NAME='t',
               GIT_COMMITTER_EMAIL='t@example.com', GIT_CONFIG_NOSYSTEM='1', HOME=str(cwd))
    return subprocess.run(['git'] + list(args), cwd=str(cwd), env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def results(proc, lab):
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
    data = proc.summary['artifact_data']['trainops_code_sync']
    assert sorted(data) == lab.names, data
    return data


def changed(proc):
    return {host: stats['changed'] for host, stats in proc.summary['stats'].items()}


@pytest.fixture
def lab3(lab_nodes):
    return lab_nodes(NODES)


@pytest.fixture
def dest(lab3):
    """A fresh destination on every node (node-private /srv/trainops), removed afterwards."""
    path = '/srv/trainops/code-sync-test-%s/workspace' % uuid.uuid4().hex[:8]
    yield path
    for node in lab3.names:
        lab3.ssh(node, 'rm -rf %s' % os.path.dirname(path), check=False)


def sync(lab, tmp_path, **extravars):
    return run_playbook('playbooks/sync.yml', str(tmp_path), extravars, inventory=lab.inventory, timeout=300)


def test_rsync_delete_removes_a_stale_file_only_when_enabled(lab3, dest, tmp_path):
    src = str(tmp_path / 'src')
    write_tree(src, KEPT)
    results(sync(lab3, tmp_path, src=src, dest=dest), lab3)
    for node in lab3.names:
        lab3.ssh(node, 'echo old > %s/stale.py && mkdir -p %s/experiments && echo keep > %s/experiments/log.txt'
                 % (dest, dest, dest))

    kept = sync(lab3, tmp_path, src=src, dest=dest)
    results(kept, lab3)
    assert changed(kept) == {n: 0 for n in lab3.names}
    assert all(node_exists(lab3, n, dest + '/stale.py') for n in lab3.names)

    deleted = sync(lab3, tmp_path, src=src, dest=dest, delete=True)
    data = results(deleted, lab3)
    assert changed(deleted) == {n: 1 for n in lab3.names}
    for node in lab3.names:
        assert not node_exists(lab3, node, dest + '/stale.py')
        assert node_exists(lab3, node, dest + '/experiments/log.txt')   # excluded: never deleted
        assert data[node]['deleted'] == 1
        assert node_digest(lab3, node, dest) == dict(expected_digest(KEPT), **{'experiments/log.txt': expected_digest(
            {'x': 'keep\n'})['x']})


def test_rsync_checks_host_keys_with_the_inventorys_known_hosts(lab3, dest, tmp_path):
    """A node whose host key is not in known_hosts gets nothing: synchronize's default
    (StrictHostKeyChecking=no, UserKnownHostsFile=/dev/null) is not what the role runs."""
    victim = lab3.nodes[1]
    with open(lab3.known_hosts) as handle:
        lines = [line for line in handle if not line.startswith(victim['name'] + ',')]
    known_hosts = tmp_path / 'known_hosts'
    known_hosts.write_text(''.join(lines))
    with open(lab3.inventory) as handle:
        inventory = handle.read().replace(lab3.known_hosts, str(known_hosts))
    assert str(known_hosts) in inventory
    (tmp_path / 'hosts.yml').write_text(inventory)
    src = str(tmp_path / 'src')
    write_tree(src, KEPT)

    proc = run_playbook('playbooks/sync.yml', str(tmp_path), {'src': src, 'dest': dest},
                        inventory=str(tmp_path / 'hosts.yml'), timeout=300)
    assert proc.returncode != 0
    assert [f['host'] for f in proc.summary['failures']] == [victim['name']], proc.failure_text
    assert 'Host key verification failed' in proc.failure_text, proc.failure_text
    assert 'Host-key checking is never turned off' in proc.failure_text
    assert not node_exists(lab3, victim['name'], dest)
    for node in lab3.names:
        if node != victim['name']:
            assert node_digest(lab3, node, dest) == expected_digest(KEPT)


def free_port(address):
    with socket.socket() as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]


@pytest.fixture
def git_daemon(lab3, tmp_path):
    """A bare repository served by `git daemon` on the controller's lab address; stopped by PID."""
    base = tmp_path / 'served'
    work = tmp_path / 'work'
    base.mkdir()
    work.mkdir()
    git(work, 'init', '-q', '-b', 'main')
    write_tree(str(work), {'train.py': 'v1\n', 'README.md': 'readme\n'})
    git(work, 'add', '.')
    git(work, 'commit', '-q', '-m', 'one')
    git(work, 'tag', '-a', 'v1', '-m', 'release 1')
    write_tree(str(work), {'train.py': 'v2\n', 'model.py': 'm\n'})
    git(work, 'add', '.')
    git(work, 'commit', '-q', '-m', 'two')
    git(tmp_path, 'clone', '-q', '--bare', str(work), str(base / 'project.git'))
    address = lab3.data['controller']['address']
    port = free_port(address)
    proc = subprocess.Popen(['git', 'daemon', '--reuseaddr', '--listen=%s' % address, '--port=%d' % port,
                             '--base-path=%s' % base, '--export-all', '--informative-errors', str(base)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection((address, port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, 'git daemon did not start'
                time.sleep(0.2)
        yield {'url': 'git://%s:%d/project.git' % (address, port), 'work': str(work),
               'v1': git(work, 'rev-parse', 'v1^{commit}'), 'v2': git(work, 'rev-parse', 'main')}
    finally:
        # the daemon leads its own process group (start_new_session): it and its per-connection children
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=10)
                break
            except subprocess.TimeoutExpired:
                continue


def heads(lab, dest):
    return {node: lab.ssh(node, 'git -C %s rev-parse HEAD' % dest).stdout.strip() for node in lab.names}


def test_git_checks_out_the_commit_resolved_on_the_controller_on_every_node(lab3, dest, tmp_path, git_daemon):
    """Every node fetches over the network (git://) and checks out the one commit the controller resolved: the
    version of the served repository, or (trainops_code_sync_resolve_from) the HEAD of a clone on the controller."""
    url, v1, v2 = git_daemon['url'], git_daemon['v1'], git_daemon['v2']

    first = sync(lab3, tmp_path, sync_mode='git', repo=url, version='v1', dest=dest)
    data = results(first, lab3)
    assert heads(lab3, dest) == {n: v1 for n in lab3.names}
    for node in lab3.names:
        assert data[node]['commit'] == v1 and data[node]['files_transferred'] == 2
        assert lab3.ssh(node, 'cat %s/train.py' % dest).stdout == 'v1\n'

    # the controller decides: HEAD of a controller clone that sits at v1 while the served HEAD is main
    git(git_daemon['work'], 'checkout', '-q', '--detach', v1)
    decided = sync(lab3, tmp_path, sync_mode='git', repo=url, version='main', dest=dest)
    data = results(decided, lab3)
    assert heads(lab3, dest) == {n: v2 for n in lab3.names}
    assert {data[n]['before'] for n in lab3.names} == {v1}
    pinned = sync(lab3, tmp_path, sync_mode='git', repo=url, version='HEAD', dest=dest,
                  trainops_code_sync_resolve_from=git_daemon['work'])
    data = results(pinned, lab3)
    assert heads(lab3, dest) == {n: v1 for n in lab3.names}
    assert {data[n]['commit'] for n in lab3.names} == {v1}


def test_a_dest_under_home_is_the_remote_users_home_on_each_node(lab3, tmp_path, git_daemon):
    """The default dest is ~/.trainops/workspace when trainops_node_root is not set: `~` must be the
    home of the user Ansible logs in as on the node (root's /root/.ansible is private to each lab node)."""
    name = 'code-sync-test-%s' % uuid.uuid4().hex[:8]
    src = str(tmp_path / 'src')
    write_tree(src, KEPT)
    try:
        copied = sync(lab3, tmp_path, src=src, dest='~/.ansible/%s/deep/rsync' % name)
        results(copied, lab3)
        checked_out = sync(lab3, tmp_path, sync_mode='git', repo=git_daemon['url'], version='v1',
                           dest='~/.ansible/%s/git' % name)
        data = results(checked_out, lab3)
        assert heads(lab3, '/root/.ansible/%s/git' % name) == {n: git_daemon['v1'] for n in lab3.names}
        for node in lab3.names:
            assert node_digest(lab3, node, '/root/.ansible/%s/deep/rsync' % name) == expected_digest(KEPT)
            assert data[node]['dest'] == '/root/.ansible/%s/git' % name
        assert not os.path.exists('/root/.ansible/%s' % name)   # not the controller's
    finally:
        for node in lab3.names:
            lab3.ssh(node, 'rm -rf /root/.ansible/%s' % name, check=False)
