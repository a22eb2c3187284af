# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node_order filter (rank order, master, its address): called directly, and from a template over a real
YAML inventory's hostvars, as roles/job, roles/nccl_env and playbooks/hostfile.yml call it."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleError, AnsibleFilterError
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

from ansible_collections.trainops.multinode.plugins.filter.node_order import FilterModule, master_addr_problems, node_order


def test_inventory_order_and_the_first_node_as_master():
    hv = {'a': {'ansible_host': '10.0.0.1'}, 'b': {}, 'c': {}}
    assert node_order(['a', 'b', 'c'], hv) == {
        'nodes': ['a', 'b', 'c'], 'master': 'a', 'master_addr': '10.0.0.1', 'ranks': {'a': 0, 'b': 1, 'c': 2}, 'flagged': []}


def test_the_flagged_node_comes_first_and_the_others_keep_their_order():
    hv = {'a': {}, 'b': {'trainops_master': False}, 'c': {'trainops_master': True, 'ansible_host': '10.0.0.3'}, 'd': {}}
    order = node_order(['a', 'b', 'c', 'd'], hv)
    assert order['nodes'] == ['c', 'a', 'b', 'd'] and order['master'] == 'c' and order['ranks']['c'] == 0
    assert order['master_addr'] == '10.0.0.3' and order['flagged'] == ['c']


def test_several_flagged_nodes_are_reported_and_the_first_one_is_master():
    hv = {'a': {}, 'b': {'trainops_master': 'yes'}, 'c': {'trainops_master': 'true'}}
    order = node_order(['a', 'b', 'c'], hv)
    assert order['flagged'] == ['b', 'c'] and order['nodes'] == ['b', 'a', 'c']


def test_a_string_false_is_false_and_nonsense_is_refused():
    assert node_order(['a', 'b'], {'a': {}, 'b': {'trainops_master': 'false'}})['master'] == 'a'
    with pytest.raises(AnsibleFilterError, match="trainops_master must be true or false, not 'maybe'"):
        node_order(['a'], {'a': {'trainops_master': 'maybe'}})


@pytest.mark.parametrize('host_vars, expected', [
    ({'trainops_master_addr': '192.168.1.1', 'ansible_host': '10.0.0.1'}, '192.168.1.1'),
    ({'ansible_host': '10.0.0.1'}, '10.0.0.1'),
    ({}, 'a'),
])
def test_master_addr_fallbacks(host_vars, expected):
    assert node_order(['a'], {'a': host_vars})['master_addr'] == expected


def test_only_hosts_in_the_play_take_part():
    hv = {'a': {'trainops_master': True}, 'b': {}, 'c': {}}
    order = node_order(['a', 'b', 'c', 'b'], hv, ['c', 'b'])
    assert order['nodes'] == ['b', 'c'] and order['flagged'] == [] and order['master'] == 'b'


def test_no_nodes():
    assert node_order([], {}, ['x']) == {'nodes': [], 'master': None, 'master_addr': None, 'ranks': {}, 'flagged': []}


def test_a_string_is_not_a_list_of_hosts():
    with pytest.raises(AnsibleFilterError, match='list of inventory host names'):
        node_order('a,b', {})


def test_registered():
    assert FilterModule().filters()['node_order'] is node_order


@pytest.fixture
def inventory(tmp_path, collection_finder):
    (tmp_path / 'hosts.yml').write_text(
        'trainops_nodes:\n'
        '  hosts:\n'
        '    gpu-01: {ansible_host: 10.0.0.11}\n'
        '    gpu-02: {ansible_host: 10.0.0.12, trainops_master: true, trainops_master_addr: 10.1.0.12}\n'
        '    gpu-03: {}\n')
    loader = DataLoader()
    return loader, InventoryManager(loader=loader, sources=[str(tmp_path / 'hosts.yml')])


def render(loader, manager, expression):
    variable_manager = VariableManager(loader=loader, inventory=manager)
    HostVars(inventory=manager, variable_manager=variable_manager, loader=loader)   # as a play run sets it up
    variables = variable_manager.get_vars(host=manager.get_host('gpu-01'))
    variables['ansible_play_hosts_all'] = ['gpu-01', 'gpu-02', 'gpu-03']
    return Templar(loader=loader, variables=variables).template(trust_as_template(expression))


