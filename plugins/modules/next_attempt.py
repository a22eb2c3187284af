# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
---
module: next_attempt
short_description: The node set of a launch's attempt when a retry or the failures gate changes it
version_added: 0.2.0
description:
  - Used by the role C(trainops.multinode.job) (roles/job/tasks/next_attempt.yml, C(trainops_retries) and
    C(trainops_exclude_after)); its interface may change with it. Runs on the controller only.
  - It reads the role's variables it needs itself; C(__trainops_attempt), C(__trainops_order), C(__trainops_nodes),
    C(__trainops_run_id), C(__trainops_experiment_dir), C(__trainops_report) (the collect's decision),
    C(__trainops_master_host), C(__trainops_master_addr), C(trainops_retries), C(trainops_exclude_after),
    C(trainops_experiments_dir), C(trainops_min_nodes), C(trainops_spare_nodes), C(trainops_check_reachability),
    C(trainops_master_port), C(trainops_socket_ifname), C(trainops_reach_timeout), C(trainops_run_name),
    C(trainops_channels), C(trainops_threads) and C(ansible_inventory_sources).
  - O(state=planned) gives the attempt and its nodes' order. For a retry (the collect of this attempt decided to
    retry it) the next attempt resumes this one, on the retry's node set. Else, before the first attempt, the nodes
    that failed too often in earlier launches of the same inventory are left out (the file C(node_failures.json) in
    the experiments directory); the task shows what the file holds and fails when too few nodes are left.
  - O(state=planned) runs on every node (the same plan on each). Where the master may have moved, each node of the
    attempt then checks that it reaches its master's port (M(trainops.multinode.preflight)'s reach check, the master
    waiting for them all; C(trainops_check_reachability), not in check mode) and returns what it found
    (RV(reach_again)).
  - O(state=started) fails, naming the nodes, when a node of the attempt did not reach its master
    (RV(reach_again) of each node's O(state=planned), registered as C(__trainops_nodes_plan)); for a retry it then
    creates the next attempt's experiment directory, links the previous attempt's manifest to it (C(next)) and says what is retried. It returns
    the attempt's experiment (the one it has, or the retry's new one).
  - This module is implemented as an action plugin; the module file only holds the documentation.
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
    support: full
    details:
      - In check mode O(state=started) creates and links nothing.
options:
  state:
    description:
      - V(planned) gives the attempt's node set, V(started) checks it and creates a retry's experiment.
    type: str
    required: true
    choices: [planned, started]
seealso:
  - module: trainops.multinode.experiment
"""

EXAMPLES = r"""
- name: The attempt's nodes, spare nodes and master
  trainops.multinode.next_attempt:
    state: planned
  register: __trainops_nodes_plan
"""

RETURN = r"""
retry:
  description: Whether it is a retry's next attempt.
  returned: state=planned
  type: bool
differs:
  description: Whether the attempt or its node set differs from the one before.
  returned: state=planned
  type: bool
attempt:
  description: The attempt (C(number), C(first), C(previous), C(previous_dir), C(rows), C(resume_from), C(spares),
    C(replaced)).
  returned: state=planned
  type: dict
order:
  description: The nodes' order (C(nodes), C(master), C(master_addr), C(ranks), C(flagged); filter
    P(trainops.multinode.node_order#filter)).
  returned: state=planned
  type: dict
leave:
  description: The hosts that leave the play (the nodes left out, the spares that failed too often).
  returned: state=planned
  type: list
  elements: str
reach:
  description: Whether every node of the attempt checks again that it reaches its master.
  returned: state=planned
  type: bool
reach_again:
  description: What this node's reach check found (M(trainops.multinode.preflight)'s result, its C(problems)).
  returned: state=planned, on a node of the attempt where the master may have moved
  type: dict
wait_label:
  description: The wait's label, C(attempt 2/3) for a retry.
  returned: state=planned
  type: str
lines:
  description: What the failures gate says, one line each.
  returned: state=planned
  type: list
  elements: str
path:
  description: The attempt's experiment directory.
  returned: state=started
  type: str
name:
  description: Its name, the run id.
  returned: state=started
  type: str
"""
