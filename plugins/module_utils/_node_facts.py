# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Node facts for trainops.multinode: GPUs, RDMA devices and the network interface that reaches the master.

Everything read from the filesystem goes through ``root`` so tests run on fake sysfs/procfs trees;
every command goes through ``Runner`` (``run`` and ``which``) so tests can replace it.

GPUs and RDMA devices are read from procfs/sysfs first. The vendor tools (``nvidia-smi``, ``amd-smi``,
``rocm-smi``) only fill what the files cannot tell (GPU interconnect, a missing model or driver version)
and only when they are installed; a tool that is missing, fails or times out never fails the facts.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import re

# the program run with the ranks' interpreter (its source, with python -c): imported so that AnsiballZ packs it
from ansible_collections.trainops.multinode.plugins.module_utils import _kernel_network, _torch_probe
from ansible_collections.trainops.multinode.plugins.module_utils._files import module_source


class NodeFactsError(Exception):
    """A failure that the module reports with ``fail_json``."""


TOOL_TIMEOUT = 30
"""Seconds a vendor tool may run (through ``timeout(1)`` when it exists) before it is abandoned."""

TOOL_DIRS = ['/opt/rocm/bin']
"""Where vendor tools are looked for besides ``PATH`` (ROCm does not always link its tools into ``/usr/bin``)."""


class Runner:
    """Runs commands; the one place tests replace.

    ``run(argv)`` returns ``(rc, stdout, stderr)``; ``which(name)`` returns the path of an executable or
    ``None``. A runner without ``which`` has no vendor tools.
    """

    def __init__(self, run_command, which=None):
        self._run_command = run_command
        self._which = which

    def run(self, argv):
        return self._run_command(argv)

    def which(self, name):
        return self._which(name) if self._which else None


# ------------------------------------------------------------------------------------------------
# filesystem, always under root
# ------------------------------------------------------------------------------------------------

_path = _torch_probe.path_under
_read = _torch_probe.read_text
_listdir = _torch_probe.list_dir
_natural_key = _torch_probe.natural_key


def _exists(root, *parts):
    return os.path.exists(_path(root, *parts))


def _link_name(root, *parts):
    """The last component of a symlink's target (``device/driver`` -> ``mlx5_core``), or None."""
    try:
        return os.path.basename(os.readlink(_path(root, *parts)).rstrip('/')) or None
    except (IOError, OSError):
        return None


_BDF = re.compile(r'^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$')


def _pci_id_of(root, *parts):
    """The PCI bus id of the nearest PCI device a sysfs ``device`` link leads to, or None."""
    path = _path(root, *parts)
    if not os.path.lexists(path):
        return None
    for component in reversed(os.path.realpath(path).split(os.sep)):
        if _BDF.match(component):
            return component
    return None


def _properties(text):
    """``key value`` lines of a kfd topology ``properties`` file, values as integers."""
    props = {}
    for line in (text or '').splitlines():
        fields = line.split()
        if len(fields) == 2:
            try:
                props[fields[0]] = int(fields[1])
            except ValueError:
                continue
    return props


def _kernel_symbols(root, wanted):
    """Which of the ``wanted`` symbols /proc/kallsyms lists (names are visible without root)."""
    found = set()
    try:
        with open(_path(root, 'proc/kallsyms')) as handle:
            for line in handle:
                fields = line.split()
                if len(fields) >= 3 and fields[2] in wanted:
                    found.add(fields[2])
                    if len(found) == len(wanted):
                        break
    except (IOError, OSError, UnicodeDecodeError):
        pass
    return found


# ------------------------------------------------------------------------------------------------
# commands
# ------------------------------------------------------------------------------------------------

def _json(runner, argv):
    try:
        rc, out, err = runner.run(argv)
    except OSError as exc:
        raise NodeFactsError('{0} could not run: {1}'.format(' '.join(argv), exc)) from exc
    if rc != 0:
        raise NodeFactsError('{0} failed (rc={1}): {2}'.format(' '.join(argv), rc, (err or out).strip()))
    try:
        return json.loads(out or '[]')
    except ValueError as exc:
        raise NodeFactsError('cannot parse the output of {0}: {1}'.format(' '.join(argv), exc))


def _which(runner, name):
    which = getattr(runner, 'which', None)
    return which(name) if which else None


