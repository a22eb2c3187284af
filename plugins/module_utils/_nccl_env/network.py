# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The network deciders: what NCCL/RCCL and gloo use between nodes. Pure: no I/O.

The socket interface and its address family (``_socket``, ``_socket_family``); the RDMA ports by PCIe locality or as
ib_hca names them (``_auto_ports``, ``_explicit_ports``) and the transport over them, InfiniBand/RoCE, EFA through
aws-ofi-nccl or TCP (``_transport``, ``_ib_disable``, ``_ib_hca``, ``_efa``); the RoCE GID (``_gid``); GPUDirect RDMA
(``_gdr``); the QoS knobs (``_qos``), cross-NIC rings (``_cross_nic``) and NCCL_NET (``_require_transport``); the check
of env_overrides that name interfaces or HCAs (``_check_override``) and the transport they leave
(``_final_transport``). compute (deciders.py) calls them in order; the shared core is in core.py.
"""

from __future__ import annotations

import ipaddress

from collections.abc import Mapping

from ansible_collections.trainops.multinode.plugins.module_utils import _knobs
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.core import (
    LIBRARY_VERSION_KNOB, _int_setting, _is_auto, _is_unset,
)
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.facts import (
    GPU_LOCAL, PATH_TYPES, _by_version, _describe_ports, _get, _gid_entry_problem, _gid_family, _gid_table,
    _gid_usable, _int, _interfaces, _library_label, _natural, _pci_layout, _since, _version, _version_text,
    nccl_gid_index, pci_path_type,
)

NETWORK_MODES = ('auto', 'rdma', 'tcp')
GDR_LEVELS = ('LOC', 'PIX', 'PXB', 'PHB', 'SYS')

# Library facts, each checked against the sources named (docs/nccl.md has the list):
GID_PER_PORT_SINCE = (2, 21)
"""NCCL_IB_GID_INDEX defaults to -1 (select per port, ncclIbGetGidIndex) since NCCL 2.21.5; 0 before (net_ib.cc).
RCCL follows: 2.20.5 (ROCm 6.2) has 0, 2.21.5 (ROCm 6.3) has -1."""
IB_FIFO_TC = (((2, 24), 'applied'), ((2, 22), 'nonzero'), ((0,), 'absent'))
"""NCCL_IB_FIFO_TC by version (src/transport/net_ib.cc): absent before 2.22.3; in 2.22.3/2.23.4 NCCL_PARAM(IbFifoTc,
"IB_FIFO_TC", 0) and ncclIbRtrQp uses it only when non-zero (0 falls back to NCCL_IB_TC); since 2.24.3 the default is
-1 and every value 0-255 is applied."""
NCCL_IB_MAX_QPS = 128
"""src/transport/net_ib.cc #define NCCL_IB_MAX_QPS 128, the size of the qps/qpInfo arrays of a connection."""
NCCL_IB_MAX_DEVS_PER_NIC = (((2, 30), 8), ((0,), 4))
"""NCCL_IB_MAX_DEVS_PER_NIC, the most ports merged into one virtual NIC, by NCCL version: 4 up to 2.29
(v2.29.7-1 src/transport/net_ib/common.h:53), NCCL_NET_MAX_DEVS_PER_NIC = NCCL_NET_MAX_DEVS_PER_NIC_V12 = 8 from 2.30
(v2.30.3-1 common.h:58, src/include/plugin/nccl_net.h:49, net/net_v12.h:11). RCCL: 4 (not changed here)."""
RCCL_DMABUF_SEARCH_SINCE = (2, 28)
"""RCCL 2.28 and later read the kernel config from the first of /proc/config.gz (with zcat), /boot/config-<release>,
/usr/src, /usr/lib/modules/<release>/config, ... that opens, else the symbols in /proc/kallsyms, which containers see
(rocm-systems projects/rccl src/misc/rocmwrap.cc initOnceFunc; CHANGELOG "RCCL 2.28.3 for ROCm 7.11": "additional
paths when loading the RCCL DMABUF kernel configuration file"). Before, only /boot/config-<release>."""
RCCL_DMABUF_DEFAULT_ON = ((2, 28), (7, 12))
"""NCCL_DMABUF_ENABLE defaults to 1 from RCCL 2.28.3 for ROCm 7.12 (CHANGELOG "Changed": "NCCL_DMABUF_ENABLE now
defaults to 1 (previously 0)"; rocmwrap.cc NCCL_PARAM(DmaBufEnable, "DMABUF_ENABLE", 1)); ROCm 7.11 ships the same
RCCL 2.28.3 with 0, so 2.28.x needs the ROCm runtime to tell; 2.30 and later default to 1."""
QPS_TIMES_PORTS_SINCE = (2, 20)
"""NCCL 2.20.3 net_ib.cc: nqps = ncclParamIbQpsPerConn() * ndevs (ports merged into one NIC, NCCL_IB_MERGE_NICS=1
and, since 2.24, NCCL_NET_MERGE_LEVEL=PORT in src/graph/topo.cc); before 2.20 nqps = ncclParamIbQpsPerConn()."""
IB_HCA_RAIL_PLANE_SINCE = (2, 30, 7)
"""NCCL_IB_HCA entries name[:port[:rail[:plane]]] since NCCL 2.30.7 (src/misc/utils.cc parseStringList, struct netIf
rail/plane in src/include/utils.h; src/transport/net_ib/init.cc gives each matched port the entry's railId/planeId).
2.30.4 and older read name[:port] only: atoi of the text after the first ':', the rest of the entry skipped."""
IB_HCA_MAX_PLANES = 12
"""ncclIbGetPlaneIndex (net_ib/init.cc, NCCL_IB_PLANE_MAX_INDEX 14): at most 12 distinct plane IDs besides undefined,
and a plane ID with bit 14 (NCCL_IB_PLANE_VIRT_BIT, 16384) set is refused (ncclInvalidUsage)."""
AWS_OFI_NET_NAME = 'Libfabric'
"""The net name aws-ofi-nccl registers for NCCL (src/nccl_ofi_interface_nvidia.cpp), what NCCL_NET must say."""


# --- small helpers ------------------------------------------------------------------------------

