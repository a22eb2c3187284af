# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
---
module: resume
short_description: The steps of a resume from an earlier run's checkpoint, in the job role
version_added: 0.2.0
description:
  - Used by the role C(trainops.multinode.job) (roles/job/tasks/resume.yml, C(trainops_resume_from) and the retries
    of C(trainops_retries)); its interface may change with it.
  - Each step reads the role's variables it needs itself; C(__trainops_resume_from) (the run resumed),
    C(__trainops_node_dir) (its directory there is C(<node dir>/runs/<run id>)), C(__trainops_output_dir),
    C(__trainops_nodes), C(__trainops_experiment_dir), C(__trainops_pass_config) and C(trainops_ssh_mesh); and
    through C(hostvars) what the earlier steps registered on every node.
  - O(step=inspect) looks for the run and its checkpoint on the node (M(trainops.multinode.checkpoint_carry)).
  - O(step=carry) chooses the newest checkpoint across the nodes (the highest global step the resumed run's manifest
    on the controller records, read within bounds; else the youngest file) and fails on every node when no node has
    the run; a node with the checkpoint copies it into the new run's output directory (read for its sha256 on the
    node it goes on from). It returns the plan (RV(source), RV(receivers), RV(pull), ...) and what the node's ranks
    are told (RV(env), RV(args)).
  - O(step=pull) gets the copy over the nodes' SSH (C(trainops_ssh_mesh)); a failure is a warning, and the copy goes
    through the controller.
  - O(step=fetch) (run once, delegated to the source node) fetches the copy to the controller, into the new run's
    experiment (C(resumed/<node>/checkpoint.pt), in a directory only the user reads), when a node needs it there.
  - O(step=receive) sends that copy to the node, into the new run's output directory, its sha256 checked there.
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
      - The module M(trainops.multinode.checkpoint_carry) copies nothing in check mode.
options:
  step:
    description:
      - The step of the resume.
    type: str
    required: true
    choices: [inspect, carry, pull, fetch, receive]
seealso:
  - module: trainops.multinode.checkpoint_carry
"""

EXAMPLES = r"""
- name: Look for the run and its checkpoint on the node
  trainops.multinode.resume:
    step: inspect
  register: __trainops_resume_found

- name: Choose the newest checkpoint across the nodes and carry it into the new run's output directory
  trainops.multinode.resume:
    step: carry
  register: __trainops_resume
"""

RETURN = r"""
source:
  description: The node whose checkpoint is the newest, the source of the copies; null when no node has it.
  returned: step=carry
  type: str
by:
  description: How RV(source) was chosen, V(only), V(global_step) or V(mtime).
  returned: step=carry
  type: str
why:
  description: Why RV(source), in words.
  returned: step=carry
  type: str
with_run:
  description: The nodes that have the run, in rank order.
  returned: step=carry
  type: list
  elements: str
with_checkpoint:
  description: The nodes that have its checkpoint.
  returned: step=carry
  type: list
  elements: str
without_run:
  description: The nodes that do not have the run.
  returned: step=carry
  type: list
  elements: str
without_checkpoint:
  description: The nodes that do not have its checkpoint.
  returned: step=carry
  type: list
  elements: str
receivers:
  description: The nodes that get a copy of the source's checkpoint (with the config arguments only).
  returned: step=carry
  type: list
  elements: str
pull:
  description: The nodes that try the copy over the nodes' SSH first (C(trainops_ssh_mesh)).
  returned: step=carry
  type: list
  elements: str
recorded:
  description: C(checkpoint) and C(checkpoints) of the resumed run's manifest on the controller (null without it).
  returned: step=carry
  type: dict
env:
  description: What the node's ranks are told, C(TRAINOPS_RESUME_FROM) and C(TRAINOPS_PREVIOUS_WORLD_SIZE).
  returned: step=carry
  type: dict
args:
  description: The script's arguments, C(--override training.resume=true) with the config arguments.
  returned: step=carry
  type: list
  elements: str
carried:
  description: The node's copy in the new run's output directory (C(dest), C(checksum), C(size), C(method)); null
    when it carried none.
  returned: step=carry
  type: dict
msg:
  description: What the launch says it resumes.
  returned: step=carry
  type: str
via_controller:
  description: The nodes that get the copy through the controller.
  returned: step=fetch
  type: list
  elements: str
"""
