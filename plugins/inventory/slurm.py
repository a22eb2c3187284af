# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: slurm
short_description: Training nodes of the current Slurm allocation
version_added: 0.1.0
author:
  - trainops maintainers (@trainops)
description:
  - Builds the inventory of the Slurm allocation this command runs in (inside C(salloc) or an C(sbatch) script) from
    its environment, without calling any Slurm command; every node goes into one group (default C(trainops_nodes)) in
    allocation order, the first node being the master (node rank 0), as C(scontrol show hostnames) lists them.
  - The nodes come from O(nodelist), else C(SLURM_JOB_NODELIST), else C(SLURM_NODELIST). Hostlist expressions are
    expanded like C(scontrol show hostnames) does (C(gpu-[01-04,07],cpu9), C(node[001-003]-ib),
    C(rack[1-2]-n[01-02]); order and zero padding kept). When the node list comes from the environment and
    C(SLURM_JOB_NUM_NODES) (or C(SLURM_NNODES)) is set, the counts must agree.
  - 'Ranks per node (C(trainops_nproc_per_node)), first found: O(gpus_per_node); C(SLURM_GPUS_PER_NODE) (C(8),
    C(h100:8), several types are summed); C(SLURM_GPUS_ON_NODE); the number of IDs in C(SLURM_JOB_GPUS)
    (C(0,1,2,3)); C(SLURM_TASKS_PER_NODE), for example 2(x3),1 (2 tasks on each of the first three nodes, 1 on the
    fourth), mapped to the nodes in order. The GPU variables describe the
    node the command runs on and are applied to every node. Without any of these the variable is not set, so group
    variables or the role default apply.'
  - Outside an allocation, with no O(nodelist), parsing fails with C(not inside a Slurm allocation).
  - 'The source is a YAML file whose name ends in C(.slurm.yml) or C(.slurm.yaml), with
    C(plugin: trainops.multinode.slurm); the C(auto) inventory plugin, enabled by default, hands it to this plugin.'
  - 'Variables set on every node: C(trainops_node_rank) (0, 1, ... in allocation order), C(trainops_nproc_per_node)
    (when known, see above); the first node also gets C(trainops_master=true). On the group:
    C(trainops_slurm_nodelist) (the expression), C(trainops_slurm_job_id) (from C(SLURM_JOB_ID), when set), then O(vars).'
extends_documentation_fragment:
  - ansible.builtin.constructed
options:
  plugin:
    description:
      - The name of this plugin; V(trainops.multinode.slurm) marks a YAML file as this plugin's source.
    type: str
    required: true
    choices: [trainops.multinode.slurm]
  nodelist:
    description:
      - A Slurm hostlist expression used instead of C(SLURM_JOB_NODELIST)/C(SLURM_NODELIST), for example
        V(gpu-[01-04]) to run on part of the allocation, or to try the inventory outside one.
    type: str
  gpus_per_node:
    description:
      - Ranks to start on every node (C(trainops_nproc_per_node)), instead of what the allocation says.
    type: int
  group:
    description:
      - The group the nodes are put in. The launch playbooks run on O(group) through C(trainops_nodes_group); for a
        name other than V(trainops_nodes) pass C(-e trainops_nodes_group=<name>).
    type: str
    default: trainops_nodes
  vars:
    description:
      - Variables set on O(group), for example C(ansible_user), C(trainops_python), C(trainops_socket_ifname).
        Per-node values (C(trainops_nproc_per_node)) are host variables and win over these; use O(gpus_per_node)
        to override the ranks per node.
    type: dict
    default: {}
notes:
  - 'Host names are used as they appear in the node list, which is how nodes of one allocation reach each other; use
    O(compose) to set C(ansible_host) when Ansible must use another name or address (for example
    C(ansible_host: inventory_hostname ~ "-ib")).'
  - Heterogeneous jobs (C(SLURM_JOB_NODELIST_HET_GROUP_*)) are not split into components; the whole node list is used.
seealso:
  - plugin: trainops.multinode.node_list
    plugin_type: inventory
  - plugin: trainops.multinode.hostfile
    plugin_type: filter
"""

EXAMPLES = r"""
# allocation.slurm.yml -- inside the allocation:
#   salloc -N 4 --gpus-per-node=8
#   ansible-inventory -i allocation.slurm.yml --graph
#   ansible-playbook -i allocation.slurm.yml playbooks/launch.yml -e channels=42
plugin: trainops.multinode.slurm
vars:
  trainops_python: /opt/venv/bin/python
  trainops_gpu_vendor: nvidia

---
# Part of the allocation, 4 ranks each, over the InfiniBand host names
plugin: trainops.multinode.slurm
nodelist: gpu-[01-02]
gpus_per_node: 4
compose:
  ansible_host: inventory_hostname ~ '-ib'
