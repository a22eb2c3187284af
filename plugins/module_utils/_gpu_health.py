# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The GPUs' own health, where a vendor tool tells it (docs/health.md "Every node's accelerator and NIC state"):
the memory errors of ``nvidia-smi -q`` (ECC, retired pages, remapped rows), the Xid lines of the kernel log where the
node's user may read it, the RAS error counts of ``amd-smi``. Pure parsers of the tools' text, and :func:`gpu_tool_checks`
that runs them through a ``_facts_io.Runner`` (the module node_health's); a tool that is missing or fails adds
nothing.
"""

from __future__ import annotations

import re

from ansible_collections.trainops.multinode.plugins.module_utils import _facts_io

NVIDIA_SMI_Q = ['nvidia-smi', '-q', '-d', 'ECC,PAGE_RETIREMENT,ROW_REMAPPER']
"""The memory error sections only; a driver that does not know one of them fails it, and the full ``-q`` is read."""
KERNEL_LOGS = (['dmesg'], ['journalctl', '-k', '-b', '--no-pager', '-q'])
"""The kernel log of this boot, the first one readable (``dmesg`` is refused to users where kernel.dmesg_restrict=1)."""
AMD_SMI_ECC = ['amd-smi', 'metric', '--ecc', '--json']

#: Xid codes that mean the GPU (or its NVLink) needs a reset or a replacement: NVIDIA's Xid catalogue - 48 double bit
#: ECC error, 61/62 internal micro-controller breakpoint/halt, 63/64 row remapping (64: the remapping failed), 74
#: NVLink error, 79 fallen off the bus, 92 high single-bit ECC error rate, 94/95 contained/uncontained ECC error,
#: 119/120 GSP errors, 140 unrecovered ECC error. Other Xids (13, 31, 43, ...) are mostly an application's faults:
#: shown only.
BAD_XIDS = frozenset((48, 61, 62, 64, 74, 79, 92, 95, 119, 120, 140))
#: How many Xid lines one node reports at most (the newest).
XID_LINES = 20

_GPU_HEADER = re.compile(r'^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$')
_FIELD = re.compile(r'^(\s*)([^:]+?)\s*:\s*(.*?)\s*$')
_SECTION = re.compile(r'^(\s*)(\S.*?)\s*$')
_XID = re.compile(r'NVRM: Xid \(PCI:([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?\): (\d+),\s*(.*)$')


def bus_id(text):
    """``00000000:1B:00.0`` (nvidia-smi's 8-digit domain) as sysfs writes it: ``0000:1b:00.0``."""
    domain, rest = text.split(':', 1)
    return ('%04x:%s' % (int(domain, 16), rest)).lower()


def _count(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None  # N/A: no ECC on this GPU, or the driver does not count it


def parse_nvidia_smi_q(text):
    """``{bus id: {path: value}}`` from ``nvidia-smi -q``: each GPU's fields keyed by their section path, joined
    with ``/`` (``ECC Errors/Volatile/DRAM Uncorrectable``, ``Remapped Rows/Pending``)."""
    gpus, fields, stack = {}, None, []
    for line in (text or '').splitlines():
        header = _GPU_HEADER.match(line)
        if header:
            fields, stack = gpus.setdefault(bus_id(header.group(1)), {}), []
            continue
        if fields is None or not line.strip():
            continue
        field = _FIELD.match(line)
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if field and field.group(3) != '':
            fields['/'.join([entry[1] for entry in stack] + [field.group(2)])] = field.group(3)
        else:
            stack.append((indent, _SECTION.match(line).group(2).rstrip(':').strip()))
    return gpus


def _sum(fields, prefix, names):
    """The sum of the counts at ``prefix/<name>`` (any depth below prefix whose last part is in ``names``), None when
    none is a number."""
    values = [_count(v) for k, v in fields.items() if k.startswith(prefix + '/') and k.rsplit('/', 1)[-1] in names]
    values = [v for v in values if v is not None]
    return sum(values) if values else None


def _yes(fields, key):
    return (fields.get(key) or '').strip().lower() == 'yes'


def nvidia_judgment(gpus, ignore=()):
    """(problems, warnings) of ``parse_nvidia_smi_q``'s GPUs. Problems: uncorrectable ECC errors since the driver
    loaded (volatile: the GPU has not been reset since), a row remapping or page retirement pending (a reset is
    needed), a failed row remapping, the SRAM error threshold exceeded. Warnings: uncorrectable errors in the GPU's
    lifetime (aggregate), rows remapped or pages retired before (the memory's spare rows at work)."""
    problems, warnings = [], []
    for bus, fields in sorted(gpus.items()):
        if bus in ignore:
            continue
        name = 'GPU %s' % bus
        volatile = _sum(fields, 'ECC Errors/Volatile', ('DRAM Uncorrectable', 'SRAM Uncorrectable', 'SRAM Uncorrectable Parity',
                                                        'SRAM Uncorrectable SEC-DED'))
        # the older layout nests Single Bit / Double Bit with a Total each: only Double Bit is uncorrectable
        older = _sum(fields, 'ECC Errors/Volatile/Double Bit', ('Total', ))
        if older is not None:
            volatile = older
        if volatile:
            problems.append('%s %d uncorrectable ECC error(s) since the driver loaded' % (name, volatile))
        aggregate = _sum(fields, 'ECC Errors/Aggregate', ('DRAM Uncorrectable', 'SRAM Uncorrectable', 'SRAM Uncorrectable Parity',
                                                          'SRAM Uncorrectable SEC-DED'))
        older = _sum(fields, 'ECC Errors/Aggregate/Double Bit', ('Total', ))
        aggregate = older if older is not None else aggregate
        if aggregate and not volatile:
            warnings.append('%s %d uncorrectable ECC error(s) in its lifetime' % (name, aggregate))
        if _yes(fields, 'ECC Errors/Aggregate/SRAM Threshold Exceeded'):
            problems.append('%s SRAM error threshold exceeded' % name)
        if _yes(fields, 'Remapped Rows/Pending'):
            problems.append('%s row remapping pending (reset the GPU)' % name)
        if _yes(fields, 'Remapped Rows/Remapping Failure Occurred'):
            problems.append('%s row remapping failed' % name)
        remapped = _sum(fields, 'Remapped Rows', ('Correctable Error', 'Uncorrectable Error'))
        if remapped:
            warnings.append('%s %d row(s) remapped' % (name, remapped))
        if any(_yes(fields, 'Retired Pages/' + key) for key in ('Pending', 'Pending Page Blacklist', 'Pending Page Retirement')):
            problems.append('%s page retirement pending (reset the GPU)' % name)
        retired = _sum(fields, 'Retired Pages', ('Single Bit ECC', 'Double Bit ECC'))
        if retired:
            warnings.append('%s %d page(s) retired' % (name, retired))
    return problems, warnings


def parse_xids(text, limit=XID_LINES):
    """The Xid lines of a kernel log, newest last, at most ``limit``: ``[{pci, xid, text}]`` (``pci``: the GPU's bus
    id without its function, as the driver writes it, ``0000:1b:00``)."""
    found = []
    for line in (text or '').splitlines():
        match = _XID.search(line)
        if match:
            found.append(dict(pci=match.group(1).lower(), xid=int(match.group(2)), text=match.group(3)[:200]))
    return found[-limit:] if limit else found


def xid_judgment(xids, ignore=()):
    """(problems, warnings) of :func:`parse_xids`' lines, one line per GPU and Xid code: the codes of ``BAD_XIDS``
    are problems, the others warnings. A GPU bus id of ``ignore`` (``0000:1b:00.0``) leaves its lines out."""
    problems, warnings, seen = [], [], {}
    left_out = set(str(bus).lower().rsplit('.', 1)[0] for bus in ignore or ())
    for entry in xids:
        if entry['pci'] in left_out:
            continue
        key = (entry['pci'], entry['xid'])
        seen.setdefault(key, [0, entry['text']])
        seen[key][0] += 1
        seen[key][1] = entry['text']
    for (pci, xid), (times, last) in sorted(seen.items()):
        text = 'GPU %s Xid %d in the kernel log (%d time(s) this boot; the last: %s)' % (pci, xid, times, last)
        (problems if xid in BAD_XIDS else warnings).append(text)
    return problems, warnings


def _amd_entries(data):
    if isinstance(data, dict) and isinstance(data.get('gpu_data'), list):
        data = data['gpu_data']  # the wrapper of newer amd-smi releases
    return [entry for entry in data if isinstance(entry, dict)] if isinstance(data, list) else []


def amd_judgment(data):
    """(problems, warnings) of ``amd-smi metric --ecc --json``: each GPU's ``ecc`` counts since the driver loaded;
    uncorrectable ones are a problem, deferred ones (uncorrectable, their handling deferred) a warning. ``N/A``
    (no RAS on the GPU) counts nothing."""
    problems, warnings = [], []
    for entry in _amd_entries(data):
        ecc = entry.get('ecc') if isinstance(entry.get('ecc'), dict) else {}
        name = 'GPU %s' % entry.get('gpu', '?')
        uncorrectable = _count(ecc.get('total_uncorrectable_count'))
        deferred = _count(ecc.get('total_deferred_count'))
        if uncorrectable:
            problems.append('%s %d uncorrectable ECC error(s) since the driver loaded (amd-smi)' % (name, uncorrectable))
        if deferred:
            warnings.append('%s %d deferred ECC error(s) since the driver loaded (amd-smi)' % (name, deferred))
    return problems, warnings


def gpu_tool_checks(runner, vendor, ignore=()):
    """What the vendor tools tell of the node's GPUs (``vendor``: ``nvidia`` or ``amd``, node_facts'):
    ``dict(problems, warnings, sources)``; ``sources`` names what answered (``nvidia-smi -q``, ``kernel log``,
    ``amd-smi``). A tool that is not installed or fails adds nothing (its failure a warning, the kernel log's none: it
    is often not readable by the node's user)."""
    problems, warnings, sources = [], [], []
    ignore = set(str(bus).lower() for bus in ignore or ())
    if vendor == 'nvidia':
        text = _facts_io._tool(runner, NVIDIA_SMI_Q, [], quiet=True)
        if text is None:
            text = _facts_io._tool(runner, NVIDIA_SMI_Q[:2], warnings)
        if text is not None:
            sources.append('nvidia-smi -q')
            found, warned = nvidia_judgment(parse_nvidia_smi_q(text), ignore)
            problems += found
            warnings += warned
        for argv in KERNEL_LOGS:
            text = _facts_io._tool(runner, argv, [], quiet=True)
            if text:
                sources.append('kernel log')
                found, warned = xid_judgment(parse_xids(text), ignore)
                problems += found
                warnings += warned
                break
    elif vendor == 'amd':
        data = _facts_io._tool_json(runner, AMD_SMI_ECC, warnings)
        if data is not None:
            sources.append('amd-smi')
            found, warned = amd_judgment(data)
            problems += found
            warnings += warned
    return dict(problems=problems, warnings=warnings, sources=sources)
