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
import signal
import subprocess
import time

from ansible_collections.trainops.multinode.plugins.module_utils._outcomes import STATUS_LOST
from ansible_collections.trainops.multinode.plugins.module_utils._proc import System, is_alive
from ansible_collections.trainops.multinode.plugins.module_utils._run_records import user_name
from ansible_collections.trainops.multinode.plugins.module_utils._supervisor import (
    CHECKPOINT_SIGNAL_NAMES,
    VISIBLE_DEVICE_NAMES,
    looks_secret,
)

# checked with fullmatch: ``$`` would let a trailing newline through
JOB_ID_RE = re.compile(r'[0-9]+')
NAME_RE = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.@+=-]*')
ENV_NAME_RE = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
STEP_PREFIX = 'trainops-'
CHECKPOINT_TIMER = 'trainops-checkpoint-timer'
"""$0 of the controller's checkpoint timer (``sleep`` then ``scancel --signal=SIG JOB.STEP``, see :func:`start_step`)."""
CHECKPOINT_SIGNALS = CHECKPOINT_SIGNAL_NAMES
"""The signals a run's checkpoint signal may be (the supervisor's list, plugins/module_utils/_supervisor.py)."""
START_TIMEOUT = 30
"""Seconds a step may take to be created (trainops_srun_start_timeout): ``srun --immediate`` gives up then, and a
client still running a little later (:data:`CLIENT_GRACE`) is ended, so that nothing starts afterwards."""
CLIENT_GRACE = 10.0
"""Seconds beyond the start timeout the srun client has to give up by itself (--immediate) before it is ended."""
ENDED_LOOKUP = 5.0
"""Seconds the step is still looked for (squeue, then sacct, which lags) once the srun client has ended."""
INT_PAUSE = 0.3
"""Seconds between the two SIGINTs that make srun abort (one only reports the tasks' state; two within one second
end them; a step still pending is given up at the first)."""
CLIENT_WAIT = 10.0
"""Seconds the srun client has to exit after SIGINT (then SIGKILL, and as long again)."""
CLIENT_ENV_PREFIXES = ('SLURM_', 'SRUN_')
"""Variables of the controller's environment that srun would read as options (SLURM_CPUS_PER_TASK and
SLURM_TRES_PER_TASK of a ``salloc -c`` in 23.11, which imply --exact; SRUN_CPUS_PER_TASK in 22.05; SLURM_GPUS_PER_TASK,
SLURM_CPU_BIND, SLURM_EXACT, ...): none go to the srun client, whose options are its argv alone. SLURM_CONF stays."""


class SrunError(Exception):
    """Raised for anything the module reports with ``fail_json``."""

    def __init__(self, msg, **details):
        super(SrunError, self).__init__(msg)
        self.msg = msg
        self.details = details


class StepNotFound(SrunError):
    """The step was not created (yet): neither squeue nor sacct shows it."""


def step_name(run_id):
    return STEP_PREFIX + run_id


def check_nodes(nodes):
    """``nodes``: [{name, rank, python, supervisor, job}] in allocation order, ranks 0..N-1."""
    if not nodes:
        raise SrunError('No nodes for the step.')
    for index, node in enumerate(nodes):
        missing = [key for key in ('name', 'python', 'supervisor', 'job') if not node.get(key)]
        if missing:
            raise SrunError('Node %s has no %s for the step.' % (node.get('name', index), ', '.join(missing)))
        if not NAME_RE.fullmatch(node['name']):
            raise SrunError('%r is not a Slurm node name.' % (node['name'], ))
        if int(node.get('rank', -1)) != index:
            raise SrunError('Node %s has rank %s but is number %d of the allocation order.' % (
                node['name'], node.get('rank'), index))


def task_script(nodes):
    """The shell program every task of the step runs: its node's supervisor, in the foreground, by exec.

    Variables are expanded by the task's own shell on its node (the program is one argument of srun). The shell has
    Slurm's environment only (--export=NONE): the interpreter is an absolute path, and the environment torchrun gets
    (PATH included) is the node's login environment that job.json records (_supervisor.rank_environment).
    """
    lines = ['case "$SLURMD_NODENAME" in']
    for node in nodes:
        command = ' '.join(shlex.quote(word) for word in (node['python'], node['supervisor'], '--foreground', node['job']))
        lines.append('  %s)' % shlex.quote(node['name']))
        lines.append('    rank=%d' % int(node['rank']))
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


def build_argv(job_id, run_id, nodes, wait_seconds, srun='srun', secret_names=(), extra_args=(),
               start_timeout=START_TIMEOUT):
    """The srun command line of the step (nodes in allocation order, one task each).

    CPUs: no -c (which implies --exact), so the step gets every CPU the job holds on each of its nodes (srun's
    default without --exact), and ``--cpu-bind=none``, so that task/affinity does not pin the one task per node (and
    torchrun and every rank, which inherit its mask) to one CPU; a task/cgroup cpuset still confines it to the job's
    CPUs. GPUs: no --gres, so the step gets every GPU the job holds on its nodes (srun's default) and Slurm sets
    CUDA_VISIBLE_DEVICES (or ROCR_...) for the task. ``--immediate=<start_timeout>``: srun gives up creating the
    step when the nodes stay busy that long, instead of retrying for ever. ``extra_args`` come last: they may
    override any of these (``--overlap``, ``--cpu-bind=...``).
    """
    if not JOB_ID_RE.fullmatch(str(job_id or '')):
        raise SrunError('%r is not a Slurm job id (SLURM_JOB_ID).' % (job_id, ))
    check_nodes(nodes)
    if int(wait_seconds) < 0:
        raise SrunError('wait_seconds must be >= 0')
    if int(start_timeout) < 1:
        raise SrunError('start_timeout must be >= 1 second, got %s' % (start_timeout, ))
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
            '--cpu-bind=none', '--immediate=%d' % int(start_timeout),
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


