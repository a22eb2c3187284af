# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: health_search
short_description: The health check's search, one step at a time
version_added: 0.3.0
author:
  - trainops maintainers (@trainops)
description:
  - Used by the role C(trainops.multinode.job) (tasks health_steps.yml and health_step.yml); its input and its answer
    may change with it. The rules are in C(plugins/module_utils/_health.py) (C(settings), C(search_start),
    C(search_advance), C(measurement)).
  - Given the rank order of the nodes to check (C(nodes), C(master)), checks the settings (one message naming every
    C(trainops_health_*) knob and its range when one is out of range) and returns the search's state with nothing
    measured and C(steps), the steps of the check's loop.
  - Given that state and O(hostvars), adds the measurement of the group being measured, read from O(experiment_dir)
    (its C(manifest.json) and rank 0's C(allreduce.json), within bounds; without a manifest the run failed with
    O(error)), then works out the next group (C(next), as P(trainops.multinode.health_next#filter) answers) and its
    rank order (C(order)), with the inventory's master address when the group has the job's master, else the group's
    first node's own address toward the master (its C(trainops_node.network.address)).
positional: min_busbw, slow_ratio, all_pairs_max, timeout
options:
  _input:
    description: The nodes' rank order (C(nodes), C(master)), or the state this filter returned.
    type: dict
    required: true
  min_busbw:
    description: C(trainops_health_min_busbw), with the rank order.
    type: raw
  slow_ratio:
    description: C(trainops_health_slow_ratio), with the rank order.
    type: raw
    default: 0.5
  all_pairs_max:
    description: C(trainops_health_all_pairs_max), with the rank order.
    type: raw
    default: 8
  timeout:
    description: C(trainops_health_timeout), with the rank order.
    type: raw
    default: 60
  hostvars:
    description: C(hostvars), with the state.
    type: raw
  experiment_dir:
    description: With the state, the experiment directory of the group's run, V(null) when none was created.
    type: str
  error:
    description: With the state, why the group's measurement failed, or empty.
    type: str
"""

EXAMPLES = r"""
- name: Start the search
  ansible.builtin.set_fact:
    search: "{{ order | trainops.multinode.health_search(none, 0.5, 8, 60) }}"
  run_once: true

- name: Work out the next group
  ansible.builtin.set_fact:
    search: "{{ search | trainops.multinode.health_search(hostvars=hostvars, experiment_dir=run_dir, error='') }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: The search's state.
  type: dict
  contains:
    measured:
      description: The measurements so far (C(nodes), C(ok), C(busbw_gbps), C(time_us), C(experiment_dir), C(error)).
      type: list
      elements: dict
    next:
      description: The next step (C(group), C(done), C(step), C(suspects)); V(null) before the first.
      type: dict
    measuring:
      description: Whether C(next.group) is to be measured now.
      type: bool
    name:
      description: The name of the measurement's experiment directory.
      type: str
    order:
      description: The rank order of C(next.group) (as P(trainops.multinode.node_order#filter) answers).
      type: dict
    steps:
      description: The steps of the check's loop.
      type: list
      elements: int
"""

import os

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.filter.node_order import _host_vars, node_order
from ansible_collections.trainops.multinode.plugins.module_utils import _node_files
from ansible_collections.trainops.multinode.plugins.module_utils._experiment_metrics import read_rank_zero_json
from ansible_collections.trainops.multinode.plugins.module_utils._health import HealthError, measurement, search_advance, search_start, settings

_NOTHING = object()

#: manifest.json of a measurement: the controller's experiment module wrote it, from what the nodes told; read within
#: bounds all the same
MAX_MANIFEST_BYTES = 16 * 1024 * 1024


def read_measurement(nodes, experiment_dir=None, error=None):
    """The :func:`measurement` of a group's run: its manifest.json (``outcome``, ``outcome_detail``) and rank 0's
    allreduce.json in ``experiment_dir``, both read within bounds; without a manifest, a failed run with ``error``
    (why the measurement failed) as its detail."""
    manifest, refused = None, []
    if experiment_dir:
        manifest, refused = _node_files.read_json_object(os.path.join(experiment_dir, 'manifest.json'), None,
                                                         'manifest.json', MAX_MANIFEST_BYTES)
    if manifest is None:
        manifest = dict(outcome='failed', outcome_detail=error or '; '.join(refused) or 'no manifest written')
    results, refused = read_rank_zero_json(experiment_dir, 'allreduce.json') if experiment_dir else (None, [])
    return measurement(nodes, manifest, results, experiment_dir, refused)


def group_order(group, master, hostvars):
    """The rank order of ``group``; a group without the job's ``master`` meets at its own master's address on the
    interface the preflight found toward the job's master (``trainops_node.network.address``)."""
    order = node_order(group, hostvars, group)
    if order['master'] != master:
        node = _host_vars(hostvars, order['master']).get('trainops_node') or {}
        address = (node.get('network') or {}).get('address') if isinstance(node, dict) else None
        if not address:
            raise AnsibleFilterError('health_search: %s has no address toward the master (trainops_node.network.address)'
                                     % order['master'])
        order['master_addr'] = str(address)
    return order


def health_search(state, min_busbw=None, slow_ratio=0.5, all_pairs_max=8, timeout=60, hostvars=_NOTHING,
                  experiment_dir=None, error=None):
    if not isinstance(state, dict):
        raise AnsibleFilterError('health_search: the input must be the rank order or the search, not %r' % (state,))
    try:
        if 'measured' not in state:
            return search_start(state.get('nodes'), state.get('master'),
                                settings(min_busbw, slow_ratio, all_pairs_max, timeout))
        if hostvars is _NOTHING:
            raise AnsibleFilterError('health_search: the next step needs hostvars')
        measured = read_measurement(state['next']['group'], experiment_dir, error) if state['measuring'] else None
        state = search_advance(state, measured)
    except HealthError as exc:
        raise AnsibleFilterError(str(exc))
    state['order'] = group_order(state['next']['group'], state['master'], hostvars) if state['measuring'] else None
    return state


class FilterModule(object):
    def filters(self):
        return {'health_search': health_search}
