# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""What the ranks' interpreter runs with: its Python, torch, and the NCCL/RCCL and net plugin torch loads.

Usage: ``python -c "$(source of this file)" [--import] [--library nvidia|amd] [--root DIR]``, on the node or in
the training container (``docker exec``), so that every answer comes from where the ranks run: the container's
files, not the host's. The preflight and node_facts modules import this file (so AnsiballZ packs it) and pass its
source with ``-c``, so nothing is written anywhere. Standard library only. Prints one JSON object.

Without ``--import`` torch's installed version comes from its package metadata: importing torch costs 1-2 s of CPU
per node (docs/contributing/benchmarks.md); ``--import`` (import_torch=true) does the full import.

``--library`` adds ``library``: what tells which NCCL (nvidia) or RCCL (amd) torch loads (``choose_library`` picks
one), the ROCm runtime, the net plugins on the library path and RCCL's dma-buf kernel options as RCCL reads them
there. It imports torch and reads the library the process then maps (/proc/self/maps), asked with a
communicator-free ``ncclGetVersion`` through ctypes (``runtime``); the compile-time ``torch.cuda.nccl.version()``
and the package metadata are only fallbacks. ``--root`` reads files under another directory (tests).

Standalone, from the repository root, with only python3 and torch (no Ansible)::

    python3 plugins/module_utils/_torch_probe.py --library nvidia    # or amd
"""

from __future__ import annotations

import ctypes
import gzip
import importlib.util
import json
import os
import re
import shutil
import struct
import sys
import zlib
from importlib import metadata

IMPORT_FLAG = '--import'
LIBRARY_FLAG = '--library'
ROOT_FLAG = '--root'

ROCM_RCCL = {'6.0': '2.18.3', '6.1': '2.18.6', '6.2': '2.20.5', '6.3': '2.21.5', '6.4': '2.22.3', '7.0': '2.26.6',
             '7.1': '2.27.7', '7.2': '2.27.7', '7.11': '2.28.3', '7.12': '2.28.3', '7.13': '2.28.3', '7.14': '2.30.4'}
"""RCCL shipped with each ROCm release (RCCL CHANGELOG.md, "RCCL <version> for ROCm <release>" headings)."""

NCCL_HEADERS = ('usr/include/nccl.h', 'usr/local/include/nccl.h', 'usr/local/cuda/include/nccl.h')
RCCL_HEADERS = ('opt/rocm/include/rccl/rccl.h', 'opt/rocm/include/rccl.h')
LIB_DIRS = ('usr/lib/x86_64-linux-gnu', 'usr/lib/aarch64-linux-gnu', 'usr/lib64', 'usr/lib', 'usr/local/lib',
            'usr/local/cuda/lib64', 'opt/rocm/lib')
OFI_DIRS = ('opt/amazon/ofi-nccl/lib', 'opt/amazon/ofi-nccl/lib64', 'opt/aws-ofi-nccl/lib') + LIB_DIRS
OFI_NAMES = ('libnccl-net.so', 'libnccl-net-ofi.so', 'libnccl-net-aws-ofi.so')
"""aws-ofi-nccl's library names (its src/Makefile.am) and the places its packages and the EFA installer put them."""

DMABUF_KERNEL_OPTIONS = ('CONFIG_DMABUF_MOVE_NOTIFY', 'CONFIG_PCI_P2PDMA')
"""Kernel options RCCL requires before it uses dma-buf (src/misc/rocmwrap.cc reads /boot/config-<release>)."""
KERNEL_CONFIG_FILES = ('proc/config.gz', 'boot/config-{0}', 'usr/src/linux-{0}/.config', 'usr/src/linux/.config',
                       'usr/lib/modules/{0}/config', 'usr/lib/ostree-boot/config-{0}', 'usr/lib/kernel/config-{0}',
                       'usr/src/linux-headers-{0}/.config', 'lib/modules/{0}/build/.config')
