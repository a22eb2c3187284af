# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The srun launcher's argv, task script, step lookup, state and scancel (Slurm commands mocked)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _srun
from ansible_collections.trainops.multinode.plugins.module_utils import _launchers


def nodes(*names):
    return [{'name': name, 'rank': index, 'python': '/opt/py %d/bin/python' % index,
             'supervisor': '/srv/state/%s/runs/r1/supervisor.py' % name, 'job': '/srv/state/%s/runs/r1/job.json' % name}
            for index, name in enumerate(names)]


class FakeSystem(object):
    """Answers Slurm commands from a table; records every command."""

    def __init__(self, answers):
        self.answers = answers  # (argv[0], ...) -> list of (rc, out, err), consumed in order (the last one repeats)
        self.commands = []
        self.users = []
        self.clock = 0.0

    def run(self, argv, timeout=60, user=None):
        self.commands.append(argv)
        self.users.append(user)
        queue = self.answers[argv[0]]
        return queue.pop(0) if len(queue) > 1 else queue[0]

    users = None
    euid_value = 0

    def euid(self):
        return self.euid_value

    def monotonic(self):
        return self.clock

    def sleep(self, seconds):
        self.clock += seconds


def test_build_argv_one_task_per_node_in_allocation_order():
    argv = _srun.build_argv('42', 'r1', nodes('gpu07', 'gpu03'), 120, extra_args=['--gpus-per-task=8'])
    assert argv[:14] == ['srun', '--jobid=42', '--job-name=trainops-r1', '--nodes=2', '--ntasks=2', '--ntasks-per-node=1',
                         '--nodelist=gpu07,gpu03', '--kill-on-bad-exit=1', '--wait=120', '--export=NONE',
                         '--cpu-bind=none', '--immediate=30', '--label', '--gpus-per-task=8']
    assert argv[14:16] == ['/bin/sh', '-c'] and argv[-1] == 'trainops-task'


def test_build_argv_gives_the_task_every_cpu_and_gpu_of_the_job_on_its_node_unbound():
    argv = _srun.build_argv('42', 'r1', nodes('a'), 0, start_timeout=90)
    # no -c/--cpus-per-task (it implies --exact: the step would get one CPU per task), no --exact, no --gres
    # (a step gets every GPU the job holds on its nodes); --cpu-bind=none: task/affinity pins nothing
    assert '--cpu-bind=none' in argv and '--immediate=90' in argv
    options = argv[:argv.index('/bin/sh')]
    assert not [word for word in options if word.startswith(('-c', '--cpus-per', '--exact', '--gres', '--gpus'))]
    with pytest.raises(_srun.SrunError, match='start_timeout must be >= 1 second, got 0'):
        _srun.build_argv('42', 'r1', nodes('a'), 0, start_timeout=0)


def test_build_argv_exports_only_the_secrets_by_name():
    argv = _srun.build_argv('42', 'r1', nodes('a'), 0, secret_names=['WANDB_API_KEY', 'HF_TOKEN'])
    assert '--export=HF_TOKEN,WANDB_API_KEY' in argv


@pytest.mark.parametrize('job_id, node_list, match', [
    ('', nodes('a'), 'not a Slurm job id'),
    ('42; rm', nodes('a'), 'not a Slurm job id'),
    ('42\n', nodes('a'), 'not a Slurm job id'),
    ('42', [], 'No nodes'),
    ('42', [dict(nodes('a')[0], rank=1)], 'rank 1 but is number 0'),
    ('42', [dict(nodes('a')[0], name='a b')], 'not a Slurm node name'),
    ('42', [dict(nodes('a')[0], name='a\n')], 'not a Slurm node name'),
    # the whole value must match: a trailing newline is not accepted
    ('42\n', nodes('a'), 'not a Slurm job id'),
    ('42', [dict(nodes('a')[0], python='')], 'has no python'),
])
def test_build_argv_refuses(job_id, node_list, match):
    with pytest.raises(_srun.SrunError, match=match):
        _srun.build_argv(job_id, 'r1', node_list, 0)


def test_build_argv_refuses_a_secret_name_with_a_trailing_newline():
    with pytest.raises(_srun.SrunError, match='Not environment variable names: HF_TOKEN\n'):
        _srun.build_argv('42', 'r1', nodes('a'), 0, secret_names=['HF_TOKEN\n'])


def run_task(script, nodename, nodeid):
    """Run the task script as slurmstepd would, with `echo` in place of exec's command."""
    return subprocess.run(['/bin/sh', '-c', script.replace('exec "$@"', 'printf "%s\\n" "$@"'),
                           'trainops-task'], env={'SLURMD_NODENAME': nodename, 'SLURM_NODEID': nodeid},
                          capture_output=True, text=True, check=False)


def test_task_script_picks_the_node_by_its_own_slurmd_nodename():
    script = _srun.task_script(nodes('gpu07', 'gpu03'))
    proc = run_task(script, 'gpu03', '1')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ['/opt/py 1/bin/python',
                                        '/srv/state/gpu03/runs/r1/supervisor.py', '--foreground',
                                        '/srv/state/gpu03/runs/r1/job.json']


