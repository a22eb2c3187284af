# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""torchrun state=prepared (the srun launcher's run directory), signal=false stops, supervisor --foreground."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _torchrun as tr
from ansible_collections.trainops.multinode.plugins.module_utils import _launchers, _srun
from ansible_collections.trainops.multinode.tests.unit.plugins.module_utils.stand_in import stand_in_supervisor


class NoSpawn(tr.System):
    """The real system, except that spawning or signalling anything fails the test."""

    def spawn_detached(self, *args, **kwargs):
        raise AssertionError('prepared runs spawn nothing')

    def kill(self, pid, sig):
        raise AssertionError('signal=false signals nothing')

    def killpg(self, pgid, sig):
        raise AssertionError('signal=false signals nothing')


def prepared_params(tmp_path, **overrides):
    params = dict(
        state='prepared', state_dir=str(tmp_path / 'state'), node_id='n0', run_id='run1', nnodes=2, nproc_per_node=2,
        node_rank=1, master_addr='10.0.0.1', master_port=29500, rdzv_backend='static', rdzv_id=None,
        rdzv_timeout=None, max_restarts=0, entrypoint='train.py', entrypoint_args=[], python='python3', torchrun=None,
        command_prefix=[], chdir=None, env={'NCCL_SOCKET_IFNAME': '=ens5'}, replace=False, stop_timeout=15,
        log_lines=20)
    params.update(overrides)
    return params


def test_prepared_writes_the_run_and_starts_nothing(tmp_path):
    result = tr.run_module(prepared_params(tmp_path), system=NoSpawn())
    run_dir = str(tmp_path / 'state' / 'n0' / 'runs' / 'run1')
    assert result['changed'] is True
    assert result['job']['status'] == 'prepared' and result['job']['pid'] is None
    assert result['step_command'] == {'python': sys.executable, 'supervisor': os.path.join(run_dir, 'supervisor.py'),
                                      'job': os.path.join(run_dir, 'job.json')}
    with open(os.path.join(run_dir, 'job.json')) as handle:
        job = json.load(handle)
    assert job['launcher'] == 'srun' and job['node_rank'] == 1 and job['env'] == {'NCCL_SOCKET_IFNAME': '=ens5'}
    # the module's environment on the node (the SSH session's), for the step's ranks
    assert job['login_env']['PATH'] == os.environ['PATH'] and 'login_env_omitted' in job
    for name, module in tr.SUPERVISOR_FILES.items():
        with open(os.path.join(run_dir, name)) as handle:
            assert handle.read() == tr.module_source(module), name
    with open(str(tmp_path / 'state' / 'n0' / 'current.json')) as handle:
        assert json.load(handle)['run_id'] == 'run1'
    # preparing again is idempotent; querying shows it prepared
    again = tr.run_module(prepared_params(tmp_path), system=NoSpawn())
    assert again['changed'] is False and again['job']['status'] == 'prepared'
    assert tr.run_module({'state': 'query', 'state_dir': str(tmp_path / 'state'), 'node_id': 'n0'},
                         system=NoSpawn())['job']['status'] == 'prepared'


def test_the_launcher_option_names_the_runs_launcher_and_a_wrong_pair_writes_nothing(tmp_path):
    # the role passes trainops_launcher; the run is the launcher's (job.json), as it was without the option
    result = tr.run_module(prepared_params(tmp_path, launcher='srun'), system=NoSpawn())
    with open(result['step_command']['job']) as handle:
        assert json.load(handle)['launcher'] == 'srun'
    # a launcher that does not defer its start cannot prepare a run, nor the one that defers start one
    for state, launcher in (('prepared', 'ssh'), ('started', 'srun')):
        with pytest.raises(tr.TorchrunError, match='launcher=%s cannot write a run with state=%s' % (launcher, state)):
            tr.run_module(prepared_params(tmp_path / state, state=state, launcher=launcher), system=NoSpawn())
        assert not os.path.exists(str(tmp_path / state))


def test_prepared_check_mode_writes_nothing(tmp_path):
    result = tr.run_module(prepared_params(tmp_path), check_mode=True, system=NoSpawn())
    assert result['changed'] is True and not os.path.exists(str(tmp_path / 'state'))


