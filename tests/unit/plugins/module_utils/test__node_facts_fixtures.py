# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Node facts on recorded node trees (tests/unit/fixtures/node_facts/<name>), vendor tools replaced by FakeRunner."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _facts_io as fio
from ansible_collections.trainops.multinode.plugins.module_utils import _gpu_facts as gf
from ansible_collections.trainops.multinode.plugins.module_utils import _node_facts as nf

_TREE = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures', 'node_facts', 'fixture_tree.py')
_SPEC = importlib.util.spec_from_file_location('node_facts_fixture_tree', _TREE)
fixture_tree = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(fixture_tree)

ZERO_NONE = dict(nvidia_peermem=False, nv_peer_mem=False, amd_peer_mem=False, dma_buf=False, dmabuf_kernel=None,
                 dmabuf_read_in=None, dmabuf_kernel_search=None, path=None, available=False)


def strip_tables(devices):
    """The devices without each Ethernet port's GID table (gids, gid_table_len), checked by their own tests."""
    result = []
    for device in devices:
        ports = [dict((k, v) for k, v in p.items() if k not in ('gids', 'gid_table_len')) for p in device['ports']]
        result.append(dict(device, ports=ports))
    return result


class FakeRunner:
    """Answers recorded outputs by (tool basename, args...); anything else fails the test."""

    def __init__(self, tools=(), outputs=None, timeout=False):
        self.paths = dict((tool, '/usr/bin/' + tool) for tool in tools)
        if timeout:
            self.paths['timeout'] = '/usr/bin/timeout'
        self.outputs = dict(outputs or {})
        self.calls = []

    def which(self, name):
        return self.paths.get(name)

    def run(self, argv):
        self.calls.append(list(argv))
        args = list(argv)
        if self.paths.get('timeout') and args[0] == self.paths['timeout']:
            assert args[1:4] == ['-k', '5', str(nf.TOOL_TIMEOUT)]
            args = args[4:]
        assert args[0] == self.paths.get(os.path.basename(args[0])), 'ran {0} without which()'.format(args[0])
        key = tuple([os.path.basename(args[0])] + args[1:])
        if key not in self.outputs:
            raise AssertionError('unexpected command {0}'.format(argv))
        return self.outputs[key]

    def tool_calls(self):
        """The commands run, without the timeout prefix and with tool names instead of paths."""
        result = []
        for call in self.calls:
            if self.paths.get('timeout') and call[0] == self.paths['timeout']:
                call = call[4:]
            result.append(' '.join([os.path.basename(call[0])] + call[1:]))
        return result


@pytest.fixture
def tree(tmp_path):
    def make(name):
        return fixture_tree.materialize(name, tmp_path / name)
    return make


def ok(text):
    return 0, text, ''


def port(num, state, phys_state, link_layer, rate, netdev, gid_index=None, gid=None):
    gbps = float(rate.split()[0]) if rate else None
    return dict(port=num, state=state, phys_state=phys_state, link_layer=link_layer, rate=rate, rate_gbps=gbps,
                netdev=netdev, roce_v2_gid_index=gid_index, roce_v2_gid=gid)


# ------------------------------------------------------------------------------------------------
# the fixture trees themselves
# ------------------------------------------------------------------------------------------------

def test_fixture_trees_are_sysfs_shaped(tree):
    root = tree('h100_4gpu_sriov_roce')
    ib = os.path.join(root, 'sys/class/infiniband/mlx5_2')
    assert os.path.islink(ib) and os.path.islink(os.path.join(ib, 'device'))
    assert os.readlink(os.path.join(ib, 'device')) == '../../../0000:1a:00.2'
    assert os.readlink(os.path.join(ib, 'device/driver')) == '../../../../bus/pci/drivers/mlx5_core'
    assert os.path.realpath(os.path.join(ib, 'device/physfn')).endswith('/0000:1a:00.0')
    assert os.path.isdir(os.path.join(root, 'proc/driver/nvidia/gpus/0000:5d:00.0'))


@pytest.mark.parametrize('name', fixture_tree.NAMES)
def test_every_fixture_materializes_inside_its_root(tree, name):
    root = os.path.realpath(tree(name))
    for dirpath, dirnames, filenames in os.walk(root):
        for entry in dirnames + filenames:
            path = os.path.join(dirpath, entry)
            if os.path.islink(path):
                assert os.path.realpath(path).startswith(root + os.sep)
                assert os.path.exists(path)


# ------------------------------------------------------------------------------------------------
# 8x MI300X + 8x bnxt_re RoCE v2
# ------------------------------------------------------------------------------------------------

MI300X_GPUS = ['0000:0c:00.0', '0000:22:00.0', '0000:38:00.0', '0000:5c:00.0', '0000:9f:00.0', '0000:af:00.0',
               '0000:bf:00.0', '0000:df:00.0']
MI300X_NICS = [('bnxt_re0', '0000:06:00.0', 'enp6s0np0'), ('bnxt_re1', '0000:23:00.0', 'enp35s0np0'),
               ('bnxt_re2', '0000:39:00.0', 'enp57s0np0'), ('bnxt_re3', '0000:5d:00.0', 'enp93s0np0'),
               ('bnxt_re4', '0000:a0:00.0', 'enp160s0np0'), ('bnxt_re5', '0000:b0:00.0', 'enp176s0np0'),
               ('bnxt_re6', '0000:c0:00.0', 'enp192s0np0'), ('bnxt_re7', '0000:e0:00.0', 'enp224s0np0')]


