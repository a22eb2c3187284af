# -*- coding: utf-8 -*-

# Copyright (c) 2025, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The ``srun`` launcher: one Slurm step of the current allocation runs every node's prepared supervisor.

Each node's run directory is written by the torchrun module with ``state=prepared``; the step has one task
per node (``--ntasks-per-node=1``), and each task picks its node's command by ``$SLURMD_NODENAME``, which
slurmstepd sets inside the step (never a value expanded by the shell that calls srun), and checks that
``$SLURM_NODEID`` is the node rank computed from the allocation order.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time

from ansible_collections.trainops.multinode.plugins.module_utils._proc import System

JOB_ID_RE = re.compile(r'[0-9]+')
STEP_ID_RE = re.compile(r'[0-9]+')
NAME_RE = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.@+=-]*')
ENV_NAME_RE = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
STEP_PREFIX = 'trainops-'
# a step that is neither in squeue nor (yet) in sacct after this long was not started
FIND_TIMEOUT = 30.0


class SrunError(Exception):
    """Raised for anything the module reports with ``fail_json``."""

    def __init__(self, msg, **details):
        super(SrunError, self).__init__(msg)
        self.msg = msg
        self.details = details


def step_name(run_id):
    return STEP_PREFIX + run_id


def check_nodes(nodes):
    """``nodes``: [{name, rank, python, path, supervisor, job}] in allocation order, ranks 0..N-1."""
    if not nodes:
        raise SrunError('No nodes for the step.')
    for index, node in enumerate(nodes):
        missing = [key for key in ('name', 'python', 'path', 'supervisor', 'job') if not node.get(key)]
        if missing:
            raise SrunError('Node %s has no %s for the step.' % (node.get('name', index), ', '.join(missing)))
        if not NAME_RE.fullmatch(node['name']):
            raise SrunError('%r is not a Slurm node name.' % (node['name'], ))
        if int(node.get('rank', -1)) != index:
            raise SrunError('Node %s has rank %s but is number %d of the allocation order.' % (
                node['name'], node.get('rank'), index))


def task_script(nodes):
    """The shell program every task of the step runs: its node's supervisor, in the foreground, by exec.

    Variables are expanded by the task's own shell on its node (the program is one argument of srun).
    """
    lines = ['case "$SLURMD_NODENAME" in']
    for node in nodes:
        command = ' '.join(shlex.quote(word) for word in (node['python'], node['supervisor'], '--foreground', node['job']))
        lines.append('  %s)' % shlex.quote(node['name']))
        lines.append('    rank=%d' % int(node['rank']))
        lines.append('    PATH=%s; export PATH' % shlex.quote(node['path']))
        lines.append('    set -- %s;;' % command)
        # (set --: the command is only run once the rank is checked below)
    lines.append('  *) echo "trainops: no run prepared for node $SLURMD_NODENAME in this step" >&2; exit 2;;')
    lines.append('esac')
    lines.append('if [ "$SLURM_NODEID" != "$rank" ]; then')
    lines.append('  echo "trainops: node $SLURMD_NODENAME is node $SLURM_NODEID of the step but rank $rank of the job:'
                 ' the step does not follow the allocation order" >&2; exit 2')
    lines.append('fi')
    lines.append('exec "$@"')
    return '\n'.join(lines) + '\n'


def build_argv(job_id, run_id, nodes, wait_seconds, srun='srun', secret_names=(), extra_args=()):
    """The srun command line of the step (nodes in allocation order, one task each)."""
    if not JOB_ID_RE.fullmatch(str(job_id or '')):
        raise SrunError('%r is not a Slurm job id (SLURM_JOB_ID).' % (job_id, ))
    check_nodes(nodes)
    if int(wait_seconds) < 0:
        raise SrunError('wait_seconds must be >= 0')
    bad = [n for n in secret_names if not ENV_NAME_RE.fullmatch(n)]
    if bad:
        raise SrunError('Not environment variable names: %s' % ', '.join(bad))
    # only the secrets' names go with the step (plus Slurm's own SLURM_* variables): the controller's
    # environment is not the nodes'; each node's environment is in its job.json and the PATH above
    export = ','.join(sorted(secret_names)) if secret_names else 'NONE'
    count = len(nodes)
    return [srun, '--jobid=%s' % job_id, '--job-name=%s' % step_name(run_id),
            '--nodes=%d' % count, '--ntasks=%d' % count, '--ntasks-per-node=1',
            '--nodelist=%s' % ','.join(node['name'] for node in nodes),
            '--kill-on-bad-exit=1', '--wait=%d' % int(wait_seconds), '--export=%s' % export,
            '--label'] + list(extra_args) + ['/bin/sh', '-c', task_script(nodes), 'trainops-task']


