# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""What one node's ``trainops_node`` facts say, read the way NCCL/RCCL read the node. Pure: no I/O.

The RDMA ports (``_ports``) and interfaces (``_interfaces``) as flat dicts, the GID tables and the GID index NCCL
picks (``nccl_gid_index``), the PCIe layout and NCCL's path types (``pci_path_type``), and the helpers that compare a
library version with the version tables of network.py, gpudirect.py and gpu.py (``_since``, ``_by_version``, ``_library_label``).
The small helpers here (``_get``, ``_natural``, ``_int``, ``_version``) are the ones the other modules of the package
share.
"""

from __future__ import annotations

import ipaddress
import re

from collections.abc import Mapping


# --- small helpers ------------------------------------------------------------------------------

def _get(data, *path):
    for key in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _natural(text):
    return [int(part) if part.isdigit() else part for part in re.split(r'(\d+)', str(text))]


def _int(value):
    """An int from an int or a decimal string; None when it is neither (bools are not ints here)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.match(r'^\s*-?\d+\s*$', value):
        return int(value)
    return None


def _version(text):
    """(2, 21, 5) from "2.21.5" (or "2.21.5-1", "2.21.5+hip6.3"); None when it is not a version."""
    match = re.match(r'^\s*(\d+)\.(\d+)(?:\.(\d+))?', str(text or ''))
    return tuple(int(g or 0) for g in match.groups()) if match else None


# --- facts ---------------------------------------------------------------------------------------

def _link_layer(text, driver=None):
    if driver == 'efa':
        return 'efa'
    text = str(text or '').strip().lower()
    if text == 'infiniband':
        return 'infiniband'
    if text == 'ethernet':
        return 'roce'
    return text or None


def _ports(facts):
    """Every RDMA port of the node as a flat dict, devices in natural order."""
    ports = []
    devices = _get(facts, 'rdma', 'devices') or []
    for dev in sorted((d for d in devices if isinstance(d, Mapping) and d.get('name')), key=lambda d: _natural(d['name'])):
        for port in dev.get('ports') or []:
            number = _int(port.get('port'))
            if number is None:
                continue
            gids = port.get('gids')
            ports.append(dict(
                dev=str(dev['name']), port=number, key='%s:%d' % (dev['name'], number),
                state=str(port.get('state') or 'UNKNOWN').upper(), phys_state=port.get('phys_state'),
                link_layer=_link_layer(port.get('link_layer'), dev.get('driver')), rate_gbps=port.get('rate_gbps'),
                netdev=port.get('netdev'), gid_index=_int(port.get('roce_v2_gid_index')),
                gid=port.get('roce_v2_gid'), vf=bool(dev.get('virtual_function')), driver=dev.get('driver'),
                gids=list(gids) if isinstance(gids, (list, tuple)) else None,
                gid_table_len=_int(port.get('gid_table_len'))))
    return ports


def _interfaces(facts):
    """{ifname: interface dict} from facts.network.interfaces (None when the facts carry no list)."""
    ifaces = _get(facts, 'network', 'interfaces')
    if not isinstance(ifaces, (list, tuple)):
        return None
    result = {}
    for iface in ifaces:
        if isinstance(iface, Mapping) and iface.get('ifname'):
            result[str(iface['ifname'])] = iface
        elif isinstance(iface, str):
            result[iface] = {'ifname': iface}
    return result


def _describe_ports(ports):
    return ', '.join('%s %s%s' % (p['key'], p['state'], ' (%s)' % p['phys_state'] if p.get('phys_state') else '')
                     for p in ports)


# --- GID selection as NCCL does it (src/transport/net_ib: ncclIbGetGidIndex, ncclUpdateGidIndex) ------------------

def _gid_words(gid):
    """The GID as four 32-bit integers (s6_addr32), None when it cannot be parsed."""
    try:
        packed = ipaddress.IPv6Address(str(gid)).packed
    except ValueError:
        return None
    return [int.from_bytes(packed[i:i + 4], 'big') for i in range(0, 16, 4)]


def _gid_family(words):
    """getGidAddrFamily: AF_INET for an IPv4-mapped (or mapped multicast) GID, else AF_INET6."""
    mapped = words[0] == 0 and words[1] == 0 and words[2] == 0xffff
    mapped_mc = words[0] == 0xff0e0000 and words[1] == 0 and words[2] == 0xffff
    return 'AF_INET' if mapped or mapped_mc else 'AF_INET6'


def _gid_valid(words):
    """validGid: configured (not zero, not bare fe80::) and not link-local."""
    trailer = words[1] | words[2] | words[3]
    configured = not ((words[0] | trailer) == 0 or (words[0] == 0xfe800000 and trailer == 0))
    return configured and not (words[0] == 0xfe800000 and words[1] == 0)


def _gid_version(kind):
    """ncclIbRoceGetVersionNum: 1 for "IB/RoCE v1" / "RoCE v1", 2 for "RoCE v2", None otherwise."""
    kind = str(kind or '')
    if kind.startswith(('IB/RoCE v1', 'RoCE v1')):
        return 1
    if kind.startswith('RoCE v2'):
        return 2
    return None


def _gid_table(port):
    """{index: (words, version)} of a port's GID table (empty entries are zero GIDs); None when the facts lack it."""
    if port.get('gids') is None:
        return None
    table = {}
    for entry in port['gids']:
        if isinstance(entry, Mapping) and _int(entry.get('index')) is not None:
            words = _gid_words(entry.get('gid'))
            if words:
                table[_int(entry['index'])] = (words, _gid_version(entry.get('type')))
    return table


