# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
---
module: nccl_env
short_description: Compute a node's NCCL/RCCL environment from its node facts, and check it across nodes
version_added: 0.1.0
description:
  - Runs on the controller only, without a connection to the node. It computes the environment of one node's ranks
    from the C(trainops_node) facts of M(trainops.multinode.node_facts) and the settings below, and reports every
    problem it can see before anything starts.
  - The socket interface is always matched exactly (C(NCCL_SOCKET_IFNAME==ens5)), so a prefix such as C(eth) or
    C(bond0) never catches C(eth1) or C(bond0.2093). RDMA ports are listed exactly too (C(NCCL_IB_HCA==mlx5_0:1,mlx5_1:1)).
  - "Variables set: C(NCCL_SOCKET_IFNAME), C(GLOO_SOCKET_IFNAME), C(NCCL_SOCKET_FAMILY=AF_INET6) for an IPv6 master
    whose interface also has IPv4 (NCCL binds the interface's first address); C(NCCL_IB_DISABLE) (V(0) over
    InfiniBand/RoCE, V(1) over TCP, unset over EFA); over InfiniBand/RoCE C(NCCL_IB_HCA) and, for RoCE, the GID
    settings below; over EFA C(FI_PROVIDER=efa) (and C(NCCL_NET_PLUGIN) when aws-ofi-nccl is installed under another
    name than C(libnccl-net.so)); C(NCCL_DMABUF_ENABLE=1) on AMD when GPUDirect goes through dma-buf;
    C(NCCL_NET_GDR_LEVEL), C(NCCL_IB_TC), C(NCCL_IB_FIFO_TC), C(NCCL_IB_SL), C(NCCL_IB_QPS_PER_CONNECTION),
    C(NCCL_CROSS_NIC), C(NCCL_MAX_NCHANNELS), C(NCCL_MIN_NCHANNELS) and C(NCCL_NTHREADS) or C(RCCL_THREADS_PER_BLOCK)
    only when their option is set; C(NCCL_DEBUG); C(NCCL_NET) with O(require_transport); the O(rocm_defaults) on AMD;
    then O(env_overrides); C(HSA_NO_SCRATCH_RECLAIM=1) on gfx942/gfx950 nodes with RCCL 2.26 or later and a ROCm
    runtime older than 6.4.2 or of unknown version (C(facts.library.rocm)), unless O(env_overrides) or
    O(rocm_defaults) name it (another value is an error where RCCL refuses to initialize without it, 2.27 and 2.28, a
    warning elsewhere)."
  - "RoCE GID: NCCL and RCCL 2.21 and later leave C(NCCL_IB_GID_INDEX) at -1 and select a GID per port
    (C(ncclIbGetGidIndex)); for them the index is left unset and C(NCCL_IB_ADDR_FAMILY) / C(NCCL_IB_ROCE_VERSION_NUM)
    are set only when the ports' GID tables need them (an IPv6-only fabric). Older libraries use one index per process:
    it is pinned, and ports without a shared RoCE v2 index are an error. The library version comes from
    C(facts.library) or O(library_version)."
  - The rules and the NCCL/RCCL sources they were checked against are in C(docs/nccl.md) of the collection.
  - Errors (the task fails with all of them, each prefixed with the host name) are problems a user can fix; warnings
    are shown and returned in RV(warning_messages).
  - With O(cluster) instead of O(facts), checks the registered results of all nodes together (run it once) and fails
    when the nodes would use different transports, RDMA link layers or GPU vendors, with a table host by host.
  - This module is implemented as an action plugin; the module file only holds the documentation.
