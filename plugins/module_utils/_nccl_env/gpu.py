# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The GPU deciders: what the ranks' NCCL/RCCL and ROCm runtime do on one node. Pure: no I/O.

Channels (``_channels``, by library version, GPU architecture and node count) and threads (``_threads``), the rank
count against the GPUs (``_nproc``), the GPUs the ranks may use (``_gpu_ids``, ``_visible_devices``), NCCL_DEBUG
(``_debug``), the ROCm runtime settings (``_rocm``) and HSA_NO_SCRATCH_RECLAIM (``_scratch_reclaim``). compute
(deciders.py) calls them in order; the shared core is in core.py.
"""

from __future__ import annotations

import re

from collections.abc import Mapping

from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.core import (
    LIBRARY_VERSION_KNOB, _env_value, _int_setting, _is_unset,
)
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.facts import (
    _by_version, _get, _int, _library_label, _since, _version,
)
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.render import _ENV_NAME

NCCL_DEBUG_LEVELS = ('VERSION', 'WARN', 'INFO', 'TRACE')
DEFAULT_NCCL_DEBUG = 'WARN'

# Library facts, each checked against the sources named (docs/nccl.md has the list):
NCCL_MAXCHANNELS = (((2, 25), 64), ((0,), 32))
"""src/include/device.h MAXCHANNELS: 64 since NCCL 2.25.1, 32 before; ncclMaxNchannels (src/graph/connect.cc) clamps
NCCL_MAX_NCHANNELS to it."""
RCCL_MAXCHANNELS = (((2, 20), 128), ((2, 18, 6), 64), ((0,), 32))
"""RCCL MAXCHANNELS: src/include/devcomm.h 32 in rocm-6.0.0 (2.18.3), 64 in rocm-6.1.0 (2.18.6); src/include/device.h
128 from rocm-6.2.0 (2.20.5). ncclMaxNchannels/ncclMinNchannels (src/graph/connect.cc) clamp to it."""
RCCL_FULL_CHANNEL_GFX = ('gfx942', 'gfx950')
"""ncclTopoPostset (src/graph/connect.cc): only these use MAXCHANNELS, other GPUs get 2*CHANNEL_LIMIT."""
RCCL_OTHER_GFX_CHANNELS = 32
"""2*CHANNEL_LIMIT (src/include/device.h CHANNEL_LIMIT 16), ncclTopoPostset's maxChannels off gfx94x since rocm-6.2.0;
MAXCHANNELS/2 = 32 in rocm-6.1.0, MAXCHANNELS 32 for every GPU in rocm-6.0.0."""
RCCL_MULTI_NODE_CHANNELS = 64
"""ncclTopoPostset (rocm-6.2.0 on): maxChannels = std::min(64, maxChannels) when comm->nNodes > 1, and
minNchannels = std::min(64, minNchannels) (rocm-6.2.0 src/graph/connect.cc:631, :677)."""
RCCL_MIN_RESET_SINCE = (2, 21)
"""ncclTopoPostset from rocm-6.3 (2.21.5, src/graph/connect.cc:682-689): a minimum above maxChannels, or above 64 with
fewer than 8 ranks, is ignored ("NCCL_MIN_NCHANNELS set by environment is ignored") and 2 is used. Before, a minimum
above maxChannels was honoured up to MAXCHANNELS (ncclMinNchannels clamps it there; copyChannels duplicates)."""
RCCL_MIN_RESET_RANKS = 8
RCCL_LIFTED_CAP_SINCE = (2, 31)
"""The rocm-systems tree (projects/rccl, RCCL 2.31 development, ncclTopoPostset): the 64 cap across nodes is skipped
when NCCL_MAX_NCHANNELS > 64 ("the request is then taken as an opt-in to the extended upper bound"), and a minimum
across nodes is capped at MAXCHANNELS instead of 64. Released RCCL 2.30.x is not known to have it."""
RCCL_VERSIONS = ((2, 18, 3), (2, 18, 6), (2, 20), (2, 21), (2, 31))
"""One version of each channel-rule era, to list the limits when the RCCL version is unknown."""
RCCL_CU_CHANNELS_SINCE = (2, 21)
"""ncclTopoPostset from rocm-6.3 (2.21.5): on gfx94x at most the GPU's CU count (gpu.cu 20/38/80 there, std::min(cu,
MAXCHANNELS) in later RCCL): a CPX partition of an MI300X (38 CUs) gets 38 channels."""
NCCL_NTHREADS_RANGE = (64, 512, 32)
"""NVIDIA: src/graph/tuning.cc getNthreads(2*WARP_SIZE .. NCCL_SIMPLE_MAX_NTHREADS=512, multiple of WARP_SIZE=32)."""
RCCL_MAX_NTHREADS = 256
"""RCCL src/include/device.h NCCL_MAX_NTHREADS 256; tuning.cc takes NCCL_NTHREADS from 4*warpSize to 256. RCCL >= 2.28
rcclOptThreadBlockSize: RCCL_THREADS_PER_BLOCK rounded up to a multiple of the warp size, then at most
RCCL_DEFAULT_MAX_NTHREADS / RCCL_GFX950_MAX_NTHREADS (256) and at least 3 * warp size."""
RCCL_THREADS_PER_BLOCK_SINCE = (2, 28)
"""RCCL CHANGELOG "RCCL 2.28.3 for ROCm 7.11": RCCL_THREADS_PER_BLOCK replaces NCCL_NTHREADS."""
RCCL_MIN_WARPS_PER_BLOCK = 3
"""rcclOptThreadBlockSize: nThreads < 3 * comm->WarpSize is raised to it ("min requirement for tree")."""
SCRATCH_RECLAIM_GFX = ('gfx942', 'gfx950')
"""The GPUs RCCL's validHsaScratchEnvSetting (src/rccl_wrap.cc) checks HSA_NO_SCRATCH_RECLAIM on."""
SCRATCH_RECLAIM_ROCM_FIXED = (6, 4, 2)
"""validHsaScratchEnvSetting accepts an unset HSA_NO_SCRATCH_RECLAIM only from hipRuntimeVersion 60443484 (HIP
6.4.43484, ROCm 6.4.2; ROCm 6.4.0/6.4.1 have HIP 6.4.43482/43483), and only with MEC firmware >= 177 (gfx942) / >= 24
(gfx950), which the facts do not record: from 6.4.2 a missing value may still be refused, so it is set there too.
RCCL's CHANGELOG says "ROCm versions earlier than 6.4.0"."""
RCCL_SCRATCH_RECLAIM = (((2, 30), 'warns'), ((2, 27), 'refuses'), ((2, 26), 'warns'))
"""What RCCL does without HSA_NO_SCRATCH_RECLAIM=1 where it wants it: no check before 2.26 (2.22.3 and older); 2.26
(ROCm 7.0; PR #1683: WARN below ROCm 6.4, not pinned to the release tag); 2.27/2.28 checkHsaEnvSetting (src/init.cc)
ERRORs "Please set HSA_NO_SCRATCH_RECLAIM=1 and rerun." and returns ncclSystemError, so ncclInit fails; the 2.30 tree
(ROCm/rocm-systems projects/rccl) only WARNs "must be set to avoid performance degradation"."""

