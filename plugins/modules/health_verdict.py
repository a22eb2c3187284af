#!/usr/bin/python
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
---
module: health_verdict
short_description: The health check's verdict, from the check that ran in the play
version_added: 0.3.0
description:
  - Runs on the controller (an action plugin), once (C(run_once)), after the health check's steps of the role
    C(trainops.multinode.job) (tasks health_steps.yml). Used by that role; its input may change with it.
  - Judges the check from the search's measurements and every node's facts as M(trainops.multinode.health_report)
    does, writes C(health.json) in the check's directory and prints the tables and the verdict.
  - Without O(gate) (playbooks/health.yml) it publishes C(trainops_health) (C(verdict), C(suspects), C(file)) for
    ansible-runner and CI, as M(ansible.builtin.set_stats) would.
  - With O(gate=true) (the check before an attempt, C(trainops_health_check)) it works out the attempt's nodes
    (P(trainops.multinode.health_gate#filter)'s rule, C(plugins/module_utils/_retries.py)) and fails, starting nothing,
    when the check names no node to leave out or too few nodes are left.
  - 'It reads these variables of the play: C(__trainops_health) (the search, P(trainops.multinode.health_search#filter)),
    C(__trainops_health_dir) (the check''s directory), each node''s C(__trainops_health_node)
    (M(trainops.multinode.node_health)); with O(gate),
    C(__trainops_nodes), C(__trainops_health_spares), C(__trainops_attempt), C(trainops_min_nodes) and
    C(trainops_spare_nodes).'
author:
  - trainops maintainers (@trainops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - trainops.multinode._attributes
  - ansible.builtin.action_common_attributes.flow
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: none
options:
  gate:
    description:
      - The check before an attempt, in the launch's play.
    type: bool
    default: false
seealso:
  - module: trainops.multinode.health_report
  - module: trainops.multinode.node_health
"""

EXAMPLES = r"""
- name: Show the tables and the verdict, write health.json, publish the verdict
  trainops.multinode.health_verdict:
  run_once: true
  register: report
"""

RETURN = r"""
verdict:
  description: 'V(healthy) or C(suspect: <node> (<reason>); ...).'
  returned: always
  type: str
  sample: "suspect: node-3 (3 of its 3 pair(s) slow)"
healthy:
  description: Whether no node is suspect.
  returned: always
  type: bool
suspects:
  description: The suspects, C(node) and C(reason) each.
  returned: always
  type: list
  elements: dict
lines:
  description: The per-node table, the per-group table and the verdict (with O(gate), what the attempt does about it).
  returned: always
  type: list
  elements: str
file:
  description: The path of C(health.json).
  returned: always
  type: str
gate:
  description: The attempt's nodes after the check, as P(trainops.multinode.health_gate#filter) returns them.
  returned: with O(gate)
  type: dict
changes:
  description: Whether a node of the attempt or a spare node leaves it.
  returned: with O(gate)
  type: bool
leaving:
  description: The nodes and spare nodes that leave the play.
  returned: with O(gate)
  type: list
  elements: str
"""
