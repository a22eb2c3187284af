# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPUs a rank will see: local indexes under a job's devices cgroup, Slurm's own without one
(tests/unit/fixtures/gpu_visibility/nodes.json; the first node was recorded on the lab's Slurm 22.05.8)."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _gpu_visibility as gv

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures', 'gpu_visibility')
with open(os.path.join(FIXTURES, 'nodes.json')) as _handle:
    NODES = dict((k, v) for k, v in json.load(_handle).items() if not k.startswith('_'))


def node_root(tmp_path, node):
    """A fake root with the node's /dev GPU files and /proc/self/cgroup; access() answers as the node's cgroup did."""
    (tmp_path / 'dev').mkdir()
    for name in node['devices']:
        (tmp_path / 'dev' / name).write_text('')
    (tmp_path / 'proc' / 'self').mkdir(parents=True)
    (tmp_path / 'proc' / 'self' / 'cgroup').write_text(node['cgroup'])
    allowed = set('/dev/' + name for name in node['allowed'])
    return str(tmp_path), allowed.__contains__


@pytest.mark.parametrize('name', sorted(NODES))
def test_what_the_ranks_see(tmp_path, name):
    node = NODES[name]
    root, access = node_root(tmp_path, node)
    view = gv.rank_view(gv.probe(root, node['vendor'], access), node['slurm_ids'], node['nproc'], node['vendor'])
    expect = node['expect']
    assert (view['constrained'], view['ids'], view['sees']) == (expect['constrained'], expect['ids'], expect['sees'])
    assert len(view['problems']) == len(expect['problems']), view['problems']
    for line, fragment in zip(view['problems'], expect['problems']):
        assert fragment in line, line


def test_the_probe_lists_gpu_devices_only_and_names_the_cgroup(tmp_path):
    root, access = node_root(tmp_path, NODES['lab_step_constrained'])
    view = gv.probe(root, 'nvidia', access)
    assert (view['host'], view['visible']) == ([0, 1, 2, 3], [2, 3])
    assert view['cgroup'] == '/trainops-lab4/lab-node02/slurm_lab-node02/uid_0/job_2/step_0/task_0'
    assert gv.session_cgroup(root) == view['cgroup']


def test_amd_render_nodes_driven_by_amdgpu(tmp_path):
    (tmp_path / 'dev' / 'dri').mkdir(parents=True)
    for number, driver in ((128, 'amdgpu'), (129, 'amdgpu'), (130, 'ast')):
        (tmp_path / 'dev' / 'dri' / ('renderD%d' % number)).write_text('')
        device = tmp_path / 'sys' / 'class' / 'drm' / ('renderD%d' % number) / 'device'
        device.mkdir(parents=True)
        (tmp_path / 'drivers' / driver).mkdir(parents=True, exist_ok=True)
        os.symlink(str(tmp_path / 'drivers' / driver), str(device / 'driver'))
    assert gv.gpu_devices(str(tmp_path), 'amd') == [(128, '/dev/dri/renderD128'), (129, '/dev/dri/renderD129')]
    view = gv.rank_view(gv.probe(str(tmp_path), 'amd', lambda path: path.endswith('129')), [1], 1, 'amd')
    assert (view['constrained'], view['ids']) == (True, [0])


def test_the_real_access_check_reads_permission(tmp_path):
    # without an injected access(): os.access under root (the kernel's device cgroup check on a node)
    (tmp_path / 'dev').mkdir()
    (tmp_path / 'dev' / 'nvidia0').write_text('')
    assert gv.probe(str(tmp_path), 'nvidia')['visible'] == [0]