VISIBLE_DEVICES_VARS = {'nvidia': ('CUDA_VISIBLE_DEVICES',), 'amd': ('ROCR_VISIBLE_DEVICES',),
                        'none': ('CUDA_VISIBLE_DEVICES', 'ROCR_VISIBLE_DEVICES')}
"""The variables that give the ranks the GPUs of gpu_ids, by vendor: those Slurm's gres/gpu plugin sets in a step
(src/plugins/gres/gpu: CUDA_VISIBLE_DEVICES for NVIDIA, ROCR_VISIBLE_DEVICES for AMD, whose HIP_VISIBLE_DEVICES then
counts within them); a node without a detected vendor gets both, as the lab's Slurm sets both."""

DEFAULT_ROCM_ENV = {'HSA_ENABLE_SDMA': '0'}
"""ROCm runtime settings put on AMD nodes unless ``rocm_defaults`` says otherwise."""

ROCM_REASONS = {
    'HSA_ENABLE_SDMA': ('ROCm default of this collection: copies use blit kernels instead of the SDMA engines, the '
                        'workaround for SDMA copy-completion hangs seen on MI300-class GPUs; the aorta launcher passes '
                        'it to every rank (docker exec -e). Costs some host<->device copy bandwidth; drop it with '
                        'rocm_defaults {} or env_overrides HSA_ENABLE_SDMA null'),
}

