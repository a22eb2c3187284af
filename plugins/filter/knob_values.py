# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: knob_values
short_description: The collection's knobs as one mapping, from the values of their role variables
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - Used by the roles C(trainops.multinode.job) and C(trainops.multinode.nccl_env); its input may change with them.
  - The knobs are declared once, in the collection's C(plugins/module_utils/_knobs.py). Given the name of a use alone
    (V('nccl_env' | trainops.multinode.knob_values)), the filter returns the role variables that use reads, in
    order; their values (from C(query('ansible.builtin.vars', ...))) are then its input, with O(use).
  - C(short), the short C(-e) knobs over the role variables (C(given) maps the short names the command line set to
    their values); C(launch), the launch parameters of the filter C(trainops.multinode.launch_problems) (C(given)
    is the C(short) result); C(manifest), the manifest's C(parameters) (an unset range knob as null, numbers as
    integers); C(nccl_env), the C(settings) of the module C(trainops.multinode.nccl_env) (an unset range knob and
    C(trainops_gpu_vendor=auto) left out).
  - A knob is unset when it is null or V(''), V(None), V(null) or V(unset) (any case).
options:
  _input:
    description:
      - The values of the role variables of O(use), in the order the filter gives them for the use's name alone.
      - Or the name of a use alone (V(short), V(launch), V(manifest), V(nccl_env)), without O(use), for the role
        variables it reads.
    type: raw
    required: true
  use:
    description:
      - Which mapping.
    type: str
    choices: [short, launch, manifest, nccl_env]
  given:
    description:
      - For V(short), the short knobs given (short name to value); for V(launch), the V(short) result.
    type: dict
    default: {}
seealso:
  - plugin: trainops.multinode.launch_problems
    plugin_type: filter
  - module: trainops.multinode.nccl_env
"""

EXAMPLES = r"""
- name: The nccl_env settings of this node
  trainops.multinode.nccl_env:
    facts: "{{ trainops_node }}"
    settings: >-
      {{ query('ansible.builtin.vars', *('nccl_env' | trainops.multinode.knob_values).variables)
         | trainops.multinode.knob_values('nccl_env') }}
"""

RETURN = r"""
_value:
  description:
    - The knobs of O(use), key (or, for V(nccl_env), setting) to value.
    - For the name of a use alone, C(variables), the role variables in order; for V(short) also C(short) (the short
      names), C(short_pattern) (a regular expression matching them, for C(query('ansible.builtin.varnames', ...)))
      and C(sweep) (the short names a sweep may vary).
  type: dict
  sample: {channels: 32, min_channels: null, threads: 256}
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.module_utils import _knobs
from ansible_collections.trainops.multinode.plugins.plugin_utils import _filter_input


def knob_values(values, use=None, given=None):
    if use is None and values in _knobs.USES:
        return _knobs.names(values)
    if use not in _knobs.USES:
        raise AnsibleFilterError('knob_values: use must be one of %s, not %r' % (', '.join(_knobs.USES), use))
    values = _filter_input.sequence('knob_values', values, kind="the list of the role variables' values")
    given = _filter_input.mapping('knob_values', given, 'given', optional=True)
    try:
        return _knobs.values(values, use, given)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {'knob_values': knob_values}
