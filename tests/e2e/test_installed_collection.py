"""End-to-end: the collection as a user installs it, following docs/installing.md (issues 15 and 24).

The install commands are read out of docs/installing.md (so the document and the test cannot drift) and run
as written, with bash, in the root of a copy of this checkout, its ``ansible.cfg`` and ``.collections`` link
included, under a new, empty HOME. Then the document's command for the embedded local default
(``ansible-playbook -i ~/.ansible/.../inventories/local/hosts.yml trainops.multinode.launch -e channels=42``)
runs from an empty directory with a PATH that has no rsync (a fresh machine): the job trains on the local
inventory's two nodes, the workspace copied to them without rsync, and the experiment lands in
``experiments/`` of that directory, never inside the installed collection. The document's ``pip install`` of
the controller's requirements is not run: this test's virtualenv is that controller Python.
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile

import pytest
import yaml

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

from playbook_runner import free_port, path_without

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
DOC = os.path.join(REPO, 'docs', 'installing.md')
GALAXY = yaml.safe_load(open(os.path.join(REPO, 'galaxy.yml')))
FQCN = '%s.%s' % (GALAXY['namespace'], GALAXY['name'])
# top-level entries of the checkout that must not be in the tarball (tests, lab, benchmark, Molecule,
# development and CI files)
LEFT_OUT = ('tests', 'hack', 'bench', 'molecule', 'Makefile', 'pytest.ini', 'requirements-dev.txt', 'ansible.cfg',
            '.ansible-lint', '.ci', '.collections', '.gitignore', '.venv', 'execution-environment.yml', 'ee',
            'inventories/lab', 'changelogs/fragments', 'experiments', 'build')
# what a user needs from it
KEPT = ('MANIFEST.json', 'FILES.json', 'README.md', 'meta/runtime.yml', 'meta/execution-environment.yml',
        'meta/ee-requirements.txt', 'meta/ee-bindep.txt', 'playbooks/launch.yml', 'roles/job/defaults/main.yml',
        'plugins/modules/torchrun.py', 'files/workspace/train.py', 'inventories/local/hosts.yml',
        'changelogs/changelog.yaml', 'docs/installing.md', 'tools/trainops_run.py')
# what a checkout has that is not the project's (this machine's builds, runs, caches)
NOT_THE_CHECKOUTS = ('.git', '.venv', 'build', 'experiments', '.artifacts', '.trainops', '.benchmarks', '.pytest_cache',
                     '__pycache__', '*.pyc', '*.tar.gz')


def doc_blocks(path=DOC):
    """The indented code blocks of a Markdown document, as shell text (continuation lines joined by bash)."""
    blocks, current = [], []
    for line in open(path).read().splitlines() + ['']:
        if line.startswith('    ') and line.strip():
            current.append(line[4:])
        elif current:
            blocks.append('\n'.join(current) + '\n')
            current = []
    return blocks


def doc_block(*words):
    """The one code block of docs/installing.md that holds all ``words``."""
    found = [block for block in doc_blocks() if all(word in block for word in words)]
    assert len(found) == 1, 'docs/installing.md has %d blocks with %s' % (len(found), words)
    return found[0]


INSTALL = doc_block('ansible-galaxy collection build', 'ansible-galaxy collection install')
LAUNCH_LOCAL = doc_block('inventories/local/hosts.yml', FQCN + '.launch')


def user_env(home):
    """A new user's environment: an empty HOME, no ANSIBLE_ variable, the controller's Python first on the PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith('ANSIBLE_')}
    env.update(HOME=home, ANSIBLE_NOCOLOR='1', PATH=BIN + os.pathsep + env.get('PATH', ''))
    return env


def run(argv, cwd, env, timeout=300):
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def shell(text, cwd, env, timeout=300):
    """Commands as a user types them: bash, stopping at the first that fails."""
    return run(['bash', '-e', '-o', 'pipefail', '-c', text], cwd, env, timeout=timeout)


def collection_files(path):
    """Relative paths of the files of an installed collection (bytecode caches left out)."""
    found = set()
    for base, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != '__pycache__']
        found.update(os.path.relpath(os.path.join(base, f), path) for f in files)
    return found


class Installed:
    """A copy of the checkout under ``root``, and the collection installed from it by the document's commands."""

    def __init__(self, root):
        self.root = str(root)
        self.home = os.path.join(self.root, 'home')
        os.mkdir(self.home)
        self.env = user_env(self.home)
        self.checkout = os.path.join(self.root, 'checkout')
        shutil.copytree(REPO, self.checkout, symlinks=True, ignore=shutil.ignore_patterns(*NOT_THE_CHECKOUTS))
        self.install = shell(INSTALL, self.checkout, self.env)
        (self.tarball,) = glob.glob(os.path.join(self.checkout, 'build', 'dist', '*.tar.gz')) or [None]
        self.collections = os.path.join(self.home, '.ansible', 'collections')
        self.path = os.path.join(self.collections, 'ansible_collections', GALAXY['namespace'], GALAXY['name'])

    def members(self):
        with tarfile.open(self.tarball) as tar:
            return [m.name for m in tar.getmembers()]


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    return Installed(tmp_path_factory.mktemp('installed'))