def _tool(runner, argv, warnings, quiet=False):
    """Stdout of a vendor tool, or None when it is not installed, fails or times out (with a warning)."""
    path = _which(runner, argv[0])
    if not path:
        return None
    command = [path] + list(argv[1:])
    timeout = _which(runner, 'timeout')
    if timeout:
        command = [timeout, '-k', '5', str(TOOL_TIMEOUT)] + command
    try:
        rc, out, err = runner.run(command)
    except OSError as exc:
        rc, out, err = 127, '', str(exc)
    if rc != 0:
        if not quiet:
            reason = 'timed out after {0}s'.format(TOOL_TIMEOUT) if timeout and rc in (124, 137) else \
                'failed (rc={0})'.format(rc)
            detail = ' '.join((err or out or '').split())[:300]
            warnings.append('{0} {1}{2}; its facts are left out'.format(' '.join(argv), reason,
                                                                        ': ' + detail if detail else ''))
        return None
    return _ANSI_ESCAPE.sub('', out or '')


# nvidia-smi 580 underlines the header row of ``topo -m`` with terminal escapes even when its output is a pipe
_ANSI_ESCAPE = re.compile(r'\x1b\[[0-9;?]*[A-Za-z]')


def _tool_json(runner, argv, warnings):
    out = _tool(runner, argv, warnings)
    if out is None:
        return None
    try:
        return json.loads(out)
    except ValueError:
        warnings.append('cannot parse the JSON output of {0}; its facts are left out'.format(' '.join(argv)))
        return None


def _json_values(data, key_matches):
    """Every scalar value, anywhere in ``data``, whose key satisfies ``key_matches``."""
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, (dict, list)):
                yield from _json_values(value, key_matches)
            elif key_matches(str(key)):
                yield value
    elif isinstance(data, list):
        for item in data:
            yield from _json_values(item, key_matches)


def _link_kind(values):
    """xgmi when a GPU pair is linked by XGMI, pcie when the pairs are only PCIe, else unknown."""
    values = set(str(v).upper() for v in values)
    if 'XGMI' in values:
        return 'xgmi'
    if 'PCIE' in values:
        return 'pcie'
    return 'unknown'


def _normalize_bdf(bus_id):
    """``00000000:1B:00.0`` (nvidia-smi) -> ``0000:1b:00.0`` (sysfs)."""
    bus_id = (bus_id or '').strip().lower()
    domain, sep, rest = bus_id.partition(':')
    if not sep:
        return None
    bdf = '{0}:{1}'.format(domain[-4:].rjust(4, '0'), rest)
    return bdf if _BDF.match(bdf) else None


# ------------------------------------------------------------------------------------------------
# GPUs
# ------------------------------------------------------------------------------------------------

_NVRM_VERSION = re.compile(r'Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+)+)')
_AMDGPU_IDS = ('usr/share/libdrm/amdgpu.ids', 'opt/amdgpu/share/libdrm/amdgpu.ids')
_KFD_NODES = 'sys/class/kfd/kfd/topology/nodes'
_IOLINK_PCIE = 2
_IOLINK_XGMI = 11


def _nvidia_driver(root):
    """(driver version, open kernel module) from /proc/driver/nvidia/version, else /sys/module/nvidia/version."""
    nvrm = [line for line in (_read(root, 'proc/driver/nvidia/version') or '').splitlines()
            if line.startswith('NVRM version:')]
    version, open_module = None, False
    if nvrm:
        match = _NVRM_VERSION.search(nvrm[0])
        version = match.group(1) if match else None
        open_module = 'Open Kernel Module' in nvrm[0]
    return version or _read(root, 'sys/module/nvidia/version') or None, open_module


def _nvidia_inventory(root):
    base = 'proc/driver/nvidia/gpus'
    pci_ids = sorted(_listdir(root, base))
    if not pci_ids:
        return None
    models = []
    for bus_id in pci_ids:
        info = _read(root, base, bus_id, 'information') or ''
        model = [line.split(':', 1)[1].strip() for line in info.splitlines() if line.startswith('Model:')]
        models.append(model[0] if model and model[0] else None)
    return dict(vendor='nvidia', count=len(pci_ids), pci_ids=pci_ids, models=models, names=list(models),
                driver_version=_nvidia_driver(root)[0], sources=['procfs'], interconnect=None)


def _kfd_gpu_nodes(root):
    """The kfd topology nodes that are GPUs (gpu_id not 0), with their properties and links."""
    nodes = []
    for name in sorted((n for n in _listdir(root, _KFD_NODES) if n.isdigit()), key=int):
        node = os.path.join(_KFD_NODES, name)
        gpu_id = _read(root, node, 'gpu_id')
        if not gpu_id or not gpu_id.isdigit() or int(gpu_id) == 0:
            continue
        links = []
        for kind in ('io_links', 'p2p_links'):
            for link in _listdir(root, node, kind):
                props = _properties(_read(root, node, kind, link, 'properties'))
                if 'type' in props and 'node_to' in props:
                    links.append((props['type'], props['node_to']))
        nodes.append(dict(id=int(name), props=_properties(_read(root, node, 'properties')), links=links))
    return nodes