def test_task_script_fails_when_the_step_order_is_not_the_allocation_order():
    proc = run_task(_srun.task_script(nodes('gpu07', 'gpu03')), 'gpu03', '0')
    assert proc.returncode == 2 and 'node 0 of the step but rank 1 of the job' in proc.stderr


def test_task_script_fails_on_a_node_without_a_run():
    proc = run_task(_srun.task_script(nodes('gpu07')), 'gpu99', '0')
    assert proc.returncode == 2 and 'no run prepared for node gpu99' in proc.stderr


SACCT = ('42|salloc|RUNNING|0:0\n42.extern|extern|RUNNING|0:0\n42.0|trainops-old|COMPLETED|0:0\n'
         '42.1|trainops-r1|CANCELLED by 0|0:15\n')


def test_parse_squeue_and_sacct():
    assert _srun.parse_squeue_steps('42.0|other\n42.3|trainops-r1\n', 'trainops-r1') == '3'
    assert _srun.parse_squeue_steps('42.0|other\n', 'trainops-r1') is None
    assert _srun.parse_sacct(SACCT, name='trainops-r1') == {'step_id': '1', 'name': 'trainops-r1',
                                                            'state': 'CANCELLED', 'exit_code': '0:15'}
    assert _srun.parse_sacct(SACCT, step_id='0')['state'] == 'COMPLETED'


def test_find_step_from_squeue_then_sacct():
    fake = FakeSystem({'squeue': [(0, '', ''), (0, '42.4|trainops-r1\n', '')], 'sacct': [(0, '', '')]})
    assert _srun.Slurm(system=fake).find_step('42', 'trainops-r1') == '4'
    assert fake.commands[0] == ['squeue', '--steps', '--jobs', '42', '--noheader', '--format', '%i|%j']
    fake = FakeSystem({'squeue': [(0, '', '')], 'sacct': [(0, SACCT, '')]})
    assert _srun.Slurm(system=fake).find_step('42', 'trainops-r1') == '1'


def test_find_step_gives_up_when_srun_ended_without_a_step():
    fake = FakeSystem({'squeue': [(1, '', 'slurm_load_jobs error: Invalid job id specified')], 'sacct': [(0, '', '')]})
    with pytest.raises(_srun.SrunError, match='neither in squeue nor in sacct: slurm_load_jobs error'):
        _srun.Slurm(system=fake).find_step('42', 'trainops-r1', alive=lambda: False)


# recorded on the lab's Slurm 22.05: job 1 submitted by root with `sbatch --uid=nobody --job-name 'x UserId=root(0)'
# --wrap 'srun --job-name=trainops-r1 sleep 60'`
SQUEUE_STEP = '1.0|65534|nobody|trainops-r1\n'           # squeue --steps 1.0 --noheader --format '%i|%U|%u|%j'
SQUEUE_JOB = '1|65534|nobody\n'                          # squeue --jobs 1 --noheader --format '%i|%U|%u'
SACCT_JOB = '1|65534|nobody\n'                           # sacct --jobs 1 -X --noheader --parsable2 --format JobID,UID,User
SCONTROL_JOB = ('JobId=1 JobName=x UserId=root(0) UserId=nobody(65534) GroupId=root(0) MCS_label=N/A '
                'Priority=4294901759 Nice=0 Account=(null) QOS=normal JobState=RUNNING')  # scontrol show job --oneliner 1


def test_step_state_running_then_from_sacct():
    fake = FakeSystem({'squeue': [(0, '42.1|1001|alice|trainops-r1\n', '')], 'sacct': [(0, SACCT, '')]})
    assert _srun.Slurm(system=fake).step_state('42', '1') == {'state': 'RUNNING', 'exit_code': None,
                                                              'name': 'trainops-r1', 'source': 'squeue',
                                                              'uid': 1001, 'user': 'alice'}
    assert fake.commands[0] == ['squeue', '--steps', '42.1', '--noheader', '--format', '%i|%U|%u|%j']
    fake = FakeSystem({'squeue': [(0, '', '')], 'sacct': [(0, SACCT, '')]})
    assert _srun.Slurm(system=fake).step_state('42', '1') == {'state': 'CANCELLED', 'exit_code': '0:15',
                                                              'name': 'trainops-r1', 'source': 'sacct'}
    # the step's name is its own choice and comes last: a '|' in it stays in the name
    fake = FakeSystem({'squeue': [(0, '42.1|1001|alice|a|b\n', '')]})
    assert _srun.Slurm(system=fake).step_state('42', '1')['name'] == 'a|b'


