# -*- coding: utf-8 -*-

# Copyright (c) 2025, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Real processes: a detached torchrun (nnodes 1, nproc 2, CPU) started, queried and stopped through the module logic.

Nothing here kills by name: every process the tests may leave behind is recorded by pid and start time and
cleaned up in a fixture.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time

import pytest

from playbook_runner import wait_until

from ansible_collections.trainops.multinode.plugins.module_utils import _torchrun as tr
from ansible_collections.trainops.multinode.plugins.module_utils._node_identity import node_key
from ansible_collections.trainops.multinode.plugins.module_utils._proc import System, is_alive

pytestmark = [pytest.mark.real, pytest.mark.slow]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SYSTEM = System()

WORKER = textwrap.dedent('''
    import os, subprocess, sys, time
    rank = os.environ["RANK"]
    node = os.environ.get("GROUP_RANK", "0")
    out = sys.argv[1]
    mode = sys.argv[2]


    def record(name, pid):
        tmp = os.path.join(out, ".%s.tmp" % name)
        with open(tmp, "w") as f:
            f.write(str(pid))
        os.replace(tmp, os.path.join(out, name))


    record("worker%s.pid" % rank, os.getpid())
    if mode == "fail" and rank == "1":
        # the test counts both workers' pids: on a loaded machine rank 0 may start after rank 1 has failed, and
        # torchrun would end it before it recorded itself; so fail only once rank 0 has (within a minute)
        deadline = time.time() + 60
        while not os.path.exists(os.path.join(out, "worker0.pid")) and time.time() < deadline:
            time.sleep(0.05)
        print("[trainops] node=test rank=1/2 epoch=0 step=1/40 loss=9.9 samples_per_s=1.0", flush=True)
        sys.exit(3)
    if mode == "fail-node1" and node == "1":
        print("[trainops] node=test rank=%s/2 epoch=0 step=1/40 loss=9.9 samples_per_s=1.0" % rank, flush=True)
        time.sleep(4)
        sys.exit(3)
    if mode == "grandchild" and rank == "0":
        # a grandchild in a session of its own: only the supervisor's subreaper tree walk can find it
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
        record("grandchild.pid", child.pid)
    if mode == "uid-probe" and rank == "0":
        # a grandchild in a session of its own that records who sent it the first SIGTERM (probe.py next to worker.py)
        probe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe.py")
        child = subprocess.Popen([sys.executable, probe, out], start_new_session=True)
        record("probe.pid", child.pid)
    for step in range(3000):
        print("[trainops] node=test rank=%s/2 epoch=0 step=%d/3000 loss=1.0 samples_per_s=10.0" % (rank, step), flush=True)
        time.sleep(0.1)
''')

FAKE_TORCH_RUN = textwrap.dedent('''
    # decoy: same command line as the real torchrun, does nothing
    import time
    time.sleep(300)
''')


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]
    finally:
        s.close()


def alive(pid, start_time=None):
    return is_alive(SYSTEM.read_proc_stat(pid), start_time)


def wait_for(predicate, timeout, interval=0.1, what='condition'):
    return wait_until(predicate, timeout, interval=interval, what=what)


class Tracker(object):
    """Remembers pids (with start times) to kill at teardown, by pid only."""

    def __init__(self):
        self.procs = {}
        self.children = []

    def add(self, pid):
        info = SYSTEM.read_proc_stat(pid)
        if info is not None:
            self.procs[pid] = info.start_time

    def cleanup(self):
        for pid, start in self.procs.items():
            if alive(pid, start):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        for child in self.children:
            if child.poll() is None:
                child.kill()
            child.wait(timeout=10)


@pytest.fixture
def tracker():
    t = Tracker()
    try:
        yield t
    finally:
        t.cleanup()


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / 'worker.py').write_text(WORKER)
    (tmp_path / 'out').mkdir()
    return tmp_path


def params(workdir, run_id, mode, port, **overrides):
    p = dict(
        state='started', state_dir=str(workdir / 'state'), run_id=run_id, nnodes=1, nproc_per_node=2, node_rank=0,
        master_addr='127.0.0.1', master_port=port, rdzv_backend='static', rdzv_id=None, rdzv_timeout=60, max_restarts=0,
        entrypoint='worker.py', entrypoint_args=[str(workdir / 'out'), mode], python=sys.executable, torchrun=None,
        command_prefix=[], chdir=str(workdir), env={'TRAINOPS_TEST': '1'}, replace=False, stop_timeout=10, log_lines=10,
    )
    p.update(overrides)
    return p


