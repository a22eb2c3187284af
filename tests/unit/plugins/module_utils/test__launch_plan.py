# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The launch plan's steps (module_utils/_launch_plan.py, the action launch_plan): knobs, nodes, checks, shares."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.trainops.multinode.plugins.filter.node_order import master_addr_problems, node_order
from ansible_collections.trainops.multinode.plugins.module_utils import _knobs, _launch_plan

ROOT = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..')


def defaults():
    values = {}
    for role in ('job', 'nccl_env'):
        with open(os.path.join(ROOT, 'roles', role, 'defaults', 'main.yml')) as handle:
            values.update(yaml.safe_load(handle))
    return values


def reader(variables):
    def read(var, default=KeyError):
        if var in variables:
            return variables[var]
        if default is KeyError:
            raise KeyError(var)
        return default
    return read


def knobs_step(**given):
    variables = dict(defaults(), trainops_workspace_src=os.path.realpath(os.path.join(ROOT, 'files', 'workspace')))
    variables.update(given)
    return _launch_plan.knobs(reader(variables), set(variables), 'node0')


def test_a_short_knob_wins_over_its_role_variable_and_every_short_knob_is_mapped():
    found = knobs_step(channels='42', trainops_channels=8, args='--lr 0.1 --name "run 1"')
    assert found['problems'] == [] and found['fields']['launch_problems'] == []
    values = found['fields']['knobs']
    assert set(values) == set(knob.key for knob in _knobs.SHORT)
    assert values['channels'] == '42'
    assert values['script_args'] == ['--lr', '0.1', '--name', 'run 1']


def test_the_values_that_do_not_fit_are_listed_one_line_each_with_today_s_messages():
    found = knobs_step(nproc='0', master_port='80')
    lines = found['fields']['launch_problems']
    assert any(line.startswith('nproc=0: ranks per node') for line in lines)
    assert any(line.startswith('master_port=80') for line in lines)
    assert len(lines) == 2


def test_short_given_follows_the_registry_order():
    assert _launch_plan.short_given({'threads', 'channels', 'unrelated'}) == ['channels', 'threads']


class HostVars(dict):
    pass


def nodes_step(hostvars, play_hosts, groups, node_list=None, with_spares=False, **variables):
    base = dict(ansible_play_hosts=play_hosts, ansible_play_hosts_all=play_hosts, groups=groups,
                trainops_nodes_group='trainops_nodes', trainops_spare_nodes='', trainops_min_nodes=0,
                trainops_launcher='ssh', trainops_retries=0, trainops_exclude_after=0)
    base.update(variables)
    return _launch_plan.nodes(reader(base), hostvars, node_order, master_addr_problems, node_list, with_spares)


def test_the_nodes_step_merges_every_node_s_problems_before_the_order():
    hostvars = {'a': {_launch_plan.KNOBS_RESULT: {'launch_problems': ['x', 'y']}},
                'b': {_launch_plan.KNOBS_RESULT: {'launch_problems': ['x']}}}
    found = nodes_step(hostvars, ['a', 'b'], {'trainops_nodes': ['a', 'b']})
    assert found['problems'] == ['x', 'y (on a)'] and found['fields'] == {}


def test_the_nodes_step_orders_the_nodes_master_first():
    hostvars = {'a': {}, 'b': {'trainops_master': True, 'ansible_host': '10.0.0.2'}}
    found = nodes_step(hostvars, ['a', 'b'], {'trainops_nodes': ['a', 'b']})
    assert found['problems'] == []
    assert found['fields']['order']['nodes'] == ['b', 'a']
    assert found['fields']['order']['master_addr'] == '10.0.0.2'
    assert found['fields']['spare_pool'] == {'spares': [], 'problems': []}
    assert nodes_step(hostvars, ['a', 'b'], {}, node_list=['a'])['problems'][0].startswith("The play's hosts must be")


def test_two_marked_masters_or_a_stray_host_name_the_inventory():
    hostvars = {'a': {'trainops_master': True}, 'b': {'trainops_master': 'yes'}}
    found = nodes_step(hostvars, ['a', 'b'], {'trainops_nodes': ['a', 'b']})
    assert found['problems'] == [
        "The play's hosts must be the members of group 'trainops_nodes' (trainops_nodes_group), with at most one marked "
        "trainops_master: true, and the spare nodes (trainops_spare_nodes). Nodes in play: ['a', 'b']; marked master: "
        "['a', 'b']. Fix the inventory."]


def test_a_group_wide_master_address_is_refused_when_a_retry_can_move_the_master():
    hostvars = {'a': {'trainops_master_addr': '10.0.0.9'}, 'b': {'trainops_master_addr': '10.0.0.9'}, 's': {}}
    found = nodes_step(hostvars, ['a', 'b', 's'], {'trainops_nodes': ['a', 'b'], 'spare': ['s']}, with_spares=True,
                       trainops_spare_nodes='spare', trainops_retries=1)
    assert found['fields']['spare_pool']['spares'] == ['s']
    assert len(found['problems']) == 1 and found['problems'][0].startswith('trainops_master_addr is 10.0.0.9 for 2 hosts')


def preflight(torch='2.5.1', ok=True):
    reach = {'ok': ok, 'ms': 3, 'ifname': 'eth0', 'source': '10.0.0.1', 'target': '10.0.0.1:29500'}
    return {'torch': {'version': torch}, 'reach': reach, 'paths': {}}


def checks_variables(**variables):
    base = dict(ansible_play_hosts=['a', 'b'], __trainops_order={'nodes': ['a', 'b']}, trainops_git_check='never',
                trainops_sync_workspace=True, trainops_git_reference='controller', trainops_allow_dirty=False,
                trainops_profile='', trainops_check_reachability=True,
                trainops_replace=False, __trainops_nccl_cluster={'table': 'T1\nT2'})
    base.update(variables)
    return reader(base)


