# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/sbatch.yml without a Slurm: the batch script it renders (trainops_sbatch_submit=false), its
input checks, and the script's exit code. The submitted jobs run on the lab's real Slurm in
tests/lab/test_slurm_lab.py."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time

import pytest

pytestmark = [pytest.mark.real, pytest.mark.slow]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)


def sbatch_play(tmp_path, **extravars):
    """ansible-playbook playbooks/sbatch.yml with these variables (as a JSON -e), from the repository."""
    source = tmp_path / 'allocation.slurm.yml'
    source.write_text('plugin: trainops.multinode.slurm\n')
    variables = {'trainops_sbatch_inventory': str(source), 'trainops_sbatch_submit': False,
                 'trainops_sbatch_dir': str(tmp_path / 'batch')}
    variables.update(extravars)
    env = {k: v for k, v in os.environ.items() if not k.startswith(('SLURM_', 'ANSIBLE_'))}
    env.update(ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1')
    return subprocess.run([os.path.join(BIN, 'ansible-playbook'), 'playbooks/sbatch.yml', '-e', json.dumps(variables)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)


def rendered(tmp_path):
    batch = tmp_path / 'batch'
    (script,) = sorted(batch.glob('*.sbatch'))
    (variables,) = sorted(batch.glob('*.vars.json'))
    return script, variables


def test_renders_a_batch_script_and_its_private_variables(tmp_path):
    proc = sbatch_play(tmp_path, trainops_sbatch_nodes=3, trainops_sbatch_job_name='nightly',
                       trainops_sbatch_options=['--partition=gpu', '--time=01:00:00'],
                       trainops_sbatch_extra_vars={'channels': 42, 'config': 'config/tiny.yaml'})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    script, variables = rendered(tmp_path)
    assert script.name.startswith('nightly-') and variables.name == script.name.replace('.sbatch', '.vars.json')
    assert stat.S_IMODE(script.stat().st_mode) == 0o700
    assert stat.S_IMODE(variables.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / 'batch').stat().st_mode) == 0o700
    assert json.loads(variables.read_text()) == {'channels': 42, 'config': 'config/tiny.yaml'}
    text = script.read_text()
    sbatch_lines = [line for line in text.splitlines() if line.startswith('#SBATCH')]
    assert sbatch_lines == ['#SBATCH --job-name=nightly', '#SBATCH --nodes=3',
                            '#SBATCH --output=%s/%%x-%%j.out' % (tmp_path / 'batch'), '#SBATCH --signal=B:USR1@120',
                            '#SBATCH --no-requeue', '#SBATCH --partition=gpu', '#SBATCH --time=01:00:00']
    assert '-i %s -e @%s' % (tmp_path / 'allocation.slurm.yml', variables) in text
    assert '%s/playbooks/launch.yml &' % REPO in text and '%s/playbooks/stop.yml' % REPO in text
    assert 'run_id_file' not in text and 'trainops_resume_from' not in text  # no --requeue, nothing to resume
    assert subprocess.run(['bash', '-n', str(script)], check=False).returncode == 0
    assert 'Rendered %s (submit it with sbatch)' % script in ' '.join(proc.stdout.split()), proc.stdout


@pytest.mark.parametrize('playbook, code', [('/bin/true', 0), ('/bin/false', 1)])
def test_the_script_exits_with_the_playbooks_code(tmp_path, playbook, code):
    proc = sbatch_play(tmp_path, trainops_sbatch_ansible_playbook=playbook)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    script, _variables = rendered(tmp_path)
    env = dict(os.environ, SLURM_JOB_ID='7', SLURM_JOB_NODELIST='n[1-2]')
    run = subprocess.run(['bash', str(script)], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == code, run.stdout + run.stderr
    assert 'trainops: launch.yml exited with %d' % code in run.stdout


@pytest.mark.parametrize('extravars, message', [
    ({'trainops_sbatch_extra_vars': {'wait': False}}, 'sets wait (trainops_wait) to false'),
    ({'trainops_sbatch_extra_vars': {'trainops_wait': 'no'}}, 'sets wait (trainops_wait) to false'),
    ({'trainops_sbatch_inventory': '/etc/hosts'}, "not '/etc/hosts'"),
    ({'trainops_sbatch_inventory': '/nowhere/x.slurm.yml'}, 'Not found: trainops_sbatch_inventory /nowhere/x.slurm.yml.'),
])
def test_bad_input_fails_before_anything_is_written(tmp_path, extravars, message):
    proc = sbatch_play(tmp_path, **extravars)
    assert proc.returncode != 0
    assert message in proc.stdout, proc.stdout[-3000:]
    assert not (tmp_path / 'batch').exists()


def test_a_job_name_with_a_newline_is_refused_before_anything_is_written(tmp_path):
    # the newline would end the #SBATCH line: the rest would run as a shell command, and sbatch would ignore
    # every #SBATCH line after it
    proc = sbatch_play(tmp_path, trainops_sbatch_job_name='nightly\ntouch /tmp/pwned',
                       trainops_sbatch_options=['--partition=gpu', '--nodes=9'], trainops_sbatch_submit=True)
    assert proc.returncode != 0
    out = ' '.join(proc.stdout.split())
    assert "trainops_sbatch_job_name='nightly\\ntouch /tmp/pwned': the job name" in out, proc.stdout[-3000:]
    assert "trainops_sbatch_options item '--nodes=9': --nodes is not taken here" in out, proc.stdout[-3000:]
    assert '--partition=gpu' not in out  # a value that fits is not mentioned
    assert not (tmp_path / 'batch').exists()
    assert 'Submit the batch script' not in proc.stdout


def test_values_that_reach_the_shell_are_quoted(tmp_path):
    odd = tmp_path / "it's $(touch pwned) \"dir\""
    (odd / 'playbooks').mkdir(parents=True)
    for name in ('launch.yml', 'stop.yml'):
        (odd / 'playbooks' / name).write_text('- hosts: localhost\n  gather_facts: false\n  tasks: []\n')
    (odd / 'playbooks' / "my `id` play.yml").write_text('- hosts: localhost\n  gather_facts: false\n  tasks: []\n')
    proc = sbatch_play(tmp_path, trainops_sbatch_playbook=str(odd / 'playbooks' / "my `id` play.yml"),
                       trainops_sbatch_stop_playbook=str(odd / 'playbooks' / 'stop.yml'),
                       trainops_sbatch_ansible_playbook='/bin/true')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    script, _variables = rendered(tmp_path)
    text = script.read_text()
    assert "launch_name='my `id` play.yml'" in text
    assert '"trainops: job ${SLURM_JOB_ID} on ${SLURM_JOB_NODELIST}: ${launch_name}"' in text
    env = dict(os.environ, SLURM_JOB_ID='7', SLURM_JOB_NODELIST='n1')
    run = subprocess.run(['bash', str(script)], env=env, cwd=str(tmp_path), capture_output=True, text=True,
                         timeout=60, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert 'trainops: job 7 on n1: my `id` play.yml' in run.stdout
    assert 'trainops: my `id` play.yml exited with 0' in run.stdout
    assert not list(tmp_path.rglob('pwned')) and 'uid=' not in run.stdout + run.stderr


FAKE_PLAYBOOK = """#!/usr/bin/env bash
# stands in for ansible-playbook: records its arguments; the launch runs until it is stopped
printf '%%s\\n' "$*" >> %(calls)s
echo "${ANSIBLE_SSH_CONTROL_PATH_DIR:-}" >> %(calls)s.ssh
case "$*" in
  *launch.yml*) trap 'echo launch got TERM >> %(calls)s; exit 143' TERM; echo started >> %(calls)s;
                while :; do sleep 0.1; done ;;
esac
"""


def fake_playbook(tmp_path):
    calls = tmp_path / 'calls.txt'
    fake = tmp_path / 'ansible-playbook'
    fake.write_text(FAKE_PLAYBOOK % {'calls': calls})
    fake.chmod(0o755)
    return fake, calls


def start_script(script, calls, **env):
    env = dict(os.environ, SLURM_JOB_ID='41', SLURM_JOB_NODELIST='n1', **env)
    proc = subprocess.Popen(['bash', str(script)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while not (calls.exists() and 'started' in calls.read_text()):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[0]
        time.sleep(0.05)
    return proc


def test_a_cancelled_job_stops_the_ranks_and_exits_143(tmp_path):
    fake, calls = fake_playbook(tmp_path)
    assert sbatch_play(tmp_path, trainops_sbatch_ansible_playbook=str(fake)).returncode == 0
    script, _variables = rendered(tmp_path)
    short = tempfile.mkdtemp(prefix='t', dir='/tmp')  # a TMPDIR short enough for the job's SSH sockets
    proc = start_script(script, calls, TMPDIR=short)
    proc.send_signal(signal.SIGTERM)  # scancel, scontrol requeue
    out = proc.communicate(timeout=30)[0]
    assert proc.returncode == 143, out
    assert 'ends early (cancelled or out of time): stopping the ranks on every node' in out
    assert 'trainops: stop.yml exited with 0' in out
    lines = calls.read_text().splitlines()
    assert lines[-2:] == ['launch got TERM', lines[-1]] and lines[-1].endswith('/playbooks/stop.yml'), lines
    # the stop's SSH connections are its own, not the launch's (which die with the job's TERM); both the job's
    launch_ssh, stop_ssh = (tmp_path / 'calls.txt.ssh').read_text().splitlines()
    assert os.path.dirname(launch_ssh) == os.path.dirname(stop_ssh) and launch_ssh != stop_ssh, (launch_ssh, stop_ssh)
    assert os.path.basename(os.path.dirname(launch_ssh)).startswith('trainops-ssh-41.')
    assert os.path.dirname(os.path.dirname(launch_ssh)) == short
    assert not os.path.exists(os.path.dirname(launch_ssh)), 'the job removes its SSH directory'
    os.rmdir(short)


def test_near_the_time_limit_the_ranks_stop_and_the_script_waits_for_the_limit(tmp_path):
    # exiting on its own would make the job FAILED (143); Slurm ends it at the limit instead: TIMEOUT
    fake, calls = fake_playbook(tmp_path)
    assert sbatch_play(tmp_path, trainops_sbatch_ansible_playbook=str(fake), trainops_sbatch_stop_seconds=30,
                       trainops_sbatch_checkpoint_seconds=20).returncode == 0
    script, _variables = rendered(tmp_path)
    assert '#SBATCH --signal=B:USR1@30' in script.read_text()
    proc = start_script(script, calls, TMPDIR=str(tmp_path))  # pytest's: too long for SSH socket paths
    proc.send_signal(signal.SIGUSR1)  # --signal=B:USR1@30
    deadline = time.monotonic() + 30
    while '/playbooks/stop.yml' not in calls.read_text():
        assert time.monotonic() < deadline, calls.read_text()
        time.sleep(0.05)
    # the stop sends the checkpoint signal first and says the job reached its time limit (outcome timed_out)
    stop = calls.read_text().rstrip().splitlines()[-1]
    assert stop.endswith('/playbooks/stop.yml -e ' + json.dumps({
        'trainops_stop_checkpoint_seconds': 20, 'trainops_stop_time_limit': {'job_id': '41', 'stop_seconds': 30}})), stop
    time.sleep(1)
    assert proc.poll() is None  # still there, after the stop playbook ran
    proc.send_signal(signal.SIGTERM)  # the time limit
    out = proc.communicate(timeout=30)[0]
    assert proc.returncode == -signal.SIGTERM, out
    assert 'reaches its time limit in 30 s (USR1)' in out and 'trainops: stop.yml exited with 0' in out
    assert 'waiting for the time limit' in out
    launch_ssh = (tmp_path / 'calls.txt.ssh').read_text().splitlines()[0]
    assert launch_ssh.startswith('/tmp/trainops-ssh-41.') and len(launch_ssh) + 41 <= 107, launch_ssh


def test_with_requeue_a_restarted_attempt_resumes_the_run_the_last_one_recorded(tmp_path):
    # a batch directory with a space and a quote in its name: the script quotes it, and the launch gets it whole
    batch = tmp_path / "batch dir's"
    fake, calls = fake_playbook(tmp_path)
    proc = sbatch_play(tmp_path, trainops_sbatch_ansible_playbook=str(fake), trainops_sbatch_requeue=True,
                       trainops_sbatch_job_name='rq', trainops_sbatch_dir=str(batch),
                       trainops_sbatch_output=str(tmp_path / '%x-%j.out'))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (script,) = sorted(batch.glob('*.sbatch'))
    assert '#SBATCH --requeue' in script.read_text().splitlines()
    run_id_file = str(script)[:-len('.sbatch')] + '.41.run_id'
    run_id_arg = '-e ' + json.dumps({'trainops_run_id_file': run_id_file})

    # the first attempt: no resume; the launch is told where to record its run id
    first = start_script(script, calls)
    first.send_signal(signal.SIGTERM)  # scontrol requeue
    assert first.communicate(timeout=30)[0] and first.returncode == 143
    launch = [line for line in calls.read_text().splitlines() if 'launch.yml' in line]
    assert launch[-1].endswith('launch.yml ' + run_id_arg), launch

    # restarted before the launch recorded a run: from scratch
    calls.unlink()
    restarted = start_script(script, calls, SLURM_RESTART_COUNT='1')
    restarted.send_signal(signal.SIGTERM)
    out = restarted.communicate(timeout=30)[0]
    assert 'restarted (1); no earlier attempt started a run: starting from scratch' in out
    assert 'trainops_resume_from' not in calls.read_text()

    # restarted after it did: the run is resumed (the launch writes the id and a newline)
    with open(run_id_file, 'w') as handle:
        handle.write('multinode_autoch_autoth_20261123_101500\n')
    calls.unlink()
    restarted = start_script(script, calls, SLURM_RESTART_COUNT='2')
    restarted.send_signal(signal.SIGTERM)
    out = restarted.communicate(timeout=30)[0]
    assert 'restarted (2): resuming run multinode_autoch_autoth_20261123_101500 from its latest checkpoint' in out
    launch = [line for line in calls.read_text().splitlines() if 'launch.yml' in line]
    assert launch[-1].endswith('launch.yml %s -e {"trainops_resume_from": "multinode_autoch_autoth_20261123_101500"}'
                               % run_id_arg), launch


def test_with_requeue_a_run_id_file_that_is_no_run_id_is_refused(tmp_path):
    # the same rule as the launch's (filter run_id_shell_function; tests/unit/.../test__run_id_rule.py)
    fake, calls = fake_playbook(tmp_path)
    assert sbatch_play(tmp_path, trainops_sbatch_ansible_playbook=str(fake), trainops_sbatch_requeue=True).returncode == 0
    script, _variables = rendered(tmp_path)
    env = dict(os.environ, SLURM_JOB_ID='41', SLURM_JOB_NODELIST='n1', SLURM_RESTART_COUNT='1')
    for content in ('run1 trainops_sbatch_submit=true', 'run1\nrun2', '../../etc', 'r' * 201, 'run1"}, "x": {"y": 1'):
        with open(str(script)[:-len('.sbatch')] + '.41.run_id', 'w') as handle:
            handle.write(content + '\n')
        run = subprocess.run(['bash', str(script)], env=env, capture_output=True, text=True, timeout=60, check=False)
        assert run.returncode == 2, run.stdout + run.stderr
        assert 'does not hold a run id' in run.stderr and 'not resuming' in run.stderr, run.stderr
        assert not calls.exists()  # no launch
