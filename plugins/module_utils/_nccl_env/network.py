# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The network deciders: what NCCL/RCCL and gloo use between nodes. Pure: no I/O.

The socket interface and its address family (``_socket``, ``_socket_family``); the RDMA ports by PCIe locality or as
ib_hca names them (``_auto_ports``, ``_explicit_ports``) and the transport over them, InfiniBand/RoCE, EFA through
aws-ofi-nccl or TCP (``_transport``, ``_ib_disable``, ``_ib_hca``); the QoS knobs (``_qos``), cross-NIC rings
(``_cross_nic``) and NCCL_NET (``_require_transport``); the check of env_overrides that name interfaces or HCAs
(``_check_override``) and the transport they leave (``_final_transport``). The RoCE GID, EFA's settings and GPUDirect
RDMA over the chosen ports are gpudirect.py's (``_gid``, ``_efa``, ``_gdr``). compute (deciders.py) calls them in
order; the shared core is in core.py.
"""

from __future__ import annotations

import ipaddress

from collections.abc import Mapping

from ansible_collections.trainops.multinode.plugins.module_utils import _knobs
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.core import (
    LIBRARY_VERSION_KNOB, _int_setting, _is_auto,
)
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.facts import (
    GPU_LOCAL, PATH_TYPES, _by_version, _describe_ports, _get, _int, _interfaces, _library_label, _natural,
    _pci_layout, _since, _version_text, pci_path_type,
)

NETWORK_MODES = ('auto', 'rdma', 'tcp')


# Library facts, each checked against the sources named (docs/nccl.md has the list):
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