author:
  - trainops maintainers (@trainops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - trainops.multinode._attributes
  - ansible.builtin.action_common_attributes.flow
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details:
      - It changes nothing, so check mode returns the same result.
options:
  facts:
    description:
      - The node's facts, C(trainops_node) as returned by M(trainops.multinode.node_facts)
        (C(gpu), C(rdma) and C(network) are read).
      - One of O(facts) and O(cluster) is required.
    type: dict
  cluster:
    description:
      - The registered results of this action for every node, as a dict of host to result; checks them across nodes
        instead of computing anything. All other options are ignored.
    type: dict
  settings:
    description:
      - The settings below as one dict (option name to value), as roles/nccl_env builds them from its variables
        (filter C(trainops.multinode.knob_values)); each is checked as the option of that name, and an option given
        on its own wins.
    type: dict
    version_added: 0.2.0
  role_vars:
    description:
      - Read the settings from the role variables of the role C(trainops.multinode.nccl_env) (C(trainops_channels),
        C(trainops_ib_hca) and the others its documentation lists), each templated on the controller, as the role
        does; the node count O(nnodes) is C(trainops_nccl_env_nnodes) where that is more than 0, else the number of the
        play's hosts. An unset range knob, and C(trainops_gpu_vendor=auto), are left out (the node decides).
      - A role variable that is not defined is an error. An option given on its own wins. Not with O(settings) or
        O(cluster).
    type: bool
    default: false
    version_added: 0.2.0
  # BEGIN the knob settings, generated by hack/gen_docs.py from plugins/module_utils/_knobs.py and plugins/module_utils/_declarations/
  channels:
    description:
      - C(NCCL_MAX_NCHANNELS), at most what the library honours. NCCL, MAXCHANNELS (32 before 2.25, 64 since).
        RCCL, MAXCHANNELS (32 in 2.18.3, 64 in 2.18.6, 128 from 2.20.5) on gfx942 and gfx950, 32 on other
        GPUs, the compute units of a CPX-mode partition (RCCL 2.21 and later), and 64 when O(nnodes) is
        more than 1.
      - A larger value is an error naming that limit (the library would clamp it silently), and so is a
        value above 32 when the library version is unknown and the limit depends on it. Not set when not
        given (the library decides).
    type: int
  min_channels:
    description:
      - C(NCCL_MIN_NCHANNELS), at most O(channels) and within the limits of O(channels). Not set when not
        given.
    type: int
  threads:
    description:
      - Threads per block. NVIDIA, C(NCCL_NTHREADS) (a multiple of 32 from 64 to 512). RCCL before 2.28,
        C(NCCL_NTHREADS) from 4 x the warp size to 256 (only 256 on MI300X, gfx942). RCCL 2.28 and later,
        C(RCCL_THREADS_PER_BLOCK), a multiple of the warp size from 3 warps to 256 (V(192) or V(256) on
        gfx942; RCCL rounds and clamps any other value); a warning unless C(RCCL_WARP_SPEED_ENABLE=1) is
        in O(env_overrides).
      - Not set when not given (the library's own value). A value the library would not take as it is is
        an error naming what it would run; so is any value on an AMD node whose RCCL version is unknown
        (the version decides the variable). On a node without GPUs nothing is set (a warning).
    type: int
  nproc_per_node:
    description:
      - Ranks per node; an error when larger than the node's GPU count (unless the vendor is V(none)).
    type: int
  network_mode:
    description:
      - V(rdma) uses the RDMA ports (an error when the node has no ACTIVE port), V(tcp) TCP sockets (C(NCCL_IB_DISABLE=1)).
      - V(auto) (the default when not given) is V(rdma) when the node has GPUs and a usable ACTIVE RDMA
        port, else V(tcp).
    type: str
    choices:
      - auto
      - rdma
      - tcp
  socket_ifname:
    description:
      - Interface (or list of interfaces) for the NCCL bootstrap/socket transport and gloo. It must exist
        on the node and have an address.
      - V(auto) (the default when not given, or null) takes C(facts.network.ifname), the interface that
        reaches the master.
    type: raw
  ib_hca:
    description:
      - RDMA ports to use, as a list (or comma-separated string) of C(name) or C(name:port). A bare name
        takes the device's ACTIVE ports. Every name and port must exist and be ACTIVE.
      - With NCCL/RCCL 2.30.7 and later an entry may also give a rail and a plane, C(name:port:rail:plane)
        (each of port, rail and plane may be left empty, as in C(mlx5_0::1) or C(mlx5_0:1::2); an empty
        port takes every ACTIVE port); C(NCCL_IB_HCA) keeps them. With an older library, or when its version
        is unknown (set O(library_version)), such an entry is an error.
      - V(auto) (the default when not given, or null) takes the ACTIVE ports, first the HCAs that serve
        the GPUs by PCIe topology (each GPU's nearest HCAs within PXB, as NCCL ranks paths; storage and
        front-end HCAs with no GPU under the same PCIe switch left out; every port kept when the topology
        cannot be read, see RV(topology)), preferring InfiniBand over RoCE ports when a node has both, physical
        functions over SR-IOV virtual functions when both are ACTIVE, leaving out RoCE ports without a RoCE
        v2 GID (when O(gid_index=auto)), leaving out a port whose netdev carries the default route (a front-end
        NIC) when other ports remain, and keeping the fastest ports when rates differ; each such choice
        is a warning and an entry of RV(left_out).
      - AWS EFA devices (driver C(efa)) are used through the aws-ofi-nccl plugin, never listed in C(NCCL_IB_HCA).
    type: raw
  gid_index:
    description:
      - C(NCCL_IB_GID_INDEX) for RoCE ports, an integer. It must be a RoCE v2 GID with an address on every
        chosen RoCE port (an empty or RoCE v1 entry is an error naming the port).
      - V(auto) (the default when not given) follows the library. NCCL/RCCL 2.21 and later select a GID
        per port, so nothing is set except C(NCCL_IB_ADDR_FAMILY=AF_INET6) (or C(NCCL_IB_ROCE_VERSION_NUM))
        when their default would land on a link-local GID. Older ones take one index per process, so the
        ports' common RoCE v2 index is set (an error when they share none). With an unknown version a common
        index is set, otherwise nothing (a warning).
      - V(unset) (or null) leaves it to NCCL (2.21 and later pick a RoCE v2 GID per port; older NCCL and
        RCCL use GID 0).
    type: raw
  net_gdr_level:
    description:
      - C(NCCL_NET_GDR_LEVEL), the largest GPU-to-NIC distance at which GPUDirect RDMA is used, one of V(LOC),
        V(PIX), V(PXB), V(PHB), V(SYS), or a legacy integer.
      - V(auto) (the default when not given) or V(unset) (or null) leaves it unset, since NCCL chooses per
        GPU/NIC pair from the PCI topology when GPUDirect RDMA is available. When the facts say GPUDirect
        RDMA is not available on an RDMA node, a warning names what to load (C(nvidia_peermem), AMD peer
        memory, dma-buf); setting a level would not enable it.
    type: raw
  ib_tc:
    description:
      - C(NCCL_IB_TC), the traffic class of RoCE data packets (0-255, DSCP x 4, e.g. V(106) for DSCP 26).
        Not set when not given.
    type: int
  ib_fifo_tc:
    description:
      - C(NCCL_IB_FIFO_TC), the traffic class of NCCL's control messages (0-255). An error where the library
        would ignore it (before 2.22; V(0) before 2.24) or its version is unknown.
    type: int
  ib_sl:
    description:
      - C(NCCL_IB_SL), the InfiniBand service level (0-15).
    type: int
  ib_qps_per_connection:
    description:
      - C(NCCL_IB_QPS_PER_CONNECTION) (1-128), queue pairs per connection, spreading it over ECMP paths.
      - NCCL 2.20 and later open it times the ports merged into one NIC (the chosen ports of one device,
        at most 4); more than 128 (C(NCCL_IB_MAX_QPS)) in all is an error.
    type: int
  cross_nic:
    description:
      - C(NCCL_CROSS_NIC) (V(0) keep each ring on the same NIC across nodes, for rail-optimized fabrics;
        V(1) allow crossing; V(2) NCCL's default, prefer not to).
    type: int
  library_version:
    description:
      - The NCCL (NVIDIA) or RCCL (AMD) version the ranks load, such as V(2.21.5); V(auto) (the default)
        takes C(facts.library.version). It decides the GID rule, the valid channels and threads and which
        variable O(threads) sets.
    type: str
  nccl_debug:
    description:
      - C(NCCL_DEBUG) (V(VERSION), V(WARN), V(INFO), V(TRACE)). V(WARN) when not given; null leaves it unset.
    type: str
  vendor:
    description:
      - GPU vendor of the node; defaults to C(facts.gpu.vendor).
    type: str
    choices:
      - nvidia
      - amd
      - none
  nnodes:
    description:
      - The number of nodes of the job (the job role passes it; the nccl_env role passes the play's hosts).
        RCCL caps its channels at 64 when it is more than 1. Not given, one node is assumed.
    type: int
  gpu_ids:
    description:
      - The indexes of the GPUs the ranks may use on this node (a list, or a comma-separated string), for
        example the GPUs a Slurm job holds on a node it shares with other jobs (the C(slurm) inventory's
        C(trainops_slurm_gpu_ids)). Sets C(CUDA_VISIBLE_DEVICES) on NVIDIA nodes, C(ROCR_VISIBLE_DEVICES)
        on AMD nodes (what Slurm's gres/gpu plugin sets in its steps; C(HIP_VISIBLE_DEVICES) then counts
        within them) and both when the vendor is V(none).
      - An error when an index is not one of the node's GPUs, is given twice, or when O(nproc_per_node)
        is larger than the number of indexes (unless the vendor is V(none)). Not given, empty or null, neither
        variable is set. O(env_overrides) wins, and a null there removes the variable.
    type: raw
  rocm_defaults:
    description:
      - ROCm runtime variables set on AMD nodes only. When not given (or null) this is C(HSA_ENABLE_SDMA=0)
        (copies use blit kernels instead of the SDMA engines, the workaround for SDMA copy hangs on MI300-class
        GPUs that the aorta launcher passes to its ranks). V({}) sets none. V({}) does not drop the C(HSA_NO_SCRATCH_RECLAIM=1)
        that RCCL needs on some nodes (see the description); naming C(HSA_NO_SCRATCH_RECLAIM) here decides
        it.
      - C(HSA_ENABLE_IPC_MODE_LEGACY) is not a default (some ROCm 7 images need V(1), on others it breaks
        RCCL P2P); set it here or in O(env_overrides).
    type: dict
  require_transport:
    description:
      - Set C(NCCL_NET) to V(IB) (InfiniBand/RoCE), V(Libfabric) (EFA, the name aws-ofi-nccl registers)
        or V(Socket) (TCP) so NCCL fails instead of silently falling back to sockets.
    type: bool
    default: false
  env_overrides:
    description:
      - Variables that win over anything computed; a null value removes the variable (returned in RV(unset)).
      - C(NCCL_SOCKET_IFNAME), C(GLOO_SOCKET_IFNAME) and C(NCCL_IB_HCA) overrides are checked against the
        node. One that selects nothing is an error, a prefix that matches several interfaces or HCAs is
        a warning. C(GLOO_SOCKET_IFNAME) must be plain names separated by commas (gloo knows no C(=) or
        C(^) prefix).
    type: dict
    default: {}
  # END the knob settings
notes:
  - "Environment precedence in NCCL/RCCL: the process environment, then C(NCCL_CONF_FILE) or C(~/.nccl.conf)
    (C(~/.rccl.conf)), then C(/etc/nccl.conf) (C(/etc/rccl.conf)); RV(nccl_conf) holds the NCCL_*/RCCL_* part in that
    format."
seealso:
  - module: trainops.multinode.node_facts
"""

EXAMPLES = r"""
- name: Detect the node
  trainops.multinode.node_facts:
    master_addr: 10.0.0.11

- name: Compute the NCCL/RCCL environment of this node
  trainops.multinode.nccl_env:
    facts: "{{ trainops_node }}"
    channels: 32
    nproc_per_node: 8
    env_overrides:
      NCCL_NCHANNELS_PER_NET_PEER: 8
  register: nccl

- name: Check that all nodes use the same transport
  trainops.multinode.nccl_env:
    cluster: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'nccl'))) }}"
  run_once: true