def test_job_owner_from_squeue_then_sacct_never_from_the_jobs_name():
    fake = FakeSystem({'squeue': [(0, SQUEUE_JOB, '')]})
    assert _srun.Slurm(system=fake).job_owner('1') == {'uid': 65534, 'name': 'nobody', 'source': 'squeue'}
    assert fake.commands == [['squeue', '--jobs', '1', '--noheader', '--format', '%i|%U|%u']]
    fake = FakeSystem({'squeue': [(1, '', 'slurm_load_jobs error: Invalid job id specified')], 'sacct': [(0, SACCT_JOB, '')]})
    assert _srun.Slurm(system=fake).job_owner('1') == {'uid': 65534, 'name': 'nobody', 'source': 'sacct'}
    assert fake.commands[1] == ['sacct', '--jobs', '1', '-X', '--noheader', '--parsable2', '--format', 'JobID,UID,User']
    fake = FakeSystem({'squeue': [(0, '', '')], 'sacct': [(0, '', '')]})
    assert _srun.Slurm(system=fake).job_owner('1') == {'uid': None, 'name': None, 'source': None,
                                                       'error': 'not in squeue or sacct'}
    # scontrol's one line holds the job's name unquoted: a name can put a UserId= before the real one
    assert SCONTROL_JOB.split('UserId=')[1].startswith('root(0)')
    assert _srun.parse_job_owner(SCONTROL_JOB, '1') is None
    assert _srun.parse_job_owner('2|0|root\n1|x|y\n', '1') is None


OWNER = {'uid': 0, 'name': 'root', 'source': 'squeue'}
STEP = {'state': 'RUNNING', 'name': 'trainops-r1', 'source': 'squeue', 'uid': 0, 'user': 'root'}


def test_step_refusal_takes_the_run_owners_step_slurm_names_after_the_run():
    assert _srun.step_refusal('42', '1', 'r1', 0, STEP, OWNER) is None
    # sacct's steps say no uid: the job's says whose it is
    assert _srun.step_refusal('42', '1', 'r1', 0, {'state': 'COMPLETED', 'name': 'trainops-r1', 'source': 'sacct'},
                              OWNER) is None


@pytest.mark.parametrize('step, owner_uid, job_owner, found', [
    # a forged pids.json names another user's step, named after the run: the owners differ
    (dict(STEP, uid=65534, user='nobody'), 0, {'uid': 65534, 'name': 'nobody', 'source': 'squeue'},
     r'Slurm job 42 belongs to uid 65534 \(nobody\), but run r1 belongs to uid 0 \(root\) \(the owner of its run '
     r'directory on the nodes\)'),
    # root's step in the owner's job (root may create one): it runs as root, not as the owner
    (STEP, 65534, {'uid': 65534, 'name': 'nobody', 'source': 'squeue'},
     r'Slurm runs that step as uid 0 \(root\), but run r1 belongs to uid 65534 \(nobody\)'),
    (STEP, None, OWNER, r"its nodes' records name no owner of its run directory \(None\)"),
    (STEP, 0, {'uid': None, 'error': 'not in squeue or sacct'}, r'Slurm does not say whose job 42 is \(not in squeue'),
    # another step of the run owner's allocation (another run's)
    (dict(STEP, name='interactive'), 0, OWNER, "Slurm names that step 'interactive', not trainops-r1"),
    (dict(STEP, name='trainops-r2'), 0, OWNER, "Slurm names that step 'trainops-r2'"),
    ({'state': 'UNKNOWN', 'name': None, 'error': 'not in squeue or sacct'}, 0, OWNER,
     r'Slurm does not show that step \(not in squeue or sacct\)'),
])
def test_step_refusal_of_a_step_that_is_not_the_run_owners(step, owner_uid, job_owner, found):
    assert re.match(r"Step 42\.1 is not run r1's: " + found + r'.*nothing was signalled or cancelled through Slurm',
                    _srun.step_refusal('42', '1', 'r1', owner_uid, step, job_owner))


def test_the_recorded_step_of_another_user_is_refused_naming_both_users():
    fake = FakeSystem({'squeue': [(0, SQUEUE_STEP, '')]})
    slurm = _srun.Slurm(system=fake)
    step = slurm.step_state('1', '0')
    fake.answers['squeue'] = [(0, SQUEUE_JOB, '')]
    refusal = _srun.step_refusal('1', '0', 'r1', 0, step, slurm.job_owner('1'))
    assert refusal == ("Step 1.0 is not run r1's: Slurm job 1 belongs to uid 65534 (nobody), but run r1 belongs to uid 0 "
                       "(root) (the owner of its run directory on the nodes). Its records (pids.json, job.json) are not "
                       "trusted: nothing was signalled or cancelled through Slurm.")


def test_root_runs_scancel_as_the_runs_owner():
    assert _srun.scancel_user(0, 1001) == 1001
    assert _srun.scancel_user(0, 0) is None and _srun.scancel_user(1001, 1001) is None
    assert _srun.scancel_user(1002, 1001) is None   # a user other than root: as itself (Slurm says what it may)
    fake = FakeSystem({'scancel': [(0, '', '')]})
    _srun.Slurm(system=fake).cancel('42', '1', signal_name='TERM', owner_uid=1001)
    assert fake.commands == [['scancel', '--signal=TERM', '42.1']] and fake.users == [1001]
    fake = FakeSystem({'scancel': [(1, '', 'scancel: error: Kill job error on job id 42.1: Access/permission denied')]})
    with pytest.raises(_srun.SrunError, match=r'scancel 42.1 \(as uid 65534 \(nobody\)\) failed .rc 1.'):
        _srun.Slurm(system=fake).cancel('42', '1', owner_uid=65534)


