# -*- coding: utf-8 -*-

# Copyright (c) 2025, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for plugins/module_utils/_torchrun.py and _proc.py, with the OS replaced by FakeSystem."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import pathlib
import re
import signal
import stat
import subprocess
import sys
import time

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _torchrun as tr
from ansible_collections.trainops.multinode.plugins.module_utils import _run_records as rr
from ansible_collections.trainops.multinode.plugins.module_utils import _supervisor as sup
from ansible_collections.trainops.multinode.plugins.module_utils._proc import (
    ProcInfo,
    descendants,
    is_alive,
    parse_stat,
)


# ------------------------------------------------------------------------------------------------
# fake operating system
# ------------------------------------------------------------------------------------------------

class FakeProc(object):
    def __init__(self, pid, ppid, pgid=None, start_time=None, ignore_term=False, cmdline=None, uid=None):
        self.pid = pid
        self.ppid = ppid
        self.pgid = pgid if pgid is not None else pid
        self.start_time = start_time if start_time is not None else pid * 10
        self.ignore_term = ignore_term
        self.state = 'S'
        self.cmdline = cmdline if cmdline is not None else ['python3', 'train.py']
        self.uid = uid if uid is not None else os.getuid()


def supervisor_cmdline(run_dir, foreground=False):
    """The command line the start (or a Slurm step's task) gives the supervisor of the run in ``run_dir``."""
    return [sys.executable, os.path.join(run_dir, 'supervisor.py')] + (['--foreground'] if foreground else []) + \
        [os.path.join(run_dir, 'job.json')]


class FakeSystem(object):
    """In-memory process table, clock and signal log with the methods of _proc.System."""

    OWN_PGID = 4242

    def __init__(self):
        self.procs = {}
        self.euid_value = os.geteuid()
        self.owners = {}  # path -> uid lstat reports (default: the real owner)
        self.signalled_as = []  # (uid, gid) of every as_user
        self.clock = 1000.0
        self.signals = []  # (kind, id, sig)
        self.spawned = []
        self.sleeps = []
        self.subreaper = None
        self.finishers = {}  # supervisor pid -> (exit_path, record): written once its tree is gone
        self.on_spawn = None

    # process table -----------------------------------------------------------------------------
    def add(self, pid, ppid, pgid=None, start_time=None, ignore_term=False, cmdline=None, uid=None):
        self.procs[pid] = FakeProc(pid, ppid, pgid, start_time, ignore_term, cmdline, uid)
        return self.procs[pid]

    def _die(self, pid):
        proc = self.procs.pop(pid, None)
        if proc is None:
            return
        for child in self.procs.values():
            if child.ppid == pid:
                child.ppid = self.subreaper or 1
        self._maybe_finish()

    def _maybe_finish(self):
        for sup, (path, record) in list(self.finishers.items()):
            if sup in self.procs and not any(p.ppid == sup for p in self.procs.values()):
                with open(path, 'w') as f:
                    json.dump(record, f)
                del self.finishers[sup]
                self.procs.pop(sup, None)

    def _deliver(self, proc, sig):
        if proc.state == 'T' and sig not in (signal.SIGKILL, signal.SIGCONT):
            proc.pending = sig  # a stopped process acts on a signal once continued
            return
        if sig == signal.SIGCONT:
            proc.state, sig = 'S', getattr(proc, 'pending', None)
        if sig == signal.SIGKILL or (sig == signal.SIGTERM and not proc.ignore_term):
            self._die(proc.pid)

    # System API -------------------------------------------------------------------------------
    def time(self):
        return 1700000000.0 + self.clock

    def monotonic(self):
        return self.clock

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.clock += seconds

    def read_proc_stat(self, pid):
        proc = self.procs.get(pid)
        if proc is None:
            return None
        return ProcInfo(proc.pid, proc.ppid, proc.pgid, proc.state, proc.start_time)

    def read_proc_cmdline(self, pid):
        proc = self.procs.get(pid)
        return None if proc is None else list(proc.cmdline)

    def read_proc_uid(self, pid):
        proc = self.procs.get(pid)
        return None if proc is None else proc.uid

    def list_processes(self):
        return dict((pid, self.read_proc_stat(pid)) for pid in self.procs)

    def euid(self):
        return self.euid_value

    def lstat(self, path):
        st = os.lstat(path)
        if path not in self.owners:
            return st
        return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, self.owners[path], st.st_gid, st.st_size,
                               int(st.st_atime), int(st.st_mtime), int(st.st_ctime)))

    def as_user(self, uid, gid):
        self.signalled_as.append((uid, gid))
        return self

    def own_pgid(self):
        return self.OWN_PGID

    def kill(self, pid, sig):
        self.signals.append(('pid', pid, sig))
        proc = self.procs.get(pid)
        if proc is None:
            return False
        self._deliver(proc, sig)
        return True

    def killpg(self, pgid, sig):
        self.signals.append(('pg', pgid, sig))
        members = [p for p in self.procs.values() if p.pgid == pgid]
        for proc in members:
            self._deliver(proc, sig)
        return bool(members)

    def spawn_detached(self, argv, cwd, output_path, wait_timeout=30, env=None):
        self.spawned.append({'argv': argv, 'cwd': cwd, 'output_path': output_path, 'env': env})
        if self.on_spawn:
            return self.on_spawn(argv, cwd, output_path)
        return 0

    @contextlib.contextmanager
    def lock(self, path):
        yield


def start_params(tmp_path, **overrides):
    params = dict(
        state='started', state_dir=str(tmp_path / 'state'), node_id='n0', run_id='run1', nnodes=2, nproc_per_node=2, node_rank=0,
        master_addr='10.0.0.1', master_port=29500, rdzv_backend='static', rdzv_id=None, rdzv_timeout=None,
        max_restarts=0, entrypoint='train.py', entrypoint_args=[], python='python3', torchrun=None,
        command_prefix=[], chdir=None, env={}, replace=False, stop_timeout=15, log_lines=20,
    )
    params.update(overrides)
    return params


def recording_spawn(fake, sup_pid=500, torchrun_pid=501, workers=(502, 503)):
    """on_spawn hook: play the supervisor (pids.json + a process tree under a subreaper)."""
    def on_spawn(argv, cwd, output_path):
        job_path = argv[2]
        run_dir = os.path.dirname(job_path)
        fake.add(sup_pid, 1, pgid=sup_pid - 1, cmdline=[argv[0]] + argv[1:])
        fake.subreaper = sup_pid
        fake.add(torchrun_pid, sup_pid)
        for w in workers:
            fake.add(w, torchrun_pid)  # workers: own sessions
        with open(os.path.join(run_dir, 'pids.json'), 'w') as f:
            json.dump({'supervisor_pid': sup_pid, 'supervisor_start_time': sup_pid * 10, 'pid': torchrun_pid,
                       'pgid': torchrun_pid, 'start_time': torchrun_pid * 10, 'started_at': '2025-01-01T00:00:00Z'}, f)
        fake.finishers[sup_pid] = (os.path.join(run_dir, 'exit.json'),
                                   {'exit_code': 143, 'signal': None, 'ended_at': '2025-01-01T01:00:00Z'})
        return 0
    return on_spawn


def make_run(node, fake, run_id, params=None, sup_pid=None, torchrun_pid=None, workers=(), exit_rec=None,
             write_pids=True, alive=True, current=True):
    """Create the on-disk records of a run (as if started earlier) and optionally its live processes."""
    params = params or {}
    base = dict(**at(node), run_id=run_id, nnodes=1, nproc_per_node=2, node_rank=0, master_addr='127.0.0.1',
                master_port=29500, entrypoint='train.py')
    base.update(params)
    argv = tr.build_argv(base)
    env = tr.normalize_env(base.get('env'))
    spec = {'run_id': run_id, 'argv': argv, 'env': env, 'chdir': base.get('chdir'),
            'fingerprint': tr.compute_fingerprint(argv, env, base.get('chdir')), 'node_rank': 0, 'uid': os.getuid()}
    paths = node.paths(run_id)
    os.makedirs(paths['run_dir'])
    tr.write_json_atomic(paths['job'], spec)
    sup_pid = sup_pid or 700 + len(os.listdir(node.runs_dir)) * 10
    torchrun_pid = torchrun_pid or sup_pid + 1
    if write_pids:
        tr.write_json_atomic(paths['pids'], {
            'supervisor_pid': sup_pid, 'supervisor_start_time': sup_pid * 10, 'pid': torchrun_pid, 'pgid': torchrun_pid,
            'start_time': torchrun_pid * 10, 'started_at': '2025-01-01T00:00:00Z'})
    if exit_rec is not None:
        tr.write_json_atomic(paths['exit'], exit_rec)
    if alive:
        fake.add(sup_pid, 1, pgid=sup_pid - 1, cmdline=supervisor_cmdline(paths['run_dir']))
        fake.subreaper = sup_pid
        fake.add(torchrun_pid, sup_pid)
        for w in workers:
            fake.add(w, torchrun_pid)
        fake.finishers[sup_pid] = (paths['exit'], {'exit_code': 143, 'signal': None, 'ended_at': '2025-01-01T01:00:00Z'})
    if current:
        tr.write_json_atomic(node.current_path, {'run_id': run_id})
    return spec


