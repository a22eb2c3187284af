# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
---
module: launch_plan
short_description: The launch plan of the job role - knobs, ranks and master, checks across nodes - on the controller
version_added: 0.4.0
description:
  - Runs on the controller (an action plugin); only O(step=preflight) runs a module on the node, which only reads.
    Nothing changes anywhere. Used by the role
    C(trainops.multinode.job); its options and results may change with it.
  - Each step reads the role's variables it needs itself, each templated once, and sets what it finds as facts of the
    play's hosts. A step fails with one line per value to fix, before anything is touched.
  - O(step=knobs), on every node - the short C(-e) knobs over their C(trainops_) variables (the knob registry,
    C(plugins/module_utils/_knobs.py)) and the launch parameters of the node that do not fit
    (fact C(__trainops_launch_problems)). In a sweep (C(__trainops_sweeping) true, in C(playbooks/sweep.yml)), the
    sweep's launch settings first (the all-reduce benchmark's with C(workload=allreduce); a resume takes them from
    C(sweep.json), its secrets from the controller's environment, and the result is then hidden as with C(no_log)),
    as RV(sweep).
  - O(step=nodes), once - the problems of the first step of every node, merged; the rank order, the master and its
    address (C(__trainops_order), filter P(trainops.multinode.node_order#filter)) and the spare nodes
    (C(__trainops_spare_pool)). In a sweep, then one message for every node's sweep problems (C(Not resuming the
    sweep:), C(Not starting the sweep:)), else the points (RV(points)).
  - O(step=preflight), on every node - runs M(trainops.multinode.preflight) on the node with the options the role's
    variables and the node's rank give (the master port on node rank 0, the reach check on every node of the job),
    and adds RV(unmarked).
  - O(step=checks), once, after every node's M(trainops.multinode.preflight) (C(__trainops_preflight)) and NCCL/RCCL
    environment - the checks across nodes (torch, code, profiler) and the nodes that left the play; shows how every
    node reaches the master and the NCCL/RCCL table.
  - O(step=in_play), once - fails naming the nodes of the job that left the play (O(since) says when).
  - O(step=shares), once - the nodes that share their node root, workspace or state directory (C(root),
    C(workspace), C(state); the role's C(__trainops_root_shares) and C(__trainops_workspace_shares)). Two nodes with
    one state directory fail it.
  - 'Variables read: the knobs'' C(trainops_) variables and short names, C(trainops_sync_workspace),
    C(trainops_sync_rsync_opts), C(trainops_pass_config_args), C(trainops_slurm_*), C(trainops_nodes_group),
    C(trainops_spare_nodes), C(trainops_min_nodes), C(trainops_retries), C(trainops_exclude_after),
    C(trainops_git_check), C(trainops_git_reference), C(trainops_allow_dirty), C(trainops_profile),
    C(trainops_check_reachability), C(trainops_replace), C(__trainops_order), C(__trainops_spare_pool),
    C(__trainops_nccl_cluster), the preflight''s options (C(trainops_python), C(trainops_socket_ifname), ...),
    C(hostvars), C(groups) and the play''s hosts; in a sweep C(__trainops_sweeping), the sweep''s knobs (C(sweep),
    C(sweep_name), C(sweep_dir), C(workload), C(stop_on_failure) and their C(trainops_sweep*) role variables),
    C(run_name), C(__trainops_allreduce_args), C(__trainops_plan_knobs) of every node and
    C(__trainops_launch_params).'
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
      - It only reads.
options:
  step:
    description:
      - Which step of the plan.
    type: str
    required: true
    choices: [knobs, nodes, preflight, checks, in_play, shares]
  nodes:
    description:
      - With O(step=nodes), the nodes to order; the members of C(trainops_nodes_group) when not given.
    type: list
    elements: str
  spares:
    description:
      - With O(step=nodes), take the spare nodes (C(trainops_spare_nodes)) and C(trainops_min_nodes) into account.
    type: bool
    default: false
  since:
    description:
      - With O(step=in_play), what the nodes went through, for the message.
    type: str
    default: before the start
seealso:
  - module: trainops.multinode.preflight
  - module: trainops.multinode.nccl_env
"""

EXAMPLES = r"""
- name: Plan - the knobs over the trainops_ variables and this node's values that do not fit
  trainops.multinode.launch_plan:
    step: knobs

- name: Plan - ranks, the master and the spare nodes; fail on any value that does not fit
  trainops.multinode.launch_plan:
    step: nodes
    spares: true
  run_once: true
"""

RETURN = r"""
msg:
  description: The lines to show (O(step=checks), O(step=shares)), or the problems of a step that failed.
  returned: when there is something to show
  type: raw
ansible_facts:
  description: What the step sets for the play's hosts (see the description).
  returned: success
  type: dict
changed:
  description: With O(step=knobs), the role variables to set on this node (variable to value).
  returned: with O(step=knobs)
  type: dict
sweep:
  description: With O(step=knobs) in a sweep, the node's sweep (C(name), C(sweep_dir), C(grid), C(workload),
    C(stop_on_failure)), its launch settings as C(sweep.json) records them (C(settings), secrets by name), what a
    resume may not take on this node (C(problems)) and an C(error) that ends the sweep on its own.
  returned: with O(step=knobs) in a sweep
  type: dict
points:
  description: With O(step=nodes) in a sweep, the points, each with C(index), C(label), C(values), C(params) (the
    launch values) and C(vars) (the role variables the point sets).
  returned: with O(step=nodes) in a sweep
  type: list
  elements: dict
unmarked:
  description: With O(step=preflight), the node root and synced workspace without a directory token, which the
    role marks once every check passed (M(trainops.multinode.dir_token)).
  returned: with O(step=preflight)
  type: list
  elements: str
"""
