# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""How node facts are read: files always under ``root`` (so tests run on fake sysfs/procfs trees) and commands
through a ``Runner`` (so tests replace it); a vendor tool that is missing, fails or times out gives a warning, never a
failure (module_utils/_node_facts.py)."""

from __future__ import annotations

import json
import os
import re

from ansible_collections.trainops.multinode.plugins.module_utils import _torch_probe


class NodeFactsError(Exception):
    """A failure that the module reports with ``fail_json``."""


TOOL_TIMEOUT = 30
"""Seconds a vendor tool may run (through ``timeout(1)`` when it exists) before it is abandoned."""

TOOL_DIRS = ['/opt/rocm/bin']
"""Where vendor tools are looked for besides ``PATH`` (ROCm does not always link its tools into ``/usr/bin``)."""


class Runner:
    """Runs commands; the one place tests replace.

    ``run(argv)`` returns ``(rc, stdout, stderr)``; ``which(name)`` returns the path of an executable or
    ``None``. A runner without ``which`` has no vendor tools.
    """

    def __init__(self, run_command, which=None):
        self._run_command = run_command
        self._which = which

    def run(self, argv):
        return self._run_command(argv)

    def which(self, name):
        return self._which(name) if self._which else None


# ------------------------------------------------------------------------------------------------
# filesystem, always under root
# ------------------------------------------------------------------------------------------------

_path = _torch_probe.path_under
_read = _torch_probe.read_text
_listdir = _torch_probe.list_dir
_natural_key = _torch_probe.natural_key


def _exists(root, *parts):
    return os.path.exists(_path(root, *parts))


def _link_name(root, *parts):
    """The last component of a symlink's target (``device/driver`` -> ``mlx5_core``), or None."""
    try:
        return os.path.basename(os.readlink(_path(root, *parts)).rstrip('/')) or None
    except (IOError, OSError):
        return None


_BDF = re.compile(r'^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$')


def _pci_id_of(root, *parts):
    """The PCI bus id of the nearest PCI device a sysfs ``device`` link leads to, or None."""
    path = _path(root, *parts)
    if not os.path.lexists(path):
        return None
    for component in reversed(os.path.realpath(path).split(os.sep)):
        if _BDF.match(component):
            return component
    return None


def _properties(text):
    """``key value`` lines of a kfd topology ``properties`` file, values as integers."""
    props = {}
    for line in (text or '').splitlines():
        fields = line.split()
        if len(fields) == 2:
            try:
                props[fields[0]] = int(fields[1])
            except ValueError:
                continue
    return props


def _kernel_symbols(root, wanted):
    """Which of the ``wanted`` symbols /proc/kallsyms lists (names are visible without root)."""
    found = set()
    try:
        with open(_path(root, 'proc/kallsyms')) as handle:
            for line in handle:
                fields = line.split()
                if len(fields) >= 3 and fields[2] in wanted:
                    found.add(fields[2])
                    if len(found) == len(wanted):
                        break
    except (IOError, OSError, UnicodeDecodeError):
        pass
    return found


# ------------------------------------------------------------------------------------------------
# commands
# ------------------------------------------------------------------------------------------------

def _json(runner, argv):
    try:
        rc, out, err = runner.run(argv)
    except OSError as exc:
        raise NodeFactsError('{0} could not run: {1}'.format(' '.join(argv), exc)) from exc
    if rc != 0:
        raise NodeFactsError('{0} failed (rc={1}): {2}'.format(' '.join(argv), rc, (err or out).strip()))
    try:
        return json.loads(out or '[]')
    except ValueError as exc:
        raise NodeFactsError('cannot parse the output of {0}: {1}'.format(' '.join(argv), exc))


def _which(runner, name):
    which = getattr(runner, 'which', None)
    return which(name) if which else None


def _tool(runner, argv, warnings, quiet=False):
    """Stdout of a vendor tool, or None when it is not installed, fails or times out (with a warning)."""
    path = _which(runner, argv[0])
    if not path:
        return None
    command = [path] + list(argv[1:])
    timeout = _which(runner, 'timeout')
    if timeout:
        command = [timeout, '-k', '5', str(TOOL_TIMEOUT)] + command
    try:
        rc, out, err = runner.run(command)
    except OSError as exc:
        rc, out, err = 127, '', str(exc)
    if rc != 0:
        if not quiet:
            reason = 'timed out after {0}s'.format(TOOL_TIMEOUT) if timeout and rc in (124, 137) else \
                'failed (rc={0})'.format(rc)
            detail = ' '.join((err or out or '').split())[:300]
            warnings.append('{0} {1}{2}; its facts are left out'.format(' '.join(argv), reason,
                                                                        ': ' + detail if detail else ''))
        return None
    return _ANSI_ESCAPE.sub('', out or '')


# nvidia-smi 580 underlines the header row of ``topo -m`` with terminal escapes even when its output is a pipe
_ANSI_ESCAPE = re.compile(r'\x1b\[[0-9;?]*[A-Za-z]')


def _tool_json(runner, argv, warnings):
    out = _tool(runner, argv, warnings)
    if out is None:
        return None
    try:
        return json.loads(out)
    except ValueError:
        warnings.append('cannot parse the JSON output of {0}; its facts are left out'.format(' '.join(argv)))
        return None


def _json_values(data, key_matches):
    """Every scalar value, anywhere in ``data``, whose key satisfies ``key_matches``."""
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, (dict, list)):
                yield from _json_values(value, key_matches)
            elif key_matches(str(key)):
                yield value
    elif isinstance(data, list):
        for item in data:
            yield from _json_values(item, key_matches)


def _link_kind(values):
    """xgmi when a GPU pair is linked by XGMI, pcie when the pairs are only PCIe, else unknown."""
    values = set(str(v).upper() for v in values)
    if 'XGMI' in values:
        return 'xgmi'
    if 'PCIE' in values:
        return 'pcie'
    return 'unknown'


def _normalize_bdf(bus_id):
    """``00000000:1B:00.0`` (nvidia-smi) -> ``0000:1b:00.0`` (sysfs)."""
    bus_id = (bus_id or '').strip().lower()
    domain, sep, rest = bus_id.partition(':')
    if not sep:
        return None
    bdf = '{0}:{1}'.format(domain[-4:].rjust(4, '0'), rest)
    return bdf if _BDF.match(bdf) else None
