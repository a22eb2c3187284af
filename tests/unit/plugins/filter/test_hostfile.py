# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The hostfile filter: called directly, and from a template over a real inventory's hostvars."""

from __future__ import annotations

import pytest

from ansible import constants as C
from ansible.errors import AnsibleError, AnsibleFilterError
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

from ansible_collections.trainops.multinode.plugins.filter.hostfile import FilterModule, hostfile

HOSTVARS = {
    'node0': {'ansible_host': '10.0.0.11', 'trainops_nproc_per_node': 8},
    'node1': {'ansible_host': '10.0.0.12', 'trainops_nproc_per_node': '4'},
    'node2': {},
}


def test_deepspeed_from_hosts_and_hostvars_in_the_order_given():
    assert hostfile(['node1', 'node0'], HOSTVARS) == '10.0.0.12 slots=4\n10.0.0.11 slots=8\n'


@pytest.mark.parametrize('fmt, expected', [
    ('deepspeed', '10.0.0.11 slots=8\n10.0.0.12 slots=4\nnode2 slots=2\n'),
    ('openmpi', '10.0.0.11 slots=8\n10.0.0.12 slots=4\nnode2 slots=2\n'),
    ('mpi', '10.0.0.11 slots=8\n10.0.0.12 slots=4\nnode2 slots=2\n'),
    ('mpich', '10.0.0.11:8\n10.0.0.12:4\nnode2:2\n'),
])
def test_formats_and_default_slots_and_name_fallback(fmt, expected):
    assert hostfile(['node0', 'node1', 'node2'], HOSTVARS, format=fmt, slots=2) == expected


def test_inventory_names_when_address_var_is_empty():
    assert hostfile(['node0', 'node1'], HOSTVARS, address_var='') == 'node0 slots=8\nnode1 slots=4\n'


def test_first_defined_slots_var_wins():
    hostvars = {'a': {'nproc': '3', 'trainops_nproc_per_node': 8}, 'b': {'trainops_nproc_per_node': 8}}
    assert hostfile(['a', 'b'], hostvars, slots_var=['nproc', 'trainops_nproc_per_node']) == 'a slots=3\nb slots=8\n'


def test_mapping_input_keeps_its_order():
    assert hostfile({'gpu-02': 8, 'gpu-01': 4}, format='mpich') == 'gpu-02:8\ngpu-01:4\n'


def test_list_without_hostvars_uses_slots():
    assert hostfile(['gpu-01', 'gpu-02'], slots=8) == 'gpu-01 slots=8\ngpu-02 slots=8\n'


@pytest.mark.parametrize('args, kwargs, fragment', [
    ((['node2'], HOSTVARS), {}, 'node2 has no slots (none of trainops_nproc_per_node is set); pass slots=N'),
    ((['node0'], HOSTVARS), {'format': 'slurm'}, "format must be one of deepspeed, mpi, mpich, openmpi, not 'slurm'"),
    ((['node0', 'nodeX'], HOSTVARS), {}, 'nodeX is not an inventory host'),
    (({'a': 0},), {}, 'slots for a must be a positive integer, not 0'),
    (({'a': 'eight'},), {}, "slots for a must be a positive integer, not 'eight'"),
    (({'a': True},), {}, 'slots for a must be a positive integer, not True'),
    (({'a b': 8},), {}, "'a b' is not a usable host name"),
    (([],), {'slots': 8}, 'no nodes given'),
    (('node0',), {}, 'expected a list of host names or a mapping'),
])
def test_errors_name_the_node(args, kwargs, fragment):
    with pytest.raises(AnsibleFilterError) as err:
        hostfile(*args, **kwargs)
    assert fragment in str(err.value)


def test_two_inventory_hosts_on_one_address_are_an_error():
    hostvars = {'a': {'ansible_host': '10.0.0.1'}, 'b': {'ansible_host': '10.0.0.1'}}
    with pytest.raises(AnsibleFilterError) as err:
        hostfile(['a', 'b'], hostvars, slots=8)
    assert 'a and b are the same node (10.0.0.1)' in str(err.value)


def test_filter_module_exports_hostfile():
    assert FilterModule().filters() == {'hostfile': hostfile}


@pytest.fixture
def inventory(tmp_path, monkeypatch, collection_finder):
    """A real inventory from a node list, read by trainops.multinode.node_list as ansible.cfg enables it."""
    monkeypatch.setattr(C, 'INVENTORY_ENABLED', ['auto', 'trainops.multinode.node_list', 'yaml', 'ini'])
    (tmp_path / 'node_ip_list.txt').write_text('10.0.0.11 slots=8\n10.0.0.12\ngpu-03 slots=4\n')
    (tmp_path / 'group_vars').mkdir()
    (tmp_path / 'group_vars' / 'trainops_nodes.yml').write_text('trainops_nproc_per_node: 2\n')
    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(tmp_path / 'node_ip_list.txt')])
    return loader, manager


def render(loader, manager, expression):
    variable_manager = VariableManager(loader=loader, inventory=manager)
    HostVars(inventory=manager, variable_manager=variable_manager, loader=loader)   # as a play run sets it up
    variables = variable_manager.get_vars(host=manager.get_host('10.0.0.11'))
    return Templar(loader=loader, variables=variables).template(trust_as_template(expression))


def test_fqcn_filter_over_real_hostvars(inventory):
    loader, manager = inventory
    # group_vars give node 2 its slots; slots=N from the file wins where given
    assert render(loader, manager, "{{ groups['trainops_nodes'] | trainops.multinode.hostfile(hostvars) }}") == (
        '10.0.0.11 slots=8\n10.0.0.12 slots=2\ngpu-03 slots=4\n')
    assert render(loader, manager,
                  "{{ groups['trainops_nodes'] | trainops.multinode.hostfile(hostvars, format='mpich') }}") == (
        '10.0.0.11:8\n10.0.0.12:2\ngpu-03:4\n')


def test_fqcn_filter_error_reaches_the_template(inventory):
    loader, manager = inventory
    with pytest.raises(AnsibleError) as err:
        render(loader, manager, "{{ groups['trainops_nodes'] | trainops.multinode.hostfile(hostvars, format='x') }}")
    assert "format must be one of" in str(err.value)


def test_fqcn_filter_unknown_host_in_real_hostvars(inventory):
    loader, manager = inventory
    with pytest.raises(AnsibleError) as err:
        render(loader, manager, "{{ ['10.0.0.11', 'gpu-99'] | trainops.multinode.hostfile(hostvars) }}")
    assert 'gpu-99 is not an inventory host' in str(err.value)
