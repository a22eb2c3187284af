# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Host lists as people write them: node list files and Slurm allocations.

Pure parsing, no I/O, so the inventory plugins (``trainops.multinode.node_list``,
``trainops.multinode.slurm``) and the ``hostfile`` filter share one tested implementation:

* :func:`parse_node_list` -- the ``node_ip_list.txt`` format (one address or host name a line, master
  first, ``#`` comments, optional ``slots=N``), which is also the DeepSpeed hostfile format;
* :func:`expand_hostlist` -- Slurm hostlist expressions (``gpu-[01-04,07],cpu9``, ``node[001-003]-ib``,
  ``rack[1-2]-n[01-02]``) expanded the way ``scontrol show hostnames`` does: order kept, zero padding
  kept, duplicates kept, the leftmost bracket varying slowest;
* :func:`expand_counts` -- Slurm's run-length count lists (``SLURM_TASKS_PER_NODE=2(x3),1``);
* :func:`parse_gpu_count` / :func:`count_ids` -- GPU counts from ``SLURM_GPUS_PER_NODE`` (``h100:8``),
  ``SLURM_GPUS_ON_NODE`` (``8``) and ``SLURM_JOB_GPUS`` (``0,1,2,3``);
* :func:`node_layout` -- the variables every node gets (rank, master flag, ranks per node).
"""

from __future__ import annotations

import collections
import ipaddress
import re

MAX_HOSTS = 65536
"""Upper bound on the hosts one expression may expand to (Slurm's MAX_RANGE is 64K too)."""

SEPARATORS = ' \t\n,'
"""Separators between hostlist tokens outside brackets (Slurm: tab, comma, space, newline)."""

NodeEntry = collections.namedtuple('NodeEntry', ['name', 'slots', 'lineno'])
"""One node of a node list file: its name/address, its ``slots=N`` (or None) and its 1-based line."""

_HOSTNAME_RE = re.compile(r'(?=.{1,253}\Z)[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?')
_DIGITS_RE = re.compile(r'[0-9]+')
_SLOTS_RE = re.compile(r'slots=([0-9]+)')
# An IPv6 zone id (``fe80::1%eth0``): a Linux interface name (at most IFNAMSIZ - 1 = 15 characters; the kernel
# refuses "/", ":" and white space, this rule every character a shell or a pattern would read) or an index.
_ZONE_RE = re.compile(r'[A-Za-z0-9_.-]{1,15}')
_COUNT_ITEM_RE = re.compile(r'([0-9]+)(?:\(x([0-9]+)\))?')


class HostlistError(ValueError):
    """An expression, count list or node list line that cannot be parsed; the message says where."""


# ---- addresses --------------------------------------------------------------------------------

def is_address(value):
    """True for an IPv4/IPv6 address or a DNS-style host name (letters, digits, ``-``, ``_``, ``.``).

    An IPv6 address may carry a zone id (``fe80::1%eth0``, ``fe80::1%2``) only when it is an interface name or
    index (``_ZONE_RE``, not ``.`` or ``..``): ``ipaddress`` takes any text after ``%``, shell characters included.
    """
    if not isinstance(value, str) or not value:
        return False
    try:
        ipaddress.ip_address(value)
    except ValueError:
        pass
    else:
        zone = value.partition('%')[2]
        return not zone or (bool(_ZONE_RE.fullmatch(zone)) and zone not in ('.', '..'))
    return bool(_HOSTNAME_RE.fullmatch(value)) and '..' not in value


# ---- node list files (node_ip_list.txt, DeepSpeed hostfiles) ---------------------------------

def _strip_comment(line):
    index = line.find('#')
    return line if index < 0 else line[:index]


def parse_node_line(line, lineno=None):
    """Parse one line: ``None`` for a blank/comment line, else ``NodeEntry``. Raises HostlistError."""
    where = 'line %s: ' % lineno if lineno is not None else ''
    fields = _strip_comment(line).split()
    if not fields:
        return None
    name = fields[0]
    if not is_address(name):
        raise HostlistError('%s%r is not an IP address or host name' % (where, name))
    slots = None
    for field in fields[1:]:
        match = _SLOTS_RE.fullmatch(field)
        if not match:
            raise HostlistError('%sunexpected %r after %s (only "slots=N" may follow the address)'
                                % (where, field, name))
        if slots is not None:
            raise HostlistError('%sslots= given twice for %s' % (where, name))
        slots = int(match.group(1))
        if slots < 1:
            raise HostlistError('%sslots=%s for %s: it must be at least 1' % (where, match.group(1), name))
    return NodeEntry(name, slots, lineno)


def parse_node_list(text):
    """Parse a node list file's text into ``NodeEntry`` items, in file order (the master first).

    One address or host name a line, optionally followed by ``slots=N``; blank lines and ``#`` comments
    (whole-line or trailing) are skipped. A node listed twice is an error naming both lines.
    """
    entries = []
    seen = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        entry = parse_node_line(line, lineno)
        if entry is None:
            continue
        if entry.name in seen:
            raise HostlistError('line %d: %s is listed twice (first on line %d); each node must appear once'
                                % (lineno, entry.name, seen[entry.name]))
        seen[entry.name] = lineno
        entries.append(entry)
    return entries


def looks_like_node_list(text):
    """True when every non-comment line parses as ``host[ slots=N]`` and there is at least one."""
    try:
        return bool(parse_node_list(text))
    except HostlistError:
        return False


# ---- Slurm hostlist expressions ----------------------------------------------------------------

def _split_tokens(expression):
    """Split on separators outside brackets; brackets must balance and must not nest."""
    tokens = []
    current = []
    depth = 0
    for char in expression:
        if char == '[':
            if depth:
                raise HostlistError('nested "[" in %r' % expression)
            depth = 1
        elif char == ']':
            if not depth:
                raise HostlistError('"]" without "[" in %r' % expression)
            depth = 0
        if depth == 0 and char in SEPARATORS:
            if current:
                tokens.append(''.join(current))
                current = []
            continue
        current.append(char)
    if depth:
        raise HostlistError('"[" without "]" in %r' % expression)
    if current:
        tokens.append(''.join(current))
    return tokens


def _parse_ranges(body, token):
    """``01-04,07`` -> [(1, 4, 2), (7, 7, 2)]: (low, high, zero-padded width), in the order given."""
    ranges = []
    for item in body.split(','):
        low_text, dash, high_text = item.partition('-')
        if not _DIGITS_RE.fullmatch(low_text) or (dash and not _DIGITS_RE.fullmatch(high_text)):
            raise HostlistError('invalid range %r in %r' % (item, token))
        low = int(low_text)
        high = int(high_text) if dash else low
        if low > high:
            raise HostlistError('range %r in %r goes down' % (item, token))
        ranges.append((low, high, len(low_text)))
    return ranges


def _expand_token(token, budget):
    """Expand one token (no top-level separators) with any number of bracket groups."""
    open_at = token.rfind('[')
    if open_at < 0:
        return [token]
    close_at = token.index(']', open_at)
    prefix, body, suffix = token[:open_at], token[open_at + 1:close_at], token[close_at + 1:]
    ranges = _parse_ranges(body, token)
    count = sum(high - low + 1 for low, high, _width in ranges)
    heads = _expand_token(prefix, budget) if '[' in prefix else [prefix]
    if count * len(heads) > budget:
        raise HostlistError('%r expands to more than %d hosts' % (token, MAX_HOSTS))
    hosts = []
    for head in heads:
        for low, high, width in ranges:
            for number in range(low, high + 1):
                hosts.append('%s%0*d%s' % (head, width, number, suffix))
    return hosts


def expand_hostlist(expression):
    """Expand a Slurm hostlist expression into host names, as ``scontrol show hostnames`` does.

    ``gpu-[01-02,07],cpu9`` -> ``['gpu-01', 'gpu-02', 'gpu-07', 'cpu9']``; ``node[1-2]-ib`` ->
    ``['node1-ib', 'node2-ib']``; ``rack[1-2]-n[01-02]`` -> ``rack1-n01 rack1-n02 rack2-n01 rack2-n02``.
    Tokens are separated by commas, spaces, tabs or newlines outside brackets; a range's width is that
    of its lower bound (``[08-10]`` -> 08 09 10, ``[8-10]`` -> 8 9 10). Order and duplicates are kept.
    """
    if expression is None:
        raise HostlistError('no hostlist expression given')
    hosts = []
    for token in _split_tokens(str(expression)):
        hosts.extend(_expand_token(token, MAX_HOSTS - len(hosts)))
        if len(hosts) > MAX_HOSTS:
            raise HostlistError('%r expands to more than %d hosts' % (expression, MAX_HOSTS))
    return hosts


# ---- Slurm counts ------------------------------------------------------------------------------

def expand_counts(value):
    """Slurm's run-length count list (``SLURM_TASKS_PER_NODE``) -> one int per node.

    ``2(x3),1`` -> ``[2, 2, 2, 1]``; ``8`` -> ``[8]``.
    """
    counts = []
    for item in str(value).replace(' ', '').split(','):
        match = _COUNT_ITEM_RE.fullmatch(item)
        if not match:
            raise HostlistError('invalid count %r in %r (expected N or N(xM), comma separated)' % (item, value))
        repeat = int(match.group(2)) if match.group(2) else 1
        if repeat < 1 or len(counts) + repeat > MAX_HOSTS:
            raise HostlistError('invalid repetition in %r' % value)
        counts.extend([int(match.group(1))] * repeat)
    return counts


def parse_gpu_count(value):
    """GPUs per node from ``SLURM_GPUS_PER_NODE``/``SLURM_GPUS_ON_NODE``-style values.

    ``8`` -> 8, ``h100:8`` -> 8, ``gpu:h100:8`` -> 8, ``a100:2,v100:2`` -> 4 (types are summed),
    ``gpu:8(IDX:0-7)`` -> 8. ``None`` for an empty value.
    """
    if value is None:
        return None
    text = re.sub(r'\([^)]*\)', '', str(value)).strip()
    if not text:
        return None
    total = 0
    for item in text.split(','):
        count = item.strip().rsplit(':', 1)[-1]
        if not _DIGITS_RE.fullmatch(count):
            raise HostlistError('invalid GPU count %r in %r (expected [type:]N)' % (item, value))
        total += int(count)
    return total


def count_ids(value):
    """How many IDs a list like ``SLURM_JOB_GPUS`` holds: ``0,1,2,3`` -> 4, ``0-3,6`` -> 5; ``None`` if empty."""
    if value is None or not str(value).strip():
        return None
    total = 0
    for item in str(value).replace(' ', '').split(','):
        low, dash, high = item.partition('-')
        if not _DIGITS_RE.fullmatch(low) or (dash and not _DIGITS_RE.fullmatch(high)) or (dash and int(high) < int(low)):
            raise HostlistError('invalid ID %r in %r' % (item, value))
        total += (int(high) - int(low) + 1) if dash else 1
    return total


# ---- what every node gets ----------------------------------------------------------------------

def node_layout(nodes):
    """``[(name, address or None, ranks or None), ...]`` (rank order) -> ``[(name, {variables}), ...]``.

    Every node gets ``trainops_node_rank`` (its position); the first also ``trainops_master: true``;
    ``ansible_host`` when an address is given; ``trainops_nproc_per_node`` when ranks are known.
    """
    layout = []
    for rank, (name, address, nproc) in enumerate(nodes):
        variables = {'trainops_node_rank': rank}
        if rank == 0:
            variables['trainops_master'] = True
        if address:
            variables['ansible_host'] = address
        if nproc is not None:
            variables['trainops_nproc_per_node'] = int(nproc)
        layout.append((name, variables))
    return layout