def _kfd_pci_id(props):
    """PCI bus id of a kfd node: location_id is PCI_DEVID(bus, devfn) (partition id in bits 31:28), plus domain."""
    location = props.get('location_id', 0) & 0xffff
    if not location:
        return None
    return '{0:04x}:{1:02x}:{2:02x}.{3:x}'.format(props.get('domain', 0), location >> 8, (location >> 3) & 0x1f,
                                                  location & 0x7)


def _hex(text):
    try:
        return int(text, 16)
    except (TypeError, ValueError):
        return None


def _amdgpu_ids(root):
    """libdrm's table of marketing names: {(device id, revision): name}."""
    for path in _AMDGPU_IDS:
        text = _read(root, path)
        if not text:
            continue
        names = {}
        for line in text.splitlines():
            fields = [f.strip() for f in line.split(',', 2)]
            if line.startswith('#') or len(fields) != 3:
                continue
            device, revision = _hex(fields[0]), _hex(fields[1])
            if device is not None and revision is not None and fields[2]:
                names.setdefault((device, revision), fields[2])
        return names
    return {}


def _compute_units(props):
    """Compute units of a kfd node: simd_count / simd_per_cu (304 on an MI300X, 38 per CPX partition)."""
    simds, per_cu = props.get('simd_count'), props.get('simd_per_cu')
    return simds // per_cu if isinstance(simds, int) and isinstance(per_cu, int) and per_cu > 0 else None