@pytest.fixture
def fake():
    return FakeSystem()


def at(node):
    """The module's state_dir (the state root) and node_id that resolve to ``node``'s directory."""
    return dict(state_dir=os.path.dirname(node.state_dir), node_id=os.path.basename(node.state_dir))


@pytest.fixture
def node(tmp_path, fake):
    # the node's own directory below the state root, as run_module(state_dir=<root>, node_id='n0') resolves it
    n = tr.TorchrunNode(str(tmp_path / 'state' / 'n0'), system=fake)
    os.makedirs(n.runs_dir)
    return n


# ------------------------------------------------------------------------------------------------
# argv, env, fingerprint, validation
# ------------------------------------------------------------------------------------------------

def test_build_argv_static(tmp_path):
    argv = tr.build_argv(start_params(tmp_path, entrypoint_args=['--epochs', '3']))
    assert argv == [
        'python3', '-m', 'torch.distributed.run', '--nnodes', '2', '--nproc-per-node', '2',
        '--rdzv-backend', 'static', '--node-rank', '0', '--master-addr', '10.0.0.1', '--master-port', '29500',
        '--max-restarts', '0', 'train.py', '--epochs', '3']


def test_build_argv_module_runs_the_entrypoint_as_python_m_does(tmp_path):
    argv = tr.build_argv(start_params(tmp_path, module=True, entrypoint='torchtitan.train', entrypoint_args=['--x']))
    assert argv[-4:] == ['0', '--module', 'torchtitan.train', '--x']


def test_build_argv_static_rdzv_timeout(tmp_path):
    argv = tr.build_argv(start_params(tmp_path, node_rank=1, rdzv_timeout=120, max_restarts=2))
    assert argv[argv.index('--rdzv-conf') + 1] == 'timeout=120'
    assert argv[argv.index('--node-rank') + 1] == '1'
    assert argv[argv.index('--max-restarts') + 1] == '2'


def test_build_argv_c10d(tmp_path):
    argv = tr.build_argv(start_params(tmp_path, rdzv_backend='c10d', rdzv_timeout=300))
    assert argv == [
        'python3', '-m', 'torch.distributed.run', '--nnodes', '2', '--nproc-per-node', '2',
        '--rdzv-backend', 'c10d', '--rdzv-endpoint', '10.0.0.1:29500', '--rdzv-id', 'run1',
        '--rdzv-conf', 'join_timeout=300', '--max-restarts', '0', 'train.py']
    assert '--node-rank' not in argv and '--master-addr' not in argv


def test_build_argv_c10d_rdzv_id_and_ipv6(tmp_path):
    argv = tr.build_argv(start_params(tmp_path, rdzv_backend='c10d', rdzv_id='job-x', master_addr='fd00::1'))
    assert argv[argv.index('--rdzv-endpoint') + 1] == '[fd00::1]:29500'
    assert argv[argv.index('--rdzv-id') + 1] == 'job-x'
    assert '--rdzv-conf' not in argv


def test_build_argv_prefix_and_torchrun_path(tmp_path):
    argv = tr.build_argv(start_params(tmp_path, torchrun='/opt/venv/bin/torchrun', command_prefix=['nsys', 'profile', '-o', '/tmp/p'],
                                      python='/ignored/python'))
    assert argv[:5] == ['nsys', 'profile', '-o', '/tmp/p', '/opt/venv/bin/torchrun']
    assert '/ignored/python' not in argv and '-m' not in argv


def test_build_argv_python(tmp_path):
    argv = tr.build_argv(start_params(tmp_path, python='/opt/venv/bin/python', command_prefix=['docker', 'exec', 'c1']))
    assert argv[:6] == ['docker', 'exec', 'c1', '/opt/venv/bin/python', '-m', 'torch.distributed.run']


def test_normalize_env():
    assert tr.normalize_env({'A': 1, 'B': True, 'C': 'x', 'D': False}) == {'A': '1', 'B': 'true', 'C': 'x', 'D': 'false'}
    assert tr.normalize_env(None) == {}
    with pytest.raises(tr.TorchrunError, match='must not be null'):
        tr.normalize_env({'A': None})


def test_fingerprint():
    fp = tr.compute_fingerprint(['a', 'b'], {'X': '1'}, None)
    assert fp == tr.compute_fingerprint(['a', 'b'], {'X': '1'}, None)
    assert len(fp) == 64
    assert fp != tr.compute_fingerprint(['a', 'b'], {'X': '2'}, None)
    assert fp != tr.compute_fingerprint(['a', 'b'], {'X': '1'}, '/srv')
    assert fp != tr.compute_fingerprint(['a', 'c'], {'X': '1'}, None)


@pytest.mark.parametrize('overrides, match', [
    (dict(node_rank=2), 'node_rank must be between 0 and nnodes - 1'),
    (dict(node_rank=-1), 'node_rank must be between'),
    (dict(nnodes=0, node_rank=0), 'nnodes must be >= 1'),
    (dict(nproc_per_node=0), 'nproc_per_node must be >= 1'),
    (dict(master_port=0), 'master_port must be between 1 and 65535'),
    (dict(master_port=70000), 'master_port must be between 1 and 65535'),
    (dict(run_id='../etc'), 'Invalid run_id'),
    (dict(run_id='a/b'), 'Invalid run_id'),
    (dict(run_id=None), 'run_id is required'),
    (dict(entrypoint=None), 'entrypoint is required'),
    (dict(rdzv_timeout=0), 'rdzv_timeout must be >= 1'),
    (dict(max_restarts=-1), 'max_restarts must be >= 0'),
])
def test_validate_start_params(tmp_path, overrides, match):
    with pytest.raises(tr.TorchrunError, match=match):
        tr.validate_start_params(start_params(tmp_path, **overrides))


def test_tail_lines(tmp_path):
    path = tmp_path / 'log'
    assert tr.tail_lines(str(path), 5) == []
    path.write_text(''.join('line %d\n' % i for i in range(5000)))
    assert tr.tail_lines(str(path), 3) == ['line 4997', 'line 4998', 'line 4999']
    assert tr.tail_lines(str(path), 0) == []
    assert len(tr.tail_lines(str(path), 2000)) == 2000


def test_parse_stat_with_odd_comm():
    data = '123 (we ird) (x)) S 1 120 120 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 98765 1000 10 18446744073709551615'
    info = parse_stat(123, data)
    assert info == ProcInfo(123, 1, 120, 'S', 98765)
    assert parse_stat(1, 'garbage') is None


def test_is_alive_and_descendants():
    procs = {
        1: ProcInfo(1, 0, 1, 'S', 1),
        10: ProcInfo(10, 1, 10, 'S', 100),
        11: ProcInfo(11, 10, 11, 'S', 110),
        12: ProcInfo(12, 11, 12, 'R', 120),
        13: ProcInfo(13, 10, 10, 'Z', 130),
        20: ProcInfo(20, 1, 20, 'S', 200),
    }
    assert sorted(descendants(procs, 10)) == [11, 12]
    assert is_alive(procs[10], 100)
    assert not is_alive(procs[10], 101)  # pid reused
    assert not is_alive(procs[13])  # zombie
    assert not is_alive(None)


# ------------------------------------------------------------------------------------------------
# start
# ------------------------------------------------------------------------------------------------

