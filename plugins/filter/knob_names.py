# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: knob_names
short_description: The role variables (and short names) of the collection's knobs for one use
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - Used by the roles C(trainops.multinode.job) and C(trainops.multinode.nccl_env); its input may change with them.
  - The knobs are declared once, in the collection's C(plugins/module_utils/_knobs.py); see the filter
    C(trainops.multinode.knob_values).
options:
  _input:
    description:
      - The use, one of V(short), V(launch), V(manifest), V(nccl_env).
    type: str
    required: true
seealso:
  - plugin: trainops.multinode.knob_values
    plugin_type: filter
"""

EXAMPLES = r"""
- name: The role variables of the nccl_env settings
  ansible.builtin.debug:
    msg: "{{ ('nccl_env' | trainops.multinode.knob_names).variables }}"
"""

RETURN = r"""
_value:
  description: C(variables), the role variables in order; for V(short) also C(short) (the short names),
    C(short_pattern) (a regular expression matching them, for C(query('ansible.builtin.varnames', ...))) and
    C(sweep) (the short names a sweep may vary).
  type: dict
  sample: {variables: [trainops_channels, trainops_min_channels]}
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.module_utils import _knobs


def knob_names(use):
    if use not in _knobs.USES:
        raise AnsibleFilterError('knob_names: the input must be one of %s, not %r' % (', '.join(_knobs.USES), use))
    return _knobs.names(use)


class FilterModule(object):
    def filters(self):
        return {'knob_names': knob_names}
