# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""End-to-end: spare nodes (trainops_spare_nodes, docs/failures.md "Spare nodes") on the embedded local default with a
third logical node, node2, in the inventory group ``spares``: one rank per node, 64 short steps, a checkpoint every 4.

The master node0, whose rank is killed twice the same way, is left out of the third attempt and the spare takes its
node rank 0 and the rendezvous (a first spare that cannot be reached is left out at the start, with a warning); the
job resumes from the checkpoint, which the spare gets copied from node1 through the controller (every node writes the
checkpoint: files/workspace/train.py), and succeeds. While it runs, status.yml finds it on the spare, and stop.yml
refuses to stop it without the spare group (the spare would go on running). (One launch of three attempts, for CI's
time: a node of another rank replaced is the lab's, tests/lab/test_spares_lab.py, with a node lost for real.)"""

from __future__ import annotations

import glob
import json
import os
import signal
import threading

import pytest
import yaml

from playbook_runner import REPO, wait_until
from test_retries_local import INTERVAL, TINY, _json, _rank_processes

pytestmark = [pytest.mark.e2e, pytest.mark.real, pytest.mark.slow]

# long enough for the third attempt, on the spare, to run while status.yml and stop.yml look at it (sleeps are cheap):
# all of config/tiny.yaml's two epochs
MAX_STEPS = 64
OVERRIDES = ['training.max_steps=%d' % MAX_STEPS, 'training.log_interval=1', 'training.checkpoint_interval=%d' % INTERVAL,
             'debug.sleep_per_step_s=0.2', 'distributed.timeout_s=30']


def spare_inventory(lab, dead_spare=False):
    """The local default's two nodes and a third, node2, in the group spares (same settings); with ``dead_spare``, a
    spare before it that cannot be reached (SSH to a closed port): the launch leaves it out and starts."""
    with open(os.path.join(REPO, 'inventories', 'local', 'hosts.yml')) as handle:
        local = yaml.safe_load(handle)['trainops_nodes']
    spares = {'gone': {'ansible_connection': 'ssh', 'ansible_host': '127.0.0.1', 'ansible_port': 1}} if dead_spare else {}
    spares['node2'] = None
    inventory = {'all': {'vars': local['vars'], 'children': {
        'trainops_nodes': {'hosts': local['hosts']}, 'spares': {'hosts': spares}}}}
    path = os.path.join(lab.root, 'spares-dead.yml' if dead_spare else 'spares.yml')
    with open(path, 'w') as handle:
        yaml.safe_dump(inventory, handle)
    return path


def _runs_steps(lab, node):
    """{run directory: the last global step of node's rank there} of every run on node."""
    found = {}
    for metrics in glob.glob(os.path.join(lab.nodes, node, 'state', '*', 'runs', '*', 'outputs', 'rank_*_metrics.jsonl')):
        with open(metrics) as handle:
            steps = [json.loads(line)['global_step'] for line in handle if line.strip().endswith('}')]
        run = metrics.split('/outputs/')[0]
        found[run] = max(steps + [found.get(run, 0)])
    return found


def _kill_twice(lab, node):
    """Kill node's rank in the first attempt past its second checkpoint, then in the second attempt past its first
    step after the resume: the same node failing twice the same way."""
    seen = {}
    for attempt, past in ((1, 2 * INTERVAL + 1), (2, 2 * INTERVAL + 2)):
        run = wait_until(lambda: next((r for r, step in _runs_steps(lab, node).items()
                                       if r not in seen and step >= past), None),
                         150, what='%s past step %d in attempt %d' % (node, past, attempt))
        seen[run] = True
        killed = _rank_processes(lab, node)
        assert killed, lab.leftovers()
        for pid in killed:
            os.kill(pid, signal.SIGKILL)


def _status_and_stop_find_the_spare(lab):
    """While the third attempt runs on the spare node2 (node rank 0) and node1: status.yml given the spare group
    shows the run on both, with their node ranks; stop.yml without it stops nothing and names node2 and the value to give."""
    run = wait_until(lambda: next(iter(_runs_steps(lab, 'node2')), None), 150, what='the third attempt on node2')
    run_id = os.path.basename(run)
    status = lab.run('playbooks/status.yml', {'trainops_spare_nodes': 'spares', 'collect': False},
                     inventory=spare_inventory(lab))
    assert status.returncode == 0, status.stdout[-3000:]
    states = status.summary['artifact_data']['trainops_status']
    assert dict((host, (job['run_id'], job['node_rank'])) for host, job in states.items()) == {
        'node2': (run_id, 0), 'node1': (run_id, 1)}, states
    refused = lab.run('playbooks/stop.yml', {}, inventory=spare_inventory(lab))
    assert refused.returncode != 0, refused.stdout[-3000:]
    assert ('Nothing stopped or collected: run %s runs on node2 (its nodes: node2, node1), not a host of this play. '
            'Give the spare nodes\' group the launch was given: -e trainops_spare_nodes=<group>.' % run_id
            in refused.failure_text), refused.failure_text


def _launch_and_kill_twice(lab, node):
    done = {}
    launch = threading.Thread(target=lambda: done.update(proc=lab.run('playbooks/launch.yml', dict(
        TINY, retries=2, overrides=OVERRIDES, trainops_spare_nodes='spares'), timeout=300,
        inventory=spare_inventory(lab, dead_spare=True))))
    launch.start()
    try:
        _kill_twice(lab, node)
        _status_and_stop_find_the_spare(lab)
    finally:
        launch.join(300)
    proc = done['proc']
    # the spare that cannot be reached is named, left out, and fails nothing: the next one, node2, is used
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert proc.summary['stats']['gone']['ignored'] == 1 and proc.summary['stats']['gone']['unreachable'] == 0, \
        proc.summary['stats']
    last = proc.summary['artifact_data']['trainops_experiment']
    attempts = last['attempts']
    assert last['outcome'] == 'succeeded', last
    assert [(a['attempt'], a['outcome'], a['decision']) for a in attempts] == [
        (1, 'failed', 'retry'), (2, 'failed', 'retry'), (3, 'succeeded', None)], attempts
    summary = open(os.path.join(attempts[-1]['experiment_dir'], 'summary.txt')).read()
    print('\n'.join(line for line in summary.splitlines() if line.startswith('attempt')))
    third = attempts[2]
    # resumed from the latest checkpoint: no more steps lost than the checkpoint interval
    assert third['start_step'] >= INTERVAL and third['start_step'] % INTERVAL == 0, attempts
    assert 0 <= third['steps_lost'] <= INTERVAL and third['end_step'] == MAX_STEPS, attempts
    manifests = [_json(os.path.join(a['experiment_dir'], 'manifest.json')) for a in attempts]
    assert not lab.leftovers()
    return attempts, manifests


def test_the_master_lost_twice_moves_node_rank_0_to_the_spare_with_the_checkpoint_of_node1(lab):
    attempts, manifests = _launch_and_kill_twice(lab, 'node0')
    # (the killed rank: signal SIGKILL, from torchrun's line in node.log or the watcher's record)
    cause = attempts[1]['failure'][0][1]
    assert attempts[1]['reason'].endswith(': node0 failed twice the same way (%s): replaced by node2 as node rank 0'
                                          % cause), attempts[1]
    assert [a['nodes'] for a in attempts] == [['node0', 'node1'], ['node0', 'node1'], ['node2', 'node1']]
    third = manifests[2]
    assert third['replaced'] == [{'node': 'node0', 'by': 'node2', 'node_rank': 0,
                                  'reason': 'failed twice the same way (%s)' % cause}], third['replaced']
    assert [(n['host'], n['ranks']) for n in third['nodes']] == [('node2', [0]), ('node1', [1])]
    assert third['master']['host'] == 'node2' and third['spares'] == []
    assert manifests[0]['spares'] == ['node2'] and manifests[0]['replaced'] == []
    # node0 ran nothing in the third attempt, node2 nothing before it
    assert not glob.glob(os.path.join(lab.nodes, 'node0', 'state', '*', 'runs', attempts[2]['run_id']))
    for attempt in attempts[:2]:
        assert not glob.glob(os.path.join(lab.nodes, 'node2', 'state', '*', 'runs', attempt['run_id']))
    # the checkpoint came from node1 (node0, which wrote the first copy, is out), copied to the spare, checked
    resumed = third['resumed_from']
    assert resumed['node'] == 'node1' and resumed['copied_to'] == ['node2'], resumed
    # (the second attempt ended before a checkpoint of its own: no checkpoint.json records the step of the one it
    # carried, and the start step is the second attempt's)
    assert resumed['global_step'] in (None, attempts[2]['start_step']) and len(resumed['sha256']) == 64
    copied = glob.glob(os.path.join(lab.nodes, 'node2', 'state', '*', 'runs', attempts[2]['run_id'], 'outputs',
                                    'checkpoint.pt'))
    assert len(copied) == 1
    env = _json(os.path.join(attempts[2]['experiment_dir'], 'outputs', 'node2', 'rank_00_env.json'))
    assert env['resumed_from_global_step'] == attempts[2]['start_step']
    assert env['env']['TRAINOPS_RESUME_FROM'] == os.path.dirname(copied[0])
