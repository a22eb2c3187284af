# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Per-host NCCL/RCCL environment from a node's ``trainops_node`` facts plus settings. Pure: no I/O.

``compute(facts, settings)`` returns the environment of one node's ranks::

    env       {VAR: "value"}                 every value a string
    sources   {VAR: "detected"|"knob"|"default"|"override"}
    reasons   {VAR: "why this value"}        one short sentence per variable
    transport "rdma" | "tcp"                 what NCCL will use between nodes
    link_layer "infiniband" | "roce" | None  of the RDMA ports used (None over TCP)
    hcas      ["mlx5_0:1", ...]              the RDMA ports used ([] over TCP)
    socket_ifname ["ens5"]                   the socket interface(s)
    vendor    "nvidia" | "amd" | "none"
    gpudirect True | False | None            GPUDirect RDMA usable (None: facts do not say)
    unset     [VAR, ...]                     variables env_overrides removed (null values)
    errors    [str]                          user-actionable; never raised
    warnings  [str]

Settings (every key optional; a missing key takes the default in brackets):

    network_mode    auto|rdma|tcp [auto]; auto = rdma when the node has an ACTIVE RDMA port (and GPUs), else tcp
    socket_ifname   auto | name | [names] [auto]; auto = facts.network.ifname
    ib_hca          auto | [names or "name:port"] | "a:1,b:1" [auto]; auto = the ACTIVE ports, see _auto_ports
    gid_index       auto | int >= 0 | unset (or null) [auto]; auto = the RoCE v2 GID index of the chosen RoCE ports
    net_gdr_level   auto | LOC|PIX|PXB|PHB|SYS | int >= 0 | unset (or null) [auto]; auto = leave it to NCCL
    channels        int | null [null] -> NCCL_MAX_NCHANNELS
    min_channels    int | null [null] -> NCCL_MIN_NCHANNELS
    threads         int | null [null] -> RCCL_THREADS_PER_BLOCK (amd) / NCCL_NTHREADS (nvidia)
    nccl_debug      VERSION|WARN|INFO|TRACE | null [WARN]; null (or "" / "unset") leaves NCCL_DEBUG unset
    vendor          nvidia|amd|none [facts.gpu.vendor]
    nproc_per_node  int | null [null]; checked against facts.gpu.count unless vendor is none
    rocm_defaults   {VAR: value} | null [DEFAULT_ROCM_ENV]; AMD nodes only; {} sets none
    require_transport bool [false]; true sets NCCL_NET=IB (rdma) / Socket (tcp) so NCCL fails instead of falling back
    env_overrides   {VAR: value | null} [{}]; a value always wins, null removes the variable
"""

from __future__ import annotations

import re

from collections.abc import Mapping

VENDORS = ('nvidia', 'amd', 'none')
NETWORK_MODES = ('auto', 'rdma', 'tcp')
GDR_LEVELS = ('LOC', 'PIX', 'PXB', 'PHB', 'SYS')
NCCL_DEBUG_LEVELS = ('VERSION', 'WARN', 'INFO', 'TRACE')
NCCL_NTHREADS_VALUES = (64, 128, 256, 512)
DEFAULT_NCCL_DEBUG = 'WARN'

SETTINGS = ('network_mode', 'socket_ifname', 'ib_hca', 'gid_index', 'net_gdr_level', 'channels', 'min_channels',
            'threads', 'nccl_debug', 'vendor', 'nproc_per_node', 'rocm_defaults', 'require_transport', 'env_overrides')

DEFAULT_ROCM_ENV = {'HSA_ENABLE_SDMA': '0'}
"""ROCm runtime settings put on AMD nodes unless ``rocm_defaults`` says otherwise."""

ROCM_REASONS = {
    'HSA_ENABLE_SDMA': ('ROCm default of this collection: copies use blit kernels instead of the SDMA engines, the '
                        'workaround for SDMA copy-completion hangs seen on MI300-class GPUs; the aorta launcher passes '
                        'it to every rank (docker exec -e). Costs some host<->device copy bandwidth; drop it with '
                        'rocm_defaults {} or env_overrides HSA_ENABLE_SDMA null'),
}
# Not a default: HSA_ENABLE_IPC_MODE_LEGACY=1 (in the aorta set_env_variables.sh, which never reached the ranks).
# Reports conflict: some ROCm 7 images need it, on others it makes hipIpcGetMemHandle fail so RCCL loses P2P.

CONF_PREFIXES = ('NCCL_', 'RCCL_')
"""Variables NCCL/RCCL read through their own getenv, so a conf file can set them (see render_nccl_conf)."""

_ENV_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')
_SHELL_SAFE = re.compile(r'^[A-Za-z0-9_@%+=:,./-]*$')
_UNSET_WORDS = ('unset', 'none', '')


def nccl_conf_path(vendor):
    """System-wide file the vendor's library reads (``NCCL_CONF_FILE`` or ``~/.nccl.conf``/``~/.rccl.conf`` first)."""
    return '/etc/rccl.conf' if vendor == 'amd' else '/etc/nccl.conf'


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


