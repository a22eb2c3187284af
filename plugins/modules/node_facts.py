#!/usr/bin/python
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
module: node_facts
short_description: GPUs of a node and the network interface that reaches the training master
version_added: 0.1.0
author:
  - trainops maintainers (@trainops)
description:
  - Detects, on the node itself, the GPU vendor and count from procfs/sysfs (C(/proc/driver/nvidia/gpus),
    C(/sys/class/kfd/kfd/topology/nodes) with C(/dev/kfd)).
  - Asks the kernel which interface routes the master's address (C(ip -j route get)), never guessing from interface
    names and never relying on a default route; on the master itself it picks the interface that carries the address.
  - Checks an interface override before anything starts, so a wrong C(NCCL_SOCKET_IFNAME)/C(GLOO_SOCKET_IFNAME) fails
    with a message instead of a hang.
  - Returns the facts under C(trainops_node).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    platforms: posix
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
      - Fail when the interface cannot reach the master.
    type: bool
    default: true
  root:
    description:
      - Prefix for every procfs/sysfs/dev path read (for tests on recorded trees).
    type: path
    default: /
requirements:
  - C(ip) from iproute2 with JSON output (C(-j)).
notes:
  - Read-only; safe in check mode.
"""

EXAMPLES = r"""
- name: Detect the node's GPUs and the interface that reaches the master
  trainops.multinode.node_facts:
    master_addr: 10.0.0.11

- name: Use the detected interface for gloo and NCCL
  ansible.builtin.set_fact:
    job_env:
      GLOO_SOCKET_IFNAME: "{{ trainops_node.network.ifname }}"
      NCCL_SOCKET_IFNAME: "={{ trainops_node.network.ifname }}"

- name: Insist on an interface, failing before launch if it cannot reach the master
  trainops.multinode.node_facts:
    master_addr: 10.0.0.11
    socket_ifname: ens5
"""

RETURN = r"""
ansible_facts:
  description: Facts added to the host.
  returned: always
  type: dict
  contains:
    trainops_node:
      description: The node's facts.
      type: dict
      returned: always
      contains:
        gpu:
          description: C(vendor) (nvidia, amd or none), C(count), C(pci_ids), C(models).
          type: dict
          returned: always
          sample: {vendor: nvidia, count: 8, pci_ids: ["0000:18:00.0"], models: ["NVIDIA H100 80GB HBM3"]}
        network:
          description:
            - C(ifname) (the interface to use), C(routed_ifname) (the one the kernel routes the master through),
              C(address), C(mtu), C(operstate), C(route_src), C(overridden), C(master_addr) and C(interfaces)
              (every interface with C(ifname), C(mtu), C(operstate), C(addresses)).
          type: dict
          returned: always
          sample: {ifname: ens5, routed_ifname: ens5, address: 10.0.0.12, mtu: 9000, overridden: false}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainops.multinode.plugins.module_utils._node_facts import (
    NodeFactsError,
    Runner,
    node_facts,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            master_addr=dict(type='str', required=True),
            socket_ifname=dict(type='str', default='auto'),
            check_ifname=dict(type='bool', default=True),
            root=dict(type='path', default='/'),
        ),
        supports_check_mode=True,
    )
    runner = Runner(lambda argv: module.run_command(argv, environ_update={'LC_ALL': 'C'}))
    try:
        facts = node_facts(runner, module.params['master_addr'], module.params['socket_ifname'],
                           module.params['check_ifname'], module.params['root'])
    except NodeFactsError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, ansible_facts=dict(trainops_node=facts))


if __name__ == '__main__':
    main()