def parse_duration(text):
    """Seconds of a duration as squeue prints one (``M:SS``, ``H:MM:SS``, ``D-HH:MM:SS``); None for ``UNLIMITED``,
    ``NOT_SET``, ``INVALID`` or anything else."""
    match = re.fullmatch(r'(?:(\d+)-)?(?:(\d+):)?(\d+):(\d{2})', (text or '').strip())
    if not match:
        return None
    days, hours, minutes, seconds = (int(group or 0) for group in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def parse_job_state(text, job_id):
    """``sacct --jobs JOB -X --parsable2 --noheader --format JobID,State,ExitCode`` -> ``{'state', 'exit_code'}`` of the
    job itself (``CANCELLED by 0`` -> ``CANCELLED``), None when sacct does not list it."""
    for line in text.splitlines():
        fields = line.strip().split('|')
        if len(fields) >= 3 and fields[0] == str(job_id):
            return {'state': fields[1].split()[0] if fields[1] else '', 'exit_code': fields[2]}
    return None


STEP_LINGER = 120
"""Seconds a stopped step task's supervisor waits for the step's cancel after writing exit.json (job.json
``step_linger``): the step then ends CANCELLED, not FAILED by the task's exit code."""

# --- the ranks' environment in a step ---------------------------------------------------------------
#
# Over SSH the supervisor is started by the torchrun module in the node's login session (the environment the
# preflight checked) and torchrun inherits it. A Slurm step's task (``srun --export=NONE``) has only what Slurm set;
# so state=prepared records the login session's environment in job.json (``login_env``, the run record, 0600) and
# the supervisor rebuilds it (_supervisor.rank_environment): :func:`login_environment` decides what is recorded,
# job.json's ``task_env`` (:data:`TASK_ENV`) what the supervisor takes from the step instead.

STEP_ENV_PREFIXES = ('SLURM', 'PMI_', 'PMIX_')
"""Variables that describe the Slurm step a task runs in: under srun they come from the step (slurmstepd), never
from the recorded login session (where an allocation's shell may have left others)."""
STEP_ENV_NAMES = VISIBLE_DEVICE_NAMES
"""The accelerators Slurm gave the step (its GRES plugins set these): from the step only, as the prefixes above."""
TASK_ENV = {'prefixes': list(STEP_ENV_PREFIXES), 'names': list(STEP_ENV_NAMES)}
"""job.json ``task_env``: the variables the supervisor takes from the step's task rather than from ``login_env``."""
SESSION_ENV_PREFIXES = ('SSH_', )
SESSION_ENV_NAMES = ('_', 'PWD', 'OLDPWD', 'SHLVL')
"""What belongs to the SSH session that ran the module (its agent socket, its connection, its shell), not recorded."""
ANSIBALLZ_PATHS = ('/ansible_modlib.zip', '/debug_dir')
"""PYTHONPATH entries an Ansible module runner may have added (as AnsibleModule.run_command drops them)."""

PIDS_RECORD = {'key': 'slurm', 'vars': [['job_id', 'SLURM_JOB_ID'], ['step_id', 'SLURM_STEP_ID'],
                                        ['node', 'SLURMD_NODENAME'], ['task', 'SLURM_PROCID']],
               'required': ['SLURM_JOB_ID', 'SLURM_STEP_ID']}
"""job.json ``launcher_pids``: what pids.json's ``slurm`` records of the step a task runs in, from the variables
slurmstepd sets for it (_supervisor.launcher_record; None outside a step)."""


def step_owned(name):
    """Whether ``name`` is one of the variables a Slurm step sets for its tasks (it comes from the step alone)."""
    return name.startswith(STEP_ENV_PREFIXES) or name in STEP_ENV_NAMES


def login_environment(environ, secret_names=()):
    """``(recorded, omitted)``: what job.json records of the login session's environment ``environ`` for a Slurm
    step's ranks, and the names left out because they look like secrets (_supervisor.looks_secret). Step-owned and
    session variables, and ``secret_names`` (trainops_secret_env's, whose values reach the ranks by name only), are
    left out unlisted."""
    recorded, omitted = {}, []
    for name, value in sorted(environ.items()):
        if step_owned(name) or name.startswith(SESSION_ENV_PREFIXES) or name in SESSION_ENV_NAMES:
            continue
        if name in secret_names:
            continue  # the ranks get its value from the step (srun --export=NAME), never from a file
        if looks_secret(name):
            omitted.append(name)
            continue
        if name == 'PYTHONPATH':
            value = ':'.join(entry for entry in value.split(':') if not entry.endswith(ANSIBALLZ_PATHS))
            if not value:
                continue
        recorded[name] = value
    return recorded, omitted


def spec_fields(environ, secret_names):
    """What job.json of a run prepared for a Slurm step records (the torchrun module's state=prepared on the node,
    ``environ`` its environment there): the launcher, how long a stopped task waits for the step's cancel, the login
    environment (not part of the fingerprint: it is where the run starts, not what) and what the supervisor takes
    from the step's task instead, and what pids.json records of the step."""
    login_env, omitted = login_environment(environ, secret_names)
    return {'launcher': 'srun', 'step_linger': STEP_LINGER, 'login_env': login_env, 'login_env_omitted': omitted,
            'task_env': TASK_ENV, 'launcher_pids': PIDS_RECORD}


def launch_problems(params, integer_rule):
    """What launcher=srun needs of the launch parameters (_launch_params.launch_problems): an allocation, and the
    ranks on the host; ``integer_rule`` checks trainops_srun_start_timeout."""
    problems = []
    if not str(params.get('slurm_job_id') or '').isdigit():
        problems.append('launcher=srun: not inside a Slurm allocation (SLURM_JOB_ID is not set, and the inventory sets no '
                        'trainops_slurm_job_id): run the playbook in the salloc shell or batch script that holds the '
                        'nodes, or use launcher=ssh')
    if params.get('runtime') == 'container':
        problems.append('launcher=srun with runtime=container: a Slurm step cannot start the ranks in the node\'s '
                        'training container; use launcher=ssh for containers, or runtime=host')
    problems.append(integer_rule(dict({'srun_start_timeout': START_TIMEOUT}, **params), 'srun_start_timeout',
                                 'trainops_srun_start_timeout', 'seconds Slurm has to create the step', 60))
    return [problem for problem in problems if problem]


def run_record(run_id, views):
    """The run's launcher record (_launchers.run_launcher, filter run_launcher) for a Slurm step's run, from the
    ``launcher`` views of its nodes (``views``, the run ``run_id``, each with ``owner_uid``: the owner of the node's run
    directory): the step the nodes' supervisors recorded from inside it (``step`` None when no node has run in the step
    yet) and the run's owner. Nodes that name different steps or owners contradict each other: the record is
    ``refused`` (a message), with no step, and never raises, so that a stop still stops the nodes' own torchrun."""
    steps = sorted(set((str(view['job_id']), str(view['step_id'])) for view in views
                       if view.get('job_id') and view.get('step_id')))
    owners = sorted(set(view.get('owner_uid') for view in views if view.get('job_id') and view.get('step_id')),
                    key=str)
    refused = None
    if len(steps) > 1:
        refused = ('The nodes of run %s recorded different Slurm steps (%s): their records contradict each other.'
                   % (run_id, ', '.join('%s.%s' % step for step in steps)))
    elif len(owners) > 1 or (owners and not valid_uid(owners[0])):
        refused = ('The run directories of run %s on its nodes belong to different users or to none (%s): whose '
                   'Slurm step it is cannot be told.' % (run_id, ', '.join(str(owner) for owner in owners)))
    job_id, step_id = steps[0] if steps and not refused else (None, None)
    return {'name': 'srun', 'run_id': run_id, 'job_id': job_id, 'step_id': step_id,
            'step': '%s.%s' % (job_id, step_id) if job_id else None, 'step_name': step_name(run_id),
            'owner_uid': owners[0] if owners and not refused else None, 'refused': refused}


def valid_uid(uid):
    """Whether ``uid`` (a node's answer) is a uid: an int >= 0, never a bool or a string."""
    return isinstance(uid, int) and not isinstance(uid, bool) and uid >= 0


def launcher_view(pids):
    """The ``launcher`` of a Slurm step's run in the torchrun module's job view: ``{'name': 'srun', 'job_id',
    'step_id', 'step'}`` as its supervisor recorded them from inside the step (pids.json ``slurm``, see
    :data:`PIDS_RECORD`; ``None`` while the step has not run it yet)."""
    step = (pids or {}).get(PIDS_RECORD['key']) or {}
    job_id, step_id = step.get('job_id'), step.get('step_id')
    return {'name': 'srun', 'job_id': job_id, 'step_id': step_id,
            'step': '%s.%s' % (job_id, step_id) if job_id and step_id else None}


def ended_by_step(job):
    """Whether a node's run of a Slurm step (launcher=srun; ``job`` as the torchrun module returns it) was ended by
    Slurm rather than by itself: no stop was asked for (no stop record), it did not succeed, and its supervisor was
    killed (SIGKILL cannot be caught: the run is ``lost``, without exit.json) or received a signal (exit.json's
    ``signals``). That is how slurmstepd ends the step's other tasks when one exits non-zero (``--kill-on-bad-exit``);
    which node that was is for the judgment (plugins/module_utils/_judgment.py) and the wait to find out."""
    job = job or {}
    if (job.get('launcher') or {}).get('name') != 'srun' or job.get('stop') or job.get('exit_code') == 0:
        return False
    return job.get('status') == STATUS_LOST or bool(job.get('supervisor_signals'))


def step_detail(job, cause):
    """The line that says a node was ended by the step because of ``cause`` (``lab-node03 failed (...)``)."""
    step = (job.get('launcher') or {}).get('step')
    return 'ended by Slurm%s (srun --kill-on-bad-exit) because %s' % (' with step %s' % step if step else '', cause)


def slurm_time_limit(slurm, results):
    """Whether Slurm ended a job launched as one step at a time limit, from what the controller asked Slurm after the
    end (``slurm``: ``{job_id, step_id, step: {state, source}, job: {state, source}}``, the srun_step module's query) -
    never from what the nodes wrote (``results``: node -> final job view). Returns ``{'by': 'step'|'job', 'source',
    'detail'}`` or None:

    - the step's sacct state ``TIMEOUT`` (its own limit, ``srun --time``): Slurm says so, whatever the nodes did;
    - the job's sacct state ``TIMEOUT`` (the allocation's limit): only when no node's run failed on its own (a run
      that ended with no signal from Slurm and no stop), since the job may have reached its limit long after the
      step ended.

    Without an answer from sacct (no accounting) it is None: slurmstepd's ``DUE TO TIME LIMIT`` line reaches the srun
    client's output through the task's own output stream (``0: slurmstepd-lab-node01: error: *** STEP 14.0 ...``),
    where a rank can print the same text, so ``srun.log`` is never taken for it.
    """
    slurm = slurm or {}
    job_id, step_id = slurm.get('job_id'), slurm.get('step_id')
    if not job_id or not step_id:
        return None
    step = slurm.get('step') or {}
    job = slurm.get('job') or {}
    name = '%s.%s' % (job_id, step_id)
    if step.get('state') == 'TIMEOUT' and step.get('source') == 'sacct':
        return {'by': 'step', 'source': 'sacct',
                'detail': 'Slurm ended step %s at its time limit (sacct: TIMEOUT)' % name}
    jobs = dict((node, job_ or {}) for node, job_ in (results or {}).items())
    own = [node for node, job_ in jobs.items()
           if job_.get('exit_code') != 0 and not job_.get('stop') and not ended_by_step(job_)]
    if own:
        return None
    if job.get('state') == 'TIMEOUT' and job.get('source') == 'sacct':
        return {'by': 'job', 'source': 'sacct',
                'detail': 'Slurm ended job %s, and step %s with it, at its time limit (sacct: TIMEOUT)' % (job_id, name)}
    return None


class Slurm(object):
    """The Slurm client commands the launcher uses (squeue, sacct, scancel), through one runner."""

    def __init__(self, system=None, env=None):
        self.system = system or System()
        self.env = env

    def run(self, argv, timeout=60, user=None):
        if user is None:
            return self.system.run(argv, timeout=timeout)
        return self.system.run(argv, timeout=timeout, user=user)

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

    def find_step(self, job_id, name, alive=None, timeout=START_TIMEOUT + CLIENT_GRACE):
        """The step id of the step ``name`` of ``job_id``, looked up in squeue, then sacct, until ``timeout``.

        ``alive`` (callable) says whether the srun client still runs; once it has ended, the step is looked for
        :data:`ENDED_LOOKUP` seconds more (sacct lags), then the lookup gives up. Raises :class:`StepNotFound`.
        """
        deadline = self.system.monotonic() + timeout
        ended_at = None
        while True:
            step, err = self.squeue_step(job_id, name)
            if step is not None:
                return step
            record, err2 = self.sacct_step(job_id, name=name)
            if record is not None:
                return record['step_id']
            errors = [e for e in (err, err2) if e]
            now = self.system.monotonic()
            if ended_at is None and alive is not None and not alive():
                ended_at = now
            if now >= deadline or (ended_at is not None and now >= ended_at + ENDED_LOOKUP):
                raise StepNotFound('Step %s of job %s is neither in squeue nor in sacct%s.' % (
                    name, job_id, (': ' + '; '.join(errors)) if errors else ''), client_ended=ended_at is not None)
            self.system.sleep(0.5)

    def step_state(self, job_id, step_id):
        """``{'state': RUNNING|COMPLETED|FAILED|CANCELLED|..., 'exit_code': 'N:S' or None, 'name': the step's name
        as Slurm knows it (None when neither squeue nor sacct shows the step), 'source': ...}``, and while squeue lists
        the step whom it runs as (``uid``, ``user``)."""
        rc, out, err = self.run(['squeue', '--steps', '%s.%s' % (job_id, step_id), '--noheader', '--format',
                                 '%i|%U|%u|%j'])
        fields = out.strip().splitlines()[0].split('|', 3) if rc == 0 and out.strip() else []
        if len(fields) == 4 and fields[1].isdigit():
            # the name last: it is the step's choice and may hold a '|'
            return {'state': 'RUNNING', 'exit_code': None, 'name': fields[3], 'source': 'squeue',
                    'uid': int(fields[1]), 'user': fields[2]}
        record, err2 = self.sacct_step(job_id, step_id=step_id)
        if record is not None:
            return {'state': record['state'], 'exit_code': record['exit_code'], 'name': record['name'], 'source': 'sacct'}
        return {'state': 'UNKNOWN', 'exit_code': None, 'name': None, 'source': None,
                'error': '; '.join(e for e in (err if rc != 0 else '', err2) if e) or 'not in squeue or sacct'}

    def step_end(self, job_id, step_id, seconds, step=None):
        """:meth:`step_state` once the step has left squeue (it ended, and sacct has its final state), or as it stands
        after ``seconds``."""
        deadline = self.system.monotonic() + seconds
        step = step or self.step_state(job_id, step_id)
        while step['source'] == 'squeue' and self.system.monotonic() < deadline:
            self.system.sleep(1.0)
            step = self.step_state(job_id, step_id)
        return step

    def job_state(self, job_id):
        """The job's (allocation's) own state in sacct: ``{'state': RUNNING|COMPLETED|TIMEOUT|CANCELLED|..., 'exit_code',
        'source': 'sacct'}``, or state ``UNKNOWN`` with the ``error`` when sacct does not say."""
        rc, out, err = self.run(['sacct', '--jobs', str(job_id), '-X', '--parsable2', '--noheader',
                                 '--format', 'JobID,State,ExitCode'])
        record = parse_job_state(out, job_id) if rc == 0 else None
        if record is None:
            return {'state': 'UNKNOWN', 'exit_code': None, 'source': None,
                    'error': (err.strip() if rc != 0 else '') or 'job %s is not in sacct' % job_id}
        return dict(record, source='sacct')

    def time_left(self, job_id, step_id):
        """Seconds until Slurm ends step ``job_id.step_id`` for a time limit: the earlier of the step's own (``srun
        --time``; squeue's limit less the time used) and the job's (squeue's time left). Returns ``(seconds, why)``:
        seconds None when neither has a limit (or squeue cannot say), ``why`` names the limit that applies."""
        limits = []
        rc, out, err = self.run(['squeue', '--steps', '%s.%s' % (job_id, step_id), '--noheader', '--format', '%l|%M'])
        fields = out.strip().splitlines()[0].split('|') if rc == 0 and out.strip() else []
        if len(fields) == 2 and parse_duration(fields[0]) is not None and parse_duration(fields[1]) is not None:
            limits.append((max(0, parse_duration(fields[0]) - parse_duration(fields[1])),
                           'the time limit of step %s.%s (%s)' % (job_id, step_id, fields[0])))
        rc, out, err2 = self.run(['squeue', '--jobs', str(job_id), '--noheader', '--format', '%L'])
        left = parse_duration(out.strip().splitlines()[0]) if rc == 0 and out.strip() else None
        if left is not None:
            limits.append((left, 'the time limit of job %s' % job_id))
        if not limits:
            return None, 'neither step %s.%s nor job %s has a time limit%s' % (
                job_id, step_id, job_id, (' (%s)' % '; '.join(e.strip() for e in (err, err2) if e.strip()))
                if (err or err2).strip() else '')
        return min(limits)

    def job_owner(self, job_id):
        """Whose job ``job_id`` is: ``{'uid', 'name', 'source'}`` from squeue (a job that ended: sacct), or ``uid``
        None with the ``error`` when neither says (:func:`parse_job_owner`)."""
        errors = []
        for source, argv in (('squeue', ['squeue', '--jobs', str(job_id), '--noheader', '--format', '%i|%U|%u']),
                             ('sacct', ['sacct', '--jobs', str(job_id), '-X', '--noheader', '--parsable2',
                                        '--format', 'JobID,UID,User'])):
            rc, out, err = self.run(argv)
            record = parse_job_owner(out, job_id) if rc == 0 else None
            if record is not None:
                return dict(record, source=source)
            if err.strip():
                errors.append(err.strip())
        return {'uid': None, 'name': None, 'source': None, 'error': '; '.join(errors) or 'not in squeue or sacct'}

    def cancel(self, job_id, step_id, signal_name=None, owner_uid=None):
        """``scancel JOB.STEP`` cancels the step (Slurm 22.05 sends its tasks SIGKILL at once, and accounts the
        step CANCELLED); with ``signal_name`` (``TERM``) ``scancel --signal=TERM JOB.STEP`` only signals its tasks.
        Root runs it as the run's owner ``owner_uid`` (:func:`scancel_user`)."""
        argv = ['scancel'] + (['--signal=%s' % signal_name] if signal_name else []) + ['%s.%s' % (job_id, step_id)]
        uid = scancel_user(self.system.euid(), owner_uid)
        rc, out, err = self.run(argv, user=uid)
        if rc != 0:
            as_user = ' (as %s)' % user_name(uid) if uid is not None else ''
            raise SrunError('%s%s failed (rc %d): %s' % (' '.join(argv), as_user, rc, (err or out).strip()))


def parse_job_owner(text, job_id):
    """``squeue --jobs JOB --noheader --format %i|%U|%u`` (or ``sacct --jobs JOB -X --noheader --parsable2 --format
    JobID,UID,User``) -> ``{'uid', 'name'}`` of the job's user, None when it is not listed. Neither output has the job's
    name, which its user chooses: ``scontrol show job --oneliner`` prints ``JobName=x UserId=root(0) UserId=alice(1001)``
    for a job named ``x UserId=root(0)``."""
    for line in text.splitlines():
        fields = line.strip().split('|')
        if len(fields) == 3 and fields[0] == str(job_id) and fields[1].isdigit():
            return {'uid': int(fields[1]), 'name': fields[2]}
    return None


def slurm_user(record):
    """``uid 1001 (alice)`` of a Slurm answer ``{'uid', 'name'}``."""
    return 'uid %d (%s)' % (record['uid'], record['name']) if record.get('name') else 'uid %d' % record['uid']


def step_refusal(job_id, step_id, run_id, owner_uid, step, job_owner):
    """Why step ``job_id.step_id`` must not be signalled, cancelled or taken for run ``run_id``'s, else None.

    The step id comes from the nodes' records (pids.json) and the launcher from job.json, which the job's own code can
    rewrite; its run id is the job's choice too. What it cannot forge: the owner of its run directory on the nodes
    (``owner_uid``) and what Slurm says. The step is the run's only when Slurm's job ``job_owner`` (:meth:`Slurm.job_owner`)
    and the step itself (``step``: :meth:`Slurm.step_state`, ``uid`` while squeue lists it) belong to that owner, and
    Slurm names the step ``trainops-<run_id>``."""
    where = 'Step %s.%s is not run %s\'s' % (job_id, step_id, run_id)
    if not valid_uid(owner_uid):
        found = 'its nodes\' records name no owner of its run directory (%r)' % (owner_uid, )
    elif job_owner.get('uid') is None:
        found = 'Slurm does not say whose job %s is (%s)' % (job_id, job_owner.get('error') or 'not in squeue or sacct')
    elif job_owner['uid'] != owner_uid:
        found = 'Slurm job %s belongs to %s, but run %s belongs to %s (the owner of its run directory on the nodes)' % (
            job_id, slurm_user(job_owner), run_id, user_name(owner_uid))
    elif step.get('uid') is not None and step['uid'] != owner_uid:
        found = 'Slurm runs that step as %s, but run %s belongs to %s (the owner of its run directory on the nodes)' % (
            slurm_user({'uid': step['uid'], 'name': step.get('user')}), run_id, user_name(owner_uid))
    elif step.get('name') == step_name(run_id):
        return None
    elif step.get('name') is None:
        found = 'Slurm does not show that step (%s)' % (step.get('error') or 'not in squeue or sacct')
    else:
        found = 'Slurm names that step %r, not %s' % (step['name'], step_name(run_id))
    return '%s: %s. Its records (pids.json, job.json) are not trusted: nothing was signalled or cancelled through Slurm.' % (
        where, found)


def scancel_user(euid, owner_uid):
    """Whom scancel runs as: the run's owner when root acts on another user's run (Slurm then lets it cancel only
    what that user may), else None (the invoking user)."""
    return owner_uid if euid == 0 and valid_uid(owner_uid) and owner_uid != 0 else None


def spawn_srun(argv, output_path, env):
    """Start the srun client in its own session (an interrupted controller does not kill the step), output
    appended to ``output_path`` (0600); returns its pid."""
    with open(os.devnull, 'rb') as devnull:
        with os.fdopen(os.open(output_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), 'ab') as out:
            proc = subprocess.Popen(argv, stdin=devnull, stdout=out, stderr=subprocess.STDOUT, close_fds=True,
                                    start_new_session=True, env=env)
    return proc


def spawn_checkpoint_timer(job_id, step_id, signal_name, delay, output_path, env):
    """Start, in a session of its own on the controller (as srun), ``sleep DELAY`` then ``scancel --signal=SIG
    JOB.STEP``: Slurm sends SIG to every process of the step on every node, as it does for an allocation's
    ``--signal=SIG@N``. Output appended to ``output_path``; returns its pid. A step that ended before is not
    signalled (scancel only says that it is gone)."""
    argv = ['/bin/sh', '-c', 'sleep "$1" && exec scancel --signal="$2" "$3"', CHECKPOINT_TIMER, str(int(delay)),
            signal_name, '%s.%s' % (job_id, step_id)]
    with open(os.devnull, 'rb') as devnull:
        with os.fdopen(os.open(output_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), 'ab') as out:
            proc = subprocess.Popen(argv, stdin=devnull, stdout=out, stderr=subprocess.STDOUT, close_fds=True,
                                    start_new_session=True, env=env)
    return proc.pid


def schedule_checkpoint_signal(slurm, job_id, step_id, signal_name, seconds, output_path, env,
                               spawn=spawn_checkpoint_timer):
    """The checkpoint signal ``seconds`` before Slurm ends the step for a time limit (:meth:`Slurm.time_left`), sent
    through Slurm (``scancel --signal``) by a timer on the controller: ``srun --signal`` does not apply to a step
    (Slurm keeps a warning signal for job allocations only). Returns what the manifest records: ``{signal,
    seconds_before_end, limit, time_left, fires_in, fires_at, pid}``, ``pid`` None (and ``limit`` saying why) when
    the step has no time limit. Less time left than ``seconds``: the signal goes at once."""
    if signal_name not in CHECKPOINT_SIGNALS:
        raise SrunError('%r is not a checkpoint signal (%s).' % (signal_name, ', '.join(CHECKPOINT_SIGNALS)))
    left, limit = slurm.time_left(job_id, step_id)
    record = {'signal': signal_name, 'seconds_before_end': int(seconds), 'limit': limit, 'time_left': left,
              'fires_in': None, 'fires_at': None, 'pid': None}
    if left is None:
        return record
    delay = max(0, left - int(seconds))
    record.update(fires_in=delay, fires_at=time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(time.time() + delay)),
                  pid=spawn(job_id, step_id, signal_name, delay, output_path, env))
    return record