def test_cancel_is_scancel_of_the_step_only():
    fake = FakeSystem({'scancel': [(0, '', '')]})
    _srun.Slurm(system=fake).cancel('42', '1')
    assert fake.commands == [['scancel', '42.1']]
    fake = FakeSystem({'scancel': [(0, '', '')]})
    _srun.Slurm(system=fake).cancel('42', '1', signal_name='TERM')
    assert fake.commands == [['scancel', '--signal=TERM', '42.1']]
    fake = FakeSystem({'scancel': [(1, '', 'scancel: error: Kill job error on job id 42.1: Invalid job id specified')]})
    with pytest.raises(_srun.SrunError, match='scancel 42.1 failed .rc 1.: scancel: error'):
        _srun.Slurm(system=fake).cancel('42', '1')


class FakeProc(object):
    pid = 777

    @staticmethod
    def poll():
        return None


def test_start_step_spawns_srun_with_the_secrets_and_no_leftover_slurm_variables(tmp_path, monkeypatch):
    monkeypatch.setenv('SLURM_NTASKS', '99')
    monkeypatch.setenv('SLURM_CONF', '/etc/slurm/lab.conf')
    # what srun would read as options: salloc -c's (23.11: -c, which implies --exact), 22.05's SRUN_CPUS_PER_TASK
    for name in ('SLURM_CPUS_PER_TASK', 'SLURM_TRES_PER_TASK', 'SRUN_CPUS_PER_TASK', 'SLURM_GPUS_PER_TASK', 'SLURM_EXACT'):
        monkeypatch.setenv(name, '1')
    spawned = []

    def spawn(argv, output, env):
        spawned.append((argv, output, env))
        return FakeProc()

    fake = FakeSystem({'squeue': [(0, '42.2|trainops-r1\n', '')]})
    result = _srun.start_step({'job_id': '42', 'run_id': 'r1', 'nodes': nodes('a', 'b'), 'wait_seconds': 60,
                               'output': str(tmp_path / 'srun.log'), 'secret_env': {'HF_TOKEN': 's3cret'}},
                              slurm=_srun.Slurm(system=fake), spawn=spawn)
    argv, output, env = spawned[0]
    assert result['step_id'] == '2' and result['pid'] == 777 and result['job_id'] == '42'
    assert output == str(tmp_path / 'srun.log')
    assert env['HF_TOKEN'] == 's3cret' and '--export=HF_TOKEN' in argv
    assert 'SLURM_NTASKS' not in env and env['SLURM_CONF'] == '/etc/slurm/lab.conf'
    assert not [name for name in env if name.startswith(('SLURM_', 'SRUN_')) and name != 'SLURM_CONF']
    assert result['start_timeout'] == 30 and '--immediate=30' in argv
    assert 's3cret' not in repr(result)
    assert result['argv'][-3:] == ['-c', '<task script>', 'trainops-task']


# --- the checkpoint signal before the time limit, and how the job ended -------------------------------

@pytest.mark.parametrize('text, seconds', [
    ('0:45', 45), ('1:00', 60), ('59:59', 3599), ('1:00:00', 3600), ('12:34:56', 45296), ('2-03:04:05', 183845),
    (' 1:00\n', 60), ('UNLIMITED', None), ('NOT_SET', None), ('INVALID', None), ('', None), (None, None), ('90', None)])
def test_parse_duration_as_squeue_prints_it(text, seconds):
    assert _srun.parse_duration(text) == seconds


def test_time_left_is_the_earlier_of_the_steps_limit_and_the_jobs():
    # srun --time=1 (1:00), 12 s used; the allocation has 4:32 left
    fake = FakeSystem({'squeue': [(0, '1:00|0:12\n', ''), (0, '4:32\n', '')]})
    assert _srun.Slurm(system=fake).time_left('42', '3') == (48, 'the time limit of step 42.3 (1:00)')
    assert fake.commands == [['squeue', '--steps', '42.3', '--noheader', '--format', '%l|%M'],
                             ['squeue', '--jobs', '42', '--noheader', '--format', '%L']]
    fake = FakeSystem({'squeue': [(0, 'UNLIMITED|0:12\n', ''), (0, '1:30\n', '')]})
    assert _srun.Slurm(system=fake).time_left('42', '3') == (90, 'the time limit of job 42')


def test_time_left_without_any_limit():
    fake = FakeSystem({'squeue': [(0, 'UNLIMITED|0:12\n', ''), (0, 'UNLIMITED\n', '')]})
    assert _srun.Slurm(system=fake).time_left('42', '3') == (None, 'neither step 42.3 nor job 42 has a time limit')


