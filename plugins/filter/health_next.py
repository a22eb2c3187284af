# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: health_next
short_description: The group of nodes the health check measures next
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - The search of the health check (playbooks/health.yml, docs/health.md), replayed from the measurements so far
    (C(plugins/module_utils/_health.py) holds the rule). First all nodes; then, when that all-reduce failed or was
    below O(min_busbw), every pair up to O(all_pairs_max) nodes (and always with 3 nodes); when no O(min_busbw) is
    set and there are 4 nodes or more, or beyond O(all_pairs_max) nodes, a bisection (both halves measured, the
    search goes into the bad half).
  - A group measured already is not measured again, except a pair that would be named alone (a link, or a node
    judged on one pair with a good node), measured once more before it is named; at most one such re-measure per
    two nodes.
positional: nodes, min_busbw, slow_ratio, all_pairs_max
options:
  _input:
    description:
      - The measurements so far, in the order measured, each a mapping with C(nodes) (a list), C(ok) and
        C(busbw_gbps).
    type: list
    elements: dict
    required: true
  nodes:
    description: The nodes the check measures, in rank order; the groups it measures next are drawn from them.
    type: list
    elements: str
    required: true
  min_busbw:
    description: The bus bandwidth (GB/s) below which an all-reduce is slow; V(null) to judge relatively only.
    type: float
  slow_ratio:
    description: A group is slow below this fraction of its reference (the pairs' upper quartile, the other half).
    type: float
    default: 0.5
  all_pairs_max:
    description: Up to this many nodes every pair is measured when the all-reduce of all nodes failed or was below
      O(min_busbw); beyond, or when nothing was wrong with it, the bisection.
    type: int
    default: 8
"""

EXAMPLES = r"""
- name: Work out the next group to measure
  ansible.builtin.set_fact:
    next_group: "{{ measured | trainops.multinode.health_next(groups['trainops_nodes'], none, 0.5, 8) }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: The next step.
  type: dict
  contains:
    group:
      description: The nodes to measure next, the master first; V(null) when the search is done.
      type: list
      elements: str
    done:
      description: Whether the search is over.
      type: bool
    suspects:
      description: When done, the suspects the search found (C(node), C(reason)).
      type: list
      elements: dict
    step:
      description: The number of the step (1 for all nodes).
      type: int
    max_steps:
      description: An upper bound of the steps for these nodes.
      type: int
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.module_utils._health import HealthError, max_steps, next_step


def health_next(measured, nodes, min_busbw=None, slow_ratio=0.5, all_pairs_max=8):
    try:
        answer = next_step(list(nodes or []), list(measured or []), min_busbw, slow_ratio, all_pairs_max)
        answer['max_steps'] = max_steps(len(nodes), all_pairs_max)
    except (HealthError, TypeError) as exc:
        raise AnsibleFilterError('health_next: %s' % exc)
    return answer


class FilterModule(object):
    def filters(self):
        return {'health_next': health_next}