def test_mi300x_gpus_from_kfd_topology_alone(tree):
    root = tree('mi300x_8gpu_bnxt_roce')
    runner = FakeRunner(tools=['amd-smi', 'rocm-smi'])  # installed, but sysfs already tells everything
    warnings = []
    gpu = nf.gpu_details(root, runner, warnings)
    assert gpu == dict(vendor='amd', count=8, models=['AMD Instinct MI300X'] * 8, pci_ids=MI300X_GPUS,
                       driver_version='6.8.5', interconnect=dict(type='xgmi', source='kfd-topology'),
                       sources=['kfd-topology'], gfx=['gfx942'] * 8,
                       compute_units=[304] * 8)
    assert runner.calls == [] and warnings == []
    assert nf.gpu_facts(root) == dict(vendor='amd', count=8, pci_ids=MI300X_GPUS, models=['AMD Instinct MI300X'] * 8)


def test_mi300x_bnxt_re_roce_v2(tree):
    rdma = nf.rdma_facts(tree('mi300x_8gpu_bnxt_roce'), 'amd')
    assert [d['name'] for d in rdma['devices']] == [n for n, _p, _i in MI300X_NICS]
    for rail, (device, (name, pci_id, ifname)) in enumerate(zip(rdma['devices'], MI300X_NICS)):
        gid = '0000:0000:0000:0000:0000:ffff:0ac8:{0:02x}0b'.format(rail)  # 10.200.<rail>.11
        assert strip_tables([device])[0] == dict(name=name, driver='bnxt_en', pci_id=pci_id, virtual_function=False, ports=[
            port(1, 'ACTIVE', 'LinkUp', 'Ethernet', '400 Gb/sec (4X NDR)', ifname, 3, gid)])
    assert rdma['active_ports'] == ['bnxt_re{0}:1'.format(i) for i in range(8)]
    assert rdma['transport'] == 'roce'
    # inbox kernel: RDMA dma-buf, no peer-memory client. RCCL uses dma-buf only when the kernel was built with
    # CONFIG_DMABUF_MOVE_NOTIFY and CONFIG_PCI_P2PDMA (RCCL src/misc/rocmwrap.cc reads /boot/config-<release>); this
    # tree has no kernel config, so RCCL would stage through host memory: not available
    # RCCL 2.28 and later read /proc/kallsyms when no config file opens: these symbols are not there either
    assert rdma['gpudirect'] == dict(ZERO_NONE, dma_buf=True, dmabuf_read_in='host', dmabuf_kernel_search=dict(
        file='/proc/kallsyms', options={'CONFIG_DMABUF_MOVE_NOTIFY': False, 'CONFIG_PCI_P2PDMA': False}))


def _strip_mi300x_sysfs(root):
    """An MI300X node without libdrm's amdgpu.ids, a DKMS version file, io_links or hive ids."""
    os.remove(os.path.join(root, 'usr/share/libdrm/amdgpu.ids'))
    os.remove(os.path.join(root, 'sys/module/amdgpu/version'))
    nodes = os.path.join(root, 'sys/class/kfd/kfd/topology/nodes')
    for node in os.listdir(nodes):
        shutil.rmtree(os.path.join(nodes, node, 'io_links'), ignore_errors=True)
        props = os.path.join(nodes, node, 'properties')
        with open(props) as handle:
            lines = [line for line in handle if not line.startswith('hive_id ')]
        with open(props, 'w') as handle:
            handle.writelines(lines)


AMD_SMI_STATIC = json.dumps({'gpu_data': [
    {'gpu': i, 'asic': {'market_name': 'AMD Instinct MI300X', 'vendor_id': '0x1002', 'device_id': '0x74a1',
                        'target_graphics_version': 'gfx942'},
     'bus': {'bdf': bdf}, 'driver': {'name': 'amdgpu', 'version': '6.10.5'}} for i, bdf in enumerate(MI300X_GPUS)]})


def _amd_smi_links(i):
    return [{'gpu': j, 'bdf': bdf, 'weight': 0 if i == j else 15, 'link_status': 'ENABLED',
             'link_type': 'SELF' if i == j else 'XGMI', 'num_hops': 0 if i == j else 1}
            for j, bdf in enumerate(MI300X_GPUS)]


AMD_SMI_TOPOLOGY = json.dumps([{'gpu': i, 'bdf': bdf, 'links': _amd_smi_links(i)} for i, bdf in enumerate(MI300X_GPUS)])


def test_amd_smi_fills_model_driver_and_xgmi_when_sysfs_lacks_them(tree):
    root = tree('mi300x_8gpu_bnxt_roce')
    _strip_mi300x_sysfs(root)
    runner = FakeRunner(tools=['amd-smi', 'rocm-smi'], timeout=True, outputs={
        ('amd-smi', 'static', '--asic', '--bus', '--driver', '--json'): ok(AMD_SMI_STATIC),
        ('amd-smi', 'topology', '--json'): ok(AMD_SMI_TOPOLOGY)})
    warnings = []
    gpu = nf.gpu_details(root, runner, warnings)
    assert gpu['models'] == ['AMD Instinct MI300X'] * 8
    assert gpu['driver_version'] == '6.10.5'
    assert gpu['interconnect'] == dict(type='xgmi', source='amd-smi')
    assert gpu['sources'] == ['kfd-topology', 'amd-smi']
    assert runner.tool_calls() == ['amd-smi static --asic --bus --driver --json', 'amd-smi topology --json']
    assert all(call[0] == '/usr/bin/timeout' for call in runner.calls)
    assert warnings == []


