# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Who this node is, and which of its directories other nodes see too.

Real clusters put the training user's home, and with it the default node root ``~/.trainops``, on
NFS: every node sees the same files. So a node keeps its state in a directory of its own below the
state root (:func:`node_state_dir`), named after the node (its host name, or ``node_id``), and
records who wrote each record (:func:`host_identity`: host name, boot id, machine id) so that it
never acts on a record another host or an earlier boot wrote.

Whether two nodes share a directory cannot be told from ``stat`` alone (an NFS client has its own
device numbers; cloned VM images repeat inode numbers and times), so :func:`dir_token` keeps a
random token in the directory: nodes that read the same token share it.
"""

from __future__ import annotations

import errno
import os
import re
import socket
import uuid

TOKEN_NAME = '.trainops-dir-id'
"""The file in a directory whose random content identifies the directory across nodes."""

NODE_ID_RE = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]{0,127}')
BOOT_ID_PATH = '/proc/sys/kernel/random/boot_id'
MACHINE_ID_PATHS = ('/etc/machine-id', '/var/lib/dbus/machine-id')


class NodeIdentityError(Exception):
    """A node id or directory that cannot be used; the message says what to fix."""


def _read_first_line(path):
    try:
        with open(path) as handle:
            return handle.readline().strip() or None
    except (IOError, OSError):
        return None


def host_identity(hostname=None, read=_read_first_line):
    """``{'hostname', 'boot_id', 'machine_id'}`` of this host (``None`` for what cannot be read)."""
    machine_id = None
    for path in MACHINE_ID_PATHS:
        machine_id = read(path)
        if machine_id:
            break
    return {'hostname': hostname or socket.gethostname(), 'boot_id': read(BOOT_ID_PATH), 'machine_id': machine_id}


def node_key(node_id=None, hostname=None):
    """The name of this node's own directory below a state root: ``node_id``, else the host name.

    A host name that is not a plain file name (it never is on a sane host) has its other characters
    replaced by ``_``.
    """
    if node_id:
        if not NODE_ID_RE.fullmatch(node_id) or '..' in node_id:
            raise NodeIdentityError('node_id %r is not a plain name: use letters, digits, ".", "_" and "-".' % (node_id, ))
        return node_id
    name = hostname or socket.gethostname()
    name = re.sub(r'[^A-Za-z0-9_.-]', '_', name).lstrip('.') or 'localhost'
    return name[:128]


def node_state_dir(state_root, node_id=None, hostname=None):
    """``<state_root>/<node key>``: the directory where this node, and no other, keeps its runs."""
    return os.path.join(os.path.abspath(os.path.expanduser(state_root)), node_key(node_id, hostname))


def same_host(recorded, current):
    """Compare a recorded :func:`host_identity` with the current one.

    Returns ``'same'``, ``'rebooted'`` (this host, another boot: no recorded pid means anything now),
    or ``'other'`` (another host wrote it). Values missing on either side are not compared.
    """
    recorded = recorded or {}

    def differ(key):
        return bool(recorded.get(key)) and bool(current.get(key)) and recorded[key] != current[key]

    if differ('machine_id') or differ('hostname'):
        return 'other'
    if differ('boot_id'):
        return 'rebooted'
    return 'same'


def ensure_private_dir(path, mode=0o700):
    """Create ``path`` (and parents) if needed; a directory this creates gets ``mode``."""
    try:
        os.makedirs(path, mode=mode)
    except OSError as exc:
        if exc.errno != errno.EEXIST or not os.path.isdir(path):
            raise
        return False
    os.chmod(path, mode)  # makedirs' mode is filtered by the umask
    return True


def dir_token(path, create=True, mode=0o700):
    """The token that identifies directory ``path`` on every node that sees it; ``None`` if there is none yet.

    With ``create`` the directory (mode ``mode`` when new) and its token are created when missing:
    the token is written to a temporary file and hard-linked into place, which is atomic on local
    file systems and on NFS, so nodes racing to create it all end up reading the same token.
    """
    token_path = os.path.join(path, TOKEN_NAME)
    token = _read_first_line(token_path)
    if token or not create:
        return token
    ensure_private_dir(path, mode)
    tmp = '%s.%s.tmp' % (token_path, uuid.uuid4().hex)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, (uuid.uuid4().hex + '\n').encode('ascii'))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, token_path)
    except OSError as exc:
        if exc.errno != errno.EEXIST:
            raise
    finally:
        os.unlink(tmp)
    token = _read_first_line(token_path)
    if not token:
        raise NodeIdentityError('cannot read the directory token %s' % token_path)
    return token
