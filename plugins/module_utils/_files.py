# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Files: the one atomic write of the collection, and the source text of the helper programs it ships.

Standard library only: the torchrun supervisor imports this file on the node, next to it in the run
directory (see ``_supervisor.py``).
"""

from __future__ import annotations

import json
import os
import tempfile

FOLLOW_UMASK = None
"""``mode`` for :func:`write_text_atomic`: the mode an ordinary ``open()`` would give (0666 less the umask)."""


def current_umask():
    """The process's umask (``os.umask`` can only be read by setting it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomic(path, text, mode=0o600, sync=True):
    """Write ``text`` to ``path`` through a temporary file in the same directory and ``os.replace``.

    A reader (another node, a Ctrl-C) sees the old file or the new one, never half of one. The
    temporary file is private (0600) until it is complete; ``path`` then gets ``mode``
    (:data:`FOLLOW_UMASK`: as ``open()`` would). ``sync`` flushes it to disk before the rename.
    """
    directory = os.path.dirname(path) or '.'
    fd, tmp = tempfile.mkstemp(dir=directory, prefix='.%s.' % os.path.basename(path), suffix='.tmp')
    try:
        with os.fdopen(fd, 'wb') as handle:
            handle.write(text.encode('utf-8'))
            if sync:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, (0o666 & ~current_umask()) if mode is FOLLOW_UMASK else mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_json_atomic(path, data, mode=0o600, indent=1, sync=True):
    """Write ``data`` as JSON (sorted keys, a final newline) with :func:`write_text_atomic`; values JSON
    cannot hold are written as their ``str``."""
    write_text_atomic(path, json.dumps(data, sort_keys=True, indent=indent, default=str) + '\n', mode=mode, sync=sync)


def module_source(module):
    """The source text of ``module``, one of the collection's module_utils, read through its own loader.

    The helper programs the modules run on a node (the torchrun supervisor, the preflight's probes) are
    ordinary files in plugins/module_utils: a module imports them, so AnsiballZ packs them into its
    payload, and this reads their text back, from the file on the controller or from the zip on a node.
    """
    return module.__loader__.get_data(module.__file__).decode('utf-8')
