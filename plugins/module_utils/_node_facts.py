# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Node facts for trainops.multinode: GPUs and the network interface that reaches the master.

Everything read from the filesystem goes through ``root`` so tests run on fake sysfs/procfs trees;
every command goes through ``Runner.run`` so tests can replace it.
"""

from __future__ import annotations

import glob
import ipaddress
import json
import os


class NodeFactsError(Exception):
    """A failure that the module reports with ``fail_json``."""


class Runner:
    """Runs commands; the one place tests replace. ``run(argv)`` returns (rc, stdout, stderr)."""

    def __init__(self, run_command):
        self._run_command = run_command

    def run(self, argv):
        return self._run_command(argv)


def _path(root, *parts):
    return os.path.join(root, *[p.lstrip('/') for p in parts])


def _read(root, *parts):
    try:
        with open(_path(root, *parts)) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


def gpu_facts(root='/'):
    """GPU vendor and count from procfs/sysfs: NVIDIA from /proc/driver/nvidia/gpus, AMD from kfd topology."""
    nvidia = sorted(glob.glob(_path(root, 'proc/driver/nvidia/gpus/*')))
    if nvidia:
        models = []
        for gpu in nvidia:
            info = _read(gpu, 'information') or ''
            model = [line.split(':', 1)[1].strip() for line in info.splitlines() if line.startswith('Model:')]
            models.append(model[0] if model else None)
        return dict(vendor='nvidia', count=len(nvidia), pci_ids=[os.path.basename(g) for g in nvidia], models=models)
    amd = []
    for node in sorted(glob.glob(_path(root, 'sys/class/kfd/kfd/topology/nodes/*'))):
        gpu_id = _read(node, 'gpu_id')
        if gpu_id and gpu_id != '0':
            amd.append(os.path.basename(node))
    if amd and os.path.exists(_path(root, 'dev/kfd')):
        return dict(vendor='amd', count=len(amd), pci_ids=[], models=[])
    return dict(vendor='none', count=0, pci_ids=[], models=[])


def _json(runner, argv):
    rc, out, err = runner.run(argv)
    if rc != 0:
        raise NodeFactsError('{0} failed (rc={1}): {2}'.format(' '.join(argv), rc, (err or out).strip()))
    try:
        return json.loads(out or '[]')
    except ValueError as exc:
        raise NodeFactsError('cannot parse the output of {0}: {1}'.format(' '.join(argv), exc))


def interfaces(runner):
    """Every interface with its MTU, state and addresses (CIDR), from ``ip -j addr show``."""
    result = []
    for link in _json(runner, ['ip', '-j', 'addr', 'show']):
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
    ifaces = interfaces(runner)
    by_name = dict((i['ifname'], i) for i in ifaces)
    route = _json(runner, ['ip', '-j', 'route', 'get', str(master)])
    route = route[0] if route else {}
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
                overridden=chosen != routed, interfaces=ifaces)


def node_facts(runner, master_addr, socket_ifname='auto', check_ifname=True, root='/'):
    return dict(gpu=gpu_facts(root), network=network_facts(runner, master_addr, socket_ifname, check_ifname))