def test_schedule_checkpoint_signal_fires_seconds_before_the_end():
    spawned = []
    fake = FakeSystem({'squeue': [(0, '1:00|0:05\n', ''), (0, 'UNLIMITED\n', '')]})
    record = _srun.schedule_checkpoint_signal(_srun.Slurm(system=fake), '42', '3', 'USR1', 30, '/x/srun.log', {'A': '1'},
                                              spawn=lambda *args: spawned.append(args) or 4242)
    assert spawned == [('42', '3', 'USR1', 25, '/x/srun.log', {'A': '1'})]
    assert record['pid'] == 4242 and record['fires_in'] == 25 and record['time_left'] == 55
    assert record['signal'] == 'USR1' and record['seconds_before_end'] == 30 and record['fires_at'].endswith('Z')
    # less time left than asked for: at once
    fake = FakeSystem({'squeue': [(0, '1:00|0:50\n', ''), (0, 'UNLIMITED\n', '')]})
    record = _srun.schedule_checkpoint_signal(_srun.Slurm(system=fake), '42', '3', 'USR2', 30, '/x', {},
                                              spawn=lambda *args: spawned.append(args) or 1)
    assert spawned[-1][3] == 0 and record['fires_in'] == 0


def test_schedule_checkpoint_signal_without_a_time_limit_starts_no_timer():
    fake = FakeSystem({'squeue': [(0, 'UNLIMITED|0:05\n', ''), (0, 'UNLIMITED\n', '')]})
    record = _srun.schedule_checkpoint_signal(_srun.Slurm(system=fake), '42', '3', 'USR1', 30, '/x', {},
                                              spawn=lambda *args: pytest.fail('no timer without a limit'))
    assert record['pid'] is None and record['fires_in'] is None and 'has a time limit' in record['limit']


def test_schedule_checkpoint_signal_refuses_a_signal_that_stops_a_run():
    with pytest.raises(_srun.SrunError, match="'TERM' is not a checkpoint signal"):
        _srun.schedule_checkpoint_signal(_srun.Slurm(system=FakeSystem({})), '42', '3', 'TERM', 30, '/x', {})


def test_checkpoint_timer_is_scancel_of_the_step_after_the_delay(tmp_path):
    # a stand-in scancel on PATH records its arguments: the timer runs it after sleeping
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    (bindir / 'scancel').write_text('#!/bin/sh\necho "scancel $*" > %s\n' % (tmp_path / 'called'))
    (bindir / 'scancel').chmod(0o755)
    env = {'PATH': '%s:/usr/bin:/bin' % bindir}
    pid = _srun.spawn_checkpoint_timer('42', '3', 'USR1', 0, str(tmp_path / 'srun.log'), env)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass  # reaped already: subprocess reaps the children of dropped Popen objects when it starts another
    called = tmp_path / 'called'
    deadline = time.monotonic() + 30
    while not (called.exists() and called.read_text().endswith('\n')) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert called.read_text() == 'scancel --signal=USR1 42.3\n'


def test_start_step_schedules_the_checkpoint_signal_without_the_secrets(tmp_path):
    timers = []
    fake = FakeSystem({'squeue': [(0, '42.2|trainops-r1\n', ''), (0, '2:00|0:01\n', ''), (0, 'UNLIMITED\n', '')]})
    result = _srun.start_step({'job_id': '42', 'run_id': 'r1', 'nodes': nodes('a'), 'output': str(tmp_path / 'srun.log'),
                               'secret_env': {'HF_TOKEN': 's3cret'}, 'checkpoint_signal': 'USR1', 'checkpoint_seconds': 90},
                              slurm=_srun.Slurm(system=fake), spawn=lambda *args: FakeProc(),
                              spawn_timer=lambda *args: timers.append(args) or 31)
    assert timers[0][:5] == ('42', '2', 'USR1', 29, str(tmp_path / 'srun.log')) and 'HF_TOKEN' not in timers[0][5]
    assert result['checkpoint_timer']['pid'] == 31
    # srun --signal is not given: Slurm keeps warning signals for job allocations, a step ignores it
    assert not [arg for arg in result['argv'] if arg.startswith('--signal')]
    fake = FakeSystem({'squeue': [(0, '42.2|trainops-r1\n', '')]})
    result = _srun.start_step({'job_id': '42', 'run_id': 'r1', 'nodes': nodes('a'), 'output': str(tmp_path / 'srun.log')},
                              slurm=_srun.Slurm(system=fake), spawn=lambda *args: FakeProc(),
                              spawn_timer=lambda *args: pytest.fail('no checkpoint signal asked for'))
    assert result['checkpoint_timer'] is None


def test_step_end_waits_for_the_step_to_leave_squeue():
    fake = FakeSystem({'squeue': [(0, '14.0|0|root|trainops-x\n', ''), (0, '14.0|0|root|trainops-x\n', ''), (0, '', '')],
                       'sacct': [(0, '14.0|trainops-x|TIMEOUT|0:15\n', '')]})
    step = _srun.Slurm(system=fake).step_end('14', '0', 20)
    assert step == {'state': 'TIMEOUT', 'exit_code': '0:15', 'name': 'trainops-x', 'source': 'sacct'}
    assert fake.clock == 2.0
    # still listed after the wait: as it stands
    fake = FakeSystem({'squeue': [(0, '14.0|0|root|trainops-x\n', '')]})
    assert _srun.Slurm(system=fake).step_end('14', '0', 5)['state'] == 'RUNNING' and fake.clock == 5.0


