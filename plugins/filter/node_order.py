# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: node_order
short_description: The nodes of a job in rank order, its master and the master's address
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - The one rule for the order of the nodes, used by roles/job, roles/nccl_env and playbooks/hostfile.yml.
  - The nodes are the input hosts that are in O(play_hosts), in the input's order (an inventory group's order; the
    Slurm inventory gives the allocation's order). The node whose C(trainops_master) is true (the first one if several
    are) comes first, otherwise the first node; it is node rank 0 and hosts the rendezvous.
  - The master's address is its C(trainops_master_addr), else its C(ansible_host), else its inventory name.
  - C(trainops_master) is read as Ansible reads a boolean (V(true), V(yes), V(1), ...), so a string V(false) from an
    inventory is false.
positional: hostvars, play_hosts
options:
  _input:
    description:
      - Inventory host names in inventory order, for example C(groups['trainops_nodes']).
    type: list
    elements: str
    required: true
  hostvars:
    description:
      - The C(hostvars) of the play.
    type: raw
    required: true
  play_hosts:
    description:
      - The hosts that take part, for example C(ansible_play_hosts_all); all of O(_input) when not given.
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Rank order, master and its address
  ansible.builtin.set_fact:
    __order: "{{ groups['trainops_nodes'] | trainops.multinode.node_order(hostvars, ansible_play_hosts_all) }}"
  run_once: true
  # nodes: [gpu-02, gpu-01, gpu-03] (gpu-02 has trainops_master: true), master: gpu-02,
  # master_addr: 10.0.0.12, ranks: {gpu-02: 0, gpu-01: 1, gpu-03: 2}, flagged: [gpu-02]
"""

RETURN = r"""
_value:
  description: The order of the nodes.
  type: dict
  contains:
    nodes:
      description: The nodes in rank order, the master first.
      type: list
      elements: str
    master:
      description: The master's inventory name; null without nodes.
      type: str
    master_addr:
      description: The address the nodes reach the master at; null without nodes.
      type: str
    ranks:
      description: The node rank of every node.
      type: dict
    flagged:
      description: The nodes marked C(trainops_master=true), in inventory order (more than one is an inventory error
        the launch refuses).
      type: list
      elements: str
"""

import ipaddress

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean


def _host_vars(hostvars, host):
    try:
        found = hostvars[host]
    except KeyError:
        found = None
    return found if isinstance(found, Mapping) or hasattr(found, 'get') else {}


def is_flagged(host_vars):
    """The host's ``trainops_master``, read as a boolean (unset: false)."""
    value = host_vars.get('trainops_master')
    if value is None:
        return False
    try:
        return boolean(value, strict=True)
    except TypeError:
        raise AnsibleFilterError('node_order: trainops_master must be true or false, not %r' % (value, ))


def master_addr(host_vars, host):
    """``trainops_master_addr``, else ``ansible_host``, else the inventory name."""
    for name in ('trainops_master_addr', 'ansible_host'):
        if host_vars.get(name) is not None:
            return str(host_vars.get(name))
    return host


def node_order(hosts, hostvars, play_hosts=None):
    """``{nodes, master, master_addr, ranks, flagged}`` for ``hosts`` (see DOCUMENTATION)."""
    if isinstance(hosts, (str, bytes)) or not hasattr(hosts, '__iter__'):
        raise AnsibleFilterError('node_order: the input must be a list of inventory host names, not %r' % (hosts, ))
    taking_part = None if play_hosts is None else set(play_hosts)
    ordered = []
    for host in hosts:
        if (taking_part is None or host in taking_part) and host not in ordered:
            ordered.append(host)
    flagged = [h for h in ordered if is_flagged(_host_vars(hostvars, h))]
    master = (flagged + ordered)[0] if ordered else None
    nodes = ([master] + [h for h in ordered if h != master]) if master else []
    return {
        'nodes': nodes,
        'master': master,
        'master_addr': master_addr(_host_vars(hostvars, master), master) if master else None,
        'ranks': dict((h, i) for i, h in enumerate(nodes)),
        'flagged': flagged,
    }


def _loopback(address):
    """A loopback address (or localhost): right for every master where all the nodes are one machine."""
    if address.lower() == 'localhost':
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def master_can_move(nodes, spares, retries, min_nodes, exclude_after=0):
    """Whether node rank 0 can go to another host: a node can be left out, by a retry (``retries`` > 0) or before
    the first attempt (``exclude_after`` > 0: a node that failed too often in earlier launches), and another can take
    its place, a spare (``spares``) or fewer nodes (``min_nodes`` below the node count; 0 needs them all)."""
    try:
        retries, min_nodes, exclude_after = int(retries or 0), int(min_nodes or 0), int(exclude_after or 0)
    except (TypeError, ValueError):
        return False  # the knobs' own checks name them (validate.yml, spare_pool)
    return (retries > 0 or exclude_after > 0) and (bool(spares) or 0 < min_nodes < len(nodes))


def master_addr_problems(nodes, hostvars, spares=(), retries=0, min_nodes=0, exclude_after=0):
    """What makes the master's address wrong once the master moves (the retries' replacement of node rank 0): one
    ``trainops_master_addr`` shared by hosts that can each become the master (a group-wide value), which would make
    every node dial the lost master. ``[]`` when the master cannot move or every value is a host's own (a loopback
    value is every host's own: the local inventory's nodes are one machine)."""
    nodes, spares = list(nodes or ()), list(spares or ())
    if not master_can_move(nodes, spares, retries, min_nodes, exclude_after):
        return []
    holders = {}
    for host in nodes + [h for h in spares if h not in nodes]:
        value = _host_vars(hostvars, host).get('trainops_master_addr')
        if value is not None and not _loopback(str(value)):
            holders.setdefault(str(value), []).append(host)
    return ['trainops_master_addr is %s for %d hosts (%s): a retry can make another node the master, and every '
            'node would still dial %s. Set it per host (host_vars: each node\'s own address on the training '
            'network), or leave it out so that the master\'s ansible_host is used.'
            % (value, len(hosts), ', '.join(hosts[:5]) + (', ...' if len(hosts) > 5 else ''), value)
            for value, hosts in sorted(holders.items()) if len(hosts) > 1]


class FilterModule(object):
    """trainops.multinode.node_order (master_addr_problems: the action launch_plan's nodes step calls it)."""

    def filters(self):
        return {'node_order': node_order}