def test_start_fresh(tmp_path, fake):
    fake.on_spawn = recording_spawn(fake)
    params = start_params(tmp_path, env={'NCCL_DEBUG': 'INFO', 'NCCL_SOCKET_IFNAME': '=bond0.2093', 'X': "a b'c"},
                          chdir='/srv/train')
    result = tr.run_module(params, system=fake)
    assert result['changed'] is True
    job = result['job']
    assert job['status'] == 'running'
    assert (job['pid'], job['pgid'], job['supervisor_pid']) == (501, 501, 500)
    assert job['env'] == {'NCCL_DEBUG': 'INFO', 'NCCL_SOCKET_IFNAME': '=bond0.2093', 'X': "a b'c"}
    assert job['chdir'] == '/srv/train'
    assert job['fingerprint'] == tr.compute_fingerprint(job['argv'], job['env'], '/srv/train')
    run_dir = str(tmp_path / 'state' / 'n0' / 'runs' / 'run1')
    assert job['run_dir'] == run_dir and job['log_path'] == os.path.join(run_dir, 'node.log')

    assert len(fake.spawned) == 1
    spawned = fake.spawned[0]
    assert spawned['argv'] == [sys.executable, os.path.join(run_dir, 'supervisor.py'), os.path.join(run_dir, 'job.json')]
    assert spawned['cwd'] == run_dir
    assert spawned['output_path'] == os.path.join(run_dir, 'supervisor.log')
    # the supervisor and the module_utils it imports there, byte for byte the collection's files, private
    for name, source in (('supervisor.py', sup.__file__), ('_proc.py', tr._proc.__file__), ('_files.py', tr._files.__file__)):
        with open(os.path.join(run_dir, name)) as f, open(source) as g:
            assert f.read() == g.read()
        assert stat.S_IMODE(os.stat(os.path.join(run_dir, name)).st_mode) == 0o600
    with open(os.path.join(run_dir, 'job.json')) as f:
        recorded = json.load(f)
    assert recorded['argv'] == job['argv'] and recorded['fingerprint'] == job['fingerprint']
    with open(str(tmp_path / 'state' / 'n0' / 'current.json')) as f:
        assert json.load(f)['run_id'] == 'run1'
    # the env file: mode 0600, and a shell that sources it gets exactly the env back
    assert job['env_file'] == os.path.join(run_dir, 'env.sh')
    assert stat.S_IMODE(os.stat(job['env_file']).st_mode) == 0o600
    dumped = subprocess.run(['bash', '-c', 'set -a; . "$1"; env -0', 'bash', job['env_file']], env={},
                            capture_output=True, text=True, check=True).stdout
    got = dict(item.split('=', 1) for item in dumped.split('\0') if item)
    assert {k: got[k] for k in job['env']} == job['env']


def test_supervisor_files_are_what_it_imports():
    assert sorted(tr.SUPERVISOR_FILES) == sorted(('supervisor.py', ) + sup.SHIPPED_WITH)


def test_start_same_run_running_is_idempotent(tmp_path, fake, node):
    make_run(node, fake, 'run1', params=dict(nnodes=2, nproc_per_node=2, master_addr='10.0.0.1'))
    result = tr.run_module(start_params(tmp_path), system=fake)
    assert result['changed'] is False
    assert result['job']['status'] == 'running'
    assert fake.spawned == [] and fake.signals == []


def test_start_same_run_exited_is_idempotent(tmp_path, fake, node):
    make_run(node, fake, 'run1', params=dict(nnodes=2, nproc_per_node=2, master_addr='10.0.0.1'),
             exit_rec={'exit_code': 0, 'signal': None, 'ended_at': '2025-01-01T02:00:00Z', 'ended_at_epoch': 1735696800.25},
             alive=False)
    result = tr.run_module(start_params(tmp_path), system=fake)
    assert result['changed'] is False
    assert result['job']['status'] == 'exited'
    assert result['job']['exit_code'] == 0
    assert result['job']['ended_at_epoch'] == 1735696800.25
    assert fake.spawned == []


def test_start_fingerprint_mismatch(tmp_path, fake, node):
    make_run(node, fake, 'run1', params=dict(nnodes=2, nproc_per_node=2, master_addr='10.0.0.1'))
    with pytest.raises(tr.TorchrunError, match='different fingerprint') as exc:
        tr.run_module(start_params(tmp_path, env={'NCCL_DEBUG': 'WARN'}), system=fake)
    assert 'env' in exc.value.msg
    assert fake.spawned == []


def test_start_same_run_lost_fails(tmp_path, fake, node):
    make_run(node, fake, 'run1', params=dict(nnodes=2, nproc_per_node=2, master_addr='10.0.0.1'), alive=False)
    with pytest.raises(tr.TorchrunError, match='is lost'):
        tr.run_module(start_params(tmp_path), system=fake)


def test_start_refuses_when_other_run_running(tmp_path, fake, node):
    make_run(node, fake, 'old', sup_pid=800, torchrun_pid=801, workers=(802,))
    with pytest.raises(tr.TorchrunError) as exc:
        tr.run_module(start_params(tmp_path), system=fake)
    msg = exc.value.msg
    assert 'run old' in msg and 'pid 801' in msg and '2025-01-01T00:00:00Z' in msg
    assert node.paths('old')['log'] in msg
    assert 'replace=true' in msg
    assert exc.value.details['running'][0]['run_id'] == 'old'
    assert fake.spawned == [] and fake.signals == []


def test_start_ignores_finished_other_run(tmp_path, fake, node):
    make_run(node, fake, 'old', exit_rec={'exit_code': 1, 'signal': None, 'ended_at': 'x'}, alive=False)
    fake.on_spawn = recording_spawn(fake)
    result = tr.run_module(start_params(tmp_path), system=fake)
    assert result['changed'] is True and result['replaced'] == []


def test_start_replace_stops_other_run_first(tmp_path, fake, node):
    make_run(node, fake, 'old', sup_pid=800, torchrun_pid=801, workers=(802, 803))
    fake.on_spawn = recording_spawn(fake)
    result = tr.run_module(start_params(tmp_path, replace=True), system=fake)
    assert result['changed'] is True
    assert result['replaced'] == ['old']
    assert result['stopped_pids'] == [801, 802, 803]
    assert ('pg', 801, signal.SIGTERM) in fake.signals
    assert len(fake.spawned) == 1
    assert os.path.exists(node.paths('old')['exit'])
    assert node.current_run_id() == 'run1'


def test_start_check_mode(tmp_path, fake):
    result = tr.run_module(start_params(tmp_path), check_mode=True, system=fake)
    assert result['changed'] is True
    assert result['job']['status'] == 'absent'
    assert result['job']['argv'][0] == 'python3'
    assert fake.spawned == []
    assert not os.path.exists(str(tmp_path / 'state'))


def test_start_check_mode_replace_signals_nothing(tmp_path, fake, node):
    make_run(node, fake, 'old', sup_pid=800, torchrun_pid=801, workers=(802,))
    result = tr.run_module(start_params(tmp_path, replace=True), check_mode=True, system=fake)
    assert result['changed'] is True
    assert result['replaced'] == ['old'] and result['stopped_pids'] == [801, 802]
    assert fake.signals == [] and fake.spawned == []
    assert not os.path.exists(node.run_dir('run1'))


def test_start_supervisor_never_records_pid(tmp_path, fake, monkeypatch):
    def on_spawn(argv, cwd, output_path):
        with open(output_path, 'a') as f:
            f.write('Traceback: something broke\n')
        return 0
    fake.on_spawn = on_spawn
    with pytest.raises(tr.TorchrunError, match='did not record the torchrun pid') as exc:
        tr.run_module(start_params(tmp_path), system=fake)
    assert 'something broke' in exc.value.msg
    assert fake.clock - 1000.0 >= tr.START_WAIT
    # given up: a supervisor that comes up late finds the stop record and never starts torchrun
    (run_dir, ) = [os.path.join(d, 'run1') for d in glob.glob(str(tmp_path / '**' / 'runs'), recursive=True)]
    with open(os.path.join(run_dir, 'stop.json')) as f:
        assert json.load(f)['reason'] == 'undo'