"""Where RCCL 2.28 and later look for the kernel config, in order; the first that opens decides (rocm-systems
projects/rccl src/misc/rocmwrap.cc initOnceFunc ``possiblePaths[]``; /proc/config.gz only when ``zcat`` is found)."""
KALLSYMS_DMABUF = {'CONFIG_DMABUF_MOVE_NOTIFY': 'dma_buf_move_notify', 'CONFIG_PCI_P2PDMA': 'pci_p2pdma'}
"""When no config file opens, RCCL 2.28 and later look for these symbols in /proc/kallsyms (substring matches)."""
KERNEL_CONFIG_LIMIT = 64 << 20

NCCL_WHEEL = re.compile(r'^nvidia-nccl-cu\d+$')
"""The wheel CUDA builds of torch on PyPI require for NCCL (torch's Requires-Dist: nvidia-nccl-cu12==2.21.5; ...)."""
BUNDLED = re.compile(r'^lib(nccl|rccl)\.so(\.\d+)*$')
"""A library torch carries in torch/lib (ROCm wheels bundle librccl.so)."""
VERSION = re.compile(r'^\d+\.\d+(\.\d+)?$')
LIBRARY_NAME = {'nvidia': re.compile(r'^libnccl\.so(\.\d+)*$'), 'amd': re.compile(r'^librccl\.so(\.\d+)*$')}
"""The NCCL (nvidia) or RCCL (amd) shared object, by file name."""
TORCH_GPU_LIBS = {'nvidia': ('libtorch_cuda.so', 'libtorch_global_deps.so'),
                  'amd': ('libtorch_hip.so', 'libtorch_global_deps.so')}
"""The torch/lib libraries that link NCCL/RCCL (DT_NEEDED) in builds that do not link it statically."""
VERSION_STRING = re.compile(br'(?:NCCL|RCCL) version (\d+\.\d+\.\d+)')
"""The banner the library prints (NCCL src/init.cc VERSION_STRING ``"NCCL version " ...``): in its .rodata."""
VERSION_STRING_LIMIT = 1 << 30

_OFI_NET_NAME = b'Libfabric'
"""The name aws-ofi-nccl's ncclNet_v* structs give NCCL (``.name = "Libfabric"``; NCCL_NET must name it)."""
_OFI_PACKAGE = re.compile(br'aws-ofi-nccl[ /-]?v?(\d+\.\d+\.\d+)?')
_NET_NAMES = re.compile(br'(?<=\x00)(Libfabric|IBext(?:_v\d+)?|IB|Socket|SHARP|UCX(?:-RMA)?|'
                        br'NCCL RDMA (?:SHARP )?Plugin)(?=\x00)')
"""Net names plugins give NCCL, reported for the ones that are not aws-ofi-nccl (nccl-rdma-sharp-plugins, HPC-X:
"NCCL RDMA Plugin", "IBext", "UCX", collnet "SHARP")."""
PLUGIN_READ_LIMIT = 64 << 20
_PLUGIN_CHUNK = 1 << 20


# ------------------------------------------------------------------------------------------------
# files, always under root
# ------------------------------------------------------------------------------------------------

def path_under(root, *parts):
    """``parts`` (absolute or not) under ``root``; node_facts reads its trees through the same helpers."""
    return os.path.join(root, *[p.lstrip('/') for p in parts])


def read_text(root, *parts):
    """A file's text under ``root``, stripped; None when it cannot be read."""
    try:
        with open(path_under(root, *parts)) as handle:
            return handle.read().strip()
    except (IOError, OSError, UnicodeDecodeError):
        return None


def list_dir(root, *parts):
    """A directory's entries under ``root``; [] when it cannot be listed."""
    try:
        return os.listdir(path_under(root, *parts))
    except (IOError, OSError):
        return []


def natural_key(name):
    """mlx5_2 before mlx5_10."""
    return [int(token) if token.isdigit() else token for token in re.split(r'(\d+)', name)]


