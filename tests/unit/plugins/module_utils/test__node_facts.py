# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests of node facts: GPUs from fake procfs/sysfs trees, interface choice from recorded `ip -j` output."""

from __future__ import annotations

import json

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _node_facts as nf


def link(name, *cidrs, mtu=1500, state='UP'):
    infos = []
    for cidr in cidrs:
        addr, plen = cidr.split('/')
        infos.append({'family': 'inet6' if ':' in addr else 'inet', 'local': addr, 'prefixlen': int(plen)})
    return {'ifname': name, 'mtu': mtu, 'operstate': state, 'addr_info': infos}


# A lab node: its NIC is ens5 on 10.77.0.0/24, plus a docker bridge on another network
NODE_LINKS = [link('lo', '127.0.0.1/8', mtu=65536, state='UNKNOWN'), link('ens5', '10.77.0.12/24', mtu=9000),
              link('docker0', '172.17.0.1/16', state='DOWN')]


class FakeRunner:
    def __init__(self, links, routes):
        self.links, self.routes, self.calls = links, routes, []

    def run(self, argv):
        self.calls.append(argv)
        if argv[:4] == ['ip', '-j', 'addr', 'show']:
            return 0, json.dumps(self.links), ''
        if argv[:4] == ['ip', '-j', 'route', 'get']:
            route = self.routes.get(argv[4])
            if route is None:
                return 2, '', 'RTNETLINK answers: Network is unreachable'
            return 0, json.dumps([route]), ''
        raise AssertionError(argv)


def test_interface_is_the_one_the_kernel_routes_the_master_through():
    runner = FakeRunner(NODE_LINKS, {'10.77.0.11': {'dst': '10.77.0.11', 'dev': 'ens5', 'prefsrc': '10.77.0.12'}})
    net = nf.network_facts(runner, '10.77.0.11')
    assert (net['ifname'], net['address'], net['mtu'], net['overridden']) == ('ens5', '10.77.0.12', 9000, False)
    assert ['ip', '-j', 'route', 'get', '10.77.0.11'] in runner.calls


def test_on_the_master_the_interface_carrying_its_address_is_used_not_lo():
    runner = FakeRunner(NODE_LINKS, {'10.77.0.12': {'type': 'local', 'dst': '10.77.0.12', 'dev': 'lo'}})
    assert nf.network_facts(runner, '10.77.0.12')['ifname'] == 'ens5'


def test_loopback_master_keeps_lo():
    runner = FakeRunner(NODE_LINKS, {'127.0.0.1': {'type': 'local', 'dst': '127.0.0.1', 'dev': 'lo'}})
    assert nf.network_facts(runner, '127.0.0.1')['ifname'] == 'lo'


def test_override_that_does_not_exist_fails_naming_the_interfaces():
    runner = FakeRunner(NODE_LINKS, {'10.77.0.11': {'dev': 'ens5'}})
    with pytest.raises(nf.NodeFactsError, match="'eth9' does not exist on this node.*docker0, ens5, lo"):
        nf.network_facts(runner, '10.77.0.11', 'eth9')


def test_override_that_cannot_reach_the_master_fails_before_launch():
    runner = FakeRunner(NODE_LINKS, {'10.77.0.11': {'dev': 'ens5'}})
    with pytest.raises(nf.NodeFactsError, match="'docker0' cannot reach the master 10.77.0.11.*routes the master through 'ens5'"):
        nf.network_facts(runner, '10.77.0.11', 'docker0')
    # unless the user says they know better
    assert nf.network_facts(runner, '10.77.0.11', 'docker0', check_ifname=False)['ifname'] == 'docker0'


def test_override_on_the_masters_network_is_accepted_even_if_not_routed():
    links = NODE_LINKS + [link('ib0', '10.77.0.40/24')]
    runner = FakeRunner(links, {'10.77.0.11': {'dev': 'ens5'}})
    net = nf.network_facts(runner, '10.77.0.11', 'ib0')
    assert net['ifname'] == 'ib0' and net['overridden'] is True and net['address'] == '10.77.0.40'


def test_bad_master_address_and_unreachable_master_are_clear_errors():
    runner = FakeRunner(NODE_LINKS, {})
    with pytest.raises(nf.NodeFactsError, match='not an IP address'):
        nf.network_facts(runner, 'gpu-01')
    with pytest.raises(nf.NodeFactsError, match='Network is unreachable'):
        nf.network_facts(runner, '10.99.0.1')


def test_gpu_facts_nvidia(tmp_path):
    for bus in ('0000:18:00.0', '0000:2a:00.0'):
        gpu = tmp_path / 'proc/driver/nvidia/gpus' / bus
        gpu.mkdir(parents=True)
        (gpu / 'information').write_text('Model: \t\t NVIDIA H100 80GB HBM3\nIRQ: 1\n')
    facts = nf.gpu_facts(str(tmp_path))
    assert facts == {'vendor': 'nvidia', 'count': 2, 'pci_ids': ['0000:18:00.0', '0000:2a:00.0'],
                     'models': ['NVIDIA H100 80GB HBM3'] * 2}


def test_gpu_facts_amd_counts_kfd_nodes_with_a_gpu_id(tmp_path):
    (tmp_path / 'dev').mkdir()
    (tmp_path / 'dev/kfd').write_text('')
    for index, gpu_id in enumerate(['0', '41025', '52300']):  # node 0 is the CPU
        node = tmp_path / 'sys/class/kfd/kfd/topology/nodes' / str(index)
        node.mkdir(parents=True)
        (node / 'gpu_id').write_text(gpu_id + '\n')
    assert nf.gpu_facts(str(tmp_path))['vendor'] == 'amd'
    assert nf.gpu_facts(str(tmp_path))['count'] == 2


def test_gpu_facts_cpu_only(tmp_path):
    assert nf.gpu_facts(str(tmp_path)) == {'vendor': 'none', 'count': 0, 'pci_ids': [], 'models': []}
