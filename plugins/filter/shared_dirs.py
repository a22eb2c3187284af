# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: shared_dirs
short_description: Group nodes by the directory they share
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - Takes, per node, the token of one of its directories (as M(trainops.multinode.preflight) with
    O(trainops.multinode.preflight#module:identify_dirs=true) returns it) and tells which nodes see the same directory,
    such as a home on NFS.
  - 'Returns C(primary): for each node, the first node (in the input''s order) with the same token, which is the node
    that acts for all of them (a shared workspace is synced once, through it); C(groups): the lists of nodes that share
    a directory (two or more), in order; C(shared): whether any node shares it.'
  - A node without a token (V(null), for example in check mode) shares with nobody.
options:
  _input:
    description:
      - A mapping of node name to token, in node order (rank order).
    type: dict
    required: true
seealso:
  - module: trainops.multinode.preflight
"""

EXAMPLES = r"""
- name: Sync a workspace once per distinct directory
  ansible.posix.synchronize:
    src: files/workspace/
    dest: "{{ workspace }}/"
  when: (tokens | trainops.multinode.shared_dirs).primary[inventory_hostname] == inventory_hostname
  vars:
    tokens: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, ['checked', 'paths', 'workspace_token']))) }}"
"""

RETURN = r"""
_value:
  description: C(primary) (node to the node that acts for it), C(groups) (lists of nodes sharing a directory), C(shared).
  type: dict
  sample:
    primary: {node1: node1, node2: node1, node3: node3}
    groups: [[node1, node2]]
    shared: true
"""

from ansible_collections.trainops.multinode.plugins.module_utils import _launch_dirs
from ansible_collections.trainops.multinode.plugins.plugin_utils import _filter_input


def shared_dirs(tokens):
    tokens = _filter_input.mapping('shared_dirs', tokens, kind='a mapping of node name to directory token')
    return _launch_dirs.shared_dirs(tokens)


class FilterModule(object):
    def filters(self):
        return {'shared_dirs': shared_dirs}
