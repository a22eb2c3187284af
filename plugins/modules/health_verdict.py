#!/usr/bin/python
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
---
module: health_verdict
short_description: The health check's first step on each node and its verdict, from the check that ran in the play
version_added: 0.3.0
description:
  - Runs on the controller (an action plugin) as steps of the health check of the role C(trainops.multinode.job)
    (tasks health_check.yml). Used by that role; its input may change with it.
  - The check before an attempt (C(trainops_health_check)) is the one given C(__trainops_health_spares), the spare
    nodes to check besides the attempt's nodes (unless O(gate) says otherwise).
  - O(step=begin), on each node before the check's steps, gives the nodes to check in rank order (C(__trainops_order); before
    an attempt, the attempt's nodes then the spare nodes, as P(trainops.multinode.node_order#filter) ranks them), the
    C(trainops_health_*) settings checked (one message naming every knob out of range, before the node is touched)
    and the search with nothing measured, as P(trainops.multinode.health_search#filter) starts it, the same on every
    node. Before an attempt it keeps the launch's facts the check's steps set again, its rank order and its attempt
    (RV(restore)), to give them back after the check, and says which nodes it checks. Then it reads the node's
    accelerator and NIC state (M(trainops.multinode.node_health), O(step=begin) returns its result).
  - O(step=verdict), once (C(run_once)) after the check's steps, judges the check from the search's measurements and
    every node's state as M(trainops.multinode.health_report) does, writes C(health.json) in the check's directory and
    prints the tables and the verdict. It fails only when no check ran or C(health.json) cannot be written;
    RV(failure) says why the play stops.
  - The check (playbooks/health.yml) publishes C(trainops_health) (C(verdict), C(suspects), C(file)) for
    ansible-runner and CI, as M(ansible.builtin.set_stats) would; its RV(failure) names the suspect nodes.
  - Before an attempt, registered where O(step=begin) was, it returns what each node sets again after the check
    (RV(restore), what each node's O(step=begin) kept, also when it fails), and works out the attempt's nodes
    (P(trainops.multinode.health_gate#filter)'s rule,
    C(plugins/module_utils/_retries.py)), and its RV(failure) says why the attempt does not start when the check names no
    node to leave out or too few nodes are left.
  - 'It reads these variables of the play: with O(step=begin), C(__trainops_order), C(__trainops_health_name) (the
    check''s name), C(trainops_health_min_busbw), C(trainops_health_slow_ratio), C(trainops_health_all_pairs_max),
    C(trainops_health_timeout), C(trainops_health_ignore); before an attempt C(__trainops_nodes),
    C(__trainops_health_spares), C(__trainops_attempt), C(__trainops_run_id), and the launch''s facts
    (C(__trainops_preflight), C(__trainops_git_ref), C(__trainops_nccl), C(__trainops_experiment),
    C(__trainops_root_shares), C(__trainops_workspace_shares)). With O(step=verdict), C(__trainops_health) (the search,
    P(trainops.multinode.health_search#filter)), C(__trainops_health_dir) (the check''s directory), each node''s
    C(__trainops_health_check) (O(step=begin)''s result); before an attempt, C(__trainops_nodes),
    C(__trainops_health_spares), C(__trainops_attempt), C(trainops_min_nodes) and C(trainops_spare_nodes).'
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
      - In check mode O(step=verdict) judges nothing and writes nothing (nothing was measured).
options:
  step:
    description:
      - V(begin) on each node before the check's steps, V(verdict) once after them.
    type: str
    choices: [begin, verdict]
    default: verdict
  gate:
    description:
      - Whether it is the check before an attempt, in the launch's play. Default, whether C(__trainops_health_spares)
        is defined.
    type: bool
seealso:
  - module: trainops.multinode.health_report
  - module: trainops.multinode.node_health
"""

EXAMPLES = r"""
- name: The settings, the nodes in rank order and each node's accelerator and NIC state
  trainops.multinode.health_verdict:
    step: begin
  register: __trainops_health_check

- name: Show the tables and the verdict, write health.json, publish the verdict
  trainops.multinode.health_verdict:
  run_once: true
  register: report

- name: Fail naming the suspect nodes
  ansible.builtin.fail:
    msg: "{{ report.failure }}"
  when: report.failure | length > 0
  run_once: true
"""

RETURN = r"""
health:
  description: The node's accelerator and NIC state (M(trainops.multinode.node_health)'s C(health)).
  returned: step=begin, on a node to check
  type: dict
order:
  description:
    - With O(step=begin), the nodes to check in rank order (C(nodes), C(master), C(master_addr), C(ranks),
      C(flagged)).
    - With O(step=verdict) before an attempt, the attempt's nodes in rank order from here on, where they change.
  returned: step=begin; step=verdict before an attempt when RV(changes)
  type: dict
search:
  description: The search with nothing measured (P(trainops.multinode.health_search#filter)'s state; C(steps), the
    steps of the check's loop).
  returned: step=begin
  type: dict
name:
  description: The name of the check's directory before its time.
  returned: step=begin
  type: str
restore:
  description:
    - What each node sets again after the check before an attempt, by node; empty for the check of
      playbooks/health.yml.
    - With O(step=begin), this node's launch's facts (C(__trainops_preflight), C(__trainops_git_ref),
      C(__trainops_nccl), C(__trainops_experiment), C(__trainops_root_shares), C(__trainops_workspace_shares)), its
      rank order (C(__trainops_order)) and attempt (C(__trainops_next_attempt)) as they are.
    - With O(step=verdict), each node's, with the attempt and its rank order from here on where RV(changes).
  returned: step=begin; step=verdict before an attempt
  type: dict
gate:
  description:
    - With O(step=begin), whether it is the check before an attempt.
    - With O(step=verdict) before an attempt, the attempt's nodes after the check, as
      P(trainops.multinode.health_gate#filter) returns them.
  returned: always
  type: raw
verdict:
  description: 'V(healthy) or C(suspect: <node> (<reason>); ...).'
  returned: step=verdict
  type: str
  sample: "suspect: node-3 (3 of its 3 pair(s) slow)"
healthy:
  description: Whether no node is suspect.
  returned: step=verdict
  type: bool
suspects:
  description: The suspects, C(node) and C(reason) each.
  returned: step=verdict
  type: list
  elements: dict
lines:
  description: The per-node table, the per-group table and the verdict (before an attempt, what the attempt does about
    it).
  returned: step=verdict
  type: list
  elements: str
file:
  description: The path of C(health.json).
  returned: step=verdict
  type: str
failure:
  description: 'Why the play stops, or empty. The check of playbooks/health.yml, C(<verdict> (see <file>)) when a node
    is suspect; before an attempt, C(Not starting attempt <n>: <why>).'
  returned: step=verdict
  type: str
changes:
  description: Whether a node of the attempt or a spare node leaves it.
  returned: step=verdict, before an attempt
  type: bool
leaving:
  description: The nodes and spare nodes that leave the play.
  returned: step=verdict, before an attempt
  type: list
  elements: str
attempt:
  description: The attempt from here on (its spare nodes left, the nodes replaced so far), where it changes.
  returned: step=verdict, before an attempt when RV(changes)
  type: dict
"""
