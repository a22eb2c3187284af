# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: merge_problems
short_description: Join the problem lines of every node into one list, each line once
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - Takes, per node, a list of problem lines (such as P(trainops.multinode.launch_problems#filter) returns) and returns
    one list for a single message.
  - A line every node has is kept once, as it is (the value came from the command line or a group variable); a line
    only some nodes have is followed by their names, such as C(... on node1, node3) in parentheses. Lines keep the
    order they are first seen in.
options:
  _input:
    description:
      - A mapping of node name to its list of lines, in node order.
    type: dict
    required: true
seealso:
  - plugin: trainops.multinode.launch_problems
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Fail once, with every node's problems
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "{{ problems | join('\n') }}"
  run_once: true
  vars:
    problems: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'node_problems')))
                  | trainops.multinode.merge_problems }}"
"""

RETURN = r"""
_value:
  description: The lines, each once.
  type: list
  elements: str
  sample:
    - 'nproc=0: ranks per node (trainops_nproc_per_node) must be an integer from 1 to 256 (e.g. -e nproc=8)'
    - 'trainops_node_id=a/b: ... (on node1)'
"""

from ansible_collections.trainops.multinode.plugins.module_utils._launch_params import merge_problems as _merge
from ansible_collections.trainops.multinode.plugins.plugin_utils import _filter_input


def merge_problems(by_node):
    by_node = _filter_input.mapping('merge_problems', by_node, kind='a mapping of node name to its list of lines')
    return _merge(by_node)


class FilterModule(object):
    def filters(self):
        return {'merge_problems': merge_problems}
