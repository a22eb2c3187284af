"""launch.yml across real hosts: the namespace lab of hack/lab.py (root only).

Each node has its own hostname, NIC name (ens5, enp1s0f0, eth1, bond0.2093), address and sshd; the
controller reaches them over SSH with host-key checking on. The tests check that ranks run where their
rank says, that each host gets its own interface, and that failures end the job everywhere.
"""
import glob
import json
import os
import signal
import subprocess
import time

import pytest

from lab_env import lab_names
from lab_processes import job_processes, node_processes  # (re-exported for the other lab modules)
from playbook_runner import free_port, run_playbook, start_playbook, wait_playbook, wait_until

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.usefixtures('lab_session_lock')]


def launch_vars(tmp_path, **extra):
    extravars = {
        'trainops_experiments_dir': str(tmp_path / 'experiments'),
        'master_port': free_port(),
        # the default: a running node is asked every 10 s (docs/failures.md); a shorter one costs a module run per
        # node each time, and only the tests that read progress lines set one
        'trainops_progress_interval': 10,
        'trainops_poll_interval': 1,
        'config': 'config/tiny.yaml',
    }
    extravars.update(extra)
    return extravars


def experiment_of(proc):
    return proc.summary.get('artifact_data', {}).get('trainops_experiment', {})


def test_launch_across_lab_nodes_each_rank_on_its_host_with_its_interface(lab_nodes, tmp_path):
    # 4 nodes with 4 different interface names; the 2-node case is Molecule's job scenario (molecule/job/verify.yml)
    nodes = 4
    lab = lab_nodes(nodes)
    proc = run_playbook('playbooks/launch.yml', str(tmp_path), launch_vars(tmp_path, channels=42), inventory=lab.inventory)
    assert proc.returncode == 0, proc.stdout[-5000:]
    experiment = experiment_of(proc)
    assert experiment['outcome'] == 'succeeded'
    path = experiment['path']
    assert sorted(n for n in os.listdir(os.path.join(path, 'logs')) if n.startswith('node_')) == ['node_%d.txt' % r for r in range(nodes)]

    manifest = json.load(open(os.path.join(path, 'manifest.json')))
    assert manifest['world_size'] == 2 * nodes and manifest['summary']['ranks_seen'] == list(range(2 * nodes))
    assert manifest['master']['addr'] == lab.nodes[0]['address']
    for index, node in enumerate(lab.nodes):
        for local_rank in range(2):
            rank = 2 * index + local_rank
            seen = json.load(open(os.path.join(path, 'outputs', manifest['nodes'][index]['host'], 'rank_%02d_env.json' % rank)))
            # the rank ran on the host its rank says ...
            assert seen['hostname'] == node['hostname'], (rank, seen['hostname'])
            assert seen['env']['TRAINOPS_NODE'] == node['name']
            # ... and used that host's own NIC, which differs from node to node
            assert seen['env']['GLOO_SOCKET_IFNAME'] == node['ifname'], (rank, node)
            assert seen['env']['NCCL_SOCKET_IFNAME'] == '=' + node['ifname']
            assert seen['env']['NCCL_MAX_NCHANNELS'] == '42'
    assert len({n['ifname'] for n in lab.nodes}) == min(nodes, 4)
    # the manifest records what each host's own facts chose, and the env file on the node says the same
    by_host = {n['host']: n for n in manifest['nodes']}
    for node in lab.nodes:
        record = by_host[node['name']]
        assert record['network']['socket_ifname'] == [node['ifname']] or record['network']['socket_ifname'] == node['ifname']
        assert record['network']['transport'] == 'tcp' and record['env']['NCCL_IB_DISABLE'] == '1'
        env_file = lab.ssh(node['name'], 'cat %s' % record['env_file']).stdout
        assert "export GLOO_SOCKET_IFNAME=%s\n" % node['ifname'] in env_file, env_file
    assert not job_processes(lab)


def test_wrong_interface_override_fails_before_anything_starts(lab_nodes, tmp_path):
    lab = lab_nodes(2)
    proc = run_playbook('playbooks/launch.yml', str(tmp_path), launch_vars(tmp_path, trainops_socket_ifname='lo'),
                        inventory=lab.inventory, timeout=240)
    assert proc.returncode != 0
    assert "'lo' cannot reach the master %s" % lab.nodes[0]['address'] in proc.failure_text, proc.failure_text
    assert proc.elapsed < 120
    assert not os.path.exists(tmp_path / 'experiments') or not os.listdir(tmp_path / 'experiments')
    assert not job_processes(lab)


