# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The torchrun supervisor (plugins/module_utils/_supervisor.py): its helpers, and the program run for real
from a run directory the way the torchrun module writes it (only the shipped files, no collection)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _supervisor as sup
from ansible_collections.trainops.multinode.plugins.module_utils import _srun
from ansible_collections.trainops.multinode.plugins.module_utils import _torchrun as tr
from ansible_collections.trainops.multinode.plugins.module_utils._proc import ProcInfo


class FakeSystem(object):
    def __init__(self, own_pgid=50):
        self.sent = []
        self.pgid = own_pgid

    def own_pgid(self):
        return self.pgid

    def kill(self, pid, sig):
        self.sent.append(('pid', pid, sig))
        if pid == 666:
            raise PermissionError(1, 'Operation not permitted')
        return True

    def killpg(self, pgid, sig):
        self.sent.append(('pg', pgid, sig))
        return True


def test_signal_tree_signals_groups_once_and_protected_groups_per_process():
    system = FakeSystem(own_pgid=50)
    tree = {101: ProcInfo(101, 100, 100, 'S', 1), 102: ProcInfo(102, 101, 100, 'S', 1),
            103: ProcInfo(103, 1, 50, 'S', 1), 104: ProcInfo(104, 1, 1, 'S', 1), 666: ProcInfo(666, 1, 0, 'S', 1)}
    sup.signal_tree(system, tree, signal.SIGTERM)
    assert sorted(system.sent) == sorted([('pg', 100, signal.SIGTERM), ('pid', 103, signal.SIGTERM),
                                          ('pid', 104, signal.SIGTERM), ('pid', 666, signal.SIGTERM)])


def test_decode_status():
    assert sup.decode_status(3 << 8) == (3, None)
    assert sup.decode_status(signal.SIGKILL) == (128 + signal.SIGKILL, 'SIGKILL')


def test_write_exit_is_private_json(tmp_path):
    path = str(tmp_path / 'exit.json')
    sup.write_exit(path, 127, error='cannot start')
    record = json.loads(open(path).read())
    assert record['exit_code'] == 127 and record['signal'] is None and record['error'] == 'cannot start'
    assert record['ended_at'].endswith('Z') and isinstance(record['ended_at_epoch'], float)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_write_exit_names_the_signals_the_supervisor_received(tmp_path):
    path = str(tmp_path / 'exit.json')
    sup.write_exit(path, 143, 'SIGTERM', signals=[signal.SIGTERM])
    assert json.loads(open(path).read())['signals'] == ['SIGTERM']
    sup.write_exit(path, 0)
    assert json.loads(open(path).read())['signals'] == []


def test_write_exit_records_the_checkpoint_signals(tmp_path):
    path = str(tmp_path / 'exit.json')
    sup.write_exit(path, 0)
    assert json.loads(open(path).read())['checkpoint_signals'] == []
    received = [{'signal': 'SIGUSR1', 'at': '2026-11-25T03:07:00Z', 'at_epoch': 1.0}]
    sup.write_exit(path, 143, 'SIGTERM', signals=[signal.SIGTERM], checkpoint_signals=received)
    assert json.loads(open(path).read())['checkpoint_signals'] == received


@pytest.mark.parametrize('data, expected', [
    ({'exitcode': -9, 'local_rank': 1, 'pid': 77, 'seen_at_epoch': 5.5},
     {'exitcode': -9, 'local_rank': 1, 'pid': 77, 'seen_at_epoch': 5.5}),
    ({'exitcode': 1, 'local_rank': 0, 'pid': 77}, {'exitcode': 1, 'local_rank': 0, 'pid': 77, 'seen_at_epoch': None}),
    ({'exitcode': 1, 'local_rank': 0, 'pid': 77, 'seen_at_epoch': 'now'},
     {'exitcode': 1, 'local_rank': 0, 'pid': 77, 'seen_at_epoch': None}),
    # a rank that exited 0 did not fail; fields of the wrong type or out of bounds are no record
    ({'exitcode': 0, 'local_rank': 0, 'pid': 77}, None), ({'exitcode': True, 'local_rank': 0, 'pid': 77}, None),
    ({'exitcode': -300, 'local_rank': 0, 'pid': 77}, None), ({'exitcode': 1, 'local_rank': -1, 'pid': 77}, None),
    ({'exitcode': 1, 'local_rank': 0, 'pid': 0}, None), ({'exitcode': '1', 'local_rank': 0, 'pid': 77}, None),
    ({'exitcode': 1, 'local_rank': 0}, None), ([1, 0, 77], None), (None, None)])