def _is_unset(value):
    return value is None or (isinstance(value, str) and value.strip().lower() in _UNSET_WORDS)


def _is_auto(value, present):
    return not present or (isinstance(value, str) and value.strip().lower() == 'auto')


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


def _env_value(value):
    if isinstance(value, bool):
        return '1' if value else '0'
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return value
    return None


def parse_nccl_list(value):
    """Parse an NCCL interface/HCA list: ``[^][=]name[:port],...`` -> (exclude, exact, [(name, port|None)])."""
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
        name, sep, port = part.partition(':')
        items.append((name, int(port) if sep and port.isdigit() else None))
    return exclude, exact, items


def match_names(value, names):
    """Names NCCL selects from ``names`` for a list value (prefix match unless ``=``; ``^`` excludes)."""
    exclude, exact, items = parse_nccl_list(value)

    def hit(name):
        return any(name == item if exact else name.startswith(item) for item, dummy in items)
    return [n for n in names if hit(n) != exclude]


# --- facts ---------------------------------------------------------------------------------------

def _link_layer(text):
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
            ports.append(dict(
                dev=str(dev['name']), port=number, key='%s:%d' % (dev['name'], number),
                state=str(port.get('state') or 'UNKNOWN').upper(), phys_state=port.get('phys_state'),
                link_layer=_link_layer(port.get('link_layer')), rate_gbps=port.get('rate_gbps'),
                netdev=port.get('netdev'), gid_index=_int(port.get('roce_v2_gid_index')),
                vf=bool(dev.get('virtual_function'))))
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


def _gpudirect(facts, vendor):
    gdr = _get(facts, 'rdma', 'gpudirect')
    if not isinstance(gdr, Mapping):
        return None
    if isinstance(gdr.get('available'), bool):
        return gdr['available']
    if vendor == 'nvidia':
        return bool(gdr.get('nvidia_peermem') or gdr.get('nv_peer_mem') or gdr.get('dma_buf'))
    if vendor == 'amd':
        return bool(gdr.get('amd_peer_mem') or gdr.get('dma_buf'))
    return None


def _describe_ports(ports):
    return ', '.join('%s %s%s' % (p['key'], p['state'], ' (%s)' % p['phys_state'] if p.get('phys_state') else '')
                     for p in ports)


# --- the computation -------------------------------------------------------------------------------

class _Out(object):
    def __init__(self):
        self.env, self.sources, self.reasons = {}, {}, {}
        self.errors, self.warnings, self.unset = [], [], []

    def set(self, var, value, source, reason):
        self.env[var] = str(value)
        self.sources[var] = source
        self.reasons[var] = reason

    def drop(self, var):
        for table in (self.env, self.sources, self.reasons):
            table.pop(var, None)


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


