# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests of the per-host NCCL/RCCL environment, on fact dicts built from the trainops_node contract
(docs in /work/notes/facts-schema.md): 8xMI300X with bnxt_re RoCE, 8xH100 with mlx5 InfiniBand, 4xH100 with
SR-IOV RoCE VFs, an Ethernet-only GPU node, a CPU-only node, a node whose HCA ports are down and a lab-like
node with a VLAN interface bond0.2093.

module_utils/_nccl_env: compute (deciders.py), the deciders it calls (network.py, gpu.py) and the fact readers they
use (facts.py) here; the env file and nccl.conf (render.py) in test__nccl_env_render.py, check_cluster (cluster.py)
in test__nccl_env_cluster.py."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.cluster import check_cluster
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.deciders import compute
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.facts import (
    _ports,
    nccl_gid_index,
    pci_path_type,
)
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.network import (
    match_names,
    parse_nccl_list,
)
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.render import render_env_file


# --- fact builders (shapes from the contract) ------------------------------------------------------

def iface(name, *addrs, mtu=1500, state='UP'):
    return {'ifname': name, 'mtu': mtu, 'operstate': state, 'addresses': list(addrs)}


def network(ifname, ifaces, address=None):
    by_name = dict((i['ifname'], i) for i in ifaces)
    addr = address or (by_name[ifname]['addresses'][0].split('/')[0] if by_name[ifname]['addresses'] else None)
    return {'master_addr': '10.0.0.11', 'routed_ifname': ifname, 'route_src': addr, 'ifname': ifname,
            'address': addr, 'mtu': by_name[ifname]['mtu'], 'operstate': by_name[ifname]['operstate'],
            'overridden': False, 'interfaces': ifaces}


def port(number=1, state='ACTIVE', phys='LinkUp', layer='InfiniBand', rate=400.0, netdev=None, gid=None, gid_addr=None):
    rate_text = None if rate is None else '%g Gb/sec (4X %s)' % (rate, 'NDR' if layer == 'InfiniBand' else 'ETH')
    return {'port': number, 'state': state, 'phys_state': phys, 'link_layer': layer, 'rate': rate_text,
            'rate_gbps': rate, 'netdev': netdev, 'roce_v2_gid_index': gid,
            'roce_v2_gid': None if gid is None else '0000:0000:0000:0000:0000:ffff:%s' % (gid_addr or '0a00:0001')}


def device(name, driver, pci, ports, vf=False):
    return {'name': name, 'driver': driver, 'pci_id': pci, 'virtual_function': vf, 'ports': ports}


def rdma(devices, nvidia_peermem=False, nv_peer_mem=False, amd_peer_mem=False, dma_buf=False, available=None):
    active = ['%s:%d' % (d['name'], p['port']) for d in devices for p in d['ports'] if p['state'] == 'ACTIVE']
    layers = set(p['link_layer'] for d in devices for p in d['ports'] if p['state'] == 'ACTIVE')
    transport = 'none' if not layers else 'mixed' if len(layers) > 1 else (
        'infiniband' if layers == {'InfiniBand'} else 'roce')
    gdr = {'nvidia_peermem': nvidia_peermem, 'nv_peer_mem': nv_peer_mem, 'amd_peer_mem': amd_peer_mem, 'dma_buf': dma_buf}
    gdr['available'] = available if available is not None else any(gdr.values())
    return {'devices': devices, 'active_ports': active, 'transport': transport, 'gpudirect': gdr}


def gpu(vendor, count, model=None, interconnect='none'):
    pci = ['0000:%02x:00.0' % (0x18 + 0x10 * i) for i in range(count)]
    return {'vendor': vendor, 'count': count, 'models': [model] * count, 'pci_ids': pci if count else [],
            'driver_version': {'nvidia': '550.90.07', 'amd': '6.8.5'}.get(vendor),
            'interconnect': {'type': interconnect, 'source': None if interconnect == 'none' else 'sysfs'},
            'sources': {'nvidia': ['procfs', 'nvidia-smi'], 'amd': ['kfd-topology', 'amd-smi']}.get(vendor, [])}


def mi300x():
    """8x MI300X, 8 Broadcom Thor2 400G RoCE NICs (bnxt_re0..7), front-end enp49s0f0np0, docker0."""
    nics = ['ens%dnp0' % (10 + i) for i in range(8)]
    devs = [device('bnxt_re%d' % i, 'bnxt_en', '0000:%02x:00.0' % (0x05 + i * 0x20),
                   [port(layer='Ethernet', rate=400.0, netdev=nics[i], gid=3, gid_addr='0a01:%04x' % (i + 1))])
            for i in range(8)]
    ifaces = ([iface('lo', '127.0.0.1/8', mtu=65536, state='UNKNOWN'), iface('enp49s0f0np0', '10.0.0.12/24', mtu=9000)]
              + [iface(n, '10.1.%d.12/24' % i, mtu=9000) for i, n in enumerate(nics)]
              + [iface('docker0', '172.17.0.1/16', state='DOWN')])
    return {'gpu': gpu('amd', 8, 'AMD Instinct MI300X', 'xgmi'),
            'rdma': rdma(list(reversed(devs)), amd_peer_mem=True),
            'network': network('enp49s0f0np0', ifaces)}


def h100_ib(frontend=False, peermem=True):
    """8x H100 SXM, 8 ConnectX-7 NDR InfiniBand HCAs (mlx5_0..7, ib0..7), nvidia_peermem loaded.

    ``frontend`` adds mlx5_8, a 100G Ethernet (RoCE-capable) front-end port that is ACTIVE too, as on DGX H100.
    """
    devs = [device('mlx5_%d' % i, 'mlx5_core', '0000:%02x:00.0' % (0x1a + i * 0x10), [port(netdev='ib%d' % i)])
            for i in range(8)]
    ifaces = [iface('lo', '127.0.0.1/8', mtu=65536, state='UNKNOWN')] + [
        iface('ib%d' % i, '10.2.%d.21/24' % i, mtu=4092) for i in range(8)]
    if frontend:
        devs.append(device('mlx5_8', 'mlx5_core', '0000:aa:00.0',
                           [port(layer='Ethernet', rate=100.0, netdev='eno8np0', gid=3)]))
        ifaces.append(iface('eno8np0', '10.0.0.21/24', mtu=9000))
        ifname = 'eno8np0'
    else:
        ifaces.append(iface('eno1', '10.0.0.21/24'))
        ifname = 'eno1'
    return {'gpu': gpu('nvidia', 8, 'NVIDIA H100 80GB HBM3', 'nvlink'),
            'rdma': rdma(devs, nvidia_peermem=peermem),
            'network': network(ifname, ifaces)}


def h100_sriov():
    """OpenShift pod, 4x H100 and 4 SR-IOV RoCE VFs (net1..net4); the VFs' RoCE v2 GIDs sit at 3, 3, 5, 5."""
    gids = [3, 3, 5, 5]
    devs = [device('mlx5_%d' % (i + 2), 'mlx5_core', '0000:%02x:00.%d' % (0x3b, i + 2),
                   [port(layer='Ethernet', rate=200.0, netdev='net%d' % (i + 1), gid=gids[i])], vf=True)
            for i in range(4)]
    ifaces = [iface('lo', '127.0.0.1/8', mtu=65536, state='UNKNOWN'), iface('eth0', '10.128.2.15/23', mtu=1400)] + [
        iface('net%d' % (i + 1), '192.168.%d.15/24' % (i + 1), mtu=9000) for i in range(4)]
    return {'gpu': gpu('nvidia', 4, 'NVIDIA H100 80GB HBM3', 'nvlink'),
            'rdma': rdma(devs, nvidia_peermem=True),
            'network': network('eth0', ifaces)}


def ethernet_gpu():
    """2x L40S, no RDMA at all."""
    ifaces = [iface('lo', '127.0.0.1/8', mtu=65536, state='UNKNOWN'), iface('eno1', '192.168.10.31/24'),
              iface('docker0', '172.17.0.1/16', state='DOWN')]
    return {'gpu': gpu('nvidia', 2, 'NVIDIA L40S', 'pcie'), 'rdma': rdma([]), 'network': network('eno1', ifaces)}


def cpu_only():
    ifaces = [iface('lo', '127.0.0.1/8', mtu=65536, state='UNKNOWN'), iface('ens5', '10.77.0.12/24', mtu=9000)]
    return {'gpu': gpu('none', 0), 'rdma': rdma([]), 'network': network('ens5', ifaces)}