def _gfx_name(version):
    """gfx_target_version 90402 -> gfx942, 90010 -> gfx90a."""
    if not version:
        return None
    return 'gfx{0}{1:x}{2:x}'.format(version // 10000, (version // 100) % 100, version % 100)


def _amd_inventory(root):
    nodes = _kfd_gpu_nodes(root)
    if not nodes or not _exists(root, 'dev/kfd'):
        return None
    ids = None
    pci_ids, names, gfx, units = [], [], [], []
    for node in nodes:
        props = node['props']
        units.append(_compute_units(props))
        bus_id = _kfd_pci_id(props)
        pci_dir = os.path.join('sys/bus/pci/devices', bus_id) if bus_id else None
        device = _hex(_read(root, pci_dir, 'device')) if pci_dir else None
        revision = _hex(_read(root, pci_dir, 'revision')) if pci_dir else None
        if device is None:
            device = props.get('device_id')
        name = None
        if device:
            ids = _amdgpu_ids(root) if ids is None else ids
            name = ids.get((device, revision if revision is not None else 0))
        if not name and pci_dir:
            name = _read(root, pci_dir, 'product_name') or None
        pci_ids.append(bus_id)
        names.append(name)
        gfx.append(_gfx_name(props.get('gfx_target_version')))
    if None in pci_ids:
        pci_ids = []
    return dict(vendor='amd', count=len(nodes), pci_ids=pci_ids, names=names, gfx=gfx,
                compute_units=units if None not in units else [],
                models=[n or g for n, g in zip(names, gfx)], driver_version=_read(root, 'sys/module/amdgpu/version'),
                sources=['kfd-topology'], interconnect=_kfd_interconnect(nodes))


def _kfd_interconnect(nodes):
    """xgmi/pcie from the io_links/p2p_links between GPU nodes; a shared XGMI hive_id also means xgmi."""
    if len(nodes) < 2:
        return None
    gpu_ids = set(node['id'] for node in nodes)
    types = set(kind for node in nodes for kind, to in node['links'] if to in gpu_ids and to != node['id'])
    if _IOLINK_XGMI in types:
        return 'xgmi'
    hives = [node['props'].get('hive_id', 0) for node in nodes]
    if all(hives) and len(set(hives)) < len(hives):
        return 'xgmi'
    if types and types <= set([_IOLINK_PCIE]):
        return 'pcie'
    return None


def _gpu_inventory(root):
    inventory = _nvidia_inventory(root) or _amd_inventory(root)
    if inventory is None:
        inventory = dict(vendor='none', count=0, pci_ids=[], models=[], names=[], driver_version=None, sources=[],
                         interconnect=None)
    return inventory


def gpu_facts(root='/'):
    """GPU vendor, count, PCI ids and models from procfs/sysfs alone (no command is run).

    NVIDIA from /proc/driver/nvidia/gpus; AMD from the kfd topology (with /dev/kfd), PCI ids from each node's
    location_id/domain, models from libdrm's amdgpu.ids or the card's product_name, else its gfx target.
    """
    inventory = _gpu_inventory(root)
    return dict(vendor=inventory['vendor'], count=inventory['count'], pci_ids=list(inventory['pci_ids']),
                models=list(inventory['models']))


def _nvidia_smi_gpus(runner, warnings, quiet=False):
    """[(pci id, name, driver version)] from nvidia-smi, or None."""
    out = _tool(runner, ['nvidia-smi', '--query-gpu=pci.bus_id,name,driver_version', '--format=csv,noheader'],
                warnings, quiet)
    if out is None:
        return None
    rows = []
    for line in out.splitlines():
        fields = [f.strip() for f in line.split(',')]
        if len(fields) >= 3 and _normalize_bdf(fields[0]):
            rows.append((_normalize_bdf(fields[0]), fields[1] or None, fields[-1] or None))
    return rows


def _topo_matrix_kind(text):
    """nvlink when a GPU pair of ``nvidia-smi topo -m`` is NV<n>, pcie when every pair is a PCIe/SMP path."""
    columns, cells = 0, []
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if not columns and re.match(r'^GPU\d+$', fields[0]) and line[:1].isspace():
            columns = len([f for f in fields if re.match(r'^GPU\d+$', f)])
        elif columns and re.match(r'^GPU\d+$', fields[0]):
            cells.extend(c for c in fields[1:1 + columns] if c != 'X')
    if any(re.match(r'^NV\d+$', c) for c in cells):
        return 'nvlink'
    if cells and all(c in ('PIX', 'PXB', 'PHB', 'NODE', 'SYS') for c in cells):
        return 'pcie'
    return 'unknown'


def _nvlink_status_kind(text):
    """nvlink when ``nvidia-smi nvlink -s`` shows an active link, pcie when it lists links and none is active."""
    links = [m.group(1) for m in re.finditer(r'^\s*Link \d+:\s*(.*)$', text, re.M)]
    if any('/s' in link for link in links):
        return 'nvlink'
    return 'pcie' if links else 'unknown'


def _nvidia_links(runner, warnings):
    """(type, source, whether nvidia-smi answered)."""
    answered = False
    for argv, kind_of in ((['nvidia-smi', 'topo', '-m'], _topo_matrix_kind),
                          (['nvidia-smi', 'nvlink', '-s'], _nvlink_status_kind)):
        out = _tool(runner, argv, warnings)
        if out is None:
            continue
        answered = True
        kind = kind_of(out)
        if kind != 'unknown':
            return kind, ' '.join(argv), answered
    return 'unknown', None, answered


def _nvidia_supplement(facts, runner, warnings):
    used = False
    if facts['driver_version'] is None or None in facts['models']:
        rows = _nvidia_smi_gpus(runner, warnings)
        if rows is not None:
            used = True
            by_id = dict((bus_id, (name, driver)) for bus_id, name, driver in rows)
            facts['models'] = [m or by_id.get(b, (None, None))[0] for m, b in zip(facts['models'], facts['pci_ids'])]
            facts['driver_version'] = facts['driver_version'] or next((d for _b, _n, d in rows if d), None)
    if facts['count'] > 1:
        kind, source, answered = _nvidia_links(runner, warnings)
        used = used or answered
        if source:
            facts['interconnect'] = dict(type=kind, source=source)
    if used:
        facts['sources'].append('nvidia-smi')


def _amd_smi_static(runner, warnings):
    data = _tool_json(runner, ['amd-smi', 'static', '--asic', '--bus', '--driver', '--json'], warnings)
    if isinstance(data, dict):
        data = data.get('gpu_data')
    if not isinstance(data, list):
        return None
    names, driver = [], None
    for gpu in data:
        if not isinstance(gpu, dict):
            continue
        bus, asic, drv = [gpu.get(k) if isinstance(gpu.get(k), dict) else {} for k in ('bus', 'asic', 'driver')]
        names.append(((bus.get('bdf') or '').lower() or None, asic.get('market_name')))
        driver = driver or drv.get('version') or drv.get('driver_version')
    return names, driver


def _rocm_smi_static(runner, warnings):
    data = _tool_json(runner, ['rocm-smi', '--showproductname', '--showbus', '--showdriverversion', '--json'],
                      warnings)
    if not isinstance(data, dict):
        return None
    names = []
    for key in sorted((k for k in data if k.startswith('card')), key=_natural_key):
        card = dict((str(k).lower(), v) for k, v in data[key].items()) if isinstance(data[key], dict) else {}
        names.append(((card.get('pci bus') or '').lower() or None, card.get('card series')))
    system = data.get('system') if isinstance(data.get('system'), dict) else {}
    return names, dict((str(k).lower(), v) for k, v in system.items()).get('driver version')


_AMD_TOOLS = (
    ('amd-smi', _amd_smi_static, ['amd-smi', 'topology', '--json'], lambda key: key.lower() in ('type', 'link_type')),
    ('rocm-smi', _rocm_smi_static, ['rocm-smi', '--showtopotype', '--json'], lambda key: 'link type' in key.lower()),
)


def _known(value):
    return value not in (None, '', 'N/A')


def _amd_supplement(facts, inventory, runner, warnings):
    names = list(inventory['names'])
    for tool, static, topology, key_matches in _AMD_TOOLS:
        need_static = None in names or facts['driver_version'] is None
        need_links = facts['count'] > 1 and facts['interconnect']['type'] == 'unknown'
        if not (need_static or need_links) or not _which(runner, tool):
            continue
        used = False
        info = static(runner, warnings) if need_static else None
        if info is not None:
            used = True
            reported, driver = info
            by_id = dict((bus_id, name) for bus_id, name in reported if bus_id and _known(name))
            in_order = [name for _b, name in reported]
            for index, name in enumerate(names):
                if name is None and facts['pci_ids']:
                    names[index] = by_id.get(facts['pci_ids'][index])
                elif name is None and len(in_order) == len(names) and _known(in_order[index]):
                    names[index] = in_order[index]
            if facts['driver_version'] is None and _known(driver):
                facts['driver_version'] = driver
        data = _tool_json(runner, topology, warnings) if need_links else None
        if data is not None:
            used = True
            kind = _link_kind(_json_values(data, key_matches))
            if kind != 'unknown':
                facts['interconnect'] = dict(type=kind, source=tool)
        if used:
            facts['sources'].append(tool)
    facts['models'] = [name or gfx for name, gfx in zip(names, inventory['gfx'])]


def gpu_details(root='/', runner=None, warnings=None):
    """Every GPU fact: procfs/sysfs first, then the vendor tools (through ``runner``) for what those lack.

    Returns vendor, count, models, pci_ids, driver_version, interconnect (type, source) and sources.
    """
    warnings = [] if warnings is None else warnings
    inventory = _gpu_inventory(root)
    facts = dict(vendor=inventory['vendor'], count=inventory['count'], models=list(inventory['models']),
                 pci_ids=list(inventory['pci_ids']), driver_version=inventory['driver_version'] or None,
                 interconnect=dict(type='none', source=None), sources=list(inventory['sources']))
    if inventory.get('gfx'):
        facts['gfx'] = list(inventory['gfx'])  # the library's limits depend on it (RCCL MAXCHANNELS, warp size)
    if inventory.get('compute_units'):
        facts['compute_units'] = list(inventory['compute_units'])  # RCCL caps channels at it (a CPX partition)
    if facts['vendor'] == 'none':
        # no driver files: a GPU may still answer through nvidia-smi (a container without /proc/driver/nvidia)
        rows = _nvidia_smi_gpus(runner, warnings, quiet=True) if runner is not None else None
        if not rows:
            return facts
        facts.update(vendor='nvidia', count=len(rows), pci_ids=[r[0] for r in rows], models=[r[1] for r in rows],
                     driver_version=next((r[2] for r in rows if r[2]), None), sources=['nvidia-smi'])
    if facts['count'] > 1:
        kind = inventory['interconnect']
        facts['interconnect'] = dict(type=kind, source='kfd-topology') if kind else dict(type='unknown', source=None)
    if runner is None:
        return facts
    if facts['vendor'] == 'nvidia' and facts['sources'] == ['procfs']:
        _nvidia_supplement(facts, runner, warnings)
    elif facts['vendor'] == 'nvidia' and facts['count'] > 1:
        kind, source, _answered = _nvidia_links(runner, warnings)
        if source:
            facts['interconnect'] = dict(type=kind, source=source)
    elif facts['vendor'] == 'amd':
        _amd_supplement(facts, inventory, runner, warnings)
    return facts


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


# ------------------------------------------------------------------------------------------------
# network
# ------------------------------------------------------------------------------------------------

class _NoIpCommand(Exception):
    """The node has no ``ip`` (iproute2): the kernel is asked directly (_kernel_network)."""


def _ip_json(runner, argv):
    """``_json`` of an ``ip`` command; _NoIpCommand when the node has no ``ip`` to run."""
    try:
        return _json(runner, argv)
    except NodeFactsError as exc:
        if isinstance(exc.__cause__, OSError) and exc.__cause__.errno == errno.ENOENT:
            raise _NoIpCommand()
        raise


def interfaces(runner):
    """Every interface with its MTU, state and addresses (CIDR), from ``ip -j addr show``."""
    result = []
    for link in _ip_json(runner, ['ip', '-j', 'addr', 'show']):
        addrs = ['{0}/{1}'.format(a['local'], a['prefixlen']) for a in link.get('addr_info', [])
                 if a.get('family') in ('inet', 'inet6') and 'local' in a]
        result.append(dict(ifname=link.get('ifname'), mtu=link.get('mtu'), operstate=link.get('operstate'),
                           addresses=addrs))
    return result


def _reaches(iface, master):
    """True when one of the interface's networks contains the master's address."""
    for cidr in iface['addresses']:
        try:
            if master in ipaddress.ip_interface(cidr).network:
                return True
        except ValueError:
            continue
    return False


def network_facts(runner, master_addr, socket_ifname='auto', check_ifname=True):
    """The interface the kernel routes ``master_addr`` through (or the override), its address and MTU."""
    try:
        master = ipaddress.ip_address(master_addr)
    except ValueError:
        raise NodeFactsError('master_addr {0!r} is not an IP address; give the master address the nodes use '
                             '(trainops_master_addr)'.format(master_addr))
    ifaces, route, source = _interfaces_and_route(runner, master)
    by_name = dict((i['ifname'], i) for i in ifaces)
    routed = route.get('dev')
    if route.get('type') == 'local' and not master.is_loopback:
        # the master's address is this host's own: use the interface that carries it, not lo
        owners = [i['ifname'] for i in ifaces if any(ipaddress.ip_interface(c).ip == master for c in i['addresses'])]
        routed = owners[0] if owners else routed
    chosen = routed if socket_ifname in (None, '', 'auto') else socket_ifname
    if chosen not in by_name:
        raise NodeFactsError('interface {0!r} does not exist on this node (it has: {1}); fix the override '
                             'trainops_socket_ifname or set it to auto'.format(chosen, ', '.join(sorted(by_name))))
    iface = by_name[chosen]
    if check_ifname and chosen != routed and not _reaches(iface, master):
        raise NodeFactsError('interface {0!r} cannot reach the master {1}: its addresses {2} are not on the master\'s '
                             'network and the kernel routes the master through {3!r}; use {3!r}, set '
                             'trainops_socket_ifname to auto, or fix the override'.format(
                                 chosen, master, iface['addresses'] or 'none', routed))
    family = 4 if master.version == 4 else 6
    address = [c.split('/')[0] for c in iface['addresses'] if ipaddress.ip_interface(c).version == family]
    return dict(master_addr=str(master), routed_ifname=routed, route_src=route.get('prefsrc'), ifname=chosen,
                address=address[0] if address else None, mtu=iface['mtu'], operstate=iface['operstate'],
                overridden=chosen != routed, interfaces=ifaces, source=source)


def _interfaces_and_route(runner, master):
    """(interfaces, the route to ``master``, what told): ``ip -j``, or the kernel asked directly on a node without ip."""
    try:
        ifaces = interfaces(runner)
        route = _ip_json(runner, ['ip', '-j', 'route', 'get', str(master)])
        return ifaces, (route[0] if route else {}), 'ip'
    except _NoIpCommand:
        pass
    ifaces = _kernel_network.interfaces()
    try:
        return ifaces, _kernel_network.route_get(master, ifaces), 'kernel (no ip command on the node)'
    except _kernel_network.KernelNetworkError as exc:
        raise NodeFactsError(str(exc))


def default_route_ifnames(root='/'):
    """Interfaces that carry a default route (IPv4 /proc/net/route, IPv6 /proc/net/ipv6_route), in file order."""
    names = []
    for line in (_read(root, 'proc/net/route') or '').splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[1] == '00000000' and fields[7] == '00000000' and fields[0] not in names:
            names.append(fields[0])
    for line in (_read(root, 'proc/net/ipv6_route') or '').splitlines():
        fields = line.split()
        if len(fields) >= 10 and fields[0] == '0' * 32 and fields[1] == '00' and fields[9] != 'lo' \
                and fields[9] not in names:
            names.append(fields[9])
    return names


# ------------------------------------------------------------------------------------------------
# NCCL / RCCL library and net plugins, read where the ranks run (plugins/module_utils/_torch_probe.py)
# ------------------------------------------------------------------------------------------------

ROCM_RCCL = _torch_probe.ROCM_RCCL
net_plugin_identity = _torch_probe.net_plugin_identity
_TEXT_LIMIT = 300


def interpreter_probe(runner, python, import_torch=False, prefix=None, library=None, root='/'):
    """Run _torch_probe.py with the ranks' interpreter (``prefix``: in their container, e.g. ``['docker', 'exec',
    'trainops-train']``); its JSON as a dict, ``error`` saying what went wrong. ``library``: the GPU vendor whose
    NCCL/RCCL to look for; ``root`` (tests) is passed on only when nothing runs in a container."""
    argv = list(prefix or []) + [python, '-c', module_source(_torch_probe)]
    argv += [_torch_probe.IMPORT_FLAG] if import_torch else []
    argv += [_torch_probe.LIBRARY_FLAG, library] if library in ('nvidia', 'amd') else []
    argv += [_torch_probe.ROOT_FLAG, root] if root not in (None, '/') and not prefix else []
    try:
        rc, out, err = runner.run(argv)
    except (OSError, ValueError) as exc:
        return dict(python=None, version=None, location=None, imported=False, error=str(exc))
    try:
        data = json.loads(out or '')
        if not isinstance(data, dict):
            raise ValueError('not an object')
    except ValueError:
        lines = (err or out or '').strip().splitlines()
        data = dict(python=None, version=None, location=None, imported=False,
                    error='rc={0}: {1}'.format(rc, ' / '.join(lines[-3:]) or 'no output'))
    if rc != 0 and not data.get('error'):
        data['error'] = 'rc={0}: {1}'.format(rc, (err or '').strip()[-300:])
    return data


def _text(value):
    """A string the probe printed, bounded and printable (the node's output is checked, not trusted), else None."""
    if not isinstance(value, str) or not value or len(value) > _TEXT_LIMIT or not value.isprintable():
        return None
    return value


def _version_text(value):
    value = _text(value)
    return value if value and _torch_probe.VERSION.match(value) else None


def _library_names(value):
    return [b for b in value if isinstance(b, str) and _torch_probe.BUNDLED.match(b)] if isinstance(value, list) else []


def _checked_probe(data):
    """The probe's ``library`` findings with every field checked: what ``_torch_probe.choose_library`` reads."""
    torch = data.get('torch') if isinstance(data.get('torch'), dict) else None
    files = data.get('files') if isinstance(data.get('files'), dict) else None
    wheels = data.get('wheels') if isinstance(data.get('wheels'), dict) else {}
    found = dict(reported=_version_text(data.get('reported')), torch=None, files=None,
                 wheels=dict((k, _version_text(v)) for k, v in wheels.items()
                             if isinstance(k, str) and _torch_probe.NCCL_WHEEL.match(k) and _version_text(v)))
    if torch and _text(torch.get('version')):
        wheel = _text(torch.get('nccl_wheel'))
        found['torch'] = dict(version=_text(torch['version']),
                              nccl_wheel=wheel if wheel and _torch_probe.NCCL_WHEEL.match(wheel) else None,
                              bundled=_library_names(torch.get('bundled')),
                              replaced=_library_names(torch.get('replaced')))
    if files and _version_text(files.get('version')) and _text(files.get('file')):
        found['files'] = dict(version=files['version'], file=files['file'])
    found['runtime'] = _checked_runtime(data.get('runtime'))
    return found


def _checked_runtime(value):
    """The probe's ``runtime`` (the library the ranks' process maps and its ncclGetVersion), checked like the rest."""
    if not isinstance(value, dict):
        return None
    path, how = _text(value.get('path')), _text(value.get('how'))
    told_by = value.get('told_by') if value.get('told_by') in ('ncclGetVersion()', 'its version string') else None
    version = _version_text(value.get('version'))
    if version and path and path.startswith('/') and how and told_by:
        return dict(version=version, path=path, how=how, told_by=told_by)
    return dict(version=None, error=_text(str(value.get('error') or 'no version read')[:_TEXT_LIMIT]))


def _rocm_runtime(data, torch_rocm):
    """The ROCm runtime the ranks use: the one a ROCm wheel of torch bundles, else torch's HIP, else /opt/rocm."""
    if torch_rocm:
        return torch_rocm
    match = re.match(r'^(\d+\.\d+(?:\.\d+)?)', _text(data.get('hip')) or '')
    return match.group(1) if match else _version_text(data.get('rocm'))


def _plugins(data):
    plugin = _text(data.get('aws_ofi_nccl'))
    others = [dict(path=_text(o.get('path')), aws_ofi_nccl=False, version=_version_text(o.get('version')),
                   names=[n for n in o.get('names') if _text(n)] if isinstance(o.get('names'), list) else [])
              for o in data.get('other_net_plugins') or [] if isinstance(o, dict) and _text(o.get('path'))]
    return plugin if plugin and plugin.startswith('/') else None, others


def _dmabuf_options(value):
    if not isinstance(value, dict):
        return None
    return dict((k, value.get(k) is True) for k in _torch_probe.DMABUF_KERNEL_OPTIONS)


def _dmabuf_search(value):
    """The probe's ``dmabuf_kernel_search`` (the file RCCL >= 2.28 reads and the options in it), checked."""
    if not isinstance(value, dict):
        return None
    name = _text(value.get('file'))
    allowed = ['/' + p for p in _torch_probe.KERNEL_CONFIG_FILES] + ['/proc/kallsyms']
    if not name or not any(re.fullmatch(re.escape(a).replace(re.escape('{0}'), r'[^/\s]+'), name) for a in allowed):
        return None
    return dict(file=name, options=_dmabuf_options(value.get('options')))


def library_facts(root='/', gpu_vendor='none', probed=None, where='host'):
    """The NCCL (NVIDIA) or RCCL (AMD) the node's ranks load, the aws-ofi-nccl net plugin and, on AMD, the kernel
    options RCCL's dma-buf path reads, all as seen where the ranks run.

    ``probed`` is the ``library`` part of _torch_probe.py's output from the ranks' interpreter (``where``: ``host``
    or ``container <name>``); without it the host's files under ``root`` are read (node_facts without an
    interpreter). ``version`` is None when nothing tells; ``source`` says what told it, ``read_in`` where.
    """
    name = {'nvidia': 'nccl', 'amd': 'rccl'}.get(gpu_vendor)
    library = dict(name=name, version=None, source=None, read_in=where if probed is not None else 'host', rocm=None)
    data = probed if isinstance(probed, dict) else {}
    if probed is not None:
        found = _checked_probe(data)
        plugin, others = _plugins(data)
        kernel = _dmabuf_options(data.get('dmabuf_kernel'))
        search = _dmabuf_search(data.get('dmabuf_kernel_search'))
        if data.get('reported_error') and found['torch'] and not found['reported']:
            library['torch_error'] = _text(str(data['reported_error'])[:_TEXT_LIMIT])
        if found['runtime'] and found['runtime'].get('error'):
            library['runtime_error'] = found['runtime']['error']  # why the loaded library could not be asked
    else:
        found = dict(files=_torch_probe.library_from_files(root, gpu_vendor) if name else None)
        data = dict(rocm=_torch_probe.rocm_from_files(root))
        plugin, others = _torch_probe.net_plugins(root)
        kernel = _torch_probe.dmabuf_kernel_config(root) if gpu_vendor == 'amd' else None
        search = _torch_probe.dmabuf_kernel_search(root) if gpu_vendor == 'amd' else None
    if name:
        chosen = _torch_probe.choose_library(gpu_vendor, found)
        if chosen:
            library.update(chosen)
            if where != 'host' and probed is not None:
                library['source'] += ' (in %s)' % where
        files = found.get('files')
        if files and files['version'] != library['version']:
            # the library's files there that the ranks do not load (a host NCCL beside torch's own)
            library['not_loaded'] = dict(files, read_in=library['read_in'])
        torch = found.get('torch') or {}
        if gpu_vendor == 'amd':
            library['rocm'] = _rocm_runtime(data, _torch_probe.rocm_of_torch(torch.get('version')))
    library['aws_ofi_nccl'] = plugin
    if others and not plugin:
        library['other_net_plugins'] = others  # libnccl-net*.so files that are not aws-ofi-nccl (an HPC-X SHARP one)
    library['dmabuf_kernel'] = kernel
    library['dmabuf_kernel_search'] = search
    return library


def node_facts(runner, master_addr, socket_ifname='auto', check_ifname=True, root='/', warnings=None, probe=None,
               where='host'):
    """``trainops_node``: gpu, rdma, network and library facts. Tool problems are appended to ``warnings``.

    ``probe(vendor)`` runs _torch_probe.py with the ranks' interpreter (``interpreter_probe``), ``where`` they run
    (``host`` or ``container <name>``): the library facts and RCCL's dma-buf options come from there. Without it the
    host's files are read.
    """
    network = network_facts(runner, master_addr, socket_ifname, check_ifname)
    network['default_ifnames'] = default_route_ifnames(root)
    gpu = gpu_details(root, runner, warnings)
    probed = result = None
    if probe is not None and gpu['vendor'] in ('nvidia', 'amd'):
        result = probe(gpu['vendor'])
        probed = result.get('library') if isinstance(result, dict) and isinstance(result.get('library'), dict) else {}
    library = library_facts(root, gpu['vendor'], probed, where)
    if probed == {}:
        library['probe_error'] = _text(str((result or {}).get('error') or 'no answer')[-_TEXT_LIMIT:])
    # RCCL's dma-buf options, read where the library was: facts of the GPUDirect path (rdma.gpudirect), not the library
    rdma = rdma_facts(root, gpu['vendor'], (library.pop('dmabuf_kernel'), library['read_in'],
                                            library.pop('dmabuf_kernel_search')))
    return dict(gpu=gpu, rdma=rdma, network=network, pci=pci_topology(root, gpu['pci_ids'], rdma['devices']),
                library=library)