def _explicit_ports(out, ports, value):
    """Ports named by ib_hca, validated against the node's devices and ports."""
    if isinstance(value, str) and value.strip().startswith('^'):
        out.errors.append('ib_hca %r excludes HCAs: list the ones to use instead (or pass the pattern in env_overrides '
                          'NCCL_IB_HCA)' % value)
        return []
    names = _names_list(value)
    if not names:
        out.errors.append('ib_hca must be auto or a list of HCA names, optionally name:port (got %r)' % (value,))
        return []
    by_dev = {}
    for port in ports:
        by_dev.setdefault(port['dev'], []).append(port)
    chosen = []
    for item in names:
        dev, sep, number = item.partition(':')
        if dev not in by_dev:
            out.errors.append('ib_hca names HCA %r, which does not exist on this host (it has: %s)' % (
                dev, ', '.join(sorted(by_dev, key=_natural)) or 'no RDMA devices'))
            continue
        if sep:
            port = [p for p in by_dev[dev] if str(p['port']) == number.strip()]
            if not port:
                out.errors.append('ib_hca names port %s of %s, which does not exist (its ports: %s)' % (
                    number, dev, ', '.join(str(p['port']) for p in by_dev[dev])))
                continue
            if port[0]['state'] != 'ACTIVE':
                out.errors.append('ib_hca names %s, which is not ACTIVE (%s): NCCL skips ports that are not ACTIVE; '
                                  'bring the link up or leave it out' % (port[0]['key'], _describe_ports(port)))
                continue
            chosen.extend(port)
        else:
            active = [p for p in by_dev[dev] if p['state'] == 'ACTIVE']
            if not active:
                out.errors.append('ib_hca names %s, which has no ACTIVE port (%s)' % (dev, _describe_ports(by_dev[dev])))
            chosen.extend(active)
    unique, seen = [], set()
    for port in chosen:
        if port['key'] not in seen:
            seen.add(port['key'])
            unique.append(port)
    layers = sorted(set(p['link_layer'] for p in unique))
    if len(layers) > 1:
        out.errors.append('ib_hca mixes link layers (%s): InfiniBand and RoCE ports are different fabrics and NCCL '
                          'pairs the NICs of different nodes, so name ports of one link layer only' % '; '.join(
                              '%s: %s' % (layer, ', '.join(p['key'] for p in unique if p['link_layer'] == layer))
                              for layer in layers))
    return unique


def _auto_ports(out, active, gid_auto):
    """The ACTIVE ports NCCL should use when ib_hca is auto.

    InfiniBand before RoCE when a node has both (the Ethernet ports are then the front-end network), physical
    functions before SR-IOV virtual functions when both are ACTIVE (VFs share the PFs' links), RoCE ports without a
    RoCE v2 GID left out (when the GID index is auto), and only the fastest ports when rates differ (a slower port
    is a front-end or storage NIC). Each choice is reported as a warning.
    """
    chosen = list(active)
    if len(set(p['link_layer'] for p in chosen)) > 1 and any(p['link_layer'] == 'infiniband' for p in chosen):
        left = [p for p in chosen if p['link_layer'] != 'infiniband']
        chosen = [p for p in chosen if p['link_layer'] == 'infiniband']
        out.warnings.append('the node has ACTIVE InfiniBand and Ethernet (RoCE) ports: using the InfiniBand ports and '
                            'leaving out %s; set ib_hca to choose' % ', '.join(p['key'] for p in left))
    if any(p['vf'] for p in chosen) and not all(p['vf'] for p in chosen):
        left = [p for p in chosen if p['vf']]
        chosen = [p for p in chosen if not p['vf']]
        out.warnings.append('both physical functions and SR-IOV virtual functions are ACTIVE: using the physical '
                            'functions and leaving out the VFs %s (they share the same links); set ib_hca to choose'
                            % ', '.join(p['key'] for p in left))
    if gid_auto:
        left = [p for p in chosen if p['link_layer'] == 'roce' and p['gid_index'] is None]
        if left:
            chosen = [p for p in chosen if p not in left]
            out.warnings.append('RoCE ports without a RoCE v2 GID left out: %s (their netdevs %s have no address, or '
                                'only RoCE v1 GIDs); give them an address or set ib_hca and gid_index' % (
                                    ', '.join(p['key'] for p in left),
                                    ', '.join(str(p['netdev']) for p in left)))
    rates = [p['rate_gbps'] for p in chosen]
    if chosen and all(isinstance(r, (int, float)) and not isinstance(r, bool) for r in rates) and len(set(rates)) > 1:
        fastest = max(rates)
        left = [p for p in chosen if p['rate_gbps'] != fastest]
        chosen = [p for p in chosen if p['rate_gbps'] == fastest]
        slower = ', '.join('%s (%g Gb/s)' % (p['key'], p['rate_gbps']) for p in left)
        out.warnings.append('ACTIVE ports run at different rates: using the %g Gb/s ports and leaving out %s; set '
                            'ib_hca to choose' % (fastest, slower))
    return chosen


