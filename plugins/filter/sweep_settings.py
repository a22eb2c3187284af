# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: sweep_settings
short_description: A sweep's launch settings, and what a resume may not change
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - Used by C(playbooks/sweep.yml) on the controller, before any node is touched; its input may change with the playbook.
  - The settings are the launch knobs every point of a sweep shares besides its swept knobs (config, overrides, env,
    script and its arguments, nproc, the NCCL/RCCL knobs, the launcher, profiling; the list is in the collection's
    C(plugins/module_utils/_sweep_settings.py)). C(sweep.json) records them; a resume takes them from there.
  - Given V(variables) alone, the filter returns the role variables of the settings, in order; their values (from
    C(query('ansible.builtin.vars', ...))) are then its input.
  - A setting given again on resume (its short knob on the command line, or a role variable that differs from the
    role's default) with another value than C(sweep.json) records is a problem naming the setting and both values.
    C(trainops_secret_env) is recorded by its names only; its values never appear in the result.
  - With O(expected), the result is the list of settings whose value now differs from O(expected).
options:
  _input:
    description:
      - The values of the role variables of the settings, in the order the filter gives for V(variables) alone.
    type: raw
    required: true
  knobs:
    description:
      - The command line's short knobs over the role variables (knob key to value); a short knob's value wins.
    type: dict
    default: {}
  given:
    description:
      - The short knobs the command line set (their names).
    type: list
    elements: str
    default: []
  record:
    description:
      - The C(sweep.json) of the sweep being resumed; null for a new sweep.
    type: dict
  node:
    description:
      - This node's inventory name (a setting may differ per node).
    type: str
  sweep:
    description:
      - The grid; the plain knobs it varies (C(channels), C(nproc), ...) are not settings.
    type: dict
    default: {}
  sweep_dir:
    description:
      - The sweep directory, for the messages.
    type: str
    default: ''
  workload:
    description:
      - The workload this run has (V(train) or V(allreduce)); a resume refuses another than the recorded one.
    type: str
  expected:
    description:
      - The settings a resume decided (C(settings) of an earlier result); the result is then a list of lines.
    type: dict
seealso:
  - plugin: trainops.multinode.sweep_points
    plugin_type: filter
  - module: trainops.multinode.sweep
"""

EXAMPLES = r"""
- name: This node's settings, and what is wrong with a resume's
  ansible.builtin.set_fact:
    settings: >-
      {{ query('ansible.builtin.vars', *('variables' | trainops.multinode.sweep_settings))
         | trainops.multinode.sweep_settings(record=saved_sweep_json, node=inventory_hostname) }}
"""

RETURN = r"""
_value:
  description:
    - C(settings), what C(sweep.json) records for this node (C(secret_env) as a list of names); C(vars), on a resume,
      the role variable of every setting to the value the points run with (C(trainops_secret_env) left out);
      C(secret_names), on a resume that does not give C(trainops_secret_env), the recorded names whose values come
      from the controller's environment; C(recorded), whether C(sweep.json) holds settings; C(problems), one line
      per setting a resume may not take.
    - For V(variables) alone, the role variables in order. With O(expected), a list of lines.
  type: raw
  sample:
    settings: {config: config/tiny.yaml, overrides: [training.epochs=1], secret_env: [HF_TOKEN]}
    vars: {trainops_config: config/tiny.yaml, trainops_overrides: [training.epochs=1]}
    secret_names: [HF_TOKEN]
    recorded: true
    problems: []
"""

import os

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.module_utils import _sweep_settings
from ansible_collections.trainops.multinode.plugins.plugin_utils import _filter_input

_ROLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'roles')


def role_defaults(roles=_ROLES):
    """The defaults of the roles nccl_env and job (role variable to value; the job role's win)."""
    import yaml
    defaults = {}
    for role in ('nccl_env', 'job'):
        with open(os.path.join(roles, role, 'defaults', 'main.yml')) as handle:
            defaults.update(yaml.safe_load(handle) or {})
    return defaults


def sweep_settings(values, knobs=None, given=None, record=None, node=None, sweep=None, sweep_dir='', workload=None,
                   expected=None):
    if values == 'variables':
        return _sweep_settings.variables()
    values = _filter_input.sequence('sweep_settings', values, kind="the list of the settings' values")
    record = _filter_input.mapping('sweep_settings', record, 'record', kind='the sweep.json mapping', optional=True)
    try:
        if expected is not None:
            return _sweep_settings.effective_problems(values, knobs, dict(expected), str(sweep_dir or ''))
        return _sweep_settings.settings(values, knobs=knobs, defaults=role_defaults(), given=list(given or []),
                                        record=None if record is None else dict(record), node=node, sweep=sweep,
                                        sweep_dir=str(sweep_dir or ''), environ=os.environ, workload=workload)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {'sweep_settings': sweep_settings}
