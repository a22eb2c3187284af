# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Files a node or a job wrote, read within bounds: the one rule for every JSON and JSON-lines file the collection
reads from a job (its metrics, allreduce.json, checkpoint.json, and on the node its run records job.json, pids.json,
exit.json, stop.json).

Such a file is the job's to write, so it may hold anything. What is read of it:

- at most ``max_bytes`` of the file (MAX_JSON_BYTES for a JSON file, MAX_JSONL_BYTES for a JSON-lines one), and of a
  JSON-lines file at most MAX_RECORDS records of at most MAX_LINE_BYTES each; what lies beyond is not read and said so;
- only a regular file, opened without following a symbolic link;
- a JSON value nested at most MAX_DEPTH levels deep (a deeper one would exhaust Python's stack);
- numbers that are finite and at most MAX_MAGNITUDE (2**53, what a float holds exactly) either way: ``NaN``,
  ``Infinity``, ``1e400`` and a 400-digit integer are refused (a float() of the last raises OverflowError).

A JSON file or a record that breaks a bound or does not parse is refused whole; the refusal is a line that names the
node and the file (:func:`refusal`), and the caller keeps it (the manifest's ``read_refused``, the summary) and goes on
with the rest. A JSON-lines file's last line that does not parse is the record being written while the file was read
(``truncated``), not a refusal. Standard library only.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat

MAX_JSON_BYTES = 1024 * 1024
"""A JSON file's size (allreduce.json, checkpoint.json, a run's records): the job's own are a few kB."""

MAX_JSONL_BYTES = 64 * 1024 * 1024
"""How much of a JSON-lines file (a rank's metrics) is read: a record per logged step is about 500 bytes."""

MAX_LINE_BYTES = 64 * 1024
"""A JSON-lines record's length."""

MAX_RECORDS = 200000
"""Records read from one JSON-lines file."""

MAX_DEPTH = 32
"""How deep a JSON value may nest (the job's records nest 3 levels at most)."""

MAX_MAGNITUDE = 2 ** 53
"""The largest number read, either way: every integer up to it is exact in a float."""

MAX_LINES_SHOWN = 5
"""Refused records named one by one per file; the rest are counted in one more line."""

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_BRACKET = re.compile(r'[\[\]{}]')


class Refused(ValueError):
    """A value or a file that is not read; the message says why (never the value)."""


def refusal(node, name, why, line=None):
    """The line naming what was refused: ``node0: rank_00_metrics.jsonl line 3 refused: nesting deeper than 32
    levels``; without a node (on the node itself) the file alone."""
    where = '%s: %s' % (node, name) if node else '%s' % name
    return '%s%s refused: %s' % (where, ' line %d' % line if line is not None else '', why)


def _depth(text):
    """How deep ``text`` nests its arrays and objects (strings left out), counted up to MAX_DEPTH + 1."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_STRING.sub('""', text)):
        if match.group() in '[{':
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    break
        else:
            depth -= 1
    return deepest


def _constant(name):
    raise Refused('a number that is not finite (%s)' % name)


def _integer(text):
    value = int(text) if len(text) <= 20 else None
    if value is None or abs(value) > MAX_MAGNITUDE:
        raise Refused('a number beyond +-2**53 (%d digits)' % len(text.lstrip('-')))
    return value


def _float(text):
    value = float(text)
    if not math.isfinite(value):
        raise Refused('a number that is not finite (%s)' % text[:40])
    if abs(value) > MAX_MAGNITUDE:
        raise Refused('a number beyond +-2**53 (%s)' % text[:40])
    return value


def loads(text):
    """The JSON value of ``text`` within the bounds (depth, numbers); Refused(why) for one that breaks them or does
    not parse."""
    if _depth(text) > MAX_DEPTH:
        raise Refused('nesting deeper than %d levels' % MAX_DEPTH)
    try:
        return json.loads(text, parse_constant=_constant, parse_int=_integer, parse_float=_float)
    except Refused:
        raise
    except (ValueError, RecursionError) as exc:
        raise Refused('not JSON (%s)' % str(exc).split(':', maxsplit=1)[0])


def _read(path, max_bytes):
    """``(data, size)``: at most ``max_bytes`` of the regular file ``path`` (no symbolic link followed) and its size;
    ``(None, None)`` when it does not exist; Refused for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NOFOLLOW', 0) | getattr(os, 'O_NONBLOCK', 0))
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None, None
        raise Refused('a symbolic link' if exc.errno == errno.ELOOP else 'cannot be read (%s)' % exc.strerror)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused('not a regular file')
        handle = os.fdopen(fd, 'rb')
    except BaseException:
        os.close(fd)
        raise
    with handle:
        return handle.read(max_bytes), info.st_size


def read_json(path, node=None, name=None, max_bytes=MAX_JSON_BYTES):
    """``(value, refused)``: the JSON value of the file ``path`` (None when it does not exist or is refused) and the
    refusal lines (:func:`refusal`, naming ``node`` and ``name``, by default the path), at most one."""
    shown = name or path
    try:
        data, size = _read(path, max_bytes)
        if data is None:
            return None, []
        if size > max_bytes:
            raise Refused('%d bytes, more than the %d read' % (size, max_bytes))
        return loads(data.decode('utf-8', errors='replace')), []
    except Refused as exc:
        return None, [refusal(node, shown, str(exc))]


def read_json_object(path, node=None, name=None, max_bytes=MAX_JSON_BYTES):
    """:func:`read_json` of a file that must hold a JSON object: another value is refused."""
    value, refused = read_json(path, node, name, max_bytes)
    if value is not None and not isinstance(value, dict):
        return None, [refusal(node, name or path, 'not a JSON object')]
    return value, refused


def read_jsonl(path, node=None, name=None, max_bytes=MAX_JSONL_BYTES, max_line=MAX_LINE_BYTES,
               max_records=MAX_RECORDS):
    """The JSON objects of the JSON-lines file ``path``, one per line, within the bounds.

    Returns ``dict(records=[...], refused=[line, ...], bad_lines=<records refused>, truncated=<bool>)``: a line that is
    not a JSON object, is longer than ``max_line`` or breaks a bound of :func:`loads` is refused (the first
    MAX_LINES_SHOWN named with their line number, the others counted); a last line that does not parse is
    ``truncated`` (being written) and left out; a file longer than ``max_bytes`` or with more than ``max_records``
    records is read up to there and the rest named as not read.
    """
    shown = name or path
    found = dict(records=[], refused=[], bad_lines=0, truncated=False)
    try:
        data, size = _read(path, max_bytes)
    except Refused as exc:
        found['refused'].append(refusal(node, shown, str(exc)))
        return found
    if data is None:
        return found
    lines = data.split(b'\n')
    if size > max_bytes:
        lines.pop()  # cut by the limit
    refused_lines = []
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        if len(found['records']) >= max_records:
            found['refused'].append(refusal(node, shown, 'more than %d records: the rest from line %d on was not read'
                                            % (max_records, number)))
            break
        try:
            if len(raw) > max_line:
                raise Refused('a record longer than %d bytes' % max_line)
            record = loads(raw.decode('utf-8', errors='replace'))
            if not isinstance(record, dict):
                raise Refused('not a JSON object')
        except Refused as exc:
            last = number == len(lines) or (number == len(lines) - 1 and not lines[-1].strip())
            if last and size <= max_bytes and str(exc).startswith('not JSON'):
                found['truncated'] = True
                continue
            refused_lines.append((number, str(exc)))
            continue
        found['records'].append(record)
    found['bad_lines'] = len(refused_lines)
    found['refused'][:0] = [refusal(node, shown, why, line=number) for number, why in refused_lines[:MAX_LINES_SHOWN]]
    if len(refused_lines) > MAX_LINES_SHOWN:
        more = '%d more record(s), the last on line %d' % (len(refused_lines) - MAX_LINES_SHOWN, refused_lines[-1][0])
        found['refused'].insert(MAX_LINES_SHOWN, refusal(node, shown, more))
    if size > max_bytes:
        found['refused'].append(refusal(node, shown, '%d bytes: only the first %d were read' % (size, max_bytes)))
    return found