def header_version(text):
    """``2.21.5`` from nccl.h / rccl.h's NCCL_MAJOR/MINOR/PATCH defines, else None."""
    numbers = [re.search(r'#define\s+NCCL_{0}\s+(\d+)'.format(part), text or '') for part in ('MAJOR', 'MINOR', 'PATCH')]
    return '.'.join(m.group(1) for m in numbers) if all(numbers) else None


def library_from_files(root, vendor):
    """``dict(version, file)`` from the library's header or versioned file under ``root``, else None."""
    for header in RCCL_HEADERS if vendor == 'amd' else NCCL_HEADERS:
        version = header_version(read_text(root, header))
        if version:
            return dict(version=version, file='/' + header)
    if vendor == 'nvidia':
        for lib_dir in LIB_DIRS:
            for entry in sorted(list_dir(root, lib_dir), key=natural_key, reverse=True):
                match = re.match(r'^libnccl\.so\.(\d+\.\d+\.\d+)$', entry)
                if match:
                    return dict(version=match.group(1), file='/{0}/{1}'.format(lib_dir, entry))
    return None


def rocm_from_files(root):
    """The ROCm release installed under ``root`` (/opt/rocm/.info/version: ``6.3.1-48``), as ``6.3.1``, else None."""
    match = re.match(r'^(\d+\.\d+(?:\.\d+)?)', read_text(root, 'opt/rocm/.info/version') or '')
    return match.group(1) if match else None


def dmabuf_kernel_config(root='/'):
    """``{option: True|False}`` for the options RCCL's dma-buf path needs, from /boot/config-<release>; None if unread.

    RCCL (src/misc/rocmwrap.cc, ``initOnceFunc``) opens ``/boot/config-$(uname -r)`` and turns dma-buf off unless both
    ``CONFIG_DMABUF_MOVE_NOTIFY=y`` and ``CONFIG_PCI_P2PDMA=y`` are there. In a container the release is the host's
    kernel and the file is there only when /boot is mounted.
    """
    release = read_text(root, 'proc/sys/kernel/osrelease')
    text = read_text(root, 'boot', 'config-{0}'.format(release)) if release else None
    if text is None:
        return None
    lines = set(line.strip() for line in text.splitlines())
    return dict((option, '{0}=y'.format(option) in lines) for option in DMABUF_KERNEL_OPTIONS)


def _has_zcat(root):
    """Whether ``zcat`` is on the PATH (RCCL runs ``which zcat``), under ``root``."""
    if root == '/':
        return shutil.which('zcat') is not None
    return any(os.access(path_under(root, d, 'zcat'), os.X_OK) for d in ('usr/bin', 'bin', 'usr/local/bin'))


def _scan(handle, needles, limit=KERNEL_CONFIG_LIMIT):
    """``{key: found}`` for each ``needles`` value found as a substring of a line, at most ``limit`` bytes read."""
    found, seen = dict((k, False) for k in needles), 0
    for line in handle:
        seen += len(line)
        for key, needle in needles.items():
            found[key] = found[key] or needle in line
        if seen > limit or all(found.values()):
            break
    return found


def dmabuf_kernel_search(root='/'):
    """``dict(file, options)``: the dma-buf kernel options as RCCL 2.28 and later read them, else None.

    The first file of KERNEL_CONFIG_FILES that opens decides (``CONFIG_...=y`` in a line); when none does,
    /proc/kallsyms (``dma_buf_move_notify``, ``pci_p2pdma``), which containers see too. None when nothing opens.
    """
    release = read_text(root, 'proc/sys/kernel/osrelease')
    wanted = dict((o, '%s=y' % o) for o in DMABUF_KERNEL_OPTIONS)
    for pattern in KERNEL_CONFIG_FILES:
        if '{0}' in pattern and not release:
            continue
        name = pattern.format(release)
        try:
            if name == 'proc/config.gz':
                if not _has_zcat(root):
                    continue
                with gzip.open(path_under(root, name), 'rt', errors='replace') as handle:
                    return dict(file='/' + name, options=_scan(handle, wanted))
            with open(path_under(root, name), errors='replace') as handle:
                return dict(file='/' + name, options=_scan(handle, wanted))
        except (IOError, OSError, EOFError, zlib.error):
            continue
    try:
        with open(path_under(root, 'proc/kallsyms'), errors='replace') as handle:
            return dict(file='/proc/kallsyms', options=_scan(handle, KALLSYMS_DMABUF))
    except (IOError, OSError):
        return None


