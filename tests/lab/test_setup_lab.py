"""Issue flow on the lab: set up the nodes, sync one git commit, launch from the nodes' own
checkouts; a node on another branch refuses the launch on every node. (A node with uncommitted changes, refused
unless allow_dirty, is the same comparison: tests/e2e/test_launch_local.py checks it.)

The code is a git repository under /var/tmp (the nodes have a private /tmp but see /var/tmp), cloned
on the controller; code_sync's git mode checks out the controller's commit on every node and the
launch (trainops_sync_workspace: false) compares every node's checkout with the controller's.
"""
import os
import shutil
import subprocess

import pytest

from playbook_runner import free_port, run_playbook
from lab_processes import job_processes

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.usefixtures('lab_session_lock')]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GIT_ENV = dict(os.environ, GIT_AUTHOR_NAME='t', GIT_AUTHOR_EMAIL='t@example.com', GIT_COMMITTER_NAME='t',
               GIT_COMMITTER_EMAIL='t@example.com')


def git(cwd, *args):
    return subprocess.run(['git', '-C', str(cwd)] + list(args), check=True, capture_output=True, text=True,
                          env=GIT_ENV).stdout.strip()


@pytest.fixture
def code(tmp_path):
    """A bare repository the nodes can clone (file:// under /var/tmp) and the controller's clone of it."""
    base = os.path.join('/var/tmp', 'trainops-test-setup-%d' % os.getpid())
    shutil.rmtree(base, ignore_errors=True)
    work = os.path.join(base, 'work')
    shutil.copytree(os.path.join(REPO, 'files', 'workspace'), work,
                    ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))
    git(base, 'init', '-q', '-b', 'main', work)
    git(work, 'add', '-A')
    git(work, 'commit', '-q', '-m', 'training code')
    git(base, 'clone', '-q', '--bare', work, os.path.join(base, 'code.git'))
    git(work, 'remote', 'add', 'origin', 'file://' + os.path.join(base, 'code.git'))
    yield {'work': work, 'repo': 'file://' + os.path.join(base, 'code.git'), 'commit': git(work, 'rev-parse', 'HEAD')}
    shutil.rmtree(base, ignore_errors=True)


WORKSPACE = '/srv/trainops/setup-test-%d' % os.getpid()  # a checkout of its own on every node


def launch_vars(tmp_path, code, **extra):
    extravars = {
        'trainops_workspace_dir': WORKSPACE,
        'trainops_experiments_dir': str(tmp_path / 'experiments'),
        'master_port': free_port(),
        'trainops_progress_interval': 10,
        'trainops_poll_interval': 1,
        'config': 'config/tiny.yaml',
        'trainops_sync_workspace': False,
        'trainops_workspace_src': code['work'],
    }
    extravars.update(extra)
    return extravars


def test_setup_sync_then_launch_and_refuse_a_node_on_another_branch(lab_nodes, tmp_path, code):
    lab = lab_nodes(3)
    # setup.yml without the SSH mesh here: lab nodes share this machine's /root, so the mesh has its own
    # test with a private ~/.ssh per node (tests/lab/test_ssh_mesh.py)
    setup = {'sync_mode': 'git', 'repo': code['repo'], 'version': 'HEAD', 'trainops_code_sync_resolve_from': code['work'],
             'trainops_nccl_env_file': '/srv/trainops/nccl.env', 'setup_ssh_mesh': False,
             'trainops_workspace_dir': WORKSPACE}
    first = run_playbook('playbooks/setup.yml', str(tmp_path), setup, inventory=lab.inventory, timeout=600)
    assert first.returncode == 0, first.stdout[-5000:]
    for node in lab.nodes:
        assert lab.ssh(node['name'], 'git -C %s rev-parse HEAD' % WORKSPACE).stdout.strip() == code['commit']
        assert 'GLOO_SOCKET_IFNAME=%s' % node['ifname'] in lab.ssh(node['name'], 'cat /srv/trainops/nccl.env').stdout
    second = run_playbook('playbooks/setup.yml', str(tmp_path), setup, inventory=lab.inventory, timeout=600)
    assert second.returncode == 0, second.stdout[-5000:]
    changed = {host: stats['changed'] for host, stats in second.summary['stats'].items()}
    assert changed == {node['name']: 0 for node in lab.nodes}, (changed, second.stdout[-3000:])

    launched = run_playbook('playbooks/launch.yml', str(tmp_path), launch_vars(tmp_path, code), inventory=lab.inventory)
    assert launched.returncode == 0, launched.stdout[-5000:]
    experiment = launched.summary['artifact_data']['trainops_experiment']
    assert experiment['outcome'] == 'succeeded'

    # one node moves to another branch: nothing starts anywhere, the table names that node
    victim = lab.nodes[1]['name']
    lab.ssh(victim, 'cd ' + WORKSPACE + ' && git checkout -q -b hotfix && echo "# hotfix" >> train.py && '
                    'git -c user.name=t -c user.email=t@example.com commit -q -am hotfix')
    before = len(os.listdir(str(tmp_path / 'experiments')))
    refused = run_playbook('playbooks/launch.yml', str(tmp_path), launch_vars(tmp_path, code), inventory=lab.inventory,
                           timeout=300)
    assert refused.returncode != 0
    text = refused.failure_text
    assert '! %s' % victim in text and 'on branch hotfix (controller is on branch main)' in text, text
    for node in lab.nodes:
        if node['name'] != victim:
            assert '! %s' % node['name'] not in text
    assert len(os.listdir(str(tmp_path / 'experiments'))) == before
    assert not job_processes(lab)

    for node in lab.nodes:
        lab.ssh(node['name'], 'rm -rf %s' % WORKSPACE)
