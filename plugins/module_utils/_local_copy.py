# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The workspace copy of the action trainops.multinode.rsync when the node is the controller itself, without rsync.

``local_copy(src, dest, options)`` does what ``rsync --delay-updates -F --archive [OPTIONS] src/ dest/`` (the command
of ``_rsync.rsync_argv``) does between two directories of one machine, and reports the same items: the contents of
``src`` go into ``dest``; symlinks stay links; permissions, modification times (nanoseconds) and the group (the owner
too as root) are kept; ``--exclude``/``--include`` patterns follow rsync's rules (first match wins, ``/`` anchors at the
top, a trailing ``/`` matches directories only, ``*`` ``**`` ``?`` ``[...]``), excluded files are never copied and, but
with ``--delete-excluded``, never deleted; ``--filter=':- .gitignore'`` reads every directory's ``.gitignore`` as its
exclude patterns, as rsync's dir-merge does; a file is copied when its size or modification time differs (with
``--checksum``: its size or content), else only attributes that differ are set; ``--delete`` removes what is not in
``src``; every file lands under a temporary name first and is renamed into place. Check mode only lists the items.
Attributes are never set through a symbolic link: a new file's on its open descriptor, an existing item's by name
in its directory, each directory below ``dest`` opened with ``O_NOFOLLOW`` (a link swapped in after the walk fails the
copy with ``ELOOP``/``ENOTDIR``).

What it does not implement raises ``Unsupported`` before anything changes, and the action runs rsync instead: another
option, ``archive=false``, a ``src`` without its trailing ``/``, a ``.rsync-filter`` file (``-F``) in the tree, or a
file that is neither a regular file, a directory nor a symlink.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import tempfile

LOCAL_CONNECTIONS = ('local', 'ansible.builtin.local')
"""The connections that run on the controller itself: a node reached by one of these is the controller."""

DELETE_OPTIONS = ('--delete', '--delete-before', '--delete-during', '--delete-delay', '--delete-after')
CHECKSUM_OPTIONS = ('--checksum', '-c')
# meaningless between two directories of one machine
IGNORED_OPTIONS = ('--compress', '-z')
FILTER_FILE = '.rsync-filter'
MERGE = 'merge'
"""A rule of ``copy_options``' ``rules`` that reads every directory's file of that name as its exclude patterns
(rsync's ``--filter=':- NAME'``, a dir-merge of exclude rules: ``--filter=':- .gitignore'``)."""
_MERGE_FILTER = re.compile(r'(?::-|dir-merge,-) (\S+)')
MAX_MERGE_BYTES = 1 << 20
"""The most of one merge file (a .gitignore) read; a larger one is left to rsync."""


class Unsupported(Exception):
    """Something the local copy does not implement: rsync must make this copy."""


def is_local(connection):
    """True when a node with this ``ansible_connection`` is the controller itself."""
    return connection in LOCAL_CONNECTIONS


def copy_options(opts=(), archive=True):
    """The rsync options ``opts`` as ``{'rules', 'delete', 'delete_excluded', 'checksum'}``; ``Unsupported`` names
    the first one the local copy does not implement. ``rules``: ``(include, Pattern)`` in order, and ``(MERGE, name)``
    for a ``--filter=':- name'`` (every directory's file ``name`` gives exclude rules there, as rsync reads it)."""
    if not archive:
        raise Unsupported('archive=false')
    parsed = dict(rules=[], delete=False, delete_excluded=False, checksum=False)
    words = list(opts)
    while words:
        word = words.pop(0)
        kind, sep, pattern = word.partition('=')
        if kind in ('--exclude', '--include'):
            if not sep:
                if not words:
                    raise Unsupported('%s without a pattern' % word)
                pattern = words.pop(0)
            parsed['rules'].append((kind == '--include', Pattern(pattern)))
        elif kind == '--filter':
            if not sep:
                if not words:
                    raise Unsupported('%s without a rule' % word)
                pattern = words.pop(0)
            merge = _MERGE_FILTER.fullmatch(pattern)
            if not merge or '/' in merge.group(1):
                raise Unsupported('rsync filter rule %s' % pattern)
            parsed['rules'].append((MERGE, merge.group(1)))
        elif word in DELETE_OPTIONS:
            parsed['delete'] = True
        elif word == '--delete-excluded':
            parsed['delete'] = parsed['delete_excluded'] = True
        elif word in CHECKSUM_OPTIONS:
            parsed['checksum'] = True
        elif word not in IGNORED_OPTIONS:
            raise Unsupported('rsync option %s' % word)
    return parsed