def net_plugin_identity(root, lib_dir, name, limit=PLUGIN_READ_LIMIT):
    """What a ``libnccl-net*.so`` is, from its bytes (never loaded): ``dict(aws_ofi_nccl, version, names)``.

    aws-ofi-nccl is the library that holds the NUL-terminated net name ``Libfabric`` and its package name
    ``aws-ofi-nccl`` (the version follows it where the build put ``PACKAGE_STRING`` in). ``names`` lists the net
    names found (``IBext``/``SHARP`` for nccl-rdma-sharp-plugins). At most ``limit`` bytes are read.
    """
    found, version, seen, tail = set(), None, 0, b''
    package = False
    try:
        with open(path_under(root, lib_dir, name), 'rb') as handle:
            while seen < limit:
                chunk = handle.read(min(_PLUGIN_CHUNK, limit - seen))
                if not chunk:
                    break
                seen += len(chunk)
                data = tail + chunk
                found.update(m.group(1).decode('ascii') for m in _NET_NAMES.finditer(data))
                for match in _OFI_PACKAGE.finditer(data):
                    package = True
                    version = version or (match.group(1).decode('ascii') if match.group(1) else None)
                tail = data[-64:]
    except (IOError, OSError):
        return dict(aws_ofi_nccl=False, version=None, names=[])
    return dict(aws_ofi_nccl=package and _OFI_NET_NAME.decode('ascii') in found, version=version,
                names=sorted(found))


def net_plugins(root, extra_dirs=()):
    """``(aws-ofi-nccl's path or None, [other libnccl-net*.so found])`` in the plugin directories under ``root``.

    ``extra_dirs`` (the LD_LIBRARY_PATH entries of the ranks' environment) are searched first, as the loader does.
    """
    others = []
    for lib_dir in tuple(d.strip('/') for d in extra_dirs if d.startswith('/')) + OFI_DIRS:
        for name in [n for n in OFI_NAMES if n in list_dir(root, lib_dir)]:
            what = net_plugin_identity(root, lib_dir, name)
            if what['aws_ofi_nccl']:
                return '/{0}/{1}'.format(lib_dir, name), []
            others.append(dict(what, path='/{0}/{1}'.format(lib_dir, name)))
    return None, others


# ------------------------------------------------------------------------------------------------
# the library this process maps once torch is imported, asked for its version (no communicator)
# ------------------------------------------------------------------------------------------------

def mapped_libraries(vendor, maps='/proc/self/maps'):
    """The NCCL (nvidia) or RCCL (amd) files this process maps, in the order ``maps`` lists them."""
    found = []
    try:
        with open(maps) as handle:
            for line in handle:
                fields = line.split(None, 5)
                path = fields[5].strip() if len(fields) == 6 else ''
                path = path[:-len(' (deleted)')] if path.endswith(' (deleted)') else path
                if path.startswith('/') and LIBRARY_NAME[vendor].match(os.path.basename(path)) and path not in found:
                    found.append(path)
    except (IOError, OSError):
        return []
    return found


def _elf_strings(handle, loads, entries):
    """The dynamic string table (DT_STRTAB, DT_STRSZ), found through the PT_LOAD segment that holds it."""
    strtab = next((v for t, v in entries if t == 5), None)
    size = next((v for t, v in entries if t == 10), 0)
    offset = next((o + strtab - va for va, o, sz in loads if strtab is not None and va <= strtab < va + sz), None)
    if offset is None:
        return None
    handle.seek(offset)
    return handle.read(min(size, 1 << 20))


