#!/usr/bin/python
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
module: sweep
short_description: Keep a parameter sweep's record, results table and plots
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - The controller side of C(playbooks/sweep.yml). A sweep is a grid of launch knobs; every point of the grid is an
    ordinary experiment directory, and the sweep directory C(sweep_<name>_<timestamp>/) holds C(sweep.json) (the
    grid, the points with their experiment directories and outcomes, the sweep's outcome), C(results.csv),
    C(results.md), C(results.json) and PNG plots.
  - With O(state=planned), creates the sweep directory and its C(sweep.json), or reopens O(sweep_dir) to resume it
    (the grid must be the same). It also checks that matplotlib can be imported, so a missing plotting library fails
    before any point starts.
  - With O(state=recorded), merges O(update) into point O(index) of C(sweep.json); a point set V(running) records
    the sweep's C(settings_id).
  - With O(state=reported), sets the sweep's outcome from its points, reads every point's figures from its experiment
    directory, writes the results files and the plots and returns the table.
  - Every write of C(sweep.json) goes through a temporary file and a rename, so an interrupted sweep (Ctrl-C) leaves
    the last complete record.
  - "Meant to run on the controller, for example with C(delegate_to: localhost) and C(run_once: true)."
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - trainops.multinode._attributes
attributes:
  check_mode:
    support: none
requirements:
  - matplotlib (on the controller)
options:
  state:
    description:
      - V(planned) creates or reopens the sweep directory.
      - V(recorded) updates one point.
      - V(reported) writes the results and plots.
    type: str
    choices: [planned, recorded, reported]
    required: true
  root:
    description:
      - Directory under which a new sweep directory is created (the experiments directory).
      - Required with O(state=planned) unless O(sweep_dir) is given.
    type: path
  name:
    description:
      - The sweep's name, part of its directory name C(sweep_<name>_<timestamp>).
    type: str
    default: sweep
  sweep:
    description:
      - 'The grid, a mapping of knob to a list of values, for example C({"channels": [28, 42], "threads": [256, 512]}).'
      - Required with O(state=planned).
    type: dict
  workload:
    description:
      - What each point runs, recorded in C(sweep.json) (V(train) or V(allreduce)).
    type: str
    default: train
  sweep_dir:
    description:
      - The sweep directory. With O(state=planned) an existing one is resumed; required with the other states.
    type: path
  index:
    description:
      - The point to update (1-based), with O(state=recorded).
    type: int
  update:
    description:
      - The keys to set on the point, with O(state=recorded), for example C(status), C(experiment_dir), C(outcome),
        C(outcome_detail).
    type: dict
  settings:
    description:
      - With O(state=planned), each node's launch settings (node to mapping; the action
        M(trainops.multinode.sweep_step) gives them, C(trainops_secret_env) as names only), recorded in
        C(sweep.json) as C(settings) (the values every node shares), C(node_settings) (the others, per node) and
        C(settings_id) (a digest; each point records the one it ran with, the results table shows it).
      - A resumed sweep keeps the settings it recorded; one whose C(sweep.json) has none records these.
    type: dict
  stopped:
    description:
      - With O(state=reported), the sweep stopped at a failed point (stop on failure); its outcome is then V(stopped).
    type: bool
    default: false
notes:
  - Plots use matplotlib's Agg backend and need no display.
seealso:
  - module: trainops.multinode.experiment
"""

EXAMPLES = r"""
- name: Create the sweep directory
  trainops.multinode.sweep:
    state: planned
    root: "{{ playbook_dir }}/../experiments"
    name: nccl
    sweep:
      channels: [28, 42]
      threads: [256, 512]
  delegate_to: localhost
  run_once: true
  register: planned

- name: Write the results table and plots
  trainops.multinode.sweep:
    state: reported
    sweep_dir: "{{ planned.path }}"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
path:
  description: The sweep directory.
  returned: always
  type: str
  sample: /home/me/trainops/experiments/sweep_nccl_20261123_190000
resumed:
  description: Whether O(state=planned) reopened an existing sweep directory.
  returned: when O(state=planned)
  type: bool
settings_recorded:
  description: Whether O(state=planned) resumed a sweep whose C(sweep.json) had no settings and recorded O(settings).
  returned: when O(state=planned)
  type: bool
points:
  description: The points of the sweep, each with C(index), C(label), C(values), C(status), C(experiment_dir),
    C(outcome), C(outcome_detail).
  returned: when O(state=planned) or O(state=reported)
  type: list
  elements: dict
point:
  description: The updated point.
  returned: when O(state=recorded)
  type: dict
outcome:
  description: The sweep's outcome, V(succeeded), V(failed) or V(stopped).
  returned: when O(state=reported)
  type: str
table:
  description: The results table as aligned lines.
  returned: when O(state=reported)
  type: list
  elements: str
files:
  description: The files written in the sweep directory.
  returned: when O(state=reported)
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainops.multinode.plugins.module_utils._sweep import SweepError
from ansible_collections.trainops.multinode.plugins.module_utils._sweep_task import ARGUMENT_SPEC, REQUIRED_IF, run


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, required_if=REQUIRED_IF, supports_check_mode=False)
    try:
        result = run(module.params)
    except SweepError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
