"""End-to-end: playbooks/health.yml on the local default's two logical nodes (tests/e2e/conftest.py's lab).

Two healthy CPU nodes: the node checks say "none" for GPUs and RDMA, the one all-reduce of both nodes is the only
pair, the verdict is healthy and health.json holds both tables. Then the check before a launch (trainops_health_check)
with a spare node: a node whose all-reduce fails is left out and the spare takes its node rank.
"""
import glob
import json
import os
import sys

import pytest
import yaml

from playbook_runner import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_health_on_two_healthy_local_nodes(lab):
    # a launch's script, wait and profile on the command line (as the check before an attempt gets them) change
    # nothing: every measurement is the all-reduce benchmark, waited for, unprofiled
    proc = lab.run('playbooks/health.yml', {'nproc': 1, 'trainops_health_bytes': '64K', 'trainops_health_iters': 3,
                                            'trainops_health_warmup': 1, 'trainops_health_timeout': 30,
                                            'script': 'train.py', 'wait': False, 'profile': 'torch'}, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    published = proc.summary['artifact_data']['trainops_health']
    assert published['verdict'] == 'healthy'
    assert published['suspects'] == []
    files = glob.glob(os.path.join(lab.experiments, 'health_*', 'health.json'))
    assert files == [published['file']]
    with open(files[0]) as handle:
        report = json.load(handle)
    assert report['verdict'] == 'healthy'
    # a row per node: a CPU node has no GPUs and no RDMA devices, and is healthy on that count
    assert [row['status'] for row in report['nodes']] == ['ok', 'ok']
    assert all(row['gpus'] == 'none' and row['rdma'] == 'none' for row in report['nodes'])
    # a row per measured group: two nodes, so the all-reduce of all nodes is the one pair
    assert len(report['groups']) == 1
    pair = report['groups'][0]
    assert sorted(pair['nodes']) == sorted(row['node'] for row in report['nodes'])
    assert pair['status'] == 'ok' and pair['busbw_gbps'] > 0 and pair['time_us'] > 0
    with open(os.path.join(pair['experiment_dir'], 'manifest.json')) as handle:
        manifest = json.load(handle)
    # the measurement ran with the check's timeouts, not a training job's
    assert (manifest['parameters']['rdzv_timeout'], manifest['parameters']['stall_timeout']) == (30, 60), manifest['parameters']
    assert {node['env']['TRAINOPS_COLLECTIVE_TIMEOUT_S'] for node in manifest['nodes']} == {'30'}
    assert manifest['parameters']['script'] == 'allreduce_bench.py', manifest['parameters']
    for node in manifest['nodes']:
        assert any(arg.endswith('allreduce_bench.py') for arg in node['argv']), node['argv']
        assert not any(arg.endswith('profile_rank.py') for arg in node['argv']), node['argv']
    # the tables and the verdict are printed (ansible-runner keeps the playbook's output in its artifacts)
    outputs = glob.glob(os.path.join(lab.root, 'artifacts', '*', 'stdout'))
    assert len(outputs) == 1
    with open(outputs[0]) as handle:
        printed = handle.read()
    for line in ('Nodes:', 'All-reduce by group', 'verdict: healthy'):
        assert line in printed


BAD_NODE = '''#!/bin/sh
# node1's interpreter: its all-reduce fails (a stand-in for a bad GPU or NIC); everything else runs as usual
for arg in "$@"; do
    case "$arg" in *allreduce_bench.py) echo "node1: the all-reduce fails on this node" >&2; exit 3 ;; esac
done
exec %s "$@"
'''


def test_the_check_before_the_launch_leaves_the_bad_node_out_and_the_spare_takes_its_place(lab, tmp_path):
    """trainops_health_check: the check of node0, node1 and the spare node2 finds node1's all-reduces failing (every
    pair with it), so the job runs on node0 and node2 (node rank 1) and succeeds; the manifest says who replaced whom
    and why."""
    with open(os.path.join(REPO, 'inventories', 'local', 'hosts.yml')) as handle:
        local = yaml.safe_load(handle)['trainops_nodes']
    wrapper = tmp_path / 'bad-python'
    wrapper.write_text(BAD_NODE % sys.executable)
    wrapper.chmod(0o755)
    hosts = dict(local['hosts'])
    hosts['node1'] = dict(hosts.get('node1') or {}, trainops_python=str(wrapper))
    inventory = tmp_path / 'spares.yml'
    inventory.write_text(yaml.safe_dump({'all': {'vars': local['vars'], 'children': {
        'trainops_nodes': {'hosts': hosts}, 'spares': {'hosts': {'node2': None}}}}}))
    proc = lab.run('playbooks/launch.yml', {
        'config': 'config/tiny.yaml', 'nproc': 1, 'trainops_health_check': True, 'trainops_spare_nodes': 'spares',
        'trainops_health_bytes': '64K', 'trainops_health_iters': 3, 'trainops_health_warmup': 1,
        'trainops_health_timeout': 20}, timeout=600, inventory=str(inventory))
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.failure_text
    path = proc.summary['artifact_data']['trainops_experiment']['path']
    with open(os.path.join(path, 'manifest.json')) as handle:
        manifest = json.load(handle)
    assert manifest['outcome'] == 'succeeded'
    assert [(n['host'], n['node_rank']) for n in manifest['nodes']] == [('node0', 0), ('node2', 1)]
    (replaced, ) = manifest['replaced']
    assert (replaced['node'], replaced['by'], replaced['node_rank']) == ('node1', 'node2', 1), replaced
    assert replaced['reason'].startswith('failed the health check (2 of its 2 pair(s) failed'), replaced
    assert manifest['spares'] == []
    # the check's own report, beside the attempt: all three nodes, then every pair
    (found, ) = glob.glob(os.path.join(lab.experiments, manifest['run_id'] + '_health_*', 'health.json'))
    with open(found) as handle:
        report = json.load(handle)
    assert [s['node'] for s in report['suspects']] == ['node1'], report['verdict']
    assert [sorted(g['nodes']) for g in report['groups']] == [
        ['node0', 'node1', 'node2'], ['node0', 'node1'], ['node0', 'node2'], ['node1', 'node2']]
    assert [g['status'] for g in report['groups']][1:] == ['failed', 'ok', 'failed'], report['groups']
    # node1 ran nothing of the job
    assert not glob.glob(os.path.join(lab.nodes, 'node1', 'state', '*', 'runs', manifest['run_id']))
