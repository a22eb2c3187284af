#!/usr/bin/python
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
module: node_facts
short_description: GPUs, RDMA devices and the network interface that reaches the training master
version_added: 0.1.0
author:
  - trainops maintainers (@trainops)
description:
  - Detects, on the node itself, the GPUs from procfs/sysfs first; NVIDIA from C(/proc/driver/nvidia/gpus/<pci>/information)
    and C(/proc/driver/nvidia/version), AMD from the kfd topology C(/sys/class/kfd/kfd/topology/nodes) with C(/dev/kfd),
    each GPU node mapped to its PCI device through C(location_id)/C(domain), its model from libdrm's C(amdgpu.ids) or the
    card's C(product_name), its XGMI or PCIe links from the nodes' C(io_links)/C(p2p_links).
  - The vendor tools C(nvidia-smi), C(amd-smi) and C(rocm-smi) only supplement what the files cannot tell (the GPU
    interconnect on NVIDIA from C(nvidia-smi topo -m) or C(nvidia-smi nvlink -s), a missing model or driver version)
    and only when they are installed; a missing, failing or hanging tool never fails the module (a warning says
    what was left out).
  - Lists every RDMA device of C(/sys/class/infiniband) with its ports (state, physical state, link layer, rate), the
    netdev behind each port, and on Ethernet ports the RoCE v2 GID index read from the port's GID table
    (C(gid_attrs/types/<index>) is C(RoCE v2), the GID is not zero and not link-local, an IPv4-mapped GID preferred);
    a GID index is never assumed.
  - Reports the GPUDirect RDMA paths the kernel offers (C(nvidia_peermem), C(nv_peer_mem), the AMD C(amdkfd) peer
    memory client, RDMA dma-buf) and whether one is usable for the GPUs found.
  - Asks the kernel which interface routes the master's address (C(ip -j route get)), never guessing from interface
    names and never relying on a default route; on the master itself it picks the interface that carries the address.
  - Checks an interface override before anything starts, so a wrong C(NCCL_SOCKET_IFNAME)/C(GLOO_SOCKET_IFNAME) fails
    with a message instead of a hang.
  - Reads which NCCL (NVIDIA) or RCCL (AMD) the ranks will load where they run (O(python), in O(container) when
    given). It imports torch there and asks the C(libnccl)/C(librccl) the process then maps (C(/proc/self/maps)) for
    its version with C(ncclGetVersion) (no communicator); if torch maps none, the library C(libtorch_cuda.so) /
    C(libtorch_hip.so) links, found as the loader finds it. Only when that fails, the C(nvidia-nccl-cu*) package that
    torch requires, the RCCL of the ROCm release a ROCm wheel of torch bundles, the library's C(nccl.h) / C(rccl.h)
    or versioned C(libnccl.so.X.Y.Z) there when torch loads the system's library, and last the version torch was
    compiled with (C(torch.cuda.nccl.version())), said so. The host's files are read only without O(python). Also
    where the aws-ofi-nccl net plugin (AWS EFA) is, and on AMD nodes the kernel options RCCL's dma-buf path reads
    (C(/boot/config-<release>) before RCCL 2.28; from 2.28 the first of C(/proc/config.gz), C(/boot), C(/usr/src),
    C(/usr/lib/modules/<release>/config), ... that opens, else C(/proc/kallsyms)), read there too (inside the
    container).
  - Returns the facts under C(trainops_node).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
  - trainops.multinode._attributes
  - trainops.multinode._node_network
options:
  python:
    description:
      - The ranks' interpreter. The library facts are read by a program it runs (in O(container) when given). Without
        it, the host's library header or versioned file is read.
    type: str
  container:
    description:
      - The container the ranks run in (C(trainops_runtime=container)); O(python) runs there through
        C(<container_engine> exec), so its files are read, not the host's.
    type: str
  container_engine:
    description:
      - The engine's command for O(container).
    type: str
    default: docker
requirements:
  - C(ip) from iproute2 with JSON output (C(-j)).
notes:
  - Read-only; safe in check mode.
  - Vendor tools are looked up in C(PATH) and C(/opt/rocm/bin) and run under C(timeout) (30 seconds) when that exists.
  - A RoCE v2 GID index is only reported when the port's GID table has a RoCE v2 entry with a usable address; with
    none, RV(ansible_facts.trainops_node.rdma.devices[].ports[].roce_v2_gid_index) is V(null); nothing is inferred
    from the usual index 3.