def test_rocm_smi_is_the_fallback_when_amd_smi_fails(tree):
    root = tree('mi300x_8gpu_bnxt_roce')
    _strip_mi300x_sysfs(root)
    cards = dict(('card{0}'.format(i), {'PCI Bus': bdf.upper(), 'Card Series': 'AMD Instinct MI300X OAM',
                                        'Card Model': '0x74a1', 'GFX Version': 'gfx942'})
                 for i, bdf in enumerate(MI300X_GPUS))
    cards['system'] = {'Driver version': '6.8.5'}
    topo = {'system': dict(('(Topology) Link type between DRM devices {0} and {1}'.format(i, j), 'PCIE')
                           for i in range(8) for j in range(i + 1, 8))}
    runner = FakeRunner(tools=['amd-smi', 'rocm-smi'], outputs={
        ('amd-smi', 'static', '--asic', '--bus', '--driver', '--json'): (1, '', 'ERROR:root:Unable to detect any GPU devices'),
        ('amd-smi', 'topology', '--json'): (1, '', 'ERROR:root:Unable to detect any GPU devices'),
        ('rocm-smi', '--showproductname', '--showbus', '--showdriverversion', '--json'): ok(json.dumps(cards)),
        ('rocm-smi', '--showtopotype', '--json'): ok(json.dumps(topo))})
    warnings = []
    gpu = nf.gpu_details(root, runner, warnings)
    assert gpu['models'] == ['AMD Instinct MI300X OAM'] * 8
    assert gpu['driver_version'] == '6.8.5'
    assert gpu['interconnect'] == dict(type='pcie', source='rocm-smi')
    assert gpu['sources'] == ['kfd-topology', 'rocm-smi']
    assert len(warnings) == 2 and all('amd-smi' in w and 'rc=1' in w and 'Unable to detect' in w for w in warnings)


def test_amd_without_tools_reports_the_gfx_target_and_unknown_links(tree):
    root = tree('mi300x_8gpu_bnxt_roce')
    _strip_mi300x_sysfs(root)
    gpu = nf.gpu_details(root, FakeRunner(), [])
    assert gpu['models'] == ['gfx942'] * 8
    assert gpu['driver_version'] is None
    assert gpu['interconnect'] == dict(type='unknown', source=None)
    assert gpu['pci_ids'] == MI300X_GPUS


def _rewrite_kfd(root, io_link_type=None, hive=True, links=True):
    nodes = os.path.join(root, 'sys/class/kfd/kfd/topology/nodes')
    for node in os.listdir(nodes):
        io_links = os.path.join(nodes, node, 'io_links')
        if not links:
            shutil.rmtree(io_links, ignore_errors=True)
        for link in (os.listdir(io_links) if os.path.isdir(io_links) else []):
            path = os.path.join(io_links, link, 'properties')
            with open(path) as handle:
                text = handle.read()
            if io_link_type is not None:
                text = text.replace('type 11\n', 'type {0}\n'.format(io_link_type))
            with open(path, 'w') as handle:
                handle.write(text)
        path = os.path.join(nodes, node, 'properties')
        with open(path) as handle:
            lines = [line for line in handle if hive or not line.startswith('hive_id ')]
        with open(path, 'w') as handle:
            handle.writelines(lines)


@pytest.mark.parametrize('change, kind', [
    (dict(hive=False), 'xgmi'),                      # the io_links of type 11 (XGMI) alone
    (dict(links=False), 'xgmi'),                     # the shared XGMI hive_id alone
    (dict(io_link_type=2, hive=False), 'pcie'),      # GPU-GPU links all PCIe
    (dict(links=False, hive=False), 'unknown'),      # nothing in kfd says
])
def test_amd_interconnect_from_kfd_links_and_hive(tree, change, kind):
    root = tree('mi300x_8gpu_bnxt_roce')
    _rewrite_kfd(root, **change)
    interconnect = nf.gpu_details(root, FakeRunner(), [])['interconnect']
    assert interconnect == dict(type=kind, source='kfd-topology' if kind != 'unknown' else None)


def test_one_gpu_has_no_interconnect(tree):
    root = tree('mi300x_8gpu_bnxt_roce')
    nodes = os.path.join(root, 'sys/class/kfd/kfd/topology/nodes')
    for node in range(3, 10):
        shutil.rmtree(os.path.join(nodes, str(node)))
    gpu = nf.gpu_details(root, FakeRunner(tools=['amd-smi']), [])
    assert (gpu['count'], gpu['pci_ids'], gpu['interconnect']) == (1, ['0000:0c:00.0'], dict(type='none', source=None))


def test_amd_needs_dev_kfd(tree):
    root = tree('mi300x_8gpu_bnxt_roce')
    os.remove(os.path.join(root, 'dev/kfd'))
    assert nf.gpu_facts(root) == dict(vendor='none', count=0, pci_ids=[], models=[])


# ------------------------------------------------------------------------------------------------
# DGX H100: 8x H100 + 8x mlx5 NDR InfiniBand
# ------------------------------------------------------------------------------------------------

H100_GPUS = ['0000:1b:00.0', '0000:43:00.0', '0000:52:00.0', '0000:61:00.0', '0000:9d:00.0', '0000:c3:00.0',
             '0000:d1:00.0', '0000:df:00.0']