def parse_squeue_steps(text, name):
    """``squeue --steps --noheader --format '%i|%j'`` lines -> step id of the step named ``name``."""
    for line in text.splitlines():
        fields = line.strip().split('|')
        if len(fields) >= 2 and fields[1] == name and '.' in fields[0]:
            return fields[0].split('.', 1)[1]
    return None


def parse_sacct(text, name=None, step_id=None):
    """``sacct --parsable2 --noheader --format JobID,JobName,State,ExitCode`` -> the step's record."""
    for line in text.splitlines():
        fields = line.strip().split('|')
        if len(fields) < 4 or '.' not in fields[0]:
            continue
        job_step = fields[0].split('.', 1)[1]
        if (name is not None and fields[1] == name) or (step_id is not None and job_step == str(step_id)):
            return {'step_id': job_step, 'name': fields[1], 'state': fields[2].split()[0] if fields[2] else '',
                    'exit_code': fields[3]}
    return None


def run_launcher(jobs):
    """What launched a run, from its nodes' own records (``jobs``: each node's ``job`` as the torchrun module's query
    returns it, in node order): the one rule by which ``stop`` and ``status`` choose the Slurm step's path.

    Returns ``{'name', 'run_id', 'job_id', 'step_id', 'step', 'step_name'}``: for a Slurm step's run name ``srun`` and
    the step the nodes' supervisors recorded from inside it (``step`` None when no node has run in the step yet), else
    name ``ssh`` and None for the step's keys. The run is the first node's that has one; nodes that name the same run in different steps
    are refused (their records contradict each other).
    """
    jobs = [job for job in (jobs or []) if isinstance(job, dict) and job.get('run_id')]
    run_id = jobs[0]['run_id'] if jobs else None
    launchers = [job.get('launcher') or {} for job in jobs if job['run_id'] == run_id]
    if not any(launcher.get('name') == 'srun' for launcher in launchers):
        return {'name': 'ssh', 'run_id': run_id, 'job_id': None, 'step_id': None, 'step': None, 'step_name': None}
    steps = sorted(set((str(launcher['job_id']), str(launcher['step_id'])) for launcher in launchers
                       if launcher.get('job_id') and launcher.get('step_id')))
    if len(steps) > 1:
        raise SrunError('The nodes of run %s recorded different Slurm steps (%s): their records contradict each other.'
                        % (run_id, ', '.join('%s.%s' % step for step in steps)))
    job_id, step_id = steps[0] if steps else (None, None)
    return {'name': 'srun', 'run_id': run_id, 'job_id': job_id, 'step_id': step_id,
            'step': '%s.%s' % (job_id, step_id) if steps else None, 'step_name': step_name(run_id)}


def ended_by_step(job):
    """Whether a node's run of a Slurm step (launcher=srun; ``job`` as the torchrun module returns it) was ended by
    Slurm rather than by itself: no stop was asked for (no stop record), it did not succeed, and its supervisor was
    killed (SIGKILL cannot be caught: the run is ``lost``, without exit.json) or received a signal (exit.json's
    ``signals``). That is how slurmstepd ends the step's other tasks when one exits non-zero (``--kill-on-bad-exit``);
    which node that was is for the judgment (plugins/module_utils/_experiment.py) and the wait to find out."""
    job = job or {}
    if (job.get('launcher') or {}).get('name') != 'srun' or job.get('stop') or job.get('exit_code') == 0:
        return False
    return job.get('status') == 'lost' or bool(job.get('supervisor_signals'))


def step_detail(job, cause):
    """The line that says a node was ended by the step because of ``cause`` (``lab-node03 failed (...)``)."""
    step = (job.get('launcher') or {}).get('step')
    return 'ended by Slurm%s (srun --kill-on-bad-exit) because %s' % (' with step %s' % step if step else '', cause)