def _gid(out, chosen, settings):
    """NCCL_IB_GID_INDEX for the chosen ports."""
    present = 'gid_index' in settings
    value = settings.get('gid_index')
    roce = [p for p in chosen if p['link_layer'] == 'roce']
    if _is_auto(value, present):
        if not roce:
            return
        missing = [p for p in roce if p['gid_index'] is None]
        if missing:
            out.errors.append('RoCE port(s) %s have no RoCE v2 GID (no address on %s, or only RoCE v1 GIDs): give '
                              'the netdev an address, leave the port out of ib_hca, or set gid_index' % (
                                  ', '.join(p['key'] for p in missing), ', '.join(str(p['netdev']) for p in missing)))
            return
        indexes = sorted(set(p['gid_index'] for p in roce))
        if len(indexes) > 1:
            out.errors.append('the chosen RoCE ports disagree on the RoCE v2 GID index (%s), and NCCL takes one '
                              'NCCL_IB_GID_INDEX per process: set gid_index to the one to use, narrow ib_hca to ports '
                              'that share an index, or set gid_index to unset to let NCCL >= 2.21 pick a GID per port' % (
                                  '; '.join('%d: %s' % (i, ', '.join(p['key'] for p in roce if p['gid_index'] == i))
                                            for i in indexes)))
            return
        out.set('NCCL_IB_GID_INDEX', indexes[0], 'detected',
                'the RoCE v2 GID index of %s (facts.rdma.devices[].ports[].roce_v2_gid_index)' % ', '.join(p['key'] for p in roce))
        return
    if _is_unset(value):
        if roce:
            out.warnings.append('NCCL_IB_GID_INDEX left unset (gid_index unset): NCCL >= 2.21 picks a RoCE v2 GID per '
                                'port, older NCCL and RCCL builds use GID 0')
        return
    index = _int(value)
    if index is None or index < 0:
        out.errors.append('gid_index must be auto, unset or an integer >= 0 (got %r)' % (value,))
        return
    if not roce:
        out.warnings.append('gid_index %d is set although no RoCE port is used (it only matters for RoCE)' % index)
    differ = [p for p in roce if p['gid_index'] is not None and p['gid_index'] != index]
    if differ:
        out.warnings.append('gid_index %d differs from the RoCE v2 GID index found on %s' % (
            index, ', '.join('%s (%d)' % (p['key'], p['gid_index']) for p in differ)))
    out.set('NCCL_IB_GID_INDEX', index, 'knob', 'gid_index setting')


def _gdr(out, settings, vendor, gpudirect, transport):
    """NCCL_NET_GDR_LEVEL: left to NCCL unless set; a warning when GPUDirect RDMA is not available."""
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
    if transport != 'rdma':
        if level is not None:
            out.warnings.append('net_gdr_level %s ignored: NCCL uses TCP sockets on this node' % level)
        return
    if vendor != 'none' and gpudirect is False and level != 'LOC':
        hint = ('load nvidia_peermem (or use a kernel with RDMA dma-buf support)' if vendor == 'nvidia' else
                'install the amdgpu peer-memory support (/sys/kernel/mm/memory_peers/amdkfd) or use dma-buf')
        out.warnings.append('GPUDirect RDMA is not available on this node: NCCL will stage network traffic through '
                            'host memory (slower); %s%s' % (hint, '' if level is None else
                                                            '; NCCL_NET_GDR_LEVEL=%s has no effect until then' % level))
    if level is not None:
        out.set('NCCL_NET_GDR_LEVEL', level, 'knob', 'net_gdr_level setting')


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
        ifaces = _interfaces(facts)
        if ifaces is None:
            return
        missing = [n for n in _names_list(value) or [] if n not in ifaces]
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


