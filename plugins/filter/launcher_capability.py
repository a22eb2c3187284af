# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: launcher_capability
short_description: Whether a launcher has a capability
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - The role C(trainops.multinode.job) asks the launcher (C(trainops_launcher)) what it does instead of comparing its
    name; the launchers and their capabilities live in C(plugins/module_utils/_launchers.py).
  - A name that is not a launcher, or a capability that is not one of O(capability)'s choices, fails the filter,
    naming it.
positional: capability
options:
  _input:
    description: The launcher's name (C(trainops_launcher)).
    type: str
    required: true
  capability:
    description:
      - V(inventory_gpu_ids) the ranks run in the node's session and use the Slurm job's GPUs the inventory names
        (C(trainops_slurm_gpu_ids)); V(supports_spares) a launch may keep spare nodes (C(trainops_spare_nodes));
        V(deferred_start) the launcher starts the node's supervisor itself (the run is written with
        C(state=prepared)); V(peer_failure_ends_node) the launcher ends a node's run once another node's failed;
        V(requested_gpus_only) the ranks get only the GPUs a Slurm job asked for.
    type: str
    required: true
    choices: [deferred_start, peer_failure_ends_node, requested_gpus_only, supports_spares, inventory_gpu_ids]
"""

EXAMPLES = r"""
- name: The Slurm job's GPUs, where the ranks run in the node's session
  ansible.builtin.set_fact:
    gpu_ids: "{{ trainops_slurm_gpu_ids if trainops_launcher | trainops.multinode.launcher_capability('inventory_gpu_ids') else [] }}"
"""

RETURN = r"""
_value:
  description: Whether the launcher has the capability.
  type: bool
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.module_utils import _launchers


def launcher_capability(name, capability):
    try:
        return _launchers.capability(name, capability)
    except ValueError as exc:
        raise AnsibleFilterError('launcher_capability: %s' % exc)


class FilterModule(object):
    def filters(self):
        return {'launcher_capability': launcher_capability}
