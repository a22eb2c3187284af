# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: run_launcher
short_description: What launched a run (over SSH, or as one Slurm step), from its nodes' own records
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - The one rule by which C(playbooks/stop.yml) and C(playbooks/status.yml) (roles/job C(stop), C(status), and
    C(collect), through the action M(trainops.multinode.launcher)) find the launcher's own part of a run, with or
    without C(run_id). The launchers are plugins/module_utils/_launchers.py.
  - The input is every node's C(job) as M(trainops.multinode.torchrun) returns it (C(state=query)), in node order. The
    run is the first node's that has one. It is a Slurm step's when its nodes' C(job.json) says C(launcher=srun); the
    step is the one the nodes' supervisors recorded from inside it (C(pids.json)), so neither C(run_id) nor the
    experiment's manifest is needed.
  - Nodes that recorded the same run in different steps, or whose run directories belong to different users, make the
    record C(refused) (no step). The launcher's part then says why and acts on nothing through Slurm, and a stop
    still stops the nodes' own torchrun.
positional: ''
options:
  _input:
    description:
      - Every node's C(job) (the torchrun module's RV(trainops.multinode.torchrun#module:job)), in node order.
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: The run's launcher
  ansible.builtin.set_fact:
    __launcher: "{{ nodes | map('extract', hostvars, ['queried', 'job']) | trainops.multinode.run_launcher }}"
  run_once: true
  # {name: srun, run_id: r1, job_id: '42', step_id: '3', step: '42.3', step_name: trainops-r1, owner_uid: 1001,
  #  refused: null, own_tasks: true}, or
  # {name: ssh, run_id: r1, job_id: null, step_id: null, step: null, step_name: null, owner_uid: null, refused: null,
  #  own_tasks: false}
"""

RETURN = r"""
_value:
  description: The run's launcher.
  type: dict
  contains:
    name:
      description: V(ssh) or V(srun).
      type: str
    run_id:
      description: The run, V(null) when no node has one.
      type: str
    job_id:
      description: The Slurm job (allocation) of the step (V(null) over SSH and before the step ran).
      type: str
    step_id:
      description: The step (V(null) over SSH and before the step ran).
      type: str
    step:
      description: C(JOB.STEP) (V(null) over SSH and before the step ran).
      type: str
    step_name:
      description: The step's name, C(trainops-<run_id>) (V(null) over SSH).
      type: str
    owner_uid:
      description:
        - The run's owner, the uid that owns its run directory on the nodes (V(null) over SSH). Slurm's job and step
          must belong to it (M(trainops.multinode.srun_step)).
      type: int
    refused:
      description: Why the nodes' records of the step are not acted on (they contradict each other), else V(null).
      type: str
    own_tasks:
      description:
        - Whether roles/job runs the launcher's own task files for the run (V(true) for a Slurm step's run once a node
          recorded the step, or when its records are refused; V(false) over SSH, whose nodes' own records are all there
          is).
      type: bool
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.module_utils._launchers import run_launcher as _run_launcher


def run_launcher(jobs):
    """The run's launcher (see DOCUMENTATION)."""
    if isinstance(jobs, (str, bytes, Mapping)) or not hasattr(jobs, '__iter__'):
        raise AnsibleFilterError('run_launcher: the input must be a list of the nodes\' job records, not %r' % (jobs, ))
    return _run_launcher([dict(job) if isinstance(job, Mapping) else job for job in jobs])


class FilterModule(object):
    """trainops.multinode.run_launcher."""

    def filters(self):
        return {'run_launcher': run_launcher}
