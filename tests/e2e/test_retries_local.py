# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""End-to-end: retries with resume (trainops_retries, roles/job/tasks/attempt.yml and next_attempt.yml, docs/failures.md
"Retries") on the embedded local default's two nodes (one rank each: global rank 0 on node0, rank 1 on node1).

A rank killed mid-run is retried from the latest checkpoint and the second attempt succeeds, its manifest linked to
the first both ways; a failure that repeats on the same node stops the retries after the first with that reason, is
remembered in the experiments directory (trainops_exclude_after) and keeps the next launch from starting on it; a
script that rewrites checkpoint.pt in place and is killed in the middle of it leaves the previous attempt's checkpoint
as it was (the retry got a copy, never a hard link: roles/job/tasks/resume.yml)."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import signal
import textwrap
import threading

import pytest

from playbook_runner import wait_until
from test_launch_local import processes_under

pytestmark = [pytest.mark.e2e, pytest.mark.real, pytest.mark.slow]

TINY = {'config': 'config/tiny.yaml', 'nproc': 1, 'trainops_poll_interval': 1}
INTERVAL = 4


def _json(path):
    with open(path) as handle:
        return json.load(handle)


def _last_step(lab, node):
    """The last global step node's rank recorded in its run's metrics (0 before any)."""
    steps = [0]
    for metrics in glob.glob(os.path.join(lab.nodes, node, 'state', '*', 'runs', '*', 'outputs', 'rank_*_metrics.jsonl')):
        with open(metrics) as handle:
            steps += [json.loads(line)['global_step'] for line in handle if line.strip().endswith('}')]
    return max(steps)


def _rank_processes(lab, node, script='train.py'):
    """node's training processes (``script`` run by torchrun's worker, not torchrun or the supervisor)."""
    return [pid for pid, cmd in processes_under(os.path.join(lab.nodes, node))
            if script in cmd and 'torchrun' not in cmd and 'torch.distributed.run' not in cmd
            and 'supervisor' not in cmd]


def _launch_and_kill(lab, extravars, until, what, script='train.py'):
    """Launch with ``extravars``; once ``until()`` returns something, kill node1's ranks. Returns the launch's result
    and what ``until`` returned."""
    done = {}
    launch = threading.Thread(target=lambda: done.update(proc=lab.run('playbooks/launch.yml', extravars, timeout=300)))
    launch.start()
    try:
        seen = wait_until(until, 150, what=what)
        killed = _rank_processes(lab, 'node1', script)
        assert killed, processes_under(lab.nodes)
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
    finally:
        launch.join(300)
    return done['proc'], seen


