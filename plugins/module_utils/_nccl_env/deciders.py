# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Per-host NCCL/RCCL environment from a node's ``trainops_node`` facts plus settings. Pure: no I/O.

``compute(facts, settings)`` returns the environment of one node's ranks::

    env       {VAR: "value"}                 every value a string
    sources   {VAR: "detected"|"knob"|"default"|"override"}
    reasons   {VAR: "why this value"}        one short sentence per variable
    transport "rdma" | "efa" | "tcp"         what NCCL will use between nodes (efa: the aws-ofi-nccl plugin)
    link_layer "infiniband" | "roce" | "efa" | None   of the RDMA ports used (None over TCP)
    hcas      ["mlx5_0:1", ...]              the RDMA ports used ([] over TCP)
    left_out  {"mlx5_8:1": "why"}            ACTIVE ports the automatic choice did not take, and why
    topology  str | None                     how the PCIe topology chose the HCAs, or why it could not (auto only)
    socket_ifname ["ens5"]                   the socket interface(s)
    vendor    "nvidia" | "amd" | "none"
    library   {name, version, source}        the NCCL/RCCL the decisions were made for
    gpudirect True | False | None            GPUDirect RDMA will be used (None: facts do not say)
    unset     [VAR, ...]                     variables env_overrides removed (null values)
    errors    [str]                          user-actionable; never raised
    warnings  [str]

Each variable is decided by one function, named in ``DECIDERS`` (variable -> function), so a reader finds the
rule behind a variable there: the network deciders (socket interface, RDMA ports and transport, QoS) are in
network.py, the RDMA path's (RoCE GID, EFA, GPUDirect RDMA) in gpudirect.py, the GPU ones (channels, threads, GPU ids, NCCL_DEBUG, ROCm runtime) in gpu.py, and
``_overrides`` and ``compute``, which calls them all in order, here; what they share (``_Out``, ``_library``, the
settings helpers) is in core.py. The rules and the NCCL/RCCL sources they follow are listed in docs/nccl.md.
The facts are read by facts.py (ports, interfaces, GIDs, PCIe layout); cluster.py checks the results of the
nodes against each other and render.py writes them to an env file or nccl.conf.