class Slurm(object):
    """The Slurm client commands the launcher uses (squeue, sacct, scancel), through one runner."""

    def __init__(self, system=None, env=None):
        self.system = system or System()
        self.env = env

    def run(self, argv, timeout=60):
        return self.system.run(argv, timeout=timeout)

    def squeue_step(self, job_id, name):
        rc, out, err = self.run(['squeue', '--steps', '--jobs', str(job_id), '--noheader', '--format', '%i|%j'])
        if rc != 0:
            return None, err.strip()
        return parse_squeue_steps(out, name), None

    def sacct_step(self, job_id, name=None, step_id=None):
        rc, out, err = self.run(['sacct', '--jobs', str(job_id), '--parsable2', '--noheader',
                                 '--format', 'JobID,JobName,State,ExitCode'])
        if rc != 0:
            return None, err.strip()
        return parse_sacct(out, name=name, step_id=step_id), None

    def find_step(self, job_id, name, alive=None, timeout=FIND_TIMEOUT):
        """The step id of the step ``name`` of ``job_id``, looked up in squeue, then sacct, until ``timeout``.

        ``alive`` (callable) says whether the srun client still runs; once it has ended, sacct is the only source.
        """
        deadline = self.system.monotonic() + timeout
        errors = []
        while True:
            step, err = self.squeue_step(job_id, name)
            if step is not None:
                return step
            record, err2 = self.sacct_step(job_id, name=name)
            if record is not None:
                return record['step_id']
            errors = [e for e in (err, err2) if e]
            if self.system.monotonic() >= deadline or (alive is not None and not alive()):
                raise SrunError('Step %s of job %s is neither in squeue nor in sacct%s.' % (
                    name, job_id, (': ' + '; '.join(errors)) if errors else ''))
            self.system.sleep(0.5)

    def step_state(self, job_id, step_id):
        """``{'state': RUNNING|COMPLETED|FAILED|CANCELLED|..., 'exit_code': 'N:S' or None, 'source': ...}``."""
        rc, out, err = self.run(['squeue', '--steps', '%s.%s' % (job_id, step_id), '--noheader', '--format', '%i'])
        if rc == 0 and out.strip():
            return {'state': 'RUNNING', 'exit_code': None, 'source': 'squeue'}
        record, err2 = self.sacct_step(job_id, step_id=step_id)
        if record is not None:
            return {'state': record['state'], 'exit_code': record['exit_code'], 'source': 'sacct'}
        return {'state': 'UNKNOWN', 'exit_code': None, 'source': None,
                'error': '; '.join(e for e in (err if rc != 0 else '', err2) if e) or 'not in squeue or sacct'}

    def cancel(self, job_id, step_id, signal_name=None):
        """``scancel JOB.STEP`` cancels the step (Slurm 22.05 sends its tasks SIGKILL at once, and accounts the
        step CANCELLED); with ``signal_name`` (``TERM``) ``scancel --signal=TERM JOB.STEP`` only signals its tasks."""
        argv = ['scancel'] + (['--signal=%s' % signal_name] if signal_name else []) + ['%s.%s' % (job_id, step_id)]
        rc, out, err = self.run(argv)
        if rc != 0:
            raise SrunError('%s failed (rc %d): %s' % (' '.join(argv), rc, (err or out).strip()))


def spawn_srun(argv, output_path, env):
    """Start the srun client in its own session (an interrupted controller does not kill the step), output
    appended to ``output_path`` (0600); returns its pid."""
    with open(os.devnull, 'rb') as devnull:
        with os.fdopen(os.open(output_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), 'ab') as out:
            proc = subprocess.Popen(argv, stdin=devnull, stdout=out, stderr=subprocess.STDOUT, close_fds=True,
                                    start_new_session=True, env=env)
    return proc


def start_step(params, slurm=None, spawn=spawn_srun):
    """Start the step; returns job_id, step_id, step_name, pid, argv (without the task script), output."""
    slurm = slurm or Slurm()
    secrets = params.get('secret_env') or {}
    argv = build_argv(params['job_id'], params['run_id'], params['nodes'], params.get('wait_seconds') or 0,
                      srun=params.get('srun') or 'srun', secret_names=sorted(secrets),
                      extra_args=params.get('srun_args') or [])
    name = step_name(params['run_id'])
    output = params['output']
    env = dict(os.environ, **dict((k, str(v)) for k, v in secrets.items()))
    for key in [k for k in env if k.startswith('SLURM_') and k != 'SLURM_CONF']:
        del env[key]  # the step's options come from argv alone (--jobid decides), not from a shell's leftovers
    proc = spawn(argv, output, env)
    step_id = slurm.find_step(params['job_id'], name, alive=lambda: proc.poll() is None)
    return {'job_id': str(params['job_id']), 'step_id': step_id, 'step_name': name, 'pid': proc.pid,
            'argv': argv[:-3] + ['/bin/sh', '-c', '<task script>', argv[-1]], 'task_script': argv[-2],
            'output': output, 'started_at': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}
