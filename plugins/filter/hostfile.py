# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: hostfile
short_description: Render a DeepSpeed or MPI hostfile from inventory hosts
version_added: 0.1.0
author:
  - trainops maintainers (@trainops)
description:
  - Renders one line per node, in the order given (the first node is where DeepSpeed and C(mpirun) put rank 0).
  - 'Formats: V(deepspeed) and V(openmpi) (alias V(mpi)) write C(host slots=N), the syntax of the DeepSpeed launcher and
    of Open MPI C(mpirun --hostfile); V(mpich) writes C(host:N), the syntax of MPICH/Hydra C(mpiexec -f).'
  - From a list of inventory host names with O(hostvars), the name written is the host's O(address_var)
    (C(ansible_host)) or, without one, its inventory name; the slots are the first of O(slots_var) the host defines,
    else O(slots).
  - From a mapping of host to slots, the keys are written as they are.
  - A node that appears twice (also two inventory hosts with the same address), a slot count that is not a positive
    integer, or a node without one fail with a message naming the node.
positional: hostvars
options:
  _input:
    description:
      - Inventory host names in rank order (for example C(groups['trainops_nodes'])), or a mapping of host to slots.
    type: raw
    required: true
  hostvars:
    description:
      - The C(hostvars) of the play; needed with a list of host names.
    type: raw
  format:
    description:
      - The hostfile syntax.
    type: str
    default: deepspeed
    choices: [deepspeed, openmpi, mpi, mpich]
  slots:
    description:
      - Slots for a node that defines none of O(slots_var) (or for every node of a list without O(hostvars)).
    type: int
  slots_var:
    description:
      - The host variable(s) holding a node's slots, the first one defined wins.
    type: raw
    default: trainops_nproc_per_node
  address_var:
    description:
      - The host variable holding the name to write; the inventory name when the host does not define it.
        An empty string writes inventory names.
    type: str
    default: ansible_host
seealso:
  - plugin: trainops.multinode.node_list
    plugin_type: inventory
  - plugin: trainops.multinode.slurm
    plugin_type: inventory
"""

EXAMPLES = r"""
- name: A DeepSpeed hostfile for the nodes of the launch group
  ansible.builtin.copy:
    dest: /shared/hostfile
    content: "{{ groups['trainops_nodes'] | trainops.multinode.hostfile(hostvars) }}"
    mode: "0644"
  delegate_to: localhost
  run_once: true
  # 10.0.0.11 slots=8
  # 10.0.0.12 slots=8

- name: The same for MPICH, 4 ranks on nodes that do not say
  ansible.builtin.debug:
    msg: "{{ groups['trainops_nodes'] | trainops.multinode.hostfile(hostvars, format='mpich', slots=4) }}"
  # 10.0.0.11:8
  # 10.0.0.12:4

- name: From a mapping
  ansible.builtin.debug:
    msg: "{{ {'gpu-01': 8, 'gpu-02': 8} | trainops.multinode.hostfile(format='openmpi') }}"
  # gpu-01 slots=8
  # gpu-02 slots=8
"""

RETURN = r"""
_value:
  description:
    - The hostfile, one C(host slots=N) or C(host:N) line per node, ending with a newline.
  type: str
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

FORMATS = {
    'deepspeed': '{host} slots={slots}',
    'openmpi': '{host} slots={slots}',
    'mpi': '{host} slots={slots}',
    'mpich': '{host}:{slots}',
}


def _slots(value, host):
    if isinstance(value, bool):
        raise AnsibleFilterError('hostfile: slots for %s must be a positive integer, not %r' % (host, value))
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        raise AnsibleFilterError('hostfile: slots for %s must be a positive integer, not %r' % (host, value))
    if number < 1:
        raise AnsibleFilterError('hostfile: slots for %s must be a positive integer, not %r' % (host, value))
    return number


def _host_entries(hosts, hostvars, slots, slots_vars, address_var):
    entries = []
    for host in hosts:
        host = str(host)
        variables = {}
        if hostvars is not None:
            try:
                variables = hostvars[host] if host in hostvars else None
            except (KeyError, TypeError):
                variables = None
            if not isinstance(variables, Mapping):
                raise AnsibleFilterError('hostfile: %s is not an inventory host' % host)
        address = variables.get(address_var) if address_var else None
        count = None
        for name in slots_vars:
            value = variables.get(name)
            if value is not None and value != '':
                count = value
                break
        if count is None:
            count = slots
        if count is None:
            raise AnsibleFilterError('hostfile: %s has no slots (none of %s is set); pass slots=N'
                                     % (host, ', '.join(slots_vars) or 'the slot variables'))
        entries.append((host, str(address) if address else host, count))
    return entries


def hostfile(nodes, hostvars=None, format='deepspeed', slots=None, slots_var='trainops_nproc_per_node',
             address_var='ansible_host'):
    """Render ``nodes`` (host names with ``hostvars``, or a host -> slots mapping) as a hostfile."""
    if format not in FORMATS:
        raise AnsibleFilterError('hostfile: format must be one of %s, not %r' % (', '.join(sorted(FORMATS)), format))
    if isinstance(slots_var, str):
        slots_vars = [slots_var] if slots_var else []
    else:
        slots_vars = [str(name) for name in (slots_var or [])]

    if isinstance(nodes, Mapping):
        entries = [(str(host), str(host), count) for host, count in nodes.items()]
    elif isinstance(nodes, (list, tuple)):
        entries = _host_entries(nodes, hostvars, slots, slots_vars, address_var)
    else:
        raise AnsibleFilterError('hostfile: expected a list of host names or a mapping of host to slots, got %s'
                                 % type(nodes).__name__)

    if not entries:
        raise AnsibleFilterError('hostfile: no nodes given')
    lines = []
    seen = {}
    for host, address, count in entries:
        if not address or any(char.isspace() for char in address):
            raise AnsibleFilterError('hostfile: %r is not a usable host name for %s' % (address, host))
        if address in seen:
            raise AnsibleFilterError('hostfile: %s and %s are the same node (%s); each node must appear once'
                                     % (seen[address], host, address))
        seen[address] = host
        lines.append(FORMATS[format].format(host=address, slots=_slots(count, host)))
    return ''.join(line + '\n' for line in lines)


class FilterModule(object):
    """trainops.multinode filters."""

    def filters(self):
        return {'hostfile': hostfile}
