# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Real shared objects, built with the C compiler (``cc``; .ci/run installs gcc), that stand in for NCCL/RCCL and
for the torch library that links them, so that the probe's ctypes and ELF paths run for real.

``nccl_library`` exports ``ncclGetVersion`` (as NCCL's src/init.cc: it writes NCCL_VERSION_CODE and returns
ncclSuccess) and carries the banner string (``NCCL version 2.23.4+cuda12.4``); ``torch_library`` is a
``libtorch_cuda.so`` / ``libtorch_hip.so`` whose DT_NEEDED names the library and whose DT_RUNPATH (or DT_RPATH)
says where the loader looks, as torch's wheels do (``$ORIGIN/../../nvidia/nccl/lib``).
"""

from __future__ import annotations

import os
import shutil
import subprocess

_NCCL_C = '''
#ifdef WITH_GET_VERSION
int ncclGetVersion(int *version) { if (!version) return 4; *version = VERSION_CODE; return 0; }
#endif
const char trainops_banner[] = BANNER;
'''
_TORCH_C = 'void trainops_torch_stub(void) {}\n'


def compiler():
    """The C compiler; the tests that build libraries fail (not skip) without it: .ci/run installs gcc."""
    found = shutil.which('cc') or shutil.which('gcc')
    assert found, 'no C compiler (cc): apt-get install gcc (.ci/run does)'
    return found


def _build(source, out, args):
    directory = os.path.dirname(out)
    os.makedirs(directory, exist_ok=True)
    src = out + '.c'
    with open(src, 'w') as handle:
        handle.write(source)
    subprocess.run([compiler(), '-shared', '-fPIC', '-o', out, src] + args, check=True, capture_output=True)
    os.remove(src)
    return out


def nccl_library(path, version, vendor='nvidia', get_version=True):
    """A libnccl.so.2 / librccl.so at ``path`` for ``version`` ('2.23.4'); without ``get_version`` only the banner."""
    major, minor, patch = (int(p) for p in version.split('.'))
    banner = '%s version %s+%s' % ('NCCL' if vendor == 'nvidia' else 'RCCL', version,
                                   'cuda12.4' if vendor == 'nvidia' else 'hip6.4')
    args = ['-DVERSION_CODE=%d' % (major * 10000 + minor * 100 + patch), '-DBANNER="%s"' % banner,
            '-Wl,-soname,' + os.path.basename(path)]
    return _build(_NCCL_C, path, args + (['-DWITH_GET_VERSION'] if get_version else []))


def torch_library(path, needed=None, search=None, rpath=False):
    """A torch GPU library at ``path`` that links ``needed`` (a library file, by its soname) with ``search`` as its
    DT_RUNPATH (``rpath``: DT_RPATH); ``needed`` None: NCCL linked statically (no DT_NEEDED)."""
    args = []
    if needed:
        args += ['-Wl,--no-as-needed', '-L' + os.path.dirname(needed), '-l:' + os.path.basename(needed)]
    if search:
        args += ['-Wl,-rpath,' + search, '-Wl,--disable-new-dtags' if rpath else '-Wl,--enable-new-dtags']
    return _build(_TORCH_C, path, args)
