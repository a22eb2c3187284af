"""`molecule test -s <scenario>` for every scenario under molecule/ on the multi-host lab of hack/lab.py (root only); see docs/contributing/molecule.md.

The scenario brings the lab up with 2 nodes (molecule/create.yml), launches a short 2 x 2 CPU-rank
job with the role trainops.multinode.job, runs the status entry point again for idempotence,
verifies the collected experiment, and takes the lab down (molecule/destroy.yml).

The lab is machine-wide and shared: the run holds /run/lock/trainops-lab-session.lock throughout.
Molecule's state goes to a fresh temporary directory, so a run that was interrupted earlier (state
"created"/"converged" left behind) cannot make this one skip its create step.
"""
import fcntl
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from lab_env import lab_names

pytestmark = [pytest.mark.lab, pytest.mark.slow]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_BIN = os.path.join(REPO, '.venv', 'bin')
MOLECULE = os.path.join(VENV_BIN, 'molecule')
LAB_PY = os.path.join(REPO, 'hack', 'lab.py')
SESSION_LOCK = str(lab_names().SESSION_LOCK)
TIMEOUT = 600  # a guard against a hang: the whole `molecule test` takes 1 to 3 min on 2 cores, up to 5 under make test's load
LOCK_TIMEOUT = int(os.environ.get('TRAINOPS_LAB_LOCK_TIMEOUT', '1800'))  # waiting for other users of the lab
ANSI = re.compile(r'\x1b\[[0-9;]*[A-Za-z]')


def run_molecule(args, env, timeout):
    """Run molecule in its own process group; on timeout stop that whole group (its ansible-playbook
    and everything they started), never anything else. Returns (rc or None, output, timed out)."""
    proc = subprocess.Popen([MOLECULE] + args, cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    try:
        out = proc.communicate(timeout=timeout)[0]
        return proc.returncode, out, False
    except subprocess.TimeoutExpired:
        pass
    out = ''
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            out = proc.communicate(timeout=10)[0]  # everything it wrote, from the start
            break
        except subprocess.TimeoutExpired:
            continue
    return None, out, True


def take_lock(handle, timeout):
    """Exclusive flock on the lab's session lock, waiting up to ``timeout`` seconds for other users."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                pytest.fail('the lab is busy: %s was held by someone else for %d s' % (SESSION_LOCK, timeout))
            time.sleep(1)


def lab_status():
    proc = subprocess.run([sys.executable, LAB_PY, 'status', '--json'], capture_output=True, text=True,
                          check=False, timeout=120)
    try:
        return json.loads(proc.stdout)
    except ValueError:
        return {'healthy': False, 'nodes': None, 'raw': proc.stdout + proc.stderr}


ALL_SCENARIOS = sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(REPO, 'molecule', '*', 'molecule.yml')))
KEPT_BY_LAB_TESTS = {
    'container': 'tests/lab/test_container.py converges the role on a 2-node lab with an engine per node, checks the '
                 'container as verify.yml does (image id, host namespaces, binds, capability, label; torch inside, on '
                 "the node's hostname) and runs the same settings again changing nothing",
    'ssh_mesh': "tests/lab/test_ssh_mesh.py converges the role on 3 nodes with its own verify (every ordered pair, "
                'host keys checked) and checks the key line once, from= and restrict; a second run changing nothing '
                'is test_cluster_shapes.py\'s (a shared home, as the training user) and test_ssh_mesh.py\'s repair '
                'run (the nodes it need not repair unchanged)',
}
"""Scenarios whose converge, idempotence and verify other lab tests already run (CI runs each promise once; each
scenario costs CI about 2 CPU-minutes): left out unless TRAINOPS_MOLECULE_ALL=1. `molecule test -s <name>` runs
them as before (docs/contributing/molecule.md)."""
SCENARIOS = [name for name in ALL_SCENARIOS
             if os.environ.get('TRAINOPS_MOLECULE_ALL') == '1' or name not in KEPT_BY_LAB_TESTS]


def test_the_scenarios_left_to_other_lab_tests_exist():
    assert set(KEPT_BY_LAB_TESTS) <= set(ALL_SCENARIOS), sorted(set(KEPT_BY_LAB_TESTS) - set(ALL_SCENARIOS))


@pytest.mark.parametrize('scenario', SCENARIOS)
def test_molecule_scenario(lab_manager, tmp_path, record_property, scenario):
    """The whole test sequence of every scenario under molecule/ passes (one per role): destroy, syntax,
    create, converge, idempotence, verify, destroy; and the lab is down afterwards (unless TRAINOPS_LAB_KEEP=1)."""
    if not os.access(MOLECULE, os.X_OK):
        pytest.skip('molecule is not installed in .venv (make dev-deps)')
    env = dict(os.environ)
    env['PATH'] = VENV_BIN + os.pathsep + env.get('PATH', '')
    env['MOLECULE_EPHEMERAL_DIRECTORY'] = str(tmp_path / 'molecule')
    env['NO_COLOR'] = '1'
    env['ANSIBLE_NOCOLOR'] = '1'
    for name in ('MOLECULE_GLOB', 'ANSIBLE_CONFIG', 'ANSIBLE_INVENTORY'):
        env.pop(name, None)

    with open(SESSION_LOCK, 'a') as lock:
        waited = time.monotonic()
        take_lock(lock, LOCK_TIMEOUT)
        waited = time.monotonic() - waited
        try:
            lab_manager.touched = True  # molecule changes the lab: the session takes it down at its end
            started = time.monotonic()
            rc, out, timed_out = run_molecule(['test', '-s', scenario], env, TIMEOUT)
            elapsed = time.monotonic() - started
            if timed_out:
                # the scenario's own destroy did not run: leave the lab down, as molecule would have
                subprocess.run([sys.executable, LAB_PY, 'down'], capture_output=True, check=False, timeout=120)
            after = lab_status()
            lab_manager.restore()  # what the session's `lab` fixture handed out, if anything
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    record_property('molecule_test_seconds', round(elapsed, 1))
    record_property('lab_lock_wait_seconds', round(waited, 1))
    out = ANSI.sub('', out or '')
    tail = out[-6000:]

    assert not timed_out, 'molecule test -s %s ran over %d s and was stopped:\n%s' % (scenario, TIMEOUT, tail)
    assert rc == 0, 'molecule test -s %s failed (rc %s):\n%s' % (scenario, rc, tail)
    for action in ('destroy', 'syntax', 'create', 'converge', 'idempotence', 'verify'):
        assert re.search(r'%s\s+\S+\s+%s: Executed: Successful' % (re.escape(scenario), action), out), (action, tail)
    # the scenario leaves the lab down
    if os.environ.get('TRAINOPS_LAB_KEEP') != '1':
        assert after.get('nodes') == [], after
