# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: health_measurement
short_description: One measurement of the health check, from a run's manifest and its allreduce.json
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - The rule the role C(trainops.multinode.job) applies to each measurement of its health check (through
    P(trainops.multinode.health_search#filter), which reads the manifest itself); its input may change with it.
  - The measurement is ok when the manifest's outcome is V(succeeded), the results were read and no element was wrong;
    its bus bandwidth is the results' C(avg_busbw_gbps), its time the last size's C(time_us).
  - The results are the C(outputs/<node>/allreduce.json) of the node of rank 0 in the run's experiment directory, which
    the job wrote; they are read within bounds (size, nesting, numbers), and one that breaks them is the measurement's error,
    naming the node and the file.
positional: manifest, experiment_dir
options:
  _input:
    description: The group's nodes, the master first.
    type: list
    elements: str
    required: true
  manifest:
    description: The run's manifest.json (C(outcome), C(outcome_detail)).
    type: dict
    required: true
  experiment_dir:
    description: The run's experiment directory, V(null) when there is none.
    type: str
"""

EXAMPLES = r"""
- name: Add the measurement
  ansible.builtin.set_fact:
    measured: "{{ measured + [group | trainops.multinode.health_measurement(manifest, experiment_dir)] }}"
"""

RETURN = r"""
_value:
  description: C(nodes), C(ok), C(busbw_gbps), C(time_us), C(experiment_dir), C(error).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.module_utils._experiment import read_rank_zero_json
from ansible_collections.trainops.multinode.plugins.module_utils._health import measurement


def health_measurement(nodes, manifest, experiment_dir=None):
    if not isinstance(nodes, (list, tuple)) or not nodes:
        raise AnsibleFilterError('health_measurement: the input must be the list of the group\'s nodes, got %r' % (nodes,))
    results, refused = read_rank_zero_json(experiment_dir, 'allreduce.json') if experiment_dir else (None, [])
    return measurement(nodes, manifest, results, experiment_dir, refused)


class FilterModule(object):
    def filters(self):
        return {'health_measurement': health_measurement}
