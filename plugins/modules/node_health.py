#!/usr/bin/python
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
module: node_health
short_description: The accelerator and NIC state of a node, as its sysfs tells it
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - Reads, on the node, the GPUs (as M(trainops.multinode.node_facts) finds them) and the PCIe link of each one
    (C(/sys/bus/pci/devices/<bus id>/current_link_width) and C(current_link_speed) against C(max_link_width) and
    C(max_link_speed)), and every RDMA device of C(/sys/class/infiniband) with its PCIe link and its ports
    (C(state), C(phys_state), the error counters of C(counters/) and C(hw_counters/) where the driver has them).
  - A problem makes the node suspect in the health check (playbooks/health.yml, docs/health.md) - a PCIe link
    narrower than the device's maximum (C(x8 of x16)), a NIC's link slower than its maximum, an RDMA port that is not
    C(ACTIVE). A warning is only shown - a GPU's link slower than its maximum (idle GPUs lower their link speed to save
    power), error counters above zero (they count since the driver loaded).
  - Where the GPU vendor's tool is installed, the GPUs' own health too. On NVIDIA, C(nvidia-smi -q -d
    ECC,PAGE_RETIREMENT,ROW_REMAPPER) - uncorrectable ECC errors since the driver loaded, a row remapping or page
    retirement pending, a failed row remapping, the SRAM error threshold exceeded are problems; lifetime errors, rows
    remapped and pages retired before are warnings - and the Xid lines of the kernel log (C(dmesg), else
    C(journalctl -k -b)) where the node's user may read it (Xid 48, 61, 62, 64, 74, 79, 92, 95, 119, 120, 140 are
    problems, others warnings). On AMD, C(amd-smi metric --ecc --json) - uncorrectable errors are problems, deferred
    ones warnings. A tool that is missing adds nothing.
  - A node without GPUs or RDMA devices (a CPU node) reports V(none) for them and is healthy on that count.
  - Reads files and runs those tools only; changes nothing.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - trainops.multinode._attributes
attributes:
  check_mode:
    support: full
options:
  ignore:
    description:
      - RDMA device names (C(mlx5_1)) and GPU PCI bus ids (C(0000:1b:00.0)) to leave out, for example a port that is
        meant to be down.
    type: list
    elements: str
    default: []
seealso:
  - module: trainops.multinode.node_facts
  - module: trainops.multinode.health_report
"""

EXAMPLES = r"""
- name: Read the node's accelerator and NIC state
  trainops.multinode.node_health:
    ignore: [mlx5_1]
  register: health

- name: Show what is wrong
  ansible.builtin.debug:
    msg: "{{ health.health.problems }}"
  when: health.health.problems | length > 0
"""

RETURN = r"""
health:
  description: The node's health facts.
  returned: always
  type: dict
  contains:
    gpus:
      description: V(none) without GPUs, else the vendor, the count, each GPU's PCIe link (C(width), C(max_width),
        C(speed), C(max_speed) as sysfs writes them; the link is V(null) where sysfs has no link files) and C(tools),
        the vendor tools that answered (V(nvidia-smi -q), V(kernel log), V(amd-smi)).
      type: raw
    rdma:
      description: V(none) without RDMA devices, else the count and each device with its PCIe link and its ports
        (C(port), C(state), C(phys_state), C(errors) - the error counters above zero).
      type: raw
    problems:
      description: What makes the node suspect, one sentence each, naming the device.
      type: list
      elements: str
      sample: ["GPU 0000:1b:00.0 PCIe link x8 of x16", "mlx5_0 port 1 DOWN (Disabled)"]
    warnings:
      description: What is only shown.
      type: list
      elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainops.multinode.plugins.module_utils._facts_io import TOOL_DIRS, Runner
from ansible_collections.trainops.multinode.plugins.module_utils._health import node_checks


def main():
    module = AnsibleModule(
        argument_spec=dict(ignore=dict(type='list', elements='str', default=[])),
        supports_check_mode=True,
    )
    runner = Runner(lambda argv: module.run_command(argv, environ_update={'LC_ALL': 'C'}, handle_exceptions=False),
                    lambda name: module.get_bin_path(name, opt_dirs=TOOL_DIRS))
    module.exit_json(changed=False, health=node_checks('/', module.params['ignore'], runner))


if __name__ == '__main__':
    main()