H100_HCAS = [('mlx5_0', '0000:18:00.0', 'ibp24s0'), ('mlx5_1', '0000:40:00.0', 'ibp64s0'),
             ('mlx5_2', '0000:4f:00.0', 'ibp79s0'), ('mlx5_3', '0000:5e:00.0', 'ibp94s0'),
             ('mlx5_4', '0000:9a:00.0', 'ibp154s0'), ('mlx5_5', '0000:c0:00.0', 'ibp192s0'),
             ('mlx5_6', '0000:ce:00.0', 'ibp206s0'), ('mlx5_7', '0000:dc:00.0', 'ibp220s0')]


def test_h100_nvlink_from_nvidia_smi_topo(tree):
    root = tree('h100_8gpu_mlx5_ib')
    topo = fixture_tree.command_output('h100_8gpu_mlx5_ib', 'nvidia-smi_topo_-m.txt')
    runner = FakeRunner(tools=['nvidia-smi'], timeout=True, outputs={('nvidia-smi', 'topo', '-m'): ok(topo)})
    warnings = []
    gpu = nf.gpu_details(root, runner, warnings)
    assert gpu == dict(vendor='nvidia', count=8, models=['NVIDIA H100 80GB HBM3'] * 8, pci_ids=H100_GPUS,
                       driver_version='535.161.08', interconnect=dict(type='nvlink', source='nvidia-smi topo -m'),
                       sources=['procfs', 'nvidia-smi'])
    # procfs had the models and the driver: nvidia-smi is only asked for the topology
    assert runner.calls == [['/usr/bin/timeout', '-k', '5', '30', '/usr/bin/nvidia-smi', 'topo', '-m']]
    assert warnings == []


def test_h100_topo_failure_falls_back_to_nvlink_status(tree):
    root = tree('h100_8gpu_mlx5_ib')
    status = fixture_tree.command_output('h100_8gpu_mlx5_ib', 'nvidia-smi_nvlink_-s.txt')
    runner = FakeRunner(tools=['nvidia-smi'], outputs={
        ('nvidia-smi', 'topo', '-m'): (9, 'NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA '
                                          'driver. Make sure that the latest NVIDIA driver is installed and running.', ''),
        ('nvidia-smi', 'nvlink', '-s'): ok(status)})
    warnings = []
    gpu = nf.gpu_details(root, runner, warnings)
    assert gpu['interconnect'] == dict(type='nvlink', source='nvidia-smi nvlink -s')
    assert gpu['sources'] == ['procfs', 'nvidia-smi']
    assert len(warnings) == 1
    assert warnings[0].startswith('nvidia-smi topo -m failed (rc=9): NVIDIA-SMI has failed')


def test_h100_without_nvidia_smi_cannot_tell_the_interconnect(tree):
    runner = FakeRunner()
    gpu = nf.gpu_details(tree('h100_8gpu_mlx5_ib'), runner, [])
    assert gpu['interconnect'] == dict(type='unknown', source=None)
    assert gpu['sources'] == ['procfs'] and runner.calls == []


def test_hung_nvidia_smi_is_abandoned_with_a_warning(tree):
    runner = FakeRunner(tools=['nvidia-smi'], timeout=True, outputs={
        ('nvidia-smi', 'topo', '-m'): (124, '', ''), ('nvidia-smi', 'nvlink', '-s'): (124, '', '')})
    warnings = []
    gpu = nf.gpu_details(tree('h100_8gpu_mlx5_ib'), runner, warnings)
    assert gpu['interconnect'] == dict(type='unknown', source=None)
    assert gpu['sources'] == ['procfs']
    assert warnings == ['nvidia-smi topo -m timed out after 30s; its facts are left out',
                        'nvidia-smi nvlink -s timed out after 30s; its facts are left out']


def test_h100_mlx5_infiniband_with_nvidia_peermem(tree):
    rdma = nf.rdma_facts(tree('h100_8gpu_mlx5_ib'), 'nvidia')
    assert rdma['devices'] == [
        dict(name=name, driver='mlx5_core', pci_id=pci_id, virtual_function=False,
             ports=[port(1, 'ACTIVE', 'LinkUp', 'InfiniBand', '400 Gb/sec (4X NDR)', ifname)])
        for name, pci_id, ifname in H100_HCAS]
    assert rdma['active_ports'] == ['mlx5_{0}:1'.format(i) for i in range(8)]
    assert rdma['transport'] == 'infiniband'
    # MOFED exports the peer-memory API, but amdgpu is not loaded: that is not AMD peer memory
    assert rdma['gpudirect'] == dict(ZERO_NONE, nvidia_peermem=True, dma_buf=True, path='peer_mem', available=True)


def test_dma_buf_alone_does_not_serve_the_proprietary_nvidia_module(tree):
    root = tree('h100_8gpu_mlx5_ib')
    shutil.rmtree(os.path.join(root, 'sys/module/nvidia_peermem'))
    gpudirect = nf.rdma_facts(root, 'nvidia')['gpudirect']
    assert gpudirect == dict(ZERO_NONE, dma_buf=True, available=False)