def test_the_documents_install_commands_install_from_a_checkout(installed):
    out = installed.install.stdout + installed.install.stderr
    assert installed.install.returncode == 0, out
    assert 'Nothing to do' not in out and '%s:%s was installed successfully' % (FQCN, GALAXY['version']) in out
    assert os.path.isfile(os.path.join(installed.path, 'MANIFEST.json'))
    # the checkout still runs from itself: its link to the collection is untouched
    link = os.path.join(installed.checkout, '.collections', 'ansible_collections', GALAXY['namespace'], GALAXY['name'])
    assert os.readlink(link) == '../../..'
    # run again (a newer build of the same version): the install replaces the first one
    again = shell(INSTALL, installed.checkout, installed.env)
    assert again.returncode == 0 and 'was installed successfully' in again.stdout, again.stdout + again.stderr


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
    assert installed.tarball, installed.install.stdout + installed.install.stderr
    members = installed.members()
    leaked = [m for m in members for out in LEFT_OUT if m == out or m.startswith(out + '/')]
    assert leaked == []
    assert [k for k in KEPT if k not in members] == []
    assert not [m for m in members if '__pycache__' in m or m.endswith('.pyc')]
    # the collection path is the one ansible-galaxy installed to, and resolves only from there
    listed = run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'list', FQCN, '--format', 'json'],
                 cwd=installed.root, env=installed.env)
    assert listed.returncode == 0, listed.stderr
    assert list(json.loads(listed.stdout)) == [os.path.join(installed.collections, 'ansible_collections')]


def test_installed_launch_by_fqcn_from_an_empty_directory_without_rsync(installed, tmp_path):
    before = collection_files(installed.path)
    workdir = tmp_path / 'work'
    workdir.mkdir()
    nodes = os.path.join(installed.home, '.cache', 'trainops')   # the local inventory's node root, under HOME
    # the document's command as written, on a port of its own (other tests may run beside it)
    command = LAUNCH_LOCAL.rstrip('\n') + ' -e master_port=%d\n' % free_port()
    env = dict(installed.env, PATH=path_without(str(tmp_path / 'bin'), 'rsync'))
    try:
        proc = shell(command, workdir, env, timeout=420)
    finally:
        kill_processes_under(nodes)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert 'outcome    : succeeded' in proc.stdout
    # the workspace reached both nodes, copied without rsync
    assert len(glob.glob(os.path.join(nodes, 'local', 'node*', 'workspace', 'train.py'))) == 2

    # the experiment is under the directory the user ran from ...
    (experiment,) = glob.glob(str(workdir / 'experiments' / '*'))
    assert os.path.basename(experiment).startswith('multinode_42ch_')
    manifest = json.load(open(os.path.join(experiment, 'manifest.json')))
    assert manifest['outcome'] == 'succeeded' and manifest['world_size'] == 4
    assert sorted(n for n in os.listdir(os.path.join(experiment, 'logs')) if n.startswith('node_')) == ['node_0.txt', 'node_1.txt']
    assert len(glob.glob(os.path.join(experiment, 'outputs', 'node[01]', 'rank_*_metrics.jsonl'))) == 4
    assert sorted(os.listdir(workdir)) == ['experiments']
    # ... and nothing was written inside the installed collection
    assert collection_files(installed.path) == before


def test_the_installed_runner_entry_runs_a_playbook_from_the_current_directory(installed, tmp_path):
    """tools/trainops_run.py ships: run from the installed collection, its output lands where the user is."""
    before = collection_files(installed.path)
    workdir = tmp_path / 'ci'
    workdir.mkdir()
    proc = run([sys.executable, os.path.join(installed.path, 'tools', 'trainops_run.py'), 'playbooks/hostfile.yml',
                '-i', os.path.join(installed.path, 'inventories', 'local', 'hosts.yml'), '--summary', 'summary.json'],
               cwd=str(workdir), env=installed.env, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert json.load(open(str(workdir / 'summary.json')))['status'] == 'successful'
    assert os.path.isfile(str(workdir / 'experiments' / 'hostfile'))
    assert sorted(os.listdir(str(workdir))) == ['.artifacts', 'experiments', 'summary.json']
    assert collection_files(installed.path) == before


def test_ansible_builder_reads_the_collections_ee_requirements(installed):
    """ansible-builder's introspection (what an EE build runs) finds the requirements the collection declares."""
    proc = run([os.path.join(BIN, 'ansible-builder'), 'introspect', '--sanitize',
                installed.collections], cwd=installed.root, env=installed.env)
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
