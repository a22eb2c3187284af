# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the nccl_env action plugin: it computes on the controller and never runs anything on the node."""

from __future__ import annotations

import pytest

from unittest.mock import MagicMock

from ansible.errors import AnsibleActionFail

from ansible_collections.trainops.multinode.plugins.action.nccl_env import ActionModule
from ansible_collections.trainops.multinode.tests.unit.plugins.action import fake_task
from ansible_collections.trainops.multinode.tests.unit.plugins.module_utils.test__nccl_env import (
    h100_ib,
    h100_sriov,
    lab_bond,
    mi300x,
    ports_down,
)


def make_action(args, check_mode=False):
    action, connection = fake_task.make_action(ActionModule, 'trainops.multinode.nccl_env', args, check_mode=check_mode)
    action._execute_module = MagicMock(side_effect=AssertionError('nccl_env must not run a module on the node'))
    action._low_level_execute_command = MagicMock(side_effect=AssertionError('nccl_env must not run a command'))
    return action, connection


def run(args, host='gpu1', check_mode=False):
    action, connection = make_action(args, check_mode)
    result = action.run(task_vars={'inventory_hostname': host})
    assert not connection.exec_command.called and not connection.put_file.called
    return result


def test_computes_the_environment_on_the_controller():
    res = run({'facts': mi300x(), 'channels': 28, 'nproc_per_node': 8})
    assert not res.get('failed') and res['changed'] is False
    assert res['transport'] == 'rdma' and res['link_layer'] == 'roce' and res['vendor'] == 'amd'
    assert res['env']['NCCL_IB_HCA'] == '=' + ','.join('bnxt_re%d:1' % i for i in range(8))
    # RCCL of unknown version: the ports' shared GID index pinned; 28 channels are within every RCCL's limit
    assert res['env']['NCCL_IB_GID_INDEX'] == '3' and res['env']['NCCL_MAX_NCHANNELS'] == '28'
    assert res['library'] == {'name': 'rccl', 'version': None, 'source': None, 'read_in': None} and res['left_out'] == {}
    assert res['sources']['NCCL_DEBUG'] == 'default' and res['env']['NCCL_DEBUG'] == 'WARN'
    assert res['sources']['NCCL_MAX_NCHANNELS'] == 'knob'
    assert res['errors'] == [] and res['warning_messages'] == [] and 'warnings' not in res
    assert res['nccl_conf_path'] == '/etc/rccl.conf'
    assert res['env_file'].startswith('# NCCL/RCCL environment of gpu1')
    assert 'NCCL_SOCKET_IFNAME==enp49s0f0np0\n' in res['env_file'] and 'HSA_ENABLE_SDMA=0\n' in res['env_file']
    assert 'NCCL_MAX_NCHANNELS=28\n' in res['nccl_conf'] and '\nHSA_ENABLE_SDMA=' not in res['nccl_conf']
    assert res['msg'] == 'gpu1: transport rdma, 8 variable(s)'


def test_a_value_the_library_would_clamp_fails_naming_the_node_value_and_limit():
    # RCCL >= 2.28 rcclOptThreadBlockSize clamps RCCL_THREADS_PER_BLOCK to 256; the node count comes from the job
    res = run({'facts': mi300x(), 'threads': 512, 'library_version': '2.28.3', 'nnodes': 2})
    assert res['failed'] and 'env_file' not in res
    assert res['msg'].startswith('gpu1: the NCCL environment cannot be computed:\ngpu1: threads 512 is not a value '
                                 'RCCL 2.28.3 takes (192, 256)')
    assert 'it would run 256 threads' in res['msg']
    # an unknown version where the limit depends on it: the node and the knob to set
    res = run({'facts': mi300x(), 'threads': 256})
    assert res['failed'] and 'gpu1: threads 256: the RCCL version is unknown' in res['msg']
    assert 'trainops_nccl_library_version' in res['msg']


def test_check_mode_gives_the_same_result():
    args = {'facts': h100_ib(), 'channels': 32}
    normal, check = run(args), run(args, check_mode=True)
    assert check['env'] == normal['env'] and check['transport'] == normal['transport'] == 'rdma'


def test_errors_fail_with_the_host_prefix():
    res = run({'facts': h100_sriov(), 'nproc_per_node': 8, 'socket_ifname': 'ens9', 'library_version': '2.20.5'},
              host='gpu7')
    assert res['failed'] is True
    lines = res['msg'].splitlines()
    assert lines[0] == 'gpu7: the NCCL environment cannot be computed:'
    assert len(lines) == 4 and all(line.startswith('gpu7: ') for line in lines[1:])
    assert any('RoCE v2 GID at different indexes' in line and 'NCCL 2.20.5' in line for line in lines)
    assert any('nproc_per_node 8 is larger than the 4 GPU(s)' in line for line in lines)
    assert any("socket_ifname 'ens9' does not exist" in line for line in lines)
    assert len(res['errors']) == 3 and not res['errors'][0].startswith('gpu7')
    assert 'env_file' not in res and 'nccl_conf' not in res


