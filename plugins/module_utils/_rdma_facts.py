# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Which RDMA devices a node has, their ports and GIDs, the GPUDirect path (peer memory, dma-buf) and the PCIe
topology that tells which HCA sits under which PCIe switch (module_utils/_node_facts.py)."""

from __future__ import annotations

import os
import re

from ansible_collections.trainops.multinode.plugins.module_utils import _torch_probe
from ansible_collections.trainops.multinode.plugins.module_utils._facts_io import (
    _BDF, _exists, _kernel_symbols, _link_name, _listdir, _natural_key, _path, _pci_id_of, _read)
from ansible_collections.trainops.multinode.plugins.module_utils._gpu_facts import _nvidia_driver


# ------------------------------------------------------------------------------------------------
# RDMA
# ------------------------------------------------------------------------------------------------

_IB_CLASS = 'sys/class/infiniband'
_AMDKFD_PEER_MEM = ('sys/kernel/mm/memory_peers/amdkfd/version', 'sys/kernel/memory_peers/amdkfd/version',
                    'sys/memory_peers/amdkfd/version')
_DMABUF_SYMBOL = 'ib_umem_dmabuf_get'
_PEER_MEMORY_SYMBOL = 'ib_register_peer_memory_client'


def _state_text(value):
    """``4: ACTIVE`` -> ``ACTIVE``."""
    if value is None:
        return None
    return value.split(':', 1)[1].strip() if ':' in value else value.strip()


def _rate_gbps(rate):
    match = re.match(r'\s*(\d+(?:\.\d+)?)\s*Gb/sec', rate or '')
    return float(match.group(1)) if match else None


def _gid_is_zero(gid):
    return not gid.replace(':', '').strip('0')


def _gid_is_ipv4_mapped(gid):
    return gid.replace(':', '').lower().startswith('0' * 20 + 'ffff')


def _gid_is_link_local(gid):
    return gid.lower().startswith('fe80')


def _port_gids(root, port_dir):
    """[(index, gid, type, netdev)] of the port's populated GID table entries."""
    entries = []
    for index in _listdir(root, port_dir, 'gids'):
        if not index.isdigit():
            continue
        gid = _read(root, port_dir, 'gids', index)
        if not gid or _gid_is_zero(gid):
            continue
        entries.append((int(index), gid, _read(root, port_dir, 'gid_attrs/types', index),
                        _read(root, port_dir, 'gid_attrs/ndevs', index)))
    return sorted(entries)


def _roce_v2_gid(entries):
    """The RoCE v2 entry: an IPv4-mapped GID first, else a global IPv6 one (NCCL never uses link-local GIDs)."""
    roce_v2 = [entry for entry in entries if entry[2] == 'RoCE v2']
    for wanted in (_gid_is_ipv4_mapped, lambda gid: not _gid_is_link_local(gid)):
        for entry in roce_v2:
            if wanted(entry[1]):
                return entry
    return None


def _port_netdev(root, dev_dir, port, entries, chosen):
    """The netdev of the port's GIDs (the RoCE v2 one first), else the device's only (or dev_port) netdev."""
    for entry in ([chosen] if chosen else []) + entries:
        if entry[3]:
            return entry[3]
    nets = sorted(_listdir(root, dev_dir, 'device/net'), key=_natural_key)
    for net in nets:
        if len(nets) > 1 and _read(root, dev_dir, 'device/net', net, 'dev_port') not in (None, str(port - 1)):
            continue
        return net
    return nets[0] if nets else None


