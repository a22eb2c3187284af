# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ssh_mesh_plan filter: the role's checks of the nodes' names and the mesh key's options (the logic is in
module_utils/_ssh_mesh.py, tested in test__ssh_mesh.py)."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.filter.ssh_mesh_plan import FilterModule, ssh_mesh_plan

NODES = {
    'gpu-01': {'address': 'gpu-01.example', 'nodename': 'gpu-01.example', 'hostname': 'gpu-01',
               'addresses': ['10.0.0.11', '192.168.5.11'], 'extra_names': []},
    'gpu-02': {'address': 'gpu-02.example', 'nodename': 'gpu-02.example', 'hostname': 'gpu-02',
               'addresses': ['10.0.0.12', '192.168.5.12'], 'extra_names': ['gpu-02-ib']},
}


def test_an_inventory_of_dns_names_gives_the_nodes_addresses_in_from():
    result = ssh_mesh_plan(NODES, sources=None, permits=None)
    assert result == {'problems': [], 'from': '10.0.0.11,10.0.0.12,127.0.0.1,192.168.5.11,192.168.5.12,::1',
                      'key_options': 'from="10.0.0.11,10.0.0.12,127.0.0.1,192.168.5.11,192.168.5.12,::1",restrict'}


def test_the_filter_passes_sources_from_cluster_and_permits():
    result = ssh_mesh_plan(NODES, sources=['10.1.0.0/16'], from_cluster=False, permits=['pty'])
    assert result['key_options'] == 'from="10.1.0.0/16",restrict,pty' and result['problems'] == []


@pytest.mark.parametrize('nodes', [['gpu-01'], 'gpu-01', {'gpu-01': 'gpu-01.example'}])
def test_the_input_must_be_a_mapping_of_mappings(nodes):
    with pytest.raises(AnsibleFilterError, match='mapping of node name to a mapping'):
        ssh_mesh_plan(nodes)
    assert FilterModule().filters()['ssh_mesh_plan'] is ssh_mesh_plan