def client_env(environ, secrets):
    """The srun client's environment: the controller's, less what srun would read as options
    (:data:`CLIENT_ENV_PREFIXES`), plus the secrets it exports by name."""
    env = dict((key, value) for key, value in environ.items()
               if key == 'SLURM_CONF' or not key.startswith(CLIENT_ENV_PREFIXES))
    env.update((key, str(value)) for key, value in secrets.items())
    return env


def is_step_client(argv, job_id, name):
    """Whether the command line ``argv`` (/proc) is the srun client of step ``name`` of job ``job_id`` as
    :func:`build_argv` wrote it: pids come from records, and a reused pid must never be signalled."""
    argv = argv or []
    return '--jobid=%s' % job_id in argv and '--job-name=%s' % name in argv


def end_client(system, pid, job_id, name, proc=None):
    """End the srun client ``pid`` of step ``name`` (in a session of its own, so its process group is ``pid``):
    SIGINT twice (srun gives up a pending step at the first, aborts a running one at the second), then SIGKILL
    when it is still there after :data:`CLIENT_WAIT` seconds. Only a process whose command line is that client
    is signalled (:func:`is_step_client`). ``proc``: its Popen when this process started it (then it is reaped).

    Returns ``{'pid', 'found', 'signals'}`` (``found`` False: no such client ran, nothing was signalled)."""
    result = {'pid': pid, 'found': False, 'signals': []}
    info = system.read_proc_stat(pid) if pid else None
    if not is_alive(info) or not is_step_client(system.read_proc_cmdline(pid), job_id, name):
        if proc is not None:
            proc.poll()
        return result
    result['found'] = True
    start_time = info.start_time
    # its own session's leader (spawn_srun): the group takes whatever srun forked too
    send = system.killpg if info.pgid == pid else system.kill

    def gone(seconds):
        deadline = system.monotonic() + seconds
        while True:
            if proc is not None:
                proc.poll()  # reap it: a zombie child counts as gone
            if not is_alive(system.read_proc_stat(pid), start_time):
                return True
            if system.monotonic() >= deadline:
                return False
            system.sleep(0.1)

    for sig, wait in ((signal.SIGINT, INT_PAUSE), (signal.SIGINT, CLIENT_WAIT), (signal.SIGKILL, CLIENT_WAIT)):
        send(pid, sig)
        result['signals'].append('SIGINT' if sig == signal.SIGINT else 'SIGKILL')
        if gone(wait):
            return result
    raise SrunError('The srun client (pid %d) of step %s is still there after SIGKILL.' % (pid, name))