def test_the_checks_step_lists_the_problems_across_nodes():
    found = _launch_plan.checks(checks_variables(), {'a': {'__trainops_preflight': preflight()},
                                                     'b': {'__trainops_preflight': preflight('2.4.0')}})
    assert len(found['problems']) == 1 and found['problems'][0].startswith('Nodes run different torch versions')


def test_the_checks_step_shows_the_reach_table_the_nccl_table_and_the_lost_spares():
    hostvars = {'a': {'__trainops_preflight': preflight()}, 'b': {'__trainops_preflight': preflight()}}
    found = _launch_plan.checks(checks_variables(__trainops_spare_pool={'spares': ['s']}), hostvars)
    assert found['problems'] == []
    assert found['lines'][-3:] == ['T1', 'T2', 'WARNING: spare nodes left out, no retry uses them (they failed their '
                                   'checks or could not be reached, above): s']
    assert found['lines'][1].split() == ['a', 'eth0', '10.0.0.1', '10.0.0.1:29500', 'ok', '3', 'ms']
    assert _launch_plan.checks(checks_variables(), hostvars, check_mode=True)['lines'] == ['T1', 'T2']


def test_a_node_that_left_the_play_is_named():
    found = _launch_plan.checks(checks_variables(ansible_play_hosts=['a']), {'a': {'__trainops_preflight': preflight()}})
    assert found['problems'] == ['Not starting anything: b failed or could not be reached during the checks above. '
                                 'Fix that node, or leave it out of the inventory.']
    assert _launch_plan.left_nodes(checks_variables(), 'after the checks passed') == []


@pytest.mark.parametrize('step', _launch_plan.STEPS)
def test_every_step_is_an_option_of_the_action(step):
    from ansible_collections.trainops.multinode.plugins.action.launch_plan import ARGUMENT_SPEC
    assert step in ARGUMENT_SPEC['step']['choices']


def preflight_variables(**variables):
    base = dict(trainops_sync_workspace=True, __trainops_rank=0, trainops_check_reachability=True, trainops_replace=False,
                trainops_master_port='29500', trainops_profile='', __trainops_master_addr='10.0.0.1',
                trainops_socket_ifname='auto', trainops_python='python3', trainops_preflight_import_torch=False,
                trainops_container_engine='docker', __trainops_state_dir='/n/state', trainops_node_id='',
                trainops_workspace_dir='/n/ws', trainops_reach_timeout='20', trainops_launcher='ssh',
                trainops_nproc_per_node='2', trainops_runtime='host', trainops_training_network='', __trainops_module=False,
                trainops_script='train.py', trainops_git_check='auto', __trainops_nodes=['a', 'b'],
                trainops_slurm_gpu_ids=[0, 1], ansible_connection='ssh')
    base.update(variables)
    return reader(base)


def test_the_master_checks_its_port_and_waits_for_every_peer_a_spare_takes_no_part_in_the_reach_check():
    master = _launch_plan.preflight_args(preflight_variables())
    assert master == dict(master_addr='10.0.0.1', socket_ifname='auto', python='python3', import_torch=False,
                          container_engine='docker', state_dir='/n/state', node_id='', identify_dirs=['state_dir', 'workspace_dir'],
                          workspace_dir='/n/ws', need_rsync=True, find_executables=[], reach_timeout=20, replace=False,
                          gpu_ids=[0, 1], nproc_per_node=2, master_port=29500, reach_peers=2, reach_port=29500)
    other = _launch_plan.preflight_args(preflight_variables(__trainops_rank='1'))
    assert 'master_port' not in other and 'reach_peers' not in other and other['reach_port'] == 29500
    spare = _launch_plan.preflight_args(preflight_variables(__trainops_rank=-1))
    assert 'reach_port' not in spare and 'master_port' not in spare
    assert 'reach_port' not in _launch_plan.preflight_args(preflight_variables(trainops_replace='true'))


def test_without_a_sync_the_node_s_script_and_checkout_are_checked_and_the_srun_launcher_s_gpus_are_its_own():
    args = _launch_plan.preflight_args(preflight_variables(trainops_sync_workspace=False, ansible_connection='local',
                                                           trainops_launcher='srun', trainops_runtime='container',
                                                           trainops_container={'name': 'c1'}, trainops_training_network='10.0.0.0/8',
                                                           trainops_profile='nsys'))
    assert args['script'] == 'train.py' and args['git_path'] == '/n/ws' and args['need_rsync'] is False
    assert args['identify_dirs'] == ['state_dir'] and args['container'] == 'c1' and args['training_network'] == '10.0.0.0/8'
    assert args['find_executables'] == ['nsys']
    assert args['gpu_ids'] == ([0, 1] if _launch_plan._launchers.capability('srun', 'inventory_gpu_ids') else [])
    assert _launch_plan.preflight_args(preflight_variables(trainops_runtime='container', trainops_container_name='c2'))['container'] == 'c2'


def test_the_profiler_a_node_needs_and_the_checks_step_names_a_node_without_it():
    assert [_launch_plan.profiler(p) for p in ('nsys', 'rocprof', 'torch', '', None)] == ['nsys', 'rocprofv3', '', '', '']
    hostvars = dict((node, {'__trainops_preflight': dict(preflight(), executables={'nsys': node == 'a'})}) for node in 'ab')
    found = _launch_plan.checks(checks_variables(trainops_profile='nsys'), hostvars)
    assert found['problems'] == [found['problems'][0]] and 'runs nsys, which is not on the PATH of b. ' in found['problems'][0]