def _names_list(value):
    """A list of names from a list or a comma-separated string (a leading '=' is dropped)."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith('='):
            text = text[1:]
        return [part.strip() for part in text.split(',') if part.strip()]
    if isinstance(value, (list, tuple)):
        return [str(part).strip() for part in value if str(part).strip()]
    return None


def parse_nccl_list(value):
    """Parse an NCCL interface/HCA list: ``[^][=]name[:port[:rail[:plane]]],...`` -> (exclude, exact, [(name,
    port|None)])."""
    text = str(value).strip()
    exclude = text.startswith('^')
    if exclude:
        text = text[1:]
    exact = text.startswith('=')
    if exact:
        text = text[1:]
    items = []
    for part in text.split(','):
        part = part.strip()
        if not part:
            continue
        # name[:port[:rail[:plane]]] (rail and plane since NCCL 2.30.7); the port is the field after the first ':'
        name, sep, rest = part.partition(':')
        port = rest.split(':')[0].strip()
        items.append((name, int(port) if sep and port.isdigit() else None))
    return exclude, exact, items


def match_names(value, names):
    """Names NCCL selects from ``names`` for a list value (prefix match unless ``=``; ``^`` excludes)."""
    exclude, exact, items = parse_nccl_list(value)

    def hit(name):
        return any(name == item if exact else name.startswith(item) for item, dummy in items)
    return [n for n in names if hit(n) != exclude]


# --- the socket interface ----------------------------------------------------------------------------

def _socket(out, facts, settings):
    """NCCL_SOCKET_IFNAME (exact) and GLOO_SOCKET_IFNAME from socket_ifname / facts.network.ifname."""
    present = 'socket_ifname' in settings
    value = settings.get('socket_ifname')
    ifaces = _interfaces(facts)
    if _is_auto(value, present) or value is None:
        routed = _get(facts, 'network', 'ifname')
        if not routed:
            out.errors.append('the facts name no socket interface (facts.network.ifname is empty): node_facts found no '
                              'interface that reaches the master; set socket_ifname to the interface the nodes share')
            return []
        names, source = [str(routed)], 'detected'
        reason = 'the interface that reaches the master (facts.network.ifname), matched exactly'
    else:
        names = _names_list(value)
        if not names or any(n.startswith('^') for n in names):
            out.errors.append('socket_ifname must be auto, an interface name or a list of names (got %r); put NCCL '
                              'patterns such as ^docker0 in env_overrides NCCL_SOCKET_IFNAME instead' % (value,))
            return []
        source, reason = 'knob', 'socket_ifname setting, matched exactly'
    if ifaces is not None:
        missing = [n for n in names if n not in ifaces]
        if missing:
            out.errors.append('socket_ifname %s does not exist on this host (it has: %s); fix the override or set it '
                              'to auto' % (', '.join(repr(n) for n in missing), ', '.join(ifaces) or 'none'))
            names = [n for n in names if n in ifaces]
        for name in names:
            iface = ifaces[name]
            if 'addresses' in iface and not iface.get('addresses'):
                out.errors.append('interface %r has no IP address: NCCL and gloo open their sockets on an address of '
                                  'the interface; configure one or choose another socket_ifname' % name)
            if str(iface.get('operstate') or '').upper() == 'DOWN':
                out.warnings.append('interface %r is DOWN; NCCL and gloo cannot connect through it' % name)
    if names:
        out.set('NCCL_SOCKET_IFNAME', '=' + ','.join(names), source, reason)
        out.set('GLOO_SOCKET_IFNAME', ','.join(names), source, reason)
    return names


def _addresses(iface):
    result = []
    for cidr in (iface or {}).get('addresses') or []:
        try:
            result.append(ipaddress.ip_interface(str(cidr)))
        except ValueError:
            continue
    return result


def _first_bound(addrs, family=None):
    """The address NCCL binds on an interface: getifaddrs order (IPv4, global IPv6, link-local), first one wins.

    src/os/linux.cc (findInterfaces) keeps one address per interface, the first getifaddrs returns, skipping only
    another family when NCCL_SOCKET_FAMILY forces one; ``ip -j addr`` lists them in the same order.
    """
    v4 = [a for a in addrs if a.version == 4]
    v6 = [a for a in addrs if a.version == 6 and not a.ip.is_link_local and not a.ip.is_loopback]
    v6_ll = [a for a in addrs if a.version == 6 and a.ip.is_link_local]
    ordered = {4: v4, 6: v6 + v6_ll, None: v4 + v6 + v6_ll}[family]
    return ordered[0] if ordered else None


def _socket_family(out, facts, names):
    """NCCL_SOCKET_FAMILY for IPv6 masters, and a warning when NCCL or gloo would bind another address than the one
    that reaches the master (NCCL/gloo bind the interface's first address, not the route's source address)."""
    ifaces = _interfaces(facts) or {}
    master = _get(facts, 'network', 'master_addr')
    if len(names) != 1 or names[0] not in ifaces or not master:
        return
    try:
        master = ipaddress.ip_address(str(master))
    except ValueError:
        return
    if master.is_loopback:
        return
    name = names[0]
    addrs = _addresses(ifaces[name])
    if not addrs:
        return
    family = master.version
    route_src = _get(facts, 'network', 'route_src') if _get(facts, 'network', 'ifname') == name else None
    first_any = _first_bound(addrs)
    bound = first_any
    if family == 6 and first_any.version == 4:
        own = _first_bound(addrs, 6)
        if own is None or own.ip.is_link_local:
            out.errors.append('the master %s is IPv6 but interface %r has no global IPv6 address (it has %s): NCCL '
                              'and gloo could not reach it; give the interface an IPv6 address or use an IPv4 master '
                              'address' % (master, name, ', '.join(str(a) for a in addrs)))
            return
        out.set('NCCL_SOCKET_FAMILY', 'AF_INET6', 'detected',
                'the master %s is IPv6 and NCCL would bind the first address of %s, IPv4 %s '
                '(src/misc/socket.cc ncclEnvSocketFamily)' % (master, name, first_any.ip))
        bound = own
        out.warnings.append('gloo binds the first address of %s (%s), not an IPv6 one, and has no family setting: '
                            'gloo peers must reach each other over that address' % (name, first_any.ip))
    if route_src:
        try:
            src = ipaddress.ip_address(str(route_src))
        except ValueError:
            return
        if src.version == bound.version and src != bound.ip:
            reach = master in bound.network
            message = ('interface %r: NCCL and gloo bind its first address %s, but the kernel reaches the master %s '
                       'from %s (a secondary address)' % (name, bound.ip, master, src))
            if reach:
                out.warnings.append(message + '; both are on the master\'s network, so it works, but peers see %s'
                                    % bound.ip)
            else:
                out.warnings.append(message + '; %s is not on the master\'s network: make %s the primary address of '
                                    '%s, or the connections may fail' % (bound.ip, src, name))


# --- the RDMA ports and the transport -----------------------------------------------------------------

def _front_end_netdevs(facts):
    """Netdevs that carry the node's management traffic: those with a default route (facts.network.default_ifnames).

    The interface that reaches the master is not enough: on some clusters the master address is on a rail.
    """
    return set(str(n) for n in (_get(facts, 'network', 'default_ifnames') or []))


def _hca_fields(out, item, library):
    """(name, port text or None, rail/plane suffix, plane or None) of an ib_hca entry ``name[:port[:rail[:plane]]]``;
    None when it is refused (an error says why).

    The suffix is what NCCL_IB_HCA carries after the port (':rail', ':rail:plane' or '::plane'), '' without rail or
    plane. Rail and plane need NCCL >= 2.30.7 (IB_HCA_RAIL_PLANE_SINCE): older libraries read name:port only and
    skip the rest of the entry, so they are refused there, and an unknown version is an error naming the knob.
    """
    fields = [f.strip() for f in item.split(':')]
    if len(fields) > 4:
        out.errors.append('ib_hca entry %r has %d fields: NCCL reads name:port:rail:plane at most (src/misc/utils.cc '
                          'parseStringList)' % (item, len(fields)))
        return None
    fields += [''] * (4 - len(fields))
    name, number, rail, plane = fields
    port = number if ':' in item else None
    if not rail and not plane:
        return name, port, '', None
    since = _version_text(IB_HCA_RAIL_PLANE_SINCE)
    form = 'the name:port:rail:plane form (rail %s, plane %s)' % (rail or 'unset', plane or 'unset')
    known = _since(library, IB_HCA_RAIL_PLANE_SINCE)
    if known is None:
        out.errors.append('ib_hca entry %r uses %s, which needs %s %s or later, and the library version is unknown '
                          'here: set %s to the version the ranks load' % (
                              item, form, (library.get('name') or 'nccl').upper(), since, LIBRARY_VERSION_KNOB))
        return None
    if not known:
        out.errors.append('ib_hca entry %r uses %s, which %s does not read: NCCL_IB_HCA takes name:port:rail:plane '
                          'since NCCL %s, older libraries read name:port and skip the rest of the entry%s; drop the '
                          'rail and plane fields or upgrade the library' % (
                              item, form, _library_label(library), since,
                              ' (an empty port reads as port 0, which matches no port)' if not number else ''))
        return None
    bad = [(what, text) for what, text, high in (('rail', rail, 32767), ('plane', plane, 16383))
           if text and (_int(text) is None or not 0 <= _int(text) <= high)]
    if bad:
        out.errors.append('ib_hca entry %r: %s must be an integer from 0 (rail up to 32767, plane up to 16383: '
                          'NCCL refuses plane IDs with bit 14 set, ncclIbGetPlaneIndex)' % (
                              item, ' and '.join('%s %r' % b for b in bad)))
        return None
    suffix = ':%s:%s' % (rail, plane) if plane else ':%s' % rail
    return name, (number or None) if port is not None else None, suffix, _int(plane) if plane else None


def _explicit_ports(out, ports, value, library):
    """Ports named by ib_hca, validated against the node's devices and ports; each keeps the rail/plane fields its
    entry gave (``hca_suffix``, see _hca_fields)."""
    if isinstance(value, str) and value.strip().startswith('^'):
        out.errors.append('ib_hca %r excludes HCAs: list the ones to use instead (or pass the pattern in env_overrides '
                          'NCCL_IB_HCA)' % value)
        return []
    names = _names_list(value)
    if not names:
        out.errors.append('ib_hca must be auto or a list of HCA names, optionally name:port or name:port:rail:plane '
                          '(got %r)' % (value,))
        return []
    by_dev = {}
    for port in ports:
        by_dev.setdefault(port['dev'], []).append(port)
    chosen = []
    planes = set()
    for item in names:
        fields = _hca_fields(out, item, library)
        if fields is None:
            continue
        dev, number, suffix, plane = fields
        if plane is not None:
            planes.add(plane)
        if dev not in by_dev:
            out.errors.append('ib_hca names HCA %r, which does not exist on this host (it has: %s)' % (
                dev, ', '.join(sorted(by_dev, key=_natural)) or 'no RDMA devices'))
            continue
        if number is not None and (number or not suffix):
            port = [p for p in by_dev[dev] if str(p['port']) == number.strip()]
            if not port:
                out.errors.append('ib_hca names port %s of %s, which does not exist (its ports: %s)' % (
                    number, dev, ', '.join(str(p['port']) for p in by_dev[dev])))
                continue
            if port[0]['state'] != 'ACTIVE':
                out.errors.append('ib_hca names %s, which is not ACTIVE (%s): NCCL skips ports that are not ACTIVE; '
                                  'bring the link up or leave it out' % (port[0]['key'], _describe_ports(port)))
                continue
            chosen.extend(dict(p, hca_suffix=suffix) for p in port)
        else:
            active = [p for p in by_dev[dev] if p['state'] == 'ACTIVE']
            if not active:
                out.errors.append('ib_hca names %s, which has no ACTIVE port (%s)' % (dev, _describe_ports(by_dev[dev])))
            chosen.extend(dict(p, hca_suffix=suffix) for p in active)
    if len(planes) > IB_HCA_MAX_PLANES:
        out.errors.append('ib_hca names %d plane IDs (%s): NCCL takes at most %d (ncclIbGetPlaneIndex, '
                          'src/transport/net_ib/init.cc)' % (len(planes), ', '.join(str(p) for p in sorted(planes)),
                                                             IB_HCA_MAX_PLANES))
    unique, seen = [], set()
    for port in chosen:
        if port['key'] not in seen:
            seen.add(port['key'])
            unique.append(port)
    layers = sorted(set(p['link_layer'] for p in unique))
    if len(layers) > 1:
        out.errors.append('ib_hca mixes link layers (%s): InfiniBand, RoCE and EFA ports are different fabrics and '
                          'NCCL pairs the NICs of different nodes, so name ports of one link layer only' % '; '.join(
                              '%s: %s' % (layer, ', '.join(p['key'] for p in unique if p['link_layer'] == layer))
                              for layer in layers))
    return unique


def _leave_out(out, chosen, left, reason, warning):
    """Drop ``left`` from ``chosen``, record why in out.left_out, and warn."""
    if not left:
        return chosen
    for port in left:
        out.left_out[port['key']] = reason
    out.warnings.append(warning)
    return [p for p in chosen if p not in left]


# --- HCA choice by PCIe topology (NCCL src/graph/paths.cc ncclTopoSetPaths path types, topo.cc ncclTopoGetLocal) --

def _gpu_local_ports(out, facts, chosen):
    """Keep the HCAs nearest a GPU (path type PIX/PXB, the nearest of each GPU: NCCL's ncclTopoGetLocal), leave out
    the others with the reason; keep every port when the topology cannot be read or no HCA is near a GPU."""
    if len(chosen) < 2:
        return chosen
    gpus, hcas, why_not = _pci_layout(facts, chosen)
    if why_not:
        out.topology = 'PCIe topology not read (%s): every ACTIVE port kept' % why_not
        return chosen
    devs = sorted(set(p['dev'] for p in chosen), key=_natural)
    types = dict((dev, dict((bdf, pci_path_type(gpus[bdf], hcas[dev])) for bdf in gpus)) for dev in devs)
    serving = {}
    for bdf in sorted(gpus):
        near = [(PATH_TYPES.index(types[dev][bdf]), dev) for dev in devs
                if PATH_TYPES.index(types[dev][bdf]) <= PATH_TYPES.index(GPU_LOCAL)]
        if near:
            best = min(near)[0]
            serving[bdf] = [dev for rank, dev in near if rank == best]
    keep = set(dev for devs_ in serving.values() for dev in devs_)
    if not keep:
        out.topology = 'PCIe topology: no HCA within %s of a GPU: every ACTIVE port kept' % GPU_LOCAL
        return chosen
    rails = ', '.join('GPU %s -> %s (%s)' % (bdf, '+'.join(serving[bdf]), types[serving[bdf][0]][bdf])
                      for bdf in sorted(serving))
    one_rail = len(serving) == len(gpus) and all(len(v) == 1 for v in serving.values()) and \
        len(keep) == len(gpus)
    out.topology = 'PCIe topology%s: %s' % (': one rail per GPU' if one_rail else '', rails)
    out.by_topology = True
    left = [p for p in chosen if p['dev'] not in keep]
    for reason, group in _far_reasons(left, types, _front_end_netdevs(facts)):
        chosen = _leave_out(out, chosen, group, reason,
                            'leaving out %s: %s; list them in ib_hca to use them' % (
                                ', '.join(p['key'] for p in group), reason))
    return chosen


def _far_reasons(left, types, front):
    """[(reason, ports)] for the ports the topology rule leaves out, grouped by reason; a port whose netdev carries
    the default route (``front``, see _front_end_netdevs) is also named a front-end NIC."""
    groups = {}
    for port in left:
        nearest = min(types[port['dev']].values(), key=PATH_TYPES.index)
        if PATH_TYPES.index(nearest) > PATH_TYPES.index(GPU_LOCAL):
            reason = 'no GPU under the same PCIe switch (nearest GPU path %s)' % nearest
        else:
            reason = 'a nearer HCA serves the GPUs under its PCIe switch (this one is %s)' % nearest
        if port['netdev'] and str(port['netdev']) in front:
            reason += '; front-end NIC: its netdev carries the default route'
        groups.setdefault(reason, []).append(port)
    return sorted(groups.items())


def _auto_ports(out, facts, active, gid_auto):
    """The ACTIVE ports NCCL should use when ib_hca is auto.

    The HCAs that serve the GPUs by PCIe topology first (_gpu_local_ports: storage and front-end HCAs away from the
    GPUs are left out), then InfiniBand before RoCE when a node has both (the Ethernet ports are then the front-end
    network), physical functions before SR-IOV virtual functions when both are ACTIVE (VFs share the PFs' links),
    RoCE ports without a RoCE v2 GID left out (when the GID index is auto), a port whose netdev carries the default
    route left out when other ports remain (a front-end NIC), and only the fastest ports when rates differ (a slower
    port is a front-end or storage NIC). Each choice is a warning and an entry of out.left_out.
    """
    chosen = _gpu_local_ports(out, facts, list(active))
    if len(set(p['link_layer'] for p in chosen)) > 1 and any(p['link_layer'] == 'infiniband' for p in chosen):
        left = [p for p in chosen if p['link_layer'] != 'infiniband']
        chosen = _leave_out(out, chosen, left, 'not InfiniBand: the node has InfiniBand ports',
                            'the node has ACTIVE InfiniBand and Ethernet (RoCE) ports: using the InfiniBand ports and '
                            'leaving out %s; set ib_hca to choose' % ', '.join(p['key'] for p in left))
    if any(p['vf'] for p in chosen) and not all(p['vf'] for p in chosen):
        left = [p for p in chosen if p['vf']]
        chosen = _leave_out(out, chosen, left, 'SR-IOV virtual function of an ACTIVE physical function',
                            'both physical functions and SR-IOV virtual functions are ACTIVE: using the physical '
                            'functions and leaving out the VFs %s (they share the same links); set ib_hca to choose'
                            % ', '.join(p['key'] for p in left))
    if gid_auto:
        left = [p for p in chosen if p['link_layer'] == 'roce' and p['gid_index'] is None]
        chosen = _leave_out(out, chosen, left, 'no RoCE v2 GID',
                            'RoCE ports without a RoCE v2 GID left out: %s (their netdevs %s have no address, or only '
                            'RoCE v1 GIDs); give them an address or set ib_hca and gid_index' % (
                                ', '.join(p['key'] for p in left), ', '.join(str(p['netdev']) for p in left)))
    front = _front_end_netdevs(facts)
    left = [p for p in chosen if p['netdev'] and str(p['netdev']) in front]
    if left and len(left) < len(chosen):
        chosen = _leave_out(out, chosen, left, 'front-end NIC: its netdev carries the default route',
                            'leaving out %s: %s the node\'s default route (a front-end / management NIC, not a '
                            'training rail); list it in ib_hca to use it' % (
                                ', '.join(p['key'] for p in left),
                                ', '.join('%s carries' % p['netdev'] for p in left)))
    rates = [p['rate_gbps'] for p in chosen]
    if chosen and all(isinstance(r, (int, float)) and not isinstance(r, bool) for r in rates) and len(set(rates)) > 1:
        fastest = max(rates)
        left = [p for p in chosen if p['rate_gbps'] != fastest]
        chosen = _leave_out(out, chosen, left, 'slower than the %g Gb/s ports' % fastest,
                            'ACTIVE ports run at different rates: using the %g Gb/s ports and leaving out %s; set '
                            'ib_hca to choose' % (fastest, ', '.join('%s (%g Gb/s)' % (p['key'], p['rate_gbps']) for p in left)))
    return chosen


def _network_mode(out, settings):
    mode = str(settings.get('network_mode') or 'auto').strip().lower()
    if mode not in NETWORK_MODES:
        out.errors.append('network_mode must be auto, rdma or tcp (got %r)' % (settings.get('network_mode'),))
        mode = 'auto'
    return mode


def _efa_plugin(out, facts, mode, chosen):
    """EFA needs the aws-ofi-nccl net plugin; without it NCCL cannot use the EFA devices (its IB transport needs RC
    queue pairs, which EFA does not have). Returns True when the plugin was found."""
    plugin = _get(facts, 'library', 'aws_ofi_nccl')
    if plugin:
        return True
    others = [o for o in _get(facts, 'library', 'other_net_plugins') or [] if isinstance(o, Mapping)]
    message = ('the EFA devices %s need the aws-ofi-nccl plugin (libnccl-net-ofi.so / libnccl-net.so, from the EFA '
               'installer or the aws-ofi-nccl package), and none was found on this node%s' % (
                   ', '.join(p['key'] for p in chosen), ''.join(
                       ' (%s is not aws-ofi-nccl: it has no "%s" net name and aws-ofi-nccl package string%s)' % (
                           o.get('path'), AWS_OFI_NET_NAME, '; its net names: %s' % ', '.join(o['names'])
                           if o.get('names') else '') for o in others)))
    if mode == 'rdma':
        out.errors.append(message + '; install it or set network_mode tcp')
    else:
        out.warnings.append(message + ': NCCL will use TCP sockets, several times slower')
    return False


def _transport(out, facts, settings, mode, vendor, ports, library):
    """(transport, chosen ports, hca_auto): rdma, efa or tcp, and the RDMA ports used."""
    active = [p for p in ports if p['state'] == 'ACTIVE']
    hca_value = settings.get('ib_hca')
    hca_auto = _is_auto(hca_value, 'ib_hca' in settings) or hca_value is None
    gid_auto = _is_auto(settings.get('gid_index'), 'gid_index' in settings)
    if _get(facts, 'rdma') is None and facts:
        out.warnings.append('the facts carry no rdma section (node_facts older than this collection?): assuming no '
                            'RDMA devices')
    if mode == 'tcp' or (mode == 'auto' and vendor == 'none'):
        if not hca_auto:
            _explicit_ports(out, ports, hca_value, library)  # a name that does not exist is still an error
            out.warnings.append('ib_hca ignored: %s' % ('network_mode is tcp' if mode == 'tcp' else
                                                        'the node has no GPUs and gloo uses TCP sockets'))
        if mode == 'tcp' and active and vendor != 'none':
            out.warnings.append('network_mode tcp: NCCL will not use the ACTIVE RDMA ports %s (TCP sockets are several '
                                'times slower)' % ', '.join(p['key'] for p in active))
        return 'tcp', [], hca_auto
    chosen = (_auto_ports(out, facts, active, gid_auto) if hca_auto else
              _explicit_ports(out, ports, hca_value, library))
    if mode == 'rdma' and vendor == 'none':
        out.warnings.append('network_mode rdma on a node without GPUs: gloo uses TCP sockets only')
    if chosen and all(p['link_layer'] == 'efa' for p in chosen):
        return ('efa', chosen, hca_auto) if _efa_plugin(out, facts, mode, chosen) else ('tcp', [], hca_auto)
    if chosen:
        return 'rdma', chosen, hca_auto
    if mode == 'rdma':
        if hca_auto:
            out.errors.append('network_mode rdma but no ACTIVE RDMA port on this host (%s); bring a port up, fix '
                              'ib_hca, or set network_mode to tcp or auto' % (
                                  _describe_ports(ports) if ports else 'no RDMA devices found'))
        return 'rdma', [], hca_auto
    if ports and hca_auto:
        out.warnings.append('RDMA devices found but no port is usable (%s): NCCL will use TCP sockets, several '
                            'times slower' % _describe_ports(ports))
    return 'tcp', [], hca_auto


def _ib_disable(out, transport, mode, vendor):
    """NCCL_IB_DISABLE: 0 over InfiniBand/RoCE, 1 over TCP; left unset over EFA (the plugin carries the traffic)."""
    source = 'detected' if mode == 'auto' else 'knob'
    if transport == 'rdma':
        out.set('NCCL_IB_DISABLE', '0', source, 'RDMA: %s' % (
            'ACTIVE RDMA ports found' if mode == 'auto' else 'network_mode rdma'))
    elif transport == 'tcp':
        out.set('NCCL_IB_DISABLE', '1', source, 'TCP sockets: %s' % (
            'network_mode tcp' if mode == 'tcp' else 'no GPUs (gloo)' if vendor == 'none' else 'no usable RDMA port'))


def _ib_hca(out, transport, chosen, hca_auto):
    """NCCL_IB_HCA: the chosen InfiniBand/RoCE ports in NCCL's exact-match form (never EFA devices)."""
    if transport == 'rdma' and chosen:
        auto = 'the ACTIVE RDMA ports%s, matched exactly' % (
            ' nearest the GPUs by PCIe topology' if out.by_topology else '')
        rails = any(p.get('hca_suffix') for p in chosen)
        out.set('NCCL_IB_HCA', '=' + ','.join(p['key'] + (p.get('hca_suffix') or '') for p in chosen),
                'detected' if hca_auto else 'knob', auto if hca_auto else 'ib_hca setting, matched exactly%s' % (
                    ', with its rail and plane fields (name:port:rail:plane, NCCL >= 2.30.7)' if rails else ''))


# --- the RoCE GID, EFA, GPUDirect RDMA ------------------------------------------------------------------

def _gid_explicit(out, roce, index):
    """An explicit gid_index must name a valid RoCE v2 GID on every chosen RoCE port (NCCL uses it as is)."""
    if not roce:
        out.warnings.append('gid_index %d is set although no RoCE port is used (it only matters for RoCE)' % index)
    families = {}
    for port in roce:
        entry = (_gid_table(port) or {}).get(index)
        if entry:
            families.setdefault(_gid_family(entry[0]), []).append(port['key'])
    if len(families) > 1:
        out.warnings.append('gid_index %d is an IPv4 GID on %s and an IPv6 one on %s: ports of different families '
                            'cannot reach each other' % (index, ', '.join(families['AF_INET']),
                                                         ', '.join(families['AF_INET6'])))
    for port in roce:
        problem = _gid_entry_problem(port, index)
        if problem:
            out.errors.append('gid_index %d is %s on %s (netdev %s): NCCL_IB_GID_INDEX is used as is for every port, '
                              'so connections through %s would fail; its RoCE v2 GID is at %s' % (
                                  index, problem, port['key'], port['netdev'], port['key'],
                                  port['gid_index'] if port['gid_index'] is not None else 'no index'))
        elif port['gids'] is None and port['gid_index'] is not None and port['gid_index'] != index:
            out.warnings.append('gid_index %d differs from the RoCE v2 GID index found on %s (%d)' % (
                index, port['key'], port['gid_index']))
    out.set('NCCL_IB_GID_INDEX', index, 'knob', 'gid_index setting')


def _gid_per_port(out, roce, library):
    """Libraries that select the GID per port: set NCCL_IB_ADDR_FAMILY / NCCL_IB_ROCE_VERSION_NUM only when their
    defaults (AF_INET, RoCE v2) would land on an unusable GID, e.g. a link-local one on an IPv6-only fabric."""
    label = _library_label(library)
    for family, version in (('AF_INET', 2), ('AF_INET6', 2), ('AF_INET', 1), ('AF_INET6', 1)):
        picks = dict((p['key'], nccl_gid_index(p, family, version)) for p in roce)
        if all(picks[p['key']] is not None and _gid_usable(p, picks[p['key']], version) for p in roce):
            what = ', '.join('%s: %d' % (k, v) for k, v in sorted(picks.items(), key=lambda i: _natural(i[0])))
            if family != 'AF_INET':
                out.set('NCCL_IB_ADDR_FAMILY', family, 'detected',
                        '%s selects the GID per port and its default AF_INET would land on a link-local or empty GID; '
                        'with %s it picks %s (ncclIbGetGidIndex)' % (label, family, what))
            if version != 2:
                out.set('NCCL_IB_ROCE_VERSION_NUM', version, 'detected',
                        'the RoCE ports have no routable RoCE v2 GID, only RoCE v1 ones (%s)' % what)
                out.warnings.append('the RoCE ports %s only have RoCE v1 GIDs: RoCE v1 is not routed across subnets'
                                    % ', '.join(p['key'] for p in roce))
            return
    per_family = {}
    for family in ('AF_INET', 'AF_INET6'):
        per_family[family] = [p['key'] for p in roce if _gid_usable(p, nccl_gid_index(p, family) or 0)]
    if per_family['AF_INET'] and per_family['AF_INET6']:
        out.errors.append('the chosen RoCE ports need different address families (IPv4 GIDs on %s, IPv6-only GIDs on '
                          '%s) and NCCL_IB_ADDR_FAMILY is one per process: give every port an address of one family, '
                          'or narrow ib_hca' % (', '.join(per_family['AF_INET']), ', '.join(per_family['AF_INET6'])))
    else:
        bad = [p for p in roce if p['key'] not in per_family['AF_INET'] + per_family['AF_INET6']]
        out.errors.append('RoCE port(s) %s have no routable RoCE GID that %s would select (netdev %s has no address, '
                          'or only link-local GIDs): give the netdev an address or leave the port out of ib_hca' % (
                              ', '.join(p['key'] for p in bad), label, ', '.join(str(p['netdev']) for p in bad)))


def _gid_pinned(out, roce, library, known):
    """Libraries that take one NCCL_IB_GID_INDEX per process (older than 2.21, or unknown): one index that is a
    valid RoCE v2 GID on every chosen port, preferring the ports' own RoCE v2 index."""
    label = _library_label(library)
    indexes = sorted(set(p['gid_index'] for p in roce))
    candidates = indexes if len(indexes) == 1 else []
    if not candidates and all(p['gids'] is not None for p in roce):
        common = set.intersection(*[set(_int(g.get('index')) for g in p['gids']) for p in roce])
        # a RoCE v2 GID with an address on every port, of one family (an IPv4 GID cannot reach an IPv6 one)
        candidates = sorted(i for i in common if all(_gid_usable(p, i) for p in roce)
                            and len(set(_gid_family(_gid_table(p)[i][0]) for p in roce)) == 1)
    if candidates:
        reason = ('%s takes one NCCL_IB_GID_INDEX per process (%s); %d is a RoCE v2 GID of %s' % (
            label, 'NCCL_IB_GID_INDEX defaults to 0 before 2.21' if known else 'its version is unknown, so the index is '
            'pinned', candidates[0], ', '.join(p['key'] for p in roce)))
        out.set('NCCL_IB_GID_INDEX', candidates[0], 'detected', reason)
        return
    where = '; '.join('%d: %s' % (i, ', '.join(p['key'] for p in roce if p['gid_index'] == i)) for i in indexes)
    if known:
        out.errors.append('the chosen RoCE ports have their RoCE v2 GID at different indexes (%s) and %s takes one '
                          'NCCL_IB_GID_INDEX per process (per-port selection needs NCCL/RCCL >= 2.21): upgrade the '
                          'library, narrow ib_hca to ports that share an index, or set gid_index' % (where, label))
    else:
        out.warnings.append('the chosen RoCE ports have their RoCE v2 GID at different indexes (%s) and the %s version '
                            'is unknown: NCCL_IB_GID_INDEX is left unset, which works with NCCL/RCCL >= 2.21 (a GID per '
                            'port) and fails with older ones (GID 0); set library_version to decide' % (
                                where, (library.get('name') or 'NCCL').upper()))


def _gid(out, chosen, settings, library):
    """NCCL_IB_GID_INDEX, NCCL_IB_ADDR_FAMILY and NCCL_IB_ROCE_VERSION_NUM for the chosen RoCE ports.

    auto: with a library that selects per port (NCCL/RCCL >= 2.21) the index is left unset and only the family /
    version set when needed; with an older one the index is pinned (an error when the ports share none); an
    explicit index must be a valid RoCE v2 GID on every chosen port.
    """
    present = 'gid_index' in settings
    value = settings.get('gid_index')
    roce = [p for p in chosen if p['link_layer'] == 'roce']
    if _is_auto(value, present):
        if not roce:
            return
        per_port = _since(library, GID_PER_PORT_SINCE)
        missing = [p for p in roce if p['gid_index'] is None and (not per_port or p['gids'] is None)]
        if missing:
            out.errors.append('RoCE port(s) %s have no RoCE v2 GID (no address on %s, or only RoCE v1 GIDs): give '
                              'the netdev an address, leave the port out of ib_hca, or set gid_index' % (
                                  ', '.join(p['key'] for p in missing), ', '.join(str(p['netdev']) for p in missing)))
            return
        if per_port:
            _gid_per_port(out, roce, library)
        else:
            _gid_pinned(out, roce, library, per_port is not None)
        return
    if _is_unset(value):
        if roce and _since(library, GID_PER_PORT_SINCE) is not True:
            out.warnings.append('NCCL_IB_GID_INDEX left unset (gid_index unset): NCCL >= 2.21 picks a RoCE v2 GID per '
                                'port, older NCCL and RCCL builds (%s here) use GID 0' % _library_label(library))
        return
    index = _int(value)
    if index is None or index < 0:
        out.errors.append('gid_index must be auto, unset or an integer >= 0 (got %r)' % (value,))
        return
    _gid_explicit(out, roce, index)


def _efa(out, transport, facts):
    """FI_PROVIDER=efa and the plugin's name for NCCL on EFA (aws-ofi-nccl doc/efa-env-var.md)."""
    if transport != 'efa':
        return
    out.set('FI_PROVIDER', 'efa', 'detected', 'EFA devices: libfabric must use its efa provider (aws-ofi-nccl '
            'doc/efa-env-var.md)')
    plugin = str(_get(facts, 'library', 'aws_ofi_nccl') or '')
    base = plugin.rsplit('/', 1)[-1]
    if base.startswith('libnccl-net-') and base.endswith('.so'):
        # NCCL opens libnccl-net.so unless NCCL_NET_PLUGIN=<name> makes it libnccl-net-<name>.so (src/plugin/net.cc)
        out.set('NCCL_NET_PLUGIN', base[len('libnccl-net-'):-len('.so')], 'detected',
                'the aws-ofi-nccl plugin is installed as %s, not libnccl-net.so' % plugin)
    if plugin and not plugin.startswith(('/usr/lib/', '/usr/lib64/', '/lib/')):
        out.warnings.append('the aws-ofi-nccl plugin is in %s: its directory must be on the ranks\' LD_LIBRARY_PATH '
                            '(the EFA installer sets it in /etc/profile.d; add it with trainops_env otherwise)'
                            % plugin.rsplit('/', 1)[0])


def _rccl_dmabuf_search(gdr, library):
    """The kernel config as RCCL >= 2.28 reads it (``dict(file, options)`` or None: nothing readable), when that is
    what decides the dma-buf path; ``False`` for older or unknown RCCL, or facts that do not carry it."""
    if library.get('name') != 'rccl' or not _since(library, RCCL_DMABUF_SEARCH_SINCE) or \
            'dmabuf_kernel_search' not in gdr:
        return False
    search = gdr['dmabuf_kernel_search']
    return search if isinstance(search, Mapping) and isinstance(search.get('options'), Mapping) else None


def _gpudirect(facts, vendor, library=None):
    """'peer_mem' | 'dma_buf' | False (none usable) | None (facts do not say), for the node's GPUs. For RCCL 2.28 and
    later the dma-buf kernel options are the ones read where that RCCL looks (``dmabuf_kernel_search``)."""
    gdr = _get(facts, 'rdma', 'gpudirect')
    if not isinstance(gdr, Mapping):
        return None
    search = _rccl_dmabuf_search(gdr, library or {})
    if vendor == 'amd' and search is not False and gdr.get('dma_buf') and not gdr.get('amd_peer_mem') and \
            _get(facts, 'rdma', 'devices'):
        return 'dma_buf' if search and search['options'] and all(search['options'].values()) else False
    if 'path' in gdr:
        return gdr['path'] or False
    if isinstance(gdr.get('available'), bool) and not gdr['available']:
        return False
    if vendor == 'nvidia':
        return 'peer_mem' if gdr.get('nvidia_peermem') or gdr.get('nv_peer_mem') else (
            'dma_buf' if gdr.get('dma_buf') and gdr.get('available') else False)
    if vendor == 'amd':
        if gdr.get('amd_peer_mem'):
            return 'peer_mem'
        kernel = gdr.get('dmabuf_kernel')
        return 'dma_buf' if gdr.get('dma_buf') and isinstance(kernel, Mapping) and kernel and all(kernel.values()) \
            else False
    return None


def _dmabuf_default(library, facts):
    """What NCCL_DMABUF_ENABLE defaults to in this RCCL: '1', '0', or None when RCCL 2.28.x's ROCm is unknown."""
    since, rocm_since = RCCL_DMABUF_DEFAULT_ON
    version = library.get('version')
    if version is None or tuple(version[:2]) < since:
        return '0' if version is not None else None
    if tuple(version[:2]) > since:
        return '1'
    rocm = _version(_get(facts, 'library', 'rocm'))
    return None if rocm is None else ('1' if rocm[:2] >= rocm_since else '0')


def _dmabuf_reason(library, facts, gdr, search):
    """Why NCCL_DMABUF_ENABLE=1 is set: RCCL's default for this version and where the kernel options were read."""
    default = {'1': '%s defaults NCCL_DMABUF_ENABLE to 1 (since RCCL 2.28.3 for ROCm 7.12); set all the same',
               '0': '%s leaves NCCL_DMABUF_ENABLE at 0 by default',
               None: '%s defaults NCCL_DMABUF_ENABLE to 1 only in the ROCm 7.12 build of 2.28.3 and later (0 before; '
                     'the ROCm runtime is unknown)'}[_dmabuf_default(library, facts)] % _library_label(library)
    read_in = gdr.get('dmabuf_read_in') or 'host'
    if search:
        where = '%s has CONFIG_DMABUF_MOVE_NOTIFY and CONFIG_PCI_P2PDMA%s: the first place RCCL 2.28 and later read' % (
            search['file'], ' (the symbols dma_buf_move_notify, pci_p2pdma)' if search['file'] == '/proc/kallsyms'
            else '')
    else:
        where = '/boot/config-<release> has CONFIG_DMABUF_MOVE_NOTIFY and CONFIG_PCI_P2PDMA'
    return 'GPUDirect RDMA through dma-buf: %s; %s, read where RCCL reads it (%s)' % (default, where, read_in)


def _dmabuf_hint(gdr, search):
    """Why RCCL will not use dma-buf although the kernel imports dma-bufs, and what to do."""
    read_in = gdr.get('dmabuf_read_in') or 'host'
    both = ['CONFIG_DMABUF_MOVE_NOTIFY', 'CONFIG_PCI_P2PDMA']
    peer = 'install the amdgpu peer-memory client (/sys/kernel/mm/memory_peers/amdkfd)'
    if search is None:
        return ('the kernel has RDMA dma-buf, but RCCL 2.28 and later find no kernel config (/proc/config.gz, '
                '/boot/config-<release>, /usr/lib/modules/<release>/config, ...) and cannot read /proc/kallsyms in %s; '
                'or %s' % (read_in, peer))
    if search:
        missing = [k for k in both if not search['options'].get(k)]
        options = ' and '.join('%s=y' % k for k in missing)
        return ('the kernel has RDMA dma-buf, but RCCL only uses it with %s, not set in %s, the first place RCCL 2.28 '
                'and later read in %s; or %s' % (options, search['file'], read_in, peer))
    kernel = gdr.get('dmabuf_kernel')
    if isinstance(kernel, Mapping) and kernel:
        missing, state = [k for k, v in sorted(kernel.items()) if not v], 'not set there'
    elif read_in.startswith('container '):
        missing = both
        state = ('RCCL reads it inside %s, where it cannot be read: mount /boot read-only into the container '
                 '(the container role does on AMD nodes)' % read_in)
    else:
        missing, state = both, 'that file could not be read'
    return ('the kernel has RDMA dma-buf, but RCCL only uses it with %s in /boot/config-<release> (%s); or %s' % (
        ' and '.join('%s=y' % k for k in missing), state, peer))


def _gdr(out, settings, vendor, path, transport, facts, library=None):
    """NCCL_NET_GDR_LEVEL (left to NCCL unless set), NCCL_DMABUF_ENABLE=1 for RCCL's dma-buf path (off by default
    before RCCL 2.28.3 for ROCm 7.12, src/misc/rocmwrap.cc), and a warning when traffic is staged through host
    memory."""
    library = library or {}
    present = 'net_gdr_level' in settings
    value = settings.get('net_gdr_level')
    level = None
    if not _is_auto(value, present) and not _is_unset(value):
        number = _int(value)
        if number is not None and number >= 0:
            level = str(number)
        elif isinstance(value, str) and value.strip().upper() in GDR_LEVELS:
            level = value.strip().upper()
        else:
            out.errors.append('net_gdr_level must be auto, unset, one of %s or an integer >= 0 (got %r)' % (
                '/'.join(GDR_LEVELS), value))
            return
    if transport == 'tcp':
        if level is not None:
            out.warnings.append('net_gdr_level %s ignored: NCCL uses TCP sockets on this node' % level)
        return
    gdr = _get(facts, 'rdma', 'gpudirect')
    gdr = gdr if isinstance(gdr, Mapping) else {}
    search = _rccl_dmabuf_search(gdr, library)
    if vendor == 'amd' and path == 'dma_buf':
        out.set('NCCL_DMABUF_ENABLE', '1', 'detected', _dmabuf_reason(library, facts, gdr, search))
    if vendor != 'none' and path is False and level != 'LOC':
        if vendor == 'nvidia':
            hint = 'load nvidia_peermem (or use the open kernel modules with a kernel with RDMA dma-buf support)'
        elif gdr.get('dma_buf'):
            hint = _dmabuf_hint(gdr, search)
        else:
            hint = 'install the amdgpu peer-memory client (/sys/kernel/mm/memory_peers/amdkfd) or use dma-buf'
        out.warnings.append('GPUDirect RDMA is not available on this node: %s will stage network traffic through host '
                            'memory (slower); %s%s' % ('RCCL' if vendor == 'amd' else 'NCCL', hint, '' if level is None
                                                       else '; NCCL_NET_GDR_LEVEL=%s has no effect until then' % level))
    if level is not None:
        out.set('NCCL_NET_GDR_LEVEL', level, 'knob', 'net_gdr_level setting')


# --- QoS, cross-NIC, NCCL_NET ----------------------------------------------------------------------------

QOS = tuple((knob.setting, knob.env[0], knob.low, knob.high, knob.roce_only, knob.what) for knob in _knobs.QOS_KNOBS)
"""(setting, variable, low, high, RoCE only, what it does) of each knob _qos sets (declared in _knobs.KNOBS)."""


def _fifo_tc_problem(number, library):
    """Why the library would ignore NCCL_IB_FIFO_TC=number (IB_FIFO_TC table), None when it applies it."""
    label = _library_label(library)
    how = _by_version(IB_FIFO_TC, library.get('version'))
    if how is None:
        return ('its effect depends on the %s version, unknown here (absent before 2.22, 0 ignored before 2.24): set '
                '%s to the version the ranks load' % ((library['name'] or 'nccl').upper(), LIBRARY_VERSION_KNOB))
    if how == 'absent':
        return '%s ignores it: NCCL_IB_FIFO_TC exists since 2.22 (src/transport/net_ib.cc)' % label
    if how == 'nonzero' and number == 0:
        return ('%s ignores 0 and uses NCCL_IB_TC for the FIFO (ncclIbRtrQp applies NCCL_IB_FIFO_TC only when non-zero '
                'before 2.24)' % label)
    return None


def _max_devs_per_nic(library):
    """NCCL_IB_MAX_DEVS_PER_NIC of the library: 8 for NCCL 2.30 and later, 4 otherwise (RCCL, older or unknown)."""
    if library.get('name') == 'nccl':
        return _by_version(NCCL_IB_MAX_DEVS_PER_NIC, library.get('version')) or NCCL_IB_MAX_DEVS_PER_NIC[-1][1]
    return NCCL_IB_MAX_DEVS_PER_NIC[-1][1]


def _merged_ports(chosen, library):
    """The most ports NCCL merges into one virtual NIC: the chosen ports of one device (NCCL_NET_MERGE_LEVEL PORT),
    at most NCCL_IB_MAX_DEVS_PER_NIC."""
    per_dev = {}
    for port in chosen:
        per_dev[port['dev']] = per_dev.get(port['dev'], 0) + 1
    return min(max(per_dev.values() or [1]), _max_devs_per_nic(library))


def _qps_problem(number, library, chosen):
    """Why NCCL_IB_QPS_PER_CONNECTION=number overflows NCCL_IB_MAX_QPS once multiplied by the merged ports, or None."""
    merged = _merged_ports(chosen, library)
    if number * merged <= NCCL_IB_MAX_QPS or _since(library, QPS_TIMES_PORTS_SINCE) is False:
        return None
    return ('%d QPs x %d merged ports of one NIC = %d, more than NCCL_IB_MAX_QPS (%d): %s opens QPs per connection '
            'times merged ports (src/transport/net_ib.cc, since 2.20)%s' % (
                number, merged, number * merged, NCCL_IB_MAX_QPS, _library_label(library),
                '' if library.get('version') else '; if the library is older than 2.20 set %s' % LIBRARY_VERSION_KNOB))


def _qos(out, settings, transport, link_layer, library, chosen):
    """NCCL_IB_TC, NCCL_IB_FIFO_TC, NCCL_IB_SL, NCCL_IB_QPS_PER_CONNECTION (src/transport/net_ib)."""
    for name, var, low, high, roce_only, what in QOS:
        number = _int_setting(out, settings, name, low, high)
        if number is None:
            continue
        if transport != 'rdma':
            out.warnings.append('%s has no effect: NCCL does not use its IB/RoCE transport on this node' % name)
            continue
        if roce_only and link_layer == 'infiniband':
            out.warnings.append('%s has no effect on InfiniBand ports (a traffic class is RoCE only); use ib_sl' % name)
        problem = (_fifo_tc_problem(number, library) if var == 'NCCL_IB_FIFO_TC' else
                   _qps_problem(number, library, chosen) if var == 'NCCL_IB_QPS_PER_CONNECTION' else None)
        if problem:
            out.errors.append('%s %d: %s' % (name, number, problem))
            continue
        out.set(var, number, 'knob', '%s setting: %s' % (name, what))


def _cross_nic(out, settings, transport):
    """NCCL_CROSS_NIC: 0 keeps a ring on the same NIC (rail-optimized fabrics), 1 allows crossing, 2 (NCCL's
    default) prefers not to (src/graph/search.cc)."""
    knob = _knobs.BY_SETTING['cross_nic']
    number = _int_setting(out, settings, 'cross_nic', knob.low, knob.high)
    if number is None:
        return
    if transport == 'tcp':
        out.warnings.append('cross_nic has no effect over TCP sockets')
    out.set('NCCL_CROSS_NIC', number, 'knob', 'cross_nic setting (0: same NIC per ring, rail-optimized fabrics; '
            '1: may cross; 2: prefer not to)')


def _require_transport(out, settings, transport):
    """NCCL_NET: IB, Libfabric (aws-ofi-nccl) or Socket, so NCCL fails instead of falling back."""
    if settings.get('require_transport'):
        name = {'rdma': 'IB', 'efa': AWS_OFI_NET_NAME, 'tcp': 'Socket'}[transport]
        out.set('NCCL_NET', name, 'knob', 'require_transport: NCCL fails instead of falling back to another transport')


# --- env_overrides that name interfaces or HCAs, and the transport they leave ---------------------------

def _check_override(out, var, value, facts, ports):
    """Check env_overrides that name interfaces or HCAs against the node."""
    if var == 'NCCL_SOCKET_IFNAME':
        ifaces = _interfaces(facts)
        if ifaces is None:
            return
        names = list(ifaces)
        exclude, exact, items = parse_nccl_list(value)
        selected = match_names(value, names)
        if not selected:
            out.errors.append('env_overrides NCCL_SOCKET_IFNAME=%s selects no interface on this host (it has: %s)' % (
                value, ', '.join(names) or 'none'))
        elif exclude and len(selected) > 1:
            out.warnings.append('env_overrides NCCL_SOCKET_IFNAME=%s leaves %s: NCCL may use any of them; name the '
                                'one to use exactly (=name)' % (value, ', '.join(selected)))
        elif not exclude and not exact:
            for item, dummy in items:
                hits = [n for n in names if n.startswith(item)]
                if len(hits) > 1:
                    out.warnings.append('env_overrides NCCL_SOCKET_IFNAME=%s: prefix %r matches %s; NCCL may use any '
                                        'of them; write =%s to match one exactly' % (value, item, ', '.join(hits), hits[0]))
    elif var == 'GLOO_SOCKET_IFNAME':
        # gloo (torch c10d ProcessGroupGloo) splits the value at commas and opens a device per plain interface name:
        # no NCCL-style '=' / '^' prefixes, no ':port'
        names = [n.strip() for n in str(value).split(',')]
        bad = [n for n in names if not n or n[0] in '=^' or ':' in n]
        if bad:
            out.errors.append('env_overrides GLOO_SOCKET_IFNAME=%s: gloo takes plain interface names separated by '
                              'commas (no =, ^ or :port as in NCCL_SOCKET_IFNAME); write %s' % (
                                  value, ','.join(n.lstrip('=^').split(':')[0] for n in names if n.lstrip('=^'))))
            return
        ifaces = _interfaces(facts)
        if ifaces is None:
            return
        missing = [n for n in names if n not in ifaces]
        if missing:
            out.errors.append('env_overrides GLOO_SOCKET_IFNAME=%s names %s, which does not exist on this host (it '
                              'has: %s)' % (value, ', '.join(missing), ', '.join(ifaces) or 'none'))
    elif var == 'NCCL_IB_HCA':
        exclude, exact, items = parse_nccl_list(value)
        devs = sorted(set(p['dev'] for p in ports), key=_natural)
        selected = match_names(value, devs)
        if not selected and (items or not exclude):
            out.errors.append('env_overrides NCCL_IB_HCA=%s selects no RDMA device on this host (it has: %s)' % (
                value, ', '.join(devs) or 'none'))
            return
        if exclude:
            return
        for item, number in items:
            hits = [d for d in devs if (d == item if exact else d.startswith(item))]
            if not exact and len(hits) > 1:
                out.warnings.append('env_overrides NCCL_IB_HCA=%s: prefix %r matches %s; write =%s:<port>,... to '
                                    'match exactly' % (value, item, ', '.join(hits), item))
            if number is not None:
                for dev in hits:
                    if not [p for p in ports if p['dev'] == dev and p['port'] == number]:
                        out.errors.append('env_overrides NCCL_IB_HCA=%s names port %d of %s, which does not exist' % (
                            value, number, dev))


def _final_transport(out, transport, link_layer, chosen, active):
    """What the environment finally says about the transport, after env_overrides NCCL_IB_DISABLE."""
    disable = out.env.get('NCCL_IB_DISABLE')
    if out.sources.get('NCCL_IB_DISABLE') == 'override':
        if disable == '1' and transport == 'rdma':
            out.warnings.append('env_overrides NCCL_IB_DISABLE=1 turns RDMA off: NCCL uses TCP sockets')
            return 'tcp', None, []
        if disable != '1' and transport == 'tcp':
            ib = [p for p in active if p['link_layer'] in ('infiniband', 'roce')]
            if ib:
                layers = set(p['link_layer'] for p in ib)
                return 'rdma', layers.pop() if len(layers) == 1 else 'mixed', ib
            out.warnings.append('env_overrides NCCL_IB_DISABLE=%s but no RDMA port is ACTIVE: NCCL uses TCP '
                                'sockets' % disable)
    elif 'NCCL_IB_DISABLE' in out.unset and transport == 'tcp' and active:
        out.warnings.append('NCCL_IB_DISABLE removed by env_overrides: NCCL may use the ACTIVE RDMA ports')
    return transport, link_layer, chosen