def needs_rsync(connection, opts=(), archive=True):
    """Whether copying to a node over ``connection`` with these options runs rsync on the controller."""
    if not is_local(connection):
        return True
    try:
        copy_options(opts, archive)
    except Unsupported:
        return True
    return False


class Pattern(object):
    """One rsync exclude/include pattern (the FILTER RULES of rsync(1), without modifiers or ``***``)."""

    def __init__(self, text):
        if not text or '***' in text:
            raise Unsupported('pattern %r' % (text,))
        self.text = text
        self.dir_only = text.endswith('/')
        body = text.rstrip('/') if self.dir_only else text
        anchored = body.startswith('/')
        body = body.lstrip('/')
        self.whole_path = anchored or '/' in body or '**' in body
        regex = _glob_regex(body)
        if self.whole_path and not anchored:
            regex = '(?:.*/)?' + regex      # matches at the end of the path, at a component's start
        self.regex = re.compile(regex + r'\Z', re.DOTALL)

    def matches(self, relpath, is_dir):
        if self.dir_only and not is_dir:
            return False
        return bool(self.regex.match(relpath if self.whole_path else relpath.rsplit('/', 1)[-1]))


def _glob_regex(pattern):
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith('**', i):
            out.append('.*')
            i += 2
            continue
        if char == '*':
            out.append('[^/]*')
        elif char == '?':
            out.append('[^/]')
        elif char == '[':
            end = pattern.find(']', i + 2 if pattern[i + 1:i + 2] in ('!', '^', ']') else i + 1)
            if end < 0:
                out.append(re.escape(char))
            else:
                body = pattern[i + 1:end]
                if body[:1] == '!':
                    body = '^' + body[1:]
                out.append('[%s]' % body.replace('\\', '\\\\'))
                i = end
        elif char == '\\' and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(char))
        i += 1
    return ''.join(out)


def excluded(rules, relpath, is_dir):
    """rsync's decision for one path (relative to the top): the first matching rule wins, no match includes it. A rule
    ``(include, Pattern, base)`` (from a merge file of the directory ``base``) sees the path relative to ``base``."""
    for rule in rules:
        include, pattern, base = rule if len(rule) == 3 else rule + ('',)
        path = relpath
        if base:
            if not relpath.startswith(base + '/'):
                continue
            path = relpath[len(base) + 1:]
        if pattern.matches(path, is_dir):
            return not include
    return False