def test_job_state_from_sacct():
    fake = FakeSystem({'sacct': [(0, '14|TIMEOUT|0:0\n', '')]})
    assert _srun.Slurm(system=fake).job_state('14') == {'state': 'TIMEOUT', 'exit_code': '0:0', 'source': 'sacct'}
    assert fake.commands == [['sacct', '--jobs', '14', '-X', '--parsable2', '--noheader', '--format', 'JobID,State,ExitCode']]
    fake = FakeSystem({'sacct': [(0, '13|CANCELLED by 0|0:0\n', '')]})
    assert _srun.Slurm(system=fake).job_state('13')['state'] == 'CANCELLED'
    fake = FakeSystem({'sacct': [(1, '', 'sacct: error: Problem talking to the database\n')]})
    assert _srun.Slurm(system=fake).job_state('13') == {'state': 'UNKNOWN', 'exit_code': None, 'source': None,
                                                        'error': 'sacct: error: Problem talking to the database'}


def test_find_step_looks_a_little_longer_once_srun_ended_as_sacct_lags():
    fake = FakeSystem({'squeue': [(0, '', '')], 'sacct': [(0, '', '')] * 4 + [(0, SACCT, '')]})
    assert _srun.Slurm(system=fake).find_step('42', 'trainops-r1', alive=lambda: False) == '1'
    fake = FakeSystem({'squeue': [(0, '', '')], 'sacct': [(0, '', '')]})
    with pytest.raises(_srun.StepNotFound) as caught:
        _srun.Slurm(system=fake).find_step('42', 'trainops-r1', alive=lambda: False, timeout=100)
    assert caught.value.details == {'client_ended': True} and fake.clock <= _srun.ENDED_LOOKUP + 1
    fake = FakeSystem({'squeue': [(0, '', '')], 'sacct': [(0, '', '')]})
    with pytest.raises(_srun.StepNotFound) as caught:
        _srun.Slurm(system=fake).find_step('42', 'trainops-r1', alive=lambda: True, timeout=3)
    assert caught.value.details == {'client_ended': False} and 3 <= fake.clock < 4


# --- a step that does not start: its client ended, its step cancelled, nothing starts later -----------------------

class ProcessSystem(FakeSystem):
    """Slurm commands from a table; /proc and signals of one srun client (``pid``) that ends at the ``ends_at``-th
    signal; every signal recorded."""

    def __init__(self, answers, argv, pid=777, ends_at=2, pgid=None):
        super(ProcessSystem, self).__init__(answers)
        self.argv, self.pid, self.ends_at, self.pgid = argv, pid, ends_at, pgid or pid
        self.signals = []

    def alive(self):
        return len(self.signals) < self.ends_at

    def run(self, argv, timeout=60):
        if argv[0] == 'squeue' and self.signals and 'squeue-after-signals' in self.answers:
            self.commands.append(argv)
            return self.answers['squeue-after-signals']
        return super(ProcessSystem, self).run(argv, timeout)

    def read_proc_stat(self, pid):
        from ansible_collections.trainops.multinode.plugins.module_utils._proc import ProcInfo
        return ProcInfo(pid, 1, self.pgid, 'S', 4242) if pid == self.pid and self.alive() else None

    def read_proc_cmdline(self, pid):
        return self.argv if pid == self.pid and self.alive() else None

    def killpg(self, pgid, sig):
        self.signals.append(('pg', pgid, sig))
        return True

    def kill(self, pid, sig):
        self.signals.append(('pid', pid, sig))
        return True


class EndingProc(object):
    def __init__(self, system):
        self.system, self.pid, self.returncode = system, system.pid, None

    def poll(self):
        if not self.system.alive():
            self.returncode = 1
        return self.returncode


BUSY = ('srun: Job 42 step creation temporarily disabled, retrying (Requested nodes are busy)\n'
        'srun: Job 42 step creation still disabled, retrying (Requested nodes are busy)\n')


def start_busy(tmp_path, answers, ends_at=2):
    params = {'job_id': '42', 'run_id': 'r1', 'nodes': nodes('a', 'b'), 'wait_seconds': 60, 'start_timeout': 5,
              'output': str(tmp_path / 'srun.log')}
    (tmp_path / 'srun.log').write_text('0: an earlier step\'s line\nsrun: an earlier srun\'s line\n')
    argv = _srun.build_argv('42', 'r1', params['nodes'], 60, start_timeout=5)
    system = ProcessSystem(answers, argv, ends_at=ends_at)

    def spawn(argv, output, env):
        with open(output, 'a') as handle:
            handle.write(BUSY)
        return EndingProc(system)

    with pytest.raises(_srun.SrunError) as caught:
        _srun.start_step(params, slurm=_srun.Slurm(system=system), spawn=spawn)
    return caught.value, system


