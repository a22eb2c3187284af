# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: sbatch_problems
short_description: The settings of the sbatch role that do not fit, one line each
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - Used by the role C(trainops.multinode.sbatch) on the controller, before the batch script is written or
    submitted; its input may change with the role.
  - 'Returns one line per value that is wrong, naming the variable and its value (as Python writes it, so a newline
    shows as C(\n)), what it must be and an example; a value that fits is not mentioned, so an empty list means every
    value fits.'
  - The job name must be one file name component of letters, digits, C(.), C(_), C(+) and C(-) (it is an C(#SBATCH)
    line and names the script's files); each extra option one C(--name=value) or C(-x value) without whitespace in
    the value and without a control character, and not one the role sets itself or that breaks the job
    (C(--job-name), C(--nodes), C(--output), C(--signal), C(--requeue), C(--no-requeue), C(--wrap), C(--parsable),
    C(--wait), also abbreviated, and C(-J), C(-N), C(-o), C(-W)); the output path without whitespace or control
    characters; the nodes an integer of at least 1, the stop seconds one from 1 to 65535, the checkpoint seconds one
    from 0 to less than the stop seconds; the paths the script names without control characters.
options:
  _input:
    description:
      - The role's variables by name (C(trainops_sbatch_job_name), C(trainops_sbatch_options),
        C(trainops_sbatch_output), C(trainops_sbatch_nodes), C(trainops_sbatch_stop_seconds),
        C(trainops_sbatch_checkpoint_seconds), C(trainops_sbatch_dir),
        C(trainops_sbatch_inventory), C(trainops_sbatch_playbook), C(trainops_sbatch_stop_playbook),
        C(trainops_sbatch_ansible_playbook)); one left out is not checked.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: List the settings that do not fit
  ansible.builtin.set_fact:
    problems: "{{ {'trainops_sbatch_job_name': 'a/b', 'trainops_sbatch_nodes': 0} | trainops.multinode.sbatch_problems }}"
"""

RETURN = r"""
_value:
  description: One line per value that does not fit, in a fixed order; empty when all fit.
  type: list
  elements: str
  sample:
    - "trainops_sbatch_nodes=0: the nodes to allocate must be an integer of at least 1 (e.g. -e trainops_sbatch_nodes=4)"
"""

from ansible_collections.trainops.multinode.plugins.module_utils._sbatch import sbatch_problems as _problems
from ansible_collections.trainops.multinode.plugins.plugin_utils import _filter_input


def sbatch_problems(params):
    params = _filter_input.mapping('sbatch_problems', params, kind='a mapping of variable to value')
    return _problems(params)


class FilterModule(object):
    def filters(self):
        return {'sbatch_problems': sbatch_problems}