def run_foreground(tmp_path, argv, environ=None, **job_fields):
    """Prepare a run whose torchrun is ``argv`` and run its supervisor as a Slurm task would (``environ``: the
    variables slurmstepd sets for the task, on top of this process's)."""
    result = tr.run_module(prepared_params(tmp_path), system=NoSpawn())
    job_path = result['step_command']['job']
    with open(job_path) as handle:
        job = json.load(handle)
    assert job['step_linger'] == _srun.STEP_LINGER
    job.update(job_fields, argv=argv)
    with open(job_path, 'w') as handle:
        json.dump(job, handle)
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith('SLURM'))
    env.update(environ or {})
    proc = subprocess.run([sys.executable, result['step_command']['supervisor'], '--foreground', job_path],
                          capture_output=True, text=True, timeout=60, check=False, env=env)
    return proc, os.path.dirname(job_path)


def test_supervisor_foreground_exits_with_torchruns_exit_code(tmp_path):
    proc, run_dir = run_foreground(tmp_path, [sys.executable, '-c', 'print("hello"); raise SystemExit(3)'])
    assert proc.returncode == 3, proc.stdout + proc.stderr
    with open(os.path.join(run_dir, 'exit.json')) as handle:
        assert json.load(handle)['exit_code'] == 3
    with open(os.path.join(run_dir, 'node.log')) as handle:
        assert handle.read() == 'hello\n'
    with open(os.path.join(run_dir, 'pids.json')) as handle:
        # no fork: the process the task started is the supervisor that recorded the pids
        assert json.load(handle)['supervisor_pid'] > 0
    status = tr.run_module({'state': 'query', 'state_dir': str(tmp_path / 'state'), 'node_id': 'n0'})
    assert status['job']['status'] == 'exited' and status['job']['exit_code'] == 3


def test_supervisor_foreground_exits_0_when_torchrun_succeeds(tmp_path):
    proc, _run_dir = run_foreground(tmp_path, [sys.executable, '-c', 'pass'])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_signal_false_records_the_stop_and_signals_nothing(tmp_path):
    tr.run_module(prepared_params(tmp_path), system=NoSpawn())
    run_dir = tmp_path / 'state' / 'n0' / 'runs' / 'run1'
    # the run as a step's task has it while running: a stand-in for its supervisor (and torchrun)
    with stand_in_supervisor(run_dir, foreground=True) as (pid, start_time):
        with open(str(run_dir / 'pids.json'), 'w') as handle:
            json.dump({'supervisor_pid': pid, 'supervisor_start_time': start_time, 'pid': pid,
                       'pgid': pid, 'start_time': start_time}, handle)
        result = tr.run_module({'state': 'stopped', 'state_dir': str(tmp_path / 'state'), 'node_id': 'n0',
                                'run_id': 'run1', 'stop_reason': 'user', 'stop_detail': 'scancel 7.0', 'signal': False},
                               system=NoSpawn())
    assert result['changed'] is True and result['stopped_pids'] == []
    with open(str(run_dir / 'stop.json')) as handle:
        stop = json.load(handle)
    assert stop['reason'] == 'user' and stop['detail'] == 'scancel 7.0'


def test_supervisor_foreground_of_a_stopped_run_waits_for_the_cancel_after_exit_json(tmp_path):
    # stop.json written while torchrun runs (the stop's record); torchrun then ends on its own here
    # (after the supervisor's own check once torchrun started, which would stop it: a stop before the start)
    script = 'import os, time; time.sleep(1); open(os.environ["STOP"], "w").write("{}"); time.sleep(0.5)'
    stop = str(tmp_path / 'state' / 'n0' / 'runs' / 'run1' / 'stop.json')
    started = time.monotonic()
    proc, run_dir = run_foreground(tmp_path, [sys.executable, '-c', script], step_linger=2,
                                   env={'STOP': stop})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert time.monotonic() - started >= 2  # lingered after exit.json, for the step's scancel
    assert os.path.exists(os.path.join(run_dir, 'exit.json'))


STEP_ENV = {'SLURM_JOB_ID': '7', 'SLURM_STEP_ID': '2', 'SLURMD_NODENAME': 'lab-node02', 'SLURM_PROCID': '1'}


def test_the_supervisor_records_the_step_it_runs_in_and_the_query_reports_it(tmp_path):
    proc, run_dir = run_foreground(tmp_path, [sys.executable, '-c', 'pass'], environ=STEP_ENV)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(os.path.join(run_dir, 'pids.json')) as handle:
        assert json.load(handle)['slurm'] == {'job_id': '7', 'step_id': '2', 'node': 'lab-node02', 'task': '1'}
    # without run_id: the node's current run, and the step it ran in, from the node's own records
    job = tr.run_module({'state': 'query', 'state_dir': str(tmp_path / 'state'), 'node_id': 'n0'})['job']
    assert job['run_id'] == 'run1'
    assert job['launcher'] == {'name': 'srun', 'job_id': '7', 'step_id': '2', 'step': '7.2'}
    assert job['supervisor_signals'] == []


