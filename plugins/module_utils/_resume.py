# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""An earlier run's checkpoint on a node, read and carried into a new run without trusting what the job wrote
(module trainops.multinode.checkpoint, roles/job/tasks/resume.yml).

The earlier run's directory (``<state dir>/runs/<run id>``) was written by its job, which could have put a symbolic
link anywhere in it, the run's own directory included. So:

* every component from the run's directory down (the run's directory, ``outputs``, ``checkpoint.pt``) is opened
  with ``O_NOFOLLOW`` relative to the one above it: a link there is refused, naming it, never followed (the
  ``runs`` directory and what is above it are the operator's, taken as they are);
* each is owned by the user who resumes: a checkpoint is loaded with pickle, which runs code, so root (or anyone)
  does not load a file another user wrote; such a run is refused, naming its owner;
* the checkpoint is copied (a reflink where the file system has one: ``FICLONE``; else ``copy_file_range``; else
  a plain copy) from the descriptor that was checked into a new file of the new run's output directory, never
  hard-linked (a hard link is the earlier run's inode, which the job still owns). The copy is checked without reading
  it: the file must be the one ``inspect`` saw (``identity``: device, inode, size, modification and change times) and
  unchanged while it was copied, and the copy must have its size. Only a checkpoint that goes on to other nodes is read
  for its sha256 (``digest``), once;
* a node without the checkpoint gets it with ``pull`` from the node that has it, over the nodes' own SSH (the ssh_mesh role's
  keys, host keys checked), into a temporary file of the new run's output directory (created without following a
  link, ``0600``), its sha256 checked as it arrives, then renamed into place; or with ``receive`` from a file the
  controller put in the node's temporary directory (the copy through the controller), checked the same way.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import pwd
import shlex
import stat
import subprocess
import tempfile
import time

CHECKPOINT = 'checkpoint.pt'
OUTPUTS = 'outputs'
FICLONE = 0x40049409
"""ioctl(dest, FICLONE, src): share the source's extents (btrfs, XFS with reflink, bcachefs, ...)."""
CHUNK = 1 << 20
COPY_FALLBACK = (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTTY, errno.EBADF, errno.EPERM,
                 errno.ETXTBSY)
"""Errors of FICLONE / copy_file_range that mean: not here, use the next way."""


class ResumeError(Exception):
    """The run cannot be resumed safely: a link, another owner, something that is not a file."""


def _owner_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return 'uid %d' % uid


def _check_owner(st, path, euid):
    if st.st_uid != euid:
        raise ResumeError(
            '%s belongs to %s (uid %d), not to %s (uid %d), who resumes it: a checkpoint is loaded with pickle, which '
            'runs code, so a run another user wrote is not resumed. Resume it as %s.'
            % (path, _owner_name(st.st_uid), st.st_uid, _owner_name(euid), euid, _owner_name(st.st_uid)))


def _open_at(dir_fd, name, path, flags):
    """``name`` in ``dir_fd`` without following a link; None when it is missing."""
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        try:
            kind = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(kind):
            raise ResumeError('%s is a symbolic link: nothing below a run\'s directory is followed' % path) from None
        if flags & os.O_DIRECTORY:
            raise ResumeError('%s is not a directory' % path) from None
        raise


