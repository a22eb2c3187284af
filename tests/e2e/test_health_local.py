"""End-to-end: playbooks/health.yml on the local default's two logical nodes (tests/e2e/conftest.py's lab).

Two healthy CPU nodes: the node checks say "none" for GPUs and RDMA, the one all-reduce of both nodes is the only
pair, the verdict is healthy and health.json holds both tables.
"""
import glob
import json
import os

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_health_on_two_healthy_local_nodes(lab):
    proc = lab.run('playbooks/health.yml', {'nproc': 1, 'trainops_health_bytes': '64K', 'trainops_health_iters': 3,
                                            'trainops_health_warmup': 1, 'trainops_health_timeout': 30}, timeout=300)
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
    # the tables and the verdict are printed (ansible-runner keeps the playbook's output in its artifacts)
    outputs = glob.glob(os.path.join(lab.root, 'artifacts', '*', 'stdout'))
    assert len(outputs) == 1
    with open(outputs[0]) as handle:
        printed = handle.read()
    for line in ('Nodes:', 'All-reduce by group', 'verdict: healthy'):
        assert line in printed
