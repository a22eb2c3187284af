#!/usr/bin/python
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
module: launcher
short_description: Run one step of the launcher's lifecycle (start, undo, stop, status) over the role job's variables
version_added: 0.3.0
author:
  - trainops maintainers (@trainops)
description:
  - An action of the role C(trainops.multinode.job) (tasks C(run_job.yml), C(stop.yml) and C(status.yml));
    not meant for playbooks of their own. It reads the role's variables itself, among them C(trainops_launcher), C(__trainops_nodes),
    C(__trainops_run_id), C(__trainops_abs_state_dir), C(trainops_node_id), the torchrun knobs, and each node's
    registered C(__trainops_started), C(__trainops_launch) and C(__trainops_undo_away) through C(hostvars).
  - The launcher (V(ssh), V(srun)) decides what each step does (C(plugins/module_utils/_launchers.py)); the flow is
    C(plugins/module_utils/_launcher_steps.py).
  - V(node_start) runs M(trainops.multinode.torchrun) on the node, with O(ignore:state=started) or, for a launcher that
    starts the node's supervisor itself, O(ignore:state=prepared).
  - V(start), on the controller once, fails naming the nodes where the start failed or that left the play; else runs
    the launcher's own start (M(trainops.multinode.srun_step) for V(srun)).
  - V(node_started) waits until the launcher runs the node's supervisor; then M(trainops.multinode.experiment) with
    O(trainops.multinode.experiment#module:state=launched) fails naming the nodes where it does not run.
  - V(node_undo), V(undo) (on the controller once) and V(node_undo_after) undo a failed launch; V(undo) sets the facts
    C(__trainops_undo_error), C(__trainops_launch_cause) and C(__trainops_undo_note).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - trainops.multinode._attributes
attributes:
  check_mode:
    support: full
options:
  part:
    description:
      - The step.
    type: str
    required: true
    choices: [node_start, start, node_started, node_undo, undo, node_undo_after, node_query, run, node_stop, stop,
              node_stopped, stopped]
  control:
    description:
      - With O(part=node_query) and O(part=run), the entry point (V(status) reads the log's last lines and reports).
    type: str
    choices: [status, stop]
  node:
    description:
      - With O(part=node_undo) delegated to another node, that node (its paths and node id).
    type: str
"""

EXAMPLES = r"""
- name: Start torchrun on the node through the launcher
  trainops.multinode.launcher:
    part: node_start
  register: __trainops_started
"""

RETURN = r"""
not_started:
  description: With O(part=start), the nodes where the job did not start, and why.
  type: dict
  returned: with part=start
  sample: {n2: could not be reached during the start}
lines:
  description: With O(part=run) and O(control=status), the job on every node; with O(part=stopped), what was stopped.
  type: list
  elements: str
  returned: with part=run and control=status, part=stopped
nodes:
  description: With O(part=run), the run's nodes in rank order.
  type: list
  elements: str
  returned: with part=run
refused:
  description: With O(part=stopped), why the stop did not go through the launcher (empty when it did).
  type: str
  returned: with part=stopped
"""
