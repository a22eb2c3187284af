# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: node_list
short_description: Training nodes from a node_ip_list.txt file (one address a line, master first)
version_added: 0.1.0
author:
  - trainops maintainers (@trainops)
description:
  - Reads the node list format of the shell launchers this collection replaces (C(node_ip_list.txt)), which is also the
    DeepSpeed hostfile format, and puts every node into one group (default C(trainops_nodes)) in file order, the
    first line being the master (node rank 0).
  - 'File format: one IP address (IPv4 or IPv6) or host name a line, optionally followed by C(slots=N) (the ranks to start
    on that node, normally its GPU count). Blank lines and C(#) comments, whole-line or trailing, are skipped. A node
    listed twice, or a line that is neither, is an error naming the line.'
  - 'Two ways in. Directly: C(ansible-inventory -i node_ip_list.txt --graph) - accepted are files named
    C(node_ip_list.txt), files ending in C(.nodes), and C(.txt) files whose every non-comment line parses as
    C(host[ slots=N]) (other text files are left to the other inventory plugins). This needs the plugin in the
    C([inventory] enable_plugins) list of C(ansible.cfg), before C(ini).'
  - 'Or through a YAML source whose name ends in C(.trainops_nodes.yml) or C(.trainops_nodes.yaml), with
    C(plugin: trainops.multinode.node_list), O(path) pointing at the node list, group variables in O(vars) and the
    constructed features (O(compose), O(groups), O(keyed_groups)). The C(auto) inventory plugin, enabled by default,
    hands such a file to this plugin.'
  - 'Variables set on every node: C(ansible_host) (the address from the file), C(trainops_node_rank) (0, 1, ... in file
    order), C(trainops_nproc_per_node) (from C(slots=N), only where given). The first node also gets
    C(trainops_master=true).'
  - The launch (role C(trainops.multinode.job)) takes ranks from the inventory order of the group and the master from
    C(trainops_master), so both agree with the file. C(group_vars/trainops_nodes.yml) next to the node list applies as
    for any inventory source.
extends_documentation_fragment:
  - ansible.builtin.constructed
options:
  plugin:
    description:
      - The name of this plugin; V(trainops.multinode.node_list) marks a YAML file as this plugin's source.
    type: str
    required: true
    choices: [trainops.multinode.node_list]
  path:
    description:
      - The node list file, relative to the directory of the YAML source (or absolute; C(~) is expanded).
      - Only used in a YAML source; a node list given directly with C(-i) is itself the file.
    type: str
  group:
    description:
      - The group the nodes are put in. The launch playbooks run on O(group) through C(trainops_nodes_group); for a
        name other than V(trainops_nodes) pass C(-e trainops_nodes_group=<name>).
    type: str
    default: trainops_nodes
  vars:
    description:
      - Variables set on O(group), for example C(ansible_user), C(trainops_python), C(trainops_socket_ifname),
        C(trainops_env). Per-node values from the file (C(ansible_host), C(trainops_nproc_per_node)) are host
        variables and win over these.
    type: dict
    default: {}
notes:
  - A node list read directly is parsed with the defaults of O(group) and O(vars); use a YAML source to change them, or
    C(group_vars/) next to the file.
seealso:
  - plugin: trainops.multinode.slurm
    plugin_type: inventory
  - plugin: trainops.multinode.hostfile
    plugin_type: filter
"""

EXAMPLES = r"""
# node_ip_list.txt -- the master first; used directly:
#   ansible-inventory -i node_ip_list.txt --graph
#   ansible-playbook -i node_ip_list.txt playbooks/launch.yml -e channels=42
#
#   # master
#   10.0.0.11 slots=8
#   10.0.0.12 slots=8   # rack 2
#   gpu-03.cluster.local

# cluster.trainops_nodes.yml -- the same file with settings for every node:
plugin: trainops.multinode.node_list
path: node_ip_list.txt
vars:
  ansible_user: train
  trainops_python: /opt/venv/bin/python
  trainops_socket_ifname: ens5
  trainops_env:
    NCCL_DEBUG: WARN
# constructed features work on the nodes' variables
keyed_groups:
  - key: trainops_nproc_per_node | default(0) | string
    prefix: gpus
