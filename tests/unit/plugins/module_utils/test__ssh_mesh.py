# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The SSH mesh's checks before anything is written: names of one node only, untrusted host names, the key's from=."""

from __future__ import annotations

import ipaddress

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _ssh_mesh as sm


def node(index, mgmt=True, **fields):
    """Lab node `index`: training address 10.77.0.(10+i), management 10.78.0.(10+i), ssh on management."""
    found = {'address': '10.78.0.%d' % (10 + index) if mgmt else '10.77.0.%d' % (10 + index),
             'nodename': 'lab-node%02d' % index, 'hostname': 'lab-node%02d' % index,
             'addresses': ['10.77.0.%d' % (10 + index)] + (['10.78.0.%d' % (10 + index)] if mgmt else []),
             'extra_names': []}
    found.update(fields)
    return found


def cluster(count=3, **changes):
    nodes = {'lab-node%02d' % i: node(i) for i in range(1, count + 1)}
    for name, fields in changes.items():
        nodes[name].update(fields)
    return nodes


def test_a_sane_cluster_has_no_problem_and_every_address_in_from():
    result = sm.plan(cluster(4))
    assert result['problems'] == []
    # the training and the management network, both: peers connect from the address on the route to the name used
    assert result['from'] == '10.77.0.11,10.77.0.12/31,10.77.0.14,10.78.0.11,10.78.0.12/31,10.78.0.14,127.0.0.1,::1'
    assert result['key_options'] == 'from="%s",restrict' % result['from']


