# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Where the files fetched from a node land in the experiment directory on the controller (the collect's one rule).

Every node gets its own place: ``outputs/<node>/`` and ``profiles/<node>/``, where ``<node>`` is the node's inventory
name (unique in an inventory, so two logical nodes on one host keep apart), which must match :data:`NODE_NAME`. The
file names and paths come from the node, which is not trusted: a path must lie under the directory the node was
asked to list, with no ``..``, empty or ``.`` component and no control character (a newline included); its
destination is resolved on the controller and must stay under the experiment directory, with no symbolic link
anywhere below the experiment directory on the way (a link planted there would make the fetch write through it).
"""

from __future__ import annotations

import os
import re
import stat

NODE_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]{0,127}')
"""A node's directory name: its inventory name when it is one path component that is safe everywhere."""

KINDS = ('outputs', 'profiles', 'logs')
"""The experiment's subdirectories a collect writes into."""

_CONTROL = re.compile(r'[\x00-\x1f\x7f]')


class CollectRefused(Exception):
    """A destination the collect refuses to write; the message names the node and the path."""


def node_dir_name(node):
    """``node`` when it is a safe directory name (:data:`NODE_NAME`, whole string), else CollectRefused."""
    if not isinstance(node, str) or not NODE_NAME.fullmatch(node):
        raise CollectRefused('node name %r cannot name its directory in the experiment: an inventory name of letters, '
                             'digits, ".", "_" and "-" (not first), at most 128 characters, is needed; rename the host '
                             'in the inventory (e.g. gpu-07, and ansible_host: the address)' % (node,))
    return node


def _parts_under(base, path):
    """The components of ``path`` below ``base`` (both the node's), or a reason why it is not plainly under it."""
    if not isinstance(path, str) or not path:
        return None, 'not a path'
    if _CONTROL.search(path):
        return None, 'a control character (newline, tab, ...) in its name'
    base = base.rstrip('/') + '/'
    if not path.startswith(base):
        return None, 'outside the directory listed (%s)' % base.rstrip('/')
    parts = path[len(base):].split('/')
    if any(part in ('', '.', '..') for part in parts):
        return None, 'a "", "." or ".." component'
    return parts, None


def destination(experiment_dir, parts):
    """The absolute path of ``experiment_dir/<parts...>``, checked to stay inside it; else CollectRefused(reason).

    No component below the experiment directory may be a symbolic link or a non-directory (the last one may be a
    regular file: it is overwritten), and the resolved parent plus the name must lie under the resolved directory.
    """
    root = os.path.realpath(experiment_dir)
    if not os.path.isdir(root):
        raise CollectRefused('the experiment directory %s does not exist' % experiment_dir)
    for part in parts:
        if part in ('', '.', '..') or '/' in part or '\0' in part:
            raise CollectRefused('%r is not one path component' % (part,))
    current = root
    for index, part in enumerate(parts):
        current = os.path.join(current, part)
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            break
        last = index == len(parts) - 1
        if stat.S_ISLNK(mode):
            raise CollectRefused('%s is a symbolic link' % current)
        if not (stat.S_ISDIR(mode) or (last and stat.S_ISREG(mode))):
            raise CollectRefused('%s is not a %s' % (current, 'regular file' if last else 'directory'))
    dest = os.path.join(os.path.realpath(os.path.join(root, *parts[:-1])), parts[-1])
    if os.path.commonpath([root, dest]) != root or dest == root:
        raise CollectRefused('%s leaves %s' % (dest, root))
    return dest


def node_files(experiment_dir, kind, node, base, paths, name=None):
    """Where each of a node's files lands: ``{'files': [{'src', 'dest'}], 'refused': [line, ...]}``.

    ``paths`` are the node's paths of files found under its directory ``base``; each lands in
    ``experiment_dir/<kind>/<node>/<its path below base>``. With ``name`` (a destination the controller chose, such as
    a log's ``node_<rank>.txt``), the one path lands in ``experiment_dir/<kind>/<name>``. A path refused (see the
    module's rule) is left out and named, with the node, in ``refused``; nothing is written here.
    """
    if kind not in KINDS:
        raise CollectRefused('kind must be one of %s, not %r' % (', '.join(KINDS), kind))
    node_dir_name(node)
    files, refused = [], []
    for path in paths or []:
        if name is not None:
            parts, why = [kind, name], None
        else:
            below, why = _parts_under(base, path)
            parts = None if below is None else [kind, node] + below
        if parts is not None:
            try:
                files.append(dict(src=path, dest=destination(experiment_dir, parts)))
                continue
            except CollectRefused as exc:
                why = str(exc)
        refused.append('%s: refused %s %r: %s' % (node, kind[:-1], path, why))
    return dict(files=files, refused=refused)