def _overrides(out, facts, settings, ports):
    overrides = settings.get('env_overrides')
    if overrides in (None, {}):
        return
    if not isinstance(overrides, Mapping):
        out.errors.append('env_overrides must be a dict of VAR: value (got %r)' % (overrides,))
        return
    for var in sorted(overrides, key=str):
        value = overrides[var]
        if not isinstance(var, str) or not _ENV_NAME.match(var):
            out.errors.append('env_overrides: %r is not a valid environment variable name' % (var,))
            continue
        if value is None:
            out.drop(var)
            out.unset.append(var)
            continue
        text = _env_value(value)
        if text is None:
            out.errors.append('env_overrides %s: the value must be a string, number or boolean (got %r)' % (var, value))
            continue
        if '\n' in text or '\r' in text or '\0' in text:
            out.errors.append('env_overrides %s: the value must be one line' % var)
            continue
        out.set(var, text, 'override', 'env_overrides')
        _check_override(out, var, text, facts, ports)


def compute(facts, settings=None):
    """The NCCL/RCCL environment of one node; see the module docstring for settings and result."""
    settings = dict(settings or {})
    out = _Out()
    facts = facts if isinstance(facts, Mapping) else {}
    if not facts:
        out.errors.append('no node facts given: run trainops.multinode.node_facts on the node first')

    unknown = sorted(k for k in settings if k not in SETTINGS)
    if unknown:
        out.errors.append('unknown setting(s): %s' % ', '.join(unknown))

    # vendor
    fact_vendor = str(_get(facts, 'gpu', 'vendor') or 'none')
    vendor = settings.get('vendor') or fact_vendor
    if vendor not in VENDORS:
        out.errors.append('vendor must be one of %s (got %r)' % (', '.join(VENDORS), vendor))
        vendor = fact_vendor if fact_vendor in VENDORS else 'none'

    # network mode
    mode = settings.get('network_mode') or 'auto'
    mode = str(mode).strip().lower()
    if mode not in NETWORK_MODES:
        out.errors.append('network_mode must be auto, rdma or tcp (got %r)' % (settings.get('network_mode'),))
        mode = 'auto'

    socket_names = _socket(out, facts, settings)

    # RDMA ports
    ports = _ports(facts)
    active = [p for p in ports if p['state'] == 'ACTIVE']
    hca_value = settings.get('ib_hca')
    hca_auto = _is_auto(hca_value, 'ib_hca' in settings) or hca_value is None
    gid_auto = _is_auto(settings.get('gid_index'), 'gid_index' in settings)
    if _get(facts, 'rdma') is None and facts:
        out.warnings.append('the facts carry no rdma section (node_facts older than this collection?): assuming no '
                            'RDMA devices')

    chosen = []
    if mode == 'tcp':
        transport = 'tcp'
        if not hca_auto:
            _explicit_ports(out, ports, hca_value)  # a name that does not exist is still an error
            out.warnings.append('ib_hca ignored: network_mode is tcp')
        if active and vendor != 'none':
            out.warnings.append('network_mode tcp: NCCL will not use the ACTIVE RDMA ports %s (TCP sockets are several '
                                'times slower)' % ', '.join(p['key'] for p in active))
    elif mode == 'auto' and vendor == 'none':
        transport = 'tcp'  # gloo on CPU-only nodes uses sockets only
        if not hca_auto:
            _explicit_ports(out, ports, hca_value)  # a name that does not exist is still an error
            out.warnings.append('ib_hca ignored: the node has no GPUs and gloo uses TCP sockets')
    else:
        chosen = _auto_ports(out, active, gid_auto) if hca_auto else _explicit_ports(out, ports, hca_value)
        if chosen:
            transport = 'rdma'
        elif mode == 'rdma':
            transport = 'rdma'
            if hca_auto:
                out.errors.append('network_mode rdma but no ACTIVE RDMA port on this host (%s); bring a port up, fix '
                                  'ib_hca, or set network_mode to tcp or auto' % (
                                      _describe_ports(ports) if ports else 'no RDMA devices found'))
        else:
            transport = 'tcp'
            if ports and hca_auto:
                out.warnings.append('RDMA devices found but no port is usable (%s): NCCL will use TCP sockets, several '
                                    'times slower' % _describe_ports(ports))
    if mode == 'rdma' and vendor == 'none':
        out.warnings.append('network_mode rdma on a node without GPUs: gloo uses TCP sockets only')

    mode_source = 'detected' if mode == 'auto' else 'knob'
    gpudirect = _gpudirect(facts, vendor)
    link_layer = None
    if transport == 'rdma':
        out.set('NCCL_IB_DISABLE', '0', mode_source, 'RDMA: %s' % (
            'ACTIVE RDMA ports found' if mode == 'auto' else 'network_mode rdma'))
        if chosen:
            out.set('NCCL_IB_HCA', '=' + ','.join(p['key'] for p in chosen), 'detected' if hca_auto else 'knob',
                    ('the ACTIVE RDMA ports, matched exactly' if hca_auto else 'ib_hca setting, matched exactly'))
            layers = set(p['link_layer'] for p in chosen)
            link_layer = layers.pop() if len(layers) == 1 else 'mixed'
        _gid(out, chosen, settings)
        _gdr(out, settings, vendor, gpudirect, transport)
    else:
        out.set('NCCL_IB_DISABLE', '1', mode_source, 'TCP sockets: %s' % (
            'network_mode tcp' if mode == 'tcp' else 'no GPUs (gloo)' if vendor == 'none' else 'no usable RDMA port'))
        if not gid_auto and not _is_unset(settings.get('gid_index')):
            out.warnings.append('gid_index ignored: NCCL uses TCP sockets on this node')
        _gdr(out, settings, vendor, gpudirect, transport)

    if settings.get('require_transport'):
        out.set('NCCL_NET', 'IB' if transport == 'rdma' else 'Socket', 'knob',
                'require_transport: NCCL fails instead of falling back to another transport')

    # channels and threads
    numbers = {}
    for name in ('channels', 'min_channels', 'threads', 'nproc_per_node'):
        value = settings.get(name)
        if value is None:
            continue
        number = _int(value)
        if number is None or number < 1:
            out.errors.append('%s must be an integer >= 1 (got %r)' % (name, value))
            continue
        numbers[name] = number
    if 'channels' in numbers:
        out.set('NCCL_MAX_NCHANNELS', numbers['channels'], 'knob', 'channels setting')
    if 'min_channels' in numbers:
        out.set('NCCL_MIN_NCHANNELS', numbers['min_channels'], 'knob', 'min_channels setting')
        if 'channels' in numbers and numbers['min_channels'] > numbers['channels']:
            out.errors.append('min_channels %d is larger than channels %d' % (numbers['min_channels'], numbers['channels']))
    if 'threads' in numbers:
        if vendor == 'amd':
            out.set('RCCL_THREADS_PER_BLOCK', numbers['threads'], 'knob', 'threads setting (RCCL on AMD)')
        elif vendor == 'nvidia':
            out.set('NCCL_NTHREADS', numbers['threads'], 'knob', 'threads setting (NCCL on NVIDIA)')
            if numbers['threads'] not in NCCL_NTHREADS_VALUES:
                out.warnings.append('threads %d: NCCL_NTHREADS accepts %s' % (
                    numbers['threads'], ', '.join(str(v) for v in NCCL_NTHREADS_VALUES)))
    if 'nproc_per_node' in numbers and vendor != 'none':
        count = _int(_get(facts, 'gpu', 'count')) or 0
        if numbers['nproc_per_node'] > count:
            out.errors.append('nproc_per_node %d is larger than the %d GPU(s) of this node (vendor %s, detected %s): '
                              'lower nproc_per_node or fix the GPU detection' % (
                                  numbers['nproc_per_node'], count, vendor, fact_vendor))

    # NCCL_DEBUG
    if 'nccl_debug' not in settings:
        out.set('NCCL_DEBUG', DEFAULT_NCCL_DEBUG, 'default', 'default of this collection: NCCL says why it fails (WARN) without the per-rank INFO output')
    elif not _is_unset(settings['nccl_debug']):
        level = str(settings['nccl_debug']).strip().upper()
        if level in NCCL_DEBUG_LEVELS:
            out.set('NCCL_DEBUG', level, 'knob', 'nccl_debug setting')
        else:
            out.errors.append('nccl_debug must be one of %s or null (got %r)' % (
                ', '.join(NCCL_DEBUG_LEVELS), settings['nccl_debug']))

    # ROCm runtime
    if vendor == 'amd':
        rocm = settings.get('rocm_defaults') if 'rocm_defaults' in settings else None
        if rocm is None:
            for var in sorted(DEFAULT_ROCM_ENV):
                out.set(var, DEFAULT_ROCM_ENV[var], 'default', ROCM_REASONS.get(var, 'ROCm default of this collection'))
        elif not isinstance(rocm, Mapping):
            out.errors.append('rocm_defaults must be a dict of VAR: value (got %r)' % (rocm,))
        else:
            for var in sorted(rocm):
                text = _env_value(rocm[var])
                if rocm[var] is None:
                    continue
                if not isinstance(var, str) or not _ENV_NAME.match(var) or text is None or '\n' in text:
                    out.errors.append('rocm_defaults: %r=%r is not a valid variable and value' % (var, rocm[var]))
                    continue
                out.set(var, text, 'knob', 'rocm_defaults setting')

    _overrides(out, facts, settings, ports)

    # what the environment finally says about the transport
    disable = out.env.get('NCCL_IB_DISABLE')
    if out.sources.get('NCCL_IB_DISABLE') == 'override':
        if disable == '1' and transport == 'rdma':
            transport, link_layer, chosen = 'tcp', None, []
            out.warnings.append('env_overrides NCCL_IB_DISABLE=1 turns RDMA off: NCCL uses TCP sockets')
        elif disable != '1' and transport == 'tcp':
            if active:
                transport = 'rdma'
                layers = set(p['link_layer'] for p in active)
                link_layer = layers.pop() if len(layers) == 1 else 'mixed'
                chosen = active
            else:
                out.warnings.append('env_overrides NCCL_IB_DISABLE=%s but no RDMA port is ACTIVE: NCCL uses TCP '
                                    'sockets' % disable)
    elif 'NCCL_IB_DISABLE' in out.unset and transport == 'tcp' and active:
        out.warnings.append('NCCL_IB_DISABLE removed by env_overrides: NCCL may use the ACTIVE RDMA ports')

    return dict(env=out.env, sources=out.sources, reasons=out.reasons, transport=transport, link_layer=link_layer,
                hcas=[p['key'] for p in chosen], socket_ifname=socket_names, vendor=vendor, gpudirect=gpudirect,
                unset=sorted(out.unset), errors=out.errors, warnings=out.warnings)


