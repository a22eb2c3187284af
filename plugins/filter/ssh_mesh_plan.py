# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: ssh_mesh_plan
short_description: Check the names of the nodes of an SSH mesh and compute the options of its key
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - Used by the role C(trainops.multinode.ssh_mesh) before it writes anything.
  - Every name a node goes by in C(known_hosts) and C(~/.ssh/config) (inventory name, C(ansible_host), the host names
    it reports, C(trainops_ssh_mesh_extra_names)) must be a host name or address and belong to that node only; a
    name of one node that is a name or an interface address of another is a problem naming both nodes.
  - The host names a node reports are untrusted; they must be RFC 1123 host names, and one that ssh reads as an
    address must be an address of that node.
  - The C(from=) of the mesh key is every node's interface addresses and loopback (collapsed into the fewest networks
    holding exactly them; IPv6 link-local addresses left out), then O(sources).
options:
  _input:
    description:
      - 'Per node (inventory name): C(address) (its C(ansible_host)), C(nodename) and C(hostname) (facts), C(addresses)
        (its interface addresses, facts C(all_ipv4_addresses) and C(all_ipv6_addresses)), C(extra_names).'
    type: dict
    required: true
  sources:
    description:
      - Further C(from=) patterns (C(trainops_ssh_mesh_from)); addresses, CIDR networks, patterns with C(*) or C(?),
        optionally negated by C(!).
    type: list
    elements: str
    default: []
  from_cluster:
    description:
      - Whether every node's addresses and loopback go into C(from=).
    type: bool
    default: true
  permits:
    description:
      - What C(restrict) takes away that the key gets back (C(trainops_ssh_mesh_key_permits)).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Check the names and compute the key options
  ansible.builtin.set_fact:
    __plan: "{{ nodes | trainops.multinode.ssh_mesh_plan(sources=['10.9.0.0/24']) }}"
  vars:
    nodes:
      gpu-01: {address: 10.0.0.11, nodename: gpu-01, hostname: gpu-01, addresses: [10.0.0.11, 10.9.0.11], extra_names: []}
      gpu-02: {address: 10.0.0.12, nodename: gpu-02, hostname: gpu-02, addresses: [10.0.0.12, 10.9.0.12], extra_names: []}
  # __plan.problems: [], __plan.from: "10.0.0.11,10.0.0.12,10.9.0.11,10.9.0.12,127.0.0.1,::1,10.9.0.0/24"
  # __plan.key_options: from="10.0.0.11,...",restrict
"""

RETURN = r"""
_value:
  description: The problems (one line each, empty when none), the C(from=) pattern list and the key options.
  type: dict
  contains:
    problems:
      description: What is wrong, one line each, naming the nodes and the value.
      type: list
      elements: str
    from:
      description: The C(from=) pattern list, comma-separated.
      type: str
    key_options:
      description: C(from="..."), C(restrict) and the permits, for O(ansible.posix.authorized_key#module:key_options).
      type: str
"""

from collections.abc import Mapping, Sequence

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.module_utils import _ssh_mesh
from ansible_collections.trainops.multinode.plugins.module_utils._ssh_mesh import plan


def ssh_mesh_plan(nodes, sources=None, from_cluster=True, permits=None):
    if not isinstance(nodes, Mapping) or not all(isinstance(node, Mapping) for node in nodes.values()):
        raise AnsibleFilterError('ssh_mesh_plan: the input must be a mapping of node name to a mapping of its names '
                                 'and addresses, not %r' % (nodes, ))
    return plan(dict(nodes), sources or [], from_cluster=bool(from_cluster), permits=permits or [])


# The filters of the mesh once it is written (roles/ssh_mesh/tasks/known_hosts.yml and verify.yml), each documented
# in the YAML file of its name next to this one; the rules are in module_utils/_ssh_mesh.py. In this file: ansible-core
# imports every filter file of the collection to find one by its name.
def _list(name, what, value):
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise AnsibleFilterError('%s: %s must be a list, not %s' % (name, what, type(value).__name__))
    return list(value)


def _results(name, results):
    results = _list(name, 'the input (the results of ssh_mesh_results)', results)
    if not all(isinstance(row, Mapping) and all(key in row for key in ('from', 'to', 'target', 'ok', 'error'))
               for row in results):
        raise AnsibleFilterError('%s: the input must be the results of trainops.multinode.ssh_mesh_results (from, to, '
                                 'target, ok, error), not %r' % (name, results))
    return results


def _call(name, function, *args):
    try:
        return function(*args)
    except ValueError as exc:
        raise AnsibleFilterError('%s: %s' % (name, exc))


def ssh_mesh_known_hosts(nodes, hostvars):
    return _call('ssh_mesh_known_hosts', _ssh_mesh.known_hosts_lines,
                 _list('ssh_mesh_known_hosts', 'the input (the nodes)', nodes), hostvars)


def ssh_mesh_targets(nodes, here, hostvars, kinds):
    return _call('ssh_mesh_targets', _ssh_mesh.mesh_targets, _list('ssh_mesh_targets', 'the input (the nodes)', nodes),
                 here, hostvars, _list('ssh_mesh_targets', 'kinds', kinds))


def ssh_mesh_results(nodes, hostvars, play_hosts):
    return _call('ssh_mesh_results', _ssh_mesh.check_results, _list('ssh_mesh_results', 'the input (the nodes)', nodes),
                 hostvars, _list('ssh_mesh_results', 'play_hosts', play_hosts))


def ssh_mesh_report(results, nodes, kinds):
    return _ssh_mesh.report_lines(_results('ssh_mesh_report', results), _list('ssh_mesh_report', 'nodes', nodes),
                                  _list('ssh_mesh_report', 'kinds', kinds))


def ssh_mesh_pairs(results):
    return _ssh_mesh.broken_pairs(_results('ssh_mesh_pairs', results))


class FilterModule(object):
    """trainops.multinode.ssh_mesh_plan, and the filters of the mesh once it is written."""

    def filters(self):
        return {
            'ssh_mesh_plan': ssh_mesh_plan,
            'ssh_mesh_known_hosts': ssh_mesh_known_hosts,
            'ssh_mesh_targets': ssh_mesh_targets,
            'ssh_mesh_results': ssh_mesh_results,
            'ssh_mesh_report': ssh_mesh_report,
            'ssh_mesh_pairs': ssh_mesh_pairs,
        }