def ports_down():
    """8x H100 whose 4 InfiniBand HCAs have no link (cable out / subnet manager down)."""
    devs = [device('mlx5_%d' % i, 'mlx5_core', '0000:%02x:00.0' % (0x1a + i * 0x10),
                   [port(state='DOWN', phys='Polling', netdev='ib%d' % i)]) for i in range(3)]
    devs.append(device('mlx5_3', 'mlx5_core', '0000:4a:00.0', [port(state='INIT', phys='LinkUp', netdev='ib3')]))
    ifaces = [iface('lo', '127.0.0.1/8', mtu=65536, state='UNKNOWN'), iface('eno1', '10.0.0.22/24')] + [
        iface('ib%d' % i, state='DOWN') for i in range(4)]
    return {'gpu': gpu('nvidia', 8, 'NVIDIA H100 80GB HBM3', 'nvlink'),
            'rdma': rdma(devs, nvidia_peermem=True), 'network': network('eno1', ifaces)}


def lab_bond():
    """A lab node reaching the master over the VLAN bond0.2093; bond0, eth0, eth1 and docker0 exist too."""
    ifaces = [iface('lo', '127.0.0.1/8', mtu=65536, state='UNKNOWN'), iface('eth0', '192.168.122.5/24'),
              iface('eth1'), iface('bond0', '10.9.0.5/24'), iface('bond0.2093', '10.93.0.5/24'),
              iface('docker0', '172.17.0.1/16', state='DOWN')]
    return {'gpu': gpu('none', 0), 'rdma': rdma([]), 'network': network('bond0.2093', ifaces)}


def run(facts, **settings):
    res = compute(facts, settings)
    assert all(isinstance(v, str) for v in res['env'].values()), res['env']
    assert set(res['sources']) == set(res['env']) == set(res['reasons'])
    assert set(res['sources'].values()) <= {'detected', 'knob', 'default', 'override'}
    return res


def has(messages, *parts):
    return [m for m in messages if all(p in m for p in parts)]


# --- realistic nodes -----------------------------------------------------------------------------------

def test_mi300x_bnxt_roce():
    res = run(mi300x(), channels=28, nproc_per_node=8)
    nics = ','.join('bnxt_re%d:1' % i for i in range(8))
    assert res['env'] == {
        'NCCL_SOCKET_IFNAME': '=enp49s0f0np0', 'GLOO_SOCKET_IFNAME': 'enp49s0f0np0', 'NCCL_IB_DISABLE': '0',
        'NCCL_IB_HCA': '=' + nics, 'NCCL_IB_GID_INDEX': '3', 'NCCL_MAX_NCHANNELS': '28',
        'NCCL_DEBUG': 'WARN', 'HSA_ENABLE_SDMA': '0'}
    # the library version is unknown here: every port has its RoCE v2 GID at 3, so pinning 3 is right for any
    # NCCL/RCCL; 28 channels are within every RCCL version's limit (32 at the least: rocm-6.0.0 MAXCHANNELS)
    assert res['sources'] == {
        'NCCL_SOCKET_IFNAME': 'detected', 'GLOO_SOCKET_IFNAME': 'detected', 'NCCL_IB_DISABLE': 'detected',
        'NCCL_IB_HCA': 'detected', 'NCCL_IB_GID_INDEX': 'detected', 'NCCL_MAX_NCHANNELS': 'knob',
        'NCCL_DEBUG': 'default', 'HSA_ENABLE_SDMA': 'default'}
    assert 'SDMA' in res['reasons']['HSA_ENABLE_SDMA']
    assert res['transport'] == 'rdma' and res['link_layer'] == 'roce' and res['vendor'] == 'amd'
    assert res['hcas'] == nics.split(',')  # natural order although the facts listed them reversed
    assert res['gpudirect'] is True
    assert res['errors'] == [] and res['warnings'] == []
    # threads: the RCCL version decides the variable (NCCL_NTHREADS before 2.28, RCCL_THREADS_PER_BLOCK since), so an
    # unknown version is an error naming the knob, never a guess
    res = run(mi300x(), threads=256)
    assert has(res['errors'], 'threads 256: the RCCL version is unknown', 'trainops_nccl_library_version')
    assert not [k for k in res['env'] if 'THREADS' in k]


def test_h100_infiniband_with_peermem():
    res = run(h100_ib(), channels=32, min_channels=16, threads=512, nproc_per_node=8)
    assert res['env']['NCCL_IB_HCA'] == '=' + ','.join('mlx5_%d:1' % i for i in range(8))
    assert res['env']['NCCL_SOCKET_IFNAME'] == '=eno1' and res['env']['GLOO_SOCKET_IFNAME'] == 'eno1'
    assert res['env']['NCCL_IB_DISABLE'] == '0'
    assert res['env']['NCCL_NTHREADS'] == '512' and 'RCCL_THREADS_PER_BLOCK' not in res['env']
    assert res['env']['NCCL_MIN_NCHANNELS'] == '16' and res['env']['NCCL_MAX_NCHANNELS'] == '32'
    assert 'NCCL_IB_GID_INDEX' not in res['env']  # InfiniBand: no GID index
    assert 'NCCL_NET_GDR_LEVEL' not in res['env']  # GPUDirect available: NCCL picks the level
    assert not [k for k in res['env'] if k.startswith('HSA_')]
    assert res['transport'] == 'rdma' and res['link_layer'] == 'infiniband' and res['gpudirect'] is True
    assert res['errors'] == [] and res['warnings'] == []


def test_h100_without_peermem_warns_and_sets_no_level():
    res = run(h100_ib(peermem=False))
    assert res['gpudirect'] is False
    assert has(res['warnings'], 'GPUDirect RDMA is not available', 'nvidia_peermem')
    assert 'NCCL_NET_GDR_LEVEL' not in res['env']
    res = run(h100_ib(peermem=False), net_gdr_level='SYS')
    assert res['env']['NCCL_NET_GDR_LEVEL'] == 'SYS'
    assert has(res['warnings'], 'NCCL_NET_GDR_LEVEL=SYS has no effect')


def test_h100_with_active_frontend_roce_port_prefers_infiniband():
    res = run(h100_ib(frontend=True))
    assert res['hcas'] == ['mlx5_%d:1' % i for i in range(8)]
    assert res['link_layer'] == 'infiniband'
    assert 'NCCL_IB_GID_INDEX' not in res['env']
    assert has(res['warnings'], 'InfiniBand and Ethernet', 'mlx5_8:1')
    assert res['env']['NCCL_SOCKET_IFNAME'] == '=eno8np0'


def with_library(facts, name, version):
    facts['library'] = {'name': name, 'version': version, 'source': 'test', 'aws_ofi_nccl': None}
    return facts


def test_sriov_gid_indexes_disagree_is_an_error_before_nccl_2_21():
    # NCCL 2.20 (src/transport/net_ib.cc NCCL_PARAM(IbGidIndex, "IB_GID_INDEX", 0)): one index per process
    res = run(with_library(h100_sriov(), 'nccl', '2.20.5'), nproc_per_node=4)
    assert len(res['errors']) == 1
    msg = res['errors'][0]
    assert '3: mlx5_2:1, mlx5_3:1; 5: mlx5_4:1, mlx5_5:1' in msg and 'NCCL 2.20.5' in msg
    assert 'one NCCL_IB_GID_INDEX per process' in msg and 'gid_index' in msg and 'ib_hca' in msg
    assert 'NCCL_IB_GID_INDEX' not in res['env']
    assert res['env']['NCCL_IB_HCA'] == '=mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1'
    assert res['env']['NCCL_SOCKET_IFNAME'] == '=eth0'
    assert res['transport'] == 'rdma' and res['link_layer'] == 'roce'


def test_sriov_gid_indexes_disagree_per_port_selection_since_2_21():
    # NCCL >= 2.21 leaves NCCL_IB_GID_INDEX at -1 and picks each port's GID (ncclIbGetGidIndex): nothing to set
    res = run(with_library(h100_sriov(), 'nccl', '2.21.5'), nproc_per_node=4)
    assert res['errors'] == [] and res['warnings'] == []
    assert not [k for k in res['env'] if k.startswith(('NCCL_IB_GID', 'NCCL_IB_ADDR', 'NCCL_IB_ROCE'))]
    assert res['library'] == {'name': 'nccl', 'version': '2.21.5', 'source': 'test', 'read_in': None}
    # unknown version: left unset with a warning that says what happens with each
    res = run(h100_sriov(), nproc_per_node=4)
    assert res['errors'] == [] and 'NCCL_IB_GID_INDEX' not in res['env']
    assert has(res['warnings'], 'version is unknown', '>= 2.21', 'library_version')


def test_sriov_gid_override_wins_with_a_warning():
    res = run(h100_sriov(), gid_index=3)
    assert res['errors'] == []
    assert res['env']['NCCL_IB_GID_INDEX'] == '3' and res['sources']['NCCL_IB_GID_INDEX'] == 'knob'
    assert has(res['warnings'], 'mlx5_4:1 (5)') and has(res['warnings'], 'mlx5_5:1 (5)')
    res = run(h100_sriov(), gid_index='5')
    assert res['env']['NCCL_IB_GID_INDEX'] == '5'


