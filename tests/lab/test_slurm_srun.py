"""launcher=srun against the lab's real Slurm (root only, docs/slurm.md): the ranks run as one step of the allocation.

One allocation of the 4 nodes (``salloc --no-shell``) is shared by the tests; the playbooks run with the
environment an salloc shell gives (SLURM_JOB_ID, SLURM_JOB_NODELIST, ...), as a user inside salloc would.
"""
import json
import os
import subprocess
import time

import pytest
from ansible_collections.trainops.multinode.plugins.module_utils._hostlist import expand_hostlist

from playbook_runner import REPO, entry_argv, finish, free_port, wait_until
from test_slurm_lab import job_record, slurm, training_processes  # noqa: F401 pylint: disable=unused-import

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.usefixtures('lab_session_lock')]


class Allocation:
    """A held allocation of every lab node and the playbooks run inside it."""

    def __init__(self, slurm_handle, job):  # pylint: disable=redefined-outer-name
        self.slurm = slurm_handle
        self.job = job
        record = job_record(slurm_handle, job)
        self.nodelist = record['NodeList']
        self.nodes = expand_hostlist(self.nodelist)
        self.env = slurm_handle.env(SLURM_JOB_ID=job, SLURM_JOBID=job, SLURM_JOB_NODELIST=self.nodelist,
                                    SLURM_NODELIST=self.nodelist, SLURM_JOB_NUM_NODES=str(len(self.nodes)),
                                    SLURM_NNODES=str(len(self.nodes)),
                                    SLURM_TASKS_PER_NODE='2(x%d)' % len(self.nodes))

    def argv(self, playbook, workdir, extravars):
        return entry_argv(playbook, str(workdir), extravars, inventory=self.slurm.source)

    def run(self, playbook, workdir, extravars, timeout=420):
        argv = self.argv(playbook, workdir, extravars)
        started = time.monotonic()
        proc = subprocess.run(argv, cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout,
                              check=False)
        return finish(proc, argv, started)

    def steps(self):
        """{step name: (step id, State, ExitCode)} of the allocation, from sacct."""
        out = self.slurm.run('sacct', '--jobs', self.job, '--parsable2', '--noheader',
                             '--format', 'JobID,JobName,State,ExitCode').stdout
        found = {}
        for line in out.splitlines():
            job_step, name, state, code = line.split('|')[:4]
            if '.' in job_step:
                found[name] = (job_step.split('.', 1)[1], state.split()[0], code)
        return found


@pytest.fixture(scope='module')
def allocation(slurm):  # pylint: disable=redefined-outer-name
    granted = [line.split()[-1] for line in slurm.run('salloc', '--no-shell', '--nodes', '4', '--job-name',
                                                      'srun-tests').stderr.splitlines()
               if 'Granted job allocation' in line]
    assert granted, 'salloc --no-shell granted no allocation'
    job_id = granted[0]
    slurm.jobs.append(job_id)
    try:
        yield Allocation(slurm, job_id)
    finally:
        slurm.cancel(job_id)


def srun_vars(tmp_path, **extra):
    extravars = {'trainops_experiments_dir': str(tmp_path / 'experiments'), 'master_port': free_port(),
                 'trainops_progress_interval': 5, 'trainops_poll_interval': 1, 'config': 'config/tiny.yaml',
                 'launcher': 'srun', 'nproc': 2}
    extravars.update(extra)
    return extravars


def manifest_of(proc):
    experiment = proc.summary.get('artifact_data', {}).get('trainops_experiment', {})
    with open(os.path.join(experiment['path'], 'manifest.json')) as handle:
        return experiment, json.load(handle)