def srun_says(output, offset, lines=4):
    """The last ``lines`` lines srun wrote (``srun: ...``) to ``output`` from ``offset`` on: why a step did not start
    (``Job 42 step creation temporarily disabled, retrying (Requested nodes are busy)``)."""
    try:
        with open(output, 'rb') as handle:
            handle.seek(offset)
            text = handle.read(1024 * 1024).decode('utf-8', 'replace')
    except (IOError, OSError):
        return []
    said = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith('srun:') and line not in said:
            said.append(line)
    return said[-lines:]


def abandon_step(slurm, job_id, name, pid=None, proc=None):
    """Make sure step ``name`` of ``job_id`` neither runs nor starts later: end its srun client (:func:`end_client`),
    then cancel the step if Slurm shows one of that name (squeue; sacct, which lags, for one it shows running).

    Returns ``{'client': end_client's result or None, 'step_id', 'step_state', 'cancelled': bool}``."""
    client = end_client(slurm.system, pid, job_id, name, proc=proc) if pid else None
    step_id, _err = slurm.squeue_step(job_id, name)
    state = 'RUNNING' if step_id is not None else None
    if step_id is None:
        record, _err = slurm.sacct_step(job_id, name=name)
        if record is not None:
            step_id, state = record['step_id'], record['state']
    cancelled = False
    if step_id is not None and state in ('RUNNING', 'PENDING', 'REQUEUED', 'RESIZING', 'SUSPENDED'):
        slurm.cancel(job_id, step_id)
        cancelled = True
    return {'client': client, 'step_id': step_id, 'step_state': state, 'cancelled': cancelled}