def test_a_late_supervisor_never_starts_torchrun(tmp_path):
    run_dir = tmp_path / 'run1'
    run_dir.mkdir()
    marker = tmp_path / 'started'
    (run_dir / 'job.json').write_text(json.dumps({'argv': ['touch', str(marker)], 'env': {}, 'chdir': str(tmp_path)}))
    (run_dir / 'stop.json').write_text(json.dumps({'reason': 'undo'}))
    program = tr.write_supervisor(str(run_dir))
    subprocess.run([sys.executable, program, str(run_dir / 'job.json')], check=True, timeout=30)
    deadline = time.time() + 20
    while not (run_dir / 'exit.json').exists() and time.time() < deadline:
        time.sleep(0.05)
    exit_rec = json.loads((run_dir / 'exit.json').read_text())
    assert exit_rec['exit_code'] == 143 and 'stopped before torchrun started' in exit_rec['error']
    assert not marker.exists() and not (run_dir / 'pids.json').exists()


def test_start_torchrun_cannot_exec(tmp_path, fake):
    def on_spawn(argv, cwd, output_path):
        with open(os.path.join(os.path.dirname(argv[2]), 'exit.json'), 'w') as f:
            json.dump({'exit_code': 127, 'signal': None, 'error': "cannot start: [Errno 2] No such file or directory: 'nope'"}, f)
        return 0
    fake.on_spawn = on_spawn
    with pytest.raises(tr.TorchrunError, match='No such file'):
        tr.run_module(start_params(tmp_path, torchrun='nope'), system=fake)


def test_start_supervisor_launch_fails(tmp_path, fake):
    fake.on_spawn = lambda argv, cwd, output_path: 1
    with pytest.raises(tr.TorchrunError, match='could not be started'):
        tr.run_module(start_params(tmp_path), system=fake)


# ------------------------------------------------------------------------------------------------
# stop
# ------------------------------------------------------------------------------------------------

def test_stop_term_is_enough(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601, workers=(602, 603))
    result = tr.run_module(dict(state='stopped', **at(node), run_id=None, stop_timeout=15, log_lines=5), system=fake)
    assert result['changed'] is True
    assert result['stopped_pids'] == [601, 602, 603]
    assert result['killed_pids'] == []
    assert result['job']['status'] == 'exited'
    sent = [s for s in fake.signals if s[2] == signal.SIGTERM]
    assert sent[0] == ('pg', 601, signal.SIGTERM)  # torchrun's group first
    assert ('pg', 602, signal.SIGTERM) in sent and ('pg', 603, signal.SIGTERM) in sent
    assert not [s for s in fake.signals if s[2] == signal.SIGKILL]
    # never the supervisor, its group, or the caller's group
    assert not [s for s in fake.signals if s[1] in (600, 599, FakeSystem.OWN_PGID)]


def test_stop_with_checkpoint_seconds_sends_the_checkpoint_signal_first_and_waits_for_the_checkpoint(tmp_path, fake, node):
    # launcher=ssh under sbatch, near the time limit (docs/slurm.md): the ranks checkpoint, then the run is stopped
    out_dir = tmp_path / 'out'
    out_dir.mkdir()
    make_run(node, fake, 'run1', params={'env': {'TRAINOPS_CHECKPOINT_SIGNAL': 'USR1', 'TRAINOPS_OUTPUT_DIR': str(out_dir)}},
             sup_pid=600, torchrun_pid=601, workers=(602, 603))
    real_sleep = fake.sleep

    def sleep(seconds):  # the ranks write their checkpoint record 2 s after the signal
        real_sleep(seconds)
        if fake.clock - 1000.0 >= 2 and not (out_dir / 'checkpoint.json').exists():
            (out_dir / 'checkpoint.json').write_text('{"global_step": 8}')
    fake.sleep = sleep
    result = tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=5, log_lines=0,
                                stop_reason='timeout', checkpoint_seconds=60), system=fake)
    checkpoint = result['checkpoint_signal']
    assert checkpoint['signal'] == 'SIGUSR1' and checkpoint['written'] is True and 2 <= checkpoint['waited_s'] < 3
    usr1 = [s for s in fake.signals if s[2] == signal.SIGUSR1]
    # the supervisor by pid (it records it in exit.json), then torchrun's group first and each worker's group
    assert usr1[0] == ('pid', 600, signal.SIGUSR1) and usr1[1] == ('pg', 601, signal.SIGUSR1)
    assert {('pg', 602, signal.SIGUSR1), ('pg', 603, signal.SIGUSR1)} <= set(usr1)
    terms = [i for i, s in enumerate(fake.signals) if s[2] == signal.SIGTERM]
    assert max(i for i, s in enumerate(fake.signals) if s[2] == signal.SIGUSR1) < min(terms)  # then the stop
    assert result['job']['stop']['reason'] == 'timeout' and result['stopped_pids'] == [601, 602, 603]


def test_stop_with_checkpoint_seconds_waits_at_most_that_long_and_a_run_without_the_signal_gets_none(tmp_path, fake, node):
    make_run(node, fake, 'run1', params={'env': {'TRAINOPS_CHECKPOINT_SIGNAL': 'USR2'}}, sup_pid=600, torchrun_pid=601)
    result = tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=5, log_lines=0,
                                checkpoint_seconds=3), system=fake)
    assert result['checkpoint_signal']['written'] is False and 3 <= result['checkpoint_signal']['waited_s'] < 3.5
    assert ('pid', 600, signal.SIGUSR2) in fake.signals
    fake.signals[:] = []
    make_run(node, fake, 'run2', sup_pid=700, torchrun_pid=701)  # no TRAINOPS_CHECKPOINT_SIGNAL
    result = tr.run_module(dict(state='stopped', **at(node), run_id='run2', stop_timeout=5, log_lines=0,
                                checkpoint_seconds=3), system=fake)
    assert result['checkpoint_signal'] is None and not [s for s in fake.signals if s[2] != signal.SIGTERM]


def test_stop_escalates_to_kill(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601, workers=(602, 603))
    fake.procs[603].ignore_term = True
    result = tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=7, log_lines=5), system=fake)
    assert result['changed'] is True
    assert result['killed_pids'] == [603]
    assert result['stopped_pids'] == [601, 602, 603]
    assert ('pg', 603, signal.SIGKILL) in fake.signals
    assert fake.clock - 1000.0 >= 7
    terms = [i for i, s in enumerate(fake.signals) if s[2] == signal.SIGTERM]
    kills = [i for i, s in enumerate(fake.signals) if s[2] == signal.SIGKILL]
    assert max(terms) < min(kills)
    assert 603 not in fake.procs


def test_stop_covers_orphans_in_other_groups(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601, workers=(602,))
    fake.add(650, 600, pgid=640)  # orphan re-parented to the supervisor, group leader gone
    fake.add(660, 602, pgid=602)  # dataloader child inside the worker's group
    fake.add(670, 600, pgid=599)  # in the supervisor's own group: must be signalled by pid
    result = tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=5, log_lines=0), system=fake)
    assert result['stopped_pids'] == [601, 602, 650, 660, 670]
    assert ('pg', 640, signal.SIGTERM) in fake.signals
    assert ('pid', 670, signal.SIGTERM) in fake.signals
    assert ('pg', 599, signal.SIGTERM) not in fake.signals


def test_stop_records_its_first_reason_before_signalling(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601, workers=(602,))
    result = tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=5, log_lines=0,
                                stop_reason='user', stop_detail='playbooks/stop.yml'), system=fake)
    stop = result['job']['stop']
    assert stop['reason'] == 'user' and stop['detail'] == 'playbooks/stop.yml' and stop['requested_at']
    path = os.path.join(result['job']['run_dir'], 'stop.json')
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    # a later stop (the collection sweeping up) keeps the first reason; a query shows it
    tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=5, log_lines=0, stop_reason='peer'),
                  system=fake)
    queried = tr.run_module(dict(state='query', **at(node), run_id='run1', log_lines=0), system=fake)
    assert queried['job']['stop']['reason'] == 'user'


def test_stop_refuses_a_reason_the_vocabulary_does_not_have(tmp_path, fake, node):
    # module_utils/_outcomes.py defines the stop reasons: another is refused before anything is recorded or signalled
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601, workers=(602,))
    with pytest.raises(tr.TorchrunError, match="stop_reason: 'crashed' is not a stop reason"):
        tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=5, log_lines=0,
                           stop_reason='crashed'), system=fake)
    assert fake.signals == []
    queried = tr.run_module(dict(state='query', **at(node), run_id='run1', log_lines=0), system=fake)
    assert queried['job']['stop'] is None and queried['job']['status'] == 'running'