def test_rank_failure_record_checks_its_fields(data, expected):
    assert sup.rank_failure_record(data) == expected


FAILED_LINE = (b'E1128 08:13:54.908000 14911 /x/torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) '
               b'local_rank: 1 (pid: 16770) of binary: /v/bin/python\n')


def test_logged_rank_failure_is_torchruns_last_line():
    expected = {'exitcode': -9, 'local_rank': 1, 'pid': 16770, 'seen_at_epoch': None}
    assert sup.logged_rank_failure(b'[rank 0] step=1\n' + FAILED_LINE) == expected
    again = FAILED_LINE.replace(b'-9', b'1').replace(b'16770', b'16800')
    assert sup.logged_rank_failure(FAILED_LINE + again)['pid'] == 16800
    assert sup.logged_rank_failure(b'[rank 0] failed (exitcode: 1) is what my script says\n') is None
    assert sup.logged_rank_failure(FAILED_LINE.replace(b'-9', b'-999')) is None


def test_read_logged_rank_failure_reads_the_logs_end(tmp_path):
    path = tmp_path / 'node.log'
    assert sup.read_logged_rank_failure(str(path)) is None
    path.write_bytes(FAILED_LINE + b'x' * 100)
    assert sup.read_logged_rank_failure(str(path))['exitcode'] == -9
    assert sup.read_logged_rank_failure(str(path), max_bytes=100) is None


def test_read_rank_failure_is_bounded_and_never_follows_a_link(tmp_path):
    path = tmp_path / sup.RANK_FAILURE_FILE
    assert sup.read_rank_failure(str(path)) is None
    path.write_text(json.dumps({'exitcode': -9, 'local_rank': 0, 'pid': 12}))
    assert sup.read_rank_failure(str(path))['exitcode'] == -9
    link = tmp_path / 'link.json'
    link.symlink_to(path)
    assert sup.read_rank_failure(str(link)) is None
    path.write_text(json.dumps({'exitcode': -9, 'local_rank': 0, 'pid': 12, 'pad': 'x' * sup.RANK_FAILURE_MAX_BYTES}))
    assert sup.read_rank_failure(str(path)) is None
    path.write_text('{"exitcode": -9, ')
    assert sup.read_rank_failure(str(path)) is None


@pytest.mark.parametrize('exit_code, signame, failure, expected', [
    # the watcher ended torchrun (SIGTERM, SIGKILL) after a rank's death: the rank's end, not the watcher's signal
    (143, 'SIGTERM', {'exitcode': -9}, (137, 'SIGKILL')),
    (137, 'SIGKILL', {'exitcode': 1}, (1, None)),
    (1, None, {'exitcode': 3}, (3, None)),
    # no record, or torchrun exited 0: torchrun's own end
    (143, 'SIGTERM', None, None), (0, None, {'exitcode': -9}, None)])
def test_rank_end_prefers_the_watchers_record_of_the_rank_death(exit_code, signame, failure, expected):
    assert sup.rank_end(exit_code, signame, failure) == expected


def test_write_exit_says_the_rank_death_and_keeps_torchruns_own_end(tmp_path):
    path = str(tmp_path / 'exit.json')
    failure = {'exitcode': -9, 'local_rank': 1, 'pid': 77, 'seen_at_epoch': 5.5}
    sup.write_exit(path, 143, 'SIGTERM', failure=failure)
    record = json.loads(open(path).read())
    assert (record['exit_code'], record['signal']) == (137, 'SIGKILL')
    assert record['rank_failure'] == failure and record['torchrun'] == {'exit_code': 143, 'signal': 'SIGTERM'}
    sup.write_exit(path, 0, failure=failure)
    record = json.loads(open(path).read())
    assert record['exit_code'] == 0 and 'rank_failure' not in record and 'torchrun' not in record