def abandoned_text(job_id, name, abandoned, output):
    """What :func:`abandon_step` did, in words."""
    client = abandoned['client']
    if client and client['found']:
        words = ['the srun client (pid %d) was ended (%s)' % (client['pid'], ', '.join(client['signals']))]
    else:
        words = ['no srun client of it is left']
    if abandoned['cancelled']:
        words.append('step %s.%s, which Slurm had created meanwhile, was cancelled (scancel)' % (
            job_id, abandoned['step_id']))
    elif abandoned['step_id'] is not None:
        words.append('step %s.%s has ended (%s)' % (job_id, abandoned['step_id'], abandoned['step_state']))
    else:
        words.append('Slurm has no step %s in job %s' % (name, job_id))
    text = '; '.join(words)
    return text[:1].upper() + text[1:] + ', so nothing of it starts later. srun\'s output: %s' % output


def start_step(params, slurm=None, spawn=spawn_srun, spawn_timer=spawn_checkpoint_timer):
    """Start the step; returns job_id, step_id, step_name, pid, argv (without the task script), output, and with
    ``checkpoint_signal`` and ``checkpoint_seconds`` > 0 the timer that sends it (``checkpoint_timer``).

    A step that Slurm does not create within ``start_timeout`` seconds (nodes busy with another step of the job) is
    given up: its client is ended and a step of its name that appeared is cancelled (:func:`abandon_step`), so that
    nothing starts later; the error says what srun said."""
    slurm = slurm or Slurm()
    secrets = params.get('secret_env') or {}
    start_timeout = int(params.get('start_timeout') or START_TIMEOUT)
    argv = build_argv(params['job_id'], params['run_id'], params['nodes'], params.get('wait_seconds') or 0,
                      srun=params.get('srun') or 'srun', secret_names=sorted(secrets),
                      extra_args=params.get('srun_args') or [], start_timeout=start_timeout)
    name = step_name(params['run_id'])
    job_id = str(params['job_id'])
    output = params['output']
    offset = os.path.getsize(output) if os.path.exists(output) else 0
    env = client_env(os.environ, secrets)
    proc = spawn(argv, output, env)
    try:
        step_id = slurm.find_step(job_id, name, alive=lambda: proc.poll() is None,
                                  timeout=start_timeout + CLIENT_GRACE)
    except StepNotFound as exc:
        said = srun_says(output, offset)
        abandoned = abandon_step(slurm, job_id, name, pid=proc.pid, proc=proc)
        why = ('srun ended (exit code %s) without it, having waited at most %d s (srun --immediate, '
               'trainops_srun_start_timeout)' % (proc.returncode, start_timeout) if exc.details.get('client_ended')
               else 'it was not created within %d s (trainops_srun_start_timeout)' % start_timeout)
        raise SrunError('Slurm step %s of job %s did not start: %s%s. %s' % (
            name, job_id, why, (', srun says: ' + ' | '.join(said)) if said else '',
            abandoned_text(job_id, name, abandoned, output)),
            srun_says=said, abandoned=abandoned, job_id=job_id, step_name=name)
    timer = None
    if params.get('checkpoint_signal') and int(params.get('checkpoint_seconds') or 0) > 0:
        timer = schedule_checkpoint_signal(slurm, job_id, step_id, params['checkpoint_signal'],
                                           params['checkpoint_seconds'], output,
                                           dict((k, v) for k, v in env.items() if k not in secrets), spawn=spawn_timer)
    return {'job_id': job_id, 'step_id': step_id, 'step_name': name, 'pid': proc.pid,
            'argv': argv[:-3] + ['/bin/sh', '-c', '<task script>', argv[-1]], 'task_script': argv[-2],
            'output': output, 'start_timeout': start_timeout,
            'started_at': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()), 'checkpoint_timer': timer}


