# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The files an NCCL/RCCL environment is written to: an env file (``render_env_file``) and ``/etc/nccl.conf`` or
``/etc/rccl.conf`` (``render_nccl_conf``, ``nccl_conf_path``). Pure: no I/O; the action plugin writes nothing either.
"""

from __future__ import annotations

import re

CONF_PREFIXES = ('NCCL_', 'RCCL_')
"""Variables NCCL/RCCL read through their own getenv, so a conf file can set them (see render_nccl_conf)."""

_ENV_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
_SHELL_SAFE = re.compile(r'[A-Za-z0-9_@%+=:,./-]*')


def nccl_conf_path(vendor):
    """System-wide file the vendor's library reads (``NCCL_CONF_FILE`` or ``~/.nccl.conf``/``~/.rccl.conf`` first)."""
    return '/etc/rccl.conf' if vendor == 'amd' else '/etc/nccl.conf'


# --- rendering -------------------------------------------------------------------------------------

def _check_env(env):
    for var in env:
        if not _ENV_NAME.fullmatch(str(var)):
            raise ValueError('%r is not a valid environment variable name' % (var,))
        if any(c in str(env[var]) for c in '\n\r\0'):
            raise ValueError('the value of %s is not one line' % var)


def _quote(value):
    if _SHELL_SAFE.fullmatch(value) and value:
        return value
    return "'" + value.replace("'", "'\"'\"'") + "'"


def render_env_file(env, header=None, quote=True):
    """``KEY=value`` lines, sorted, for ``set -a; . file`` or systemd ``EnvironmentFile=``.

    Values that are not shell-safe are single-quoted when ``quote`` (docker ``--env-file`` takes values
    literally: render with ``quote=False`` for it).
    """
    _check_env(env)
    lines = ['# %s' % line for line in (header or 'NCCL/RCCL environment written by trainops.multinode').splitlines()]
    for var in sorted(env):
        value = str(env[var])
        lines.append('%s=%s' % (var, _quote(value) if quote else value))
    return '\n'.join(lines) + '\n'


def render_nccl_conf(env, header=None):
    """``/etc/nccl.conf`` (NCCL) or ``/etc/rccl.conf`` (RCCL) content: ``KEY=value`` lines, values verbatim.

    NCCL/RCCL read ``$NCCL_CONF_FILE`` (NCCL >= 2.23) or ``~/.nccl.conf`` (``~/.rccl.conf``), then
    ``/etc/nccl.conf`` (``/etc/rccl.conf``), the first time they read a parameter, and set each line with
    ``setenv(..., 0)``: the process environment wins over the files, and an earlier file over a later one.
    Values are taken literally (no quotes, no trimming). Only NCCL_*/RCCL_* variables are written: gloo reads
    GLOO_SOCKET_IFNAME and the ROCm runtime reads HSA_* before NCCL/RCCL load the file, so those are listed
    in a comment and must be in the ranks' environment. Comment lines never contain ``=``: older RCCL parses
    every line with one.
    """
    _check_env(env)
    text = header or 'NCCL/RCCL settings written by trainops.multinode'
    lines = ['# %s' % line.replace('=', ':') for line in text.splitlines()]
    skipped = sorted(v for v in env if not v.startswith(CONF_PREFIXES))
    if skipped:
        lines.append('# not read from this file, set them in the environment: %s' % ', '.join(skipped))
    for var in sorted(env):
        if var.startswith(CONF_PREFIXES):
            lines.append('%s=%s' % (var, env[var]))
    return '\n'.join(lines) + '\n'