# Not a default: HSA_ENABLE_IPC_MODE_LEGACY=1 (in the aorta set_env_variables.sh, which never reached the ranks).
# Reports conflict: some ROCm 7 images need it, on others it makes hipIpcGetMemHandle fail so RCCL loses P2P.


# --- channels and threads ---------------------------------------------------------------------------

def _gfx(facts):
    return sorted(set(str(g) for g in (_get(facts, 'gpu', 'gfx') or []) if g))


def _compute_units(facts):
    """The GPUs' common compute-unit count (facts.gpu.compute_units, a CPX partition has fewer), None if unknown."""
    counts = set(_int(c) for c in (_get(facts, 'gpu', 'compute_units') or []))
    return counts.pop() if len(counts) == 1 and None not in counts else None


def _rccl_channel_limit(version, facts, nnodes, channels=None):
    """(the largest NCCL_MAX_NCHANNELS RCCL ``version`` honours, why): ncclTopoPostset's maxChannels. ``channels``:
    the NCCL_MAX_NCHANNELS asked for (above 64 it lifts the cap across nodes from RCCL_LIFTED_CAP_SINCE)."""
    top = _by_version(RCCL_MAXCHANNELS, version)
    why = ['MAXCHANNELS %d' % top]
    gfx = _gfx(facts)
    if not gfx or not all(g in RCCL_FULL_CHANNEL_GFX for g in gfx):
        top = min(top, RCCL_OTHER_GFX_CHANNELS)
        why = ['%d on %s (all MAXCHANNELS only on %s)' % (
            RCCL_OTHER_GFX_CHANNELS, '/'.join(gfx) if gfx else 'GPUs of unknown architecture',
            '/'.join(RCCL_FULL_CHANNEL_GFX))]
    else:
        units = _compute_units(facts)
        if units and units < top and tuple(version[:2]) >= RCCL_CU_CHANNELS_SINCE:
            top = units
            why.append('%d: the %d compute units of each %s (a CPX-mode partition)' % (units, units, gfx[0]))
    lifted = tuple(version[:2]) >= RCCL_LIFTED_CAP_SINCE and (channels or 0) > RCCL_MULTI_NODE_CHANNELS
    if (nnodes or 1) > 1 and top > RCCL_MULTI_NODE_CHANNELS and tuple(version[:2]) >= (2, 20) and not lifted:
        top = RCCL_MULTI_NODE_CHANNELS
        why.append('%d when the job has more than one node (%d nodes)%s' % (
            RCCL_MULTI_NODE_CHANNELS, nnodes, ', unless channels is above 64' if tuple(version[:2]) >=
            RCCL_LIFTED_CAP_SINCE else ''))
    return top, ', '.join(why)


