"""Helpers and fixtures for tests that run work in containers on the lab of hack/lab.py, each lab node
with its own Docker daemon (``hack/lab.py up --engine docker``); see docs/contributing/containers-lab.md.

    from container_support import container_lab, image_archive  # pytest finds the fixtures by import

    def test_something(container_lab, image_archive):
        clab = container_lab                          # a ContainerLab: 2 nodes, engines up, role converged
        clab.docker("lab-node01", "ps")              # `docker ...` on the node, over SSH (its own daemon)
        clab.inspect("lab-node02")                   # `docker inspect trainops-train` as a dict
        run = clab.playbook("playbooks/container.yml", clab.role_vars(image_archive))
        run.task("Load the archive (Docker)")       # {host: result}; run.stats, run.rc, run.facts(host)

Fixtures (module scope; they hold the lab's session lock /run/lock/trainops-lab-session.lock):

* ``image_archive``: the test image archive of ``hack/container_image.sh`` (python3 + the pinned CPU
  torch; built once and cached under ~/.cache/trainops-multinode/images), as the dict of its .json:
  image, image_id, archive, archive_bytes, build_seconds. A docker daemon on this machine builds it
  (``hack/engine.sh`` installs docker.io from Debian's packages and starts one when needed).
* ``container_lab``: a 2-node lab with engines, the container role converged from that archive on
  both nodes (``clab.converged`` is that run). At the end of the module, a lab that the session's
  ``lab`` fixture promised is put back without engines.

Run as a script, ``python3 tests/lab/container_support.py ulimits`` prints the JSON list of ulimits the
container role can be given on this machine (used by molecule/container): ``memlock`` unlimited
where this machine may raise it, else its current hard limit (a sandbox without CAP_SYS_RESOURCE).
"""
import fcntl
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile

import pytest

if __name__ == '__main__':  # molecule/container runs this file as a script (`ulimits`): tests/ is not on sys.path
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from lab_env import lab_names  # noqa: E402  pylint: disable=wrong-import-position

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAB_PY = os.path.join(REPO, 'hack', 'lab.py')
ENGINE_SH = os.path.join(REPO, 'hack', 'engine.sh')
IMAGE_SH = os.path.join(REPO, 'hack', 'container_image.sh')
VENV_BIN = os.path.join(REPO, '.venv', 'bin')
SESSION_LOCK = str(lab_names().SESSION_LOCK)
NODES = 2
CONTAINER = 'trainops-train'


def memlock_ulimit():
    """``memlock:-1:-1`` when a process here may raise its hard memlock limit (what the role asks for by
    default), else ``memlock:<hard>:<hard>``: without CAP_SYS_RESOURCE runc cannot set more."""
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if hard == resource.RLIM_INFINITY:
        return 'memlock:-1:-1'
    probe = subprocess.run([sys.executable, '-c', 'import resource as r; r.setrlimit(r.RLIMIT_MEMLOCK, (-1, -1))'],
                           capture_output=True, check=False)
    if probe.returncode == 0:
        return 'memlock:-1:-1'
    del soft
    return 'memlock:%d:%d' % (hard, hard)


def ulimits():
    return [memlock_ulimit(), 'stack:67108864:67108864']


def engine_skip_reason():
    if os.geteuid() != 0:
        return 'the lab and its engines need root'
    if not shutil.which('ip'):
        return '`ip` (iproute2) is not installed'
    return None


def ensure_build_engine():
    """A docker daemon on this machine (for `docker import`/`save` of the test image): hack/engine.sh."""
    proc = subprocess.run(['bash', ENGINE_SH], capture_output=True, text=True, timeout=900, check=False)
    if proc.returncode != 0:
        pytest.fail('hack/engine.sh failed (rc %d):\n%s\n%s' % (proc.returncode, proc.stdout, proc.stderr))


def build_image_archive():
    """Build (or reuse the cached) test image archive; returns its metadata dict."""
    proc = subprocess.run(['bash', IMAGE_SH], capture_output=True, text=True, timeout=1800, check=False,
                          env=dict(os.environ, PYTHON=os.path.join(VENV_BIN, 'python')))
    if proc.returncode != 0:
        pytest.fail('hack/container_image.sh failed (rc %d):\n%s' % (proc.returncode, proc.stderr[-4000:]))
    archive = proc.stdout.strip().splitlines()[-1]
    with open(archive[:-len('.tar')] + '.json') as handle:
        meta = json.load(handle)
    assert meta['archive'] == archive, meta
    return meta


class PlaybookRun:
    """One ansible-playbook run with the ansible.posix.json callback: rc, stats and per-task results."""

    def __init__(self, proc):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        try:
            self.data = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index('{'):])[0]
        except ValueError:
            self.data = {'plays': [], 'stats': {}}
        self.stats = self.data.get('stats', {})

    def tasks(self):
        for play in self.data.get('plays', []):
            for task in play.get('tasks', []):
                yield task['task']['name'], task['hosts']

    def task(self, name):
        """{host: result} of the (last) task whose name contains ``name``; {} when it did not run."""
        found = {}
        for task_name, hosts in self.tasks():
            if name in task_name:
                found = hosts
        return found

    def facts(self, host, name='trainops_container'):
        return self.task('Set the fact trainops_container').get(host, {}).get('ansible_facts', {}).get(name)

    def changed(self):
        return {host: stat.get('changed', 0) for host, stat in self.stats.items()}

    def failures(self):
        out = []
        for task_name, hosts in self.tasks():
            for host, res in hosts.items():
                if res.get('failed') or res.get('unreachable'):
                    out.append('%s [%s]: %s' % (task_name, host, res.get('msg')))
        return out

    def explain(self):
        return 'rc %s; failures: %s\nstderr: %s' % (self.rc, self.failures(), self.stderr[-3000:])