def test_sriov_narrower_ib_hca_resolves_the_gid():
    res = run(h100_sriov(), ib_hca=['mlx5_4', 'mlx5_5'])
    assert res['errors'] == []
    assert res['env']['NCCL_IB_HCA'] == '=mlx5_4:1,mlx5_5:1' and res['sources']['NCCL_IB_HCA'] == 'knob'
    assert res['env']['NCCL_IB_GID_INDEX'] == '5' and res['sources']['NCCL_IB_GID_INDEX'] == 'detected'


def test_sriov_gid_unset_leaves_it_to_nccl():
    for value in ('unset', None):
        res = run(h100_sriov(), gid_index=value)
        assert res['errors'] == []
        assert 'NCCL_IB_GID_INDEX' not in res['env']
        assert has(res['warnings'], 'NCCL >= 2.21')


def test_ethernet_only_gpu_node_uses_sockets():
    res = run(ethernet_gpu(), threads=256, nproc_per_node=2)
    assert res['transport'] == 'tcp' and res['link_layer'] is None and res['hcas'] == []
    assert res['env']['NCCL_IB_DISABLE'] == '1' and res['sources']['NCCL_IB_DISABLE'] == 'detected'
    assert res['env']['NCCL_SOCKET_IFNAME'] == '=eno1'
    assert not [k for k in res['env'] if k.startswith('NCCL_IB_') and k != 'NCCL_IB_DISABLE']
    assert res['errors'] == [] and res['warnings'] == []


def test_rdma_requested_without_active_port_is_an_error():
    res = run(ethernet_gpu(), network_mode='rdma')
    assert has(res['errors'], 'network_mode rdma', 'no ACTIVE RDMA port', 'no RDMA devices found')
    res = run(ports_down(), network_mode='rdma')
    assert has(res['errors'], 'no ACTIVE RDMA port', 'mlx5_0:1 DOWN (Polling)', 'mlx5_3:1 INIT')


def test_ports_down_fall_back_to_tcp_with_a_warning():
    res = run(ports_down())
    assert res['transport'] == 'tcp' and res['env']['NCCL_IB_DISABLE'] == '1'
    assert has(res['warnings'], 'no port is usable', 'mlx5_0:1 DOWN (Polling)', 'mlx5_2:1 DOWN', 'TCP sockets')
    assert res['errors'] == []


def test_cpu_only_node():
    res = run(cpu_only(), nproc_per_node=2)
    assert res['vendor'] == 'none' and res['transport'] == 'tcp'
    assert res['env'] == {'NCCL_SOCKET_IFNAME': '=ens5', 'GLOO_SOCKET_IFNAME': 'ens5', 'NCCL_IB_DISABLE': '1',
                          'NCCL_DEBUG': 'WARN'}
    assert res['errors'] == [] and res['warnings'] == []
    # gloo uses no channels or threads: a warning says so; channels stay in the environment as the knob's record,
    # threads (whose variable depends on the library) is not set
    res = run(cpu_only(), channels=28, threads=256)
    assert res['env']['NCCL_MAX_NCHANNELS'] == '28' and 'NCCL_NTHREADS' not in res['env']
    assert has(res['warnings'], 'channels/min_channels have no effect') and has(res['warnings'], 'threads has no')


def test_lab_vlan_interface_is_matched_exactly():
    res = run(lab_bond())
    assert res['env']['NCCL_SOCKET_IFNAME'] == '=bond0.2093'
    assert res['env']['GLOO_SOCKET_IFNAME'] == 'bond0.2093'
    assert res['socket_ifname'] == ['bond0.2093']
    res = run(lab_bond(), socket_ifname='bond0')
    assert res['env']['NCCL_SOCKET_IFNAME'] == '=bond0' and res['sources']['NCCL_SOCKET_IFNAME'] == 'knob'
    assert res['errors'] == []


def test_prefix_overrides_warn_about_what_they_catch():
    res = run(lab_bond(), env_overrides={'NCCL_SOCKET_IFNAME': 'bond0'})
    assert res['env']['NCCL_SOCKET_IFNAME'] == 'bond0' and res['sources']['NCCL_SOCKET_IFNAME'] == 'override'
    assert has(res['warnings'], "prefix 'bond0' matches bond0, bond0.2093", '=bond0')
    res = run(lab_bond(), env_overrides={'NCCL_SOCKET_IFNAME': 'eth'})
    assert has(res['warnings'], "prefix 'eth' matches eth0, eth1")
    res = run(lab_bond(), env_overrides={'NCCL_SOCKET_IFNAME': '^docker0'})
    assert has(res['warnings'], 'leaves lo, eth0, eth1, bond0, bond0.2093')
    res = run(lab_bond(), env_overrides={'NCCL_SOCKET_IFNAME': '=bond0.2093'})
    assert res['warnings'] == [] and res['errors'] == []


def test_interface_overrides_that_do_not_exist_are_errors():
    res = run(lab_bond(), socket_ifname='bond0.2094')
    assert has(res['errors'], "socket_ifname 'bond0.2094' does not exist", 'bond0.2093', 'eth1')
    assert 'NCCL_SOCKET_IFNAME' not in res['env']
    res = run(lab_bond(), env_overrides={'NCCL_SOCKET_IFNAME': '=eth9'})
    assert has(res['errors'], 'NCCL_SOCKET_IFNAME==eth9 selects no interface')
    res = run(lab_bond(), env_overrides={'GLOO_SOCKET_IFNAME': 'eth9'})
    assert has(res['errors'], 'GLOO_SOCKET_IFNAME=eth9 names eth9')
    res = run(lab_bond(), socket_ifname='^docker0')
    assert has(res['errors'], 'socket_ifname must be auto, an interface name or a list')


def test_socket_interface_without_address_or_down():
    res = run(lab_bond(), socket_ifname='eth1')
    assert has(res['errors'], "'eth1' has no IP address")
    res = run(lab_bond(), socket_ifname=['docker0'])
    assert res['env']['NCCL_SOCKET_IFNAME'] == '=docker0'
    assert has(res['warnings'], "'docker0' is DOWN")


def test_missing_routed_interface_is_an_error():
    facts = cpu_only()
    facts['network']['ifname'] = None
    res = run(facts)
    assert has(res['errors'], 'facts.network.ifname is empty')


def test_nproc_larger_than_gpus():
    res = run(h100_sriov(), gid_index=3, nproc_per_node=8)
    assert has(res['errors'], 'nproc_per_node 8 is larger than the 4 GPU(s)')
    assert run(h100_sriov(), gid_index=3, nproc_per_node=4)['errors'] == []
    assert run(cpu_only(), nproc_per_node=64)['errors'] == []  # CPU ranks are not limited by GPUs
    res = run(cpu_only(), vendor='nvidia', nproc_per_node=1)
    assert has(res['errors'], 'larger than the 0 GPU(s)', 'detected none')


# --- ib_hca ---------------------------------------------------------------------------------------------

def test_ib_hca_override_validation():
    res = run(h100_ib(), ib_hca=['mlx5_0', 'mlx5_9'])
    assert has(res['errors'], "HCA 'mlx5_9'", 'does not exist', 'mlx5_7')
    res = run(h100_ib(), ib_hca='mlx5_0:2')
    assert has(res['errors'], 'port 2 of mlx5_0', 'does not exist', 'its ports: 1')
    res = run(ports_down(), ib_hca=['mlx5_0:1'])
    assert has(res['errors'], 'mlx5_0:1', 'not ACTIVE', 'DOWN (Polling)')
    res = run(ports_down(), ib_hca=['mlx5_3'])
    assert has(res['errors'], 'mlx5_3', 'no ACTIVE port', 'INIT')
    res = run(h100_ib(frontend=True), ib_hca=['mlx5_0', 'mlx5_8'])
    assert has(res['errors'], 'mixes link layers', 'infiniband: mlx5_0:1', 'roce: mlx5_8:1')
    res = run(h100_ib(), ib_hca='^mlx5_7')
    assert has(res['errors'], 'excludes HCAs')


def test_ib_hca_string_keeps_the_given_order_and_exact_form():
    res = run(h100_ib(), ib_hca='=mlx5_1:1,mlx5_0:1,mlx5_1')
    assert res['errors'] == []
    assert res['env']['NCCL_IB_HCA'] == '=mlx5_1:1,mlx5_0:1'
    assert res['hcas'] == ['mlx5_1:1', 'mlx5_0:1']


def test_ib_hca_ignored_over_tcp():
    res = run(h100_ib(), network_mode='tcp', ib_hca=['mlx5_0'])
    assert res['transport'] == 'tcp' and res['env']['NCCL_IB_DISABLE'] == '1'
    assert res['sources']['NCCL_IB_DISABLE'] == 'knob'
    assert 'NCCL_IB_HCA' not in res['env']
    assert has(res['warnings'], 'ib_hca ignored') and has(res['warnings'], 'will not use the ACTIVE RDMA ports')


