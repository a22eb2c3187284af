# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: slurm_rank_env
short_description: The ranks' OMP_NUM_THREADS from the CPUs a Slurm allocation holds on the node
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - Used by the role C(trainops.multinode.job) (vars/main.yml, the ranks' environment); its input may change with it.
    The rule is in module_utils/_slurm_alloc.py (rank_threads_env).
  - 'C({"OMP_NUM_THREADS": "N"}) with N the node''s allocated CPUs (C(trainops_slurm_cpus), from the
    C(trainops.multinode.slurm) inventory) divided by its ranks, at least 1; an empty mapping when the CPUs are not
    known (no Slurm allocation) or when O(overrides) names the variable.'
positional: ranks, overrides
options:
  _input:
    description:
      - The CPUs the allocation holds on the node, or V(null).
    type: raw
    required: true
  ranks:
    description:
      - The ranks of the node (C(trainops_nproc_per_node)).
    type: raw
    required: true
  overrides:
    description:
      - The launch's own environment for the ranks (C(trainops_env)), which wins.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: The threads of each rank
  ansible.builtin.debug:
    msg: "{{ trainops_slurm_cpus | default(none) | trainops.multinode.slurm_rank_env(trainops_nproc_per_node, trainops_env) }}"
"""

RETURN = r"""
_value:
  description: The variables to give the ranks.
  type: dict
  sample: {OMP_NUM_THREADS: "8"}
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.module_utils._knobs import integer
from ansible_collections.trainops.multinode.plugins.module_utils._slurm_alloc import rank_threads_env
from ansible_collections.trainops.multinode.plugins.plugin_utils._filter_input import mapping


def slurm_rank_env(cpus, ranks, overrides=None):
    number = None if cpus in (None, '') else integer(cpus)
    if cpus not in (None, '') and (number is None or number < 1):
        raise AnsibleFilterError('slurm_rank_env: the CPUs must be a positive integer or null, not %r' % (cpus,))
    return rank_threads_env(number, integer(ranks), mapping('slurm_rank_env', overrides, 'overrides', optional=True))


class FilterModule(object):
    def filters(self):
        return {'slurm_rank_env': slurm_rank_env}