def test_node_facts_puts_gpu_rdma_and_network_together(tree):
    root = tree('h100_8gpu_mlx5_ib')
    topo = fixture_tree.command_output('h100_8gpu_mlx5_ib', 'nvidia-smi_topo_-m.txt')
    links = [{'ifname': 'lo', 'mtu': 65536, 'operstate': 'UNKNOWN',
              'addr_info': [{'family': 'inet', 'local': '127.0.0.1', 'prefixlen': 8}]},
             {'ifname': 'enp170s0f0np0', 'mtu': 9000, 'operstate': 'UP',
              'addr_info': [{'family': 'inet', 'local': '10.10.0.12', 'prefixlen': 24}]}]
    runner = FakeRunner(tools=['nvidia-smi'], outputs={
        ('nvidia-smi', 'topo', '-m'): ok(topo),
        ('ip', '-j', 'addr', 'show'): ok(json.dumps(links)),
        ('ip', '-j', 'route', 'get', '10.10.0.11'): ok(json.dumps([{'dst': '10.10.0.11', 'dev': 'enp170s0f0np0',
                                                                   'prefsrc': '10.10.0.12'}]))})
    runner.paths['ip'] = 'ip'
    facts = nf.node_facts(runner, '10.10.0.11', root=root)
    assert sorted(facts) == ['gpu', 'library', 'network', 'pci', 'rdma']
    # this tree records no sysfs entry for the GPUs: their PCI paths are unknown, so the HCA choice keeps every port
    assert set(facts['pci']['gpus'].values()) == {None} and len(facts['pci']['gpus']) == 8
    # the driver's header and library files are not in this tree, and no interpreter was named
    assert facts['library'] == dict(name='nccl', version=None, source=None, read_in='host', rocm=None,
                                    aws_ofi_nccl=None)
    assert facts['gpu']['interconnect']['type'] == 'nvlink'
    assert facts['rdma']['transport'] == 'infiniband' and len(facts['rdma']['devices']) == 8
    assert (facts['network']['ifname'], facts['network']['address'], facts['network']['mtu']) == \
        ('enp170s0f0np0', '10.10.0.12', 9000)


# ------------------------------------------------------------------------------------------------
# HGX H100 pod: 4 GPUs, SR-IOV RoCE VFs net1..net4 with different RoCE v2 GID indexes
# ------------------------------------------------------------------------------------------------

def test_sriov_vfs_each_get_their_own_roce_v2_gid_index(tree):
    rdma = nf.rdma_facts(tree('h100_4gpu_sriov_roce'), 'nvidia')
    expected = [('mlx5_2', '0000:1a:00.2', 'net1', 3, '0a37:0115'), ('mlx5_3', '0000:3c:00.3', 'net2', 5, '0a37:0215'),
                ('mlx5_10', '0000:4d:00.4', 'net3', 2, '0a37:0315'), ('mlx5_11', '0000:5e:01.1', 'net4', 7, '0a37:0415')]
    assert strip_tables(rdma['devices']) == [
        dict(name=name, driver='mlx5_core', pci_id=pci_id, virtual_function=True, ports=[
            port(1, 'ACTIVE', 'LinkUp', 'Ethernet', '200 Gb/sec (4X HDR)', netdev, index,
                 '0000:0000:0000:0000:0000:ffff:' + ipv4)])
        for name, pci_id, netdev, index, ipv4 in expected]
    assert rdma['active_ports'] == ['mlx5_2:1', 'mlx5_3:1', 'mlx5_10:1', 'mlx5_11:1']
    assert rdma['transport'] == 'roce'
    # open kernel module + RDMA dma-buf, no nvidia_peermem: GPUDirect through dma-buf
    assert rdma['gpudirect'] == dict(ZERO_NONE, dma_buf=True, path='dma_buf', available=True)


def test_sriov_gpus_and_driver(tree):
    gpu = nf.gpu_details(tree('h100_4gpu_sriov_roce'), FakeRunner(), [])
    assert gpu == dict(vendor='nvidia', count=4, models=['NVIDIA H100 80GB HBM3'] * 4,
                       pci_ids=['0000:18:00.0', '0000:2a:00.0', '0000:3a:00.0', '0000:5d:00.0'],
                       driver_version='550.90.07', interconnect=dict(type='unknown', source=None), sources=['procfs'])


def test_roce_v2_gid_index_is_read_never_assumed(tree):
    """Without an IPv4 GID the global IPv6 RoCE v2 GID is taken; with only link-local ones there is no index."""
    root = tree('h100_4gpu_sriov_roce')
    port_dir = os.path.join(root, 'sys/class/infiniband/mlx5_3/ports/1')
    for index in (4, 5):  # drop the IPv4 pair: the IPv6 RoCE v2 GID at 3 is left
        os.remove(os.path.join(port_dir, 'gid_attrs/types', str(index)))
        with open(os.path.join(port_dir, 'gids', str(index)), 'w') as handle:
            handle.write('0000:0000:0000:0000:0000:0000:0000:0000\n')
    port_facts = nf.rdma_facts(root)['devices'][1]['ports'][0]
    assert (port_facts['roce_v2_gid_index'], port_facts['roce_v2_gid'][:19]) == (3, 'fd00:0055:0002:0000')
    for index in (2, 3):
        os.remove(os.path.join(port_dir, 'gids', str(index)))
    port_facts = nf.rdma_facts(root)['devices'][1]['ports'][0]
    assert (port_facts['roce_v2_gid_index'], port_facts['roce_v2_gid'], port_facts['netdev']) == (None, None, 'net2')


# ------------------------------------------------------------------------------------------------
# 8 GPUs over plain Ethernet, CPU only, HCA ports down
# ------------------------------------------------------------------------------------------------

def test_ethernet_only_gpu_node(tree):
    root = tree('ethernet_only_gpu')
    assert not os.path.exists(os.path.join(root, 'sys/class/infiniband'))
    topo = fixture_tree.command_output('ethernet_only_gpu', 'nvidia-smi_topo_-m.txt')
    runner = FakeRunner(tools=['nvidia-smi'], outputs={('nvidia-smi', 'topo', '-m'): ok(topo)})
    gpu = nf.gpu_details(root, runner, [])
    assert (gpu['vendor'], gpu['count'], gpu['models'], gpu['driver_version']) == \
        ('nvidia', 8, ['NVIDIA L40S'] * 8, '550.54.15')
    assert gpu['interconnect'] == dict(type='pcie', source='nvidia-smi topo -m')
    rdma = nf.rdma_facts(root, 'nvidia')
    assert (rdma['devices'], rdma['active_ports'], rdma['transport']) == ([], [], 'none')
    # the fleet image loads nvidia_peermem, but without an RDMA device there is no GPUDirect RDMA
    assert rdma['gpudirect'] == dict(ZERO_NONE, nvidia_peermem=True, dma_buf=True, available=False)