def test_a_rank_killed_mid_run_is_retried_from_the_latest_checkpoint_and_succeeds(lab):
    extravars = dict(TINY, retries=1, overrides=['training.max_steps=24', 'training.log_interval=1',
                                                 'training.checkpoint_interval=%d' % INTERVAL, 'debug.sleep_per_step_s=0.25',
                                                 'distributed.timeout_s=30'])
    proc, _seen = _launch_and_kill(lab, extravars, lambda: _last_step(lab, 'node1') >= 2 * INTERVAL + 1,
                                   'node1 past its second checkpoint')
    assert proc.returncode == 0, proc.stdout[-5000:]
    last = proc.summary['artifact_data']['trainops_experiment']
    assert last['outcome'] == 'succeeded', last
    attempts = last['attempts']
    assert [(a['attempt'], a['outcome'], a['decision']) for a in attempts] == [(1, 'failed', 'retry'), (2, 'succeeded', None)]
    first, second = attempts
    assert 'node1' in first['outcome_detail'], first
    # resumed from the latest checkpoint: no more steps lost than the checkpoint interval
    assert second['start_step'] > 0 and second['start_step'] % INTERVAL == 0, attempts
    assert 0 <= second['steps_lost'] <= INTERVAL and second['end_step'] == 24, attempts
    # the manifests link both ways; the second records the checkpoint it resumed
    one = _json(os.path.join(first['experiment_dir'], 'manifest.json'))
    two = _json(os.path.join(second['experiment_dir'], 'manifest.json'))
    assert (one['attempt'], one['first'], one['previous'], one['next']) == (1, first['run_id'], None, second['run_id'])
    assert (two['attempt'], two['first'], two['previous']) == (2, first['run_id'], first['run_id']) and 'next' not in two
    assert two['parameters']['resume_from'] == first['run_id'] and two['parameters']['retries'] == 1
    resumed = two['resumed_from']
    assert resumed['run_id'] == first['run_id'] and resumed['node'] == 'node0'
    # both nodes had it: none got a copy, so none was read for a checksum (only a copy sent to a node is)
    assert resumed['global_step'] == second['start_step'] and resumed['sha256'] is None and resumed['copied_to'] == []
    assert resumed['by'] == 'global_step' and resumed['why'].startswith('global step %d, ' % second['start_step'])
    assert resumed['path'].endswith('/runs/%s/outputs/checkpoint.pt' % first['run_id'])
    env = _json(os.path.join(second['experiment_dir'], 'outputs', 'node1', 'rank_01_env.json'))
    assert env['resumed_from_global_step'] == second['start_step']
    assert env['env']['TRAINOPS_RESUME_FROM'].endswith('/runs/%s/outputs' % first['run_id'])
    assert env['env']['TRAINOPS_PREVIOUS_WORLD_SIZE'] == '2' and env['previous_world_size'] == 2
    # the last summary lists both attempts
    summary = open(os.path.join(second['experiment_dir'], 'summary.txt')).read()
    assert 'attempts   : 2 of at most 2 (trainops_retries=1)' in summary, summary
    assert 'attempt 1  : %s failed' % first['run_id'] in summary and 'attempt 2  : %s succeeded' % second['run_id'] in summary
    # the same world size: no resized line; the slowest rank is named with its node
    assert 'resized' not in summary and 'slow rank  : ' in summary and ' on node' in summary, summary
    print('\n'.join(line for line in summary.splitlines() if line.startswith('attempt')))
    assert not lab.leftovers()


def test_a_failure_that_repeats_on_the_same_node_stops_after_the_first_retry(lab):
    # trainops_exclude_after=2: both failures count against node1 (node_failures.json), and the next launch of the
    # same inventory leaves it out before anything starts (no spare, trainops_min_nodes=0: it starts nothing)
    proc = lab.run('playbooks/launch.yml', dict(
        TINY, retries=2, trainops_exclude_after=2,
        overrides=['training.max_steps=16', 'training.log_interval=1', 'training.checkpoint_interval=%d' % INTERVAL,
                   'debug.fail_rank=1', 'debug.fail_step=7', 'distributed.timeout_s=30']), timeout=300)
    assert proc.returncode != 0, proc.stdout[-3000:]
    last = proc.summary['artifact_data']['trainops_experiment']
    attempts = last['attempts']
    assert [(a['attempt'], a['outcome'], a['decision']) for a in attempts] == [(1, 'failed', 'retry'), (2, 'failed', 'stop')]
    assert last['retry']['reason'] == 'the same node failing twice the same way (node1 exit code 1 in attempts 1 and 2)'
    assert attempts[1]['start_step'] == INTERVAL and attempts[1]['steps_lost'] == 6 - INTERVAL, attempts
    assert 'Retries: the same node failing twice the same way' in proc.failure_text, proc.failure_text
    manifest = _json(os.path.join(attempts[1]['experiment_dir'], 'manifest.json'))
    assert manifest['retry'] == last['retry'] and manifest['previous'] == attempts[0]['run_id']
    assert len([d for d in lab.experiment_dirs() if os.path.isdir(d)]) == 2
    remembered = _json(os.path.join(lab.experiments, 'node_failures.json'))['inventories']
    (counts,) = remembered.values()
    assert counts['node1']['failures'] == 2 and 'node0' not in counts, remembered
    assert [one['run_id'] for one in counts['node1']['last']] == [a['run_id'] for a in attempts]
    again = lab.run('playbooks/launch.yml', dict(TINY, trainops_exclude_after=2), timeout=300)
    assert again.returncode != 0, again.stdout[-3000:]
    assert ('Not starting attempt 1: node1 failed 2 times (trainops_exclude_after=2; node_failures.json)'
            in again.stdout + again.failure_text), again.stdout[-3000:]
    assert not lab.leftovers()