def test_program_says_the_rank_death_the_watcher_recorded_before_ending_torchrun(tmp_path):
    run_dir = start(tmp_path, [sys.executable, '-c', 'import time; time.sleep(300)'])
    pids = wait_for(run_dir / 'pids.json')
    (run_dir / sup.RANK_FAILURE_FILE).write_text(json.dumps({'exitcode': 1, 'local_rank': 0, 'pid': 4242}))
    os.killpg(pids['pgid'], signal.SIGKILL)
    exit_rec = wait_for(run_dir / 'exit.json')
    assert (exit_rec['exit_code'], exit_rec['signal']) == (1, None)
    assert exit_rec['torchrun'] == {'exit_code': 137, 'signal': 'SIGKILL'} and exit_rec['rank_failure']['pid'] == 4242
    assert 'local rank 0 (pid 4242) failed (exitcode 1)' in (run_dir / 'supervisor.log').read_text()


def test_program_says_the_rank_death_torchrun_logged_when_it_ends_by_itself(tmp_path):
    run_dir = start(tmp_path, [sys.executable, '-c', 'import sys; sys.stderr.buffer.write(sys.argv[1].encode()); sys.exit(1)',
                               FAILED_LINE.decode()])
    exit_rec = wait_for(run_dir / 'exit.json')
    assert (exit_rec['exit_code'], exit_rec['signal']) == (128 + signal.SIGKILL, 'SIGKILL')
    assert exit_rec['torchrun'] == {'exit_code': 1, 'signal': None} and exit_rec['rank_failure']['pid'] == 16770


@pytest.mark.parametrize('value, expected', [
    ('USR1', signal.SIGUSR1), ('SIGUSR2', signal.SIGUSR2), (' usr1 ', signal.SIGUSR1), (None, None), ('', None),
    # a signal that stops a run, or that the kernel or the supervisor's wait needs, is never a checkpoint signal
    ('TERM', None), ('SIGINT', None), ('HUP', None), ('KILL', None), ('CHLD', None), ('10', None), ('NOSUCH', None)])
def test_checkpoint_signal_from_the_jobs_environment(value, expected):
    assert sup.checkpoint_signal({'env': {sup.CHECKPOINT_SIGNAL_ENV: value}}) == expected
    assert sup.checkpoint_signal({}) is None


def test_launcher_record_of_a_slurm_step_from_the_variables_slurmstepd_sets():
    job = {'launcher_pids': _srun.PIDS_RECORD}
    environ = {'SLURM_JOB_ID': '7', 'SLURM_STEP_ID': '2', 'SLURMD_NODENAME': 'lab-node01', 'SLURM_PROCID': '0'}
    assert sup.launcher_record(job, environ) == {'slurm': {'job_id': '7', 'step_id': '2', 'node': 'lab-node01',
                                                           'task': '0'}}
    # an allocation's shell has a job but no step
    assert sup.launcher_record(job, {'SLURM_JOB_ID': '7'}) == {'slurm': None}
    assert sup.launcher_record(job, {}) == {'slurm': None}
    # a launcher that records nothing (ssh): nothing
    assert sup.launcher_record({}, environ) == {}


@pytest.mark.parametrize('name, secret', [
    ('HF_TOKEN', True), ('WANDB_API_KEY', True), ('AWS_SECRET_ACCESS_KEY', True), ('PGPASSWORD', True),
    ('DB_PASSWD', True), ('GOOGLE_APPLICATION_CREDENTIALS', True), ('github_auth', True),
    ('PATH', False), ('LD_LIBRARY_PATH', False), ('NCCL_DEBUG', False), ('CONDA_PREFIX', False),
])
def test_looks_secret(name, secret):
    assert sup.looks_secret(name) is secret