def test_ib_hca_rail_plane_form_needs_nccl_2_30_7():
    # NVIDIA/nccl v2.30.7-1 src/misc/utils.cc parseStringList: name:port:rail:plane, each field optional (-1);
    # src/transport/net_ib/init.cc gives the matched port the entry's railId/planeId
    facts = with_library(h100_ib(), 'nccl', '2.30.7')
    res = run(facts, ib_hca=['mlx5_0:1:0:0', 'mlx5_1:1:0:1', 'mlx5_2:1:1', 'mlx5_3::1:1', 'mlx5_4:1::2', 'mlx5_5'])
    assert res['errors'] == []
    # the user's rail/plane fields are kept; an empty port takes every ACTIVE port of the device (port -1)
    assert res['env']['NCCL_IB_HCA'] == '=mlx5_0:1:0:0,mlx5_1:1:0:1,mlx5_2:1:1,mlx5_3:1:1:1,mlx5_4:1::2,mlx5_5:1'
    assert res['hcas'] == ['mlx5_%d:1' % i for i in range(6)]
    assert 'rail and plane' in res['reasons']['NCCL_IB_HCA']
    # a comma-separated string works the same; empty trailing fields are no rail/plane
    res = run(facts, ib_hca='=mlx5_0:1:3,mlx5_1:1:')
    assert res['errors'] == [] and res['env']['NCCL_IB_HCA'] == '=mlx5_0:1:3,mlx5_1:1'


def test_ib_hca_rail_plane_form_refused_before_nccl_2_30_7():
    # NCCL v2.30.4-1 parseStringList: port = atoi(text after ':'), the rest of the entry skipped: the rail and plane
    # would be dropped silently (and an empty port reads as port 0, which matches nothing)
    res = run(with_library(h100_ib(), 'nccl', '2.30.4'), ib_hca=['mlx5_0:1:0:1', 'mlx5_1'])
    assert res['errors'] == ["ib_hca entry 'mlx5_0:1:0:1' uses the name:port:rail:plane form (rail 0, plane 1), which "
                             "NCCL 2.30.4 does not read: NCCL_IB_HCA takes name:port:rail:plane since NCCL 2.30.7, "
                             "older libraries read name:port and skip the rest of the entry; drop the rail and plane "
                             "fields or upgrade the library"]
    res = run(with_library(h100_ib(), 'nccl', '2.21.5'), ib_hca='mlx5_0::2')
    assert has(res['errors'], "'mlx5_0::2'", 'NCCL 2.21.5 does not read', 'an empty port reads as port 0')
    # RCCL follows the same version numbers
    res = run(with_library(mi300x(), 'rccl', '2.28.3'), ib_hca=['bnxt_re0:1:0'])
    assert has(res['errors'], "'bnxt_re0:1:0'", 'RCCL 2.28.3 does not read')
    # name:port alone is fine with every version
    res = run(with_library(h100_ib(), 'nccl', '2.21.5'), ib_hca=['mlx5_0:1', 'mlx5_1'])
    assert res['errors'] == [] and res['env']['NCCL_IB_HCA'] == '=mlx5_0:1,mlx5_1:1'


def test_ib_hca_rail_plane_form_unknown_version_names_the_knob():
    res = run(h100_ib(), ib_hca=['mlx5_0:1:0:0'])
    assert res['errors'] == ["ib_hca entry 'mlx5_0:1:0:0' uses the name:port:rail:plane form (rail 0, plane 0), which "
                             "needs NCCL 2.30.7 or later, and the library version is unknown here: set "
                             "trainops_nccl_library_version (library_version) to the version the ranks load"]
    assert run(h100_ib(), ib_hca=['mlx5_0:1'])['errors'] == []


def test_ib_hca_rail_plane_values_checked():
    facts = with_library(h100_ib(), 'nccl', '2.30.7')
    assert has(run(facts, ib_hca=['mlx5_0:1:a:0'])['errors'], "rail 'a' must be an integer from 0")
    assert has(run(facts, ib_hca=['mlx5_0:1:0:16384'])['errors'], "plane '16384'", 'bit 14')
    assert has(run(facts, ib_hca=['mlx5_0:1:0:0:9'])['errors'], 'has 5 fields', 'name:port:rail:plane at most')
    # ncclIbGetPlaneIndex: at most 12 plane IDs besides the undefined one
    many = with_library(h100_ib(), 'nccl', '2.30.7')
    many['rdma']['devices'] = [device('mlx5_%d' % i, 'mlx5_core', '0000:%02x:00.0' % (0x1a + i), [port()])
                               for i in range(13)]
    res = run(many, ib_hca=['mlx5_%d:1:0:%d' % (i, i) for i in range(13)])
    assert has(res['errors'], 'ib_hca names 13 plane IDs', 'at most 12')
    assert run(many, ib_hca=['mlx5_%d:1:0:%d' % (i, i) for i in range(12)])['errors'] == []


def test_env_override_ib_hca_with_rail_fields_checks_the_port():
    res = run(h100_ib(), env_overrides={'NCCL_IB_HCA': '=mlx5_0:2:0:0'})
    assert has(res['errors'], 'names port 2 of mlx5_0, which does not exist')
    assert run(h100_ib(), env_overrides={'NCCL_IB_HCA': '=mlx5_0:1:0:0'})['errors'] == []


def test_ib_hca_naming_a_missing_device_is_an_error_even_when_unused():
    res = run(cpu_only(), ib_hca=['mlx5_0'])
    assert has(res['errors'], "ib_hca names HCA 'mlx5_0', which does not exist on this host")
    res = run(h100_ib(), network_mode='tcp', ib_hca=['mlx5_9'])
    assert has(res['errors'], "ib_hca names HCA 'mlx5_9'")


def test_auto_selection_prefers_pfs_drops_gidless_and_slower_ports():
    facts = mi300x()
    devs = facts['rdma']['devices']
    by_name = dict((d['name'], d) for d in devs)
    by_name['bnxt_re7']['ports'][0]['roce_v2_gid_index'] = None
    res = run(facts)
    assert res['hcas'] == ['bnxt_re%d:1' % i for i in range(7)]
    assert has(res['warnings'], 'without a RoCE v2 GID', 'bnxt_re7:1', 'ens17np0')
    assert res['env']['NCCL_IB_GID_INDEX'] == '3'

    facts = mi300x()
    by_name = dict((d['name'], d) for d in facts['rdma']['devices'])
    by_name['bnxt_re0']['ports'][0]['rate_gbps'] = 100.0
    res = run(facts)
    assert res['hcas'] == ['bnxt_re%d:1' % i for i in range(1, 8)]
    assert has(res['warnings'], 'different rates', 'using the 400 Gb/s ports', 'bnxt_re0:1 (100 Gb/s)')

    facts = h100_sriov()
    facts['rdma']['devices'].append(device('mlx5_0', 'mlx5_core', '0000:3b:00.0',
                                           [port(layer='Ethernet', rate=200.0, netdev='ens1f0np0', gid=3)]))
    res = run(facts)
    assert res['hcas'] == ['mlx5_0:1']
    assert has(res['warnings'], 'virtual functions', 'mlx5_2:1')
    assert res['errors'] == []


def test_explicit_roce_port_without_gid_needs_a_gid_index():
    facts = mi300x()
    facts['rdma']['devices'][0]['ports'][0]['roce_v2_gid_index'] = None  # bnxt_re7 (the list is reversed)
    res = run(facts, ib_hca=['bnxt_re7', 'bnxt_re6'])
    assert has(res['errors'], 'bnxt_re7:1', 'no RoCE v2 GID')
    assert run(facts, ib_hca=['bnxt_re7', 'bnxt_re6'], gid_index=3)['errors'] == []


# --- knobs --------------------------------------------------------------------------------------------

def test_nccl_debug():
    assert run(cpu_only())['env']['NCCL_DEBUG'] == 'WARN'
    res = run(cpu_only(), nccl_debug='info')
    assert res['env']['NCCL_DEBUG'] == 'INFO' and res['sources']['NCCL_DEBUG'] == 'knob'
    for value in (None, '', 'unset'):
        assert 'NCCL_DEBUG' not in run(cpu_only(), nccl_debug=value)['env']
    assert has(run(cpu_only(), nccl_debug='LOUD')['errors'], 'nccl_debug must be one of VERSION, WARN, INFO, TRACE')


