# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The plan of a resume (module_utils/_resume_plan.py; roles/job/tasks/resume.yml): the resumed run's manifest read
within bounds on the controller, and what each node does and is told. (The source's choice and the copies' route:
tests/unit/plugins/filter/test_launch_dirs.py.)"""

from __future__ import annotations

import json

from ansible_collections.trainops.multinode.plugins.module_utils import _resume_plan as rp


def test_the_resumed_run_s_manifest_is_its_sibling_read_within_bounds(tmp_path, monkeypatch):
    (tmp_path / 'run_a').mkdir()
    manifest = {'world_size': 4, 'checkpoint': {'global_step': 8}, 'checkpoints': {'node0': {'global_step': 8}},
                'nodes': [{'host': 'node0'}]}
    (tmp_path / 'run_a' / 'manifest.json').write_text(json.dumps(manifest))
    assert rp.resumed_record(str(tmp_path / 'run_b'), 'run_a') == (
        {'world_size': 4, 'checkpoint': {'global_step': 8}, 'checkpoints': {'node0': {'global_step': 8}}}, [])
    # no such run on this controller (another controller's), or a run id that is no directory name
    assert rp.resumed_record(str(tmp_path / 'run_b'), 'run_c') == ({}, [])
    assert rp.resumed_record(str(tmp_path / 'run_b'), '../run_a') == ({}, [])
    assert rp.manifest_path('/e/run_b', '..') is None and rp.manifest_path('/e/run_b/', 'run_a') == '/e/run_a/manifest.json'
    # a link is not followed, a manifest over the bound not read: each said
    (tmp_path / 'run_l').mkdir()
    (tmp_path / 'run_l' / 'manifest.json').symlink_to(tmp_path / 'run_a' / 'manifest.json')
    record, refused = rp.resumed_record(str(tmp_path / 'run_b'), 'run_l')
    assert record == {} and len(refused) == 1 and 'symbolic link' in refused[0]
    monkeypatch.setattr(rp, 'MANIFEST_MAX_BYTES', 10)
    record, refused = rp.resumed_record(str(tmp_path / 'run_b'), 'run_a')
    assert record == {} and 'more than the 10 read' in refused[0]


def found(run=True, checkpoint=True):
    return {'run': run, 'checkpoint': {'isreg': checkpoint, 'path': '/s/runs/r1/outputs/checkpoint.pt'}}


def test_each_node_is_told_where_its_checkpoint_is_and_the_resumed_world_size():
    hostvars = {'node0': {'__trainops_resume_found': found()}, 'spare': {'__trainops_resume_found': found(False, False)}}
    resume = rp.plan(['node0', 'spare'], hostvars, 'r1', {'world_size': 2})
    assert resume['receivers'] == ['spare'] and resume['pull'] == [] and resume['source'] == 'node0'
    assert rp.for_node(resume, 'node0', found(), '/n0/runs/r1', '/n0/runs/r2/outputs') == {
        'carry': True, 'digest': True, 'args': ['--override', 'training.resume=true'],
        'env': {'TRAINOPS_RESUME_FROM': '/n0/runs/r1/outputs', 'TRAINOPS_PREVIOUS_WORLD_SIZE': '2'}}
    assert rp.for_node(resume, 'spare', found(False, False), '/s/runs/r1', '/s/runs/r2/outputs') == {
        'carry': False, 'digest': False, 'args': ['--override', 'training.resume=true'],
        'env': {'TRAINOPS_RESUME_FROM': '/s/runs/r2/outputs', 'TRAINOPS_PREVIOUS_WORLD_SIZE': '2'}}
    # without the config arguments nothing is copied: the script is only told where the node has the run
    bare = rp.plan(['node0', 'spare'], hostvars, 'r1', {}, pass_config=False)
    assert bare['receivers'] == [] and bare['previous_env'] == {}
    assert rp.for_node(bare, 'node0', found(), '/n0/runs/r1', '/o', pass_config=False) == {
        'carry': False, 'digest': False, 'args': [], 'env': {'TRAINOPS_RESUME_FROM': '/n0/runs/r1/outputs'}}
    assert rp.for_node(bare, 'spare', found(False, False), '/s/runs/r1', '/o', pass_config=False)['env'] == {}
    # no node with the checkpoint: nobody gets a copy; with the mesh, the receivers pull first
    assert rp.plan(['spare'], hostvars, 'r1')['receivers'] == []
    assert rp.plan(['node0', 'spare'], hostvars, 'r1', ssh_mesh=True)['pull'] == ['spare']
    assert rp.sent(dict(resume), {'node0': {'__trainops_resume': {'carried': {'dest': '/d', 'checksum': 'ab'}}}}) == {
        'dest': '/d', 'checksum': 'ab'}
    assert rp.controller_copy('/e/r2', 'node0') == '/e/r2/resumed/node0/checkpoint.pt'
