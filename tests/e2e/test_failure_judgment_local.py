"""How the launch judges a job on the local default (two nodes on this machine): a launch that fails after the
experiment directory exists leaves a manifest that says why, and a controller without rsync is refused before
anything is touched when the sync needs rsync (an option the local copy does not implement; the local default itself
needs none, as tests/e2e/test_installed_collection.py shows).

The lab (tests/lab/test_failure_judgment.py) proves the rest on real hosts, and alone (each is a launch CI pays
for): SSH cut on the management network while training goes on, a node unreachable before the start, a hung rank
``stalled``, and a Ctrl-C at the controller leaving an ``interrupted`` experiment that status.yml later collects
with its real end.
"""
import glob
import json
import os

import pytest

from playbook_runner import REPO, path_without, run_playbook
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