def test_channels_and_threads_validation():
    res = run(with_library(h100_ib(), 'nccl', '2.25.1'), channels='42', min_channels='8', threads='256')
    assert (res['env']['NCCL_MAX_NCHANNELS'], res['env']['NCCL_MIN_NCHANNELS'], res['env']['NCCL_NTHREADS']) == (
        '42', '8', '256')
    assert has(run(h100_ib(), channels=8, min_channels=16)['errors'], 'min_channels 16 is larger than channels 8')
    assert has(run(h100_ib(), channels=0)['errors'], 'channels must be an integer >= 1')
    assert has(run(h100_ib(), threads='many')['errors'], 'threads must be an integer >= 1')
    # NCCL src/graph/tuning.cc getNthreads: a multiple of WARP_SIZE (32) from 64 to NCCL_SIMPLE_MAX_NTHREADS (512)
    assert has(run(h100_ib(), threads=300)['errors'], 'threads 300 is not a value', '64, 96, 128')
    assert has(run(h100_ib(), threads=1024)['errors'], 'threads 1024')
    assert run(h100_ib(), threads=512)['env']['NCCL_NTHREADS'] == '512'
    # NCCL src/include/device.h: MAXCHANNELS 32 before 2.25.1, 64 since
    assert has(run(with_library(h100_ib(), 'nccl', '2.21.5'), channels=42)['errors'], 'channels 42', 'allows (32')
    assert run(with_library(h100_ib(), 'nccl', '2.25.1'), channels=42)['errors'] == []
    assert has(run(with_library(h100_ib(), 'nccl', '2.25.1'), channels=65)['errors'], 'channels 65', 'allows (64')
    # an unknown version: 32 is within every version's limit, more depends on the version (an error naming the knob)
    assert run(h100_ib(), channels=32)['errors'] == []
    assert has(run(h100_ib(), channels=42)['errors'], 'channels 42: the NCCL version is unknown', '32/64 by version',
               'trainops_nccl_library_version')
    # left to the library: nothing set
    res = run(h100_ib())
    assert not [k for k in res['env'] if 'NCHANNELS' in k or 'THREADS' in k]


def test_rccl_threads_by_library_version():
    facts = mi300x()
    facts['gpu']['gfx'] = ['gfx942'] * 8
    # RCCL 2.21 (src/graph/tuning.cc): NCCL_NTHREADS from 4 * warpSize (64 on gfx942) to NCCL_MAX_NTHREADS (256)
    old = with_library(copy.deepcopy(facts), 'rccl', '2.21.5')
    assert run(old, threads=256)['env']['NCCL_NTHREADS'] == '256'
    assert has(run(old, threads=512)['errors'], 'threads 512 is not a value RCCL 2.21.5 takes (256)')
    assert 'RCCL_THREADS_PER_BLOCK' not in run(old, threads=256)['env']
    # RCCL >= 2.28 rcclOptThreadBlockSize: RCCL_THREADS_PER_BLOCK rounded up to the warp size (64 on gfx942), clamped
    # to [3 * 64, 256]: 512 would run 256, 100 would run 192, so only 192 and 256 are taken as they are
    new = with_library(copy.deepcopy(facts), 'rccl', '2.28.3')
    res = run(new, threads=512)
    assert res['errors'] == ['threads 512 is not a value RCCL 2.28.3 takes (192, 256): RCCL 2.28.3 rounds '
                             'RCCL_THREADS_PER_BLOCK up to a multiple of the warp size 64 and clamps it to [192, 256] '
                             '(rcclOptThreadBlockSize); it would run 256 threads']
    assert not [k for k in res['env'] if 'THREADS' in k]
    assert has(run(new, threads=100)['errors'], 'threads 100 is not a value', 'it would run 192 threads')
    assert has(run(new, threads=200)['errors'], 'threads 200 is not a value', 'it would run 256 threads')
    res = run(new, threads=192)
    assert res['env']['RCCL_THREADS_PER_BLOCK'] == '192' and 'NCCL_NTHREADS' not in res['env']
    assert has(res['warnings'], 'WarpSpeed', 'RCCL_WARP_SPEED_ENABLE=1')
    res = run(new, threads=256, env_overrides={'RCCL_WARP_SPEED_ENABLE': 1})
    assert res['warnings'] == [] and res['env']['RCCL_THREADS_PER_BLOCK'] == '256'
    # RCCL device.h MAXCHANNELS 128; all of them only on gfx942/gfx950 (graph/connect.cc ncclTopoPostset)
    assert run(new, channels=112)['env']['NCCL_MAX_NCHANNELS'] == '112'
    assert has(run(new, channels=129)['errors'], 'channels 129', 'allows (128')
    facts['gpu']['gfx'] = ['gfx90a'] * 8
    assert has(run(with_library(facts, 'rccl', '2.21.5'), channels=40)['errors'], 'channels 40', 'allows (32',
               '32 on gfx90a (all MAXCHANNELS only on gfx942/gfx950)')


def test_rccl_channel_limits_by_version_architecture_and_node_count():
    facts = mi300x()
    facts['gpu']['gfx'] = ['gfx942'] * 8

    def errors(version, channels, **settings):
        return run(with_library(copy.deepcopy(facts), 'rccl', version), channels=channels, **settings)['errors']
    # MAXCHANNELS: 32 in rocm-6.0.0 (2.18.3, devcomm.h), 64 in rocm-6.1.0 (2.18.6), 128 from rocm-6.2.0 (2.20.5)
    assert errors('2.18.3', 40) == ['channels 40 is more than RCCL 2.18.3 allows (32, MAXCHANNELS 32): the library '
                                    'would silently use 32']
    assert errors('2.18.6', 96) == ['channels 96 is more than RCCL 2.18.6 allows (64, MAXCHANNELS 64): the library '
                                    'would silently use 64']
    assert errors('2.18.6', 64) == [] and errors('2.20.5', 128) == []
    # ncclTopoPostset (rocm-6.2.0 on): std::min(64, maxChannels) when nNodes > 1, min_channels too
    assert errors('2.21.5', 128, nnodes=2) == [
        'channels 128 is more than RCCL 2.21.5 allows (64, MAXCHANNELS 128, 64 when the job has more than one node '
        '(2 nodes)): the library would silently use 64']
    assert has(run(with_library(copy.deepcopy(facts), 'rccl', '2.21.5'), min_channels=80, nnodes=4)['errors'],
               'min_channels 80 is more than RCCL 2.21.5 allows (64')
    assert errors('2.21.5', 64, nnodes=2) == [] and errors('2.21.5', 128, nnodes=1) == []
    # a CPX partition (38 CUs per GPU): ncclTopoPostset caps gfx942 at the CU count (rocm-6.3 on)
    facts['gpu']['compute_units'] = [38] * 8
    assert has(errors('2.21.5', 40), 'channels 40 is more than RCCL 2.21.5 allows (38', 'compute units')
    assert errors('2.20.5', 40) == []
    del facts['gpu']['compute_units']
    # an unknown version: within 32 every RCCL takes it; above, the limit depends on the version
    assert run(facts, channels=32)['errors'] == []
    assert has(run(facts, channels=96)['errors'], 'channels 96: the RCCL version is unknown',
               '32/64/128 by version', 'trainops_nccl_library_version')
    # across nodes 64 up to 2.30, 128 in the 2.31 tree when channels asks for more than 64 (RCCL_LIFTED_CAP_SINCE)
    assert has(run(facts, channels=96, nnodes=2)['errors'], 'channels 96: the RCCL version is unknown', '32/64/128 by')
    assert has(run(facts, channels=60, nnodes=2)['errors'], 'channels 60: the RCCL version is unknown', '32/64 by')
    # no GPUs: no library reads it, only a warning (the CPU stand-ins of the e2e and lab tests)
    res = run(cpu_only(), channels=42, threads=512, nnodes=2)
    assert res['errors'] == [] and res['env']['NCCL_MAX_NCHANNELS'] == '42'
    assert has(run(h100_ib(), nnodes=0)['errors'], 'nnodes must be an integer >= 1')