def test_stop_without_a_reason_records_nothing_and_query_reports_the_log_size(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601)
    queried = tr.run_module(dict(state='query', **at(node), run_id='run1', log_lines=0), system=fake)
    log = queried['job']['log_path']
    assert queried['job']['log_bytes'] == (os.path.getsize(log) if os.path.exists(log) else None)
    result = tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=5, log_lines=0), system=fake)
    assert result['job']['stop'] is None


def test_stop_not_running_is_unchanged(tmp_path, fake, node):
    make_run(node, fake, 'run1', exit_rec={'exit_code': 0, 'signal': None, 'ended_at': 'x'}, alive=False)
    result = tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=5, log_lines=0), system=fake)
    assert result['changed'] is False and result['stopped_pids'] == []
    assert fake.signals == []


def test_stop_absent_is_unchanged(tmp_path, fake):
    result = tr.run_module(dict(state='stopped', state_dir=str(tmp_path / 'nothing'), run_id=None, stop_timeout=5, log_lines=0), system=fake)
    assert result['changed'] is False
    assert result['job']['status'] == 'absent'


def test_stop_pid_reused_is_not_signalled(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601, alive=False)
    fake.add(600, 1, start_time=1)  # same pids, other processes
    fake.add(601, 600, start_time=2)
    result = tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=5, log_lines=0), system=fake)
    assert result['changed'] is False
    assert result['job']['status'] == 'lost'
    assert fake.signals == []


def test_stop_lost_run_with_live_torchrun(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601, alive=False)
    fake.add(601, 1)  # supervisor was killed, torchrun re-parented to init
    fake.add(602, 601)
    result = tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=5, log_lines=0), system=fake)
    assert result['changed'] is True
    assert result['stopped_pids'] == [601, 602]
    assert 601 not in fake.procs and 602 not in fake.procs


def test_stop_check_mode(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601, workers=(602, 603))
    result = tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=5, log_lines=0),
                           check_mode=True, system=fake)
    assert result['changed'] is True
    assert result['stopped_pids'] == [601, 602, 603]
    assert fake.signals == []
    assert result['job']['status'] == 'running'


def test_stop_waits_for_supervisor_and_warns(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601, workers=(602,))
    del fake.finishers[600]  # supervisor hangs and never writes exit.json
    result = tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=5, log_lines=0), system=fake)
    assert result['changed'] is True
    assert any('did not write exit.json' in w for w in result['warnings'])


# ------------------------------------------------------------------------------------------------
# query
# ------------------------------------------------------------------------------------------------

def query(node, fake, run_id=None, log_lines=20):
    return tr.run_module(dict(state='query', **at(node), run_id=run_id, log_lines=log_lines), system=fake)


def test_query_absent(tmp_path, fake, node):
    result = query(node, fake)
    assert result['changed'] is False
    assert result['job']['status'] == 'absent' and result['job']['run_id'] is None
    assert query(node, fake, run_id='nope')['job']['status'] == 'absent'


def test_query_running_with_log_tail(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601)
    with open(node.paths('run1')['log'], 'w') as f:
        f.write(''.join('[trainops] node=a rank=0/1 epoch=0 step=%d/40 loss=1.0\n' % i for i in range(30)))
    result = query(node, fake, log_lines=3)
    assert result['job']['status'] == 'running'
    assert result['job']['run_id'] == 'run1'  # from current.json
    assert (result['job']['pid'], result['job']['supervisor_pid']) == (601, 600)
    assert result['log_tail'] == ['[trainops] node=a rank=0/1 epoch=0 step=%d/40 loss=1.0' % i for i in (27, 28, 29)]
    assert fake.signals == []
    # whose run it is: the run directory's owner (lstat), for a Slurm step's stop and query (_srun.step_refusal)
    assert result['job']['owner_uid'] == os.lstat(node.paths('run1')['run_dir']).st_uid


def _metrics(directory, rank, records, tail=''):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, 'rank_%02d_metrics.jsonl' % rank), 'w') as f:
        f.write(''.join(json.dumps(r) + '\n' for r in records) + tail)


def test_query_with_metrics_records_gives_the_nodes_step_time_from_the_tail_of_its_metrics(tmp_path, fake, node):
    out = str(tmp_path / 'out')
    make_run(node, fake, 'run1', params={'env': {'TRAINOPS_OUTPUT_DIR': out}})
    _metrics(out, 0, [{'step_time_s': 9.0, 'compute_time_s': 9.0}] * 50 + [{'step_time_s': 0.5, 'compute_time_s': 0.1}] * 3,
             tail='{"step_time_s": 7')   # a record being written
    _metrics(out, 1, [{'step_time_s': 0.7, 'compute_time_s': 0.3, 'pad': 'x' * 300}] * 3)
    os.symlink(os.path.join(out, 'rank_01_metrics.jsonl'), os.path.join(out, 'rank_02_metrics.jsonl'))
    result = tr.run_module(dict(state='query', **at(node), metrics_records=3), system=fake)
    assert result['step_times'] == {'ranks': 2, 'records': 6, 'step_time_s': {'median': 0.6, 'p90': 0.7},
                                    'compute_time_s': {'median': pytest.approx(0.2), 'p90': 0.3}}
    # without metrics_records nothing is read
    assert 'step_times' not in query(node, fake)


def test_query_metrics_records_reads_only_the_end_of_a_file_and_falls_back_to_the_run_dir(tmp_path, fake, node, monkeypatch):
    make_run(node, fake, 'run1')
    out = os.path.join(node.paths('run1')['run_dir'], 'outputs')
    _metrics(out, 0, [{'step_time_s': 0.5, 'pad': 'x' * 500}] * 200)   # ~100 KiB
    reads = []
    real = tr.tail_lines

    def spy(path, count, max_bytes=1024 * 1024):
        reads.append((os.path.basename(path), count, max_bytes))
        return real(path, count, max_bytes=max_bytes)
    monkeypatch.setattr(tr, 'tail_lines', spy)
    result = tr.run_module(dict(state='query', **at(node), metrics_records=5, log_lines=0), system=fake)
    assert result['step_times']['records'] == 5 and result['step_times']['compute_time_s'] is None
    assert [r for r in reads if r[0] != 'node.log'] == [('rank_00_metrics.jsonl', 6, tr.METRICS_TAIL_BYTES)]


def test_query_metrics_records_without_metrics_gives_null(tmp_path, fake, node):
    make_run(node, fake, 'run1', params={'env': {'TRAINOPS_OUTPUT_DIR': str(tmp_path / 'nothing')}})
    assert tr.run_module(dict(state='query', **at(node), metrics_records=5), system=fake)['step_times'] is None
    _metrics(str(tmp_path / 'nothing'), 0, [{'loss': 1.0}], tail='garbage\n')
    assert tr.run_module(dict(state='query', **at(node), metrics_records=5), system=fake)['step_times'] is None
    # no run at all
    assert tr.recent_step_times({'run_dir': None, 'env': None}, 5) is None


def test_query_waiting_for_change_answers_when_the_run_ends_or_its_time_is_up(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601)
    # still running after the 3 s it may watch: answered then, having looked every QUERY_WATCH_POLL
    started = fake.clock
    result = tr.run_module(dict(state='query', **at(node), wait_for_change=3), system=fake)
    assert result['job']['status'] == 'running' and fake.clock - started == pytest.approx(3.0)
    assert fake.sleeps == [tr.QUERY_WATCH_POLL] * 6
    # the run ends 1.2 s into a watch of 30 s: answered at the next look, with its end
    started, watched = fake.clock, fake.sleep

    def sleep(seconds):
        watched(seconds)
        if fake.clock - started >= 1.2 and 601 in fake.procs:
            fake._die(601)  # torchrun exits; its supervisor records the exit and goes
    fake.sleep = sleep
    result = tr.run_module(dict(state='query', **at(node), wait_for_change=30), system=fake)
    assert result['job']['status'] == 'exited' and result['job']['exit_code'] == 143
    assert fake.clock - started == pytest.approx(1.5)
    # a run that is not running is answered at once, whatever the watch
    fake.sleeps[:] = []
    assert tr.run_module(dict(state='query', **at(node), wait_for_change=30), system=fake)['job']['status'] == 'exited'
    assert fake.sleeps == []


