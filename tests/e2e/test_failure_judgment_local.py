"""How the launch judges a job on the local default (two nodes on this machine): a hung rank is
``stalled``, a Ctrl-C at the controller leaves an ``interrupted`` experiment that status.yml later
collects with its real end, a launch that fails after the experiment directory exists leaves a manifest
that says why, and a controller without rsync is refused before anything is touched when the sync needs
rsync (an option the local copy does not implement; the local default itself needs none, as
tests/e2e/test_installed_collection.py shows).

The lab (tests/lab/test_failure_judgment.py) adds what needs real hosts: SSH cut on the management
network while training goes on, and a node unreachable before the start.
"""
import glob
import json
import os
import re
import signal
import subprocess
import sys

import pytest

from playbook_runner import REPO, path_without, run_playbook, wait_until
from test_launch_local import processes_under

pytestmark = [pytest.mark.e2e, pytest.mark.real, pytest.mark.slow]

TINY = 'config/tiny.yaml'


def read_json(path):
    with open(path) as handle:
        return json.load(handle)


def the_experiment(lab):
    dirs = lab.experiment_dirs()
    assert len(dirs) == 1, dirs
    return dirs[0]


def test_a_rank_that_hangs_outside_a_collective_is_stalled_stopped_and_collected(lab):
    # rank 1 (on node0) sleeps forever before step 3; every other rank then waits in the next all-reduce,
    # so no node writes anything new. The collective timeout is far away: only the stall check can end it.
    proc = lab.run('playbooks/launch.yml', {
        'config': TINY,
        'overrides': ['debug.fail_rank=1', 'debug.fail_step=3', 'debug.fail_mode=hang', 'distributed.timeout_s=900',
                      'training.max_steps=50'],
        'trainops_stall_timeout': 40, 'trainops_poll_interval': 1,
    }, timeout=300)
    assert proc.returncode != 0
    experiment = proc.summary['artifact_data']['trainops_experiment']
    assert experiment['outcome'] == 'stalled', experiment
    assert experiment['outcome_detail'].startswith('stalled on node'), experiment
    # at least the timeout; how much more depends on how busy the controller is (one poll a second when idle)
    quiet = re.search(r'no new output for (\d+) s \(trainops_stall_timeout=40\); last line: \S', experiment['outcome_detail'])
    assert quiet and 40 <= int(quiet.group(1)) < 300, experiment['outcome_detail']
    assert 'stalled on node' in proc.failure_text, proc.failure_text
    assert '\nOUTCOME stalled: stalled on node' in proc.stdout, proc.stdout[-2000:]
    path = experiment['path']
    manifest = read_json(os.path.join(path, 'manifest.json'))
    assert manifest['outcome'] == 'stalled' and manifest['failed_nodes']
    assert {verdict['state'] for verdict in manifest['wait'].values()} <= {'stalled', 'stopped'}
    assert 'debug hang injected: rank 1' in open(os.path.join(path, 'logs', 'node_0.txt')).read()
    assert sorted(os.listdir(os.path.join(path, 'logs'))) == ['node_0.txt', 'node_1.txt']
    assert not lab.leftovers()