def _port_facts(root, dev_dir, port):
    port_dir = os.path.join(dev_dir, 'ports', str(port))
    link_layer = _read(root, port_dir, 'link_layer')
    rate = _read(root, port_dir, 'rate')
    entries = _port_gids(root, port_dir) if link_layer == 'Ethernet' else []
    chosen = _roce_v2_gid(entries)
    facts = dict(port=port, state=_state_text(_read(root, port_dir, 'state')),
                 phys_state=_state_text(_read(root, port_dir, 'phys_state')), link_layer=link_layer, rate=rate,
                 rate_gbps=_rate_gbps(rate), netdev=_port_netdev(root, dev_dir, port, entries, chosen),
                 roce_v2_gid_index=chosen[0] if chosen else None, roce_v2_gid=chosen[1] if chosen else None)
    if link_layer == 'Ethernet':
        # the whole populated table: NCCL >= 2.21 selects a GID per port from it (ncclIbGetGidIndex)
        facts['gid_table_len'] = len([i for i in _listdir(root, port_dir, 'gids') if i.isdigit()])
        facts['gids'] = [dict(index=index, gid=gid, type=kind, netdev=ndev) for index, gid, kind, ndev in entries]
    return facts


def gpudirect_facts(root='/', gpu_vendor='none', rdma_devices=True, dmabuf=None):
    """Which GPUDirect RDMA paths the kernel offers, and whether one fits the GPU vendor.

    nvidia_peermem / nv_peer_mem: the modules NCCL looks for (nv_peer_mem also as the ``nv_mem`` memory peer);
    amd_peer_mem: the ``amdkfd`` memory peer RCCL looks for, or the kernel's ib_register_peer_memory_client with
    amdgpu loaded; dma_buf: the kernel's RDMA dma-buf import (ib_umem_dmabuf_get). NVIDIA GPUs use dma-buf only
    with the open kernel modules. RCCL uses dma-buf only with ``NCCL_DMABUF_ENABLE=1`` and a kernel built with
    CONFIG_DMABUF_MOVE_NOTIFY and CONFIG_PCI_P2PDMA (``dmabuf_kernel``), as RCCL reads them where it runs:
    ``dmabuf`` is ``(options, where, search)`` as ``library_facts`` read them there (``dmabuf_read_in``); without
    it the host's files are read. ``dmabuf_kernel`` is /boot/config-<release> (RCCL before 2.28),
    ``dmabuf_kernel_search`` the file RCCL 2.28 and later read and its options (``_torch_probe.dmabuf_kernel_search``).
    ``path`` follows /boot (the decider, which knows the RCCL version, chooses between them).
    ``path`` says which one will be used.
    """
    symbols = set()
    if rdma_devices or _exists(root, 'sys/module/ib_core'):
        symbols = _kernel_symbols(root, frozenset((_DMABUF_SYMBOL, _PEER_MEMORY_SYMBOL)))
    nvidia_peermem = _exists(root, 'sys/module/nvidia_peermem')
    nv_peer_mem = _exists(root, 'sys/module/nv_peer_mem') or _exists(root, 'sys/kernel/mm/memory_peers/nv_mem/version')
    amd_peer_mem = any(_exists(root, path) for path in _AMDKFD_PEER_MEM) or \
        (_PEER_MEMORY_SYMBOL in symbols and _exists(root, 'sys/module/amdgpu'))
    dma_buf = _DMABUF_SYMBOL in symbols
    kernel = read_in = search = None
    if gpu_vendor == 'amd' and dma_buf:
        kernel, read_in, search = dmabuf if dmabuf is not None else (
            _torch_probe.dmabuf_kernel_config(root), 'host', _torch_probe.dmabuf_kernel_search(root))
    path = None
    if gpu_vendor == 'nvidia':
        path = 'peer_mem' if nvidia_peermem or nv_peer_mem else 'dma_buf' if dma_buf and _nvidia_driver(root)[1] else None
    elif gpu_vendor == 'amd':
        path = 'peer_mem' if amd_peer_mem else 'dma_buf' if dma_buf and kernel and all(kernel.values()) else None
    path = path if rdma_devices else None
    return dict(nvidia_peermem=nvidia_peermem, nv_peer_mem=nv_peer_mem, amd_peer_mem=amd_peer_mem, dma_buf=dma_buf,
                dmabuf_kernel=kernel, dmabuf_kernel_search=search, dmabuf_read_in=read_in, path=path,
                available=path is not None)