"""

import os

from ansible.errors import AnsibleParserError
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable
from ansible.utils.vars import combine_vars

from ansible_collections.trainops.multinode.plugins.module_utils._hostlist import (
    HostlistError,
    looks_like_node_list,
    node_layout,
    parse_node_list,
)

NODE_LIST_NAME = 'node_ip_list.txt'
NODE_LIST_SUFFIXES = ('.nodes',)
TEXT_SUFFIX = '.txt'
YAML_SUFFIXES = ('.trainops_nodes.yml', '.trainops_nodes.yaml')
MAX_SNIFF_BYTES = 1024 * 1024
"""A .txt file larger than this is not sniffed for the node list format (it is not one)."""

GROUP_NAME_CHARS = frozenset('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_')


def read_text(path):
    """The file's text; AnsibleParserError naming the file when it cannot be read as UTF-8."""
    try:
        with open(path, 'rb') as handle:
            return handle.read().decode('utf-8')
    except (OSError, UnicodeDecodeError) as exc:
        raise AnsibleParserError('cannot read node list %s: %s' % (path, to_native(exc)))


def check_group_name(name):
    if not isinstance(name, str) or not name or name[0].isdigit() or not set(name) <= GROUP_NAME_CHARS:
        raise AnsibleParserError('group %r is not a valid group name (letters, digits and "_", not starting with a '
                                 'digit)' % (name,))
    return name


def add_nodes(plugin, group, layout, group_vars, strict=False):
    """Put ``layout`` (``node_layout`` output, rank order) into ``group`` of ``plugin.inventory``.

    Sets ``group_vars`` on the group, each node's variables on the node, then applies the plugin's
    constructed options (compose, groups, keyed_groups) with the group variables visible.
    """
    inventory = plugin.inventory
    inventory.add_group(check_group_name(group))
    for key, value in (group_vars or {}).items():
        inventory.set_variable(group, key, value)
    for name, variables in layout:
        inventory.add_host(name, group=group)
        for key, value in variables.items():
            inventory.set_variable(name, key, value)
    compose = plugin.get_option('compose')
    groups = plugin.get_option('groups')
    keyed_groups = plugin.get_option('keyed_groups')
    if not (compose or groups or keyed_groups):
        return
    for name, _variables in layout:
        host_vars = combine_vars(group_vars or {}, inventory.get_host(name).get_vars())
        plugin._set_composite_vars(compose, host_vars, name, strict=strict)
        # composed variables are visible to the group conditions and keys
        host_vars = combine_vars(group_vars or {}, inventory.get_host(name).get_vars())
        plugin._add_host_to_composed_groups(groups, host_vars, name, strict=strict, fetch_hostvars=False)
        plugin._add_host_to_keyed_groups(keyed_groups, host_vars, name, strict=strict, fetch_hostvars=False)


class InventoryModule(BaseInventoryPlugin, Constructable):
    """Training nodes from a node list file, directly or through a ``*.trainops_nodes.yml`` source."""

    NAME = 'trainops.multinode.node_list'

    def verify_file(self, path):
        if not super(InventoryModule, self).verify_file(path) or os.path.isdir(path):
            return False
        base = os.path.basename(path)
        if base.endswith(YAML_SUFFIXES) or base == NODE_LIST_NAME or base.endswith(NODE_LIST_SUFFIXES):
            return True
        if not base.endswith(TEXT_SUFFIX):
            return False
        # any other .txt file: only when its content is a node list, so other text inventories stay with ini
        try:
            if os.path.getsize(path) > MAX_SNIFF_BYTES:
                return False
            return looks_like_node_list(read_text(path))
        except (OSError, AnsibleParserError):
            return False

    def parse(self, inventory, loader, path, cache=True):
        super(InventoryModule, self).parse(inventory, loader, path, cache=cache)
        if os.path.basename(path).endswith(YAML_SUFFIXES):
            self._read_config_data(path)
            node_file = self.get_option('path')
            if not node_file:
                raise AnsibleParserError('%s: "path" (the node list file) is required' % path)
            node_file = os.path.expanduser(node_file)
            if not os.path.isabs(node_file):
                node_file = os.path.join(os.path.dirname(os.path.abspath(path)), node_file)
        else:
            self.set_options(direct={'plugin': self.NAME})
            node_file = path
        group_vars = self.get_option('vars') or {}
        if not isinstance(group_vars, dict):
            raise AnsibleParserError('%s: "vars" must be a mapping of variable names to values' % path)

        try:
            entries = parse_node_list(read_text(node_file))
            if not entries:
                raise HostlistError('it lists no nodes (one address or host name a line, the master first)')
        except HostlistError as exc:
            message = 'node list %s: %s' % (node_file, to_native(exc))
            if node_file == path:
                # Ansible shows a plugin's error only when no later plugin parses the source, and ini takes any
                # text file (each line an ungrouped host): say it here, so the broken line is never hidden.
                self.display.warning('%s; the file is not used as a node list (group %s)'
                                     % (message, self.get_option('group')))
            raise AnsibleParserError(message)
        layout = node_layout([(entry.name, entry.name, entry.slots) for entry in entries])
        add_nodes(self, self.get_option('group'), layout, group_vars, strict=self.get_option('strict'))
