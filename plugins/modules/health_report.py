#!/usr/bin/python
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
module: health_report
short_description: The health check's verdict, tables and health.json
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - Judges the health check (playbooks/health.yml, docs/health.md) on the controller, from every node's facts
    (M(trainops.multinode.node_health)) and the all-reduce measurements of the search
    (P(trainops.multinode.health_next#filter)), and writes C(health.json) in O(path) with the verdict, the suspects, a
    row per node and a row per measured group.
  - 'The verdict is V(healthy), or C(suspect: <node> (<reason>)) for each suspect: a node with a problem in its facts,
    the node (or the pair, a link) the search found slow or failed.'
  - The logic is C(plugins/module_utils/_health.py).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - trainops.multinode._attributes
attributes:
  check_mode:
    support: none
options:
  path:
    description: The directory C(health.json) is written to (created when missing).
    type: path
    required: true
  nodes:
    description: Every node the check measured, in rank order; the report names each one healthy or suspect.
    type: list
    elements: str
    required: true
  node_facts:
    description: Every node's C(health) as M(trainops.multinode.node_health) returned it; a node missing here is suspect.
    type: dict
    default: {}
  measured:
    description: The measurements, in the order measured (C(nodes), C(ok), C(busbw_gbps), C(time_us), C(experiment_dir), C(error)).
    type: list
    elements: dict
    default: []
  min_busbw:
    description: The bus bandwidth floor in GB/s; V(null) for none.
    type: float
  slow_ratio:
    description: As P(trainops.multinode.health_next#filter) takes it.
    type: float
    default: 0.5
  all_pairs_max:
    description: As P(trainops.multinode.health_next#filter) takes it.
    type: int
    default: 8
seealso:
  - module: trainops.multinode.node_health
"""

EXAMPLES = r"""
- name: Judge and write health.json
  trainops.multinode.health_report:
    path: experiments/health_20261126_101500
    nodes: "{{ groups['trainops_nodes'] }}"
    node_facts: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, ['node_health', 'health']))) }}"
    measured: "{{ measured }}"
  delegate_to: localhost
  run_once: true
  register: report
"""

RETURN = r"""
verdict:
  description: 'V(healthy) or C(suspect: <node> (<reason>); ...).'
  returned: always
  type: str
  sample: "suspect: node-3 (3 of its 3 pair(s) slow)"
healthy:
  description: Whether no node is suspect.
  returned: always
  type: bool
suspects:
  description: The suspects, C(node) and C(reason) each.
  returned: always
  type: list
  elements: dict
lines:
  description: The per-node table, the per-group table and the verdict, as printed.
  returned: always
  type: list
  elements: str
file:
  description: The path of C(health.json).
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainops.multinode.plugins.module_utils._health import HealthError, next_step, report, write_report


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            nodes=dict(type='list', elements='str', required=True),
            node_facts=dict(type='dict', default={}),
            measured=dict(type='list', elements='dict', default=[]),
            min_busbw=dict(type='float'),
            slow_ratio=dict(type='float', default=0.5),
            all_pairs_max=dict(type='int', default=8),
        ),
    )
    params = module.params
    try:
        search = next_step(params['nodes'], params['measured'], params['min_busbw'], params['slow_ratio'],
                           params['all_pairs_max'])
    except HealthError as exc:
        module.fail_json(msg=str(exc))
    result = report(params['nodes'], params['node_facts'], params['measured'], search, params['min_busbw'],
                    params['slow_ratio'])
    try:
        target = write_report(params['path'], result, search)
    except OSError as exc:
        module.fail_json(msg='cannot write health.json in %s: %s' % (params['path'], exc))
    module.exit_json(changed=True, verdict=result['verdict'], healthy=result['healthy'], suspects=result['suspects'],
                     lines=result['lines'], file=target)


if __name__ == '__main__':
    main()