def test_cpu_only_node(tree):
    root = tree('cpu_only')
    # nvidia-smi left installed on a node without a driver: it fails, which is not worth a warning
    runner = FakeRunner(tools=['nvidia-smi'], outputs={
        ('nvidia-smi', '--query-gpu=pci.bus_id,name,driver_version', '--format=csv,noheader'):
            (9, 'NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver.', '')})
    warnings = []
    assert nf.gpu_details(root, runner, warnings) == dict(
        vendor='none', count=0, models=[], pci_ids=[], driver_version=None,
        interconnect=dict(type='none', source=None), sources=[])
    assert warnings == []
    assert nf.rdma_facts(root, 'none') == dict(devices=[], active_ports=[], transport='none', gpudirect=ZERO_NONE)
    assert nf.gpu_details(root, FakeRunner(), []) == nf.gpu_details(root, runner, [])


def test_gpus_only_nvidia_smi_can_see(tree):
    """A container without /proc/driver/nvidia: nvidia-smi's answer is used."""
    rows = '00000000:18:00.0, NVIDIA H100 80GB HBM3, 550.90.07\n00000000:2A:00.0, NVIDIA H100 80GB HBM3, 550.90.07\n'
    runner = FakeRunner(tools=['nvidia-smi'], outputs={
        ('nvidia-smi', '--query-gpu=pci.bus_id,name,driver_version', '--format=csv,noheader'): ok(rows),
        ('nvidia-smi', 'topo', '-m'): ok('\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n'
                                         'GPU0\t X \tNV18\t0-55\t0\nGPU1\tNV18\t X \t0-55\t0\n')})
    gpu = nf.gpu_details(tree('cpu_only'), runner, [])
    assert gpu == dict(vendor='nvidia', count=2, models=['NVIDIA H100 80GB HBM3'] * 2,
                       pci_ids=['0000:18:00.0', '0000:2a:00.0'], driver_version='550.90.07',
                       interconnect=dict(type='nvlink', source='nvidia-smi topo -m'), sources=['nvidia-smi'])


def test_hca_ports_down(tree):
    rdma = nf.rdma_facts(tree('hca_ports_down'), 'nvidia')
    assert strip_tables(rdma['devices']) == [
        dict(name='mlx5_0', driver='mlx5_core', pci_id='0000:0c:00.0', virtual_function=False,
             ports=[port(1, 'DOWN', 'Disabled', 'InfiniBand', '10 Gb/sec (4X SDR)', 'ibp12s0')]),
        # no link, no rate; only the link-local default GIDs, which NCCL cannot use
        dict(name='mlx5_1', driver='mlx5_core', pci_id='0000:12:00.1', virtual_function=False,
             ports=[port(1, 'DOWN', 'Disabled', 'Ethernet', None, 'ens1f1np1')])]
    assert rdma['active_ports'] == [] and rdma['transport'] == 'none'
    assert rdma['gpudirect'] == dict(ZERO_NONE, nv_peer_mem=True, path='peer_mem', available=True)


def test_mixed_transport_when_ib_and_roce_ports_are_active(tree):
    root = tree('hca_ports_down')
    for name in ('mlx5_0', 'mlx5_1'):
        with open(os.path.join(root, 'sys/class/infiniband', name, 'ports/1/state'), 'w') as handle:
            handle.write('4: ACTIVE\n')
    rdma = nf.rdma_facts(root, 'nvidia')
    assert (rdma['active_ports'], rdma['transport']) == (['mlx5_0:1', 'mlx5_1:1'], 'mixed')


# ------------------------------------------------------------------------------------------------
# parsers and helpers
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('text, kind', [
    ('\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV4\t0-15\t0\nGPU1\tNV4\t X \t0-15\t0\n', 'nvlink'),
    ('\tGPU0\tGPU1\tNIC0\tCPU Affinity\nGPU0\t X \tSYS\tNV12\t0-15\nGPU1\tSYS\t X \tPIX\t16-31\n', 'pcie'),
    ('\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tC2C\t0-71\nGPU1\tC2C\t X \t0-71\n', 'unknown'),
    ('\tGPU0\tCPU Affinity\nGPU0\t X \t0-71\n', 'unknown'),
])
def test_topo_matrix_kind(text, kind):
    assert gf._topo_matrix_kind(text) == kind


@pytest.mark.parametrize('text, kind', [
    ('GPU 0: NVIDIA A100 (UUID: GPU-1)\n\t Link 0: 25 GB/s\n\t Link 1: <inactive>\n', 'nvlink'),
    ('GPU 0: NVIDIA L40S (UUID: GPU-1)\n\t Link 0: <inactive>\nGPU 1: NVIDIA L40S (UUID: GPU-2)\n\t Link 0: <inactive>\n',
     'pcie'),
    ('GPU 0: NVIDIA L4 (UUID: GPU-1)\nGPU 1: NVIDIA L4 (UUID: GPU-2)\n', 'unknown'),
])
def test_nvlink_status_kind(text, kind):
    assert gf._nvlink_status_kind(text) == kind