def test_query_exited(tmp_path, fake, node):
    make_run(node, fake, 'run1', exit_rec={'exit_code': 137, 'signal': 'SIGKILL', 'ended_at': '2025-01-01T03:00:00Z'}, alive=False)
    job = query(node, fake, run_id='run1')['job']
    assert job['status'] == 'exited'
    assert (job['exit_code'], job['signal'], job['ended_at']) == (137, 'SIGKILL', '2025-01-01T03:00:00Z')


def test_query_reads_the_job_s_records_within_bounds(tmp_path, fake, node):
    # exit.json and stop.json are the job's to rewrite: a 200k-deep value or a 400-digit number is not read (no
    # RecursionError on the node, no such number in what the query returns to the controller)
    make_run(node, fake, 'run1', exit_rec={'exit_code': 0, 'signal': None, 'ended_at': 'x'}, alive=False)
    paths = node.paths('run1')
    with open(paths['exit'], 'w') as handle:
        handle.write('{"exit_code": 0, "x": %s}' % ('[' * 200000 + ']' * 200000))
    with open(paths['stop'], 'w') as handle:
        handle.write('{"reason": "user", "requested_at_epoch": %s}' % ('9' * 400))
    job = query(node, fake, run_id='run1')['job']
    assert job['status'] == 'lost' and job['exit_code'] is None and job['stop'] is None
    # a metrics record's numbers too, in what the query reads of its tail
    out = os.path.join(paths['run_dir'], 'outputs')
    _metrics(out, 0, [{'step_time_s': 0.5}] * 3, tail='{"step_time_s": %s}\n{"step_time_s": NaN}\n' % ('9' * 400))
    assert tr.recent_step_times({'run_dir': paths['run_dir'], 'env': None}, 5)['records'] == 3


def test_query_lost(tmp_path, fake, node):
    make_run(node, fake, 'run1', alive=False)
    assert query(node, fake)['job']['status'] == 'lost'


def test_query_exit_json_wins_over_live_supervisor(tmp_path, fake, node):
    # the supervisor writes exit.json just before exiting
    make_run(node, fake, 'run1', exit_rec={'exit_code': 0, 'signal': None, 'ended_at': 'x'})
    assert query(node, fake)['job']['status'] == 'exited'


def test_query_invalid_run_id(tmp_path, fake, node):
    with pytest.raises(tr.TorchrunError, match='Invalid run_id'):
        query(node, fake, run_id='../../etc')


class ContainerSystem(FakeSystem):
    """FakeSystem whose engine CLI answers inspect/exec like a running --pid=host container."""

    def __init__(self, pid_mode='host', running='true', visible=True):
        super().__init__()
        self.commands = []
        self.pid_mode, self.running, self.visible = pid_mode, running, visible

    def run(self, argv, timeout=60):
        self.commands.append(argv)
        if argv[1] == 'inspect':
            return 0, '%s %s\n' % (self.running, self.pid_mode), ''
        if argv[1] == 'exec' and argv[3:5] == ['test', '-f']:
            return (0 if self.visible else 1), '', ''
        raise AssertionError(argv)


def container_spawns(fake):
    """Make ``fake`` play the supervisor inside the container; returns the list of engine argvs it was started with."""
    spawned = []

    def on_spawn(argv, cwd, output_path):
        spawned.append(argv)
        # argv ends with <python> <supervisor> <job>
        return recording_spawn(fake)([argv[-3], argv[-2], argv[-1]], cwd, output_path)
    fake.on_spawn = on_spawn
    return spawned


def test_start_in_a_container_runs_the_supervisor_there(tmp_path):
    fake = ContainerSystem()
    spawned = container_spawns(fake)
    params = start_params(tmp_path, container='trainops-train', container_engine='podman')
    result = tr.run_module(params, system=fake)
    run_dir = str(tmp_path / 'state' / 'n0' / 'runs' / 'run1')
    assert result['job']['status'] == 'running'
    assert spawned[0][:8] == ['podman', 'exec', '-d', '-u', '%d:%d' % (os.getuid(), os.getgid()), '-w', run_dir,
                              'trainops-train']
    assert spawned[0][-3:] == ['python3', os.path.join(run_dir, 'supervisor.py'), os.path.join(run_dir, 'job.json')]
    assert fake.commands[0][:3] == ['podman', 'inspect', '--type']
    with open(os.path.join(run_dir, 'job.json')) as f:
        assert json.load(f)['container'] == 'trainops-train'


@pytest.mark.parametrize('system, words', [
    (ContainerSystem(pid_mode=''), 'does not share the host PID namespace'),
    (ContainerSystem(running='false'), 'is not running'),
    (ContainerSystem(visible=False), 'is not visible inside container'),
])
def test_start_in_a_container_refuses_what_could_not_be_stopped_or_seen(tmp_path, system, words):
    with pytest.raises(tr.TorchrunError) as err:
        tr.run_module(start_params(tmp_path, container='trainops-train'), system=system)
    assert words in err.value.msg
    assert not system.spawned


def test_container_name_is_validated(tmp_path):
    with pytest.raises(tr.TorchrunError, match='container must be a container name'):
        tr.run_module(start_params(tmp_path, container='a b; rm -rf /'), system=FakeSystem())


# ------------------------------------------------------------------------------------------------
# per-host records, secrets, file modes, permissions (cluster shapes: NFS homes, non-root users, tokens)
# ------------------------------------------------------------------------------------------------

SECRET = 'hf_SuperSecretValue_0123456789'


def all_text_below(path):
    found = []
    for base, _dirs, files in os.walk(path):
        for name in files:
            with open(os.path.join(base, name), 'rb') as handle:
                found.append(handle.read().decode('utf-8', 'replace'))
    return '\n'.join(found)


def test_each_node_keeps_its_runs_below_the_root_in_a_directory_named_after_it(tmp_path):
    one, two = FakeSystem(), FakeSystem()
    one.on_spawn, two.on_spawn = recording_spawn(one), recording_spawn(two)
    first = tr.run_module(start_params(tmp_path, node_id='gpu-01'), system=one)
    second = tr.run_module(start_params(tmp_path, node_id='gpu-02', node_rank=1), system=two)
    assert first['job']['run_dir'] == str(tmp_path / 'state' / 'gpu-01' / 'runs' / 'run1')
    assert second['job']['run_dir'] == str(tmp_path / 'state' / 'gpu-02' / 'runs' / 'run1')
    # same run id on a shared root: two records, no fingerprint clash
    assert second['changed'] is True


def test_by_default_the_node_directory_is_the_host_name(tmp_path, fake):
    import socket
    fake.on_spawn = recording_spawn(fake)
    params = start_params(tmp_path)
    del params['node_id']
    result = tr.run_module(params, system=fake)
    assert result['job']['run_dir'].startswith(str(tmp_path / 'state' / socket.gethostname()) + os.sep)


def test_a_bad_node_id_is_refused(tmp_path, fake):
    with pytest.raises(tr.TorchrunError, match='not a plain name'):
        tr.run_module(start_params(tmp_path, node_id='../other'), system=fake)


def test_state_is_private_to_the_user(tmp_path, fake):
    fake.on_spawn = recording_spawn(fake)
    job = tr.run_module(start_params(tmp_path, env={'A': '1'}), system=fake)['job']
    node_dir = os.path.dirname(os.path.dirname(job['run_dir']))
    for path in (node_dir, os.path.join(node_dir, 'runs'), job['run_dir']):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o700, path
    for name in ('job.json', 'env.sh', 'supervisor.py', 'pids.json'):
        path = os.path.join(job['run_dir'], name)
        if name != 'pids.json':  # written by the (fake) supervisor
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
    assert stat.S_IMODE(os.stat(os.path.join(node_dir, 'current.json')).st_mode) == 0o600