# --- the launcher's lifecycle (module_utils/_launchers.Srun, run by module_utils/_launcher_steps.py) ---------------

UNDO_DETAIL = 'the launch failed before the Slurm step ran on every node'
"""The stop record's detail of a launch undone before its step ran on every node."""


def start_args(ctx):
    """srun_step's ``state=started`` arguments: one step of the allocation runs every node's prepared supervisor, one
    task per node in the launch's order; the Slurm node name is the inventory name (the slurm inventory's), unless
    trainops_slurm_node_name says otherwise. The checkpoint signal goes N s before the step's time limit, through
    Slurm (srun --signal does not apply to a step)."""
    started = [ctx.node_var(node, '__trainops_started') or {} for node in ctx.nodes]
    nodes = [dict(result.get('step_command') or {}, name=ctx.node_var(node, 'trainops_slurm_node_name') or node, rank=rank)
             for rank, (node, result) in enumerate(zip(ctx.nodes, started))]
    args = dict(job_id=ctx.var('__trainops_slurm_job_id'), run_id=ctx.run_id,
                nodes=nodes, wait_seconds=int(ctx.var('trainops_srun_wait')),
                srun_args=ctx.var('trainops_srun_args'), start_timeout=int(ctx.var('trainops_srun_start_timeout')),
                output='%s/srun.log' % ctx.var('__trainops_experiment_dir'), secret_env=ctx.var('trainops_secret_env'),
                checkpoint_seconds=int(ctx.var('trainops_checkpoint_signal_seconds')))
    if ctx.get('trainops_checkpoint_signal'):
        args['checkpoint_signal'] = ctx.var('trainops_checkpoint_signal')
    return args