def test_srun_trains_4_nodes_x_2_ranks_as_one_step_in_allocation_order(allocation, tmp_path):
    proc = allocation.run('playbooks/launch.yml', tmp_path, srun_vars(tmp_path))
    assert proc.returncode == 0, proc.stdout[-6000:]
    experiment, manifest = manifest_of(proc)
    assert experiment['outcome'] == 'succeeded'
    assert manifest['world_size'] == 8 and manifest['summary']['ranks_seen'] == list(range(8))
    launcher = manifest['launcher']
    assert launcher['name'] == 'srun' and launcher['job_id'] == allocation.job
    assert launcher['step_name'] == 'trainops-' + manifest['run_id']
    assert [n['host'] for n in manifest['nodes']] == allocation.nodes
    for index, name in enumerate(allocation.nodes):
        node = allocation.slurm.lab.node(name)
        for local_rank in range(2):
            rank = 2 * index + local_rank
            with open(os.path.join(experiment['path'], 'outputs', 'rank_%02d_env.json' % rank)) as handle:
                seen = json.load(handle)
            # each rank on its node, with that node's own interface, started by Slurm (inside the step)
            assert seen['hostname'] == node['hostname'], (rank, seen['hostname'])
            assert seen['env']['GLOO_SOCKET_IFNAME'] == node['ifname']
    step_id, state, code = wait_until(lambda: allocation.steps().get(launcher['step_name']), 30, what='the step in sacct')
    assert step_id == launcher['step_id']
    assert wait_until(lambda: allocation.steps()[launcher['step_name']][1] == 'COMPLETED', 30), allocation.steps()
    assert code == '0:0' or allocation.steps()[launcher['step_name']][2] == '0:0'


def test_srun_a_failed_rank_ends_the_step_and_the_failure_names_its_node(allocation, tmp_path):
    # global rank 5 = local rank 1 of the third node in allocation order
    proc = allocation.run('playbooks/launch.yml', tmp_path, srun_vars(
        tmp_path, overrides=['debug.fail_rank=5', 'debug.fail_step=3', 'training.epochs=20']))
    assert proc.returncode != 0
    culprit = allocation.nodes[2]
    experiment, manifest = manifest_of(proc)
    assert experiment['outcome'] == 'failed', experiment
    assert manifest['outcome_detail'].startswith('failed on %s' % culprit), manifest['outcome_detail']
    assert culprit in proc.failure_text, proc.failure_text
    name = manifest['launcher']['step_name']
    assert wait_until(lambda: allocation.steps().get(name, (None, 'RUNNING'))[1] not in ('RUNNING', 'COMPLETING'),
                      60), allocation.steps()
    assert allocation.steps()[name][1] == 'FAILED', allocation.steps()
    assert not training_processes(allocation.slurm.lab)


def test_srun_stop_cancels_the_step(allocation, tmp_path):
    extravars = srun_vars(tmp_path, wait=False, overrides=['debug.sleep_per_step_s=0.5', 'training.epochs=50'])
    proc = allocation.run('playbooks/launch.yml', tmp_path, extravars)
    assert proc.returncode == 0, proc.stdout[-6000:]
    (run_id, ) = os.listdir(extravars['trainops_experiments_dir'])
    path = os.path.join(extravars['trainops_experiments_dir'], run_id)
    wait_until(lambda: len(training_processes(allocation.slurm.lab)) == 4, 120, what='ranks on all 4 nodes')
    status = allocation.run('playbooks/status.yml', tmp_path, dict(extravars, run_id=run_id))
    assert status.returncode == 0, status.stdout[-4000:]
    step = status.summary['artifact_data']['trainops_slurm_step']
    assert step['state'] == 'RUNNING' and step['source'] == 'squeue' and step['job_id'] == allocation.job, step
    assert {job['status'] for job in status.summary['artifact_data']['trainops_status'].values()} == {'running'}
    stop = allocation.run('playbooks/stop.yml', tmp_path, dict(extravars, run_id=run_id))
    assert stop.returncode == 0, stop.stdout[-6000:]
    assert 'scancel' not in stop.failure_text
    assert not training_processes(allocation.slurm.lab)
    with open(os.path.join(path, 'manifest.json')) as handle:
        manifest = json.load(handle)
    assert manifest['outcome'] == 'stopped', manifest.get('outcome_detail')
    assert manifest['stop']['reason'] == 'user' and manifest['failed_nodes'] == [], manifest.get('stop')
    assert sorted(os.listdir(os.path.join(path, 'logs'))) == ['node_%d.txt' % r for r in range(4)]
    # each node's supervisor stopped torchrun on the step's SIGTERM and recorded its end before the cancel
    assert {r['status'] for r in manifest['results'].values()} == {'exited'}, manifest['results']
    name = manifest['launcher']['step_name']
    assert wait_until(lambda: allocation.steps().get(name, (None, ''))[1] == 'CANCELLED', 60), allocation.steps()