def test_ctrl_c_leaves_the_job_running_and_status_later_records_its_real_end(lab, tmp_path):
    varfile = tmp_path / 'vars.json'
    varfile.write_text(json.dumps({
        'trainops_node_root': lab.nodes + '/{{ inventory_hostname }}', 'trainops_experiments_dir': lab.experiments,
        'master_port': lab.port, 'config': TINY, 'trainops_progress_interval': 2,
        # 40 s of training: the job must outlive the Ctrl-C and its handling on a busy controller
        'overrides': ['training.epochs=50', 'training.max_steps=40', 'debug.sleep_per_step_s=1'],
    }))
    out = open(str(tmp_path / 'launch.out'), 'w+')
    argv = [os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), 'playbooks/launch.yml', '-e', '@%s' % varfile]
    # its own session and process group, as a terminal's foreground job: Ctrl-C reaches every process of it
    launch = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def waiting():
            dirs = lab.experiment_dirs()
            return dirs and os.path.exists(os.path.join(dirs[0], '.wait', 'watcher.json'))
        wait_until(waiting, 120, what='the wait to start')
        wait_until(lambda: 'running  step=' in open(out.name).read() or 'running  epoch=' in open(out.name).read(),
                   60, what='a progress line')
        os.killpg(launch.pid, signal.SIGINT)
        launch.wait(timeout=120)
    finally:
        if launch.poll() is None:
            os.killpg(launch.pid, signal.SIGKILL)
            launch.wait()
    printed = open(out.name).read()
    assert 'Ctrl-C ends only this wait; the job keeps running.' in printed, printed[-3000:]
    assert 'playbooks/status.yml -e run_id=' in printed and 'playbooks/stop.yml -e run_id=' in printed, printed[-3000:]
    path = the_experiment(lab)
    manifest = wait_until(lambda: read_json(os.path.join(path, 'manifest.json'))['outcome'] == 'interrupted'
                          and read_json(os.path.join(path, 'manifest.json')), 90, what='the manifest to say interrupted')
    assert 'status.yml collects it' in manifest['outcome_detail']
    assert lab.leftovers(), 'the job keeps running after the controller went away'

    def collected():
        status = lab.run('playbooks/status.yml', {}, timeout=300)
        assert status.returncode == 0, status.stdout[-3000:]
        return read_json(os.path.join(path, 'manifest.json'))['outcome'] not in ('running', 'interrupted')
    wait_until(collected, 180, interval=3, what='status.yml to collect the finished job')
    manifest = read_json(os.path.join(path, 'manifest.json'))
    assert manifest['outcome'] == 'succeeded' and manifest['interrupted_at']
    assert sorted(os.listdir(os.path.join(path, 'logs'))) == ['node_0.txt', 'node_1.txt']
    assert not lab.leftovers()


def test_a_launch_that_fails_after_creating_the_experiment_leaves_a_manifest_saying_why(lab, tmp_path):
    inventory = tmp_path / 'hosts.yml'
    with open(os.path.join(REPO, 'inventories', 'local', 'hosts.yml')) as handle:
        text = handle.read()
    inventory.write_text(text.replace('    node1:\n', '    node1:\n      trainops_torchrun: /nonexistent/torchrun\n'))
    proc = run_playbook('playbooks/launch.yml', lab.root, {
        'trainops_node_root': lab.nodes + '/{{ inventory_hostname }}', 'trainops_experiments_dir': lab.experiments,
        'master_port': lab.port, 'config': TINY}, inventory=str(inventory), timeout=300)
    assert proc.returncode != 0
    assert 'The job did not start on node1; it was stopped on every other node.' in proc.failure_text, proc.failure_text
    manifest = read_json(os.path.join(the_experiment(lab), 'manifest.json'))
    assert manifest['outcome'] == 'failed'
    assert manifest['outcome_detail'].startswith('not started: The job did not start on node1')
    assert 'node1' in manifest['launch_errors'] or 'node0' in manifest['launch_errors']
    assert manifest['parameters']['config'] == TINY and manifest['node_names'] == ['node0', 'node1']
    assert not lab.leftovers()
    # node0's run was started and then undone: its stop record says so
    stops = [read_json(p) for p in glob.glob(os.path.join(lab.nodes, 'node0', 'state', '*', 'runs', '*', 'stop.json'))]
    assert [stop['reason'] for stop in stops] == ['undo'] and 'did not start on node1' in stops[0]['detail']


def test_a_controller_without_rsync_is_refused_before_anything_is_touched(lab, tmp_path):
    # the local nodes need rsync only for an option that the copy made in Python does not implement
    path = path_without(str(tmp_path / 'bin'), 'rsync')
    proc = run_playbook('playbooks/launch.yml', lab.root, {
        'trainops_node_root': lab.nodes + '/{{ inventory_hostname }}', 'trainops_experiments_dir': lab.experiments,
        'master_port': lab.port, 'trainops_sync_rsync_opts': ['--bwlimit=100m']}, env={'PATH': path}, timeout=300)
    assert proc.returncode != 0
    failures = proc.summary.get('failures', [])
    assert len(failures) == 1, proc.failure_text
    assert failures[0]['msg'].startswith('rsync: not found on the controller'), failures[0]['msg']
    assert 'sudo apt-get install rsync' in failures[0]['msg']
    assert not os.path.exists(lab.nodes)
    assert lab.experiment_dirs() == []
    assert not processes_under(lab.nodes)