def start_failure(start, not_running):
    """The launch's failure when the step did not start the supervisor on the nodes ``not_running`` ({node: why})."""
    return ("Slurm step %s.%s (%s) did not start the supervisor on %s within %d s (%s). srun's output: %s" % (
        start.get('job_id'), start.get('step_id'), start.get('step_name'), ', '.join(not_running),
        max(int(start.get('start_timeout') or 0), 60), '; '.join('%s: %s' % item for item in not_running.items()),
        start.get('output')))


def start_record(start):
    """The manifest's ``launcher`` of a Slurm step's launch (srun_step's ``state=started`` result ``start``)."""
    return {'name': 'srun', 'job_id': start.get('job_id'), 'step_id': start.get('step_id'),
            'step': '%s.%s' % (start.get('job_id'), start.get('step_id')), 'step_name': start.get('step_name'),
            'srun_pid': start.get('pid'), 'srun_output': start.get('output'), 'start_timeout': start.get('start_timeout'),
            'argv': start.get('argv'), 'checkpoint_timer': start.get('checkpoint_timer')}


def undo_args(ctx, start):
    """srun_step's ``state=cancelled`` arguments of an undone launch: the step's srun client is ended (by its recorded
    pid, only when /proc shows that client) and a step of the run's name is cancelled, whether or not the launch learnt
    its id."""
    args = dict(state='cancelled', job_id=ctx.var('__trainops_slurm_job_id'), run_id=ctx.run_id)
    if (start or {}).get('pid') is not None:
        args['srun_pid'] = start['pid']
    return args