def elf_dynamic(path):
    """``dict(needed, rpath, runpath)`` of a 64-bit little-endian ELF shared object, from its PT_DYNAMIC; None if
    it cannot be read. What the loader reads to find the libraries an object links (ld.so(8))."""
    try:
        with open(path, 'rb') as handle:
            head = handle.read(64)
            if len(head) < 64 or head[:4] != b'\x7fELF' or head[4:6] != b'\x02\x01':
                return None
            phoff = struct.unpack_from('<Q', head, 32)[0]
            phentsize, phnum = struct.unpack_from('<HH', head, 54)
            handle.seek(phoff)
            table = handle.read(phentsize * phnum)
            loads, dynamic = [], None
            for i in range(phnum):
                p_type, _flags, offset, vaddr, _paddr, filesz = struct.unpack_from('<IIQQQQ', table, i * phentsize)
                if p_type == 1:  # PT_LOAD
                    loads.append((vaddr, offset, filesz))
                elif p_type == 2:  # PT_DYNAMIC
                    dynamic = (offset, filesz)
            if dynamic is None:
                return None
            handle.seek(dynamic[0])
            raw = handle.read(min(dynamic[1], 1 << 20))
            entries = [struct.unpack_from('<qQ', raw, i) for i in range(0, len(raw) - 15, 16)]
            strings = _elf_strings(handle, loads, entries)
    except (IOError, OSError, struct.error):
        return None
    if strings is None:
        return None
    out = dict(needed=[], rpath=[], runpath=[])
    for tag, value in entries:
        if tag == 0:  # DT_NULL
            break
        key = {1: 'needed', 15: 'rpath', 29: 'runpath'}.get(tag)
        if key and value < len(strings):
            out[key].append(strings[value:strings.find(b'\x00', value)].decode('utf-8', 'replace'))
    return out


def linked_library(vendor, torch_lib):
    """``(file or name, linker)``: the NCCL/RCCL that torch's GPU library (``linker``) names in DT_NEEDED, where the
    loader finds it: DT_RPATH (when there is no DT_RUNPATH), LD_LIBRARY_PATH, DT_RUNPATH (``$ORIGIN``: torch/lib),
    else the bare name for the loader's cache. ``(None, None)`` when no torch library links one (static or CPU)."""
    for linker in TORCH_GPU_LIBS[vendor]:
        dynamic = elf_dynamic(os.path.join(torch_lib, linker)) if torch_lib else None
        needed = [n for n in (dynamic or {}).get('needed', []) if LIBRARY_NAME[vendor].match(n)]
        if not needed:
            continue

        def dirs(entries):
            return [d.replace('${ORIGIN}', torch_lib).replace('$ORIGIN', torch_lib)
                    for entry in entries for d in entry.split(':') if d]
        search = (dirs(dynamic['rpath']) if not dynamic['runpath'] else []) + dirs(
            [os.environ.get('LD_LIBRARY_PATH', '')]) + dirs(dynamic['runpath'])
        for directory in search:
            if os.path.isfile(os.path.join(directory, needed[0])):
                return os.path.join(directory, needed[0]), linker
        return needed[0], linker
    return None, None


def library_version_string(path, limit=VERSION_STRING_LIMIT):
    """The version in the library's banner (``NCCL version 2.21.5+cuda12.4``), at most ``limit`` bytes read."""
    seen, tail = 0, b''
    try:
        with open(path, 'rb') as handle:
            while seen < limit:
                chunk = handle.read(min(_PLUGIN_CHUNK, limit - seen))
                if not chunk:
                    return None
                seen += len(chunk)
                match = VERSION_STRING.search(tail + chunk)
                if match:
                    return match.group(1).decode('ascii')
                tail = chunk[-64:]
    except (IOError, OSError):
        return None
    return None


def nccl_get_version(path):
    """``(version, error)``: what ``ncclGetVersion`` of the library at ``path`` returns. It only writes
    NCCL_VERSION_CODE (NCCL src/init.cc): no communicator, no GPU. Loading a path already mapped reuses it."""
    try:
        function = ctypes.CDLL(path).ncclGetVersion
    except (OSError, AttributeError) as exc:
        return None, '%s: %s' % (type(exc).__name__, exc)
    function.restype = ctypes.c_int
    function.argtypes = [ctypes.POINTER(ctypes.c_int)]
    code = ctypes.c_int(0)
    result = function(ctypes.byref(code))
    version = version_text(code.value) if result == 0 else None
    return version, None if version else 'ncclGetVersion() returned %d, version code %d' % (result, code.value)


