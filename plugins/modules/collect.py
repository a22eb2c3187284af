# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
---
module: collect
short_description: The node's part of the collect in the job role - stop when needed, final state, fetch its files
version_added: 0.3.0
description:
  - Used by the role C(trainops.multinode.job) (roles/job/tasks/collect.yml); not meant for playbooks of their own.
  - It reads the role's variables itself; C(trainops_collect_state_dir), C(trainops_collect_run_id),
    C(trainops_collect_experiment_dir), C(trainops_collect_nodes), C(trainops_collect_patterns), C(trainops_node_id),
    C(trainops_stop_timeout), C(trainops_log_lines), C(trainops_profile), and through C(hostvars) every node's
    C(__trainops_run_error) and this node's C(__trainops_waited) (the wait's verdict).
  - When a node of the play failed (its C(__trainops_run_error)), it first stops the job on this node
    (M(trainops.multinode.torchrun), O(trainops.multinode.torchrun#module:state=stopped)); the reason comes from this
    node's verdict, the detail from the first failed node's error. A node the wait stopped keeps its first reason.
  - It reads the node's final job state (M(trainops.multinode.torchrun), O(trainops.multinode.torchrun#module:state=query))
    and returns it.
  - It lists the node's outputs (C(<run dir>/outputs), the files that match C(trainops_collect_patterns)) and, with
    C(profile=...), its profiles (C(<run dir>/profiles), recursively) with M(ansible.builtin.find). Only regular files
    are listed; symbolic links are neither listed nor followed.
  - Each file lands in its own place in the experiment - the log in C(logs/node_<node rank>.txt), outputs in
    C(outputs/<node>/), profiles in C(profiles/<node>/), paths below the node's directory kept. The node's paths are
    not trusted. A path that would leave the node's place is refused and named, with the node, in RV(collected);
    nothing is written for it. The rest is fetched (M(ansible.builtin.fetch); a file gone from the node is left out).
  - The node's answers are returned as unsafe text, never templated again.
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
      - The stop and the fetch follow their modules' check mode.
options: {}
seealso:
  - module: trainops.multinode.torchrun
  - module: trainops.multinode.experiment
"""

EXAMPLES = r"""
- name: Read the node's final job state and fetch its log, outputs and profiles into the experiment
  trainops.multinode.collect:
  register: __trainops_final
"""

RETURN = r"""
job:
  description: The node's final job (M(trainops.multinode.torchrun)'s query).
  returned: success
  type: dict
log_tail:
  description: The last lines of the node's log.
  returned: success
  type: list
  elements: str
stopped:
  description: The stop of the job on the node (M(trainops.multinode.torchrun)'s answer), null when none was needed.
  returned: success
  type: dict
collected:
  description:
    - Where each file lands, per kind (log, outputs, then profiles with C(profile=...)) - its C(files) (C(src) on the
      node, C(dest) on the controller) and the lines of what was C(refused).
  returned: success
  type: list
  elements: dict
  sample: [{files: [{src: /home/u/.cache/trainops/n1/runs/r1/node.log, dest: /home/u/experiments/r1/logs/node_1.txt}],
            refused: []}]
fetched:
  description: How many files were fetched (changed on the controller).
  returned: success
  type: int
"""