class _Opened(object):
    """The run's directory, its outputs and its checkpoint, opened and checked (``inspect`` and ``carry``)."""

    def __init__(self, run_dir, euid):
        self.run_dir = os.path.normpath(run_dir)
        self.euid = euid
        self.fds = []
        self.run = self.checkpoint = None     # the checkpoint: (fd, fstat)

    def __enter__(self):
        try:
            self._open()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        for fd in reversed(self.fds):
            os.close(fd)
        self.fds = []

    def _keep(self, fd):
        if fd is not None:
            self.fds.append(fd)
        return fd

    def _open(self):
        runs_dir, run_id = os.path.split(self.run_dir)
        try:
            runs = self._keep(os.open(runs_dir or '.', os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        except (FileNotFoundError, NotADirectoryError):
            return
        run = self._keep(_open_at(runs, run_id, self.run_dir, os.O_RDONLY | os.O_DIRECTORY))
        if run is None:
            return
        _check_owner(os.fstat(run), self.run_dir, self.euid)
        self.run = run
        outputs_path = os.path.join(self.run_dir, OUTPUTS)
        outputs = self._keep(_open_at(run, OUTPUTS, outputs_path, os.O_RDONLY | os.O_DIRECTORY))
        if outputs is None:
            return
        _check_owner(os.fstat(outputs), outputs_path, self.euid)
        path = os.path.join(outputs_path, CHECKPOINT)
        # O_NONBLOCK: a FIFO put there must not hang the open; it is refused below
        fd = self._keep(_open_at(outputs, CHECKPOINT, path, os.O_RDONLY | os.O_NONBLOCK))
        if fd is None:
            return
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ResumeError('%s is not a regular file' % path)
        _check_owner(st, path, self.euid)
        os.set_blocking(fd, True)
        self.checkpoint = (fd, st)

    @property
    def checkpoint_path(self):
        return os.path.join(self.run_dir, OUTPUTS, CHECKPOINT)


def _sha256(fd):
    digest = hashlib.sha256()
    offset = 0
    while True:
        chunk = os.pread(fd, CHUNK, offset)
        if not chunk:
            return digest.hexdigest()
        digest.update(chunk)
        offset += len(chunk)


def identity(st):
    """What names one version of a file: ``<device>:<inode>:<size>:<mtime ns>:<ctime ns>`` (a write changes it)."""
    return '%d:%d:%d:%d:%d' % (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def inspect(run_dir, euid=None, digest=True, clock=time.time):
    """What the node has of the run ``run_dir``: ``{'run': whether its directory is there, 'checkpoint': {'path',
    'isreg', 'size', 'mtime', 'age' (seconds since its mtime, on the node's own clock: ``clock``), 'identity'
    (:func:`identity`), 'checksum' (sha256, with ``digest`` only: it reads the whole file)}}`` (``isreg`` false and no
    more without a checkpoint). ResumeError for a link, another owner or a checkpoint that is no regular file."""
    euid = os.geteuid() if euid is None else euid
    with _Opened(run_dir, euid) as opened:
        checkpoint = {'path': opened.checkpoint_path, 'isreg': False}
        if opened.checkpoint is not None:
            fd, st = opened.checkpoint
            checkpoint.update(isreg=True, size=st.st_size, mtime=st.st_mtime, age=round(clock() - st.st_mtime, 3),
                              identity=identity(st))
            if digest:
                checkpoint['checksum'] = _sha256(fd)
        return {'run': opened.run is not None, 'checkpoint': checkpoint}


def _copy_fd(src, dst, size):
    """Copy ``size`` bytes of ``src`` into the empty ``dst``: a reflink, else copy_file_range, else read/write.
    Returns the way it took."""
    try:
        fcntl.ioctl(dst, FICLONE, src)
        return 'reflink'
    except OSError as exc:
        if exc.errno not in COPY_FALLBACK:
            raise
    copy_range = getattr(os, 'copy_file_range', None)
    if copy_range is not None:
        try:
            offset = 0
            while offset < size:
                done = copy_range(src, dst, min(CHUNK * 64, size - offset), offset, offset)
                if done == 0:
                    break
                offset += done
            if offset == size:
                return 'copy_file_range'
        except OSError as exc:
            if exc.errno not in COPY_FALLBACK:
                raise
        os.ftruncate(dst, 0)
    offset = 0
    while True:
        chunk = os.pread(src, CHUNK, offset)
        if not chunk:
            return 'copy'
        view = memoryview(chunk)
        while view:
            written = os.pwrite(dst, view, offset)
            view = view[written:]
            offset += written


def _output_dir(output_dir):
    """The new run's output directory, created (0700) when missing and opened without following a link: its fd."""
    os.makedirs(output_dir, 0o700, exist_ok=True)
    head, tail = os.path.split(output_dir)
    parent = os.open(head or '.', os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        out = _open_at(parent, tail, output_dir, os.O_RDONLY | os.O_DIRECTORY)
    finally:
        os.close(parent)
    if out is None:
        raise ResumeError('%s vanished while the checkpoint was carried into it' % output_dir)
    return out


def _into_place(output_dir, write):
    """Create a temporary file (0600, O_EXCL, no link followed) in ``output_dir`` (:func:`_output_dir`), call
    ``write(fd)`` and rename the file to ``checkpoint.pt``; nothing is left behind when ``write`` raises. Returns what
    ``write`` returned."""
    out = _output_dir(output_dir)
    temp = '.%s.%d.tmp' % (CHECKPOINT, os.getpid())
    try:
        dst = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=out)
        try:
            os.fchmod(dst, 0o600)
            done = write(dst)
        finally:
            os.close(dst)
        os.rename(temp, CHECKPOINT, src_dir_fd=out, dst_dir_fd=out)
        return done
    except BaseException:
        try:
            os.unlink(temp, dir_fd=out)
        except FileNotFoundError:
            pass
        raise
    finally:
        os.close(out)


def carry(run_dir, output_dir, checksum=None, euid=None, expect=None, digest=False):
    """Copy the run's checkpoint (checked as ``inspect`` does) into ``output_dir``/checkpoint.pt (mode 0600), through
    a temporary file renamed into place; ``output_dir`` is created (0700) when missing and must not be a link.
    The copy is refused (and removed) when the file is not the one ``inspect`` saw (``expect``: its ``identity``),
    changed while it was copied, or the copy has another size; ``checksum`` (a sha256) or ``digest`` read the copy
    for its sha256, and a copy that differs from ``checksum`` is refused too. Returns ``{'dest', 'checksum' (None
    without ``checksum`` or ``digest``), 'size', 'method'}``."""
    euid = os.geteuid() if euid is None else euid
    output_dir = os.path.normpath(output_dir)
    with _Opened(run_dir, euid) as opened:
        if opened.checkpoint is None:
            raise ResumeError('%s is not there (any more): nothing to carry' % opened.checkpoint_path)
        src, st = opened.checkpoint
        if expect and identity(st) != expect:
            raise ResumeError('%s changed since it was looked at (%s, was %s): not resumed'
                              % (opened.checkpoint_path, identity(st), expect))

        def write(dst):
            method = _copy_fd(src, dst, st.st_size)
            after = os.fstat(src)
            if identity(after) != identity(st) or os.fstat(dst).st_size != st.st_size:
                raise ResumeError('%s changed while it was copied: not resumed' % opened.checkpoint_path)
            copied = _sha256(dst) if checksum or digest else None
            if checksum and copied != checksum:
                raise ResumeError('%s changed while it was copied (sha256 %s, found %s before): not resumed'
                                  % (opened.checkpoint_path, copied, checksum))
            return method, copied
        method, copied = _into_place(output_dir, write)
    return {'dest': os.path.join(output_dir, CHECKPOINT), 'checksum': copied, 'size': st.st_size, 'method': method}


class PullError(Exception):
    """The node could not get the checkpoint from the other node (SSH failed): the controller carries it instead."""


SSH_OPTIONS = ('-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=yes', '-o', 'ConnectTimeout=10', '-o',
               'ServerAliveInterval=15', '-o', 'ServerAliveCountMax=4', '-o', 'ControlMaster=no', '-o',
               'ControlPath=none', '-o', 'LogLevel=ERROR')
"""How a node reaches another one (as roles/ssh_mesh's check does): no prompt, the host key known, a dead peer noticed."""


def ssh_command(source, path):
    """The argv that prints ``path`` of the node ``source`` (its name or address, as the ssh_mesh role's known_hosts
    and ~/.ssh/config know it) on standard output."""
    if not source or source.startswith('-') or any(c.isspace() for c in source):
        raise ResumeError('%r is no node name or address to copy the checkpoint from' % source)
    return ['ssh'] + list(SSH_OPTIONS) + ['--', source, 'cat -- %s' % shlex.quote(path)]


def pull(command, output_dir, checksum, size=None):
    """Run ``command`` (:func:`ssh_command`) and write what it prints into ``output_dir``/checkpoint.pt through a
    temporary file (created as :func:`carry` does, renamed into place), its sha256 computed as it arrives. PullError
    when the command fails (the copy then goes through the controller); ResumeError when what arrived has another
    sha256 than ``checksum`` or another size than ``size``. Returns ``{'dest', 'checksum', 'size'}``."""
    output_dir = os.path.normpath(output_dir)

    def write(dst):
        digest = hashlib.sha256()
        offset = 0
        with tempfile.TemporaryFile() as errors, subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                                                  stdout=subprocess.PIPE, stderr=errors) as proc:
            while True:
                chunk = proc.stdout.read(CHUNK)
                if not chunk:
                    break
                digest.update(chunk)
                view = memoryview(chunk)
                while view:
                    written = os.pwrite(dst, view, offset)
                    view = view[written:]
                    offset += written
            proc.wait()
            errors.seek(0)
            error = errors.read(65536).decode('utf-8', 'replace')
        if proc.returncode != 0:
            lines = [line.strip() for line in error.splitlines() if line.strip()]
            raise PullError('%s exited %d%s' % (command[0], proc.returncode, ': %s' % lines[-1][:500] if lines else ''))
        got = digest.hexdigest()
        if got != checksum or (size is not None and offset != size):
            raise ResumeError('the checkpoint that arrived (sha256 %s, %d bytes) is not the one sent (sha256 %s%s): '
                              'not resumed' % (got, offset, checksum, ', %d bytes' % size if size is not None else ''))
        return got, offset
    got, offset = _into_place(output_dir, write)
    return {'dest': os.path.join(output_dir, CHECKPOINT), 'checksum': got, 'size': offset}


def receive(src, output_dir, checksum, size=None):
    """Copy ``src`` (a file the controller transferred into the task's temporary directory: the checkpoint on its way
    through the controller) into ``output_dir``/checkpoint.pt through a temporary file (created as :func:`carry` does,
    renamed into place), its sha256 computed as it is copied, and remove ``src``. ResumeError when ``src`` is a link or
    no regular file, or what arrived has another sha256 than ``checksum`` or another size than ``size``. Returns
    ``{'dest', 'checksum', 'size'}``."""
    output_dir = os.path.normpath(output_dir)
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise ResumeError('%s cannot be read (%s): the checkpoint did not arrive' % (src, exc.strerror)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ResumeError('%s is not a regular file: the checkpoint did not arrive' % src)
        os.set_blocking(fd, True)

        def write(dst):
            got_size = os.fstat(fd).st_size
            _copy_fd(fd, dst, got_size)
            got = _sha256(dst)
            if got != checksum or (size is not None and got_size != size):
                raise ResumeError('the checkpoint that arrived (sha256 %s, %d bytes) is not the one sent (sha256 %s%s): '
                                  'not resumed' % (got, got_size, checksum, ', %d bytes' % size if size is not None else ''))
            return got, got_size
        got, got_size = _into_place(output_dir, write)
    finally:
        os.close(fd)
    os.unlink(src)
    return {'dest': os.path.join(output_dir, CHECKPOINT), 'checksum': got, 'size': got_size}