def test_from_holds_exactly_the_addresses_given():
    addresses = ['10.0.%d.%d' % (i // 200, i % 200 + 1) for i in range(1000)]
    patterns = sm.from_patterns(addresses).split(',')
    networks = [ipaddress.ip_network(p) for p in patterns]
    covered = sorted(str(a) for n in networks for a in (n if n.num_addresses > 1 else [n.network_address]))
    assert covered == sorted(addresses + ['127.0.0.1', '::1'])
    assert len(patterns) < 60          # 1000 nodes in 5 runs: about 1 kB, not 13 kB


def test_ipv6_addresses_are_sources_link_local_ones_and_zones_are_not():
    nodes = cluster(2)
    nodes['lab-node01']['addresses'] += ['fd00::11', 'fe80::1', 'fe80::2%eth0']
    assert sm.plan(nodes)['from'] == '10.77.0.11,10.77.0.12,10.78.0.11,10.78.0.12,127.0.0.1,::1,fd00::11'


def test_two_nodes_reporting_one_host_name_are_refused_naming_both():
    problems = sm.plan(cluster(3, **{'lab-node03': {'nodename': 'lab-node02', 'hostname': 'lab-node02'}}))['problems']
    assert problems == ["'lab-node02' is a name of more than one node: lab-node02 (inventory name, host name, short "
                        "host name), lab-node03 (host name, short host name); each node needs names of its own "
                        "(fix the host names, ansible_host or trainops_ssh_mesh_extra_names)"]


def test_names_compare_without_case():
    problems = sm.plan(cluster(2, **{'lab-node02': {'nodename': 'LAB-NODE01.example', 'hostname': 'LAB-NODE01'}}))
    assert len(problems['problems']) == 1 and "'lab-node01' is a name of more than one node" in problems['problems'][0]


def test_a_host_name_that_is_another_nodes_address_is_refused():
    # lab-node02 calls itself 10.77.0.11: the training address of lab-node01, a name of no node
    problems = sm.plan(cluster(2, **{'lab-node02': {'hostname': '10.77.0.11'}}))['problems']
    assert any("'10.77.0.11' is a name of more than one node: lab-node01 (address), lab-node02 (short host name)" in p
               for p in problems), problems
    assert any('lab-node02 reports the host name \'10.77.0.11\' (its short host name), which ssh reads as the address '
               '10.77.0.11, not an address of lab-node02 (10.77.0.12, 10.78.0.12)' in p for p in problems), problems


@pytest.mark.parametrize('reported', ['10.9.9.9', '167772161', '10.1', '0x0a000001'])
def test_a_host_name_ssh_reads_as_an_address_must_be_the_nodes_own(reported):
    problems = sm.plan(cluster(2, **{'lab-node02': {'nodename': reported}}))['problems']
    assert len(problems) == 1 and 'which ssh reads as the address' in problems[0] and 'lab-node02' in problems[0]


def test_a_host_name_that_is_the_nodes_own_address_is_taken():
    assert sm.plan(cluster(2, **{'lab-node02': {'nodename': '10.77.0.12', 'hostname': '10.77.0.12'}}))['problems'] == []


@pytest.mark.parametrize('reported', [
    '*', 'lab-node02 x', 'lab-node02,lab-node01', 'lab-node02\n', '\nlab-node02', '!lab-node01', 'a?', '[a]:22',
    '-a', 'a-', 'a..b', '.a', 'a.', '', 'a' * 64, '.'.join(['a' * 63] * 4) + 'x', 'lab-node02#', 'x|y', 'ünïcode',
    None, 7,
])
def test_a_reported_host_name_must_be_a_plain_host_name(reported):
    problems = sm.plan(cluster(2, **{'lab-node02': {'nodename': reported}}))['problems']
    assert len(problems) == 1, problems
    assert problems[0].startswith('lab-node02 reports the host name %r (uname -n), which is not a host name' % (reported, ))


@pytest.mark.parametrize('reported', ['gpu-01', 'GPU-01.cluster.local', 'a', 'n_1', '1gpu', 'a' * 63])
def test_plain_host_names_are_taken(reported):
    assert sm.is_host_name(reported) is True


@pytest.mark.parametrize('field, value, fragment', [
    ('extra_names', ['gpu-01-ib', 'x y'], "lab-node02: trainops_ssh_mesh_extra_names 'x y' is not a host name or address"),
    ('extra_names', ['*'], "trainops_ssh_mesh_extra_names '*' is not"),
    ('address', 'fe80::1%eth0;id', "lab-node02: ansible_host 'fe80::1%eth0;id' is not a host name or address"),
])
def test_the_other_names_must_be_host_names_or_addresses(field, value, fragment):
    problems = sm.plan(cluster(2, **{'lab-node02': {field: value}}))['problems']
    assert any(fragment in p for p in problems), problems


def test_an_extra_name_of_another_node_is_refused():
    problems = sm.plan(cluster(2, **{'lab-node02': {'extra_names': ['lab-node01']}}))['problems']
    assert problems and "lab-node02 (trainops_ssh_mesh_extra_names)" in problems[0]


def test_an_interface_address_several_nodes_have_is_no_name():
    # every Docker host has 172.17.0.1 on docker0: no node goes by it, so it is no conflict
    nodes = cluster(2)
    for item in nodes.values():
        item['addresses'].append('172.17.0.1')
    assert sm.plan(nodes)['problems'] == []


@pytest.mark.parametrize('sources, expected', [
    (['10.9.0.0/24'], '10.9.0.0/24'), (['10.9.0.7'], '10.9.0.7'), (['10.9.0.7/32'], '10.9.0.7'),
    (['10.9.*'], '10.9.*'), (['!10.77.0.13'], '!10.77.0.13'), (['fd00::/64', 'fd00::/64'], 'fd00::/64'),
])
def test_from_takes_addresses_networks_and_patterns(sources, expected):
    result = sm.plan(cluster(2), sources)
    assert result['problems'] == [] and result['from'].endswith(',::1,' + expected)


@pytest.mark.parametrize('pattern', [
    '10.9.0.1/24', 'gpu-*.cluster', 'gpu-01', '10.0.0.1"', '10.0.0.1,10.0.0.2', '10.0.0.1\n', '10.0.0.1 ', '',
    '!', '10.0.0.0/33', 'fe80::1%eth0', 7, None,
])
def test_from_refuses_what_sshd_would_misread(pattern):
    problems = sm.plan(cluster(2), [pattern])['problems']
    assert len(problems) == 1 and problems[0].startswith('trainops_ssh_mesh_from: %r is not an address' % (pattern, ))


def test_from_only_the_given_sources():
    result = sm.plan(cluster(2), ['10.9.0.0/24'], from_cluster=False)
    assert result['problems'] == [] and result['from'] == '10.9.0.0/24'
    assert sm.plan(cluster(2), [], from_cluster=False)['problems'] == [
        'the mesh key would be usable from nowhere: trainops_ssh_mesh_from_cluster is false and trainops_ssh_mesh_from '
        'names no source']


def test_permits_come_after_restrict_in_a_fixed_order():
    result = sm.plan(cluster(1), permits=['port-forwarding', 'pty'])
    assert result['key_options'].endswith('",restrict,pty,port-forwarding')
    assert sm.plan(cluster(1), permits=['pty', 'no-pty'])['problems'] == [
        "trainops_ssh_mesh_key_permits: 'no-pty' not among pty, port-forwarding, agent-forwarding, X11-forwarding, "
        "user-rc"]
