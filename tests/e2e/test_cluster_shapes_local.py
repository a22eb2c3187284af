"""End-to-end, on the local default: the cluster shapes that do not need the lab.

* a token passed in ``trainops_secret_env`` (read from the controller's environment, as CI passes
  tokens) reaches every rank and appears nowhere else: experiment directory, node state, Ansible's
  output at ``-vv``, ansible-runner's artifacts and the JSON summary; also when the job fails;
* two nodes whose node root is one directory (a home on NFS): per-node state below it, the
  workspace synced once, launch/status/stop work; the same host name without trainops_node_id is
  refused before anything starts.
"""
import glob
import json
import os
import re
import signal
import stat
import time
import uuid

import pytest

from playbook_runner import free_port, run_playbook

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKEN_VAR = 'TRAINOPS_E2E_HF_TOKEN'
# how a user passes a token: from the controller's environment, never on the command line
SECRET_ENV = {'HF_TOKEN': "{{ lookup('ansible.builtin.env', '%s') }}" % TOKEN_VAR}
OWN_FILES = ('job.json', 'pids.json', 'exit.json', 'node.log', 'supervisor.log', 'supervisor.py', 'env.sh')


class Shape:
    """Node roots, experiments and artifacts of one test under ``root``."""

    def __init__(self, root, shared_root=False):
        self.root = str(root)
        self.nodes = os.path.join(self.root, 'nodes')
        self.experiments = os.path.join(self.root, 'experiments')
        self.artifacts = os.path.join(self.root, 'artifacts')
        self.port = free_port()
        self.node_root = self.nodes + ('/shared-home/.trainops' if shared_root else '/{{ inventory_hostname }}')

    def run(self, playbook, extra=None, env=None, verbose=0, timeout=420):
        extravars = {'trainops_node_root': self.node_root, 'trainops_experiments_dir': self.experiments,
                     'master_port': self.port, 'trainops_progress_interval': 10}
        extravars.update(extra or {})
        return run_playbook(playbook, self.root, extravars, timeout=timeout, env=env, verbose=verbose)

    def experiment_dirs(self):
        return sorted(glob.glob(os.path.join(self.experiments, '*')))

    def kill_leftovers(self):
        for entry in os.listdir('/proc'):
            if not entry.isdigit():
                continue
            try:
                with open('/proc/%s/cmdline' % entry, 'rb') as handle:
                    cmdline = handle.read().decode(errors='replace')
            except OSError:
                continue
            if self.nodes in cmdline:
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except OSError:
                    pass


@pytest.fixture
def shape(tmp_path):
    made = []

    def make(shared_root=False):
        made.append(Shape(tmp_path, shared_root))
        return made[-1]
    yield make
    for item in made:
        item.kill_leftovers()


def files_containing(top, needle):
    hits = []
    for base, _dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(base, name)
            try:
                with open(path, 'rb') as handle:
                    if needle.encode() in handle.read():
                        hits.append(path)
            except OSError:
                pass
    return hits


def read_json(path):
    with open(path) as handle:
        return json.load(handle)


def assert_private_state(node_state_dir):
    """The node's state directory and runs are 0700, the files the collection writes there 0600."""
    assert stat.S_IMODE(os.stat(node_state_dir).st_mode) == 0o700
    checked = 0
    for base, _dirs, files in os.walk(node_state_dir):
        if os.path.basename(base) == 'outputs':
            continue  # the workload's own files, inside the 0700 run directory
        if base == node_state_dir or os.path.dirname(base).endswith('/runs') or base.endswith('/runs'):
            assert stat.S_IMODE(os.stat(base).st_mode) == 0o700, base
        for name in files:
            if name in OWN_FILES or name == 'current.json':
                mode = stat.S_IMODE(os.stat(os.path.join(base, name)).st_mode)
                assert mode == 0o600, (os.path.join(base, name), oct(mode))
                checked += 1
    assert checked >= len(OWN_FILES), checked


def test_a_secret_reaches_every_rank_and_appears_nowhere_else(shape):
    lab = shape()
    secret = 'hf_e2e_%s' % uuid.uuid4().hex
    env = {TOKEN_VAR: secret}
    # one rank a node and the tiny model: the secret's path is the same for every rank, CI pays for each
    small = {'config': 'config/tiny.yaml', 'nproc': 1}
    launched = lab.run('playbooks/launch.yml', dict(small, trainops_secret_env=SECRET_ENV,
                                                    trainops_env={'NCCL_DEBUG': 'WARN'}), env=env, verbose=2)
    assert launched.returncode == 0, launched.stdout[-3000:] + launched.failure_text
    status = lab.run('playbooks/status.yml', {'trainops_secret_env': SECRET_ENV, 'recollect': True}, env=env, verbose=2)
    assert status.returncode == 0, status.stdout[-3000:]
    # a failing job: the failed wait, the error messages and the collection of a failure
    failed = lab.run('playbooks/launch.yml', dict(small, trainops_secret_env=SECRET_ENV, run_name='failing',
                                                  overrides=['debug.fail_rank=1', 'debug.fail_step=3']), env=env, verbose=2)
    assert failed.returncode != 0 and 'failed on node1 (node rank 1: ' in failed.stdout, failed.stdout[-3000:]

    good, bad = lab.experiment_dirs()[0], [d for d in lab.experiment_dirs() if 'failing' in d][0]
    for experiment in (good, bad):
        envs = sorted(glob.glob(os.path.join(experiment, 'outputs', '*', 'rank_*_env.json')))
        assert len(envs) == 2, envs
        for path in envs:
            record = read_json(path)
            assert record['secret_env_present'] == {'HF_TOKEN': True}, path  # it reached the rank
            assert 'HF_TOKEN' not in record['env'], path
        manifest = read_json(os.path.join(experiment, 'manifest.json'))
        for node in manifest['nodes']:
            assert node['secret_env'] == {'HF_TOKEN': '<redacted>'}
            assert node['env']['TRAINOPS_SECRET_ENV_NAMES'] == 'HF_TOKEN'
    for run in (launched, status, failed):
        assert secret not in run.stdout and secret not in run.stderr
        assert secret not in json.dumps(run.summary)
    leaks = {where: files_containing(top, secret) for where, top in (
        ('experiments', lab.experiments), ('node state', lab.nodes), ('ansible-runner artifacts', lab.artifacts),
        ('summaries and var files', lab.root))}
    assert leaks == {'experiments': [], 'node state': [], 'ansible-runner artifacts': [], 'summaries and var files': []}
    # the token was in the environment ansible-runner records: redacted there, by name
    commands = glob.glob(os.path.join(lab.artifacts, '*', 'command'))
    assert commands and all(read_json(c)['env'][TOKEN_VAR] == '<redacted>' for c in commands)
    for node in ('node0', 'node1'):
        assert_private_state(os.path.join(lab.nodes, node, 'state', os.uname().nodename))


