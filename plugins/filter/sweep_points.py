# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: sweep_points
short_description: The points of a parameter sweep, with what is wrong with it
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - Used by C(playbooks/sweep.yml) on the controller, before any point starts; its input may change with the playbook.
  - The grid is the cartesian product of the sweep's lists, the first knob varying slowest.
  - Knobs are C(channels), C(min_channels), C(threads), C(nproc), C(config), C(env.NAME) (a variable of the ranks'
    environment) and C(override.KEY) (a config override C(KEY=value)).
  - Every point's launch parameters go through the rules of the filter C(trainops.multinode.launch_problems); a value
    the launch would reject is named with its point.
options:
  _input:
    description:
      - The launch parameters, as the filter C(trainops.multinode.launch_problems) takes them.
    type: dict
    required: true
  sweep:
    description:
      - The grid, a mapping of knob to a non-empty list of values.
    type: dict
    required: true
  fixed:
    description:
      - Knobs given on their own on the command line; sweeping one of them too is refused.
    type: list
    elements: str
    default: []
seealso:
  - plugin: trainops.multinode.launch_problems
    plugin_type: filter
  - module: trainops.multinode.sweep
"""

EXAMPLES = r"""
- name: Work out the points
  ansible.builtin.set_fact:
    points: "{{ launch_params | trainops.multinode.sweep_points({'channels': [28, 42], 'threads': [256, 512]}) }}"
"""

RETURN = r"""
_value:
  description: C(problems), one line per thing wrong (empty when the sweep can run), and C(points), each with C(index)
    (from 1), C(label), C(values) (knob to value) and C(params) (the launch parameters the point runs with).
  type: dict
  sample:
    problems: []
    points:
      - index: 1
        label: channels=28 threads=256
        values: {channels: 28, threads: 256}
        params: {channels: 28, threads: 256, min_channels: null, nproc_per_node: 2, config: config/default.yaml,
                 env: {}, overrides: []}
"""

from ansible_collections.trainops.multinode.plugins.module_utils._sweep import sweep_points as _points
from ansible_collections.trainops.multinode.plugins.plugin_utils import _filter_input


def sweep_points(params, sweep, fixed=None):
    params = _filter_input.mapping('sweep_points', params, kind='a mapping of launch parameter to value')
    return _points(dict(params), sweep, list(fixed or []))


class FilterModule(object):
    def filters(self):
        return {'sweep_points': sweep_points}