"""

import os

from ansible.errors import AnsibleParserError
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable

from ansible_collections.trainops.multinode.plugins.inventory.node_list import add_nodes
from ansible_collections.trainops.multinode.plugins.module_utils._hostlist import (
    HostlistError,
    count_ids,
    expand_counts,
    expand_hostlist,
    is_address,
    node_layout,
    parse_gpu_count,
)

YAML_SUFFIXES = ('.slurm.yml', '.slurm.yaml')
NODELIST_VARS = ('SLURM_JOB_NODELIST', 'SLURM_NODELIST')
NUM_NODES_VARS = ('SLURM_JOB_NUM_NODES', 'SLURM_NNODES')


def _first_env(environ, names):
    """(name, value) of the first variable in ``names`` that is set and not empty, else (None, None)."""
    for name in names:
        value = environ.get(name, '').strip()
        if value:
            return name, value
    return None, None


def allocation_nodes(environ, nodelist=None, gpus_per_node=None):
    """The allocation as ``(hosts, nproc per host or None, where each came from)``.

    ``environ`` is a mapping like ``os.environ``; ``nodelist``/``gpus_per_node`` override it.
    Raises HostlistError with a message for the user.
    """
    if nodelist:
        nodelist_from = 'nodelist option'
    else:
        nodelist_from, nodelist = _first_env(environ, NODELIST_VARS)
        if not nodelist:
            raise HostlistError('not inside a Slurm allocation: neither %s is set, and the source sets no "nodelist"'
                                % ' nor '.join(NODELIST_VARS))
    hosts = expand_hostlist(nodelist)
    if not hosts:
        raise HostlistError('%s %r names no nodes' % (nodelist_from, nodelist))
    seen = set()
    for host in hosts:
        if not is_address(host):
            raise HostlistError('%s %r gives %r, which is not a host name' % (nodelist_from, nodelist, host))
        if host in seen:
            raise HostlistError('%s %r names %s twice' % (nodelist_from, nodelist, host))
        seen.add(host)

    from_env = nodelist_from != 'nodelist option'
    if from_env:
        num_name, num_value = _first_env(environ, NUM_NODES_VARS)
        if num_value and num_value.isdigit() and int(num_value) != len(hosts):
            raise HostlistError('%s=%s expands to %d nodes, but %s=%s'
                                % (nodelist_from, nodelist, len(hosts), num_name, num_value))

    nproc, nproc_from = _ranks_per_node(environ, hosts, gpus_per_node, from_env)
    return hosts, nproc, {'nodelist': nodelist_from, 'nproc': nproc_from, 'expression': nodelist}


def _ranks_per_node(environ, hosts, gpus_per_node, strict_tasks):
    if gpus_per_node is not None:
        if int(gpus_per_node) < 1:
            raise HostlistError('gpus_per_node must be at least 1, not %s' % gpus_per_node)
        return [int(gpus_per_node)] * len(hosts), 'gpus_per_node option'
    for name, parse in (('SLURM_GPUS_PER_NODE', parse_gpu_count), ('SLURM_GPUS_ON_NODE', parse_gpu_count),
                        ('SLURM_JOB_GPUS', count_ids)):
        value = environ.get(name, '').strip()
        if not value:
            continue
        try:
            count = parse(value)
        except HostlistError as exc:
            raise HostlistError('%s: %s' % (name, exc))
        if count:
            return [count] * len(hosts), name
    value = environ.get('SLURM_TASKS_PER_NODE', '').strip()
    if value:
        try:
            counts = expand_counts(value)
        except HostlistError as exc:
            raise HostlistError('SLURM_TASKS_PER_NODE: %s' % exc)
        if len(counts) == len(hosts) and all(counts):
            return counts, 'SLURM_TASKS_PER_NODE'
        if strict_tasks:
            raise HostlistError('SLURM_TASKS_PER_NODE=%s gives %d counts for %d nodes'
                                % (value, len(counts), len(hosts)))
    return [None] * len(hosts), None


class InventoryModule(BaseInventoryPlugin, Constructable):
    """Training nodes of the current Slurm allocation, from a ``*.slurm.yml`` source."""

    NAME = 'trainops.multinode.slurm'

    def verify_file(self, path):
        return (super(InventoryModule, self).verify_file(path) and not os.path.isdir(path)
                and os.path.basename(path).endswith(YAML_SUFFIXES))

    def parse(self, inventory, loader, path, cache=True):
        super(InventoryModule, self).parse(inventory, loader, path, cache=cache)
        self._read_config_data(path)
        group_vars = self.get_option('vars') or {}
        if not isinstance(group_vars, dict):
            raise AnsibleParserError('%s: "vars" must be a mapping of variable names to values' % path)
        try:
            hosts, nproc, origin = allocation_nodes(os.environ, self.get_option('nodelist'),
                                                    self.get_option('gpus_per_node'))
        except HostlistError as exc:
            raise AnsibleParserError('%s: %s' % (path, to_native(exc)))
        self.display.vvv('%s: %d node(s) from %s, ranks per node from %s'
                         % (path, len(hosts), origin['nodelist'], origin['nproc'] or 'nowhere (not set)'))

        slurm_vars = {'trainops_slurm_nodelist': origin['expression']}
        job_id = os.environ.get('SLURM_JOB_ID', '').strip()
        if job_id:
            slurm_vars['trainops_slurm_job_id'] = job_id
        slurm_vars.update(group_vars)
        layout = node_layout([(host, None, count) for host, count in zip(hosts, nproc)])
        add_nodes(self, self.get_option('group'), layout, slurm_vars, strict=self.get_option('strict'))
