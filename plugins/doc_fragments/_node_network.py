# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment(object):
    # The node-facts options shared by trainops.multinode.node_facts and trainops.multinode.preflight,
    # and their attributes (read-only fact modules; trainops.multinode._attributes has the ones all modules share).
    DOCUMENTATION = r"""
options:
  master_addr:
    description:
      - IP address of the master (node rank 0) as the other nodes reach it.
    type: str
    required: true
  socket_ifname:
    description:
      - The interface to use for NCCL/gloo sockets. V(auto) takes the one the kernel routes O(master_addr) through.
      - An override must exist on the node and, unless O(check_ifname=false), reach the master (the master's address is
        on one of its networks, or the kernel routes the master through it).
    type: str
    default: auto
  check_ifname:
    description:
      - Treat an interface that cannot reach the master as an error.
    type: bool
    default: true
  root:
    description:
      - Prefix for every procfs/sysfs/dev path read (for tests on recorded trees).
      - Commands (C(ip), the vendor tools) still run on the node itself.
    type: path
    default: /
attributes:
  check_mode:
    support: full
  facts:
    support: full
"""