def test_kfd_location_id_maps_to_the_pci_bus_id():
    assert gf._kfd_pci_id({'location_id': 0x9f00, 'domain': 0}) == '0000:9f:00.0'
    assert gf._kfd_pci_id({'location_id': 0x0312, 'domain': 1}) == '0001:03:02.2'
    # an MI300X partition (CPX): the partition id sits in bits 31:28
    assert gf._kfd_pci_id({'location_id': (3 << 28) | 0x0c00, 'domain': 0}) == '0000:0c:00.0'
    assert gf._kfd_pci_id({}) is None


@pytest.mark.parametrize('version, name', [(90402, 'gfx942'), (90010, 'gfx90a'), (110001, 'gfx1101'), (0, None)])
def test_gfx_name(version, name):
    assert gf._gfx_name(version) == name


@pytest.mark.parametrize('raw, bdf', [('00000000:1B:00.0', '0000:1b:00.0'), ('0000:c3:00.0', '0000:c3:00.0'),
                                      ('00000001:05:00.1', '0001:05:00.1'), ('N/A', None)])
def test_normalize_bdf(raw, bdf):
    assert fio._normalize_bdf(raw) == bdf


@pytest.mark.parametrize('line, version, open_module', [
    ('NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.161.08  Tue Mar  5 22:42:15 UTC 2024', '535.161.08', False),
    ('NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07  Release Build  (dvs-builder@U16)  '
     'Fri May 31 09:30:47 UTC 2024', '550.90.07', True),
    ('NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  560.35.03  Release Build  (dvs-builder@U16)', '560.35.03',
     True),
])
def test_nvidia_driver_version(tmp_path, line, version, open_module):
    (tmp_path / 'proc/driver/nvidia').mkdir(parents=True)
    (tmp_path / 'proc/driver/nvidia/version').write_text(line + '\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n')
    assert gf._nvidia_driver(str(tmp_path)) == (version, open_module)


def test_a_runner_without_which_runs_no_vendor_tool(tree):
    class Bare:
        def run(self, argv):
            raise AssertionError(argv)
    gpu = nf.gpu_details(tree('h100_8gpu_mlx5_ib'), Bare(), [])
    assert gpu['interconnect'] == dict(type='unknown', source=None)


def test_unparsable_tool_output_is_a_warning_not_a_failure(tree):
    root = tree('mi300x_8gpu_bnxt_roce')
    _strip_mi300x_sysfs(root)
    runner = FakeRunner(tools=['amd-smi'], outputs={
        ('amd-smi', 'static', '--asic', '--bus', '--driver', '--json'): ok('not json'),
        ('amd-smi', 'topology', '--json'): ok('[]')})
    warnings = []
    gpu = nf.gpu_details(root, runner, warnings)
    assert gpu['models'] == ['gfx942'] * 8 and gpu['interconnect'] == dict(type='unknown', source=None)
    assert gpu['sources'] == ['kfd-topology', 'amd-smi']
    assert warnings == ['cannot parse the JSON output of amd-smi static --asic --bus --driver --json; '
                        'its facts are left out']


# ------------------------------------------------------------------------------------------------
# PCIe topology (DGX H100 tree) and the net plugin identified by its contents
# ------------------------------------------------------------------------------------------------

def test_dgx_h100_pci_paths_of_gpus_and_hcas(tree):
    root = tree('dgx_h100_compute_storage')
    gpu = nf.gpu_details(root)
    rdma = nf.rdma_facts(root, 'nvidia')
    assert [d['name'] for d in rdma['devices']] == ['mlx5_%d' % i for i in range(12)]
    pci = nf.pci_topology(root, gpu['pci_ids'], rdma['devices'])
    # src/graph/xml.cc ncclTopoGetXmlFromSys walks the same path: every bridge up to the pciDDDD:BB root complex
    assert pci['gpus']['0000:1b:00.0'] == dict(
        path=['pci0000:15', '0000:15:01.0', '0000:16:00.0', '0000:17:02.0', '0000:1b:00.0'], numa_node=0)
    assert pci['rdma']['mlx5_0'] == dict(
        path=['pci0000:15', '0000:15:01.0', '0000:16:00.0', '0000:17:00.0', '0000:18:00.0'], numa_node=0)
    assert pci['rdma']['mlx5_8'] == dict(path=['pci0000:a9', '0000:a9:01.0', '0000:aa:00.1'], numa_node=1)
    assert sorted(pci['gpus']) == sorted(gpu['pci_ids']) and None not in pci['gpus'].values()


def test_pci_path_is_none_without_a_link(tree):
    root = tree('h100_8gpu_mlx5_ib')
    gpu = nf.gpu_details(root)
    pci = nf.pci_topology(root, gpu['pci_ids'], nf.rdma_facts(root, 'nvidia')['devices'])
    assert set(pci['gpus'].values()) == {None}  # /proc/driver/nvidia only: no /sys/bus/pci/devices entry
    assert pci['rdma']['mlx5_0'] == dict(path=['pci0000:00', '0000:00:01.1', '0000:18:00.0'], numa_node=None)
    assert nf.pci_topology(root, [], []) == dict(gpus={}, rdma={})


OFI_SO = b'\x7fELF\x02\x01\x01\x00' + b'\x00' * 64 + b'\x00Libfabric\x00Initializing aws-ofi-nccl 1.14.0\x00'
SHARP_SO = (b'\x7fELF\x02\x01\x01\x00' + b'\x00' * 64 +
            b'\x00NCCL RDMA Plugin\x00IBext\x00UCX\x00SHARP\x00NET/IB : Using interface %s for sideband communication\x00')