def rdma_facts(root='/', gpu_vendor='none', dmabuf=None):
    """Every RDMA device of /sys/class/infiniband with its ports, the ACTIVE ports, their transport, GPUDirect."""
    devices, active, layers = [], [], set()
    for name in sorted(_listdir(root, _IB_CLASS), key=_natural_key):
        dev_dir = os.path.join(_IB_CLASS, name)
        ports = [_port_facts(root, dev_dir, int(port))
                 for port in sorted((p for p in _listdir(root, dev_dir, 'ports') if p.isdigit()), key=int)]
        driver = _link_name(root, dev_dir, 'device/driver')
        for port in ports:
            if port['state'] == 'ACTIVE':
                active.append('{0}:{1}'.format(name, port['port']))
                # AWS EFA ports report link_layer "Unspecified": the efa driver, used through libfabric
                layers.add('efa' if driver == 'efa' else port['link_layer'])
        devices.append(dict(name=name, driver=driver, pci_id=_pci_id_of(root, dev_dir, 'device'),
                            virtual_function=os.path.lexists(_path(root, dev_dir, 'device/physfn')), ports=ports))
    if 'efa' in layers:
        transport = 'efa' if layers == set(['efa']) else 'mixed'
    elif 'InfiniBand' in layers and 'Ethernet' in layers:
        transport = 'mixed'
    elif 'InfiniBand' in layers:
        transport = 'infiniband'
    elif 'Ethernet' in layers:
        transport = 'roce'
    else:
        transport = 'none'
    return dict(devices=devices, active_ports=active, transport=transport,
                gpudirect=gpudirect_facts(root, gpu_vendor, bool(devices), dmabuf))


# ------------------------------------------------------------------------------------------------
# PCIe topology (which HCA sits under which PCIe switch, as NCCL's src/graph/xml.cc reads it)
# ------------------------------------------------------------------------------------------------

_ROOT_COMPLEX = re.compile(r'^pci[0-9a-f]{4,8}:[0-9a-f]{2}$')


def pci_path(root, *parts):
    """``dict(path=[...], numa_node=n)`` for the PCI device a sysfs link leads to, or None when it cannot be read.

    ``path`` runs from the root complex (``pci0000:00``) through every bridge (root port, switch ports) to the device,
    from the link's target under /sys/devices, as NCCL walks it (src/graph/xml.cc ncclTopoGetXmlFromSys). A path that
    does not start at a root complex (a link missing, or not into /sys/devices/pci*) is None.
    """
    path = _path(root, *parts)
    if not os.path.lexists(path):
        return None
    components = os.path.realpath(path).split(os.sep)
    start = [i for i, c in enumerate(components) if _ROOT_COMPLEX.match(c)]
    if not start:
        return None
    chain = [components[start[-1]]]
    for component in components[start[-1] + 1:]:
        if not _BDF.match(component):
            break
        chain.append(component)
    if len(chain) < 2:
        return None
    numa = _read(root, *(parts + ('numa_node',)))
    numa = int(numa) if numa and re.match(r'^-?\d+$', numa) and int(numa) >= 0 else None
    return dict(path=chain, numa_node=numa)


def pci_topology(root, gpu_pci_ids, rdma_devices):
    """The PCI paths of the GPUs (by bus id) and RDMA devices (by name); a None entry when sysfs does not show it."""
    gpus = dict((bdf, pci_path(root, 'sys/bus/pci/devices', bdf)) for bdf in gpu_pci_ids or [] if bdf)
    rdma = dict((dev['name'], pci_path(root, _IB_CLASS, dev['name'], 'device')) for dev in rdma_devices or [])
    return dict(gpus=gpus, rdma=rdma)