def test_fqcn_filter_over_real_hostvars(inventory):
    loader, manager = inventory
    order = render(loader, manager,
                   "{{ groups['trainops_nodes'] | trainops.multinode.node_order(hostvars, ansible_play_hosts_all) }}")
    assert order == {'nodes': ['gpu-02', 'gpu-01', 'gpu-03'], 'master': 'gpu-02', 'master_addr': '10.1.0.12',
                     'ranks': {'gpu-02': 0, 'gpu-01': 1, 'gpu-03': 2}, 'flagged': ['gpu-02']}


def test_fqcn_filter_error_reaches_the_template(inventory):
    loader, manager = inventory
    with pytest.raises(AnsibleError, match='list of inventory host names'):
        render(loader, manager, "{{ 'gpu-01' | trainops.multinode.node_order(hostvars) }}")


GROUP_WIDE = {h: {'ansible_host': '10.0.0.%d' % i, 'trainops_master_addr': '10.1.0.1'}
              for i, h in enumerate(('n0', 'n1', 'n2', 's0'), 1)}


@pytest.mark.parametrize('spares, retries, min_nodes, exclude_after', [
    (['s0'], 2, 0, 0), ([], 1, 2, 0),
    (['s0'], 0, 0, 2),  # no retry, but a node that failed too often before is left out before the first attempt
])
def test_a_group_wide_master_addr_is_refused_where_a_retry_can_move_the_master(spares, retries, min_nodes, exclude_after):
    problems = master_addr_problems(['n0', 'n1', 'n2'], GROUP_WIDE, spares, retries, min_nodes, exclude_after)
    assert len(problems) == 1, problems
    hosts = 'n0, n1, n2, s0' if spares else 'n0, n1, n2'
    assert problems[0].startswith('trainops_master_addr is 10.1.0.1 for %d hosts (%s): ' % (len(hosts.split(',')), hosts))
    assert 'Set it per host' in problems[0]


@pytest.mark.parametrize('spares, retries, min_nodes', [
    (['s0'], 0, 0),  # no retry: the master stays
    ([], 2, 0),  # every node needed, no spare: a retry keeps the same nodes
    ([], 2, 3),  # as many as the nodes: none can be left out
])
def test_a_group_wide_master_addr_is_fine_where_the_master_cannot_move(spares, retries, min_nodes):
    assert master_addr_problems(['n0', 'n1', 'n2'], GROUP_WIDE, spares, retries, min_nodes) == []


@pytest.mark.parametrize('value', ['127.0.0.1', '::1', 'localhost'])
def test_a_loopback_master_addr_is_every_hosts_own(value):
    hv = {h: {'trainops_master_addr': value} for h in ('n0', 'n1', 's0')}
    assert master_addr_problems(['n0', 'n1'], hv, ['s0'], 2) == []


def test_per_host_master_addrs_and_a_host_without_one_are_fine():
    hv = {'n0': {'trainops_master_addr': '10.1.0.1'}, 'n1': {'trainops_master_addr': '10.1.0.2'}, 's0': {}}
    assert master_addr_problems(['n0', 'n1'], hv, ['s0'], 2) == []


def test_master_addr_problems_over_a_real_inventory_s_hostvars(tmp_path, collection_finder):
    (tmp_path / 'hosts.yml').write_text(
        'all:\n  vars: {trainops_master_addr: 10.1.0.1}\n  children:\n'
        '    trainops_nodes: {hosts: {gpu-01: {ansible_host: 10.0.0.1}, gpu-02: {ansible_host: 10.0.0.2},'
        ' gpu-03: {ansible_host: 10.0.0.3}}}\n')
    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(tmp_path / 'hosts.yml')])
    # the action launch_plan's nodes step calls it with the play's hostvars
    hostvars = render(loader, manager, '{{ hostvars }}')
    found = master_addr_problems(['gpu-01', 'gpu-02'], hostvars, ['gpu-03'], '2', '0')
    assert len(found) == 1 and 'for 3 hosts (gpu-01, gpu-02, gpu-03)' in found[0], found