def test_a_prepared_run_names_srun_before_the_step_ran_it_and_ssh_runs_name_ssh():
    assert _launchers.launcher_view({'launcher': 'srun'}, None) == {'name': 'srun', 'job_id': None, 'step_id': None, 'step': None}
    assert _launchers.launcher_view({}, {'slurm': {'job_id': '7', 'step_id': '2'}}) == {'name': 'ssh'}


def test_a_signal_the_foreground_supervisor_receives_is_in_exit_json(tmp_path):
    result = tr.run_module(prepared_params(tmp_path), system=NoSpawn())
    job_path = result['step_command']['job']
    with open(job_path) as handle:
        job = json.load(handle)
    job['argv'] = [sys.executable, '-c', 'import time; time.sleep(60)']
    with open(job_path, 'w') as handle:
        json.dump(job, handle)
    env = dict(os.environ, **STEP_ENV)
    proc = subprocess.Popen([sys.executable, result['step_command']['supervisor'], '--foreground', job_path],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    run_dir = os.path.dirname(job_path)
    deadline = time.monotonic() + 30
    while not os.path.exists(os.path.join(run_dir, 'pids.json')):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(15)  # as slurmstepd signals a step's task
    assert proc.wait(timeout=30) == 128 + 15
    job = tr.run_module({'state': 'query', 'state_dir': str(tmp_path / 'state'), 'node_id': 'n0'})['job']
    assert job['supervisor_signals'] == ['SIGTERM'] and job['signal'] == 'SIGTERM' and job['stop'] is None


# --- the ranks' environment in the step: the node's login environment, not Slurm's bare one ----------------------

LOGIN = {'PATH': '/opt/cuda/bin:/usr/bin:/bin', 'LD_LIBRARY_PATH': '/opt/nccl/lib:/opt/cuda/lib64', 'HOME': '/home/u',
         'USER': 'u', 'VIRTUAL_ENV': '/home/u/venv', 'PYTHONPATH': '/home/u/lib:/tmp/ansible_x/ansible_modlib.zip',
         'MODULEPATH': '/etc/modulefiles', 'LOADEDMODULES': 'cuda/12.4:nccl/2.21', 'WANDB_API_KEY': 'login-key-value',
         'HF_TOKEN': 'login-token-value', 'SSH_AUTH_SOCK': '/tmp/ssh-x/agent.1', 'SSH_CONNECTION': '10.0.0.9 5 10.0.0.1 22',
         'SLURM_JOB_ID': '3', 'CUDA_VISIBLE_DEVICES': '7', 'TMPDIR': '/scratch/u'}
# what slurmstepd gives a task of `srun --export=HF_TOKEN`: Slurm's variables, the GPUs of the step, the secret
STEP = {'SLURM_JOB_ID': '7', 'SLURM_STEP_ID': '2', 'SLURMD_NODENAME': 'lab-node02', 'SLURM_PROCID': '1',
        'SLURM_NODEID': '1', 'CUDA_VISIBLE_DEVICES': '0,1,2,3', 'TMPDIR': '/tmp', 'HF_TOKEN': 'the-secret'}
DUMP = 'import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], "w"))'


def prepare_in_login_env(tmp_path, monkeypatch, **overrides):
    for key in [k for k in os.environ if k.startswith(('SLURM', 'SSH_'))]:
        monkeypatch.delenv(key)
    for key, value in LOGIN.items():
        monkeypatch.setenv(key, value)
    params = prepared_params(tmp_path, secret_env={'HF_TOKEN': 'the-secret'}, **overrides)
    return tr.run_module(params, system=NoSpawn())


def test_prepared_records_the_login_environment_without_secrets_or_session_variables(tmp_path, monkeypatch):
    result = prepare_in_login_env(tmp_path, monkeypatch)
    with open(result['step_command']['job']) as handle:
        text = handle.read()
    job = json.loads(text)
    login = job['login_env']
    for name in ('PATH', 'LD_LIBRARY_PATH', 'HOME', 'USER', 'VIRTUAL_ENV', 'MODULEPATH', 'LOADEDMODULES', 'TMPDIR'):
        assert login[name] == LOGIN[name], name
    assert login['PYTHONPATH'] == '/home/u/lib'  # the module runner's own entry is not the node's
    for name in ('SSH_AUTH_SOCK', 'SSH_CONNECTION', 'SLURM_JOB_ID', 'CUDA_VISIBLE_DEVICES', 'HF_TOKEN', 'WANDB_API_KEY'):
        assert name not in login, name
    assert job['login_env_omitted'] == ['WANDB_API_KEY']  # a secret's name, never its value; HF_TOKEN goes by name
    for value in ('login-key-value', 'login-token-value', 'the-secret'):
        assert value not in text
    # the recorded environment is where the run starts, not what it is: preparing again in another session is the same run
    monkeypatch.setenv('LOADEDMODULES', 'cuda/12.4')
    assert prepare_in_login_env(tmp_path, monkeypatch)['changed'] is False


def test_the_step_gives_torchrun_the_login_environment_with_the_steps_gpus_and_the_secret(tmp_path, monkeypatch):
    result = prepare_in_login_env(tmp_path, monkeypatch, env={'NCCL_SOCKET_IFNAME': '=ens5', 'TMPDIR': '/job/tmp'})
    job_path = result['step_command']['job']
    with open(job_path) as handle:
        job = json.load(handle)
    dump = str(tmp_path / 'env.json')
    job['argv'] = [sys.executable, '-c', DUMP, dump]
    with open(job_path, 'w') as handle:
        json.dump(job, handle)
    # as slurmstepd starts the task (srun --export=HF_TOKEN): nothing of the login session
    proc = subprocess.run([result['step_command']['python'], result['step_command']['supervisor'], '--foreground',
                           job_path], capture_output=True, text=True, timeout=60, check=False, env=STEP)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(dump) as handle:
        env = json.load(handle)
    for name in ('PATH', 'LD_LIBRARY_PATH', 'HOME', 'VIRTUAL_ENV', 'LOADEDMODULES'):
        assert env[name] == LOGIN[name], name
    assert env['CUDA_VISIBLE_DEVICES'] == '0,1,2,3' and env['SLURM_JOB_ID'] == '7' and env['SLURM_PROCID'] == '1'
    assert env['HF_TOKEN'] == 'the-secret' and 'WANDB_API_KEY' not in env and 'SSH_AUTH_SOCK' not in env
    assert env['NCCL_SOCKET_IFNAME'] == '=ens5' and env['TMPDIR'] == '/job/tmp'  # the launch's env last
    assert env['TRAINOPS_SECRET_ENV_NAMES'] == 'HF_TOKEN'
    assert 'not passed on from the login environment (the names look like secrets' in proc.stdout
    assert 'WANDB_API_KEY' in proc.stdout and 'login-key-value' not in proc.stdout
    # what the ranks may use, recorded by the supervisor (whose CPU mask torchrun and the ranks inherit)
    with open(os.path.join(os.path.dirname(job_path), 'pids.json')) as handle:
        placement = json.load(handle)['placement']
    assert placement['cpu_count'] == len(os.sched_getaffinity(0))
    assert placement['visible_devices'] == {'CUDA_VISIBLE_DEVICES': '0,1,2,3'}
    assert 'cpus %s (%d); CUDA_VISIBLE_DEVICES=0,1,2,3' % (placement['cpus'], placement['cpu_count']) in proc.stdout


def test_stopping_a_prepared_run_records_the_stop_so_a_late_step_starts_nothing(tmp_path):
    result = tr.run_module(prepared_params(tmp_path), system=NoSpawn())
    stopped = tr.run_module({'state': 'stopped', 'state_dir': str(tmp_path / 'state'), 'node_id': 'n0', 'run_id': 'run1',
                             'stop_reason': 'undo', 'stop_detail': 'the step did not start', 'signal': False},
                            system=NoSpawn())
    assert stopped['changed'] is True and stopped['job']['stop']['reason'] == 'undo'
    assert stopped['job']['status'] == 'prepared'
    again = tr.run_module({'state': 'stopped', 'state_dir': str(tmp_path / 'state'), 'node_id': 'n0', 'run_id': 'run1',
                           'stop_reason': 'undo', 'stop_timeout': 1}, system=NoSpawn())
    assert again['changed'] is False
    marker = tmp_path / 'started'
    job_path = result['step_command']['job']
    with open(job_path) as handle:
        job = json.load(handle)
    job['argv'] = [sys.executable, '-c', 'open(%r, "w").write("ran")' % str(marker)]
    with open(job_path, 'w') as handle:
        json.dump(job, handle)
    proc = subprocess.run([sys.executable, result['step_command']['supervisor'], '--foreground', job_path],
                          capture_output=True, text=True, timeout=60, check=False, env=STEP)
    assert proc.returncode == 0 and 'not starting' in proc.stdout
    assert not marker.exists()