def test_a_rank_killed_mid_training_ends_the_job_on_every_node(lab_nodes, tmp_path):
    lab = lab_nodes(4)
    victim = lab.nodes[2]
    running = start_playbook('playbooks/launch.yml', str(tmp_path), launch_vars(
        tmp_path, overrides=['debug.sleep_per_step_s=0.2', 'training.epochs=50']), inventory=lab.inventory)
    try:
        # wait until the victim's workers train, then kill one of them outright
        def victim_worker():
            procs = [pid for pid, cmd in node_processes(lab, victim) if 'train.py' in cmd and 'torch.distributed.run' not in cmd]
            return procs and procs[0]
        worker = wait_until(victim_worker, timeout=240)
        assert worker, 'the job never started on %s' % victim['name']
        time.sleep(3)
        os.kill(worker, signal.SIGKILL)
        killed_at = time.monotonic()
        gone = wait_until(lambda: not job_processes(lab), timeout=30)
        assert gone, 'still running 30 s after the kill: %s' % job_processes(lab)
        assert time.monotonic() - killed_at <= 30
        proc = wait_playbook(running, timeout=300)
    finally:
        if running.poll() is None:
            running.kill()
    assert proc.returncode != 0
    assert 'failed on %s (node rank ' % victim['name'] in proc.failure_text, proc.failure_text
    experiment = experiment_of(proc)
    assert experiment['failed_nodes'] == [victim['name']]
    assert sorted(n for n in os.listdir(os.path.join(experiment['path'], 'logs')) if n.startswith('node_')) == ['node_%d.txt' % r for r in range(4)]


def test_a_node_lost_mid_run_ends_the_job_within_the_collective_timeout(lab_nodes, lab_manager, tmp_path):
    lab = lab_nodes(4)
    victim = lab.nodes[1]
    running = start_playbook('playbooks/launch.yml', str(tmp_path), launch_vars(
        tmp_path, overrides=['debug.sleep_per_step_s=0.2', 'training.epochs=50'], trainops_collective_timeout=20),
        inventory=lab.inventory)
    try:
        # cut the link once the victim trains (its node log shows steps), not while it still starts up
        logs = '%s/%s/srv/state/*/runs/*/node.log' % (lab_names().STATE_ROOT, victim['name'].replace('lab-', ''))

        def training():
            return any('step=' in open(log, errors='replace').read() for log in glob.glob(logs))
        assert wait_until(training, timeout=240), 'the victim never started training'
        lab.netns_exec(victim, ['ip', 'link', 'set', victim['ifname'], 'down'])
        cut_at = time.monotonic()
        others = [n for n in lab.nodes if n is not victim]
        ended = wait_until(lambda: not any(n['name'] in job_processes(lab) for n in others), timeout=20 + 100)
        assert ended, 'jobs still running on %s' % sorted(job_processes(lab))
        assert time.monotonic() - cut_at < 20 + 100
        proc = wait_playbook(running, timeout=400)
    finally:
        if running.poll() is None:
            running.kill()
        lab.netns_exec(victim, ['ip', 'link', 'set', victim['ifname'], 'up'], check=False)
        lab_manager.up(4)
    assert proc.returncode != 0
    assert victim['name'] in proc.failure_text, proc.failure_text
    # the lost node's own ranks lost their peers: their collectives time out too, nothing hangs forever
    assert wait_until(lambda: not job_processes(lab), timeout=90), job_processes(lab)


def test_stop_ends_the_job_on_every_node_and_spares_a_decoy(lab_nodes, tmp_path):
    lab = lab_nodes(2)
    proc = run_playbook('playbooks/launch.yml', str(tmp_path), launch_vars(
        tmp_path, wait=False, overrides=['debug.sleep_per_step_s=0.5', 'training.epochs=50']), inventory=lab.inventory)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert wait_until(lambda: len(job_processes(lab)) == 2, timeout=60)
    # a process with the very same command line as node 1's torchrun, not started by the job
    torchrun_cmd = next(cmd for _pid, cmd in job_processes(lab)[lab.nodes[0]['name']] if 'torch.distributed.run' in cmd)
    decoy = subprocess.Popen(['ip', 'netns', 'exec', lab.nodes[0]['namespace'], 'bash', '-c',
                              'exec -a "$0" sleep 300', torchrun_cmd.strip()], start_new_session=True)
    try:
        stopped = run_playbook('playbooks/stop.yml', str(tmp_path), {
            'trainops_experiments_dir': str(tmp_path / 'experiments')}, inventory=lab.inventory, timeout=240)
        assert stopped.returncode == 0, stopped.stdout[-3000:]
        leftovers = {n: [p for p in procs if p[0] != decoy.pid] for n, procs in job_processes(lab).items()}
        assert not any(leftovers.values()), leftovers
        assert decoy.poll() is None, 'the decoy with the same command line was killed'
        (path, ) = glob.glob(str(tmp_path / 'experiments' / '*'))
        manifest = json.load(open(os.path.join(path, 'manifest.json')))
        assert manifest['outcome'] == 'stopped', manifest.get('outcome_detail')
    finally:
        decoy.kill()
        decoy.wait()