def _rccl_min_limit(version, facts, nnodes, nranks, channels):
    """(the largest NCCL_MIN_NCHANNELS RCCL ``version`` honours, what it does above it: 'clamp' to the limit or
    'reset' to 2, why). ncclMinNchannels clamps to MAXCHANNELS, ncclTopoPostset to 64 across nodes (MAXCHANNELS from
    RCCL_LIFTED_CAP_SINCE), and from RCCL_MIN_RESET_SINCE resets a minimum above maxChannels (or above 64 with fewer
    than 8 ranks) to 2; before, a minimum above maxChannels (32 on gfx90a) is honoured."""
    release = tuple(version[:2])
    limit = _by_version(RCCL_MAXCHANNELS, version)
    above, why = 'clamp', ['MAXCHANNELS %d' % limit]
    if (nnodes or 1) > 1 and release >= (2, 20) and release < RCCL_LIFTED_CAP_SINCE and limit > RCCL_MULTI_NODE_CHANNELS:
        limit = RCCL_MULTI_NODE_CHANNELS
        why.append('%d when the job has more than one node (%d nodes)' % (RCCL_MULTI_NODE_CHANNELS, nnodes))
    if release >= RCCL_MIN_RESET_SINCE:
        top, top_why = _rccl_channel_limit(version, facts, nnodes, channels)
        if top < limit:
            limit, above = top, 'reset'
            why = ['the %d channels RCCL allows here (%s)' % (top, top_why)]
        if nranks is not None and nranks < RCCL_MIN_RESET_RANKS and limit > RCCL_MULTI_NODE_CHANNELS:
            limit, above = RCCL_MULTI_NODE_CHANNELS, 'reset'
            why = ['%d with fewer than %d ranks (%d)' % (RCCL_MULTI_NODE_CHANNELS, RCCL_MIN_RESET_RANKS, nranks)]
    return limit, above, ', '.join(why)


def _max_channels(vendor, library, facts, nnodes, channels=None):
    """(the largest NCCL_MAX_NCHANNELS the library honours, why); (None, why) when that depends on an unknown version.

    NCCL: MAXCHANNELS by version. RCCL: MAXCHANNELS by version, 32 off gfx942/gfx950, the CU count of a CPX partition,
    64 on more than one node (ncclTopoPostset). The why of an unknown version lists the limits of every version.
    """
    version = library.get('version')
    if vendor == 'amd':
        if version is None:
            limits = sorted(set(_rccl_channel_limit(since, facts, nnodes, channels)[0] for since in RCCL_VERSIONS))
            return None, limits
        return _rccl_channel_limit(version, facts, nnodes, channels)
    if version is None:
        return None, sorted(set(value for dummy, value in NCCL_MAXCHANNELS))
    return _by_version(NCCL_MAXCHANNELS, version), 'MAXCHANNELS'


def _min_channels(vendor, library, facts, nnodes, nranks, channels):
    """(limit, 'clamp' | 'reset', why) for NCCL_MIN_NCHANNELS; (None, None, [limits]) when the version is unknown.
    NCCL: ncclMinNchannels clamps it to MAXCHANNELS."""
    version = library.get('version')
    if vendor == 'amd':
        if version is None:
            return None, None, sorted(set(_rccl_min_limit(since, facts, nnodes, nranks, channels)[0]
                                          for since in RCCL_VERSIONS))
        return _rccl_min_limit(version, facts, nnodes, nranks, channels)
    top, why = _max_channels(vendor, library, facts, nnodes, channels)
    return top, None if top is None else 'clamp', why


def _channel_problem(name, number, top, above, why, library):
    """The error for a channel setting above what the library honours, None when it is within."""
    if top is None and number > why[0]:
        limits = '/'.join(str(v) for v in why)
        return ('%s %d: the %s version is unknown and its limit depends on it (%s by version, the smallest %d): set '
                '%s to the version the ranks load' % (name, number, library['name'].upper(), limits, why[0],
                                                      LIBRARY_VERSION_KNOB))
    if top is not None and number > top:
        does = ('RCCL ignores it and uses 2 (ncclTopoPostset: "NCCL_MIN_NCHANNELS set by environment is ignored")'
                if above == 'reset' else 'the library would silently use %d' % top)
        return '%s %d is more than %s allows (%d, %s): %s' % (name, number, _library_label(library), top, why, does)
    return None


