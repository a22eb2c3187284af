# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The ``nccl_env`` module's options of the knob settings: description and default (see __init__.py)."""

from __future__ import annotations

OPTIONS = {
    'channels': dict(doc=(('C(NCCL_MAX_NCHANNELS), at most what the library honours. NCCL, MAXCHANNELS (32 before 2.25, '
                    '64 since). RCCL, MAXCHANNELS (32 in 2.18.3, 64 in 2.18.6, 128 from 2.20.5) on gfx942 and '
                    'gfx950, 32 on other GPUs, the compute units of a CPX-mode partition (RCCL 2.21 and later), '
                    'and 64 when O(nnodes) is more than 1.'),
                   ('A larger value is an error naming that limit (the library would clamp it silently), and so is '
                    'a value above 32 when the library version is unknown and the limit depends on it. Not set '
                    'when not given (the library decides).'),)),
    'min_channels': dict(doc=('C(NCCL_MIN_NCHANNELS), at most O(channels) and within the limits of O(channels). Not set when '
                   'not given.')),
    'threads': dict(doc=(('Threads per block. NVIDIA, C(NCCL_NTHREADS) (a multiple of 32 from 64 to 512). RCCL before '
                    '2.28, C(NCCL_NTHREADS) from 4 x the warp size to 256 (only 256 on MI300X, gfx942). RCCL 2.28 '
                    'and later, C(RCCL_THREADS_PER_BLOCK), a multiple of the warp size from 3 warps to 256 (V(192) '
                    'or V(256) on gfx942; RCCL rounds and clamps any other value); a warning unless '
                    'C(RCCL_WARP_SPEED_ENABLE=1) is in O(env_overrides).'),
                   ("Not set when not given (the library's own value). A value the library would not take as it is "
                    'is an error naming what it would run; so is any value on an AMD node whose RCCL version is '
                    'unknown (the version decides the variable). On a node without GPUs nothing is set (a '
                    'warning).'),)),
    'nproc_per_node': dict(doc="Ranks per node; an error when larger than the node's GPU count (unless the vendor is V(none))."),
    'network_mode': dict(doc=(('V(rdma) uses the RDMA ports (an error when the node has no ACTIVE port), V(tcp) TCP sockets '
                    '(C(NCCL_IB_DISABLE=1)).'),
                   ('V(auto) (the default when not given) is V(rdma) when the node has GPUs and a usable ACTIVE '
                    'RDMA port, else V(tcp).'),)),
    'socket_ifname': dict(doc=(('Interface (or list of interfaces) for the NCCL bootstrap/socket transport and gloo. It must '
                    'exist on the node and have an address.'),
                   ('V(auto) (the default when not given, or null) takes C(facts.network.ifname), the interface '
                    'that reaches the master.'),)),
    'ib_hca': dict(doc=(('RDMA ports to use, as a list (or comma-separated string) of C(name) or C(name:port). A bare '
                    "name takes the device's ACTIVE ports. Every name and port must exist and be ACTIVE."),
                   ('With NCCL/RCCL 2.30.7 and later an entry may also give a rail and a plane, '
                    'C(name:port:rail:plane) (each of port, rail and plane may be left empty, as in C(mlx5_0::1) '
                    'or C(mlx5_0:1::2); an empty port takes every ACTIVE port); C(NCCL_IB_HCA) keeps them. With an '
                    'older library, or when its version is unknown (set O(library_version)), such an entry is an '
                    'error.'),
                   ('V(auto) (the default when not given, or null) takes the ACTIVE ports, first the HCAs that '
                    "serve the GPUs by PCIe topology (each GPU's nearest HCAs within PXB, as NCCL ranks paths; "
                    'storage and front-end HCAs with no GPU under the same PCIe switch left out; every port kept '
                    'when the topology cannot be read, see RV(topology)), preferring InfiniBand over RoCE ports '
                    'when a node has both, physical functions over SR-IOV virtual functions when both are ACTIVE, '
                    'leaving out RoCE ports without a RoCE v2 GID (when O(gid_index=auto)), leaving out a port '
                    'whose netdev carries the default route (a front-end NIC) when other ports remain, and keeping '
                    'the fastest ports when rates differ; each such choice is a warning and an entry of '
                    'RV(left_out).'),
                   ('AWS EFA devices (driver C(efa)) are used through the aws-ofi-nccl plugin, never listed in '
                    'C(NCCL_IB_HCA).'),)),
    'gid_index': dict(doc=(('C(NCCL_IB_GID_INDEX) for RoCE ports, an integer. It must be a RoCE v2 GID with an address on '
                    'every chosen RoCE port (an empty or RoCE v1 entry is an error naming the port).'),
                   ('V(auto) (the default when not given) follows the library. NCCL/RCCL 2.21 and later select a '
                    'GID per port, so nothing is set except C(NCCL_IB_ADDR_FAMILY=AF_INET6) (or '
                    'C(NCCL_IB_ROCE_VERSION_NUM)) when their default would land on a link-local GID. Older ones '
                    "take one index per process, so the ports' common RoCE v2 index is set (an error when they "
                    'share none). With an unknown version a common index is set, otherwise nothing (a warning).'),
                   ('V(unset) (or null) leaves it to NCCL (2.21 and later pick a RoCE v2 GID per port; older NCCL '
                    'and RCCL use GID 0).'),)),
    'net_gdr_level': dict(doc=(('C(NCCL_NET_GDR_LEVEL), the largest GPU-to-NIC distance at which GPUDirect RDMA is used, one '
                    'of V(LOC), V(PIX), V(PXB), V(PHB), V(SYS), or a legacy integer.'),
                   ('V(auto) (the default when not given) or V(unset) (or null) leaves it unset, since NCCL '
                    'chooses per GPU/NIC pair from the PCI topology when GPUDirect RDMA is available. When the '
                    'facts say GPUDirect RDMA is not available on an RDMA node, a warning names what to load '
                    '(C(nvidia_peermem), AMD peer memory, dma-buf); setting a level would not enable it.'),)),
    'ib_tc': dict(doc=('C(NCCL_IB_TC), the traffic class of RoCE data packets (0-255, DSCP x 4, e.g. V(106) for DSCP '
                   '26). Not set when not given.')),
    'ib_fifo_tc': dict(doc=("C(NCCL_IB_FIFO_TC), the traffic class of NCCL's control messages (0-255). An error where the "
                   'library would ignore it (before 2.22; V(0) before 2.24) or its version is unknown.')),
    'ib_sl': dict(doc='C(NCCL_IB_SL), the InfiniBand service level (0-15).'),
    'ib_qps_per_connection': dict(doc=(('C(NCCL_IB_QPS_PER_CONNECTION) (1-128), queue pairs per connection, spreading it over ECMP '
                    'paths.'),
                   ('NCCL 2.20 and later open it times the ports merged into one NIC (the chosen ports of one '
                    'device, at most 4); more than 128 (C(NCCL_IB_MAX_QPS)) in all is an error.'),)),
    'cross_nic': dict(doc=('C(NCCL_CROSS_NIC) (V(0) keep each ring on the same NIC across nodes, for rail-optimized '
                   "fabrics; V(1) allow crossing; V(2) NCCL's default, prefer not to).")),
    'library_version': dict(doc=('The NCCL (NVIDIA) or RCCL (AMD) version the ranks load, such as V(2.21.5); V(auto) (the '
                   'default) takes C(facts.library.version). It decides the GID rule, the valid channels and '
                   'threads and which variable O(threads) sets.')),
    'nccl_debug': dict(doc=('C(NCCL_DEBUG) (V(VERSION), V(WARN), V(INFO), V(TRACE)). V(WARN) when not given; null leaves it '
                   'unset.')),
    'vendor': dict(doc='GPU vendor of the node; defaults to C(facts.gpu.vendor).'),
    'nnodes': dict(doc=("The number of nodes of the job (the job role passes it; the nccl_env role passes the play's "
                   'hosts). RCCL caps its channels at 64 when it is more than 1. Not given, one node is assumed.')),
    'gpu_ids': dict(doc=(('The indexes of the GPUs the ranks may use on this node (a list, or a comma-separated string), '
                    'for example the GPUs a Slurm job holds on a node it shares with other jobs (the C(slurm) '
                    "inventory's C(trainops_slurm_gpu_ids)). Sets C(CUDA_VISIBLE_DEVICES) on NVIDIA nodes, "
                    "C(ROCR_VISIBLE_DEVICES) on AMD nodes (what Slurm's gres/gpu plugin sets in its steps; "
                    'C(HIP_VISIBLE_DEVICES) then counts within them) and both when the vendor is V(none).'),
                   ("An error when an index is not one of the node's GPUs, is given twice, or when "
                    'O(nproc_per_node) is larger than the number of indexes (unless the vendor is V(none)). Not '
                    'given, empty or null, neither variable is set. O(env_overrides) wins, and a null there '
                    'removes the variable.'),)),
    'rocm_defaults': dict(doc=(('ROCm runtime variables set on AMD nodes only. When not given (or null) this is '
                    'C(HSA_ENABLE_SDMA=0) (copies use blit kernels instead of the SDMA engines, the workaround for '
                    'SDMA copy hangs on MI300-class GPUs that the aorta launcher passes to its ranks). V({}) sets '
                    'none. V({}) does not drop the C(HSA_NO_SCRATCH_RECLAIM=1) that RCCL needs on some nodes (see '
                    'the description); naming C(HSA_NO_SCRATCH_RECLAIM) here decides it.'),
                   ('C(HSA_ENABLE_IPC_MODE_LEGACY) is not a default (some ROCm 7 images need V(1), on others it '
                    'breaks RCCL P2P); set it here or in O(env_overrides).'),)),
    'require_transport': dict(doc=('Set C(NCCL_NET) to V(IB) (InfiniBand/RoCE), V(Libfabric) (EFA, the name aws-ofi-nccl '
                   'registers) or V(Socket) (TCP) so NCCL fails instead of silently falling back to sockets.'), default=False),
    'env_overrides': dict(doc=(('Variables that win over anything computed; a null value removes the variable (returned in '
                    'RV(unset)).'),
                   ('C(NCCL_SOCKET_IFNAME), C(GLOO_SOCKET_IFNAME) and C(NCCL_IB_HCA) overrides are checked against '
                    'the node. One that selects nothing is an error, a prefix that matches several interfaces or '
                    'HCAs is a warning. C(GLOO_SOCKET_IFNAME) must be plain names separated by commas (gloo knows '
                    'no C(=) or C(^) prefix).'),), default={}),
}