def track_job(tracker, job):
    for pid in (job.get('supervisor_pid'), job.get('pid')):
        if pid:
            tracker.add(pid)


def worker_pids(workdir, expected=2, timeout=60):
    out = workdir / 'out'

    def read():
        files = sorted(out.glob('worker*.pid'))
        if len(files) < expected:
            return None
        return [int(f.read_text()) for f in files]
    return wait_for(read, timeout, what='worker pid files')


def test_start_query_idempotent_stop_whole_tree(workdir, tracker):
    port = free_port()
    p = params(workdir, 'real-1', 'grandchild', port)
    started = time.monotonic()
    res = tr.run_module(p)
    assert time.monotonic() - started < 15, 'start must not wait for the job'
    job = res['job']
    track_job(tracker, job)
    assert res['changed'] is True
    assert job['status'] == 'running'
    assert job['pid'] and job['pgid'] == job['pid'] and job['supervisor_pid']
    # detached: the supervisor is not our child and lives in another session
    sup = SYSTEM.read_proc_stat(job['supervisor_pid'])
    assert sup.ppid != os.getpid()
    assert os.getsid(job['supervisor_pid']) != os.getsid(0)

    workers = worker_pids(workdir)
    for pid in workers:
        tracker.add(pid)
    grandchild = int(wait_for(lambda: (workdir / 'out' / 'grandchild.pid').exists() and (workdir / 'out' / 'grandchild.pid').read_text(),
                              30, what='grandchild pid'))
    tracker.add(grandchild)
    # torch's elastic agent puts every worker in a session of its own
    for pid in workers:
        assert os.getpgid(pid) == pid and os.getpgid(pid) != job['pgid']

    q = tr.run_module(dict(p, state='query', run_id=None))
    assert q['changed'] is False
    assert q['job']['status'] == 'running' and q['job']['run_id'] == 'real-1'
    wait_for(lambda: any('[trainops]' in line for line in tr.run_module(dict(p, state='query'))['log_tail']), 30, what='progress in node.log')

    again = tr.run_module(p)
    assert again['changed'] is False
    assert again['job']['pid'] == job['pid']

    with pytest.raises(tr.TorchrunError, match='still running'):
        tr.run_module(params(workdir, 'real-2', 'grandchild', port))

    # decoy: same argv as the real torchrun (a fake torch package shadows the real one), started by us
    fake_root = workdir / 'faketorch'
    (fake_root / 'torch' / 'distributed').mkdir(parents=True)
    (fake_root / 'torch' / '__init__.py').write_text('')
    (fake_root / 'torch' / 'distributed' / '__init__.py').write_text('')
    (fake_root / 'torch' / 'distributed' / 'run.py').write_text(FAKE_TORCH_RUN)
    decoy = subprocess.Popen(job['argv'], cwd=str(workdir), env=dict(os.environ, PYTHONPATH=str(fake_root)),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tracker.children.append(decoy)
    with open('/proc/%d/cmdline' % job['pid'], 'rb') as f:
        real_cmdline = f.read()
    wait_for(lambda: open('/proc/%d/cmdline' % decoy.pid, 'rb').read() == real_cmdline, 10, what='decoy with the same cmdline')

    stop_started = time.monotonic()
    stopped = tr.run_module(dict(p, state='stopped', run_id=None))
    assert time.monotonic() - stop_started < 40
    assert stopped['changed'] is True
    assert set([job['pid'], grandchild] + workers) <= set(stopped['stopped_pids'])
    for pid in [job['pid'], job['supervisor_pid'], grandchild] + workers:
        assert not alive(pid, tracker.procs.get(pid)), 'pid %d survived the stop' % pid
    assert decoy.poll() is None, 'the decoy with the same command line must survive'
    assert stopped['job']['status'] == 'exited'
    assert os.path.exists(os.path.join(job['run_dir'], 'exit.json'))

    again = tr.run_module(dict(p, state='stopped'))
    assert again['changed'] is False and again['stopped_pids'] == []


def test_worker_exit_3_is_reported(workdir, tracker):
    p = params(workdir, 'real-fail', 'fail', free_port())
    res = tr.run_module(p)
    job = res['job']
    track_job(tracker, job)
    workers = worker_pids(workdir)
    for pid in workers:
        tracker.add(pid)

    def ended():
        result = tr.run_module(dict(p, state='query'))
        return result if result['job']['status'] != 'running' else None

    final = wait_for(ended, 90, interval=0.5, what='the job to end')
    assert final['job']['status'] == 'exited'
    assert final['job']['exit_code'] not in (0, None)
    assert final['job']['ended_at']
    exit_path = os.path.join(job['run_dir'], 'exit.json')
    with open(exit_path) as f:
        assert json.load(f)['exit_code'] == final['job']['exit_code']
    for pid in [job['pid'], job['supervisor_pid']] + workers:
        assert not alive(pid, tracker.procs.get(pid)), 'pid %d is still alive' % pid
    log = '\n'.join(tr.tail_lines(job['log_path'], 200))
    assert 'exitcode' in log or 'ChildFailedError' in log

    # starting the same run again does not restart it
    again = tr.run_module(p)
    assert again['changed'] is False and again['job']['status'] == 'exited'


def test_replace_stops_the_previous_run(workdir, tracker):
    port = free_port()
    first = tr.run_module(params(workdir, 'real-a', 'normal', port))['job']
    track_job(tracker, first)
    for pid in worker_pids(workdir):
        tracker.add(pid)
    second = tr.run_module(params(workdir, 'real-b', 'normal', free_port(), replace=True))
    track_job(tracker, second['job'])
    assert second['changed'] is True and second['replaced'] == ['real-a']
    assert not alive(first['pid'], tracker.procs.get(first['pid']))
    assert tr.run_module(dict(params(workdir, 'real-a', 'normal', port), state='query'))['job']['status'] == 'exited'
    stopped = tr.run_module(dict(params(workdir, 'real-b', 'normal', port), state='stopped', run_id=None))
    assert stopped['changed'] is True and stopped['job']['run_id'] == 'real-b'


def test_missing_torchrun_executable_fails_with_log(workdir, tracker):
    p = params(workdir, 'real-missing', 'normal', free_port(), torchrun=str(workdir / 'no-such-torchrun'))
    with pytest.raises(tr.TorchrunError, match='could not be started') as exc:
        tr.run_module(p)
    assert 'no-such-torchrun' in exc.value.msg


@pytest.mark.skipif(not os.path.isdir(os.path.join(REPO, '.collections')), reason='needs the in-tree collections path')
def test_through_ansible_adhoc(workdir, tracker):
    """The real module through AnsiballZ: ansible must return while the job keeps running."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, '.collections'), ANSIBLE_LOAD_CALLBACK_PLUGINS='1',
               ANSIBLE_STDOUT_CALLBACK='json', ANSIBLE_LOCALHOST_WARNING='0', ANSIBLE_INVENTORY_UNPARSED_WARNING='0',
               ANSIBLE_HOME=str(workdir / 'ansible_home'))
    # the repo's ansible.cfg (exported by the Makefile) adds the profile_tasks callback, which would
    # print timing lines into the JSON output
    env.pop('ANSIBLE_CONFIG', None)
    base = [sys.executable, '-m', 'ansible', 'adhoc', 'localhost', '-c', 'local', '-e', 'ansible_python_interpreter=%s' % sys.executable,
            '-m', 'trainops.multinode.torchrun']
    args = params(workdir, 'adhoc-1', 'normal', free_port())
    del args['state']
    started = time.monotonic()
    proc = subprocess.run(base + ['-a', json.dumps(args)], env=env, capture_output=True, text=True, timeout=120, cwd=str(workdir), check=False)
    assert proc.stdout.strip(), proc.stderr
    out = json.loads(proc.stdout)
    res = out['plays'][0]['tasks'][0]['hosts']['localhost']
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert time.monotonic() - started < 60
    track_job(tracker, res['job'])
    assert res['changed'] is True and res['job']['status'] == 'running'
    for pid in worker_pids(workdir):
        tracker.add(pid)
    assert alive(res['job']['pid'])

    proc = subprocess.run(base + ['-a', json.dumps({'state': 'stopped', 'state_dir': args['state_dir']})],
                          env=env, capture_output=True, text=True, timeout=120, cwd=str(workdir), check=False)
    stop = json.loads(proc.stdout)['plays'][0]['tasks'][0]['hosts']['localhost']
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert stop['changed'] is True
    assert res['job']['pid'] in stop['stopped_pids']
    assert not alive(res['job']['pid'], tracker.procs.get(res['job']['pid']))


PLAYBOOK = textwrap.dedent('''
    - hosts: nodes
      gather_facts: false
      tasks:
        - name: Start
          trainops.multinode.torchrun:
            state_dir: "{{ base }}/state-{{ inventory_hostname }}"
            run_id: e2e-1
            nnodes: 2
            nproc_per_node: 1
            node_rank: "{{ rank }}"
            master_addr: 127.0.0.1
            master_port: "{{ mport }}"
            rdzv_timeout: 60
            python: "{{ ansible_python_interpreter }}"
            chdir: "{{ base }}"
            entrypoint: worker.py
            entrypoint_args: ["{{ base }}/out", fail-node1]
            stop_timeout: 10
        - name: Wait
          trainops.multinode.torchrun_wait:
            state_dir: "{{ base }}/state-{{ inventory_hostname }}"
            run_id: e2e-1
            node_rank: "{{ rank }}"
            sync_dir: "{{ base }}/sync"
            poll_interval: 0.5
            progress_interval: 1
            timeout: 120
            stop_timeout: 10
''')


def node_dir(workdir, host):
    """The logical node's own state directory below its state root (named after this machine's host name)."""
    return workdir / ('state-%s' % host) / node_key()


@pytest.mark.skipif(not os.path.isdir(os.path.join(REPO, '.collections')), reason='needs the in-tree collections path')
def test_wait_fails_fast_across_two_nodes(workdir, tracker):
    """Two logical nodes on this machine (one real 2-node static torchrun); node 1 fails, node 0 is stopped by torchrun_wait."""
    port = free_port()
    (workdir / 'inventory.ini').write_text(
        '[nodes]\nhost0 rank=0\nhost1 rank=1\n\n[nodes:vars]\nansible_connection=local\nansible_python_interpreter=%s\n'
        'base=%s\nmport=%d\n' % (sys.executable, workdir, port))
    (workdir / 'play.yml').write_text(PLAYBOOK)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, '.collections'), ANSIBLE_HOME=str(workdir / 'ansible_home'),
               ANSIBLE_NOCOLOR='1', ANSIBLE_FORCE_COLOR='0', ANSIBLE_HOST_KEY_CHECKING='0')
    try:
        proc = subprocess.run([sys.executable, '-m', 'ansible', 'playbook', '-i', str(workdir / 'inventory.ini'), str(workdir / 'play.yml')],
                              env=env, capture_output=True, text=True, timeout=240, cwd=str(workdir), check=False)
    finally:
        for host in ('host0', 'host1'):
            pids = tr.read_json(str(node_dir(workdir, host) / 'runs' / 'e2e-1' / 'pids.json')) or {}
            track_job(tracker, pids)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert 'host1 rank 1: torchrun run e2e-1 exited with code' in out, out
    assert 'host0 rank 0: stopped because host1 (rank 1) failed' in out, out
    assert 'host0 rank 0: running  epoch=0 step=' in out, out
    sync = workdir / 'sync'
    assert json.loads((sync / 'host1.json').read_text())['state'] == 'failed'
    assert json.loads((sync / 'host0.json').read_text())['state'] == 'stopped'
    for host in ('host0', 'host1'):
        run_dir = node_dir(workdir, host) / 'runs' / 'e2e-1'
        pids = tr.read_json(str(run_dir / 'pids.json'))
        assert (run_dir / 'exit.json').exists()
        for pid in (pids['pid'], pids['supervisor_pid']):
            assert not alive(pid, tracker.procs.get(pid)), 'pid %d of %s is still alive' % (pid, host)
    for f in (workdir / 'out').glob('worker*.pid'):
        pid = int(f.read_text())
        assert not alive(pid), 'worker %d is still alive' % pid


# ------------------------------------------------------------------------------------------------
# records are verified before anyone acts on them (issue 24)
# ------------------------------------------------------------------------------------------------

PROBE = textwrap.dedent('''
    import json, os, signal, sys
    out = sys.argv[1]
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
    open(os.path.join(out, "probe.ready"), "w").close()
    info = signal.sigwaitinfo([signal.SIGTERM])
    tmp = os.path.join(out, ".sigterm.tmp")
    with open(tmp, "w") as f:
        json.dump({"uid": info.si_uid, "pid": info.si_pid}, f)
    os.replace(tmp, os.path.join(out, "sigterm.json"))
''')
NOBODY = 65534
COLLECTIONS = os.path.join(REPO, '.collections')
AS_USER = textwrap.dedent('''
    import json, sys
    from ansible_collections.trainops.multinode.plugins.module_utils import _torchrun as tr
    try:
        print(json.dumps(tr.run_module(json.loads(sys.argv[1]))))
    except tr.TorchrunError as exc:
        print(json.dumps({"failed": True, "msg": exc.msg}))
''')


def as_user(uid, argv):
    return ['setpriv', '--reuid=%d' % uid, '--regid=%d' % uid, '--clear-groups'] + argv


def python_for(uid):
    """An interpreter of this Python version that ``uid`` can start from a program of its own (this venv's may
    sit below a directory only root can enter), and the PYTHONPATH that gives it the collection and torch."""
    path = os.pathsep.join([COLLECTIONS, sysconfig.get_paths()['purelib']])
    version = 'python%d.%d' % sys.version_info[:2]
    for python in [sys.executable] + [os.path.join(d, version) for d in ('/usr/local/bin', '/usr/bin') if os.path.exists(os.path.join(d, version))]:
        probe = subprocess.run(as_user(uid, [python, '-c', 'import subprocess, sys; subprocess.run([sys.executable, '
                                             '"-c", "import torch"], check=True)']),
                               env=dict(os.environ, PYTHONPATH=path), cwd='/', capture_output=True, timeout=60, check=False)
        if probe.returncode == 0:
            return python, path
    pytest.skip('uid %d can start no Python with torch here' % uid)
    return None


def run_module_as(uid, p, cwd):
    """The module's logic run by ``uid`` (setpriv drops every group too); its result, or {failed, msg}."""
    python, path = python_for(uid)
    proc = subprocess.run(as_user(uid, [python, '-c', AS_USER, json.dumps(p)]), env=dict(os.environ, PYTHONPATH=path),
                          cwd=str(cwd), capture_output=True, text=True, timeout=90, check=False)
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def shared_workdir(tracker):
    """A work directory other users can enter (pytest's tmp_path is root's alone), removed at the end."""
    path = tempfile.mkdtemp(prefix='trainops-i24-')
    os.chmod(path, 0o755)
    try:
        workdir = pathlib.Path(path)
        (workdir / 'worker.py').write_text(WORKER)
        (workdir / 'probe.py').write_text(PROBE)
        (workdir / 'out').mkdir()
        yield workdir
    finally:
        tracker.cleanup()
        shutil.rmtree(path, ignore_errors=True)