def _force_torch_load(torch):
    """Builds that load NCCL lazily load it when torch.cuda.nccl is used: touch it, creating no communicator."""
    try:
        import torch.cuda.nccl  # noqa: F401  pylint: disable=import-error,import-outside-toplevel,redefined-outer-name
        torch.cuda.nccl.version()
    except Exception:  # pylint: disable=broad-except  # a CPU build: what maps (nothing) tells
        pass


def runtime_library(vendor, torch, torch_lib):
    """``dict(version, path, how, error)``: the NCCL/RCCL this process maps with ``torch`` imported, and what its
    ``ncclGetVersion`` (else its banner string) says.

    ``how``: ``mapped after import torch``; ``mapped after torch.cuda.nccl was used`` (a lazy build); ``loaded by
    the probe as <libtorch_cuda.so> links it`` when torch mapped none (the library its DT_NEEDED names, found as the
    loader finds it). ``error`` when no library can be found or asked (a static or CPU build of torch).
    """
    out = dict(version=None, path=None, how=None, error=None)
    mapped, how = mapped_libraries(vendor), 'mapped after import torch'
    if not mapped:
        _force_torch_load(torch)
        mapped, how = mapped_libraries(vendor), 'mapped after torch.cuda.nccl was used'
    if not mapped:
        target, linker = linked_library(vendor, torch_lib)
        if target is None:
            out['error'] = 'torch maps no %s and %s link none (linked statically, or a CPU build)' % (
                'NCCL' if vendor == 'nvidia' else 'RCCL', ', '.join(TORCH_GPU_LIBS[vendor]))
            return out
        try:
            ctypes.CDLL(target)
        except OSError as exc:
            out['error'] = 'cannot load %s, which %s links: %s' % (target, linker, exc)
            return out
        mapped, how = mapped_libraries(vendor) or [target], 'loaded by the probe as %s links it' % linker
    out.update(path=mapped[0], how=how)
    if len(mapped) > 1:
        out['also_mapped'] = mapped[1:]
    out['version'], error = nccl_get_version(mapped[0])
    if out['version']:
        out['told_by'] = 'ncclGetVersion()'
    else:
        out['version'] = library_version_string(mapped[0])
        out['told_by'] = 'its version string' if out['version'] else None
        out['error'] = None if out['version'] else '%s; no version string in the file' % error
    return out


# ------------------------------------------------------------------------------------------------
# which library torch loads
# ------------------------------------------------------------------------------------------------

