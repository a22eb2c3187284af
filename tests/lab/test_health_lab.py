"""health.yml across real hosts: the namespace lab of hack/lab.py (root only).

One node of four is slowed on its training link (``tc qdisc add dev <ifname> root netem delay 20ms`` inside its
network namespace): the all-reduce of all nodes is slow, every pair with that node is slow, and the verdict names
it. Written by a helper without running it (the lab is the lead's); see docs/health.md.
"""
import json
import os

import pytest

from playbook_runner import run_playbook
from test_launch_lab import launch_vars

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.usefixtures('lab_session_lock')]


def test_health_names_the_node_whose_training_link_is_slow(lab_nodes, tmp_path):
    lab = lab_nodes(4)
    victim = lab.nodes[2]
    netem = ['tc', 'qdisc', 'add', 'dev', victim['ifname'], 'root', 'netem', 'delay', '20ms']
    lab.netns_exec(victim, netem)
    try:
        extra = dict(nproc=1, trainops_health_bytes='1M', trainops_health_iters=5, trainops_health_warmup=1)
        proc = run_playbook('playbooks/health.yml', str(tmp_path), launch_vars(tmp_path, **extra),
                            inventory=lab.inventory, timeout=1200)
    finally:
        lab.netns_exec(victim, ['tc', 'qdisc', 'del', 'dev', victim['ifname'], 'root'], check=False)
    assert proc.returncode != 0, 'a suspect node fails the check'
    published = proc.summary['artifact_data']['trainops_health']
    assert [s['node'] for s in published['suspects']] == [victim['name']], published
    assert published['verdict'].startswith('suspect: %s (' % victim['name'])
    with open(published['file']) as handle:
        report = json.load(handle)
    # 4 nodes and no floor: all nodes, then the 6 pairs; the 3 pairs with the victim are slow, the others ok
    groups = report['groups']
    assert len(groups) == 1 + 6
    for group in groups[1:]:
        assert group['status'] == ('slow' if victim['name'] in group['nodes'] else 'ok'), group
        assert os.path.isdir(group['experiment_dir'])
    # lab nodes have no GPUs and no RDMA devices: healthy on that count
    assert all(row['status'] == 'ok' and row['gpus'] == 'none' for row in report['nodes'])