def test_ib_fifo_tc_and_qps_per_connection_by_version():
    facts = h100_sriov()

    def res(version, **settings):
        return run(with_library(copy.deepcopy(facts), 'nccl', version) if version else copy.deepcopy(facts),
                   **settings)
    # NCCL_IB_FIFO_TC: absent before 2.22.3, 0 ignored in 2.22/2.23 (ncclIbRtrQp applies it only when non-zero),
    # every value since 2.24.3 (default -1)
    assert has(res('2.21.5', ib_fifo_tc=96)['errors'], 'ib_fifo_tc 96: NCCL 2.21.5 ignores it', 'since 2.22')
    assert has(res('2.23.4', ib_fifo_tc=0)['errors'], 'ib_fifo_tc 0: NCCL 2.23.4 ignores 0', 'NCCL_IB_TC')
    assert res('2.23.4', ib_fifo_tc=96)['env']['NCCL_IB_FIFO_TC'] == '96'
    assert res('2.24.3', ib_fifo_tc=0)['env']['NCCL_IB_FIFO_TC'] == '0'
    assert has(res(None, ib_fifo_tc=96)['errors'], 'ib_fifo_tc 96', 'unknown', 'trainops_nccl_library_version')
    # NCCL_IB_QPS_PER_CONNECTION x the ports merged into one NIC <= NCCL_IB_MAX_QPS (128), since 2.20
    dual = copy.deepcopy(facts)
    dev = dual['rdma']['devices'][0]
    second = copy.deepcopy(dev['ports'][0])
    second['port'] = 2
    dev['ports'].append(second)
    got = run(with_library(copy.deepcopy(dual), 'nccl', '2.21.5'), ib_qps_per_connection=128)
    assert got['errors'] == [
        'ib_qps_per_connection 128: 128 QPs x 2 merged ports of one NIC = 256, more than NCCL_IB_MAX_QPS (128): '
        'NCCL 2.21.5 opens QPs per connection times merged ports (src/transport/net_ib.cc, since 2.20)']
    assert run(with_library(copy.deepcopy(dual), 'nccl', '2.21.5'), ib_qps_per_connection=64)['errors'] == []
    # before 2.20 nqps = NCCL_IB_QPS_PER_CONNECTION (no merged NICs)
    old = run(with_library(copy.deepcopy(dual), 'nccl', '2.19.3'), ib_qps_per_connection=128, gid_index=3)
    assert old['errors'] == [] and old['env']['NCCL_IB_QPS_PER_CONNECTION'] == '128'
    assert res('2.21.5', ib_qps_per_connection=128)['errors'] == []  # one port per device
    # NCCL 2.30 merges up to 8 ports into one NIC (NCCL_NET_MAX_DEVS_PER_NIC_V12, v2.30.3-1 net/net_v12.h:11), 2.29
    # and older up to 4 (v2.29.7-1 src/transport/net_ib/common.h:53): a device with 6 chosen ports
    six = copy.deepcopy(dual)
    for number in range(3, 7):
        six['rdma']['devices'][0]['ports'].append(dict(copy.deepcopy(second), port=number))
    assert run(with_library(copy.deepcopy(six), 'nccl', '2.29.7'), ib_qps_per_connection=32)['errors'] == []
    assert run(with_library(copy.deepcopy(six), 'nccl', '2.30.3'), ib_qps_per_connection=32)['errors'] == [
        'ib_qps_per_connection 32: 32 QPs x 6 merged ports of one NIC = 192, more than NCCL_IB_MAX_QPS (128): '
        'NCCL 2.30.3 opens QPs per connection times merged ports (src/transport/net_ib.cc, since 2.20)']
    assert run(with_library(copy.deepcopy(six), 'nccl', '2.30.3'), ib_qps_per_connection=16)['errors'] == []


def test_net_gdr_level():
    res = run(h100_ib(), net_gdr_level='pxb')
    assert res['env']['NCCL_NET_GDR_LEVEL'] == 'PXB' and res['sources']['NCCL_NET_GDR_LEVEL'] == 'knob'
    assert run(h100_ib(), net_gdr_level=5)['env']['NCCL_NET_GDR_LEVEL'] == '5'
    assert 'NCCL_NET_GDR_LEVEL' not in run(h100_ib(), net_gdr_level=None)['env']
    assert has(run(h100_ib(), net_gdr_level='FAR')['errors'], 'net_gdr_level must be auto, unset, one of LOC/PIX')
    res = run(ethernet_gpu(), net_gdr_level='SYS')
    assert 'NCCL_NET_GDR_LEVEL' not in res['env'] and has(res['warnings'], 'net_gdr_level SYS ignored')
    facts = mi300x()
    facts['rdma']['gpudirect'] = {'nvidia_peermem': False, 'nv_peer_mem': False, 'amd_peer_mem': False,
                                  'dma_buf': False, 'available': False}
    assert has(run(facts)['warnings'], 'GPUDirect RDMA is not available', 'amdkfd')


def test_gid_index_validation():
    assert has(run(mi300x(), gid_index='three')['errors'], 'gid_index must be auto, unset or an integer')
    assert has(run(mi300x(), gid_index=-1)['errors'], 'gid_index must be')
    res = run(h100_ib(), gid_index=0)
    assert res['env']['NCCL_IB_GID_INDEX'] == '0' and has(res['warnings'], 'no RoCE port is used')
    res = run(ethernet_gpu(), gid_index=3)
    assert 'NCCL_IB_GID_INDEX' not in res['env'] and has(res['warnings'], 'gid_index ignored')


def test_rocm_defaults():
    assert not [k for k in run(mi300x(), rocm_defaults={})['env'] if k.startswith('HSA_')]
    res = run(mi300x(), rocm_defaults={'HSA_ENABLE_IPC_MODE_LEGACY': 1, 'HSA_ENABLE_SDMA': None})
    assert res['env']['HSA_ENABLE_IPC_MODE_LEGACY'] == '1' and 'HSA_ENABLE_SDMA' not in res['env']
    assert res['sources']['HSA_ENABLE_IPC_MODE_LEGACY'] == 'knob'
    assert 'HSA_ENABLE_SDMA' not in run(h100_ib(), rocm_defaults={'HSA_ENABLE_SDMA': '0'})['env']
    assert has(run(mi300x(), rocm_defaults={'BAD NAME': 1})['errors'], 'rocm_defaults')
    assert has(run(mi300x(), rocm_defaults=['HSA_ENABLE_SDMA'])['errors'], 'rocm_defaults must be a dict')


def test_require_transport_sets_nccl_net():
    assert run(h100_ib(), require_transport=True)['env']['NCCL_NET'] == 'IB'
    assert run(ethernet_gpu(), require_transport=True)['env']['NCCL_NET'] == 'Socket'
    assert 'NCCL_NET' not in run(h100_ib())['env']


def test_vendor_setting():
    res = run(h100_ib(), vendor='amd', threads=256, library_version='2.21.5')
    assert res['vendor'] == 'amd' and res['env']['NCCL_NTHREADS'] == '256'
    assert has(run(h100_ib(), vendor='intel')['errors'], 'vendor must be one of nvidia, amd, none')


# --- env_overrides ----------------------------------------------------------------------------------------

def test_env_overrides_win_and_null_removes():
    res = run(mi300x(), channels=28, env_overrides={
        'NCCL_MAX_NCHANNELS': 40, 'NCCL_DEBUG': None, 'NCCL_NCHANNELS_PER_NET_PEER': 8, 'NCCL_PROTO': 'Simple',
        'TORCH_NCCL_ASYNC_ERROR_HANDLING': True, 'NCCL_IB_GID_INDEX': '5'})
    env, src = res['env'], res['sources']
    assert env['NCCL_MAX_NCHANNELS'] == '40' and src['NCCL_MAX_NCHANNELS'] == 'override'
    assert env['NCCL_IB_GID_INDEX'] == '5' and src['NCCL_IB_GID_INDEX'] == 'override'
    assert env['NCCL_NCHANNELS_PER_NET_PEER'] == '8' and env['NCCL_PROTO'] == 'Simple'
    assert env['TORCH_NCCL_ASYNC_ERROR_HANDLING'] == '1'
    assert 'NCCL_DEBUG' not in env and 'NCCL_DEBUG' not in src and res['unset'] == ['NCCL_DEBUG']
    assert res['errors'] == []


def test_env_overrides_invalid():
    res = run(cpu_only(), env_overrides={'1BAD': 'x', 'GOOD': 'a\nb', 'LIST': [1, 2]})
    assert has(res['errors'], "'1BAD' is not a valid environment variable name")
    assert has(res['errors'], 'GOOD', 'one line')
    assert has(res['errors'], 'LIST', 'string, number or boolean')
    assert 'GOOD' not in res['env'] and 'LIST' not in res['env']
    assert has(run(cpu_only(), env_overrides='NCCL_DEBUG=INFO')['errors'], 'env_overrides must be a dict')


def test_a_variable_name_with_a_trailing_newline_is_no_name():
    # re.match with "$" took "NCCL_DEBUG\n" for a name: the whole name must match
    res = run(mi300x(), env_overrides={'NCCL_DEBUG\n': 'INFO'}, rocm_defaults={'HSA_X\n': '1'})
    assert has(res['errors'], "'NCCL_DEBUG\\n' is not a valid environment variable name")
    assert has(res['errors'], "rocm_defaults: 'HSA_X\\n'='1' is not a valid variable and value")
    assert not any(var.endswith('\n') for var in res['env'])
    with pytest.raises(ValueError, match='not a valid environment variable name'):
        render_env_file({'NCCL_DEBUG\n': 'INFO'})


def test_env_override_ib_hca_is_checked():
    facts = h100_ib()
    facts['rdma']['devices'].extend(device('mlx5_%d' % i, 'mlx5_core', None, [port(netdev='ib%d' % i)])
                                    for i in (10, 11))
    res = run(facts, env_overrides={'NCCL_IB_HCA': 'mlx5_1'})
    assert res['env']['NCCL_IB_HCA'] == 'mlx5_1'
    assert has(res['warnings'], "prefix 'mlx5_1' matches mlx5_1, mlx5_10, mlx5_11")
    assert has(run(facts, env_overrides={'NCCL_IB_HCA': '=mlx5_9'})['errors'], 'selects no RDMA device')
    assert has(run(facts, env_overrides={'NCCL_IB_HCA': '=mlx5_0:2'})['errors'], 'port 2 of mlx5_0')
    assert run(facts, env_overrides={'NCCL_IB_HCA': '=mlx5_0:1,mlx5_1:1'})['warnings'] == []