def nccl_gid_index(port, family='AF_INET', roce_version=2):
    """The GID index NCCL >= 2.21 picks for a RoCE port with NCCL_IB_GID_INDEX unset (-1), or None if unknown.

    A transcription of ncclIbGetGidIndex/ncclUpdateGidIndex (no NCCL_IB_ADDR_RANGE): start at index 0, and for every
    later index take the candidate when it has the wanted family and the current one does not, or when it is a valid
    GID of the wanted family whose RoCE version is the wanted one and differs from the current's (or the current is
    not valid). Facts without the GID table: the port's RoCE v2 GID if it has the wanted family.
    """
    table = _gid_table(port)
    if table is None:
        if port.get('gid_index') is None or roce_version != 2:
            return None
        words = _gid_words(port.get('gid'))
        return port['gid_index'] if words and _gid_family(words) == family else None
    zero = ([0, 0, 0, 0], None)
    length = max([port.get('gid_table_len') or 0] + [i + 1 for i in table])
    current = 0
    for candidate in range(1, length):
        gid, cand = table.get(current, zero), table.get(candidate, zero)
        gid_family, cand_family = _gid_family(gid[0]), _gid_family(cand[0])
        if cand_family != gid_family and cand_family == family:
            current = candidate
        elif cand_family == family and _gid_valid(cand[0]):
            if (gid[1] != cand[1] or not _gid_valid(gid[0])) and cand[1] == roce_version:
                current = candidate
    return current


def _gid_usable(port, index, roce_version=2):
    """Whether a port's GID at ``index`` is a valid (routable) GID of that RoCE version; None when unknown."""
    table = _gid_table(port)
    if table is None:
        return None if port.get('gid_index') is None else (index == port['gid_index'] and roce_version == 2)
    entry = table.get(index)
    return bool(entry and _gid_valid(entry[0]) and entry[1] == roce_version)


def _gid_entry_problem(port, index):
    """Why GID ``index`` of a port cannot carry RoCE v2 traffic, or None when it can (or the facts do not say)."""
    table = _gid_table(port)
    if table is None:
        return None
    entry = table.get(index)
    if entry is None:
        return 'empty'
    if entry[1] != 2:
        return 'a RoCE v1 GID' if entry[1] == 1 else 'not a RoCE v2 GID'
    if not _gid_valid(entry[0]):
        return 'a link-local GID (not routable)'
    return None


# --- library versions (the version tables are in network.py, gpudirect.py and gpu.py) --------------------------

def _library_label(library):
    if not library.get('name'):
        return 'no NCCL (no GPUs)'
    return '%s %s' % (library['name'].upper(), library.get('text') or '(version unknown)')


def _since(library, version):
    """True/False: the library is at least ``version``; None when its version is unknown."""
    return None if library.get('version') is None else tuple(library['version'][:len(version)]) >= version


def _by_version(table, version):
    """The value of a ``((since, value), ...)`` table (newest first) for a version tuple; None when it is None."""
    if version is None:
        return None
    for since, value in table:
        if tuple(version[:len(since)]) >= since:
            return value
    return None


def _version_text(version):
    return '.'.join(str(part) for part in version)


# --- PCIe layout and path types (NCCL src/graph/paths.cc ncclTopoSetPaths); the HCA choice is in network.py -------

PATH_TYPES = ('PIX', 'PXB', 'PHB', 'SYS')
"""NCCL's PCIe path types, nearest first (src/graph/topo.h PATH_PIX .. PATH_SYS)."""
GPU_LOCAL = 'PXB'
"""The farthest path type at which an HCA serves a GPU: NCCL's default NCCL_NET_GDR_LEVEL (paths.cc netGdrLevel)."""


def _pci_entry(entry):
    """(path list, numa node) of a facts.pci entry, or None when it is not a path from a root complex."""
    if not isinstance(entry, Mapping) or not isinstance(entry.get('path'), (list, tuple)) or len(entry['path']) < 2:
        return None
    return [str(c) for c in entry['path']], _int(entry.get('numa_node'))


def pci_path_type(gpu, hca):
    """NCCL's path type between two facts.pci entries: PIX (one PCIe bridge between them), PXB (several, no host
    bridge), PHB (through the root complex / CPU), SYS (across NUMA nodes, or NUMA unknown)."""
    (gpath, gnuma), (hpath, hnuma) = gpu, hca
    if gpath[0] != hpath[0]:
        return 'PHB' if gnuma is not None and gnuma == hnuma else 'SYS'
    gbridges, hbridges = gpath[1:-1], hpath[1:-1]
    shared = 0
    while shared < min(len(gbridges), len(hbridges)) and gbridges[shared] == hbridges[shared]:
        shared += 1
    if not shared:
        return 'PHB'
    return 'PIX' if len(gbridges) + len(hbridges) - 2 * shared == 0 else 'PXB'


def _pci_layout(facts, chosen):
    """(gpus {bdf: entry}, hcas {dev: entry}, why not) from facts.pci; why not is a sentence when the topology
    cannot be read for the chosen ports (no GPU paths, a missing link, GPUs straight on the root complex as in VMs)."""
    pci = _get(facts, 'pci') or {}
    gpus = dict((bdf, _pci_entry(e)) for bdf, e in (pci.get('gpus') or {}).items())
    hcas = dict((dev, _pci_entry(e)) for dev, e in (pci.get('rdma') or {}).items())
    if not gpus:
        return None, None, 'the facts show no GPU PCI paths'
    missing = sorted(b for b, e in gpus.items() if e is None) + sorted(
        set(p['dev'] for p in chosen if not hcas.get(p['dev'])), key=_natural)
    if missing:
        return None, None, 'no sysfs PCI path for %s' % ', '.join(missing)
    if all(len(e[0]) == 2 for e in gpus.values()):
        return None, None, 'the GPUs sit straight on the root complex (a flat PCI layout, as in VMs)'
    return gpus, hcas, None