def test_secret_values_reach_the_supervisor_environment_only(tmp_path, fake):
    fake.on_spawn = recording_spawn(fake)
    result = tr.run_module(start_params(tmp_path, env={'NCCL_DEBUG': 'WARN'}, secret_env={'HF_TOKEN': SECRET}), system=fake)
    job = result['job']
    # the supervisor is started with the secret in its environment, on top of this process's
    spawned_env = fake.spawned[0]['env']
    assert spawned_env['HF_TOKEN'] == SECRET and spawned_env['PATH'] == os.environ['PATH']
    assert SECRET not in ' '.join(fake.spawned[0]['argv'])
    # the ranks learn the names, nothing records the value
    assert job['env']['TRAINOPS_SECRET_ENV_NAMES'] == 'HF_TOKEN'
    assert job['secret_env_names'] == ['HF_TOKEN']
    assert SECRET not in json.dumps(result)
    assert SECRET not in all_text_below(str(tmp_path / 'state'))
    assert 'HF_TOKEN' in all_text_below(str(tmp_path / 'state'))  # the name is recorded (env.sh comment, job.json)


def test_without_secrets_the_supervisor_gets_this_process_environment_unchanged(tmp_path, fake):
    fake.on_spawn = recording_spawn(fake)
    tr.run_module(start_params(tmp_path), system=fake)
    assert fake.spawned[0]['env'] is None


def test_the_secret_names_are_part_of_the_fingerprint_but_not_their_values(tmp_path, fake):
    fake.on_spawn = recording_spawn(fake)
    first = tr.run_module(start_params(tmp_path, secret_env={'HF_TOKEN': SECRET}), system=fake)
    again = tr.run_module(start_params(tmp_path, secret_env={'HF_TOKEN': 'rotated'}), system=fake)
    assert again['changed'] is False and again['job']['fingerprint'] == first['job']['fingerprint']
    with pytest.raises(tr.TorchrunError, match='different fingerprint'):
        tr.run_module(start_params(tmp_path, secret_env={'WANDB_API_KEY': SECRET}), system=fake)


def test_a_variable_in_env_and_secret_env_is_refused(tmp_path, fake):
    with pytest.raises(tr.TorchrunError, match='HF_TOKEN set both in env and in secret_env'):
        tr.run_module(start_params(tmp_path, env={'HF_TOKEN': 'a'}, secret_env={'HF_TOKEN': 'b'}), system=fake)
    with pytest.raises(tr.TorchrunError, match='not a valid environment variable name'):
        tr.run_module(start_params(tmp_path, secret_env={'BAD NAME': 'b'}), system=fake)
    assert not fake.spawned


def test_in_a_container_secrets_pass_by_name_and_the_ranks_run_as_the_user(tmp_path):
    fake = ContainerSystem()
    spawned = container_spawns(fake)
    tr.run_module(start_params(tmp_path, container='trainops-train', secret_env={'HF_TOKEN': SECRET, 'B_KEY': 'x'}),
                  system=fake)
    argv = spawned[0]
    assert argv[:5] == ['docker', 'exec', '-d', '-u', '%d:%d' % (os.getuid(), os.getgid())]
    assert argv[5:9] == ['-e', 'B_KEY', '-e', 'HF_TOKEN']  # docker takes the values from its own environment
    assert SECRET not in ' '.join(argv)
    assert fake.spawned[0]['env']['HF_TOKEN'] == SECRET


def test_records_of_another_host_are_never_acted_on(tmp_path, fake, node):
    spec = make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601)
    spec['host'] = {'hostname': 'gpu-17', 'boot_id': 'b-17', 'machine_id': 'm-17'}
    tr.write_json_atomic(node.paths('run1')['job'], spec)
    node.identity = {'hostname': 'gpu-02', 'boot_id': 'b-02', 'machine_id': 'm-02'}
    for call in (lambda: node.query('run1'), lambda: node.stop('run1')):
        with pytest.raises(tr.TorchrunError, match='recorded by host gpu-17 .* two nodes use the same state directory'):
            call()
    assert not fake.signals


def test_pids_of_an_earlier_boot_are_never_signalled(tmp_path, fake, node):
    spec = make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601, workers=(602, ))
    node.identity = {'hostname': 'gpu-02', 'boot_id': 'after-reboot', 'machine_id': 'm-02'}
    spec['host'] = {'hostname': 'gpu-02', 'boot_id': 'before-reboot', 'machine_id': 'm-02'}
    tr.write_json_atomic(node.paths('run1')['job'], spec)
    # the recorded pids happen to be alive again (pid reuse after the reboot): still lost, never signalled
    job = node.query('run1')['job']
    assert job['status'] == 'lost' and 'rebooted' in job['lost_reason']
    result = node.stop('run1')
    assert result['changed'] is False and result['stopped_pids'] == []
    assert not fake.signals


def test_a_stop_without_permission_says_so(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601, workers=(602, ))

    def denied(pgid, sig):
        raise PermissionError(1, 'Operation not permitted')
    fake.killpg = denied
    with pytest.raises(tr.TorchrunError, match=r'Cannot stop run run1: its owner \(uid \d+\) may not signal all of its processes'):
        tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=1, log_lines=0), system=fake)


@pytest.mark.skipif(os.geteuid() == 0, reason='root reads every directory')
def test_a_run_directory_of_another_user_is_not_reported_absent(tmp_path, fake, node):
    make_run(node, fake, 'run1')
    os.chmod(node.paths('run1')['run_dir'], 0)
    try:
        with pytest.raises(tr.TorchrunError, match='cannot be read by this user'):
            node.query('run1')
    finally:
        os.chmod(node.paths('run1')['run_dir'], 0o700)


# ------------------------------------------------------------------------------------------------
# records are verified before anyone acts on them (plugins/module_utils/_run_records.py)
# ------------------------------------------------------------------------------------------------

def unrelated_tree(fake, uid=None):
    """A process tree that has nothing to do with any run: 900 (a login shell, say) and its children."""
    fake.add(900, 1, cmdline=['/usr/sbin/sshd', '-D'], uid=uid)
    fake.add(901, 900, pgid=900, cmdline=['sleep', '1000'], uid=uid)
    fake.add(902, 901, pgid=900, cmdline=['sleep', '1000'], uid=uid)
    return (900, 901, 902)


def forge(node, run_id, record, **fields):
    """Rewrite one of the run's records (``pids`` or ``job``) as the job's own code could: ``fields`` replace
    (None: remove) entries."""
    path = node.paths(run_id)[record]
    data = tr.read_json(path)
    for key, value in fields.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    tr.write_json_atomic(path, data)


def forge_pids(node, run_id, **fields):
    forge(node, run_id, 'pids', **fields)


def forge_job(node, run_id, **fields):
    forge(node, run_id, 'job', **fields)


def stop_refused(node, fake, run_id, match):
    with pytest.raises(tr.TorchrunError, match=match) as excinfo:
        tr.run_module(dict(state='stopped', **at(node), run_id=run_id, stop_timeout=5, log_lines=0), system=fake)
    assert excinfo.value.msg.startswith('Run %s: refusing to act on its records' % run_id)
    assert 'Nothing was signalled' in excinfo.value.msg
    assert fake.signals == []
    return excinfo.value


def test_a_forged_pids_json_pointing_at_an_unrelated_tree_is_refused_and_the_tree_left_alone(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601, workers=(602, ))
    tree = unrelated_tree(fake)
    forge_pids(node, 'run1', supervisor_pid=900, supervisor_start_time=9000, pid=901, pgid=900, start_time=9010)
    error = stop_refused(node, fake, 'run1', r"supervisor_pid 900 is not its supervisor: its command line \['/usr/sbin/sshd', '-D'\]")
    assert error.details['refused'].startswith('supervisor_pid 900 is not its supervisor')
    assert all(pid in fake.procs for pid in tree + (600, 601, 602))
    # the status says the same instead of calling the run running or lost
    with pytest.raises(tr.TorchrunError, match='Run run1: refusing .* supervisor_pid 900 is not its supervisor'):
        query(node, fake, 'run1')


@pytest.mark.parametrize('value, words', [
    (1, "supervisor_pid is 1, which is never a run's process"),
    (0, "supervisor_pid is 0, which is never a run's process"),
    (-600, "supervisor_pid is -600, which is never a run's process"),
    ('600', "supervisor_pid '600' is not a number"),
    (True, 'supervisor_pid True is not a number'),
    (600.0, 'supervisor_pid 600.0 is not a number'),
])
def test_a_supervisor_pid_that_is_no_process_id_above_1_is_refused(tmp_path, fake, node, value, words):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601)
    fake.add(1, 0, cmdline=['/sbin/init'], start_time=1)
    forge_pids(node, 'run1', supervisor_pid=value, supervisor_start_time=1)
    stop_refused(node, fake, 'run1', re_escape(words))
    assert 1 in fake.procs and 600 in fake.procs


