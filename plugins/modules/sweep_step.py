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
  - V(settings), on every node, before the launch is validated. The node's launch settings (what every point shares
    besides the swept knobs); a resume (C(sweep_dir)) takes them from C(sweep.json) and lists a setting given again
    with another value as a problem. RV(vars) are the role variables the role then sets (the all-reduce benchmark's
    with C(workload=allreduce), a resume's recorded settings, a resume's secrets from the controller's environment;
    the result is then hidden as with C(no_log)).
  - V(points), once, before any node is touched. Fails with one message for every node's problems (C(Not resuming
    the sweep:), C(Not starting the sweep:)); else the points, each with the launch values it runs with.
  - V(planned), once. Creates the sweep directory and its C(sweep.json), or reopens C(sweep_dir) to resume it; checks
    that matplotlib can be imported.
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
    choices: [settings, points, planned, started, finished, reported]
    required: true
notes:
  - Every write of C(sweep.json) goes through a temporary file and a rename, so an interrupted sweep (Ctrl-C) leaves
    the last complete record.
seealso:
  - module: trainops.multinode.sweep
"""

EXAMPLES = r"""
- name: Work out the sweep's launch settings on every node; a resume takes them from sweep.json
  trainops.multinode.sweep_step:
    step: settings
  register: __trainops_sweep_settings
"""

RETURN = r"""
vars:
  description: With O(step=settings), the role variables to set on this node (variable to value).
  returned: with O(step=settings)
  type: dict
settings:
  description: With O(step=settings), this node's launch settings as C(sweep.json) records them (secrets by name).
  returned: with O(step=settings)
  type: dict
problems:
  description: With O(step=settings), what a resume may not take on this node.
  returned: with O(step=settings)
  type: list
  elements: str
points:
  description: The points, each with C(index), C(label), C(values), C(params) (the launch values) and C(vars) (the
    role variables the point sets).
  returned: with O(step=points)
  type: list
  elements: dict
path:
  description: The sweep directory.
  returned: with O(step=planned)
  type: str
  sample: /home/me/trainops/experiments/sweep_nccl_20261123_190000
todo:
  description: The points to run (those C(sweep.json) does not record as succeeded), as in RV(points).
  returned: with O(step=planned)
  type: list
  elements: dict
lines:
  description: What the play shows, the sweep's plan (O(step=planned)) or its results table (O(step=reported)).
  returned: with O(step=planned) and O(step=reported)
  type: list
  elements: str
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