def test_login_environment_leaves_out_secrets_session_and_step_variables():
    environ = {'PATH': '/usr/bin', 'HOME': '/home/u', 'HF_TOKEN': 'x', 'MY_SECRET': 'y', 'SSH_CLIENT': 'a b c',
               'SLURM_JOB_ID': '3', 'SLURMD_NODENAME': 'n1', 'PMIX_RANK': '0', 'ROCR_VISIBLE_DEVICES': '1', '_': '/bin/sh',
               'PWD': '/home/u', 'SHLVL': '1', 'PYTHONPATH': '/x/ansible_modlib.zip'}
    recorded, omitted = _srun.login_environment(environ, secret_names=['HF_TOKEN'])
    assert recorded == {'PATH': '/usr/bin', 'HOME': '/home/u'}
    assert omitted == ['MY_SECRET']


def test_rank_environment_over_ssh_is_the_supervisors_own_with_the_launch_env_on_top():
    job = {'env': {'NCCL_DEBUG': 'INFO', 'PATH': '/opt/bin'}, 'secret_env_names': ['HF_TOKEN']}
    environ = {'PATH': '/usr/bin', 'HF_TOKEN': 's', 'CUDA_VISIBLE_DEVICES': '3', 'WANDB_API_KEY': 'k'}
    assert sup.rank_environment(job, environ) == {'PATH': '/opt/bin', 'HF_TOKEN': 's', 'CUDA_VISIBLE_DEVICES': '3',
                                                  'WANDB_API_KEY': 'k', 'NCCL_DEBUG': 'INFO'}


def test_rank_environment_in_a_step_is_the_login_one_with_the_steps_variables_and_secrets():
    job = {'launcher': 'srun', 'task_env': _srun.TASK_ENV, 'env': {'NCCL_DEBUG': 'INFO'},
           'secret_env_names': ['HF_TOKEN', 'ABSENT_TOKEN'],
           'login_env': {'PATH': '/opt/cuda/bin:/usr/bin', 'LD_LIBRARY_PATH': '/opt/nccl/lib', 'HOME': '/home/u',
                         'TMPDIR': '/scratch/u'}}
    # slurmstepd's environment for the task: its own variables, the step's GPUs, TMPDIR=/tmp, the exported secret
    environ = {'SLURM_JOB_ID': '7', 'SLURMD_NODENAME': 'n1', 'CUDA_VISIBLE_DEVICES': '0,1', 'GPU_DEVICE_ORDINAL': '0,1',
               'TMPDIR': '/tmp', 'HF_TOKEN': 's', 'OTHER': 'from a task prolog'}
    assert sup.rank_environment(job, environ) == {
        'PATH': '/opt/cuda/bin:/usr/bin', 'LD_LIBRARY_PATH': '/opt/nccl/lib', 'HOME': '/home/u', 'TMPDIR': '/scratch/u',
        'SLURM_JOB_ID': '7', 'SLURMD_NODENAME': 'n1', 'CUDA_VISIBLE_DEVICES': '0,1', 'GPU_DEVICE_ORDINAL': '0,1',
        'HF_TOKEN': 's', 'NCCL_DEBUG': 'INFO'}


def test_cpu_list_and_placement(monkeypatch):
    assert sup.cpu_list([5, 0, 1, 2, 7, 8]) == '0-2,5,7-8' and sup.cpu_list([3]) == '3'
    monkeypatch.setattr(sup.os, 'sched_getaffinity', lambda pid: {0, 1, 2, 3}, raising=False)
    assert sup.placement({'CUDA_VISIBLE_DEVICES': '4,5', 'PATH': '/bin'}) == {
        'cpus': '0-3', 'cpu_count': 4, 'visible_devices': {'CUDA_VISIBLE_DEVICES': '4,5'}}


def test_stopped_before_start(tmp_path):
    (tmp_path / 'job.json').write_text(json.dumps({'argv': ['true']}))
    supervisor = sup.Supervisor(str(tmp_path / 'job.json'))
    assert not supervisor.stopped_before_start()
    assert supervisor.grace == sup.DEFAULT_CLEANUP_GRACE
    (tmp_path / 'stop.json').write_text('{}')
    assert supervisor.stopped_before_start()


