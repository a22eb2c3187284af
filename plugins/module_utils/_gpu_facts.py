# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Which GPUs a node has (vendor, model, driver, PCI ids, interconnect): read from procfs/sysfs first, the vendor
tools (``nvidia-smi``, ``amd-smi``, ``rocm-smi``) only fill what the files cannot tell (module_utils/_node_facts.py)."""

from __future__ import annotations

import os
import re

from ansible_collections.trainops.multinode.plugins.module_utils._facts_io import (
    _exists, _json_values, _link_kind, _listdir, _natural_key, _normalize_bdf, _properties, _read, _tool, _tool_json,
    _which)


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
