"""A node slowed on purpose, on real hosts (the namespace lab of hack/lab.py; root only).

The training processes of one node of three run in a cgroup limited to a fraction of one CPU (a thermally
throttled GPU, a noisy neighbour: conftest's ``Lab.slowed``). The health check (playbooks/health.yml) finds the slow
all-reduce of all nodes and of every pair with that node, and names it; a training job on the same nodes succeeds
and names that node a straggler, while it runs and in its summary. (``tc netem`` on the node's training link was the
other way the issue offered; this machine's kernel has no sch_netem, and a slow link shows in the health check's
pairs but in no node's compute time: docs/failures.md.) See docs/health.md.
"""
import json
import os
import re

import pytest

from playbook_runner import run_playbook
from test_launch_lab import launch_vars

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.usefixtures('lab_session_lock')]

NODES = 3
CPU_PERCENT = 15


def test_a_slowed_node_is_named_by_the_health_check_and_flagged_as_a_straggler(lab_nodes, tmp_path):
    lab = lab_nodes(NODES)
    victim = lab.nodes[2]['name']
    for name in ('health', 'job'):
        (tmp_path / name).mkdir()
    with lab.slowed(victim, CPU_PERCENT):
        # a pair is slow under 0.7 of the pairs' upper quartile (the default is 0.5; with 3 pairs the quartile is the best
        # pair): the lab's nodes share CI's 2 cores with the other suites, and under that load one CI run measured the
        # victim's pairs at 0.164 and 0.271 GB/s against 0.525 for the healthy pair, the second just above half of it,
        # so that only one was judged slow and the verdict named a link. The best pair is never under 0.7 of itself.
        health = run_playbook('playbooks/health.yml', str(tmp_path / 'health'), launch_vars(
            tmp_path / 'health', nproc=1, trainops_health_bytes='16M', trainops_health_iters=5,
            trainops_health_warmup=1, trainops_health_slow_ratio=0.7), inventory=lab.inventory, timeout=1200)
        # the default model, not the tiny one: a step must compute for longer than the quota's share of a period
        # (1.5 ms of 10) for the cap to slow it; a tiny step (under 1 ms with one thread a rank) may never reach it
        job = run_playbook('playbooks/launch.yml', str(tmp_path / 'job'), launch_vars(
            tmp_path / 'job', nproc=1, trainops_progress_interval=2, config='config/default.yaml',
            overrides=['training.max_steps=24', 'training.log_interval=2']), inventory=lab.inventory, timeout=900)

    # the health check: all nodes, then the 3 pairs (no floor given); the 2 pairs with the victim are slow
    assert health.returncode != 0, 'a suspect node fails the check'
    published = health.summary['artifact_data']['trainops_health']
    assert [s['node'] for s in published['suspects']] == [victim], published
    assert published['verdict'].startswith('suspect: %s (' % victim), published['verdict']
    with open(published['file']) as handle:
        report = json.load(handle)
    groups = report['groups']
    assert len(groups) == 1 + 3, groups
    for group in groups[1:]:
        assert group['status'] == ('slow' if victim in group['nodes'] else 'ok'), group
    # lab nodes have no GPUs and no RDMA devices: healthy on that count
    assert all(row['status'] == 'ok' and row['gpus'] == 'none' for row in report['nodes']), report['nodes']
    print('\n'.join(published.get('lines') or []) or json.dumps(report, indent=1))

    # the job: it succeeds; the victim, and only it, is named while it runs and in the summary
    assert job.returncode == 0, job.stdout[-3000:]
    experiment = job.summary['artifact_data']['trainops_experiment']
    manifest = json.load(open(os.path.join(experiment['path'], 'manifest.json')))
    assert manifest['outcome'] == 'succeeded'
    found = manifest['summary']['stragglers']
    assert found['basis'] == 'compute_time_s' and [s['node'] for s in found['nodes']] == [victim], found
    assert re.search(r'%s rank \d+: running .*STRAGGLER compute time' % victim, job.stdout), job.stdout[-3000:]
    summary = open(os.path.join(experiment['path'], 'summary.txt')).read()
    assert re.search(r'^straggler  : %s: compute time ' % victim, summary, re.M), summary
    print(summary)