def merge_rules(path, base):
    """The exclude rules ``(False, Pattern, base)`` of one merge file (rsync's ``:-``: every line an exclude pattern;
    blank lines and lines starting with # or ; left out). A link or a file over MAX_MERGE_BYTES is Unsupported."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_MERGE_BYTES:
        raise Unsupported('%s is not a regular file of up to %d bytes' % (path, MAX_MERGE_BYTES))
    with open(path, 'rb') as handle:
        text = handle.read(MAX_MERGE_BYTES).decode('utf-8', 'replace')
    rules = []
    for line in text.splitlines():
        line = line.rstrip('\r')
        if not line.strip() or line[:1] in ('#', ';'):
            continue
        rules.append((False, Pattern(line), base))
    return rules


def _kind(mode):
    if stat.S_ISREG(mode):
        return 'f'
    if stat.S_ISDIR(mode):
        return 'd'
    if stat.S_ISLNK(mode):
        return 'L'
    return None


def _lstat(path):
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _same_content(src, dest):
    with open(src, 'rb') as one, open(dest, 'rb') as two:
        while True:
            a, b = one.read(1 << 20), two.read(1 << 20)
            if a != b:
                return False
            if not a:
                return True


class _Plan(object):
    """What the copy changes, found without changing anything: the items rsync would print, and the operations."""

    def __init__(self, src, dest, options):
        self.src, self.dest, self.options = src, dest, options
        self.root = os.geteuid() == 0
        self.items = []       # rsync's --out-format lines: '<itemized changes> <name>'
        self.ops = []         # (operation, relpath, source stat or link target)
        self.dirs = []        # (relpath, source stat) of every directory, for their attributes at the end
        self.merged = {}      # relpath of a directory -> {merge file name: its rules and its parents', deepest first}

    def _attrs(self, sst, dst, kind):
        """rsync's ``cstpog`` columns for an existing item whose content stays; '.' where it agrees."""
        flags = ['.', '.', '.', '.', '.', '.']
        if _seconds(sst) != _seconds(dst):
            flags[2] = 't'
        if kind != 'L' and stat.S_IMODE(sst.st_mode) != stat.S_IMODE(dst.st_mode):
            flags[3] = 'p'
        if self.root and sst.st_uid != dst.st_uid:
            flags[4] = 'o'
        if sst.st_gid != dst.st_gid and (self.root or sst.st_gid in os.getgroups()):
            flags[5] = 'g'
        return flags

    def _item(self, code, rel, kind, target=None):
        name = './' if rel == '' else rel + ('/' if kind == 'd' else '')
        self.items.append('%s %s%s' % (code, name, ' -> ' + target if target is not None else ''))

    def _rules(self, rel, names):
        """The rules in effect below ``rel``: the options' rules, each MERGE rule replaced by the merge files' rules of
        ``rel`` and of its parents, the deeper directory's first (as rsync inserts them)."""
        parent = self.merged.get(os.path.dirname(rel) if rel else None, {})
        merged = {}
        for rule in self.options['rules']:
            if rule[0] == MERGE:
                own = merge_rules(os.path.join(self.src, rel, rule[1]), rel) if rule[1] in names else []
                merged[rule[1]] = own + parent.get(rule[1], [])
        self.merged[rel] = merged
        rules = []
        for rule in self.options['rules']:
            rules.extend(merged[rule[1]] if rule[0] == MERGE else [rule])
        return rules

    def walk(self, rel=''):
        spath, dpath = os.path.join(self.src, rel), os.path.join(self.dest, rel)
        names = sorted(os.listdir(spath))
        if FILTER_FILE in names:
            raise Unsupported('%s in %s (rsync -F reads it)' % (FILTER_FILE, spath))
        rules = self._rules(rel, names)
        kept = set()
        for name in names:
            child = os.path.join(rel, name) if rel else name
            sst = os.lstat(os.path.join(spath, name))
            kind = _kind(sst.st_mode)
            if excluded(rules, child, kind == 'd'):
                continue
            if kind is None:
                raise Unsupported('%s is neither a file, a directory nor a symlink' % os.path.join(spath, name))
            kept.add(name)
            self.entry(child, sst, kind)
        if self.options['delete']:
            try:
                present = sorted(os.listdir(dpath))
            except (FileNotFoundError, NotADirectoryError):
                present = []
            for name in present:
                if name not in kept:
                    self.delete(os.path.join(rel, name) if rel else name, rules)

    def delete(self, rel, rules):
        path = os.path.join(self.dest, rel)
        dst = os.lstat(path)
        is_dir = stat.S_ISDIR(dst.st_mode)
        if excluded(rules, rel, is_dir) and not self.options['delete_excluded']:
            return
        if is_dir:
            for name in sorted(os.listdir(path)):
                self.delete(os.path.join(rel, name), rules)
        self._item('*deleting  ', rel, 'd' if is_dir else 'f')
        self.ops.append(('delete', rel, dst))

    def entry(self, rel, sst, kind):
        dst = _lstat(os.path.join(self.dest, rel))
        if dst is not None and _kind(dst.st_mode) != kind:
            self.ops.append(('replace', rel, dst))   # a file where the source has a directory, or the other way
            dst = None
        target = os.readlink(os.path.join(self.src, rel)) if kind == 'L' else None
        if dst is None:    # new, the top directory too (its parent must exist, as for rsync)
            self._item(('>' if kind == 'f' else 'c') + kind + '+' * 9, rel, kind, target)
            self.ops.append(({'f': 'file', 'd': 'mkdir', 'L': 'link'}[kind], rel, sst))
        elif kind == 'f':
            self.file(rel, sst, dst)
        elif kind == 'L':
            flags = self._attrs(sst, dst, kind)
            if os.readlink(os.path.join(self.dest, rel)) != target:
                flags[0] = 'c'
                self._item('cL' + ''.join(flags) + '...', rel, kind, target)
                self.ops.append(('link', rel, sst))
            elif flags != ['.'] * 6:
                self._item('.L' + ''.join(flags) + '...', rel, kind, target)
                self.ops.append(('attrs', rel, sst))
        if kind == 'd':
            if dst is not None:
                flags = self._attrs(sst, dst, kind)
                if flags != ['.'] * 6:
                    self._item('.d' + ''.join(flags) + '...', rel, kind)
            self.dirs.append((rel, sst))
            self.walk(rel)

    def file(self, rel, sst, dst):
        flags = self._attrs(sst, dst, 'f')
        if sst.st_size != dst.st_size:
            flags[1] = 's'
        if self.options['checksum']:
            if flags[1] != 's' and not _same_content(os.path.join(self.src, rel), os.path.join(self.dest, rel)):
                flags[0] = 'c'
            transfer = flags[0] == 'c' or flags[1] == 's'
        else:
            transfer = flags[1] == 's' or flags[2] == 't'
        if transfer:
            self._item('>f' + ''.join(flags) + '...', rel, 'f')
            self.ops.append(('file', rel, sst))
        elif flags != ['.'] * 6:
            self._item('.f' + ''.join(flags) + '...', rel, 'f')
            self.ops.append(('attrs', rel, sst))