def _channels(out, settings, vendor, library, facts):
    """NCCL_MAX_NCHANNELS / NCCL_MIN_NCHANNELS: left to the library unless set; a value the library would clamp or
    ignore is an error naming its limit (the nNodes cap applies to both: ncclTopoPostset)."""
    channels = _int_setting(out, settings, 'channels', 1, None)
    low = _int_setting(out, settings, 'min_channels', 1, None)
    nnodes = _int_setting(out, settings, 'nnodes', 1, None)
    if channels is None and low is None:
        return
    if vendor == 'none':
        # kept in the ranks' environment as the record of the knob (the local and lab stand-ins for GPU nodes)
        out.warnings.append('channels/min_channels have no effect: the node has no GPUs, gloo does not use them')
        top, why = NCCL_MAXCHANNELS[0][1], 'no GPUs: no library reads it'
        low_top, above, low_why = top, 'clamp', why
    else:
        top, why = _max_channels(vendor, library, facts, nnodes, channels)
        nproc = _int(settings.get('nproc_per_node'))
        nranks = nproc * (nnodes or 1) if nproc and nproc > 0 else None
        low_top, above, low_why = _min_channels(vendor, library, facts, nnodes, nranks, channels)
    for name, number, limit, does, reason in (('channels', channels, top, 'clamp', why),
                                              ('min_channels', low, low_top, above, low_why)):
        problem = _channel_problem(name, number, limit, does, reason, library) if number is not None else None
        if problem:
            out.errors.append(problem)
    limit = ('at most %d: %s' % (top, why)) if top is not None else 'version unknown, within every version\'s limit'
    if channels is not None:
        out.set('NCCL_MAX_NCHANNELS', channels, 'knob', 'channels setting (%s)' % limit)
    if low is not None:
        out.set('NCCL_MIN_NCHANNELS', low, 'knob', 'min_channels setting')
        if channels is not None and low > channels:
            out.errors.append('min_channels %d is larger than channels %d' % (low, channels))


def _warp_size(facts):
    """64 on CDNA (gfx9xx: MI100-MI350), 32 on RDNA (gfx10xx-gfx12xx); None when the facts do not say."""
    gfx = _gfx(facts)
    if not gfx:
        return None
    sizes = set(64 if re.match(r'^gfx9', g) else 32 for g in gfx)
    return sizes.pop() if len(sizes) == 1 else None