CHUNK = 64 * 1024
CHUNKS = 40
# a script of the user's own that writes checkpoint.pt in place, as the docs say not to: open(path, 'wb'), then the
# state over seconds. The first attempt writes it whole and fails in a way the policy retries (exit code 3); the
# retry rewrites it, slowly, and is killed in the middle of it.
IN_PLACE = textwrap.dedent('''\
    import os
    import sys
    import time

    out = os.environ['TRAINOPS_OUTPUT_DIR']
    os.makedirs(out, exist_ok=True)
    retried = bool(os.environ.get('TRAINOPS_RESUME_FROM'))
    with open(os.path.join(out, 'checkpoint.pt'), 'wb') as handle:
        for _ in range(%d):
            handle.write((b'B' if retried else b'A') * %d)
            handle.flush()
            if retried:
                time.sleep(0.2)
    sys.exit(0 if retried else 3)
    ''' % (CHUNKS, CHUNK))


def _half_written(lab, node):
    """node's checkpoint.pt being rewritten: some bytes, not all."""
    for path in glob.glob(os.path.join(lab.nodes, node, 'state', '*', 'runs', '*', 'outputs', 'checkpoint.pt')):
        if 0 < os.path.getsize(path) < CHUNK * CHUNKS:
            return path
    return None


def test_a_script_killed_while_it_rewrites_its_checkpoint_in_place_leaves_the_previous_attempts_intact(lab, tmp_path):
    src = tmp_path / 'own'
    (src / 'config').mkdir(parents=True)
    (src / 'in_place.py').write_text(IN_PLACE)
    (src / 'config' / 'none.yaml').write_text('{}\n')
    extravars = dict(src=str(src), script='in_place.py', config='config/none.yaml', nproc=1, retries=1,
                     trainops_poll_interval=1, trainops_pass_config_args=True, trainops_retry_policy={'retry_exit_codes': [3]})
    proc, half = _launch_and_kill(lab, extravars, lambda: _half_written(lab, 'node1'),
                                  "node1's retry rewriting its checkpoint", script='in_place.py')
    last = proc.summary['artifact_data']['trainops_experiment']
    attempts = last['attempts']
    assert [(a['attempt'], a['outcome'], a['decision']) for a in attempts] == [(1, 'failed', 'retry'), (2, 'failed', 'stop')], \
        proc.stdout[-4000:]
    first, second = attempts
    # killed in the middle of the rewrite: the retry's copy is half a checkpoint
    assert os.path.dirname(half).endswith('/runs/%s/outputs' % second['run_id']), half
    assert 0 < os.path.getsize(half) < CHUNK * CHUNKS and set(open(half, 'rb').read()) == {ord('B')}
    # the previous attempt's checkpoint is whole and as it was, on both nodes
    whole = hashlib.sha256(b'A' * CHUNK * CHUNKS).hexdigest()
    for node in ('node0', 'node1'):
        (previous,) = glob.glob(os.path.join(lab.nodes, node, 'state', '*', 'runs', first['run_id'], 'outputs',
                                             'checkpoint.pt'))
        with open(previous, 'rb') as handle:
            assert hashlib.sha256(handle.read()).hexdigest() == whole, node
        assert os.stat(previous).st_nlink == 1
    resumed = _json(os.path.join(second['experiment_dir'], 'manifest.json'))['resumed_from']
    assert resumed['run_id'] == first['run_id'] and resumed['by'] == 'mtime' and resumed['copied_to'] == [], resumed
    assert not lab.leftovers()