def re_escape(text):
    return re.escape(text)


@pytest.mark.parametrize('key', ['supervisor_start_time', 'start_time'])
def test_a_missing_start_time_is_refused(tmp_path, fake, node, key):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601)
    forge_pids(node, 'run1', **{key: None})
    stop_refused(node, fake, 'run1', '%s is missing, so the process cannot be told from one that reused its pid' % key)


def test_a_supervisor_of_another_uid_is_refused(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601)
    fake.procs[600].uid = os.getuid() + 4242
    stop_refused(node, fake, 'run1', r'supervisor_pid 600 runs as uid %d.*, not as the run\'s owner uid %d'
                 % (os.getuid() + 4242, os.getuid()))


def test_the_supervisor_of_another_run_is_refused(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601, current=False)
    make_run(node, fake, 'run2', sup_pid=700, torchrun_pid=701)
    forge_pids(node, 'run2', supervisor_pid=600, supervisor_start_time=6000)
    stop_refused(node, fake, 'run2', 'supervisor_pid 600 is not its supervisor: .* does not run .*/runs/run2/supervisor.py')


def test_a_job_json_uid_that_is_not_the_run_directory_owner_is_refused(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601)
    forge_job(node, 'run1', uid=0 if os.getuid() else 1)
    stop_refused(node, fake, 'run1', 'job.json records uid %d.* but the run directory .* belongs to uid %d'
                 % (0 if os.getuid() else 1, os.getuid()))
    forge_job(node, 'run1', uid=None)
    stop_refused(node, fake, 'run1', 'job.json records no uid')


def test_a_run_directory_replaced_by_a_symlink_is_refused(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601)
    run_dir = node.paths('run1')['run_dir']
    os.rename(run_dir, run_dir + '.real')
    os.symlink(run_dir + '.real', run_dir)
    stop_refused(node, fake, 'run1', 'its run directory .*/runs/run1 is not a directory')


def test_a_forged_torchrun_record_of_a_lost_run_is_refused(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601, alive=False)
    unrelated_tree(fake)
    forge_pids(node, 'run1', pid=901, pgid=901, start_time=9010)  # 901 is in 900's process group
    stop_refused(node, fake, 'run1', 'pid 901 is not its torchrun: it does not lead a process group of its own')
    assert 901 in fake.procs


def test_a_recorded_pid_that_was_reused_is_gone_not_refused(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601, alive=False)
    fake.add(600, 1, start_time=1, cmdline=['sleep', '1'])  # another process, another start time
    result = tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=5, log_lines=0), system=fake)
    assert result['changed'] is False and result['job']['status'] == 'lost'
    assert fake.signals == []


def test_the_records_of_a_run_that_ended_are_never_acted_on_nor_refused(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, exit_rec={'exit_code': 0, 'signal': None, 'ended_at': 'x'}, alive=False)
    forge_pids(node, 'run1', supervisor_pid=1, supervisor_start_time=None)
    result = tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=5, log_lines=0), system=fake)
    assert result['changed'] is False and result['job']['status'] == 'exited'
    assert fake.signals == []


def test_a_supervisor_started_by_a_slurm_step_verifies(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601, workers=(602, ))
    fake.procs[600].cmdline = supervisor_cmdline(node.paths('run1')['run_dir'], foreground=True)
    result = tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=5, log_lines=0), system=fake)
    assert result['changed'] is True and result['stopped_pids'] == [601, 602]


def test_root_stopping_another_users_run_signals_as_that_user(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601, workers=(602, ))
    run_dir = node.paths('run1')['run_dir']
    fake.euid_value = 0
    fake.owners[run_dir] = 1234
    forge_job(node, 'run1', uid=1234)
    for pid in (600, 601, 602):
        fake.procs[pid].uid = 1234
    result = tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=5, log_lines=0), system=fake)
    assert result['changed'] is True and result['stopped_pids'] == [601, 602]
    assert fake.signalled_as == [(1234, os.lstat(run_dir).st_gid)]


def test_root_stopping_its_own_run_signals_as_root(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601)
    run_dir = node.paths('run1')['run_dir']
    fake.euid_value = 0
    fake.owners[run_dir] = 0
    forge_job(node, 'run1', uid=0)
    for pid in (600, 601):
        fake.procs[pid].uid = 0
    tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=5, log_lines=0), system=fake)
    assert fake.signalled_as == [] and 601 not in fake.procs


def test_a_user_stopping_another_users_run_is_told_whose_it_is(tmp_path, fake, node):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601)
    fake.euid_value = os.getuid() + 1
    with pytest.raises(tr.TorchrunError, match=r'Run run1 belongs to another user, uid %d.*not to this user \(uid %d'
                       % (os.getuid(), os.getuid() + 1)):
        tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=5, log_lines=0), system=fake)
    assert fake.signals == []
    # a query reads what it may read
    assert query(node, fake, 'run1')['job']['status'] == 'running'


@pytest.mark.parametrize('name', ['state', 'n0', 'runs', 'run1'])
def test_a_directory_of_another_user_is_reported_with_its_owner_not_as_absent(tmp_path, fake, node, monkeypatch, name):
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601)
    unreadable = dict(state=os.path.dirname(node.state_dir), n0=node.state_dir, runs=node.runs_dir,
                      run1=node.paths('run1')['run_dir'])[name]
    real_access = os.access
    monkeypatch.setattr(rr.os, 'access', lambda path, mode: path != unreadable and real_access(path, mode))
    fake.euid_value = os.getuid() + 1
    for run_id in ('run1', None):
        for call in (lambda: node.query(run_id), lambda: node.stop(run_id)):
            with pytest.raises(tr.TorchrunError, match=r'^%s belongs to another user, uid %d.*cannot be read by this user'
                               % (re_escape(unreadable), os.getuid())):
                call()
    assert fake.signals == []


@pytest.mark.parametrize('check, value', [
    (tr.validate_run_id, 'run1\n'),
    (lambda v: tr.normalize_env({v: '1'}), 'NAME\n'),
    (lambda v: tr.validate_start_params(dict(start_params(pathlib.Path('/nonexistent')), container=v)), 'trainer\n'),
])
def test_a_name_with_a_trailing_newline_is_refused(check, value):
    with pytest.raises(tr.TorchrunError):
        check(value)
    check(value.rstrip('\n'))


def test_a_stop_for_a_peer_dumps_the_ranks_stacks_first(tmp_path, fake, node, monkeypatch):
    # the peer may have failed because a rank here hung (its collective timed out): where the ranks stand says which
    dumped = []
    monkeypatch.setattr(tr._stacks, 'dump_run', lambda tree, out_dir, **kw: dumped.append(sorted(tree)) or
                        {'ranks': [0], 'error': None})
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601, workers=(602,))
    result = tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=5, log_lines=0,
                                stop_reason='peer', stop_detail='stopped because node0 (rank 0) failed'), system=fake)
    assert dumped and result['stacks'] == {'ranks': [0], 'error': None}
    make_run(node, fake, 'run2', sup_pid=700, torchrun_pid=701, workers=(702,))
    result = tr.run_module(dict(state='stopped', **at(node), run_id='run2', stop_timeout=5, log_lines=0,
                                stop_reason='user'), system=fake)
    assert len(dumped) == 1 and result.get('stacks') is None


def test_stop_continues_a_frozen_rank_so_that_sigterm_ends_it(tmp_path, fake, node):
    # a rank stopped by SIGSTOP (state T) keeps a SIGTERM pending: without SIGCONT it would wait for the SIGKILL
    make_run(node, fake, 'run1', sup_pid=600, torchrun_pid=601, workers=(602, 603))
    fake.procs[603].pgid, fake.procs[603].state = 603, 'T'
    result = tr.run_module(dict(state='stopped', **at(node), run_id='run1', stop_timeout=7, log_lines=0), system=fake)
    assert result['killed_pids'] == [] and 603 not in fake.procs and fake.clock - 1000.0 < 7
    assert fake.signals.index(('pg', 603, signal.SIGTERM)) < fake.signals.index(('pg', 603, signal.SIGCONT))
