# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node's interfaces and its route to the master asked of the kernel directly, for nodes without ``ip``.

Node facts read the network with iproute2's ``ip -j`` (``_node_facts.interfaces`` and ``network_facts``). Some GPU
machines have no iproute2: minimal VM images (a lent H200 VM had none) and slim containers. There the same facts
come from the kernel's own interfaces, in the shape ``ip -j`` gives them:

* the interfaces in index order (``socket.if_nameindex``), each with its MTU and operational state from
  ``/sys/class/net/<ifname>/`` (``ip`` prints the state in capitals, ``UNKNOWN`` for ``lo``);
* IPv4 addresses with ``SIOCGIFADDR``/``SIOCGIFNETMASK`` (the primary address of each interface only: secondary
  addresses, which ``ip`` also lists, are not seen this way), IPv6 addresses from ``/proc/net/if_inet6``;
* the route: a UDP socket connected to the master (``connect`` on a datagram socket sends nothing; the kernel picks
  the route and the source address, as ``ip route get`` reports them), the device being the interface that holds
  that source address (``lo`` when the master is this host's own address, as ``ip`` says ``type local`` then).

psutil would list addresses too, but a node's Python cannot be assumed to have it; the standard library can do this.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

SIOCGIFADDR = 0x8915
SIOCGIFNETMASK = 0x891b
_DISCARD_PORT = 9


class KernelNetworkError(Exception):
    """The kernel could not tell (no route to the master); the message says what was asked."""


def _read(root, *parts):
    try:
        with open(os.path.join(root, *parts)) as handle:
            return handle.read().strip()
    except (IOError, OSError, UnicodeDecodeError):
        return None


def ipv4_primary(ifname):
    """``['address/prefix']`` of the interface's primary IPv4 address, or ``[]``."""
    if fcntl is None:
        return []
    packed = struct.pack('256s', ifname.encode('utf-8')[:15])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            address = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, packed)[20:24]
            netmask = fcntl.ioctl(sock.fileno(), SIOCGIFNETMASK, packed)[20:24]
        except OSError:  # EADDRNOTAVAIL: no IPv4 address
            return []
    prefix = bin(struct.unpack('!I', netmask)[0]).count('1')
    return ['{0}/{1}'.format(socket.inet_ntoa(address), prefix)]


def ipv6_addresses(root='/'):
    """``{ifname: ['address/prefix', ...]}`` from ``/proc/net/if_inet6`` (address, index, prefix, scope, flags, name)."""
    result = {}
    for line in (_read(root, 'proc', 'net', 'if_inet6') or '').splitlines():
        fields = line.split()
        if len(fields) != 6 or len(fields[0]) != 32:
            continue
        try:
            address = ipaddress.IPv6Address(bytes.fromhex(fields[0]))
            prefix = int(fields[2], 16)
        except ValueError:
            continue
        result.setdefault(fields[5], []).append('{0}/{1}'.format(address, prefix))
    return result


def interfaces(root='/', names=None, ipv4=ipv4_primary):
    """Every interface as ``_node_facts.interfaces`` gives it from ``ip -j addr show``: ifname, mtu, operstate, addresses.

    ``names`` are the interface names in index order (default: the kernel's); ``ipv4(ifname)`` their IPv4 addresses.
    """
    if names is None:
        names = [name for _index, name in sorted(socket.if_nameindex())]
    inet6 = ipv6_addresses(root)
    result = []
    for name in names:
        mtu = _read(root, 'sys', 'class', 'net', name, 'mtu')
        state = _read(root, 'sys', 'class', 'net', name, 'operstate')
        result.append(dict(ifname=name, mtu=int(mtu) if mtu and mtu.isdigit() else None,
                           operstate=state.upper() if state else None,
                           addresses=list(ipv4(name)) + inet6.get(name, [])))
    return result


def route_source(master):
    """The source address the kernel would use to reach ``master`` (an ipaddress object)."""
    family = socket.AF_INET if master.version == 4 else socket.AF_INET6
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect((str(master), _DISCARD_PORT))
        except OSError as exc:
            raise KernelNetworkError('no route to the master {0}: {1}'.format(master, exc.strerror or exc))
        return sock.getsockname()[0].split('%')[0]


def route_get(master, ifaces, source=route_source):
    """``ip -j route get <master>``'s first entry: ``dev``, ``prefsrc`` and ``type`` (``local`` or ``unicast``)."""
    owned = dict()
    for iface in ifaces:
        for cidr in iface['addresses']:
            owned.setdefault(ipaddress.ip_interface(cidr).ip, iface['ifname'])
    if master in owned or master.is_loopback:
        return dict(dev='lo', prefsrc=str(master), type='local')
    src = ipaddress.ip_address(source(master))
    return dict(dev=owned.get(src), prefsrc=str(src), type='unicast')