def unrelated_sleep_tree(tracker):
    """``sh`` with two ``sleep`` children in a session of their own, started by the test: nothing of any run."""
    sh = subprocess.Popen(['sh', '-c', 'sleep 300 & sleep 300 & wait'], start_new_session=True)
    tracker.children.append(sh)
    tracker.add(sh.pid)
    kids = wait_for(lambda: [pid for pid, info in SYSTEM.list_processes().items() if info.ppid == sh.pid][1:] and
                    sorted(pid for pid, info in SYSTEM.list_processes().items() if info.ppid == sh.pid), 10,
                    what='the sleep children')
    for pid in kids:
        tracker.add(pid)
    return [sh.pid] + kids


def forge(run_dir, pids):
    tr.write_json_atomic(os.path.join(run_dir, 'pids.json'), pids)


def test_a_forged_pids_json_never_stops_an_unrelated_tree(workdir, tracker):
    p = params(workdir, 'real-forged', 'normal', free_port())
    job = tr.run_module(p)['job']
    track_job(tracker, job)
    for pid in worker_pids(workdir):
        tracker.add(pid)
    run_dir = job['run_dir']
    genuine = tr.read_json(os.path.join(run_dir, 'pids.json'))
    tree = unrelated_sleep_tree(tracker)
    starts = dict((pid, tracker.procs[pid]) for pid in tree)

    forgeries = [
        # the job's own code points its records at a process tree that is not the run's
        (dict(genuine, supervisor_pid=tree[0], supervisor_start_time=starts[tree[0]], pid=tree[1], pgid=tree[0],
              start_time=starts[tree[1]]),
         'supervisor_pid %d is not its supervisor: its command line' % tree[0]),
        (dict(genuine, supervisor_pid=1, supervisor_start_time=SYSTEM.read_proc_stat(1).start_time),
         "supervisor_pid is 1, which is never a run's process"),
        (dict((k, v) for k, v in genuine.items() if k != 'supervisor_start_time'),
         'supervisor_start_time is missing'),
    ]
    for forged, words in forgeries:
        forge(run_dir, forged)
        with pytest.raises(tr.TorchrunError) as excinfo:
            tr.run_module(dict(p, state='stopped', run_id=None))
        assert excinfo.value.msg.startswith('Run real-forged: refusing to act on its records'), excinfo.value.msg
        assert words in excinfo.value.msg and 'Nothing was signalled' in excinfo.value.msg
        for pid in tree:
            assert alive(pid, starts[pid]), 'pid %d of the unrelated tree was signalled' % pid
        assert alive(job['supervisor_pid'], tracker.procs[job['supervisor_pid']])
        with pytest.raises(tr.TorchrunError, match='refusing to act on its records'):
            tr.run_module(dict(p, state='query'))

    forge(run_dir, genuine)
    stopped = tr.run_module(dict(p, state='stopped', run_id=None))
    assert stopped['changed'] is True and job['pid'] in stopped['stopped_pids']
    assert stopped['job']['status'] == 'exited'
    assert not alive(job['pid'], tracker.procs[job['pid']])
    for pid in tree:
        assert alive(pid, starts[pid])