def _plugin_root(tmp_path, lib_dir, files):
    directory = tmp_path / 'root' / lib_dir
    directory.mkdir(parents=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return str(tmp_path / 'root')


def test_aws_ofi_nccl_is_identified_by_its_net_name_and_package(tmp_path):
    root = _plugin_root(tmp_path, 'opt/amazon/ofi-nccl/lib', {'libnccl-net.so': OFI_SO})
    assert nf.net_plugin_identity(root, 'opt/amazon/ofi-nccl/lib', 'libnccl-net.so') == dict(
        aws_ofi_nccl=True, version='1.14.0', names=['Libfabric'])
    lib = nf.library_facts(root, 'nvidia')
    assert lib['aws_ofi_nccl'] == '/opt/amazon/ofi-nccl/lib/libnccl-net.so' and 'other_net_plugins' not in lib


def test_hpcx_sharp_plugin_is_not_aws_ofi_nccl(tmp_path):
    # HPC-X puts nccl-rdma-sharp-plugins' libnccl-net.so on the library path: a file of the same name, not the plugin
    root = _plugin_root(tmp_path, 'usr/lib', {'libnccl-net.so': SHARP_SO})
    lib = nf.library_facts(root, 'nvidia')
    assert lib['aws_ofi_nccl'] is None
    assert lib['other_net_plugins'] == [dict(path='/usr/lib/libnccl-net.so', aws_ofi_nccl=False, version=None,
                                             names=['IBext', 'NCCL RDMA Plugin', 'SHARP', 'UCX'])]


def test_net_plugin_read_is_bounded_and_empty_files_are_not_plugins(tmp_path):
    root = _plugin_root(tmp_path, 'usr/lib', {'libnccl-net.so': b'', 'libnccl-net-ofi.so': b'\x00' * 4096 + OFI_SO})
    assert nf.net_plugin_identity(root, 'usr/lib', 'libnccl-net.so')['aws_ofi_nccl'] is False
    assert nf.net_plugin_identity(root, 'usr/lib', 'libnccl-net-ofi.so', limit=4096)['aws_ofi_nccl'] is False
    assert nf.net_plugin_identity(root, 'usr/lib', 'libnccl-net-ofi.so')['aws_ofi_nccl'] is True
    assert nf.net_plugin_identity(root, 'usr/lib', 'missing.so') == dict(aws_ofi_nccl=False, version=None, names=[])
    lib = nf.library_facts(root, 'nvidia')
    assert lib['aws_ofi_nccl'] == '/usr/lib/libnccl-net-ofi.so'


def test_h200_vm_one_gpu_as_the_lent_machine_showed_it(tree):
    """A real H200 VM (Firecracker, open kernel module 580.159.04), recorded by hack/gpu_record_tree.py: what
    nvidia-smi printed there is what the files give (1 GPU, NVIDIA H200, 00000000:00:06.0, driver 580.159.04,
    no NVLink), with no tool run for one GPU."""
    root = tree('h200_1gpu_vm')
    runner = FakeRunner(tools=['nvidia-smi'], timeout=True)
    warnings = []
    gpu = nf.gpu_details(root, runner, warnings)
    assert gpu == dict(vendor='nvidia', count=1, models=['NVIDIA H200'], pci_ids=['0000:00:06.0'],
                       driver_version='580.159.04', interconnect=dict(type='none', source=None), sources=['procfs'])
    assert runner.calls == [] and warnings == []
    assert nf.gpu_facts(root)['pci_ids'] == [fio._normalize_bdf('00000000:00:06.0')]
    # the GPU hangs off the root complex (no PCIe switch in the VM), NUMA node -1 read as unknown
    expected = dict(path=['pci0000:00', '0000:00:06.0'], numa_node=None)
    assert nf.pci_topology(root, gpu['pci_ids'], [])['gpus'] == {'0000:00:06.0': expected}
    rdma = nf.rdma_facts(root, 'nvidia')
    assert (rdma['devices'], rdma['transport']) == ([], 'none')
    # ib_core and the dma-buf import are in the kernel, but there is no RDMA device for GPUDirect to use
    assert rdma['gpudirect']['dma_buf'] is True and rdma['gpudirect']['available'] is False
    assert nf.default_route_ifnames(root) == ['eth0']


def test_topo_matrix_read_through_the_escapes_nvidia_smi_580_prints(tree):
    """nvidia-smi 580 (the H200 VM) underlines topo -m's header row with terminal escapes even into a pipe; an 8-GPU
    NVLink matrix printed that way is still NVLink."""
    recorded = fixture_tree.command_output('h200_1gpu_vm', 'nvidia-smi_topo_-m.txt')
    assert '\x1b[4mGPU0' in recorded
    topo = fixture_tree.command_output('h100_8gpu_mlx5_ib', 'nvidia-smi_topo_-m.txt')
    header = next(line for line in topo.splitlines() if line.split() and line.split()[0] == 'GPU0' and line[:1].isspace())
    underlined = topo.replace(header, '\t\x1b[4m' + header.strip() + '\x1b[0m', 1)
    runner = FakeRunner(tools=['nvidia-smi'], timeout=True, outputs={('nvidia-smi', 'topo', '-m'): ok(underlined)})
    gpu = nf.gpu_details(tree('h100_8gpu_mlx5_ib'), runner, [])
    assert gpu['interconnect'] == dict(type='nvlink', source='nvidia-smi topo -m')