# --- across nodes ----------------------------------------------------------------------------------

def _table(rows, headers):
    widths = [max(len(str(r[i])) for r in [headers] + rows) for i in range(len(headers))]
    lines = ['  '.join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [headers] + rows]
    lines.insert(1, '  '.join('-' * w for w in widths))
    return '\n'.join(lines)


def check_cluster(per_host):
    """Cross-node check of ``{host: compute() result}``: transports, link layers and vendors must agree.

    Returns ``dict(errors=[str], warnings=[str], table=str, transports={host: transport})``.
    """
    errors, warnings, rows, transports = [], [], [], {}
    hosts = sorted(per_host or {}, key=_natural)
    valid = {}
    for host in hosts:
        res = per_host[host]
        if not isinstance(res, Mapping) or res.get('transport') not in ('rdma', 'tcp'):
            errors.append('%s: no NCCL environment was computed for this host' % host)
            rows.append([host, '?', '?', '?', '?', '?'])
            continue
        valid[host] = res
        transports[host] = res['transport']
        env = res.get('env') or {}
        rows.append([host, res.get('vendor') or '?', res['transport'] + (
            ' (%s)' % res['link_layer'] if res['transport'] == 'rdma' and res.get('link_layer') else ''),
            env.get('NCCL_SOCKET_IFNAME', '(unset)'), env.get('NCCL_IB_HCA', '-') if res['transport'] == 'rdma' else '-',
            'errors' if res.get('errors') else 'ok'])

    def by_value(key):
        groups = {}
        for host in valid:
            groups.setdefault(valid[host].get(key), []).append(host)
        return groups

    groups = by_value('transport')
    if len(groups) > 1:
        errors.append('the nodes would use different transports (%s): NCCL needs one transport between all nodes; '
                      'a TCP node makes NCCL fall back to sockets or hang at the first collective; fix the RDMA ports '
                      'of the TCP nodes (see their warnings) or set network_mode tcp for all' % '; '.join(
                          '%s on %s' % (t, ', '.join(h)) for t, h in sorted(groups.items())))
    rdma = dict((h, r) for h, r in valid.items() if r['transport'] == 'rdma')
    layers = {}
    for host, res in rdma.items():
        layers.setdefault(res.get('link_layer') or 'unknown', []).append(host)
    if len(layers) > 1:
        errors.append('the RDMA nodes use different link layers (%s): InfiniBand and RoCE ports cannot reach each '
                      'other' % '; '.join('%s on %s' % (k, ', '.join(sorted(v, key=_natural)))
                                          for k, v in sorted(layers.items())))
    vendors = by_value('vendor')
    if len(vendors) > 1:
        errors.append('the nodes have different GPU vendors (%s): NCCL (NVIDIA) and RCCL (AMD) ranks cannot form one '
                      'communicator, and nodes without GPUs cannot join a GPU job' % '; '.join(
                          '%s on %s' % (v, ', '.join(h)) for v, h in sorted(vendors.items(), key=lambda i: str(i[0]))))
    counts = {}
    for host, res in rdma.items():
        counts.setdefault(len(res.get('hcas') or []), []).append(host)
    if len(counts) > 1:
        warnings.append('the RDMA nodes use different numbers of HCA ports (%s): the nodes with fewer limit the '
                        'bandwidth of the whole job' % '; '.join('%d on %s' % (n, ', '.join(sorted(h, key=_natural)))
                                                                 for n, h in sorted(counts.items())))
    table = _table(rows, ['host', 'vendor', 'transport', 'NCCL_SOCKET_IFNAME', 'NCCL_IB_HCA', 'status'])
    return dict(errors=errors, warnings=warnings, table=table, transports=transports)