@pytest.mark.skipif(os.geteuid() != 0, reason='needs root: starts a run as nobody (uid 65534)')
def test_root_stops_another_users_run_with_that_users_uid(shared_workdir, tracker):
    workdir = shared_workdir
    for path in [workdir] + list(workdir.rglob('*')):
        os.chown(str(path), NOBODY, NOBODY)
    python, path = python_for(NOBODY)
    p = params(workdir, 'real-nobody', 'uid-probe', free_port(), python=python, env={'PYTHONPATH': path})
    started = run_module_as(NOBODY, p, workdir)
    assert not started.get('failed'), started
    job = started['job']
    track_job(tracker, job)
    assert SYSTEM.read_proc_uid(job['supervisor_pid']) == NOBODY
    for pid in worker_pids(workdir):
        tracker.add(pid)
    probe = int(wait_for(lambda: (workdir / 'out' / 'probe.ready').exists() and (workdir / 'out' / 'probe.pid').read_text(),
                         60, what='the probe'))
    tracker.add(probe)

    stopped = tr.run_module(dict(p, state='stopped', run_id=None))  # as root (become)
    assert stopped['changed'] is True and probe in stopped['stopped_pids']
    assert stopped['job']['status'] == 'exited'
    sent = json.loads(wait_for(lambda: (workdir / 'out' / 'sigterm.json').exists() and
                               (workdir / 'out' / 'sigterm.json').read_text(), 10, what="the probe's record"))
    # the SIGTERM came from the stop (not the run's own supervisor), with nobody's uid rather than root's
    assert sent['uid'] == NOBODY, sent
    assert sent['pid'] not in (job['supervisor_pid'], job['pid'], os.getpid()), sent


@pytest.mark.skipif(os.geteuid() != 0, reason='needs root: queries and stops root\'s run as nobody (uid 65534)')
def test_another_user_is_told_whose_run_it_is_not_that_it_is_absent(shared_workdir, tracker):
    workdir = shared_workdir
    p = params(workdir, 'real-roots', 'normal', free_port())
    job = tr.run_module(p)['job']
    track_job(tracker, job)
    for state in ('query', 'stopped'):
        for run_id in ('real-roots', None):
            result = run_module_as(NOBODY, dict(p, state=state, run_id=run_id), '/')
            assert result.get('failed') and 'belongs to another user, uid 0 (root)' in result['msg'], result
    assert alive(job['supervisor_pid'], tracker.procs[job['supervisor_pid']])
    assert tr.run_module(dict(p, state='stopped'))['changed'] is True
