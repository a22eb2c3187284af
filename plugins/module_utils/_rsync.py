# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""rsync from the controller to one node, for the action plugin trainops.multinode.rsync.

The command is built here and run by ``run_rsync``; the action plugin takes the node's connection settings
(address, port, user, key, the ssh arguments of the inventory and ansible.cfg, the ControlMaster's socket) from
Ansible's own ssh connection plugin for that host. No option ever turns host-key checking off.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess

CHANGED_MARKER = '<<CHANGED>>'
"""rsync prints every item it transfers or deletes after this marker (--out-format), as ansible.posix.synchronize does."""


class RsyncError(Exception):
    def __init__(self, msg, **result):
        super().__init__(msg)
        self.msg = msg
        self.result = result


def remote_path(host, user, path):
    """``[user@]host:path``; an IPv6 address goes in brackets."""
    if ':' in host and not host.startswith('['):
        host = '[%s]' % host
    return '%s%s:%s' % ('%s@' % user if user else '', host, path)


def ssh_command(ssh_executable='ssh', port=None, private_key=None, ssh_args=(), control_path=None):
    """The ``--rsh`` command line: the node's own ssh settings. ``control_path``: reuse that ControlMaster socket
    (the one Ansible's connection to the node opened); else the one the ssh arguments name, or none at all."""
    argv = [ssh_executable or 'ssh']
    if control_path:
        argv += ['-o', 'ControlPath=%s' % control_path]
    elif not any('ControlPath' in a for a in ssh_args if a):
        argv += ['-S', 'none']
    if private_key:
        argv += ['-i', private_key]
    if port:
        argv += ['-o', 'Port=%s' % port]
    words = [shlex.quote(a) for a in argv]
    for args in ssh_args:
        if args:
            words += [shlex.quote(a) for a in shlex.split(args)]
    return ' '.join(words)


def rsync_argv(src, dest, rsh=None, create_dest=False, opts=(), archive=True, compress=False, check_mode=False,
               rsync='rsync'):
    """The rsync command that copies ``src`` (a directory: a trailing / copies its contents) to ``dest``.

    ``dest`` is a local path, or ``[user@]host:path`` with ``rsh``. ``create_dest``: the node makes the destination
    directory first (``--rsync-path``), as any rsync version allows; a local one is the caller's to make.
    """
    argv = [rsync, '--delay-updates', '-F', '--out-format=' + CHANGED_MARKER + '%i %n%L']
    if archive:
        argv.append('--archive')
    if compress:
        argv.append('--compress')
    if check_mode:
        argv.append('--dry-run')
    if rsh:
        argv.append('--rsh=' + rsh)
    if create_dest and rsh:
        argv.append('--rsync-path=mkdir -p -- %s && rsync' % shlex.quote(dest.split(':', 1)[1]))
    argv += list(opts)
    argv += [src, dest]
    return argv


def changed_items(stdout):
    """The items rsync transferred or deleted, as ``<itemized changes> <name>`` lines."""
    return [line.split(CHANGED_MARKER, 1)[1] for line in stdout.splitlines() if CHANGED_MARKER in line]


def run_rsync(argv, runner=None):
    """Run the command (with ``runner``, ``subprocess.run`` unless a test gives another); ``{'changed', 'items',
    'rc'}``, or RsyncError with rsync's own message."""
    run = runner or subprocess.run
    proc = run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
               check=False)
    if proc.returncode != 0:
        raise RsyncError('rsync failed (exit code %d): %s' % (proc.returncode, (proc.stderr or proc.stdout or '').strip()),
                         rc=proc.returncode, stderr_lines=(proc.stderr or '').splitlines())
    items = changed_items(proc.stdout or '')
    return {'changed': bool(items), 'items': items, 'rc': proc.returncode}


CODE_EXCLUDES = ('.git', '.venv/', 'venv/', '__pycache__/')
"""What a copy of code (``code_only``) leaves out at any depth: git's data (a directory, or a worktree's file), the
usual virtual environments and Python's caches."""

GITIGNORE_FILTER = '--filter=:- .gitignore'
"""rsync's rule that reads every directory's ``.gitignore`` as exclude patterns of that directory (a dir-merge)."""

VENV_MARKER = 'pyvenv.cfg'
MAX_SCANNED_DIRS = 20000
"""The directories of ``src`` looked into for a virtual environment of another name (a ``pyvenv.cfg`` in it)."""


def code_only_opts(src):
    """The rsync options that copy only the code of ``src`` (a directory on the controller): CODE_EXCLUDES, every
    directory below it that holds a ``pyvenv.cfg`` (a virtual environment of any name, anchored at its path; up to
    MAX_SCANNED_DIRS directories are looked into, links not followed), and GITIGNORE_FILTER when ``src`` has a
    ``.gitignore``."""
    opts = ['--exclude=%s' % pattern for pattern in CODE_EXCLUDES]
    skip = set(pattern.rstrip('/') for pattern in CODE_EXCLUDES)
    scanned = 0
    for base, dirs, files in os.walk(src):
        scanned += 1
        if VENV_MARKER in files and base != src:
            # a wildcard in the name is escaped: the pattern is that one path
            opts.append('--exclude=/%s/' % re.sub(r'([*?\[\\])', r'\\\1', os.path.relpath(base, src)))
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if d not in skip)
        if scanned >= MAX_SCANNED_DIRS:
            break
    if os.path.isfile(os.path.join(src, '.gitignore')):
        opts.append(GITIGNORE_FILTER)
    return opts


SOURCE_MARKER = '.trainops-source'
"""The file in a synced directory that names the source it holds (the launch's workspace sync, code_sync's rsync)."""
MAX_MARKER_BYTES = 4096


def read_marker(directory):
    """The source a local directory's SOURCE_MARKER names, or None (no marker; a link or no regular file is none)."""
    try:
        fd = os.open(os.path.join(directory, SOURCE_MARKER), os.O_RDONLY | os.O_NOFOLLOW | getattr(os, 'O_NONBLOCK', 0))
    except OSError:
        return None
    with os.fdopen(fd, 'rb') as handle:
        return marker_text(handle.read(MAX_MARKER_BYTES))


def marker_text(data):
    """The source in a marker's bytes (its first line, at most MAX_MARKER_BYTES), or None when empty."""
    text = data[:MAX_MARKER_BYTES].decode('utf-8', 'replace').split('\n', 1)[0].strip()
    return text or None


def source_problem(recorded, source, where):
    """A line when the directory ``where`` holds the code of another source than ``source`` (``recorded``, from its
    marker), else None: different sources are never synced into one directory without being told to."""
    if recorded is None or recorded == source:
        return None
    return ('%s holds the code of %s (its %s); this sync would put %s over it. Give that source again '
            '(-e src=%s), sync into another directory, or replace it: -e replace_source=true'
            % (where, recorded, SOURCE_MARKER, source, recorded))
