# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
---
module: sweep_step
short_description: One step of a parameter sweep, from the play's variables (playbooks/sweep.yml)
version_added: 0.2.0
description:
  - The controller's steps of C(playbooks/sweep.yml) (the role C(trainops.multinode.job), task files C(sweep.yml) and
    C(point.yml)). Runs on the controller only, without a connection to the node; its variables may change with the
    role. To keep a sweep's record from your own tasks, use M(trainops.multinode.sweep).
  - Each step reads the variables it needs from the play itself (the sweep's knobs C(sweep), C(sweep_name),
    C(sweep_dir), C(workload), C(stop_on_failure), the launch's knobs, and the results of the steps before it, which
    the role registers), so the task passes nothing but O(step).
  - The sweep's launch settings (a resume's from C(sweep.json)) and its points are worked out with the launch's
    validation, by M(trainops.multinode.launch_plan) (its knobs and nodes steps in a sweep).
  - V(planned), once. Creates the sweep directory and its C(sweep.json), or reopens C(sweep_dir) to resume it; checks
    that matplotlib can be imported; shows the sweep's plan.
  - V(started), once a point's experiment directory exists. Records the point as running in C(sweep.json).
  - V(finished), once a point ended. Records its outcome (from its experiment's C(manifest.json), read within bounds),
    shows it, and says whether the sweep stops here (C(stop_on_failure)).
  - V(reported), at the end. Writes the results table, C(results.csv), C(results.md), C(results.json) and the plots,
    and publishes C(trainops_sweep) for ansible-runner (as M(ansible.builtin.set_stats) would).
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
requirements:
  - matplotlib (on the controller)
options:
  step:
    description:
      - Which step.
    type: str
    choices: [planned, started, finished, reported]
    required: true
notes:
  - Every write of C(sweep.json) goes through a temporary file and a rename, so an interrupted sweep (Ctrl-C) leaves
    the last complete record.
seealso:
  - module: trainops.multinode.sweep
"""

EXAMPLES = r"""
- name: Create the sweep directory, or reopen it to resume (sweep_dir), and show the sweep's plan
  trainops.multinode.sweep_step:
    step: planned
  run_once: true
  register: __trainops_sweep_record
"""

RETURN = r"""
path:
  description: The sweep directory.
  returned: with O(step=planned)
  type: str
  sample: /home/me/trainops/experiments/sweep_nccl_20261123_190000
todo:
  description: The indexes of the points to run (those C(sweep.json) does not record as succeeded).
  returned: with O(step=planned)
  type: list
  elements: int
lines:
  description: The results table the play shows.
  returned: with O(step=reported)
  type: list
  elements: str
msg:
  description: The sweep's plan (O(step=planned)), shown without C(-v); a finished point's line (O(step=finished)).
  returned: with O(step=planned) and O(step=finished)
  type: raw
stop:
  description: Whether the sweep stops at this point (it failed, with C(stop_on_failure)), or stopped before it.
  returned: with O(step=finished)
  type: bool
outcome:
  description: The sweep's outcome, V(succeeded), V(failed) or V(stopped).
  returned: with O(step=reported)
  type: str
failure:
  description: The message naming the points that did not succeed; empty when all did.
  returned: with O(step=reported)
  type: str
"""
