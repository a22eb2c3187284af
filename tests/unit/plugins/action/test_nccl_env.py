# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the nccl_env action plugin: it computes on the controller and never runs anything on the node."""

from __future__ import annotations

import os

import pytest
import yaml

from unittest.mock import MagicMock

from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from collection_finder import collection_finder_installed

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


# --- role_vars: the settings read from the role variables (roles/nccl_env/tasks/compute.yml) ------------------

@pytest.fixture
def collection_finder():
    with collection_finder_installed():
        yield


ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))

OLD_SETTINGS = (
    # what roles/nccl_env/tasks/compute.yml passed as settings before role_vars: the same settings must come out
    "{{ query('ansible.builtin.vars', *('nccl_env' | trainops.multinode.knob_values).variables)"
    "   | trainops.multinode.knob_values('nccl_env')"
    "   | combine({'nnodes': trainops_nccl_env_nnodes | int if trainops_nccl_env_nnodes | int > 0"
    "              else ansible_play_hosts | length}) }}")


def role_task_vars(**overrides):
    """task_vars of a task of roles/nccl_env: its defaults, a play of two hosts, and ``overrides``."""
    with open(os.path.join(ROOT, 'roles', 'nccl_env', 'defaults', 'main.yml')) as handle:
        variables = yaml.safe_load(handle)
    variables.update(inventory_hostname='gpu1', ansible_play_hosts=['gpu1', 'gpu2'])
    variables.update(overrides)
    return variables


def run_role_vars(task_vars, **args):
    action, connection = make_action(dict(args, facts=args.get('facts', mi300x()), role_vars=True))
    action._templar = Templar(loader=DataLoader(), variables=task_vars)
    action._settings = MagicMock(side_effect=action._settings)
    result = action.run(task_vars=task_vars)
    assert not connection.exec_command.called
    return result, action._settings.call_args[0][0]['settings']


ROLE_VARS_CASES = [
    {},
    {'trainops_channels': '28', 'trainops_min_channels': 'unset', 'trainops_nccl_debug': None,
     'trainops_gpu_vendor': 'auto', 'trainops_ib_tc': 106, 'trainops_nccl_env_nnodes': 3},
    {'trainops_channels': 'None', 'trainops_threads': ' 256 ', 'trainops_nproc_per_node': '8',
     'trainops_gpu_vendor': 'amd', 'trainops_nccl_env_nnodes': '0', 'trainops_ib_gid_index': 'auto'},
    {'trainops_nccl_env_nnodes': trust_as_template('{{ __nodes }}'), '__nodes': 4,
     'trainops_channels': trust_as_template('{{ 14 * 2 }}'), 'trainops_env': {'NCCL_ALGO': 'Ring'}},
    {'trainops_nccl_env_nnodes': '2.5', 'trainops_network_mode': 'tcp', 'trainops_nccl_library_version': '2.20.5'},
    {'trainops_nccl_env_nnodes': 'many', 'ansible_play_hosts': ['gpu1']},
]


@pytest.mark.parametrize('overrides', ROLE_VARS_CASES)
def test_role_vars_gives_the_settings_the_role_built_in_jinja(overrides, collection_finder):
    task_vars = role_task_vars(**overrides)
    old = Templar(loader=DataLoader(), variables=task_vars).template(trust_as_template(OLD_SETTINGS))
    result, settings = run_role_vars(task_vars)
    assert settings == old
    assert result['env'] == run({'facts': mi300x(), 'settings': old})['env']


def test_role_vars_takes_the_node_count_from_the_job_or_the_play():
    dummy, settings = run_role_vars(role_task_vars(trainops_nccl_env_nnodes=0))
    assert settings['nnodes'] == 2
    dummy, settings = run_role_vars(role_task_vars(trainops_nccl_env_nnodes='16'))
    assert settings['nnodes'] == 16


def test_role_vars_an_option_on_its_own_wins():
    result, dummy = run_role_vars(role_task_vars(trainops_channels=28), channels=16)
    assert result['env']['NCCL_MAX_NCHANNELS'] == '16'


def test_role_vars_checks_the_values_like_options():
    result, dummy = run_role_vars(role_task_vars(trainops_ib_tc='auto'))
    assert result['failed'] and result['msg'].startswith('nccl_env settings: in settings: ') and 'ib_tc' in result['msg']


def test_role_vars_fails_naming_a_role_variable_that_is_not_defined():
    task_vars = role_task_vars()
    del task_vars['trainops_ib_sl']
    with pytest.raises(AnsibleActionFail, match='the role variable trainops_ib_sl is not defined'):
        run_role_vars(task_vars)


@pytest.mark.parametrize('args', [{'settings': {'channels': 4}}, {'cluster': {}}])
def test_role_vars_is_not_with_settings_or_cluster(args):
    action, dummy = make_action(dict(args, role_vars=True))
    with pytest.raises(AnsibleActionFail, match='mutually exclusive'):
        action.run(task_vars=role_task_vars())
