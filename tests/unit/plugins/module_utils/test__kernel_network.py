# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The network facts of a node without iproute2's ``ip``: the kernel asked directly, checked against ``ip`` itself."""

from __future__ import annotations

import errno
import ipaddress
import json
import shutil
import subprocess

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _kernel_network as kn
from ansible_collections.trainops.multinode.plugins.module_utils import _node_facts as nf

# /proc/net/if_inet6 as a node with a global and a link-local address on ens5 writes it
IF_INET6 = ('00000000000000000000000000000001 01 80 10 80       lo\n'
            'fd007700000000000000000000000012 02 40 00 80     ens5\n'
            'fe80000000000000021122fffe334455 02 40 20 80     ens5\n'
            'not-a-line\n')


def node_tree(tmp_path):
    for name, mtu, state in (('lo', 65536, 'unknown'), ('ens5', 9000, 'up'), ('docker0', 1500, 'down')):
        (tmp_path / 'sys' / 'class' / 'net' / name).mkdir(parents=True)
        (tmp_path / 'sys' / 'class' / 'net' / name / 'mtu').write_text('%d\n' % mtu)
        (tmp_path / 'sys' / 'class' / 'net' / name / 'operstate').write_text(state + '\n')
    (tmp_path / 'proc' / 'net').mkdir(parents=True)
    (tmp_path / 'proc' / 'net' / 'if_inet6').write_text(IF_INET6)
    return str(tmp_path)


V4 = {'lo': ['127.0.0.1/8'], 'ens5': ['10.77.0.12/24'], 'docker0': ['172.17.0.1/16']}


def test_interfaces_in_the_shape_ip_gives_them(tmp_path):
    ifaces = kn.interfaces(node_tree(tmp_path), names=['lo', 'ens5', 'docker0'], ipv4=lambda name: V4[name])
    assert ifaces == [
        dict(ifname='lo', mtu=65536, operstate='UNKNOWN', addresses=['127.0.0.1/8', '::1/128']),
        dict(ifname='ens5', mtu=9000, operstate='UP', addresses=['10.77.0.12/24', 'fd00:7700::12/64', 'fe80::211:22ff:fe33:4455/64']),
        dict(ifname='docker0', mtu=1500, operstate='DOWN', addresses=['172.17.0.1/16']),
    ]


def test_route_is_the_interface_holding_the_source_address_the_kernel_picks(tmp_path):
    ifaces = kn.interfaces(node_tree(tmp_path), names=['lo', 'ens5', 'docker0'], ipv4=lambda name: V4[name])
    assert kn.route_get(ipaddress.ip_address('10.77.0.11'), ifaces, source=lambda m: '10.77.0.12') == dict(
        dev='ens5', prefsrc='10.77.0.12', type='unicast')
    # the master is this host: ip says "local ... dev lo"; network_facts then uses the interface carrying it
    assert kn.route_get(ipaddress.ip_address('10.77.0.12'), ifaces, source=None)['type'] == 'local'
    assert kn.route_get(ipaddress.ip_address('127.0.0.1'), ifaces, source=None) == dict(dev='lo', prefsrc='127.0.0.1', type='local')


class NoIpRunner:
    """A node without iproute2: running ip fails as subprocess does when the program is missing."""

    def run(self, argv):
        raise OSError(errno.ENOENT, 'No such file or directory', argv[0])


def test_node_facts_fall_back_to_the_kernel_when_the_node_has_no_ip():
    net = nf.network_facts(NoIpRunner(), '127.0.0.1')
    assert (net['ifname'], net['routed_ifname'], net['address'], net['source']) == (
        'lo', 'lo', '127.0.0.1', 'kernel (no ip command on the node)')
    assert net['mtu'] and net['operstate'] == 'UNKNOWN'


def test_an_ip_that_fails_otherwise_still_fails_the_facts():
    class Broken:
        def run(self, argv):
            raise OSError(errno.EACCES, 'Permission denied', argv[0])
    with pytest.raises(nf.NodeFactsError, match='could not run'):
        nf.network_facts(Broken(), '127.0.0.1')


@pytest.mark.skipif(shutil.which('ip') is None, reason='compares with iproute2, which this machine lacks')
def test_the_kernel_agrees_with_ip_on_this_machine():
    """Every interface, MTU, state and primary address ip lists; the route to loopback and to this host's address."""
    links = json.loads(subprocess.run(['ip', '-j', 'addr', 'show'], capture_output=True, text=True, check=True).stdout)
    ours = dict((i['ifname'], i) for i in kn.interfaces())
    assert sorted(ours) == sorted(link['ifname'] for link in links)
    for link in links:
        mine = ours[link['ifname']]
        assert (mine['mtu'], mine['operstate']) == (link['mtu'], link['operstate'])
        theirs = ['%s/%d' % (a['local'], a['prefixlen']) for a in link.get('addr_info', []) if a.get('family') == 'inet6']
        assert sorted(a for a in mine['addresses'] if ':' in a) == sorted(theirs)
        primary = [a for a in link.get('addr_info', []) if a.get('family') == 'inet' and 'secondary' not in a]
        if primary:
            assert '%s/%d' % (primary[0]['local'], primary[0]['prefixlen']) in mine['addresses']
    for link in links:
        for addr in [a['local'] for a in link.get('addr_info', []) if a.get('family') == 'inet'][:1]:
            route = json.loads(subprocess.run(['ip', '-j', 'route', 'get', addr], capture_output=True, text=True,
                                              check=True).stdout)[0]
            assert kn.route_get(ipaddress.ip_address(addr), list(ours.values()))['dev'] == route['dev']
