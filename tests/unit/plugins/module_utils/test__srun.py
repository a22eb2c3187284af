# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The srun launcher's argv, task script, step lookup, state and scancel (Slurm commands mocked)."""

from __future__ import annotations

import os
import subprocess

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _srun


def nodes(*names):
    return [{'name': name, 'rank': index, 'python': '/opt/py %d/bin/python' % index, 'path': '/opt/bin:/usr/bin',
             'supervisor': '/srv/state/%s/runs/r1/supervisor.py' % name, 'job': '/srv/state/%s/runs/r1/job.json' % name}
            for index, name in enumerate(names)]


class FakeSystem(object):
    """Answers Slurm commands from a table; records every command."""

    def __init__(self, answers):
        self.answers = answers  # (argv[0], ...) -> list of (rc, out, err), consumed in order (the last one repeats)
        self.commands = []
        self.clock = 0.0

    def run(self, argv, timeout=60):
        self.commands.append(argv)
        queue = self.answers[argv[0]]
        return queue.pop(0) if len(queue) > 1 else queue[0]

    def monotonic(self):
        return self.clock

    def sleep(self, seconds):
        self.clock += seconds


def test_build_argv_one_task_per_node_in_allocation_order():
    argv = _srun.build_argv('42', 'r1', nodes('gpu07', 'gpu03'), 120, extra_args=['--gpus-per-task=8'])
    assert argv[:12] == ['srun', '--jobid=42', '--job-name=trainops-r1', '--nodes=2', '--ntasks=2', '--ntasks-per-node=1',
                         '--nodelist=gpu07,gpu03', '--kill-on-bad-exit=1', '--wait=120', '--export=NONE', '--label',
                         '--gpus-per-task=8']
    assert argv[12:14] == ['/bin/sh', '-c'] and argv[-1] == 'trainops-task'


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
    return subprocess.run(['/bin/sh', '-c', script.replace('exec "$@"', 'echo "PATH=$PATH"; printf "%s\\n" "$@"'),
                           'trainops-task'], env={'SLURMD_NODENAME': nodename, 'SLURM_NODEID': nodeid},
                          capture_output=True, text=True, check=False)


def test_task_script_picks_the_node_by_its_own_slurmd_nodename():
    script = _srun.task_script(nodes('gpu07', 'gpu03'))
    proc = run_task(script, 'gpu03', '1')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ['PATH=/opt/bin:/usr/bin', '/opt/py 1/bin/python',
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


def test_step_state_running_then_from_sacct():
    fake = FakeSystem({'squeue': [(0, '42.1|trainops-r1\n', '')], 'sacct': [(0, SACCT, '')]})
    assert _srun.Slurm(system=fake).step_state('42', '1') == {'state': 'RUNNING', 'exit_code': None,
                                                              'name': 'trainops-r1', 'source': 'squeue'}
    assert fake.commands[0] == ['squeue', '--steps', '42.1', '--noheader', '--format', '%i|%j']
    fake = FakeSystem({'squeue': [(0, '', '')], 'sacct': [(0, SACCT, '')]})
    assert _srun.Slurm(system=fake).step_state('42', '1') == {'state': 'CANCELLED', 'exit_code': '0:15',
                                                              'name': 'trainops-r1', 'source': 'sacct'}


def test_check_step_of_run_takes_the_step_slurm_names_after_the_run():
    _srun.check_step_of_run('42', '1', 'r1', {'state': 'RUNNING', 'name': 'trainops-r1'})


@pytest.mark.parametrize('step, found', [
    # a forged pids.json names another step of the allocation (another user's or another run's)
    ({'state': 'RUNNING', 'name': 'interactive'}, "Slurm names that step 'interactive'"),
    ({'state': 'RUNNING', 'name': 'trainops-r2'}, "Slurm names that step 'trainops-r2'"),
    ({'state': 'UNKNOWN', 'name': None, 'error': 'not in squeue or sacct'},
     r'Slurm does not show that step \(not in squeue or sacct\)'),
])
def test_check_step_of_run_refuses_a_step_of_another_name(step, found):
    with pytest.raises(_srun.SrunError, match=r'Step 42\.1 is not the step of run r1 \(trainops-r1\): ' + found
                       + r'.*Nothing was signalled or cancelled'):
        _srun.check_step_of_run('42', '1', 'r1', step)


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
    os.waitpid(pid, 0)
    assert (tmp_path / 'called').read_text() == 'scancel --signal=USR1 42.3\n'


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
    fake = FakeSystem({'squeue': [(0, '14.0|trainops-x\n', ''), (0, '14.0|trainops-x\n', ''), (0, '', '')],
                       'sacct': [(0, '14.0|trainops-x|TIMEOUT|0:15\n', '')]})
    step = _srun.Slurm(system=fake).step_end('14', '0', 20)
    assert step == {'state': 'TIMEOUT', 'exit_code': '0:15', 'name': 'trainops-x', 'source': 'sacct'}
    assert fake.clock == 2.0
    # still listed after the wait: as it stands
    fake = FakeSystem({'squeue': [(0, '14.0|trainops-x\n', '')]})
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


# --- the run's launcher and the nodes Slurm ended, from the nodes' own records ---------------------

def step_job(run_id='r1', job_id='7', step_id='2', **fields):
    job = {'run_id': run_id, 'status': 'running', 'exit_code': None, 'stop': None, 'supervisor_signals': [],
           'launcher': {'name': 'srun', 'job_id': job_id, 'step_id': step_id,
                        'step': '%s.%s' % (job_id, step_id) if job_id and step_id else None}}
    job.update(fields)
    return job


def test_run_launcher_reads_the_step_from_the_nodes_records():
    assert _srun.run_launcher([{}, step_job(), step_job(job_id=None, step_id=None)]) == {
        'name': 'srun', 'run_id': 'r1', 'job_id': '7', 'step_id': '2', 'step': '7.2', 'step_name': 'trainops-r1'}


def test_run_launcher_of_a_run_over_ssh_or_of_no_run():
    none = {'job_id': None, 'step_id': None, 'step': None, 'step_name': None}
    assert _srun.run_launcher([{'run_id': 'r1', 'launcher': {'name': 'ssh'}}]) == dict(none, name='ssh', run_id='r1')
    assert _srun.run_launcher([{'run_id': None}, {}]) == dict(none, name='ssh', run_id=None)
    assert _srun.run_launcher([]) == dict(none, name='ssh', run_id=None)


def test_run_launcher_before_the_step_ran_knows_no_step():
    launcher = _srun.run_launcher([step_job(job_id=None, step_id=None)])
    assert launcher['name'] == 'srun' and launcher['step'] is None and launcher['step_name'] == 'trainops-r1'


def test_run_launcher_follows_the_first_nodes_run_and_refuses_contradicting_steps():
    # a node whose current run is another one does not count
    assert _srun.run_launcher([step_job(), step_job(run_id='r0', step_id='1')])['step'] == '7.2'
    with pytest.raises(_srun.SrunError, match=r'different Slurm steps \(7.1, 7.2\)'):
        _srun.run_launcher([step_job(), step_job(step_id='1')])


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


def test_build_argv_refuses_a_secret_name_with_a_trailing_newline():
    with pytest.raises(_srun.SrunError, match='Not environment variable names'):
        _srun.build_argv('42', 'r1', nodes('a'), 0, secret_names=['HF_TOKEN\n'])