def version_text(value):
    """``(2, 21, 5)`` / ``(2, 21, 5, 'suffix')`` / NCCL_VERSION_CODE ``22105`` -> ``'2.21.5'``; None otherwise."""
    if isinstance(value, (tuple, list)) and len(value) >= 3 and all(isinstance(v, int) for v in value[:3]):
        return '%d.%d.%d' % tuple(value[:3])
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        if value >= 10000:  # NCCL_VERSION_CODE since 2.9: major * 10000 + minor * 100 + patch
            return '%d.%d.%d' % (value // 10000, value % 10000 // 100, value % 100)
        return '%d.%d.%d' % (value // 1000, value % 1000 // 100, value % 100)
    return None


def rocm_of_torch(torch_version):
    """``6.2`` from a ROCm build's local version (``2.5.1+rocm6.2``, ``2.7.0+rocm6.3.4``), else None."""
    match = re.search(r'\+rocm(\d+\.\d+)', torch_version or '')
    return match.group(1) if match else None


def choose_library(vendor, found):
    """``dict(version, source)`` of the NCCL/RCCL torch loads, from what the probe ``found``, else None.

    In this order: the library the ranks' process maps once torch is imported, asked with ``ncclGetVersion``
    (``runtime``); the nvidia-nccl-cu* wheel torch requires; the RCCL of the ROCm release a ROCm wheel of torch
    bundles (unless that file was replaced); the library's files where torch loads the system's library (no wheel,
    nothing in torch/lib), or where no torch was asked about (node_facts alone); last, the version torch was
    compiled with (``torch.cuda.nccl.version()``, said so: an upgraded wheel, LD_LIBRARY_PATH or a swapped file
    load another), never for a bundled library that was replaced.
    """
    torch = found.get('torch') or {}
    label = 'torch %s' % torch.get('version') if torch.get('version') else None
    runtime = found.get('runtime') or {}
    if runtime.get('version'):
        return dict(version=runtime['version'], source='%s of %s, %s (%s)' % (
            runtime.get('told_by') or 'ncclGetVersion()', runtime['path'], runtime['how'], label))
    wheel = torch.get('nccl_wheel')
    if vendor == 'nvidia' and wheel and (found.get('wheels') or {}).get(wheel):
        return dict(version=found['wheels'][wheel], source='python package %s, which %s requires' % (wheel, label))
    rocm = rocm_of_torch(torch.get('version'))
    if vendor == 'amd' and rocm in ROCM_RCCL and not torch.get('replaced'):
        return dict(version=ROCM_RCCL[rocm], source='the RCCL of ROCm %s that %s bundles' % (rocm, label))
    files = found.get('files')
    if files and not torch.get('version'):
        return dict(version=files['version'], source=files['file'])
    if files and not torch.get('bundled') and not wheel and not rocm:
        return dict(version=files['version'], source='%s, the system library %s loads (it bundles none)' % (
            files['file'], label))
    if found.get('reported') and not torch.get('replaced'):
        return dict(version=found['reported'], source='torch.cuda.nccl.version() of %s: the version torch was '
                    'compiled with, not read from the loaded library' % label)
    return None


def _torch_distribution(location):
    """``dict(version, nccl_wheel, bundled, replaced)`` of the installed torch package, or None.

    ``bundled``: the NCCL/RCCL files in torch/lib; ``replaced``: those whose size is not the one torch's RECORD
    lists (a library copied over the wheel's, as RCCL's docs suggest for CPX mode): its version is then asked of
    torch, not taken from the wheel's tag.
    """
    try:
        dist = metadata.distribution('torch')
    except metadata.PackageNotFoundError:
        return None
    wheel = None
    for requirement in dist.requires or []:
        name = re.split(r'[\s;<>=!~\[(]', requirement.strip(), maxsplit=1)[0].lower().replace('_', '-')
        if NCCL_WHEEL.match(name):
            wheel = name
    bundled = _bundled(location)
    # RECORD is read only when torch/lib holds a library (torch's lists some 15,000 files)
    recorded = dict((str(f).replace(os.sep, '/'), f.size) for f in dist.files or []
                    if str(f).startswith('torch/lib/')) if bundled else {}
    replaced = []
    for name in bundled:
        try:
            size = os.stat(os.path.join(os.path.dirname(location), 'lib', name)).st_size
        except OSError:
            size = None
        if recorded.get('torch/lib/' + name) != size:
            replaced.append(name)
    return dict(version=dist.version, nccl_wheel=wheel, bundled=bundled, replaced=replaced)


def _nccl_wheels():
    out = {}
    for dist in metadata.distributions():
        name = (dist.metadata['Name'] or '').lower().replace('_', '-')
        if NCCL_WHEEL.match(name):
            out[name] = dist.version
    return out


def _bundled(location):
    """NCCL/RCCL libraries in torch/lib beside torch/__init__.py (``location``)."""
    lib = os.path.join(os.path.dirname(location), 'lib') if location else None
    try:
        return sorted(n for n in os.listdir(lib) if BUNDLED.match(n)) if lib else []
    except OSError:
        return []


def _ask_torch(out, vendor):
    """Import torch (unless done); read the NCCL/RCCL the process maps (``runtime``), then the compile-time version
    torch reports (``reported``) and its HIP version."""
    try:
        import torch  # pylint: disable=import-error,import-outside-toplevel
    except Exception as exc:  # pylint: disable=broad-except  # reported, never raised
        out['reported_error'] = '%s: %s' % (type(exc).__name__, exc)
        out['runtime'] = dict(version=None, path=None, how=None, error='import torch: ' + out['reported_error'])
        return
    location = getattr(torch, '__file__', None)
    out['runtime'] = runtime_library(vendor, torch, os.path.join(os.path.dirname(location), 'lib') if location else None)
    try:
        out['hip'] = getattr(torch.version, 'hip', None)
        out['reported'] = version_text(torch.cuda.nccl.version())
        if out['reported'] is None:
            out['reported_error'] = 'torch.cuda.nccl.version() returned no version'
    except Exception as exc:  # pylint: disable=broad-except  # a CPU build has no NCCL: reported, never raised
        out['reported_error'] = '%s: %s' % (type(exc).__name__, exc)


def library_probe(vendor, torch_location, root='/'):
    """What tells which NCCL/RCCL torch loads here, the ROCm runtime, net plugins and RCCL's dma-buf options.

    torch is imported (when it is found): the library the process then maps is what the ranks load.
    """
    out = dict(torch=None, wheels={}, reported=None, runtime=None, files=None, rocm=rocm_from_files(root), hip=None)
    try:
        out['torch'] = _torch_distribution(torch_location)
        out['wheels'] = _nccl_wheels()
    except Exception as exc:  # pylint: disable=broad-except  # broken metadata: reported, never raised
        out['error'] = '%s: %s' % (type(exc).__name__, exc)
    out['files'] = library_from_files(root, vendor)
    if torch_location:
        _ask_torch(out, vendor)
    library_path = os.environ.get('LD_LIBRARY_PATH', '').split(':') if root == '/' else []
    out['aws_ofi_nccl'], out['other_net_plugins'] = net_plugins(root, library_path)
    out['dmabuf_kernel'] = dmabuf_kernel_config(root) if vendor == 'amd' else None
    out['dmabuf_kernel_search'] = dmabuf_kernel_search(root) if vendor == 'amd' else None
    return out


# ------------------------------------------------------------------------------------------------
# the program
# ------------------------------------------------------------------------------------------------

def probe(import_torch, library=None, root='/'):
    """``{python, executable, version, location, imported, error}`` (``cuda`` and ``hip`` after an import), and
    ``library`` (``library_probe``) when ``library`` names the GPU vendor."""
    out = {'python': sys.version.split()[0], 'executable': sys.executable, 'version': None, 'location': None,
           'imported': False, 'error': None}
    try:
        spec = importlib.util.find_spec('torch')
        if spec is None:
            out['error'] = "No module named 'torch'"
        else:
            out['location'] = spec.origin
            if import_torch:
                import torch  # pylint: disable=import-error,import-outside-toplevel
                out['version'] = torch.__version__
                out['imported'] = True
                out['cuda'] = getattr(torch.version, 'cuda', None)
                out['hip'] = getattr(torch.version, 'hip', None)
            else:
                out['version'] = metadata.version('torch')
    except Exception as exc:  # pylint: disable=broad-except  # reported, never raised: the controller says what to fix
        out['error'] = '%s: %s' % (type(exc).__name__, exc)
    if library in ('nvidia', 'amd'):
        out['library'] = library_probe(library, out['location'], root)
    return out


def _option(argv, flag):
    return argv[argv.index(flag) + 1] if flag in argv[:-1] else None


def main(argv):
    """Print the probe's JSON for ``argv`` (``['-c', '--import', '--library', 'amd']`` and so on)."""
    args = argv[1:]
    sys.stdout.write(json.dumps(probe(IMPORT_FLAG in args, _option(args, LIBRARY_FLAG), _option(args, ROOT_FLAG) or '/')))
    return 0


if __name__ == '__main__':
    raise SystemExit(main(sys.argv))