# --- the real program --------------------------------------------------------------------------

def start(tmp_path, argv, **job):
    """Write a run directory as the module does and start the supervisor with a Python that cannot import the
    collection (-E -s: no PYTHONPATH, no user site), as on a node or in a container; return the run directory."""
    run_dir = tmp_path / 'run'
    run_dir.mkdir()
    (run_dir / 'job.json').write_text(json.dumps(dict({'argv': argv, 'env': {}, 'chdir': str(tmp_path)}, **job)))
    program = tr.write_supervisor(str(run_dir))
    assert sorted(os.listdir(str(run_dir))) == sorted(['job.json'] + list(tr.SUPERVISOR_FILES))
    with open(str(run_dir / 'supervisor.log'), 'ab') as out:
        subprocess.run([sys.executable, '-E', '-s', program, str(run_dir / 'job.json')], check=True, timeout=30,
                       stdout=out, stderr=subprocess.STDOUT, cwd=str(run_dir))
    return run_dir


def wait_for(path, timeout=30):
    deadline = time.time() + timeout
    while not os.path.exists(str(path)):
        assert time.time() < deadline, 'no %s; supervisor.log:\n%s' % (path, (path.parent / 'supervisor.log').read_text())
        time.sleep(0.05)
    return json.loads(path.read_text())


def alive(pid):
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] not in ('Z', 'X')
    except OSError:
        return False


def test_program_records_exit_code_and_pids(tmp_path):
    run_dir = start(tmp_path, [sys.executable, '-c', 'import sys; print("hello"); sys.exit(3)'])
    exit_rec = wait_for(run_dir / 'exit.json')
    assert exit_rec['exit_code'] == 3 and exit_rec['signal'] is None
    pids = json.loads((run_dir / 'pids.json').read_text())
    assert pids['pid'] == pids['pgid'] and pids['supervisor_pid'] != pids['pid']
    assert isinstance(pids['start_time'], int) and isinstance(pids['supervisor_start_time'], int)
    assert 'hello' in (run_dir / 'node.log').read_text()
    assert stat.S_IMODE(os.stat(str(run_dir / 'node.log')).st_mode) == 0o600


def test_program_cleans_up_orphans_that_ignore_sigterm(tmp_path):
    # torchrun's stand-in leaves a grandchild behind (its own session, SIGTERM ignored) and exits
    orphan = ('import os, signal, sys, time\n'
              'if os.fork() == 0:\n'
              '    os.setsid(); signal.signal(signal.SIGTERM, signal.SIG_IGN)\n'
              '    open(sys.argv[1], "w").write(str(os.getpid())); time.sleep(300)\n'
              'else:\n'
              '    time.sleep(0.5)\n')
    marker = tmp_path / 'orphan.pid'
    run_dir = start(tmp_path, [sys.executable, '-c', orphan, str(marker)], cleanup_grace=0.5)
    exit_rec = wait_for(run_dir / 'exit.json')
    assert exit_rec['exit_code'] == 0
    pid = int(marker.read_text())
    assert not alive(pid)
    log = (run_dir / 'supervisor.log').read_text()
    assert 'terminating leftover processes [%d]' % pid in log and 'killing leftover processes [%d]' % pid in log


def test_program_passes_sigterm_to_torchrun(tmp_path):
    run_dir = start(tmp_path, [sys.executable, '-c', 'import time; time.sleep(300)'])
    pids = wait_for(run_dir / 'pids.json')
    os.kill(pids['supervisor_pid'], signal.SIGTERM)
    exit_rec = wait_for(run_dir / 'exit.json')
    assert exit_rec['exit_code'] == 128 + signal.SIGTERM and exit_rec['signal'] == 'SIGTERM'
    assert not alive(pids['pid'])