Settings (every key optional; a missing key takes the default in brackets). The settings, their variables and
ranges are declared once in _knobs.KNOBS (SETTINGS, network.QOS and part of DECIDERS are read from it); "unset" is
_knobs.is_unset everywhere:

    network_mode    auto|rdma|tcp [auto]; auto = rdma when the node has an ACTIVE RDMA port (and GPUs), else tcp
    socket_ifname   auto | name | [names] [auto]; auto = facts.network.ifname
    ib_hca          auto | [names or "name:port"] | "a:1,b:1" [auto]; auto = the ACTIVE ports, see _auto_ports;
                    "name:port:rail:plane" (rail/plane optional, port may be empty) with NCCL >= 2.30.7
    gid_index       auto | int >= 0 | unset (or null) [auto]; see _gid
    net_gdr_level   auto | LOC|PIX|PXB|PHB|SYS | int >= 0 | unset (or null) [auto]; auto = leave it to NCCL
    channels        int | null [null] -> NCCL_MAX_NCHANNELS; null leaves it to the library
    min_channels    int | null [null] -> NCCL_MIN_NCHANNELS
    threads         int | null [null] -> NCCL_NTHREADS or RCCL_THREADS_PER_BLOCK (by vendor and library version)
    ib_tc, ib_fifo_tc, ib_sl, ib_qps_per_connection, cross_nic   int | null: the range knobs of _knobs.KNOBS (range,
                    variable, what), e.g. ib_tc 0-255 -> NCCL_IB_TC; null leaves the variable to the library
    library_version auto | "2.21.5" [auto]; auto = facts.library.version
    nccl_debug      VERSION|WARN|INFO|TRACE | null [WARN]; null (or "" / "unset") leaves NCCL_DEBUG unset
    vendor          nvidia|amd|none [facts.gpu.vendor]
    nproc_per_node  int | null [null]; checked against facts.gpu.count (and gpu_ids) unless vendor is none
    gpu_ids         [int] | "4,5,6,7" | null [null]; the GPUs the ranks may use (a Slurm job's, on a shared node) ->
                    CUDA_VISIBLE_DEVICES (nvidia), ROCR_VISIBLE_DEVICES (amd), both (none); null/[] sets neither
    nnodes          int | null [null]; the job's node count (RCCL caps channels at 64 when it is > 1); null: one node
    rocm_defaults   {VAR: value} | null [DEFAULT_ROCM_ENV]; AMD nodes only; {} sets none
    require_transport bool [false]; true sets NCCL_NET (IB, Libfabric or Socket) so NCCL fails instead of falling back
    env_overrides   {VAR: value | null} [{}]; a value always wins, null removes the variable
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.trainops.multinode.plugins.module_utils import _knobs
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.core import (
    _Out, _env_value, _is_auto, _is_unset, _library,
)
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.facts import _get, _ports
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.gpu import (
    _channels, _debug, _gpu_ids, _nproc, _rocm, _scratch_reclaim, _threads, _visible_devices,
)
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.gpudirect import _efa, _gdr, _gid, _gpudirect
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.network import (
    _check_override, _cross_nic, _final_transport, _ib_disable, _ib_hca, _network_mode, _qos, _require_transport,
    _socket, _socket_family, _transport,
)
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.render import _ENV_NAME

VENDORS = ('nvidia', 'amd', 'none')

SETTINGS = _knobs.SETTINGS


# --- the computation -------------------------------------------------------------------------------

def _overrides(out, facts, settings, ports):
    overrides = settings.get('env_overrides')
    if overrides in (None, {}):
        return
    if not isinstance(overrides, Mapping):
        out.errors.append('env_overrides must be a dict of VAR: value (got %r)' % (overrides,))
        return
    for var in sorted(overrides, key=str):
        value = overrides[var]
        if not isinstance(var, str) or not _ENV_NAME.fullmatch(var):
            out.errors.append('env_overrides: %r is not a valid environment variable name' % (var,))
            continue
        if value is None:
            out.drop(var)
            out.unset.append(var)
            continue
        text = _env_value(value)
        if text is None:
            out.errors.append('env_overrides %s: the value must be a string, number or boolean (got %r)' % (var, value))
            continue
        if '\n' in text or '\r' in text or '\0' in text:
            out.errors.append('env_overrides %s: the value must be one line' % var)
            continue
        out.set(var, text, 'override', 'env_overrides')
        _check_override(out, var, text, facts, ports)


DECIDERS = dict(
    [(var, knob.decider) for knob in _knobs.KNOBS if knob.decider for var in knob.env],
    NCCL_SOCKET_FAMILY='_socket_family', NCCL_IB_DISABLE='_ib_disable', NCCL_IB_ADDR_FAMILY='_gid_per_port',
    NCCL_IB_ROCE_VERSION_NUM='_gid_per_port', FI_PROVIDER='_efa', NCCL_NET_PLUGIN='_efa', NCCL_DMABUF_ENABLE='_gdr',
    HSA_ENABLE_SDMA='_rocm', HSA_NO_SCRATCH_RECLAIM='_scratch_reclaim', **{'(any)': '_overrides'})
"""Which function decides each variable (documentation for readers; tests check every name exists): a knob's
variables as _knobs.KNOBS declares them (its ``decider``), and the variables no knob sets directly."""


def _vendor(out, facts, settings):
    fact_vendor = str(_get(facts, 'gpu', 'vendor') or 'none')
    vendor = settings.get('vendor') or fact_vendor
    if vendor not in VENDORS:
        out.errors.append('vendor must be one of %s (got %r)' % (', '.join(VENDORS), vendor))
        vendor = fact_vendor if fact_vendor in VENDORS else 'none'
    return vendor, fact_vendor


def compute(facts, settings=None):
    """The NCCL/RCCL environment of one node; see the module docstring for settings and result."""
    settings = dict(settings or {})
    out = _Out()
    facts = facts if isinstance(facts, Mapping) else {}
    if not facts:
        out.errors.append('no node facts given: run trainops.multinode.node_facts on the node first')
    unknown = sorted(k for k in settings if k not in SETTINGS)
    if unknown:
        out.errors.append('unknown setting(s): %s' % ', '.join(unknown))

    vendor, fact_vendor = _vendor(out, facts, settings)
    library = _library(out, facts, settings, vendor)
    mode = _network_mode(out, settings)

    socket_names = _socket(out, facts, settings)
    _socket_family(out, facts, socket_names)

    ports = _ports(facts)
    transport, chosen, hca_auto = _transport(out, facts, settings, mode, vendor, ports, library)
    layers = set(p['link_layer'] for p in chosen)
    link_layer = (layers.pop() if len(layers) == 1 else 'mixed') if chosen else None
    _ib_disable(out, transport, mode, vendor)
    _ib_hca(out, transport, chosen, hca_auto)
    if transport == 'rdma':
        _gid(out, chosen, settings, library)
    elif not _is_auto(settings.get('gid_index'), 'gid_index' in settings) and not _is_unset(settings.get('gid_index')):
        out.warnings.append('gid_index ignored: NCCL uses %s on this node' % (
            'the aws-ofi-nccl plugin (EFA has no GIDs)' if transport == 'efa' else 'TCP sockets'))
    _efa(out, transport, facts)
    path = _gpudirect(facts, vendor, library)
    _gdr(out, settings, vendor, path, transport, facts, library)
    _qos(out, settings, transport, link_layer, library, chosen)
    _cross_nic(out, settings, transport)
    _require_transport(out, settings, transport)

    _channels(out, settings, vendor, library, facts)
    _threads(out, settings, vendor, library, facts)
    gpu_ids = _gpu_ids(out, settings, facts, vendor)
    _nproc(out, settings, facts, vendor, fact_vendor, gpu_ids)
    _visible_devices(out, gpu_ids, facts, vendor)
    _debug(out, settings)
    _rocm(out, settings, vendor)
    _overrides(out, facts, settings, ports)
    _scratch_reclaim(out, facts, settings, vendor, library)

    active = [p for p in ports if p['state'] == 'ACTIVE']
    transport, link_layer, chosen = _final_transport(out, transport, link_layer, chosen, active)
    gpudirect = None if path is None else bool(path) and transport != 'tcp'
    return dict(env=out.env, sources=out.sources, reasons=out.reasons, transport=transport, link_layer=link_layer,
                hcas=[p['key'] for p in chosen], left_out=dict(out.left_out), topology=out.topology,
                socket_ifname=socket_names, vendor=vendor, gpudirect=gpudirect,
                library=dict(name=library['name'], version=library.get('text'), source=library.get('source'),
                             read_in=library.get('read_in')),
                unset=sorted(out.unset), errors=out.errors, warnings=out.warnings)