# --- rendering -------------------------------------------------------------------------------------

def _check_env(env):
    for var in env:
        if not _ENV_NAME.match(str(var)):
            raise ValueError('%r is not a valid environment variable name' % (var,))
        if any(c in str(env[var]) for c in '\n\r\0'):
            raise ValueError('the value of %s is not one line' % var)


def _quote(value):
    if _SHELL_SAFE.match(value) and value:
        return value
    return "'" + value.replace("'", "'\"'\"'") + "'"


def render_env_file(env, header=None, quote=True):
    """``KEY=value`` lines, sorted, for ``set -a; . file`` or systemd ``EnvironmentFile=``.

    Values that are not shell-safe are single-quoted when ``quote`` (docker ``--env-file`` takes values
    literally: render with ``quote=False`` for it).
    """
    _check_env(env)
    lines = ['# %s' % line for line in (header or 'NCCL/RCCL environment written by trainops.multinode').splitlines()]
    for var in sorted(env):
        value = str(env[var])
        lines.append('%s=%s' % (var, _quote(value) if quote else value))
    return '\n'.join(lines) + '\n'


def render_nccl_conf(env, header=None):
    """``/etc/nccl.conf`` (NCCL) or ``/etc/rccl.conf`` (RCCL) content: ``KEY=value`` lines, values verbatim.

    NCCL/RCCL read ``$NCCL_CONF_FILE`` (NCCL >= 2.23) or ``~/.nccl.conf`` (``~/.rccl.conf``), then
    ``/etc/nccl.conf`` (``/etc/rccl.conf``), the first time they read a parameter, and set each line with
    ``setenv(..., 0)``: the process environment wins over the files, and an earlier file over a later one.
    Values are taken literally (no quotes, no trimming). Only NCCL_*/RCCL_* variables are written: gloo reads
    GLOO_SOCKET_IFNAME and the ROCm runtime reads HSA_* before NCCL/RCCL load the file, so those are listed
    in a comment and must be in the ranks' environment. Comment lines never contain ``=``: older RCCL parses
    every line with one.
    """
    _check_env(env)
    text = header or 'NCCL/RCCL settings written by trainops.multinode'
    lines = ['# %s' % line.replace('=', ':') for line in text.splitlines()]
    skipped = sorted(v for v in env if not v.startswith(CONF_PREFIXES))
    if skipped:
        lines.append('# not read from this file, set them in the environment: %s' % ', '.join(skipped))
    for var in sorted(env):
        if var.startswith(CONF_PREFIXES):
            lines.append('%s=%s' % (var, env[var]))
    return '\n'.join(lines) + '\n'
