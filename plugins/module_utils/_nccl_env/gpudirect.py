# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The RDMA path's deciders, once the ports and the transport are chosen (network.py): the RoCE GID (``_gid``), EFA
(``_efa``) and GPUDirect RDMA with dma-buf (``_gpudirect``, ``_gdr``). Pure: no I/O. compute (deciders.py) calls them
in order."""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.core import _is_auto, _is_unset
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.facts import (
    _get, _gid_entry_problem, _gid_family, _gid_table, _gid_usable, _int, _library_label, _natural, _since,
    _version, nccl_gid_index,
)

GDR_LEVELS = ('LOC', 'PIX', 'PXB', 'PHB', 'SYS')

# Library facts, each checked against the sources named (docs/nccl.md has the list):
GID_PER_PORT_SINCE = (2, 21)
"""NCCL_IB_GID_INDEX defaults to -1 (select per port, ncclIbGetGidIndex) since NCCL 2.21.5; 0 before (net_ib.cc).
RCCL follows: 2.20.5 (ROCm 6.2) has 0, 2.21.5 (ROCm 6.3) has -1."""
RCCL_DMABUF_SEARCH_SINCE = (2, 28)
"""RCCL 2.28 and later read the kernel config from the first of /proc/config.gz (with zcat), /boot/config-<release>,
/usr/src, /usr/lib/modules/<release>/config, ... that opens, else the symbols in /proc/kallsyms, which containers see
(rocm-systems projects/rccl src/misc/rocmwrap.cc initOnceFunc; CHANGELOG "RCCL 2.28.3 for ROCm 7.11": "additional
paths when loading the RCCL DMABUF kernel configuration file"). Before, only /boot/config-<release>."""
RCCL_DMABUF_DEFAULT_ON = ((2, 28), (7, 12))
"""NCCL_DMABUF_ENABLE defaults to 1 from RCCL 2.28.3 for ROCm 7.12 (CHANGELOG "Changed": "NCCL_DMABUF_ENABLE now
defaults to 1 (previously 0)"; rocmwrap.cc NCCL_PARAM(DmaBufEnable, "DMABUF_ENABLE", 1)); ROCm 7.11 ships the same
RCCL 2.28.3 with 0, so 2.28.x needs the ROCm runtime to tell; 2.30 and later default to 1."""


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
