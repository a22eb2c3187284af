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


def _probed(torch_version, requires=None, wheels=None, bundled=(), replaced=()):
    """What _torch_probe.py prints under ``library`` for an interpreter with ``torch_version`` installed."""
    return dict(torch=dict(version=torch_version, nccl_wheel=requires, bundled=list(bundled), replaced=list(replaced)),
                wheels=dict(wheels or {}), reported=None, files=None, rocm=None, hip=None, aws_ofi_nccl=None,
                other_net_plugins=[], dmabuf_kernel=None)


def test_library_version_from_the_interpreters_packages(tmp_path):
    probed = _probed('2.5.1+cu124', 'nvidia-nccl-cu12', {'nvidia-nccl-cu12': '2.21.5'})
    lib = nf.library_facts(str(tmp_path), 'nvidia', probed, 'container train')
    assert (lib['version'], lib['read_in']) == ('2.21.5', 'container train')
    assert lib['source'] == 'python package nvidia-nccl-cu12, which torch 2.5.1+cu124 requires (in container train)'
    # a wheel torch does not require is not what it loads
    assert nf.library_facts(str(tmp_path), 'nvidia', _probed('2.5.1', None, {'nvidia-nccl-cu12': '2.21.5'}))[
        'version'] is None
    # a ROCm build of torch bundles the RCCL of its ROCm release (RCCL CHANGELOG: 2.20.5 for ROCm 6.2.0)
    lib = nf.library_facts(str(tmp_path), 'amd', _probed('2.5.1+rocm6.2', bundled=['librccl.so']))
    assert (lib['name'], lib['version'], lib['rocm']) == ('rccl', '2.20.5', '6.2')
    # ROCm 7.x (RCCL CHANGELOG: "RCCL 2.28.3 for ROCm 7.11" / 7.12 / 7.13, "RCCL 2.30.4 for ROCm 7.14.0")
    for rocm, rccl in (('7.11', '2.28.3'), ('7.13', '2.28.3'), ('7.14', '2.30.4')):
        assert nf.library_facts(str(tmp_path), 'amd', _probed('2.10.0+rocm%s' % rocm))['version'] == rccl
    # nothing tells: the version is unknown, never guessed
    lib = nf.library_facts(str(tmp_path), 'amd', _probed('2.5.1+rocm5.0'))
    assert (lib['name'], lib['version'], lib['source']) == ('rccl', None, None)
    # a bundled library replaced after the install: the tag no longer tells
    assert nf.library_facts(str(tmp_path), 'amd', _probed('2.5.1+rocm6.2', bundled=['librccl.so'],
                                                          replaced=['librccl.so']))['version'] is None
    assert nf.library_facts(str(tmp_path), 'none')['name'] is None


def test_probe_without_library_never_imports_torch():
    import subprocess
    import sys
    code = ('import importlib.util, json, sys\n'
            'spec = importlib.util.spec_from_file_location("probe", %r)\n'
            'probe = importlib.util.module_from_spec(spec)\n'
            'spec.loader.exec_module(probe)\n'
            'out = probe.probe(False)\n'
            'assert "torch" not in sys.modules\n'
            'print(json.dumps(out))\n' % nf._torch_probe.__file__)
    out = json.loads(subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout)
    assert out['imported'] is False and out['version'] and 'library' not in out


def test_default_route_interfaces(tmp_path):
    (tmp_path / 'proc' / 'net').mkdir(parents=True)
    (tmp_path / 'proc' / 'net' / 'route').write_text(
        'Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n'
        'ens5\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n'
        'eno1\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n')
    (tmp_path / 'proc' / 'net' / 'ipv6_route').write_text(
        '00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 '
        '00000400 00000001 00000000 00000003 eno2\n'
        '00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 '
        'ffffffff 00000001 00000000 00200200 lo\n')
    assert nf.default_route_ifnames(str(tmp_path)) == ['eno1', 'eno2']
