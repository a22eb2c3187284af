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
  - "Variables set: C(NCCL_SOCKET_IFNAME), C(GLOO_SOCKET_IFNAME), C(NCCL_IB_DISABLE) (V(0) over RDMA, V(1) over TCP);
    over RDMA C(NCCL_IB_HCA) and, for RoCE, C(NCCL_IB_GID_INDEX); C(NCCL_NET_GDR_LEVEL) when O(net_gdr_level) sets it;
    C(NCCL_MAX_NCHANNELS), C(NCCL_MIN_NCHANNELS); C(RCCL_THREADS_PER_BLOCK) on AMD or C(NCCL_NTHREADS) on NVIDIA;
    C(NCCL_DEBUG); C(NCCL_NET) with O(require_transport); the O(rocm_defaults) on AMD; then O(env_overrides)."
  - Errors (the task fails with all of them, each prefixed with the host name) are problems a user can fix; warnings
    are shown and returned in RV(warning_messages).
  - With O(cluster) instead of O(facts), checks the registered results of all nodes together (run it once) and fails
    when the nodes would use different transports, RDMA link layers or GPU vendors, with a table host by host.
  - This module is implemented as an action plugin; the module file only holds the documentation.
author:
  - trainops maintainers (@trainops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
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
  diff_mode:
    support: none
  platform:
    platforms: posix
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
  network_mode:
    description:
      - V(rdma) uses the RDMA ports (an error when the node has no ACTIVE port), V(tcp) TCP sockets
        (C(NCCL_IB_DISABLE=1)).
      - V(auto) (the default when not given) is V(rdma) when the node has GPUs and a usable ACTIVE RDMA port, else V(tcp).
    type: str
    choices: [auto, rdma, tcp]
  socket_ifname:
    description:
      - Interface (or list of interfaces) for the NCCL bootstrap/socket transport and gloo. It must exist on the node
        and have an address.
      - V(auto) (the default when not given, or null) takes C(facts.network.ifname), the interface that reaches the master.
    type: raw
  ib_hca:
    description:
      - RDMA ports to use, as a list (or comma-separated string) of C(name) or C(name:port). A bare name takes the
        device's ACTIVE ports. Every name and port must exist and be ACTIVE.
      - V(auto) (the default when not given, or null) takes the ACTIVE ports, preferring InfiniBand over RoCE ports
        when a node has both, physical functions over SR-IOV virtual functions when both are ACTIVE, leaving out RoCE
        ports without a RoCE v2 GID (when O(gid_index=auto)), and keeping the fastest ports when rates differ; each
        such choice is a warning.
    type: raw
  gid_index:
    description:
      - C(NCCL_IB_GID_INDEX) for RoCE ports, an integer.
      - V(auto) (the default when not given) takes the RoCE v2 GID index the facts found on the chosen RoCE ports; when
        they disagree it is an error, since NCCL takes one index per process (set the index, narrow O(ib_hca), or
        use V(unset)).
      - V(unset) (or null) leaves it to NCCL (2.21 and later pick a RoCE v2 GID per port; older NCCL and RCCL use GID 0).
    type: raw
  net_gdr_level:
    description:
      - C(NCCL_NET_GDR_LEVEL), the largest GPU-to-NIC distance at which GPUDirect RDMA is used, one of V(LOC), V(PIX), V(PXB),
        V(PHB), V(SYS), or a legacy integer.
      - V(auto) (the default when not given) or V(unset) (or null) leaves it unset, since NCCL chooses per GPU/NIC pair from the
        PCI topology when GPUDirect RDMA is available. When the facts say GPUDirect RDMA is not available on an RDMA
        node, a warning names what to load (C(nvidia_peermem), AMD peer memory, dma-buf); setting a level would not
        enable it.
    type: raw
  channels:
    description:
      - C(NCCL_MAX_NCHANNELS). Not set when not given.
    type: int
  min_channels:
    description:
      - C(NCCL_MIN_NCHANNELS), at most O(channels). Not set when not given.
    type: int
  threads:
    description:
      - C(RCCL_THREADS_PER_BLOCK) on AMD, C(NCCL_NTHREADS) on NVIDIA (64, 128, 256 or 512), nothing without GPUs.
    type: int
  nccl_debug:
    description:
      - C(NCCL_DEBUG) (V(VERSION), V(WARN), V(INFO), V(TRACE)). V(WARN) when not given; null leaves it unset.
    type: str
  vendor:
    description:
      - GPU vendor of the node; defaults to C(facts.gpu.vendor).
    type: str
    choices: [nvidia, amd, none]
  nproc_per_node:
    description:
      - Ranks per node; an error when larger than the node's GPU count (unless the vendor is V(none)).
    type: int
  rocm_defaults:
    description:
      - ROCm runtime variables set on AMD nodes only. When not given (or null) this is C(HSA_ENABLE_SDMA=0) (copies use blit
        kernels instead of the SDMA engines, the workaround for SDMA copy hangs on MI300-class GPUs that the aorta
        launcher passes to its ranks). V({}) sets none.
      - C(HSA_ENABLE_IPC_MODE_LEGACY) is not a default (some ROCm 7 images need V(1), on others it breaks RCCL P2P);
        set it here or in O(env_overrides).
    type: dict
  require_transport:
    description:
      - Set C(NCCL_NET) to V(IB) (RDMA) or V(Socket) (TCP) so NCCL fails instead of silently falling back to sockets.
        Leave it off with an external NCCL net plugin.
    type: bool
    default: false
  env_overrides:
    description:
      - Variables that win over anything computed; a null value removes the variable (returned in RV(unset)).
      - C(NCCL_SOCKET_IFNAME), C(GLOO_SOCKET_IFNAME) and C(NCCL_IB_HCA) overrides are checked against the node. One
        that selects nothing is an error, a prefix that matches several interfaces or HCAs is a warning.
    type: dict
    default: {}
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
    channels: 28
    threads: 256
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

- name: Write the settings where NCCL reads them by itself
  ansible.builtin.copy:
    content: "{{ nccl.nccl_conf }}"
    dest: "{{ nccl.nccl_conf_path }}"
    mode: "0644"
"""

RETURN = r"""
env:
  description: The variables for the node's ranks, every value a string.
  returned: with O(facts)
  type: dict
  sample: {NCCL_SOCKET_IFNAME: "=ens5", GLOO_SOCKET_IFNAME: ens5, NCCL_IB_DISABLE: "0", NCCL_IB_HCA: "=mlx5_0:1,mlx5_1:1",
           NCCL_MAX_NCHANNELS: "28", NCCL_NTHREADS: "256", NCCL_DEBUG: WARN}
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
  description: V(rdma) or V(tcp), what NCCL will use between the nodes.
  returned: with O(facts)
  type: str
  sample: rdma
link_layer:
  description: V(infiniband) or V(roce) for the RDMA ports used; null over TCP.
  returned: with O(facts)
  type: str
  sample: infiniband
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
  description: Whether GPUDirect RDMA is usable according to the facts; null when they do not say.
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
  description: Host by host vendor, transport, C(NCCL_SOCKET_IFNAME) and C(NCCL_IB_HCA).
  returned: with O(cluster)
  type: str
  sample: "host   vendor  transport         NCCL_SOCKET_IFNAME  NCCL_IB_HCA  status\n..."
transports:
  description: The transport of each host.
  returned: with O(cluster)
  type: dict
  sample: {gpu1: rdma, gpu2: tcp}
"""
