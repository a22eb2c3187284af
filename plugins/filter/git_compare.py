# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: git_compare
short_description: Compare the git state of every node with a reference checkout
version_added: 0.1.0
author:
  - trainops maintainers (@trainops)
description:
  - Takes the git state of a reference checkout (the controller's, or one node's) and the states of the nodes, as
    M(trainops.multinode.git_state) returns them, and checks every node, not just the first.
  - A node fails when it is not a usable work tree (missing, not a repository, bare, git failed, no result), when it
    is on another branch or a detached HEAD while the reference is on a branch, when its commit differs, or when it
    has uncommitted changes unless O(allow_dirty). The reference fails when it is not a work tree, or dirty unless
    O(allow_dirty).
  - 'Returns C(ok), the C(problems) (C(<node>: <what>) strings) and a plain-text C(table) node | branch @ commit |
    dirty | verdict, the reference first, failing rows marked C(!).'
positional: per_node
options:
  _input:
    description:
      - The reference's git state (the C(git) of a registered M(trainops.multinode.git_state) result, or the whole
        result).
    type: raw
    required: true
  per_node:
    description:
      - A mapping of node name to its git state (or registered result), in the order the table lists them.
    type: dict
    required: true
  allow_dirty:
    description:
      - Accept uncommitted changes on the reference and the nodes.
    type: bool
    default: false
  reference_name:
    description:
      - The name of the reference in the table and the problems.
    type: str
    default: controller
seealso:
  - module: trainops.multinode.git_state
"""

EXAMPLES = r"""
- name: Read the controller's checkout
  trainops.multinode.git_state:
    path: /home/me/project
  register: controller_git
  delegate_to: localhost
  run_once: true

- name: Read every node's checkout
  trainops.multinode.git_state:
    path: /srv/project
  register: node_git

- name: Fail unless every node runs the controller's commit, with a table
  ansible.builtin.assert:
    that: compared.ok
    fail_msg: "{{ compared.table }}"
  vars:
    compared: >-
      {{ controller_git | trainops.multinode.git_compare(dict(ansible_play_hosts
         | zip(ansible_play_hosts | map('extract', hostvars, 'node_git')))) }}
  run_once: true
"""

RETURN = r"""
_value:
  description:
    - 'C(ok) (true when nothing failed), C(problems) (a list of C(<node>: <what>)) and C(table) (plain text).'
  type: dict
  sample:
    ok: false
    problems: ["node2: on branch feature (controller is on branch main)"]
    table: "  node        branch @ commit ..."
"""

from ansible_collections.trainops.multinode.plugins.module_utils._git_state import compare
from ansible_collections.trainops.multinode.plugins.plugin_utils import _filter_input


def git_compare(reference, per_node, allow_dirty=False, reference_name='controller'):
    per_node = _filter_input.mapping('git_compare', per_node, 'per_node', kind='a mapping of node name to git state')
    ok, problems, table = compare(reference, dict(per_node), allow_dirty=bool(allow_dirty),
                                  reference_name=str(reference_name))
    return dict(ok=ok, problems=problems, table=table)


class FilterModule(object):
    def filters(self):
        return {'git_compare': git_compare}