def test_warnings_are_shown_with_the_host_and_returned_plain():
    res = run({'facts': ports_down()}, host='gpu3')
    assert not res.get('failed') and res['transport'] == 'tcp'
    assert res['warnings'] and all(w.startswith('gpu3: ') for w in res['warnings'])
    assert res['warning_messages'] and not res['warning_messages'][0].startswith('gpu3')
    assert 'no port is usable' in res['warning_messages'][0]


def test_explicit_null_versus_missing_settings():
    assert 'NCCL_DEBUG' not in run({'facts': lab_bond(), 'nccl_debug': None})['env']
    res = run({'facts': lab_bond(), 'nccl_debug': 'INFO', 'env_overrides': {'NCCL_IB_DISABLE': None}})
    assert res['env']['NCCL_DEBUG'] == 'INFO' and res['sources']['NCCL_DEBUG'] == 'knob'
    assert res['unset'] == ['NCCL_IB_DISABLE'] and 'NCCL_IB_DISABLE' not in res['env']
    res = run({'facts': h100_sriov(), 'gid_index': None})  # null: leave the GID index to NCCL
    assert not res.get('failed') and 'NCCL_IB_GID_INDEX' not in res['env']
    res = run({'facts': h100_sriov(), 'ib_hca': None, 'socket_ifname': None, 'gid_index': 5})
    assert res['env']['NCCL_IB_HCA'] == '=mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1'
    assert res['env']['NCCL_SOCKET_IFNAME'] == '=eth0'


def test_settings_as_one_dict_are_checked_like_options_and_an_option_wins():
    res = run({'facts': mi300x(), 'settings': {'channels': '28', 'nccl_debug': None, 'nproc_per_node': 4},
               'nproc_per_node': 8})
    assert not res.get('failed') and res['env']['NCCL_MAX_NCHANNELS'] == '28' and 'NCCL_DEBUG' not in res['env']
    res = run({'facts': mi300x(), 'settings': {'ib_tc': 'auto'}})
    assert res['failed'] and res['msg'].startswith('nccl_env settings: in settings: ') and 'ib_tc' in res['msg']
    res = run({'facts': mi300x(), 'settings': {'ib_timeout': 20}})
    assert res['failed'] and res['msg'] == 'nccl_env settings: unknown setting(s) in settings: ib_timeout'


@pytest.mark.parametrize('args, expect', [
    ({}, 'one of the following is required: facts, cluster'),
    ({'facts': {}, 'cluster': {}}, 'mutually exclusive'),
    ({'facts': {}, 'network_mode': 'fast'}, 'network_mode'),
    ({'facts': {}, 'channels': 'many'}, 'channels'),
    ({'facts': {}, 'bogus': 1}, 'bogus'),
])
def test_invalid_arguments(args, expect):
    action, dummy = make_action(args)
    with pytest.raises(AnsibleActionFail) as exc:
        action.run(task_vars={'inventory_hostname': 'gpu1'})
    assert expect in str(exc.value)


def test_cluster_check_passes_with_a_table():
    results = dict((h, run({'facts': h100_ib()}, host=h)) for h in ('gpu1', 'gpu2'))
    res = run({'cluster': results}, host='gpu1')
    assert not res.get('failed') and res['transports'] == {'gpu1': 'rdma', 'gpu2': 'rdma'}
    assert res['msg'].startswith('NCCL settings agree across 2 node(s):')
    assert 'gpu2' in res['table'] and 'rdma (infiniband)' in res['table']


def test_cluster_check_fails_on_mixed_transports():
    results = {'gpu1': run({'facts': h100_ib()}, host='gpu1'), 'gpu2': run({'facts': ports_down()}, host='gpu2')}
    res = run({'cluster': results, 'channels': 4})
    assert res['failed'] is True
    assert 'rdma on gpu1; tcp on gpu2' in res['msg'] and res['table'] in res['msg']
    assert any('settings ignored with cluster: channels' in w for w in res['warnings'])


def test_gpu_ids_reach_the_ranks_environment():
    # what roles/nccl_env passes for an SSH launch on a node the Slurm job shares: its GPUs 4-7
    res = run({'facts': h100_ib(), 'nproc_per_node': 4, 'gpu_ids': [4, 5, 6, 7]})
    assert not res.get('failed') and res['env']['CUDA_VISIBLE_DEVICES'] == '4,5,6,7'
    assert 'CUDA_VISIBLE_DEVICES=4,5,6,7\n' in res['env_file'] and '\nCUDA_VISIBLE_DEVICES=' not in res['nccl_conf']
    assert 'CUDA_VISIBLE_DEVICES' not in run({'facts': h100_ib(), 'nproc_per_node': 4, 'gpu_ids': []})['env']