- name: Pin RoCE ports and their GID index on SR-IOV nodes whose ports disagree
  trainops.multinode.nccl_env:
    facts: "{{ trainops_node }}"
    network_mode: rdma
    ib_hca: [mlx5_2, mlx5_3]
    gid_index: 3

- name: Lossless RoCE fabric with DSCP 26 for RDMA and DSCP 48 for control, rail-optimized
  trainops.multinode.nccl_env:
    facts: "{{ trainops_node }}"
    ib_tc: 106
    ib_fifo_tc: 192
    cross_nic: 0

- name: Keep a site's own /etc/nccl.conf lines, managing only this block
  ansible.builtin.blockinfile:
    path: "{{ nccl.nccl_conf_path }}"
    block: "{{ nccl.nccl_conf }}"
    marker: "# {mark} trainops.multinode NCCL settings"
    create: true
    mode: "0644"
"""

RETURN = r"""
env:
  description: The variables for the node's ranks, every value a string.
  returned: with O(facts)
  type: dict
  sample: {NCCL_SOCKET_IFNAME: "=ens5", GLOO_SOCKET_IFNAME: ens5, NCCL_IB_DISABLE: "0", NCCL_IB_HCA: "=mlx5_0:1,mlx5_1:1",
           NCCL_DEBUG: WARN}