def undo_facts(ctx, undone):
    """What the undo says for the launch's failure: the cause (a failed run_once task gives its message to the first
    node only: every node names it) and what the undo of the step did (``undone``: srun_step's result)."""
    job_id, run_id = ctx.var('__trainops_slurm_job_id'), ctx.run_id
    undone = undone or {}
    if undone.get('failed'):
        note = ('The undo could not end the step: %s. Check with: squeue --steps --jobs %s, and scancel the step '
                'trainops-%s if it is there.' % (undone.get('msg') or 'unknown error', job_id, run_id))
    elif (undone.get('abandoned') or {}).get('cancelled'):
        note = 'Undone: Slurm step %s.%s cancelled.' % (job_id, undone.get('step_id'))
    else:
        note = ''
    return {'__trainops_launch_cause': ctx.failed_msg, '__trainops_undo_note': note}


def step_args(record, state):
    """srun_step's arguments for the run's step (``record``: _launchers.run_launcher's) with ``state`` (query,
    signalled, cancelled); None when the record names no step or is refused (nothing goes through Slurm)."""
    if record.get('refused') is not None or not record.get('step'):
        return None
    return dict(state=state, job_id=record['job_id'], step_id=record['step_id'], run_id=record['run_id'],
                owner_uid=record['owner_uid'])


def stop_node(ctx, record, stop):
    """A node's stop of a run its step runs: the stop is recorded (why, by whom) without a signal; the step's tasks get
    SIGTERM through Slurm (scancel), and their supervisors stop torchrun. A refused record (not the run's step, or
    contradicting records): the node's own stop by the run's verified pids."""
    if not step_args(record, 'signalled'):
        return stop
    return dict(stop, signal=False, stop_reason='user', checkpoint_seconds=0,
                stop_detail='playbooks/stop.yml from %s on the controller (scancel %s)' % (ctx.user, record['step']))


def status_report(record, answer):
    """``(lines, stats)`` of the step's state as Slurm has it (squeue while it runs, sacct afterwards); a step that is
    not the run's is shown refused, not its state."""
    answer = answer or {}
    refused = record.get('refused') or answer.get('refused')
    step = answer.get('step') or {}
    if refused:
        line = 'Slurm step not shown: %s' % (refused, )
    else:
        line = 'Slurm step %s (%s): %s%s (from %s)' % (
            record.get('step'), record.get('step_name'), step.get('state'),
            (' exit %s' % step['exit_code']) if step.get('exit_code') else '', step.get('source') or '?')
    stats = dict(answer.get('step') or {'state': 'UNKNOWN', 'exit_code': None, 'name': None, 'source': None},
                 job_id=record.get('job_id'), step_id=record.get('step_id'), refused=refused or None)
    return [line], {'trainops_slurm_step': stats}


def end_answer(record, answer):
    """How Slurm ended the step and its job (sacct), for the experiment's judgment: a step that is not the run's, or
    nodes' records that contradict each other, answer ``refused`` and never judge the run."""
    answer = answer or {}
    return {'job_id': record.get('job_id'), 'step_id': record.get('step_id'), 'step': answer.get('step') or {},
            'job': answer.get('job') or {}, 'refused': record.get('refused') or answer.get('refused')}