def test_nodes_sharing_one_node_root_keep_their_own_state_and_sync_the_workspace_once(shape):
    lab = shape(shared_root=True)
    per_node = {'trainops_node_id': '{{ inventory_hostname }}'}
    started = lab.run('playbooks/launch.yml', dict(per_node, wait=False,
                                                   overrides=['debug.sleep_per_step_s=0.5', 'training.epochs=20']))
    assert started.returncode == 0, started.stdout[-3000:] + started.failure_text
    shown = ' '.join(open(p).read() for p in glob.glob(os.path.join(lab.artifacts, '*', 'stdout')))  # ansible's output
    shown = ' '.join(re.sub(r'\x1b\[[0-9;]*m', '', shown).replace("'", ' ').split())
    assert 'shared node root (trainops_node_root): node0, node1 see the same directory' in shown
    assert 'shared workspace (trainops_workspace_dir): node0, node1 see the same directory; synced once, through node0' in shown
    experiment = lab.experiment_dirs()[0]
    manifest = read_json(os.path.join(experiment, 'manifest.json'))
    assert manifest['shared_dirs'] == {'node_root': [['node0', 'node1']], 'workspace': [['node0', 'node1']],
                                       'workspace_synced_through': ['node0']}
    state_root = os.path.join(lab.nodes, 'shared-home', '.trainops', 'state')
    assert sorted(n for n in os.listdir(state_root) if not n.startswith('.')) == ['node0', 'node1']
    assert [n['state_dir'] for n in manifest['nodes']] == [os.path.join(state_root, 'node0'), os.path.join(state_root, 'node1')]

    status = lab.run('playbooks/status.yml', per_node)
    assert status.returncode == 0, status.stdout[-2000:]
    states = status.summary['artifact_data']['trainops_status']
    assert sorted(states) == ['node0', 'node1'] and {s['status'] for s in states.values()} <= {'running', 'exited'}
    # the stop the sbatch role's batch script runs near the job's time limit (launcher=ssh, docs/slurm.md): the
    # checkpoint signal through each node's supervisor to the ranks, their checkpoint, then the stop; timed_out
    run_dir = os.path.join(state_root, 'node0', 'runs', os.path.basename(experiment))
    deadline = time.monotonic() + 120
    while not glob.glob(os.path.join(run_dir, 'outputs', 'rank_*_metrics.jsonl')):  # the ranks train (handler installed)
        assert time.monotonic() < deadline, 'no metrics in %s' % run_dir
        time.sleep(0.5)
    stopped = lab.run('playbooks/stop.yml', dict(per_node, trainops_stop_checkpoint_seconds=60,
                                                 trainops_stop_time_limit={'job_id': '41', 'stop_seconds': 120}))
    assert stopped.returncode == 0, stopped.stdout[-2000:]
    for node in ('node0', 'node1'):
        job = read_json(glob.glob(os.path.join(state_root, node, 'runs', '*', 'job.json'))[0])
        assert job['host']['hostname'] == os.uname().nodename
        ended = read_json(os.path.join(state_root, node, 'runs', os.path.basename(experiment), 'exit.json'))
        assert [s['signal'] for s in ended['checkpoint_signals']] == ['SIGUSR1'], ended  # the supervisor got it
        assert_private_state(os.path.join(state_root, node))
    manifest = read_json(os.path.join(experiment, 'manifest.json'))
    assert manifest['outcome'] == 'timed_out', manifest.get('outcome_detail')
    step = manifest['checkpoint']['global_step']
    assert manifest['checkpoint']['signal'] == 'SIGUSR1' and step > 0, manifest['checkpoint']
    assert manifest['outcome_detail'].startswith(
        'timed out: batch job 41 reached its time limit (Slurm warned it 120 s before: sbatch --signal=B:USR1@120); '
        'last checkpoint: global step %d (SIGUSR1) on node0: ' % step), manifest['outcome_detail']
    assert {r['stop']['reason'] for r in manifest['results'].values()} == {'timeout'}


def test_a_shared_node_root_with_one_host_name_is_refused_before_anything_starts(shape):
    lab = shape(shared_root=True)
    refused = lab.run('playbooks/launch.yml', {'wait': False})
    assert refused.returncode != 0
    assert ('node0 and node1 would keep their state in the same directory (they share the node root and have the same '
            'host name). Set trainops_node_id per node') in refused.failure_text, refused.failure_text
    assert lab.experiment_dirs() == []
    assert not os.path.exists(os.path.join(lab.nodes, 'shared-home', '.trainops', 'state', os.uname().nodename))