def _rccl_threads_per_block(threads, warp):
    """The block size RCCL >= 2.28 runs for RCCL_THREADS_PER_BLOCK=threads (rcclOptThreadBlockSize): rounded up to a
    multiple of the warp size, then at most RCCL_MAX_NTHREADS, at least 3 warps."""
    size = -(-threads // warp) * warp
    return max(min(size, RCCL_MAX_NTHREADS), RCCL_MIN_WARPS_PER_BLOCK * warp)


def _threads(out, settings, vendor, library, facts):
    """NCCL_NTHREADS (NCCL; RCCL before 2.28) or RCCL_THREADS_PER_BLOCK (RCCL >= 2.28), values the library takes.

    NVIDIA: multiples of 32 from 64 to 512 (src/graph/tuning.cc). RCCL before 2.28: NCCL_NTHREADS from 4 * warp size
    to 256, so only 256 on gfx942 (wave64). RCCL >= 2.28: RCCL_THREADS_PER_BLOCK, which rcclOptThreadBlockSize rounds
    to the warp size and clamps to [3 * warp size, 256]: any other value is an error naming what RCCL would run.
    """
    threads = _int_setting(out, settings, 'threads', 1, None)
    if threads is None:
        return
    label = _library_label(library)
    if vendor == 'none':
        out.warnings.append('threads has no effect: the node has no GPUs, gloo does not use it')
        return
    ran = None
    if vendor == 'nvidia':
        low, high, step = NCCL_NTHREADS_RANGE
        var, valid = 'NCCL_NTHREADS', list(range(low, high + 1, step))
        why = 'NCCL takes NCCL_NTHREADS as a multiple of 32 from 64 to 512'
    elif library.get('version') is None:
        out.errors.append('threads %d: the RCCL version is unknown and it decides the variable (NCCL_NTHREADS before '
                          'RCCL 2.28, RCCL_THREADS_PER_BLOCK since) and its range: set %s to the version the ranks '
                          'load' % (threads, LIBRARY_VERSION_KNOB))
        return
    elif _since(library, RCCL_THREADS_PER_BLOCK_SINCE):
        warp = _warp_size(facts) or 64
        low = RCCL_MIN_WARPS_PER_BLOCK * warp
        var, valid = 'RCCL_THREADS_PER_BLOCK', list(range(low, RCCL_MAX_NTHREADS + 1, warp))
        why = ('%s rounds RCCL_THREADS_PER_BLOCK up to a multiple of the warp size %d and clamps it to [%d, %d] '
               '(rcclOptThreadBlockSize)' % (label, warp, low, RCCL_MAX_NTHREADS))
        ran = _rccl_threads_per_block(threads, warp)
        if threads in valid and str(_get(settings, 'env_overrides', 'RCCL_WARP_SPEED_ENABLE') or '') != '1':
            out.warnings.append('threads %d sets RCCL_THREADS_PER_BLOCK, which %s only applies with WarpSpeed '
                                '(RCCL_WARP_SPEED_ENABLE=1 in trainops_env)' % (threads, label))
    else:
        warp = _warp_size(facts) or 64
        var, valid = 'NCCL_NTHREADS', list(range(4 * warp, RCCL_MAX_NTHREADS + 1, warp))
        why = '%s reads NCCL_NTHREADS from %d (4 x warp size %d) to %d (NCCL_MAX_NTHREADS)' % (
            label, 4 * warp, warp, RCCL_MAX_NTHREADS)
    if threads not in valid:
        out.errors.append('threads %d is not a value %s takes (%s): %s; %s' % (
            threads, label, ', '.join(str(v) for v in valid), why,
            'it would fall back to its own value' if ran is None else 'it would run %d threads' % ran))
        return
    out.set(var, threads, 'knob', 'threads setting: %s' % why)


# --- the GPUs the ranks use ---------------------------------------------------------------------------

def _nproc(out, settings, facts, vendor, fact_vendor, gpu_ids=None):
    number = _int_setting(out, settings, 'nproc_per_node', 1, None)
    if number is None or vendor == 'none':
        return
    count = _int(_get(facts, 'gpu', 'count')) or 0
    if number > count:
        out.errors.append('nproc_per_node %d is larger than the %d GPU(s) of this node (vendor %s, detected %s): '
                          'lower nproc_per_node or fix the GPU detection' % (number, count, vendor, fact_vendor))
    elif gpu_ids and number > len(gpu_ids):
        out.errors.append('nproc_per_node %d is larger than the %d GPU(s) the ranks may use on this node (gpu_ids %s, '
                          'the GPUs the Slurm job holds here): lower nproc_per_node or allocate more GPUs per node '
                          '(--gpus-per-node)' % (number, len(gpu_ids), ','.join(str(i) for i in gpu_ids)))


def _gpu_ids(out, settings, facts, vendor):
    """The GPU ids of the gpu_ids setting as a list of ints ([] when not given); errors for a bad value."""
    value = settings.get('gpu_ids')
    if value is None or value == '' or value == []:
        return []
    items = value.split(',') if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        out.errors.append('gpu_ids must be a list of GPU indexes such as [4, 5, 6, 7] (got %r)' % (value,))
        return []
    ids = []
    for item in items:
        number = item if isinstance(item, int) and not isinstance(item, bool) else _int(str(item).strip())
        if number is None or number < 0:
            out.errors.append('gpu_ids: %r is not a GPU index (an integer from 0)' % (item,))
            return []
        ids.append(number)
    if len(set(ids)) != len(ids):
        out.errors.append('gpu_ids %s names a GPU twice' % ','.join(str(i) for i in ids))
        return []
    count = _int(_get(facts, 'gpu', 'count')) or 0
    if vendor != 'none' and count and max(ids) >= count:
        out.errors.append('gpu_ids %s: this node has %d GPU(s) (indexes 0-%d); the Slurm job\'s GPU indexes do not '
                          'match the node\'s GPUs' % (','.join(str(i) for i in ids), count, count - 1))
        return []
    return ids


def _visible_devices(out, ids, facts, vendor):
    """CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES from gpu_ids (VISIBLE_DEVICES_VARS)."""
    if not ids:
        return
    count = _int(_get(facts, 'gpu', 'count')) or 0
    text = ','.join(str(i) for i in ids)
    if vendor == 'none':
        held = 'no GPU vendor on this node, so both variables'
    elif len(ids) < count:
        held = '%d of the node\'s %d GPUs (a node shared with other jobs)' % (len(ids), count)
    else:
        held = 'every GPU of the node'
    for var in VISIBLE_DEVICES_VARS[vendor]:
        out.set(var, text, 'knob', 'gpu_ids setting: the GPUs the Slurm job holds on this node, as its ranks will see '
                'them (Slurm\'s indexes; numbered from 0 where the session is confined to the job\'s devices, the '
                'preflight\'s gpu_view) (%s)' % held)


# --- NCCL_DEBUG and the ROCm runtime ------------------------------------------------------------------

def _debug(out, settings):
    """NCCL_DEBUG: WARN unless set; null leaves it unset."""
    if 'nccl_debug' not in settings:
        out.set('NCCL_DEBUG', DEFAULT_NCCL_DEBUG, 'default', 'default of this collection: NCCL says why it fails (WARN) '
                'without the per-rank INFO output')
    elif not _is_unset(settings['nccl_debug']):
        level = str(settings['nccl_debug']).strip().upper()
        if level in NCCL_DEBUG_LEVELS:
            out.set('NCCL_DEBUG', level, 'knob', 'nccl_debug setting')
        else:
            out.errors.append('nccl_debug must be one of %s or null (got %r)' % (
                ', '.join(NCCL_DEBUG_LEVELS), settings['nccl_debug']))


def _rocm(out, settings, vendor):
    """HSA_* on AMD nodes: rocm_defaults, else DEFAULT_ROCM_ENV."""
    if vendor != 'amd':
        return
    rocm = settings.get('rocm_defaults') if 'rocm_defaults' in settings else None
    if rocm is None:
        for var in sorted(DEFAULT_ROCM_ENV):
            out.set(var, DEFAULT_ROCM_ENV[var], 'default', ROCM_REASONS.get(var, 'ROCm default of this collection'))
    elif not isinstance(rocm, Mapping):
        out.errors.append('rocm_defaults must be a dict of VAR: value (got %r)' % (rocm,))
    else:
        for var in sorted(rocm):
            text = _env_value(rocm[var])
            if rocm[var] is None:
                continue
            if not isinstance(var, str) or not _ENV_NAME.fullmatch(var) or text is None or '\n' in text:
                out.errors.append('rocm_defaults: %r=%r is not a valid variable and value' % (var, rocm[var]))
                continue
            out.set(var, text, 'knob', 'rocm_defaults setting')


def _scratch_reclaim_need(facts, library):
    """(gfx, how, rocm) when RCCL checks HSA_NO_SCRATCH_RECLAIM on this node, else None.

    gfx: the node's gfx942/gfx950 targets; how: 'refuses' / 'warns' (RCCL_SCRATCH_RECLAIM), None when the RCCL
    version is unknown; rocm: facts.library.rocm as a version tuple, None when unknown. None when the GPUs are not
    gfx942/gfx950 or the RCCL is older than 2.26. The ROCm release alone never clears it: from ROCm 6.4.2 RCCL also
    wants MEC firmware >= 177 (gfx942) / >= 24 (gfx950), which the facts do not record, and "1" always passes.
    """
    gfx = [g for g in _gfx(facts) if g.startswith(SCRATCH_RECLAIM_GFX)]
    if not gfx:
        return None
    how = _by_version(RCCL_SCRATCH_RECLAIM, library.get('version'))
    if library.get('version') is not None and how is None:
        return None
    return gfx, how, _version(_get(facts, 'library', 'rocm'))


def _scratch_reclaim(out, facts, settings, vendor, library):
    """HSA_NO_SCRATCH_RECLAIM=1 on every gfx942/gfx950 node whose RCCL (2.26 and later) checks it.

    RCCL (src/init.cc checkHsaEnvSetting, src/rccl_wrap.cc validHsaScratchEnvSetting) accepts "1" always, an unset
    value only from HIP 6.4.43484 (ROCm 6.4.2) with MEC firmware >= 177 (gfx942) / >= 24 (gfx950); 2.27/2.28 refuse
    to initialize otherwise, 2.26 and 2.30 warn. The firmware is not in the facts, so it is set on any ROCm: it only
    keeps scratch memory bound to the queues (ROCR, amd_gpu_agent.cpp). Set as detected unless env_overrides or
    rocm_defaults name the variable; a value other than 1 (or its removal) is then an error where RCCL refuses below
    ROCm 6.4.2, a warning elsewhere.
    """
    var = 'HSA_NO_SCRATCH_RECLAIM'
    need = _scratch_reclaim_need(facts, library) if vendor == 'amd' else None
    if need is None:
        return
    gfx, how, rocm = need
    label = _library_label(library)
    rocm_label = 'ROCm %s' % _get(facts, 'library', 'rocm') if rocm else 'a ROCm runtime of unknown version'
    if how == 'refuses':
        does = '%s refuses to initialize without it (src/init.cc checkHsaEnvSetting: ncclSystemError)' % label
    elif how == 'warns':
        does = '%s warns without it (src/init.cc checkHsaEnvSetting: performance degradation)' % label
    else:
        does = ('the RCCL version is unknown: 2.27/2.28 refuse to initialize without it, 2.26 and 2.30 warn (set %s '
                'to decide)' % LIBRARY_VERSION_KNOB)
    where = ('%s with %s: RCCL wants HSA_NO_SCRATCH_RECLAIM=1 below ROCm 6.4.2 or MEC firmware %s (src/rccl_wrap.cc '
             'validHsaScratchEnvSetting)' % ('/'.join(sorted(set(gfx))), rocm_label,
                                             '177 on gfx942, 24 on gfx950'))
    rocm_defaults = settings.get('rocm_defaults')
    if var in out.unset:
        user, source = None, 'env_overrides %s null' % var
    elif out.sources.get(var) == 'override':
        user, source = out.env.get(var), 'env_overrides %s=%s' % (var, out.env.get(var))
    elif isinstance(rocm_defaults, Mapping) and var in rocm_defaults:
        user = None if rocm_defaults[var] is None else _env_value(rocm_defaults[var])
        source = 'rocm_defaults %s%s' % (var, ' null' if user is None else '=%s' % user)
    else:
        reason = '%s; %s' % (where, does)
        if rocm is None or rocm >= SCRATCH_RECLAIM_ROCM_FIXED:
            reason += ('; %s, so it is set anyway: "1" always passes, and on ROCm 6.4.2 and later it only keeps '
                       'scratch memory bound to the queues (ROCR amd_gpu_agent.cpp)' % (
                           'the ROCm version is unknown (facts.library.rocm)' if rocm is None else
                           'the MEC firmware RCCL also checks is not in the facts'))
        out.set(var, '1', 'detected', reason)
        return
    if user == '1':
        return
    message = '%s: %s; %s' % (source, where, does)
    if how == 'refuses' and rocm is not None and rocm < SCRATCH_RECLAIM_ROCM_FIXED:
        out.errors.append(message + '; set it to 1 in %s' % source.split(' ')[0])
    else:
        out.warnings.append(message)
