# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The shared core of the NCCL/RCCL deciders of network.py, gpudirect.py and gpu.py, and of compute (deciders.py). Pure: no I/O.

``_Out`` (the environment being built: values, sources, reasons, errors, warnings), ``_library`` (the NCCL/RCCL the
decisions are made for), the settings helpers (``_is_unset``, ``_is_auto``, ``_env_value``, ``_int_setting``) and
``LIBRARY_VERSION_KNOB`` (what a rule names when it depends on a library version the facts do not tell). It imports
neither network.py nor gpu.py, which both import it.
"""

from __future__ import annotations

from ansible_collections.trainops.multinode.plugins.module_utils import _knobs
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.facts import _get, _int, _version

LIBRARY_VERSION_KNOB = 'trainops_nccl_library_version (library_version)'
"""What to set when a rule depends on a library version the facts do not tell."""


# --- settings helpers ---------------------------------------------------------------------------

_is_unset = _knobs.is_unset


def _is_auto(value, present):
    return not present or (isinstance(value, str) and value.strip().lower() == 'auto')


def _env_value(value):
    if isinstance(value, bool):
        return '1' if value else '0'
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return value
    return None


def _int_setting(out, settings, name, low, high):
    """An integer setting within [low, high], None when not given (null); an error names the range."""
    value = settings.get(name)
    if value is None or (isinstance(value, str) and _is_unset(value)):
        return None
    number = _int(value)
    if number is None or number < low or (high is not None and number > high):
        out.errors.append('%s must be an integer %s (got %r)' % (
            name, '>= %d' % low if high is None else 'from %d to %d' % (low, high), value))
        return None
    return number


# --- the result being built, and the library it is built for -----------------------------------------

class _Out(object):
    def __init__(self):
        self.env, self.sources, self.reasons = {}, {}, {}
        self.errors, self.warnings, self.unset = [], [], []
        self.left_out = {}
        self.topology = None  # how the PCIe topology chose the HCAs, or why it could not (_gpu_local_ports)
        self.by_topology = False

    def set(self, var, value, source, reason):
        self.env[var] = str(value)
        self.sources[var] = source
        self.reasons[var] = reason

    def drop(self, var):
        for table in (self.env, self.sources, self.reasons):
            table.pop(var, None)


def _library(out, facts, settings, vendor):
    """The NCCL (NVIDIA) / RCCL (AMD) the ranks load: library_version, else facts.library; version None if unknown."""
    name = {'nvidia': 'nccl', 'amd': 'rccl'}.get(vendor)
    value = settings.get('library_version')
    if not _is_auto(value, 'library_version' in settings) and value is not None:
        version = _version(value)
        if version is None:
            out.errors.append('library_version must be auto or a version such as 2.21.5 (got %r)' % (value,))
        return dict(name=name, version=version, text=str(value), source='library_version setting', read_in=None)
    lib = _get(facts, 'library') or {}
    version = _version(lib.get('version')) if lib.get('name') in (None, name) else None
    return dict(name=name, version=version, text=lib.get('version') if version else None,
                source=lib.get('source') if version else None, read_in=lib.get('read_in'))