def test_env_override_ib_disable_changes_the_transport():
    res = run(h100_ib(), env_overrides={'NCCL_IB_DISABLE': '1'})
    assert res['transport'] == 'tcp' and res['hcas'] == [] and res['link_layer'] is None
    assert has(res['warnings'], 'turns RDMA off')
    res = run(h100_ib(), network_mode='tcp', env_overrides={'NCCL_IB_DISABLE': 0})
    assert res['transport'] == 'rdma' and res['link_layer'] == 'infiniband'
    res = run(ethernet_gpu(), env_overrides={'NCCL_IB_DISABLE': 0})
    assert res['transport'] == 'tcp' and has(res['warnings'], 'no RDMA port is ACTIVE')


# --- facts edge cases -------------------------------------------------------------------------------------

def test_facts_without_rdma_section():
    facts = ethernet_gpu()
    del facts['rdma']
    res = run(facts)
    assert res['transport'] == 'tcp' and res['gpudirect'] is None
    assert has(res['warnings'], 'no rdma section')


def test_no_facts_and_unknown_settings():
    res = compute(None, {'chanels': 3})
    assert has(res['errors'], 'no node facts given')
    assert has(res['errors'], 'unknown setting(s): chanels')
    assert has(compute(cpu_only(), {'network_mode': 'fast'})['errors'], 'network_mode must be auto, rdma or tcp')


def test_compute_does_not_modify_its_inputs():
    facts, settings = mi300x(), {'env_overrides': {'NCCL_DEBUG': None}, 'ib_hca': ['bnxt_re0']}
    before = copy.deepcopy((facts, settings))
    compute(facts, settings)
    assert (facts, settings) == before


def test_parse_and_match_nccl_lists():
    assert parse_nccl_list('^=docker0,lo') == (True, True, [('docker0', None), ('lo', None)])
    assert parse_nccl_list('=mlx5_0:1,mlx5_1') == (False, True, [('mlx5_0', 1), ('mlx5_1', None)])
    names = ['lo', 'eth0', 'eth1', 'bond0', 'bond0.2093', 'docker0']
    assert match_names('eth', names) == ['eth0', 'eth1']
    assert match_names('=bond0', names) == ['bond0']
    assert match_names('bond0', names) == ['bond0', 'bond0.2093']
    assert match_names('^docker,lo', names) == ['eth0', 'eth1', 'bond0', 'bond0.2093']
    assert match_names('^=bond0', names) == ['lo', 'eth0', 'eth1', 'bond0.2093', 'docker0']


# --- GID tables, QoS and libraries across nodes ------------------------------------------------------------

def gid_table(port_facts, entries):
    """Give a builder port a GID table: [(index, gid, type)]."""
    port_facts['gids'] = [{'index': i, 'gid': g, 'type': t, 'netdev': port_facts['netdev']} for i, g, t in entries]
    port_facts['gid_table_len'] = 8
    return port_facts


def test_roce_v1_only_tables_set_the_roce_version_with_a_warning():
    facts = with_library(mi300x(), 'rccl', '2.21.5')
    for dev in facts['rdma']['devices']:
        gid_table(dev['ports'][0], [(0, 'fe80:0000:0000:0000:8616:0cff:fe4a:172e', 'IB/RoCE v1'),
                                    (1, '0000:0000:0000:0000:0000:ffff:0a01:0001', 'IB/RoCE v1')])
    res = run(facts, gid_index='auto', ib_hca=['bnxt_re0', 'bnxt_re1'])
    # ncclIbGetGidIndex with NCCL_IB_ROCE_VERSION_NUM=1 (NCCL_PARAM(IbRoceVersionNum, "IB_ROCE_VERSION_NUM", 2))
    assert res['env']['NCCL_IB_ROCE_VERSION_NUM'] == '1' and 'NCCL_IB_ADDR_FAMILY' not in res['env']
    assert has(res['warnings'], 'only have RoCE v1 GIDs', 'not routed')
    assert 'NCCL_IB_GID_INDEX' not in res['env']


def test_nccl_gid_index_follows_ncclUpdateGidIndex():
    port_facts = gid_table(port(layer='Ethernet', netdev='ens1'), [
        (0, 'fe80:0000:0000:0000:0000:00ff:fe00:0001', 'IB/RoCE v1'), (1, 'fe80:0000:0000:0000:0000:00ff:fe00:0001', 'RoCE v2'),
        (2, '0000:0000:0000:0000:0000:ffff:0a00:0001', 'IB/RoCE v1'), (3, '0000:0000:0000:0000:0000:ffff:0a00:0001', 'RoCE v2'),
        (4, 'fd00:0000:0000:0000:0000:0000:0000:0001', 'IB/RoCE v1'), (5, 'fd00:0000:0000:0000:0000:0000:0000:0001', 'RoCE v2')])
    ports = _ports({'rdma': {'devices': [device('mlx5_0', 'mlx5_core', None, [port_facts])]}})
    assert nccl_gid_index(ports[0]) == 3                       # AF_INET, RoCE v2 (the defaults)
    assert nccl_gid_index(ports[0], 'AF_INET', 1) == 2
    assert nccl_gid_index(ports[0], 'AF_INET6') == 5           # the link-local ones are never valid
    assert nccl_gid_index(ports[0], 'AF_INET6', 1) == 4


def test_qos_on_infiniband_and_over_tcp():
    res = run(h100_ib(), ib_tc=106, ib_sl=2)
    assert res['env']['NCCL_IB_TC'] == '106' and res['env']['NCCL_IB_SL'] == '2'
    assert has(res['warnings'], 'ib_tc has no effect on InfiniBand ports')
    res = run(ethernet_gpu(), ib_tc=106, cross_nic=1)
    assert 'NCCL_IB_TC' not in res['env'] and has(res['warnings'], 'ib_tc has no effect')
    assert res['env']['NCCL_CROSS_NIC'] == '1' and has(res['warnings'], 'cross_nic has no effect over TCP')


# --- HCA choice by PCIe topology ----------------------------------------------------------------------------------

def pci(*path, numa=0):
    return dict(path=list(path), numa_node=numa)


def entry(*path, numa=0):
    return [str(c) for c in path], numa


def test_pci_path_types_follow_nccl():
    # NCCL src/graph/topo.h: PIX at most one PCIe bridge, PXB several without the host bridge, PHB through the host
    # bridge (CPU), SYS across NUMA nodes; src/graph/paths.cc ncclTopoSetPaths: a PCI-PCI hop is PXB
    gpu = entry('pci0000:15', '0000:15:01.0', '0000:16:00.0', '0000:17:02.0', '0000:1b:00.0')
    assert pci_path_type(gpu, entry('pci0000:15', '0000:15:01.0', '0000:16:00.0', '0000:17:02.0',
                                    '0000:1b:00.1')) == 'PIX'
    assert pci_path_type(gpu, entry('pci0000:15', '0000:15:01.0', '0000:16:00.0', '0000:17:00.0',
                                    '0000:18:00.0')) == 'PXB'
    assert pci_path_type(gpu, entry('pci0000:15', '0000:15:02.0', '0000:29:00.0')) == 'PHB'
    assert pci_path_type(gpu, entry('pci0000:28', '0000:28:01.0', '0000:29:00.0')) == 'PHB'
    assert pci_path_type(gpu, entry('pci0000:a9', '0000:a9:01.0', '0000:aa:00.0', numa=1)) == 'SYS'
    assert pci_path_type(gpu, entry('pci0000:a9', '0000:a9:01.0', '0000:aa:00.0', numa=None)) == 'SYS'


def topo_facts(gpus, hcas):
    facts = h100_ib()
    facts['pci'] = dict(gpus=gpus, rdma=hcas)
    return facts


