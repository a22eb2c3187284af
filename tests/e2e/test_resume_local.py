# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""End-to-end: a launch that resumes an earlier run from its checkpoint (trainops_resume_from, roles/job/tasks/
resume.yml), on the embedded local default's two nodes. The sbatch role's batch script asks for it after a requeue
(tests/e2e/test_sbatch_render.py renders and runs that script; the lab runs it under Slurm)."""

from __future__ import annotations

import glob
import json
import os

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_a_launch_resumes_an_earlier_runs_checkpoint_in_a_new_run(lab):
    tiny = {'config': 'config/tiny.yaml', 'nproc': 1}
    run_id_file = os.path.join(lab.root, 'last.run_id')
    first = lab.run('playbooks/launch.yml',
                    dict(tiny, overrides=['training.epochs=1'], trainops_run_id_file=run_id_file))
    assert first.returncode == 0, first.stdout[-4000:]
    old = first.summary['artifact_data']['trainops_experiment']
    old_id = old['run_id']
    assert open(run_id_file).read() == old_id + '\n' and oct(os.stat(run_id_file).st_mode & 0o777) == '0o600'
    old_env = json.load(open(os.path.join(old['path'], 'outputs', 'node0', 'rank_00_env.json')))
    steps_per_epoch = old_env['steps_per_epoch']
    old_checkpoint = glob.glob(os.path.join(lab.nodes, 'node0', 'state', '*', 'runs', old_id, 'outputs', 'checkpoint.pt'))
    assert len(old_checkpoint) == 1
    # written on every node (files/workspace/train.py): it survives the node that wrote it
    assert glob.glob(os.path.join(lab.nodes, 'node1', 'state', '*', 'runs', old_id, 'outputs', 'checkpoint.pt'))
    before = os.stat(old_checkpoint[0])
    old_manifest = open(os.path.join(old['path'], 'manifest.json')).read()

    # a run id no node has: refused, naming it, and nothing starts
    missing = lab.run('playbooks/launch.yml', dict(tiny, trainops_resume_from='multinode_nothing_20260101_000000'))
    assert missing.returncode != 0
    assert 'trainops_resume_from=multinode_nothing_20260101_000000: no node has that run' in ' '.join(
        missing.stdout.split()), missing.stdout[-3000:]

    again = lab.run('playbooks/launch.yml', dict(tiny, overrides=['training.epochs=2'],
                                                 trainops_resume_from=old_id, trainops_run_id_file=run_id_file))
    assert again.returncode == 0, again.stdout[-4000:]
    new = again.summary['artifact_data']['trainops_experiment']
    assert new['path'] != old['path'] and new['run_id'] != old_id
    assert open(run_id_file).read() == new['run_id'] + '\n'
    # the new run started at the old run's last step, on every rank, and trained the second epoch only
    for node, rank in (('node0', 0), ('node1', 1)):
        seen = json.load(open(os.path.join(new['path'], 'outputs', node, 'rank_%02d_env.json' % rank)))
        assert seen['resumed_from_global_step'] == steps_per_epoch, seen['resumed_from_global_step']
        assert seen['env']['TRAINOPS_RESUME_FROM'].endswith('/runs/%s/outputs' % old_id)
        metrics = os.path.join(new['path'], 'outputs', node, 'rank_%02d_metrics.jsonl' % rank)
        steps = [json.loads(line)['global_step'] for line in open(metrics)]
        assert steps and min(steps) > steps_per_epoch and max(steps) == 2 * steps_per_epoch, steps
    manifest = json.load(open(os.path.join(new['path'], 'manifest.json')))
    assert manifest['parameters']['resume_from'] == old_id and manifest['outcome'] == 'succeeded'
    assert 'training.resume=true' in manifest['nodes'][1]['argv']
    # the earlier run is left as it was: its checkpoint and its experiment
    after = os.stat(old_checkpoint[0])
    assert (after.st_mtime_ns, after.st_size) == (before.st_mtime_ns, before.st_size)
    assert open(os.path.join(old['path'], 'manifest.json')).read() == old_manifest
    assert not lab.leftovers()
