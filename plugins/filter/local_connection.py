# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: local_connection
short_description: Whether a node reached by this connection is the controller itself
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - True for C(local) and C(ansible.builtin.local). The same rule decides where M(trainops.multinode.rsync) copies in
    Python instead of running rsync, and which tasks of the role C(trainops.multinode.job) run in Ansible's worker.
  - Used by the role C(trainops.multinode.job), where such a node needs no rsync of its own.
options:
  _input:
    description: The node's C(ansible_connection).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Say whether the node is the controller
  ansible.builtin.debug:
    msg: "{{ ansible_connection | default('ssh') | trainops.multinode.local_connection }}"
"""

RETURN = r"""
_value:
  description: True when the connection runs on the controller itself.
  type: bool
"""

from ansible_collections.trainops.multinode.plugins.module_utils._local_copy import is_local


class FilterModule(object):
    def filters(self):
        return {'local_connection': is_local}
