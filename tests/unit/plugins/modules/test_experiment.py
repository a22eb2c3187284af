# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import contextlib
import json
import os

import pytest

from ansible.module_utils import basic

from ansible_collections.trainops.multinode.plugins.modules import experiment

from ansible.module_utils.testing import patch_module_args


@contextlib.contextmanager
def module_args(args):
    with patch_module_args(args):
        yield


class ModuleExit(Exception):
    def __init__(self, result, failed):
        super(ModuleExit, self).__init__(result)
        self.result = result
        self.failed = failed


def _exit_json(self, **kwargs):
    raise ModuleExit(kwargs, False)


def _fail_json(self, msg, **kwargs):
    kwargs['msg'] = msg
    raise ModuleExit(kwargs, True)


@pytest.fixture(autouse=True)
def patch_exits(monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, 'exit_json', _exit_json)
    monkeypatch.setattr(basic.AnsibleModule, 'fail_json', _fail_json)


def run_module(args):
    with module_args(args):
        with pytest.raises(ModuleExit) as exc:
            experiment.main()
    return exc.value


def test_created(tmp_path):
    res = run_module({'state': 'created', 'root': str(tmp_path / 'root'), 'name': 'multinode_2n_20261122_083000'})
    assert not res.failed
    assert res.result['changed'] is True
    assert res.result['name'] == 'multinode_2n_20261122_083000'
    assert os.path.isdir(os.path.join(res.result['path'], 'logs'))
    assert os.path.isdir(os.path.join(res.result['path'], 'outputs'))

    res2 = run_module({'root': str(tmp_path / 'root'), 'name': 'multinode_2n_20261122_083000'})  # state defaults to created
    assert res2.result['name'] == 'multinode_2n_20261122_083000_2'


def test_created_check_mode(tmp_path):
    res = run_module({'root': str(tmp_path / 'root'), 'name': 'x', '_ansible_check_mode': True})
    assert res.result['changed'] is True
    assert res.result['path'] == str(tmp_path / 'root' / 'x')
    assert not (tmp_path / 'root').exists()


def test_created_requires_root_and_name(tmp_path):
    res = run_module({'state': 'created', 'name': 'x'})
    assert res.failed
    assert 'root' in res.result['msg']


def test_created_bad_name(tmp_path):
    res = run_module({'state': 'created', 'root': str(tmp_path), 'name': '../escape'})
    assert res.failed
    assert 'single' in res.result['msg']


def test_reported(tmp_path):
    outputs = tmp_path / 'outputs' / 'node0'
    outputs.mkdir(parents=True)
    for rank in range(2):
        lines = [json.dumps(dict(rank=rank, world_size=2, local_rank=rank, node='n0', epoch=0, step=s, global_step=s,
                                 loss=4.0 / s, grad_norm=1.0, lr=0.1, step_time_s=0.25, samples_per_s=64.0, tflops=None))
                 for s in range(1, 4)]
        (outputs / 'rank_{0}_metrics.jsonl'.format(rank)).write_text('\n'.join(lines) + '\n{"rank": ')
    res = run_module({'state': 'reported', 'path': str(tmp_path), 'manifest': {'nproc_per_node': 1}})
    assert not res.failed
    assert res.result['changed'] is True
    summary = res.result['summary']
    assert summary['world_size'] == 2
    assert summary['ranks_seen'] == [0, 1]
    assert summary['steps'] == 3
    assert summary['loss_decreased'] is True
    assert summary['throughput_samples_per_s'] == pytest.approx(128.0)
    assert summary['tflops_total'] is None
    assert summary['truncated_files'] == ['node0/rank_0_metrics.jsonl', 'node0/rank_1_metrics.jsonl']
    assert summary['nodes'] == ['node0'] and summary['hosts'] == ['n0']
    assert res.result['manifest_path'] == str(tmp_path / 'manifest.json')
    assert isinstance(res.result['table'], list)
    manifest = json.loads((tmp_path / 'manifest.json').read_text())
    assert manifest['nproc_per_node'] == 1
    assert manifest['summary']['steps'] == 3

    again = run_module({'state': 'reported', 'path': str(tmp_path), 'manifest': {'nproc_per_node': 1}})
    assert again.result['changed'] is False


def test_reported_check_mode(tmp_path):
    res = run_module({'state': 'reported', 'path': str(tmp_path), '_ansible_check_mode': True})
    assert not res.failed
    assert res.result['summary']['metrics_found'] is False
    assert not (tmp_path / 'manifest.json').exists()


def test_reported_missing_path(tmp_path):
    res = run_module({'state': 'reported', 'path': str(tmp_path / 'missing')})
    assert res.failed
    assert 'does not exist' in res.result['msg']


def test_reported_refuses_a_straggler_threshold_out_of_range_naming_it(tmp_path):
    res = run_module({'state': 'reported', 'path': str(tmp_path), 'straggler_threshold': 0})
    assert res.failed
    assert res.result['msg'].startswith('straggler_threshold=0.0: ')
    assert not (tmp_path / 'manifest.json').exists()
    ok = run_module({'state': 'reported', 'path': str(tmp_path), 'straggler_threshold': 0.3})
    assert not ok.failed and ok.result['summary']['stragglers']['threshold'] == 0.3
