"""End-to-end: the collection as a user installs it, outside the checkout (issue 15).

The tarball is built with ``ansible-galaxy collection build`` from this checkout and installed with
``ansible-galaxy collection install`` into a temporary collections path (its dependencies are the ones
the ``ansible`` package ships). Then ``ansible-playbook -i hosts.yml trainops.multinode.launch`` runs
from an empty directory with an empty Ansible configuration, nothing of the checkout on any path: the
job trains on the local inventory's two nodes and the experiment lands in ``experiments/`` of that
directory, never inside the installed collection.
"""
import glob
import json
import os
import signal
import subprocess
import sys
import tarfile

import pytest
import yaml

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

from playbook_runner import free_port

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
GALAXY = yaml.safe_load(open(os.path.join(REPO, 'galaxy.yml')))
FQCN = '%s.%s' % (GALAXY['namespace'], GALAXY['name'])
# top-level entries of the checkout that must not be in the tarball (tests, lab, benchmark, Molecule,
# development and CI files)
LEFT_OUT = ('tests', 'hack', 'bench', 'molecule', 'Makefile', 'pytest.ini', 'requirements-dev.txt', 'ansible.cfg',
            '.ansible-lint', '.ci', '.collections', '.gitignore', '.venv', 'execution-environment.yml', 'ee',
            'inventories/lab', 'changelogs/fragments', 'experiments', 'build', 'tools')
# what a user needs from it
KEPT = ('MANIFEST.json', 'FILES.json', 'README.md', 'meta/runtime.yml', 'meta/execution-environment.yml',
        'meta/ee-requirements.txt', 'meta/ee-bindep.txt', 'playbooks/launch.yml', 'roles/job/defaults/main.yml',
        'plugins/modules/torchrun.py', 'files/workspace/train.py', 'inventories/local/hosts.yml',
        'changelogs/changelog.yaml', 'docs/installing.md')


def user_env(root):
    """A new user's environment: an empty Ansible configuration, the temporary collections path only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith('ANSIBLE_')}
    empty_cfg = os.path.join(root, 'empty-ansible.cfg')
    open(empty_cfg, 'w').close()
    env.update(ANSIBLE_CONFIG=empty_cfg, ANSIBLE_HOME=os.path.join(root, 'ansible-home'),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(root, 'collections'), ANSIBLE_NOCOLOR='1',
               PATH=BIN + os.pathsep + env.get('PATH', ''))
    return env


def run(argv, cwd, env, timeout=300):
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def collection_files(path):
    """Relative paths of the files of an installed collection (bytecode caches left out)."""
    found = set()
    for base, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != '__pycache__']
        found.update(os.path.relpath(os.path.join(base, f), path) for f in files)
    return found


class Installed:
    """The built tarball and the collection installed from it under ``root``."""

    def __init__(self, root):
        self.root = str(root)
        self.env = user_env(self.root)
        dist = os.path.join(self.root, 'dist')
        build = run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'build', '--output-path', dist, REPO],
                    cwd=self.root, env=self.env)
        assert build.returncode == 0, build.stdout + build.stderr
        (self.tarball,) = glob.glob(os.path.join(dist, '*.tar.gz'))
        install = run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'install', self.tarball],
                      cwd=self.root, env=self.env)
        assert install.returncode == 0, install.stdout + install.stderr
        self.path = os.path.join(self.root, 'collections', 'ansible_collections', GALAXY['namespace'], GALAXY['name'])

    def members(self):
        with tarfile.open(self.tarball) as tar:
            return [m.name for m in tar.getmembers()]


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    return Installed(tmp_path_factory.mktemp('installed'))


def kill_processes_under(path):
    """End whatever still runs with its working directory below ``path`` (nothing should)."""
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink('/proc/%s/cwd' % entry)
        except OSError:
            continue
        if cwd.startswith(path) and int(entry) != os.getpid():
            try:
                os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass


def test_tarball_leaves_out_tests_lab_bench_molecule_and_development_files(installed):
    members = installed.members()
    leaked = [m for m in members for out in LEFT_OUT if m == out or m.startswith(out + '/')]
    assert leaked == []
    assert [k for k in KEPT if k not in members] == []
    assert not [m for m in members if '__pycache__' in m or m.endswith('.pyc')]
    # the collection path is the one ansible-galaxy installed to, and resolves only from there
    listed = run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'list', FQCN, '--format', 'json'],
                 cwd=installed.root, env=installed.env)
    assert listed.returncode == 0, listed.stderr
    assert list(json.loads(listed.stdout)) == [os.path.dirname(os.path.dirname(installed.path))]


def test_installed_launch_by_fqcn_from_an_empty_directory(installed, tmp_path):
    before = collection_files(installed.path)
    workdir = tmp_path / 'work'
    workdir.mkdir()
    nodes = str(tmp_path / 'nodes')
    hosts = os.path.join(installed.path, 'inventories', 'local', 'hosts.yml')
    try:
        proc = run([os.path.join(BIN, 'ansible-playbook'), '-i', hosts, FQCN + '.launch', '-e', 'channels=42',
                    '-e', 'trainops_node_root=%s/{{ inventory_hostname }}' % nodes,
                    '-e', 'master_port=%d' % free_port(), '-e', 'trainops_progress_interval=5'],
                   cwd=workdir, env=installed.env, timeout=420)
    finally:
        kill_processes_under(nodes)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert 'outcome    : succeeded' in proc.stdout

    # the experiment is under the directory the user ran from ...
    (experiment,) = glob.glob(str(workdir / 'experiments' / '*'))
    assert os.path.basename(experiment).startswith('multinode_42ch_')
    manifest = json.load(open(os.path.join(experiment, 'manifest.json')))
    assert manifest['outcome'] == 'succeeded' and manifest['world_size'] == 4
    assert sorted(os.listdir(os.path.join(experiment, 'logs'))) == ['node_0.txt', 'node_1.txt']
    assert len(glob.glob(os.path.join(experiment, 'outputs', 'node[01]', 'rank_*_metrics.jsonl'))) == 4
    assert sorted(os.listdir(workdir)) == ['experiments']
    # ... and nothing was written inside the installed collection
    assert collection_files(installed.path) == before


def test_ansible_builder_reads_the_collections_ee_requirements(installed):
    """ansible-builder's introspection (what an EE build runs) finds the requirements the collection declares."""
    proc = run([os.path.join(BIN, 'ansible-builder'), 'introspect', '--sanitize',
                os.path.join(installed.root, 'collections')], cwd=installed.root, env=installed.env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = yaml.safe_load(proc.stdout)
    python = [line.split('#')[0].strip() for line in found['python']]
    system = [line.split('#')[0].strip() for line in found['system']]
    declared = [line.strip() for line in open(os.path.join(REPO, 'meta', 'ee-requirements.txt'))
                if line.strip() and not line.startswith('#')]
    assert declared and python == declared, found
    assert any(s.startswith('rsync ') for s in system) and any(s.startswith('git ') for s in system), found


def test_tarball_version_is_the_next_release(installed):
    """galaxy.yml's version is the one the next `antsibull-changelog release` releases: never one already released."""
    changelog = yaml.safe_load(open(os.path.join(REPO, 'changelogs', 'changelog.yaml')))
    assert os.path.basename(installed.tarball) == '%s-%s-%s.tar.gz' % (
        GALAXY['namespace'], GALAXY['name'], GALAXY['version'])
    assert GALAXY['version'] not in changelog['releases']