def test_topology_keeps_the_rail_of_each_gpu_and_names_the_others():
    gpus = dict(('0000:%02x:00.0' % (0x1b + i), pci('pci0000:%02x' % i, '0000:%02x:01.0' % i, '0000:%02x:00.0' % (0x1b + i)))
                for i in range(2))
    hcas = dict(('mlx5_%d' % i, pci('pci0000:%02x' % i, '0000:%02x:01.0' % i, '0000:%02x:00.1' % (0x1b + i)))
                for i in range(2))
    hcas.update(('mlx5_%d' % i, pci('pci0000:80', '0000:80:01.0', '0000:%02x:00.0' % (0x90 + i), numa=1))
                for i in range(2, 8))
    res = run(topo_facts(gpus, hcas))
    assert res['env']['NCCL_IB_HCA'] == '=mlx5_0:1,mlx5_1:1'
    assert res['left_out'] == dict(('mlx5_%d:1' % i, 'no GPU under the same PCIe switch (nearest GPU path SYS)')
                                   for i in range(2, 8))
    assert res['topology'] == ('PCIe topology: one rail per GPU: GPU 0000:1b:00.0 -> mlx5_0 (PIX), '
                               'GPU 0000:1c:00.0 -> mlx5_1 (PIX)')
    # a second HCA further up the same switch: the GPU's nearest one serves it, the other is named
    hcas['mlx5_2'] = pci('pci0000:00', '0000:00:01.0', '0000:1d:00.0')
    gpus['0000:1b:00.0'] = pci('pci0000:00', '0000:00:01.0', '0000:1e:00.0', '0000:1b:00.0')
    hcas['mlx5_0'] = pci('pci0000:00', '0000:00:01.0', '0000:1e:00.0', '0000:1b:00.1')
    res = run(topo_facts(gpus, hcas))
    assert res['left_out']['mlx5_2:1'] == 'a nearer HCA serves the GPUs under its PCIe switch (this one is PXB)'
    assert res['hcas'] == ['mlx5_0:1', 'mlx5_1:1']
    assert res['topology'].startswith('PCIe topology: one rail per GPU: GPU 0000:1b:00.0 -> mlx5_0 (PIX)')
    # two HCAs as near one GPU: both serve it (NCCL's ncclTopoGetLocal returns every NIC of the best path type)
    hcas['mlx5_2'] = pci('pci0000:00', '0000:00:01.0', '0000:1e:00.0', '0000:1b:00.2')
    res = run(topo_facts(gpus, hcas))
    assert res['hcas'] == ['mlx5_0:1', 'mlx5_1:1', 'mlx5_2:1']
    assert res['topology'] == ('PCIe topology: GPU 0000:1b:00.0 -> mlx5_0+mlx5_2 (PIX), '
                               'GPU 0000:1c:00.0 -> mlx5_1 (PIX)')


def test_topology_not_read_keeps_todays_choice():
    eight = ['mlx5_%d:1' % i for i in range(8)]
    # no pci section (facts from an older node_facts), GPU paths missing, or GPUs straight on a root complex (a VM)
    assert run(h100_ib())['hcas'] == eight
    assert run(h100_ib())['topology'] == 'PCIe topology not read (the facts show no GPU PCI paths): every ACTIVE port kept'
    hcas = dict(('mlx5_%d' % i, pci('pci0000:00', '0000:00:%02x.0' % (4 + i))) for i in range(8))
    flat = dict(('0000:00:%02x.0' % (0x10 + i), pci('pci0000:00', '0000:00:%02x.0' % (0x10 + i))) for i in range(8))
    res = run(topo_facts(flat, hcas))
    assert res['hcas'] == eight and res['left_out'] == {}
    assert res['topology'] == ('PCIe topology not read (the GPUs sit straight on the root complex (a flat PCI layout, '
                               'as in VMs)): every ACTIVE port kept')
    res = run(topo_facts({'0000:1b:00.0': None}, hcas))
    assert res['hcas'] == eight and 'no sysfs PCI path for 0000:1b:00.0' in res['topology']
    # never drop every HCA: none near a GPU keeps them all
    far = {'0000:1b:00.0': pci('pci0000:15', '0000:15:01.0', '0000:1b:00.0', numa=1)}
    res = run(topo_facts(far, hcas))
    assert res['hcas'] == eight and res['topology'] == 'PCIe topology: no HCA within PXB of a GPU: every ACTIVE port kept'
    table = check_cluster({'n1': res})['table']
    assert 'n1: PCIe topology: no HCA within PXB of a GPU' in table


def test_efa_plugin_that_is_not_aws_ofi_nccl_is_named():
    facts = h100_ib()
    facts['rdma']['devices'] = [device('rdmap%ds0' % i, 'efa', '0000:%02x:00.0' % (0x10 + i),
                                       [port(layer='Unspecified', rate=None)]) for i in range(2)]
    facts['library'] = dict(name='nccl', version='2.23.4', source='test', aws_ofi_nccl=None, other_net_plugins=[
        dict(path='/usr/lib/libnccl-net.so', aws_ofi_nccl=False, version=None, names=['IBext', 'SHARP'])])
    res = run(facts)
    assert res['transport'] == 'tcp'
    assert has(res['warnings'], '/usr/lib/libnccl-net.so is not aws-ofi-nccl', '"Libfabric"', 'IBext, SHARP')


# --- gpu_ids: the GPUs a Slurm job holds on the node (CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES) ------------

def test_gpu_ids_on_a_shared_nvidia_node():
    # the job holds GPUs 4-7 of an 8-GPU node: without the variable its ranks would use 0-3, another job's
    res = run(h100_ib(), nproc_per_node=4, gpu_ids=[4, 5, 6, 7])
    assert res['errors'] == []
    assert res['env']['CUDA_VISIBLE_DEVICES'] == '4,5,6,7' and 'ROCR_VISIBLE_DEVICES' not in res['env']
    assert res['sources']['CUDA_VISIBLE_DEVICES'] == 'knob'
    assert '4 of the node\'s 8 GPUs' in res['reasons']['CUDA_VISIBLE_DEVICES']
    assert 'numbered from 0 where the session is confined' in res['reasons']['CUDA_VISIBLE_DEVICES']


def test_gpu_ids_on_amd_and_without_a_vendor():
    res = run(mi300x(), nproc_per_node=2, gpu_ids='2,3')
    assert res['errors'] == [] and res['env']['ROCR_VISIBLE_DEVICES'] == '2,3'
    assert 'CUDA_VISIBLE_DEVICES' not in res['env'] and 'HIP_VISIBLE_DEVICES' not in res['env']
    # the lab: CPU training on nodes whose Slurm has stand-in GPU devices; both variables, as Slurm's own steps get
    res = run(cpu_only(), nproc_per_node=2, gpu_ids=[0, 1])
    assert res['errors'] == []
    assert (res['env']['CUDA_VISIBLE_DEVICES'], res['env']['ROCR_VISIBLE_DEVICES']) == ('0,1', '0,1')


def test_gpu_ids_on_a_whole_node_and_none_given():
    res = run(ethernet_gpu(), nproc_per_node=2, gpu_ids=[0, 1])
    assert res['env']['CUDA_VISIBLE_DEVICES'] == '0,1' and 'every GPU of the node' in res['reasons']['CUDA_VISIBLE_DEVICES']
    for empty in (None, [], ''):
        assert 'CUDA_VISIBLE_DEVICES' not in run(ethernet_gpu(), nproc_per_node=2, gpu_ids=empty)['env']
    assert 'CUDA_VISIBLE_DEVICES' not in run(ethernet_gpu(), nproc_per_node=2)['env']


def test_env_overrides_win_over_gpu_ids():
    res = run(h100_ib(), nproc_per_node=4, gpu_ids=[4, 5, 6, 7], env_overrides={'CUDA_VISIBLE_DEVICES': None})
    assert 'CUDA_VISIBLE_DEVICES' not in res['env'] and res['unset'] == ['CUDA_VISIBLE_DEVICES']
    res = run(h100_ib(), nproc_per_node=4, gpu_ids=[4, 5, 6, 7], env_overrides={'CUDA_VISIBLE_DEVICES': '0,1,2,3'})
    assert res['env']['CUDA_VISIBLE_DEVICES'] == '0,1,2,3' and res['sources']['CUDA_VISIBLE_DEVICES'] == 'override'


@pytest.mark.parametrize('facts, settings, fragment', [
    (h100_ib, {'nproc_per_node': 8, 'gpu_ids': [4, 5, 6, 7]},
     'nproc_per_node 8 is larger than the 4 GPU(s) the ranks may use on this node (gpu_ids 4,5,6,7, the GPUs the '
     'Slurm job holds here)'),
    (ethernet_gpu, {'nproc_per_node': 2, 'gpu_ids': [2, 3]},
     'gpu_ids 2,3: this node has 2 GPU(s) (indexes 0-1)'),
    (h100_ib, {'nproc_per_node': 2, 'gpu_ids': [1, 1]}, 'gpu_ids 1,1 names a GPU twice'),
    (h100_ib, {'nproc_per_node': 1, 'gpu_ids': ['x']}, "gpu_ids: 'x' is not a GPU index"),
    (h100_ib, {'nproc_per_node': 1, 'gpu_ids': [-1]}, 'gpu_ids: -1 is not a GPU index'),
    (h100_ib, {'nproc_per_node': 1, 'gpu_ids': {'a': 1}}, 'gpu_ids must be a list of GPU indexes'),
])
def test_gpu_ids_that_do_not_fit(facts, settings, fragment):
    res = run(facts(), **settings)
    assert has(res['errors'], fragment), res['errors']