def test_a_step_that_is_not_created_in_time_ends_its_srun_client_and_says_why(tmp_path):
    error, system = start_busy(tmp_path, {'squeue': [(0, '', '')], 'sacct': [(0, '', '')]})
    assert error.msg.startswith('Slurm step trainops-r1 of job 42 did not start: it was not created within 5 s '
                                '(trainops_srun_start_timeout), srun says: srun: Job 42 step creation temporarily '
                                'disabled, retrying (Requested nodes are busy) | srun: Job 42 step creation still disabled')
    assert 'The srun client (pid 777) was ended (SIGINT, SIGINT)' in error.msg
    assert 'Slurm has no step trainops-r1 in job 42, so nothing of it starts later' in error.msg
    assert "an earlier srun's line" not in error.msg  # only this client's lines
    # its session's process group, twice SIGINT (srun gives up a pending step at the first, aborts at the second)
    assert system.signals == [('pg', 777, signal.SIGINT), ('pg', 777, signal.SIGINT)]
    assert not [argv for argv in system.commands if argv[0] == 'scancel']
    # srun --immediate=5 had 5 s, and its client CLIENT_GRACE more to give up by itself
    assert 5 + _srun.CLIENT_GRACE <= system.clock < 5 + _srun.CLIENT_GRACE + 1 + 2 * _srun.CLIENT_WAIT


def test_a_client_that_does_not_give_up_is_killed(tmp_path):
    error, system = start_busy(tmp_path, {'squeue': [(0, '', '')], 'sacct': [(0, '', '')]}, ends_at=3)
    assert [sig for _kind, _pid, sig in system.signals] == [signal.SIGINT, signal.SIGINT, signal.SIGKILL]
    assert '(SIGINT, SIGINT, SIGKILL)' in error.msg


def test_a_step_created_as_its_client_is_ended_is_cancelled(tmp_path):
    # squeue shows nothing while waiting, then the step Slurm created just as the client was ended
    answers = {'squeue': [(0, '', '')], 'squeue-after-signals': (0, '42.5|trainops-r1\n', ''), 'sacct': [(0, '', '')],
               'scancel': [(0, '', '')]}
    error, system = start_busy(tmp_path, answers)
    assert ['scancel', '42.5'] in system.commands
    assert 'step 42.5, which Slurm had created meanwhile, was cancelled (scancel)' in error.msg
    assert error.details['abandoned']['cancelled'] is True


def test_srun_that_gave_up_by_itself_is_not_signalled(tmp_path):
    # srun --immediate ran out: the client exited with "Unable to create step"
    error, system = start_busy(tmp_path, {'squeue': [(0, '', '')], 'sacct': [(0, '', '')]}, ends_at=0)
    assert system.signals == []
    assert 'srun ended (exit code 1) without it, having waited at most' in error.msg and 'No srun client of it is left' in error.msg


def test_end_client_signals_only_that_steps_srun():
    argv = ['srun', '--jobid=42', '--job-name=trainops-r1', '--label']
    for other in (['srun', '--jobid=42', '--job-name=trainops-r2'], ['srun', '--jobid=43', '--job-name=trainops-r1'],
                  ['python3', 'train.py']):
        system = ProcessSystem({}, other)
        assert _srun.end_client(system, 777, '42', 'trainops-r1') == {'pid': 777, 'found': False, 'signals': []}
        assert system.signals == []
    # not the leader of its own group (not started by spawn_srun): the process alone
    system = ProcessSystem({}, argv, pgid=1)
    assert _srun.end_client(system, 777, '42', 'trainops-r1')['found'] is True
    assert system.signals == [('pid', 777, signal.SIGINT), ('pid', 777, signal.SIGINT)]
    system = ProcessSystem({}, argv, ends_at=99)
    with pytest.raises(_srun.SrunError, match='still there after SIGKILL'):
        _srun.end_client(system, 777, '42', 'trainops-r1')


@pytest.mark.parametrize('sacct, cancelled', [
    ('42.5|trainops-r1|RUNNING|0:0\n', True),       # squeue does not show it (yet), sacct does: cancelled
    ('42.5|trainops-r1|COMPLETED|0:0\n', False),    # it ran and ended: nothing to cancel
])
def test_abandon_step_by_name(sacct, cancelled):
    fake = FakeSystem({'squeue': [(0, '', '')], 'sacct': [(0, sacct, '')], 'scancel': [(0, '', '')]})
    result = _srun.abandon_step(_srun.Slurm(system=fake), '42', 'trainops-r1')
    assert result['cancelled'] is cancelled and result['step_id'] == '5' and result['client'] is None
    assert (['scancel', '42.5'] in fake.commands) is cancelled


REAL_SRUN = r"""
import signal, sys, time
print('srun: Job 42 step creation temporarily disabled, retrying (Requested nodes are busy)', flush=True)
interrupts = []
def on_int(signum, frame):
    interrupts.append(time.monotonic())
    if len(interrupts) == 1:
        print('srun: interrupt (one more within 1 sec to abort)', flush=True)
    else:
        print('srun: Cancelled pending job step with signal 2', flush=True)
        sys.exit(1)
signal.signal(signal.SIGINT, on_int)
while True:
    time.sleep(0.05)
"""


class RealProcesses(_srun.System):
    """The real system (spawn, /proc, signals, clock), with Slurm's commands answered from a table."""

    def __init__(self, answers):
        self.fake = FakeSystem(answers)

    def run(self, argv, timeout=60):
        return self.fake.run(argv, timeout)


