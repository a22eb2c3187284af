# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The GPUs a rank will see on this node: the host's GPU device files against those this session may use.

Where Slurm confines a job to its devices (``TaskPlugin=task/cgroup`` with ``ConstrainDevices=yes`` in cgroup.conf;
an SSH session adopted into the job by ``pam_slurm_adopt`` gets the job's devices cgroup too), a process may open
only the job's GPU device files, and CUDA/ROCm number the GPUs it can open from 0. Slurm itself then gives a step
local indexes: ``gres_use_local_device_index()`` (22.05.8 src/common/gres.c:406-429: task plugin ``cgroup`` and
``ConstrainDevices``) makes ``common_gres_set_env`` count ``local_inx`` 0, 1, ... over the allocated devices instead
of their global index (22.05.8 src/plugins/gres/common/gres_common.c:300-302; 23.11 the same file, 118-119). Seen on
the lab's Slurm 22.05.8 with ConstrainDevices: a step holding GPUs 2-3 got ``CUDA_VISIBLE_DEVICES=0,1``.

``/proc/driver/nvidia/gpus`` (and the kfd topology) list every GPU of the host whatever the cgroup allows, so the
GPU count of the node facts cannot tell. What can: the device cgroup check, which the kernel makes in
``inode_permission()`` for ``access(2)`` as for ``open(2)`` (``devcgroup_inode_permission``, cgroup v1 device lists and
v2 device programs alike), without opening the device (no driver call, no GPU initialised). :func:`probe` asks
``access(R_OK|W_OK)`` of every GPU device file (and names the session's cgroup); :func:`rank_view` (pure) decides the
indexes the ranks get and the problems, naming what the node saw.
"""

from __future__ import annotations

import os
import re

from ansible_collections.trainops.multinode.plugins.module_utils._torch_probe import list_dir, path_under, read_text

NVIDIA_DEVICE = re.compile(r'nvidia([0-9]+)\Z')
"""/dev/nvidia<N>: one per NVIDIA GPU (nvidiactl, nvidia-uvm, nvidia-caps are not GPUs)."""
RENDER_DEVICE = re.compile(r'renderD([0-9]+)\Z')
"""/dev/dri/renderD<N>: an AMD GPU's render node (what Slurm's gres.conf names for AMD GPUs), when amdgpu drives it."""


def gpu_devices(root='/', vendor='nvidia'):
    """The host's GPU device files as ``[(number, path as the node names it)]`` in number order: ``/dev/nvidia<N>``
    (NVIDIA), or the ``/dev/dri/renderD<N>`` nodes amdgpu drives (AMD)."""
    found = []
    if vendor == 'nvidia':
        for name in list_dir(root, 'dev'):
            match = NVIDIA_DEVICE.match(name)
            if match:
                found.append((int(match.group(1)), '/dev/' + name))
    elif vendor == 'amd':
        for name in list_dir(root, 'dev/dri'):
            match = RENDER_DEVICE.match(name)
            driver = _link_name(path_under(root, 'sys/class/drm', name, 'device/driver'))
            if match and driver == 'amdgpu':
                found.append((int(match.group(1)), '/dev/dri/' + name))
    return sorted(found)


def _link_name(path):
    try:
        return os.path.basename(os.readlink(path).rstrip('/'))
    except (IOError, OSError):
        return None


def session_cgroup(root='/'):
    """The session's devices cgroup as /proc/self/cgroup names it (the v1 ``devices`` line, else the v2 ``0::`` one),
    to name it in messages; None when there is none.

    Its cgroup v1 ``devices.list`` cannot tell: Slurm denies the devices a job does not hold in a cgroup that allows
    all others, and such a cgroup lists ``a *:* rwm`` whatever it denies (seen on the lab's Slurm 22.05.8, in a step
    that could not use two of the node's four GPU devices).
    """
    unified = None
    for line in (read_text(root, 'proc/self/cgroup') or '').splitlines():
        fields = line.split(':', 2)
        if len(fields) != 3:
            continue
        if 'devices' in fields[1].split(','):
            return fields[2]
        if fields[0] == '0' and fields[1] == '':
            unified = fields[2]
    return unified


def probe(root='/', vendor='nvidia', access=None):
    """What this session may use of the host's GPUs: ``dict(host=[N...], visible=[N...], paths={N: path},
    cgroup=path or None)``. ``access(path)`` says whether the device may be opened for read
    and write (default: ``os.access`` under ``root``, which the device cgroup answers)."""
    if access is None:
        def access(path):
            return os.access(path_under(root, path), os.R_OK | os.W_OK)
    devices = gpu_devices(root, vendor)
    return dict(host=[number for number, _path_ in devices],
                visible=[number for number, path in devices if access(path)],
                paths=dict(devices), cgroup=session_cgroup(root))


def _numbers(numbers):
    return ','.join(str(n) for n in numbers) or 'none'


def rank_view(view, slurm_ids=None, nproc=None, vendor='nvidia'):
    """The GPUs the ranks of this node will see, from :func:`probe`'s ``view``: ``dict(constrained, ids, sees,
    detail, problems)``.

    * not constrained (the session may use every GPU device of the host): ``ids`` are Slurm's (``slurm_ids``, the
      job's global indexes, as Slurm sets them in a step without ConstrainDevices), or ``[]``;
    * constrained (some of the host's GPU devices are denied): ``ids`` are the local indexes of Slurm's GPUs among the
      devices the session may use (``4,5,6,7`` of 8 -> ``0,1,2,3``), what CUDA/ROCm number them in that cgroup and what
      Slurm sets in its steps there; without Slurm ids, ``[]`` (the ranks see the devices they may use).

    ``problems``: the ranks would see no GPU, fewer than ``nproc``, or Slurm's GPUs are not among the devices the
    session may use; each names what the node saw. No GPU device file at all (no driver, a container without
    ``/dev/nvidia*``) decides nothing: ``ids`` stay Slurm's.
    """
    host, devices = list(view.get('host') or []), list(view.get('visible') or [])
    # Slurm's IDX counts the node's GPUs in gres.conf order, which follows the device files (/dev/nvidia0.., and the
    # AMD render nodes renderD128..): a device's position among the host's is its index
    visible = [host.index(number) for number in devices if number in host]
    host = list(range(len(host)))
    slurm_ids = [int(i) for i in (slurm_ids or [])]
    result = dict(constrained=False, ids=slurm_ids, sees=None, detail=None, problems=[])
    if not host:
        return result
    word = {'amd': 'ROCR_VISIBLE_DEVICES'}.get(vendor, 'CUDA_VISIBLE_DEVICES')
    paths = view.get('paths') or {}
    names = ', '.join(paths.get(n, str(n)) for n in devices) or 'none'
    constrained = visible != host
    result['constrained'] = constrained
    result['detail'] = ('this session may use %d of the host\'s %d GPU devices (%s)%s' % (
        len(visible), len(host), names, '; devices cgroup %s' % view['cgroup'] if view.get('cgroup') else '')
        if constrained else 'this session may use all %d GPU devices of the host' % len(host))
    sees = len(slurm_ids) if slurm_ids else len(host)
    if constrained:
        missing = [i for i in slurm_ids if i not in visible]
        if missing:
            result['problems'].append(
                'the Slurm job\'s GPUs %s (IDX) are not all among the devices this session may use (%s of the '
                'host\'s %s): %s. Is the session adopted into another job (pam_slurm_adopt picks one job per '
                'node), or does gres.conf number the GPUs differently from their device files?' % (
                    _numbers(slurm_ids), _numbers(visible), _numbers(host), result['detail']))
            result.update(ids=[], sees=0)
            return result
        order = sorted(visible)
        result['ids'] = [order.index(i) for i in slurm_ids]
        sees = len(slurm_ids) if slurm_ids else len(visible)
    result['sees'] = sees
    ranks = int(nproc or 0)
    if sees == 0:
        result['problems'].append('the ranks would see no GPU: %s; %s' % (result['detail'], (
            'the job holds none here (allocate with --gpus-per-node=N)' if constrained else 'check the node\'s GPUs')))
    elif ranks and sees < ranks and constrained:  # (unconstrained: nccl_env's nproc rule says it)
        result['problems'].append('the ranks would see %d GPU(s) (%s=%s), the launch starts %d ranks here: %s' % (
            sees, word, _numbers(result['ids']) if result['ids'] else '(unset)', ranks, result['detail']))
    return result