# torchrun's stand-in: says whether it starts with USR1 ignored, starts one "rank" and exits with its code; the rank
# installs its own USR1 handler (as the shipped workload does) and reports what it inherited and what it got
TORCHRUN_WITH_A_RANK = (
    'import signal, subprocess, sys\n'
    'print("torchrun USR1 ignored: %s" % (signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN), flush=True)\n'
    'sys.exit(subprocess.call([sys.executable, "-c", sys.argv[1], sys.argv[2]]))\n')
RANK = (
    'import json, os, signal, sys, time\n'
    'inherited = signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN\n'
    'got = []\n'
    'signal.signal(signal.SIGUSR1, lambda signum, frame: got.append(signum))\n'
    'open(os.path.join(sys.argv[1], "rank.pid"), "w").write(str(os.getpid()))\n'
    'deadline = time.time() + 30\n'
    'while not got and time.time() < deadline:\n'
    '    time.sleep(0.05)\n'
    'open(os.path.join(sys.argv[1], "rank.json"), "w").write(json.dumps({"inherited_ignored": inherited, "got": len(got)}))\n')


def test_program_survives_the_checkpoint_signal_that_slurm_sends_every_process_of_the_step(tmp_path):
    run_dir = start(tmp_path, [sys.executable, '-c', TORCHRUN_WITH_A_RANK, RANK, str(tmp_path)],
                    env={sup.CHECKPOINT_SIGNAL_ENV: 'USR1'})
    pids = wait_for(run_dir / 'pids.json')
    deadline = time.time() + 30
    while not (tmp_path / 'rank.pid').exists():
        assert time.time() < deadline, (run_dir / 'node.log').read_text()
        time.sleep(0.05)
    rank = int((tmp_path / 'rank.pid').read_text())
    # as slurmstepd does for srun --signal / scancel --signal=USR1: every process of the step
    for pid in (pids['supervisor_pid'], pids['pid'], rank):
        os.kill(pid, signal.SIGUSR1)
    exit_rec = wait_for(run_dir / 'exit.json')
    assert exit_rec['exit_code'] == 0 and exit_rec['signal'] is None and exit_rec['signals'] == []
    assert [record['signal'] for record in exit_rec['checkpoint_signals']] == ['SIGUSR1']
    assert json.loads((tmp_path / 'rank.json').read_text()) == {'inherited_ignored': True, 'got': 1}
    assert 'torchrun USR1 ignored: True' in (run_dir / 'node.log').read_text()
    assert "got SIGUSR1, the run's checkpoint signal" in (run_dir / 'supervisor.log').read_text()


def test_program_without_a_checkpoint_signal_leaves_torchruns_signals_alone(tmp_path):
    run_dir = start(tmp_path, [sys.executable, '-c', 'import signal; print("USR1 default: %s" % (signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL))'])
    assert wait_for(run_dir / 'exit.json')['checkpoint_signals'] == []
    assert 'USR1 default: True' in (run_dir / 'node.log').read_text()


def test_program_cannot_start(tmp_path):
    run_dir = start(tmp_path, [str(tmp_path / 'no-such-torchrun')])
    exit_rec = wait_for(run_dir / 'exit.json')
    assert exit_rec['exit_code'] == sup.EXIT_CANNOT_START and 'no-such-torchrun' in exit_rec['error']
    assert not (run_dir / 'pids.json').exists()


@pytest.mark.parametrize('name', sorted(tr.SUPERVISOR_FILES))
def test_shipped_files_import_only_the_standard_library_and_each_other(name):
    # what the supervisor imports must be in the run directory (mounted in a container): nothing else
    import ast
    source = tr.module_source(tr.SUPERVISOR_FILES[name])
    shipped = set(os.path.splitext(n)[0] for n in tr.SUPERVISOR_FILES)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith('ansible_collections.'):
            assert node.module.rsplit('.', 1)[1] in shipped
        elif isinstance(node, ast.ImportFrom) and node.module and node.module != '__future__':
            assert node.module in shipped or node.module in sys.stdlib_module_names, node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                assert alias.name.split('.')[0] in sys.stdlib_module_names, alias.name