class ContainerLab:
    """The lab (conftest's Lab) with the nodes' engines: docker on a node over SSH, inspect, playbooks."""

    def __init__(self, lab, image):
        self.lab = lab
        self.image = image
        self.names = lab.names
        self.converged = None

    def ssh(self, node, command, check=True, timeout=300):
        return self.lab.ssh(node, command, check=check, timeout=timeout)

    def docker(self, node, args, check=True, timeout=300):
        """``docker ARGS`` run on the node (its own daemon on the default socket)."""
        return self.ssh(node, 'docker ' + args, check=check, timeout=timeout)

    def inspect(self, node, name=CONTAINER):
        """``docker inspect`` of a container on the node, or None when there is none."""
        proc = self.docker(node, 'inspect %s' % shlex.quote(name), check=False)
        return json.loads(proc.stdout)[0] if proc.returncode == 0 else None

    def image_id(self, node, ref):
        proc = self.docker(node, "image inspect --format '{{.Id}}' %s" % shlex.quote(ref), check=False)
        return proc.stdout.strip() if proc.returncode == 0 else None

    def forget_image(self, node):
        """Remove the training container and the test image from a node (it then lacks the image)."""
        self.docker(node, 'rm -f %s' % CONTAINER, check=False)
        self.docker(node, 'image rm -f %s' % shlex.quote(self.image['image_id']), check=False)
        assert self.image_id(node, self.image['image_id']) is None

    def role_vars(self, **extra):
        """Variables for playbooks/container.yml with the test image archive."""
        values = {'trainops_container_image_archive': self.image['archive'],
                  'trainops_container_ulimits': ulimits()}
        values.update(extra)
        return values

    def playbook(self, playbook, extravars=None, check=False, limit=None, timeout=900):
        """``ansible-playbook -i <lab inventory> PLAYBOOK -e @vars [--check]`` with the JSON callback."""
        env = self.lab.ansible_env()
        env['ANSIBLE_STDOUT_CALLBACK'] = 'ansible.posix.json'
        env['ANSIBLE_CALLBACKS_ENABLED'] = 'ansible.posix.json,trainops.multinode.preload'  # (not profile_tasks: its lines would mix in)
        env['ANSIBLE_NOCOLOR'] = '1'
        with tempfile.NamedTemporaryFile('w', suffix='.json', delete=False) as handle:
            json.dump(extravars or {}, handle)
            varfile = handle.name
        argv = [os.path.join(VENV_BIN, 'ansible-playbook'), '-i', self.lab.inventory,
                os.path.join(REPO, playbook), '-e', '@' + varfile]
        if check:
            argv.append('--check')
        if limit:
            argv += ['--limit', limit]
        try:
            proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, env=env, timeout=timeout,
                                  check=False)
        finally:
            os.unlink(varfile)
        return PlaybookRun(proc)


def run_lab(*args, check=True):
    proc = subprocess.run([sys.executable, LAB_PY] + list(args), capture_output=True, text=True, timeout=600,
                          check=False)
    if check and proc.returncode != 0:
        raise AssertionError('hack/lab.py %s failed (rc %d):\n%s\n%s' % (
            ' '.join(args), proc.returncode, proc.stdout, proc.stderr))
    return proc


def lab_has_engines():
    """True when the running lab's nodes run their engines (hack/lab.py status --json)."""
    proc = subprocess.run([sys.executable, LAB_PY, 'status', '--json'], capture_output=True, text=True, check=False)
    try:
        status = json.loads(proc.stdout)
    except ValueError:
        return False
    nodes = status.get('nodes') or []
    return bool(nodes) and all(node.get('engine') for node in nodes if isinstance(node, dict))


@pytest.fixture(scope='module')
def image_archive():
    """The test image archive (built once, cached), its metadata dict."""
    reason = engine_skip_reason()
    if reason:
        pytest.skip(reason)
    ensure_build_engine()
    return build_image_archive()


@pytest.fixture(scope='module')
def container_lab(lab_manager, image_archive):
    """A 2-node lab whose nodes run their own Docker daemons, with the container role converged on both
    from the test image archive; the lab's session lock is held for the whole module."""
    with open(SESSION_LOCK, 'a') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            lab_manager.touched = True
            # a lab built without engines is taken down first: turning engines on in a running lab leaves
            # sessions of its nodes (sshd) with the view of /run they started with, so `docker` over ssh
            # could reach another daemon than the node's own (seen when another test module built the lab)
            if not lab_has_engines():
                run_lab('down')
            run_lab('up', '--nodes', str(NODES), '--engine', 'docker')
            clab = ContainerLab(lab_manager.ensure(NODES), image_archive)
            run = clab.playbook('playbooks/container.yml', clab.role_vars())
            assert run.rc == 0, run.explain()
            clab.converged = run
            yield clab
        finally:
            if lab_manager.promised is not None:
                run_lab('up', '--nodes', str(lab_manager.promised), '--engine', 'none', check=False)
            fcntl.flock(lock, fcntl.LOCK_UN)


if __name__ == '__main__':
    if sys.argv[1:] == ['ulimits']:
        print(json.dumps(ulimits()))
    else:
        print('usage: container_support.py ulimits', file=sys.stderr)
        sys.exit(2)