def _seconds(st):
    """The modification time as rsync compares it without --modify-window: whole seconds."""
    return st.st_mtime_ns // 1000000000


def _set_attrs(path, sst, root, accurate=False):
    """The source's owner (as root) or group, permissions (not of a link) and times on ``path``: as rsync, the time
    of a transferred file (``accurate``) to the nanosecond, of anything else only when its second differs.

    Never through a symbolic link: every directory from the destination's parent down is opened with ``O_NOFOLLOW``,
    and the item itself is changed by name relative to its directory without following it (a link swapped in for
    a file or a directory after the walk is refused, ``ELOOP``; a link is changed itself)."""
    head, name = os.path.split(path)
    parent = os.open(head or '.', os.O_RDONLY | os.O_DIRECTORY)
    try:
        _attrs_at(parent, name, path, sst, root, accurate)
    finally:
        os.close(parent)


def _open_dir_below(top, rel):
    """A descriptor of the directory ``top``/``rel``, every component of ``rel`` opened without following a link
    (``ELOOP`` or ``ENOTDIR`` where one is a link or no directory); ``top`` itself as given."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in [part for part in rel.split('/') if part]:
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _attrs_at(dir_fd, name, path, sst, root, accurate):
    """_set_attrs for the item ``name`` in the directory ``dir_fd`` (``path`` names it in errors)."""
    try:
        os.chown(name, sst.st_uid if root else -1, sst.st_gid, dir_fd=dir_fd, follow_symlinks=False)
    except PermissionError:
        pass    # rsync keeps the group only where the user may give it
    if not stat.S_ISLNK(sst.st_mode):
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW, dir_fd=dir_fd)
        try:
            if stat.S_ISLNK(os.fstat(fd).st_mode):
                raise OSError(errno.ELOOP, 'became a symbolic link during the copy; its attributes are not set', path)
            _fchmod(fd, stat.S_IMODE(sst.st_mode))
        finally:
            os.close(fd)
    if accurate or _seconds(os.stat(name, dir_fd=dir_fd, follow_symlinks=False)) != _seconds(sst):
        os.utime(name, ns=(sst.st_atime_ns, sst.st_mtime_ns), dir_fd=dir_fd, follow_symlinks=False)


def _fchmod(fd, mode):
    """chmod of what the ``O_PATH`` descriptor ``fd`` holds (never a link: the caller checked): fchmod where the
    kernel takes one on an ``O_PATH`` descriptor, else through /proc/self/fd (as glibc's fchmodat does)."""
    try:
        os.fchmod(fd, mode)
    except OSError as exc:
        if exc.errno != errno.EBADF:
            raise
        os.chmod('/proc/self/fd/%d' % fd, mode)


def _set_file_attrs(fd, sst, root):
    """_set_attrs for a new file the copy holds open (``fd``): owner or group, permissions, times to the nanosecond."""
    try:
        os.fchown(fd, sst.st_uid if root else -1, sst.st_gid)
    except PermissionError:
        pass
    os.fchmod(fd, stat.S_IMODE(sst.st_mode))
    os.utime(fd, ns=(sst.st_atime_ns, sst.st_mtime_ns))


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        try:
            os.rmdir(path)
        except OSError as exc:
            if exc.errno != errno.ENOTEMPTY:   # it holds excluded files, which stay (as with rsync)
                raise
    elif os.path.lexists(path):
        os.unlink(path)


def _apply(plan):
    for operation, rel, info in plan.ops:
        path = os.path.join(plan.dest, rel)
        if operation == 'delete':
            _remove(path)           # a directory's contents came first; what stays in it is excluded
        elif operation == 'replace' and stat.S_ISDIR(info.st_mode):
            shutil.rmtree(path)
        elif operation == 'replace':
            os.unlink(path)
        elif operation == 'mkdir':
            os.mkdir(path, 0o700)
        elif operation == 'link':
            temp = _temp_name(path)
            os.symlink(os.readlink(os.path.join(plan.src, rel)), temp)
            _set_attrs(temp, info, plan.root)
            os.replace(temp, path)
        elif operation == 'file':
            fd, temp = tempfile.mkstemp(prefix='.~tmp~', dir=os.path.dirname(path))
            try:
                with os.fdopen(fd, 'wb') as out, open(os.path.join(plan.src, rel), 'rb') as src:
                    shutil.copyfileobj(src, out, 1 << 20)
                    out.flush()
                    _set_file_attrs(out.fileno(), info, plan.root)
                os.replace(temp, path)
            except BaseException:
                _remove(temp)
                raise
        else:
            _attrs_below(plan.dest, rel, info, plan.root)
    # a directory's own attributes last, deepest first: writing into it moved its time
    for rel, sst in reversed(plan.dirs):
        path = os.path.join(plan.dest, rel) if rel else plan.dest
        if _dir_attrs(os.lstat(path)) != _dir_attrs(sst):
            if rel:
                _attrs_below(plan.dest, rel, sst, plan.root)
            else:
                _set_attrs(plan.dest, sst, plan.root)


def _attrs_below(dest, rel, sst, root):
    """_set_attrs for ``dest``/``rel``, every directory below ``dest`` opened without following a link."""
    head, name = os.path.split(rel)
    parent = _open_dir_below(dest, head)
    try:
        _attrs_at(parent, name, os.path.join(dest, rel), sst, root, False)
    finally:
        os.close(parent)


def _dir_attrs(st):
    return _seconds(st), stat.S_IMODE(st.st_mode), st.st_gid


def _temp_name(path):
    head, tail = os.path.split(path)
    return os.path.join(head, '.~tmp~%s.%d' % (tail, os.getpid()))


def local_copy(src, dest, options, check_mode=False):
    """Copy the contents of the directory ``src`` (with its trailing ``/``) into ``dest`` as rsync would, with the
    ``options`` of ``copy_options``: ``{'changed', 'items', 'rc': 0}``. ``Unsupported`` before anything changed;
    OSError as the copy met it."""
    if not src.endswith('/'):
        raise Unsupported('src without a trailing / (the directory itself, not its contents)')
    src = os.path.abspath(src)
    dest = os.path.abspath(os.path.expanduser(dest))
    sst = os.stat(src)
    if not stat.S_ISDIR(sst.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, 'not a directory', src)
    top = _lstat(dest)
    if top is not None and not stat.S_ISDIR(top.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, 'not a directory', dest)
    plan = _Plan(src, dest, options)
    plan.entry('', sst, 'd')
    if not check_mode:
        _apply(plan)
    return {'changed': bool(plan.items), 'items': plan.items, 'rc': 0}