@pytest.mark.real
def test_a_real_srun_client_that_waits_for_busy_nodes_is_ended_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(_srun, 'CLIENT_GRACE', 0.5)
    fake_srun = tmp_path / 'srun'
    fake_srun.write_text('#!%s\n%s' % (sys.executable, REAL_SRUN))
    fake_srun.chmod(0o755)
    system = RealProcesses({'squeue': [(0, '', '')], 'sacct': [(0, '', '')]})
    spawned = []

    def spawn(argv, output, env):
        spawned.append(_srun.spawn_srun(argv, output, env))
        return spawned[-1]

    params = {'job_id': '42', 'run_id': 'r1', 'nodes': nodes('a'), 'wait_seconds': 0, 'start_timeout': 1,
              'srun': str(fake_srun), 'output': str(tmp_path / 'srun.log')}
    with pytest.raises(_srun.SrunError, match=r'did not start: it was not created within 1 s .*Requested nodes are busy'
                                              r'.*was ended \(SIGINT, SIGINT\)'):
        _srun.start_step(params, slurm=_srun.Slurm(system=system), spawn=spawn)
    proc = spawned[0]
    assert proc.returncode == 1  # reaped: no client left behind
    assert _srun.System().read_proc_stat(proc.pid) is None
    assert 'Cancelled pending job step with signal 2' in (tmp_path / 'srun.log').read_text()


# --- the run's launcher and the nodes Slurm ended, from the nodes' own records ---------------------

def step_job(run_id='r1', job_id='7', step_id='2', **fields):
    job = {'run_id': run_id, 'status': 'running', 'exit_code': None, 'stop': None, 'supervisor_signals': [],
           'owner_uid': 0,
           'launcher': {'name': 'srun', 'job_id': job_id, 'step_id': step_id,
                        'step': '%s.%s' % (job_id, step_id) if job_id and step_id else None}}
    job.update(fields)
    return job


def test_run_launcher_reads_the_step_from_the_nodes_records():
    assert _launchers.run_launcher([{}, step_job(), step_job(job_id=None, step_id=None)]) == {
        'name': 'srun', 'run_id': 'r1', 'job_id': '7', 'step_id': '2', 'step': '7.2', 'step_name': 'trainops-r1',
        'owner_uid': 0, 'refused': None, 'own_tasks': True}


def test_run_launcher_of_a_run_over_ssh_or_of_no_run():
    none = {'job_id': None, 'step_id': None, 'step': None, 'step_name': None, 'owner_uid': None, 'refused': None,
            'own_tasks': False}
    assert _launchers.run_launcher([{'run_id': 'r1', 'launcher': {'name': 'ssh'}}]) == dict(none, name='ssh', run_id='r1')
    assert _launchers.run_launcher([{'run_id': None}, {}]) == dict(none, name='ssh', run_id=None)
    assert _launchers.run_launcher([]) == dict(none, name='ssh', run_id=None)


def test_run_launcher_before_the_step_ran_knows_no_step():
    launcher = _launchers.run_launcher([step_job(job_id=None, step_id=None)])
    assert launcher['name'] == 'srun' and launcher['step'] is None and launcher['step_name'] == 'trainops-r1'
    assert launcher['own_tasks'] is False


def test_run_launcher_follows_the_first_nodes_run_and_refuses_contradicting_steps():
    # a node whose current run is another one does not count
    assert _launchers.run_launcher([step_job(), step_job(run_id='r0', step_id='1')])['step'] == '7.2'
    refused = _launchers.run_launcher([step_job(), step_job(step_id='1')])
    assert 'different Slurm steps (7.1, 7.2)' in refused['refused'] and refused['step'] is None


@pytest.mark.parametrize('owners, found', [
    ((0, 1001), 'different users or to none (0, 1001)'),   # two nodes' run directories of two users
    ((None, None), 'different users or to none (None)'),   # a run directory that is a symlink (lstat: no directory)
])
def test_run_launcher_refuses_a_run_of_no_one_owner(owners, found):
    refused = _launchers.run_launcher([step_job(owner_uid=owner) for owner in owners])
    assert found in refused['refused'] and refused['owner_uid'] is None and refused['job_id'] is None
    assert _launchers.run_launcher([step_job(owner_uid=1001)] * 2)['owner_uid'] == 1001


@pytest.mark.parametrize('fields, ended', [
    ({'status': 'lost'}, True),                                              # SIGKILL: no exit.json
    ({'status': 'exited', 'exit_code': 143, 'supervisor_signals': ['SIGTERM']}, True),
    ({'status': 'exited', 'exit_code': 1}, False),                           # failed by itself
    ({'status': 'exited', 'exit_code': 0, 'supervisor_signals': ['SIGTERM']}, False),
    ({'status': 'lost', 'stop': {'reason': 'user'}}, False),                 # a stop was asked for
    ({'status': 'running'}, False),
    ({'status': 'lost', 'launcher': {'name': 'ssh'}}, False),
])
def test_ended_by_step(fields, ended):
    assert _srun.ended_by_step(step_job(**fields)) is ended