seealso:
  - name: NCCL environment variables
    description: NCCL_IB_GID_INDEX, NCCL_IB_HCA and NCCL_SOCKET_IFNAME, which these facts feed.
    link: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
  - name: sysfs-class-infiniband
    description: The kernel's description of the RDMA sysfs files read here.
    link: https://www.kernel.org/doc/Documentation/ABI/testing/sysfs-class-infiniband
"""

EXAMPLES = r"""
- name: Detect the node's GPUs, RDMA devices and the interface that reaches the master
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

- name: Fail before launch when a node has no active RDMA port
  ansible.builtin.assert:
    that:
      - trainops_node.rdma.transport != 'none'
    fail_msg: "{{ inventory_hostname }}: no ACTIVE RDMA port ({{ trainops_node.rdma.devices | map(attribute='name') | join(', ') }})"

- name: Pass the active HCAs to NCCL, and the RoCE v2 GID index when every active port has the same one
  ansible.builtin.set_fact:
    nccl_rdma_env:
      NCCL_IB_HCA: "={{ trainops_node.rdma.active_ports | join(',') }}"
      NCCL_IB_GID_INDEX: "{{ gid_indexes | first | string }}"
  vars:
    gid_indexes: >-
      {{ trainops_node.rdma.devices | map(attribute='ports') | flatten | selectattr('state', 'equalto', 'ACTIVE')
         | map(attribute='roce_v2_gid_index') | list }}
  when:
    - trainops_node.rdma.transport == 'roce'
    - gid_indexes | unique | length == 1
    - gid_indexes[0] is number