sources:
  description: Where each variable of RV(env) comes from, V(detected) (from the facts), V(knob) (a setting),
    V(default) (a default of this module) or V(override) (O(env_overrides)).
  returned: with O(facts)
  type: dict
  sample: {NCCL_SOCKET_IFNAME: detected, NCCL_MAX_NCHANNELS: knob, NCCL_DEBUG: default}
reasons:
  description: One sentence per variable of RV(env) saying why it has its value.
  returned: with O(facts)
  type: dict
  sample: {NCCL_IB_HCA: "the ACTIVE RDMA ports, matched exactly"}
transport:
  description: V(rdma) (InfiniBand/RoCE), V(efa) (AWS EFA through aws-ofi-nccl) or V(tcp), what NCCL will use between
    the nodes.
  returned: with O(facts)
  type: str
  sample: rdma
link_layer:
  description: V(infiniband) or V(roce) for the RDMA ports used; null over TCP.
  returned: with O(facts)
  type: str
  sample: infiniband
left_out:
  description: The ACTIVE ports the automatic choice did not use, each with the reason.
  returned: with O(facts)
  type: dict
  sample: {"mlx5_8:1": "not InfiniBand: the node has InfiniBand ports"}
topology:
  description: How the PCIe topology chose the HCAs (each GPU's HCAs and the path type), or why it could not be read
    and every ACTIVE port was kept; null when O(ib_hca) lists the ports or no choice was made.
  returned: with O(facts)
  type: str
  sample: "PCIe topology: one rail per GPU: GPU 0000:1b:00.0 -> mlx5_0 (PXB), GPU 0000:43:00.0 -> mlx5_3 (PXB)"
library:
  description: The NCCL/RCCL the environment was computed for (C(name), C(version), C(source)); C(version) null when
    unknown.
  returned: with O(facts)
  type: dict
  sample: {name: rccl, version: 2.21.5, source: /opt/rocm/include/rccl/rccl.h}
hcas:
  description: The RDMA ports used, as C(name:port); empty over TCP.
  returned: with O(facts)
  type: list
  elements: str
  sample: [mlx5_0:1, mlx5_1:1]
socket_ifname:
  description: The socket interface(s).
  returned: with O(facts)
  type: list
  elements: str
  sample: [ens5]
vendor:
  description: The GPU vendor used for the computation.
  returned: with O(facts)
  type: str
  sample: nvidia
gpudirect:
  description: Whether GPUDirect RDMA will be used according to the facts (on AMD, peer memory, or dma-buf with
    C(CONFIG_DMABUF_MOVE_NOTIFY) and C(CONFIG_PCI_P2PDMA)); null when they do not say.
  returned: with O(facts)
  type: bool
  sample: true
unset:
  description: Variables removed by O(env_overrides) (null values); a launcher should also remove them from the
    environment the ranks inherit.
  returned: with O(facts)
  type: list
  elements: str
  sample: [NCCL_DEBUG]
errors:
  description: Every problem found, without the host prefix that the task message adds.
  returned: always
  type: list
  elements: str
  sample: ["socket_ifname 'eth9' does not exist on this host (it has: lo, ens5)"]
warning_messages:
  description: The warnings as plain strings (also shown as task warnings, prefixed with the host).
  returned: always
  type: list
  elements: str
  sample: ["RDMA devices found but no port is usable (mlx5_0:1 DOWN (Disabled)): NCCL will use TCP sockets, several times slower"]
env_file:
  description: RV(env) as C(KEY=value) lines, sorted, shell-quoted where needed, with a header comment; for
    C(set -a; . file) or systemd C(EnvironmentFile=).
  returned: with O(facts), when there are no errors
  type: str
  sample: "# NCCL/RCCL environment of gpu1 ...\nGLOO_SOCKET_IFNAME=ens5\nNCCL_DEBUG=WARN\n"
nccl_conf:
  description: The NCCL_*/RCCL_* variables of RV(env) in the format of C(/etc/nccl.conf) (values verbatim); the
    other variables are named in a comment, as NCCL does not apply them in time from that file.
  returned: with O(facts), when there are no errors
  type: str
  sample: "# NCCL/RCCL environment of gpu1 ...\nNCCL_DEBUG=WARN\nNCCL_SOCKET_IFNAME==ens5\n"
nccl_conf_path:
  description: C(/etc/rccl.conf) on AMD nodes, C(/etc/nccl.conf) otherwise.
  returned: with O(facts)
  type: str
  sample: /etc/nccl.conf
table:
  description: Host by host vendor, library, transport, C(NCCL_SOCKET_IFNAME) and ports, then the ports each host
    left out and why.
  returned: with O(cluster)
  type: str
  sample: "host   vendor  transport         NCCL_SOCKET_IFNAME  NCCL_IB_HCA  status\n..."
transports:
  description: The transport of each host.
  returned: with O(cluster)
  type: dict
  sample: {gpu1: rdma, gpu2: tcp}
"""
