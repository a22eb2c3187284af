# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The cross-node check of the per-host results of deciders.compute (``check_cluster``). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.facts import _natural


# --- across nodes ----------------------------------------------------------------------------------

def _table(rows, headers):
    widths = [max(len(str(r[i])) for r in [headers] + rows) for i in range(len(headers))]
    lines = ['  '.join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [headers] + rows]
    lines.insert(1, '  '.join('-' * w for w in widths))
    return '\n'.join(lines)


def _gloo_count(res):
    value = (res.get('env') or {}).get('GLOO_SOCKET_IFNAME')
    return len([n for n in str(value).split(',') if n.strip()]) if value else None


def check_cluster(per_host):
    """Cross-node check of ``{host: compute() result}``: transports, link layers and vendors must agree, and every
    node must give gloo the same number of interfaces (torch: "all processes specify the same number").

    Returns ``dict(errors=[str], warnings=[str], table=str, transports={host: transport})``; the table shows each
    node's library, transport, interface and ports, then the ports the automatic choice left out and why.
    """
    errors, warnings, rows, transports = [], [], [], {}
    hosts = sorted(per_host or {}, key=_natural)
    valid = {}
    for host in hosts:
        res = per_host[host]
        if not isinstance(res, Mapping) or res.get('transport') not in ('rdma', 'efa', 'tcp'):
            errors.append('%s: no NCCL environment was computed for this host' % host)
            rows.append([host, '?', '?', '?', '?', '?', '?'])
            continue
        valid[host] = res
        transports[host] = res['transport']
        env = res.get('env') or {}
        lib = res.get('library') or {}
        rows.append([host, res.get('vendor') or '?',
                     '%s %s' % ((lib.get('name') or '-').upper(), lib.get('version') or '?') if lib.get('name') else '-',
                     res['transport'] + (' (%s)' % res['link_layer'] if res['transport'] == 'rdma' and
                                         res.get('link_layer') else ''),
                     env.get('NCCL_SOCKET_IFNAME', '(unset)'),
                     env.get('NCCL_IB_HCA', '-') if res['transport'] == 'rdma' else
                     ', '.join(res.get('hcas') or []) or '-',
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
    gloo = {}
    for host, res in valid.items():
        gloo.setdefault(_gloo_count(res), []).append(host)
    if len(gloo) > 1:
        errors.append('the nodes give gloo different numbers of interfaces in GLOO_SOCKET_IFNAME (%s): gloo pairs '
                      'the devices of every process by position and needs the same number on all of them' % '; '.join(
                          '%s on %s' % (n if n is not None else 'unset', ', '.join(sorted(h, key=_natural)))
                          for n, h in sorted(gloo.items(), key=lambda i: -1 if i[0] is None else i[0])))
    versions = {}
    for host, res in valid.items():
        lib = res.get('library') or {}
        if lib.get('name') and lib.get('version'):
            versions.setdefault('%s %s' % (lib['name'].upper(), lib['version']), []).append(host)
    if len(versions) > 1:
        warnings.append('the nodes load different library versions (%s): NCCL/RCCL expect the same version on every '
                        'rank, and the GID and knob rules differ between them' % '; '.join(
                            '%s on %s' % (v, ', '.join(sorted(h, key=_natural))) for v, h in sorted(versions.items())))
    counts = {}
    for host, res in rdma.items():
        counts.setdefault(len(res.get('hcas') or []), []).append(host)
    if len(counts) > 1:
        warnings.append('the RDMA nodes use different numbers of HCA ports (%s): the nodes with fewer limit the '
                        'bandwidth of the whole job' % '; '.join('%d on %s' % (n, ', '.join(sorted(h, key=_natural)))
                                                                 for n, h in sorted(counts.items())))
    table = _table(rows, ['host', 'vendor', 'library', 'transport', 'NCCL_SOCKET_IFNAME', 'ports', 'status'])
    notes = ['%s: %s' % (host, valid[host]['topology']) for host in hosts
             if host in valid and valid[host]['transport'] == 'rdma' and valid[host].get('topology')]
    notes += ['%s: left out %s (%s)' % (host, key, why) for host in hosts if host in valid
              for key, why in sorted((valid[host].get('left_out') or {}).items(), key=lambda i: _natural(i[0]))]
    if notes:
        table += '\n' + '\n'.join(notes)
    return dict(errors=errors, warnings=warnings, table=table, transports=transports)