- name: Warn when the GPUs cannot use GPUDirect RDMA
  ansible.builtin.debug:
    msg: >-
      {{ inventory_hostname }}: no GPUDirect RDMA path for {{ trainops_node.gpu.vendor }} GPUs
      (nvidia_peermem, amdkfd peer memory or RDMA dma-buf); NCCL/RCCL will stage through host memory
  when:
    - trainops_node.gpu.vendor != 'none'
    - trainops_node.rdma.transport != 'none'
    - not trainops_node.rdma.gpudirect.available
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
          description: The node's GPUs.
          type: dict
          returned: always
          contains:
            vendor:
              description: V(nvidia), V(amd) or V(none).
              type: str
              returned: always
              sample: nvidia
            count:
              description: Number of GPUs (on AMD, kfd GPU nodes, so a partitioned GPU counts once per partition).
              type: int
              returned: always
              sample: 8
            models:
              description:
                - One model per GPU, in the order of RV(ansible_facts.trainops_node.gpu.pci_ids); V(null) where unknown.
                - On AMD the marketing name (libdrm C(amdgpu.ids), the card's C(product_name), C(amd-smi) or
                  C(rocm-smi)), else the gfx target (for example V(gfx942)).
              type: list
              elements: str
              returned: always
              sample: ["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"]
            pci_ids:
              description: PCI bus ids of the GPUs, sorted; V([]) when they are not known.
              type: list
              elements: str
              returned: always
              sample: ["0000:1b:00.0", "0000:43:00.0"]
            driver_version:
              description: Version of the GPU kernel driver (C(nvidia) or C(amdgpu)); V(null) when unknown.
              type: str
              returned: always
              sample: 535.161.08
            interconnect:
              description: How the GPUs of the node are linked to each other.
              type: dict
              returned: always
              contains:
                type:
                  description:
                    - V(nvlink), V(xgmi), V(pcie), V(none) (fewer than two GPUs) or V(unknown) (nothing could tell).
                  type: str
                  returned: always
                  sample: nvlink
                source:
                  description:
                    - What told it, V(nvidia-smi topo -m), V(nvidia-smi nvlink -s), V(kfd-topology), V(amd-smi),
                      V(rocm-smi); V(null) when nothing did.
                  type: str
                  returned: always
                  sample: nvidia-smi topo -m
            gfx:
              description: AMD only, the gfx target of each GPU (from the kfd topology), e.g. V(gfx942) for MI300X.
              type: list
              elements: str
              returned: when the GPUs are AMD
              sample: [gfx942, gfx942]
            compute_units:
              description:
                - AMD only, the compute units of each GPU, C(simd_count / simd_per_cu) of the kfd topology; V(304) for
                  an MI300X, V(38) for each of its CPX-mode partitions. RCCL caps its channels at it.
              type: list
              elements: int
              returned: when the GPUs are AMD and the kfd topology tells
              sample: [304, 304]
            sources:
              description: What was read, among V(procfs), V(kfd-topology), V(nvidia-smi), V(amd-smi), V(rocm-smi).
              type: list
              elements: str
              returned: always
              sample: [procfs, nvidia-smi]
        rdma:
          description: The node's RDMA devices (C(/sys/class/infiniband)) and GPUDirect RDMA support.
          type: dict
          returned: always
          contains:
            devices:
              description: Every RDMA device, in natural name order.
              type: list
              elements: dict
              returned: always
              contains:
                name:
                  description: Name of the device in C(/sys/class/infiniband).
                  type: str
                  returned: always
                  sample: mlx5_0
                driver:
                  description: Kernel driver of the device's PCI function (its C(device/driver) link); V(null) if none.
                  type: str
                  returned: always
                  sample: mlx5_core
                pci_id:
                  description: PCI bus id of the device; V(null) if it has none.
                  type: str
                  returned: always
                  sample: "0000:18:00.0"
                virtual_function:
                  description: Whether the device is an SR-IOV virtual function (it has C(device/physfn)).
                  type: bool
                  returned: always
                  sample: false
                ports:
                  description: The device's ports, by port number.
                  type: list
                  elements: dict
                  returned: always
                  contains:
                    port:
                      description: Port number.
                      type: int
                      returned: always
                      sample: 1
                    state:
                      description: Logical state, the text of C(ports/<n>/state) (V(ACTIVE), V(DOWN), V(INIT), V(ARMED)).
                      type: str
                      returned: always
                      sample: ACTIVE
                    phys_state:
                      description: Physical state, the text of C(ports/<n>/phys_state) (V(LinkUp), V(Disabled), V(Polling)).
                      type: str
                      returned: always
                      sample: LinkUp
                    link_layer:
                      description: V(InfiniBand) or V(Ethernet) (RoCE).
                      type: str
                      returned: always
                      sample: InfiniBand
                    rate:
                      description: The port's C(rate) as the kernel writes it.
                      type: str
                      returned: always
                      sample: 400 Gb/sec (4X NDR)
                    rate_gbps:
                      description: The rate in Gb/s; V(null) when it cannot be read.
                      type: float
                      returned: always
                      sample: 400.0
                    netdev:
                      description:
                        - The network interface behind the port, from the port's C(gid_attrs/ndevs) (the RoCE v2 GID's
                          first), else the device's C(device/net) entry; V(null) when it has none.
                      type: str
                      returned: always
                      sample: ibp24s0
                    roce_v2_gid_index:
                      description:
                        - Ethernet ports only, else V(null). The GID table index whose C(gid_attrs/types/<index>) is
                          C(RoCE v2) with a GID that is neither zero nor link-local, an IPv4-mapped GID preferred;
                          V(null) when there is none.
                      type: int
                      returned: always
                      sample: 3
                    roce_v2_gid:
                      description: The GID at RV(ansible_facts.trainops_node.rdma.devices[].ports[].roce_v2_gid_index).
                      type: str
                      returned: always
                      sample: "0000:0000:0000:0000:0000:ffff:0a0a:000b"
                    gid_table_len:
                      description: Ethernet ports only, the number of entries of the port's GID table.
                      type: int
                      returned: when the port is Ethernet
                      sample: 256
                    gids:
                      description:
                        - Ethernet ports only, the populated GID table entries (C(index), C(gid), C(type) such as
                          V(RoCE v2), C(netdev)); NCCL 2.21 and later select a GID per port from them.
                      type: list
                      elements: dict
                      returned: when the port is Ethernet
                      sample: [{index: 3, gid: "0000:0000:0000:0000:0000:ffff:0a0a:000b", type: RoCE v2, netdev: ens5}]
            active_ports:
              description: The V(ACTIVE) ports as V(<device>:<port>).
              type: list
              elements: str
              returned: always
              sample: ["mlx5_0:1", "mlx5_1:1"]
            transport:
              description: V(infiniband), V(roce), V(efa) (AWS EFA, driver C(efa)), V(mixed) or V(none), of the V(ACTIVE)
                ports.
              type: str
              returned: always
              sample: infiniband
            gpudirect:
              description: GPUDirect RDMA support in the kernel.
              type: dict
              returned: always
              contains:
                nvidia_peermem:
                  description: The C(nvidia_peermem) module is loaded (C(/sys/module/nvidia_peermem)).
                  type: bool
                  returned: always
                  sample: true
                nv_peer_mem:
                  description: The legacy C(nv_peer_mem) module is loaded (or its C(nv_mem) memory peer is registered).
                  type: bool
                  returned: always
                  sample: false
                amd_peer_mem:
                  description:
                    - The C(amdkfd) memory peer client is registered (C(memory_peers/amdkfd/version) as RCCL looks for
                      it), or the kernel exports C(ib_register_peer_memory_client) with C(amdgpu) loaded.
                  type: bool
                  returned: always
                  sample: false
                dma_buf:
                  description: The kernel's RDMA core imports dma-bufs (C(ib_umem_dmabuf_get) in C(/proc/kallsyms)).
                  type: bool
                  returned: always
                  sample: true
                dmabuf_kernel:
                  description:
                    - AMD with dma-buf only, else V(null). Whether C(/boot/config-<release>) has
                      C(CONFIG_DMABUF_MOVE_NOTIFY=y) and C(CONFIG_PCI_P2PDMA=y), which RCCL requires before it uses
                      dma-buf; V(null) when the file cannot be read where RCCL runs (in a container without C(/boot)).
                  type: dict
                  returned: always
                  sample: {CONFIG_DMABUF_MOVE_NOTIFY: true, CONFIG_PCI_P2PDMA: true}
                dmabuf_kernel_search:
                  description:
                    - AMD with dma-buf only, else V(null). The same options as RCCL 2.28 and later read them;
                      C(file) is the first of C(/proc/config.gz) (with C(zcat)), C(/boot/config-<release>),
                      C(/usr/src/linux-<release>/.config), C(/usr/lib/modules/<release>/config), ... that opens, else
                      C(/proc/kallsyms) (symbols C(dma_buf_move_notify), C(pci_p2pdma)); C(options) what it holds.
                      V(null) when none can be read.
                  type: dict
                  returned: always
                  sample: {file: /proc/kallsyms, options: {CONFIG_DMABUF_MOVE_NOTIFY: true, CONFIG_PCI_P2PDMA: true}}
                dmabuf_read_in:
                  description:
                    - AMD with dma-buf only, else V(null). Where C(dmabuf_kernel) was read, as RCCL reads it in the
                      ranks' processes - V(host), or V(container <name>) when the ranks run in one.
                  type: str
                  returned: always
                  sample: container trainops-train
                path:
                  description: The GPUDirect RDMA path the library will use, V(peer_mem), V(dma_buf), or V(null) (none).
                  type: str
                  returned: always
                  sample: peer_mem
                available:
                  description:
                    - The node has an RDMA device and one of the above suits its GPUs (NVIDIA, C(nvidia_peermem),
                      C(nv_peer_mem), or dma-buf with the open kernel modules; AMD, the peer memory client, or dma-buf
                      with the kernel options above).
                  type: bool
                  returned: always
                  sample: true
        network:
          description:
            - C(ifname) (the interface to use), C(routed_ifname) (the one the kernel routes the master through),
              C(address), C(mtu), C(operstate), C(route_src), C(overridden), C(master_addr), C(interfaces)
              (every interface with C(ifname), C(mtu), C(operstate), C(addresses)) and C(default_ifnames) (the
              interfaces with a default route, from C(/proc/net/route) and C(/proc/net/ipv6_route)).
            - C(source) says what told the interfaces and the route, V(ip) (C(ip -j addr show), C(ip -j route get)) or,
              on a node without iproute2, V(kernel (no ip command on the node)). Then the interfaces come from
              C(/sys/class/net), their primary IPv4 address by C(ioctl) and IPv6 ones from C(/proc/net/if_inet6), and the
              route from the source address the kernel picks for a UDP socket connected to the master (secondary IPv4
              addresses are not seen then).
          type: dict
          returned: always
          sample: {ifname: ens5, routed_ifname: ens5, address: 10.0.0.12, mtu: 9000, overridden: false}
        pci:
          description:
            - The PCI paths of the GPUs (C(gpus), by bus id) and RDMA devices (C(rdma), by name), for the HCA choice by
              topology; each C(path) runs from the root complex (C(pci0000:15)) through every bridge to the device,
              from C(/sys/bus/pci/devices/<bdf>) and C(/sys/class/infiniband/<dev>/device), with its C(numa_node);
              V(null) when sysfs does not show the device.
          type: dict
          returned: always
          contains:
            gpus:
              description: "C({bus id: {path, numa_node} or null}) for every GPU of C(gpu.pci_ids)."
              type: dict
              returned: always
              sample: {"0000:1b:00.0": {path: [pci0000:15, "0000:15:01.0", "0000:16:00.0", "0000:17:02.0",
                       "0000:1b:00.0"], numa_node: 0}}
            rdma:
              description: "C({device name: {path, numa_node} or null}) for every device of C(rdma.devices)."
              type: dict
              returned: always
              sample: {mlx5_0: {path: [pci0000:15, "0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:18:00.0"],
                       numa_node: 0}}
        library:
          description:
            - C(name) (V(nccl), V(rccl) or V(null) without GPUs), C(version) (V(null) when nothing tells), C(source)
              (what told it), C(read_in) (V(host) or V(container <name>)) and C(aws_ofi_nccl) (the path of the
              aws-ofi-nccl plugin there, or V(null)).
            - C(not_loaded) (the library's files there with another version than torch loads), C(rocm) (on AMD, the
              ROCm runtime the ranks use), C(probe_error) (the interpreter could not be asked), C(torch_error)
              (torch was imported but could not tell) and C(runtime_error) (why the library the process maps could
              not be asked, so a fallback told the version). RCCL's dma-buf kernel options, read there too, are
              RV(ansible_facts.trainops_node.rdma.gpudirect.dmabuf_kernel) and C(dmabuf_kernel_search).
            - A C(libnccl-net*.so) is aws-ofi-nccl when its bytes hold the net name C(Libfabric) and the package name
              C(aws-ofi-nccl) (read, never loaded); others found are listed in C(other_net_plugins) (C(path),
              C(names), C(version)) only when no aws-ofi-nccl was found.
          type: dict
          returned: always
          sample:
            name: nccl
            version: 2.23.4
            source: ncclGetVersion() of /opt/venv/lib/python3.10/site-packages/nvidia/nccl/lib/libnccl.so.2, mapped
              after import torch (torch 2.4.1)
            read_in: host
            aws_ofi_nccl: null
            not_loaded: {version: 2.21.5, file: /usr/include/nccl.h, read_in: host}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainops.multinode.plugins.module_utils._node_facts import (
    TOOL_DIRS,
    NodeFactsError,
    Runner,
    interpreter_probe,
    node_facts,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            master_addr=dict(type='str', required=True),
            socket_ifname=dict(type='str', default='auto'),
            check_ifname=dict(type='bool', default=True),
            root=dict(type='path', default='/'),
            python=dict(type='str'),
            container=dict(type='str'),
            container_engine=dict(type='str', default='docker'),
        ),
        supports_check_mode=True,
    )
    runner = Runner(lambda argv: module.run_command(argv, environ_update={'LC_ALL': 'C'}, handle_exceptions=False),
                    lambda name: module.get_bin_path(name, opt_dirs=TOOL_DIRS))
    warnings = []
    params = module.params
    prefix = [params['container_engine'], 'exec', params['container']] if params['container'] else []
    probe = None
    if params['python']:
        def probe(vendor):
            return interpreter_probe(runner, params['python'], prefix=prefix, library=vendor, root=params['root'])
    try:
        facts = node_facts(runner, params['master_addr'], params['socket_ifname'], params['check_ifname'],
                           params['root'], warnings, probe,
                           'container ' + params['container'] if params['container'] else 'host')
    except NodeFactsError as exc:
        module.fail_json(msg=str(exc))
    for warning in warnings:
        module.warn(warning)
    module.exit_json(changed=False, ansible_facts=dict(trainops_node=facts))


if __name__ == '__main__':
    main()
