# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The checks of the SSH mesh (role ``trainops.multinode.ssh_mesh``) that come before anything is written.

Pure functions, no I/O; the filter ``trainops.multinode.ssh_mesh_plan`` calls :func:`plan`:

* every name a node goes by in ``known_hosts`` and ``~/.ssh/config`` (inventory name, ``ansible_host``, the host
  names the node reports itself, ``trainops_ssh_mesh_extra_names``) is a plain host name or address, and belongs
  to one node only: a name of one node that is a name or an address of another would make ``ssh`` trust the first
  node's host key for the second;
* the host names a node reports (``uname -n`` and its first label) are untrusted input: they must be RFC 1123 host
  names (``_`` allowed inside a label), and one that ``ssh`` would read as an address must be an address of that
  node;
* :func:`from_patterns`: the ``from=`` pattern list of the mesh key's ``authorized_keys`` line: the addresses of
  every node (the sources peers connect from, whichever network carries SSH), loopback, and the user's patterns.

And what the role reads of every node through ``hostvars`` once the mesh is written (filters
``trainops.multinode.ssh_mesh_known_hosts``, ``ssh_mesh_targets``, ``ssh_mesh_results``, ``ssh_mesh_report`` and
``ssh_mesh_pairs``, tasks known_hosts.yml and verify.yml): :func:`known_hosts_lines`, :func:`mesh_targets`,
:func:`check_results`, :func:`report_lines`, :func:`broken_pairs`.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Sequence

from ansible_collections.trainops.multinode.plugins.module_utils._hostlist import is_address

# One label of a host name: letters and digits, '-' and '_' inside; at most 63 characters (RFC 1123).
_LABEL_RE = re.compile(r'[A-Za-z0-9](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?')
# A from= pattern with wildcards: sshd matches it against the client's address text (UseDNS no, the default).
_WILDCARD_RE = re.compile(r'[0-9A-Fa-f.:*?]+')
LOOPBACK = ('127.0.0.1', '::1')
"""Where a node's connections to itself come from when its name resolves to loopback (Debian's 127.0.1.1)."""

KEY_PERMITS = ('pty', 'port-forwarding', 'agent-forwarding', 'X11-forwarding', 'user-rc')
"""What ``restrict`` takes away and ``trainops_ssh_mesh_key_permits`` may give back."""


def is_host_name(value):
    """True for an RFC 1123 host name: dot-separated labels (``_`` allowed inside one), 253 characters at most."""
    if not isinstance(value, str) or not 0 < len(value) <= 253:
        return False
    return all(_LABEL_RE.fullmatch(label) for label in value.split('.'))


def _as_address(value):
    """The address ``value`` names when ``ssh`` would read it as one (``10.1``, ``0x0a000001`` included), else None."""
    try:
        return ipaddress.ip_address(value.partition('%')[0])
    except ValueError:
        pass
    try:
        return ipaddress.ip_address(socket.inet_aton(value))
    except (OSError, ValueError):
        return None


def _key(name):
    """How two names are compared: an address in its canonical form, a host name in lower case."""
    address = _as_address(name)
    return str(address) if address is not None else name.lower()


def _addresses(values):
    """The addresses of a node's interfaces (facts: zone ids dropped, what is not an address left out)."""
    found = []
    for value in values or ():
        try:
            address = ipaddress.ip_address(str(value).partition('%')[0])
        except ValueError:
            continue
        if address not in found:
            found.append(address)
    return found


def _strings(value):
    return [value] if isinstance(value, str) else list(value) if isinstance(value, Sequence) else []


def node_problems(name, node):
    """The problems of one node's own names (see the module's doc); ``node`` as :func:`plan` takes it."""
    problems = []
    own = _addresses(node.get('addresses'))
    for what in ('nodename', 'hostname'):
        reported = node.get(what)
        label = 'uname -n' if what == 'nodename' else 'its short host name'
        if not isinstance(reported, str) or not is_host_name(reported):
            problems.append('%s reports the host name %r (%s), which is not a host name (dot-separated labels of '
                            'letters, digits, "-" and "_", 253 characters at most); fix the host name of %s'
                            % (name, reported, label, name))
            continue
        address = _as_address(reported)
        if address is not None and address not in own:
            problems.append('%s reports the host name %r (%s), which ssh reads as the address %s, not an address '
                            'of %s (%s); fix the host name of %s'
                            % (name, reported, label, address, name, ', '.join(str(a) for a in own) or 'none', name))
    for what, values in (('its inventory name', [name]), ('ansible_host', _strings(node.get('address'))),
                         ('trainops_ssh_mesh_extra_names', _strings(node.get('extra_names')))):
        for value in values:
            if not (isinstance(value, str) and is_address(value)):
                problems.append('%s: %s %r is not a host name or address; fix %s for %s'
                                % (name, what, value, what.replace('its ', 'the '), name))
    return problems


def names_of(name, node):
    """[(key, what)] of the names a node goes by in known_hosts and ~/.ssh/config."""
    names = [(name, 'inventory name'), (node.get('address'), 'ansible_host'),
             (node.get('nodename'), 'host name'), (node.get('hostname'), 'short host name')]
    names += [(extra, 'trainops_ssh_mesh_extra_names') for extra in _strings(node.get('extra_names'))]
    return [(_key(value), what) for value, what in names if isinstance(value, str) and value]


def duplicate_problems(nodes):
    """One line per name that two nodes go by (a name of one, a name or an interface address of another)."""
    claims = {}
    for name, node in nodes.items():
        for key, what in names_of(name, node):
            claims.setdefault(key, []).append((name, what))
        for address in _addresses(node.get('addresses')):
            claims.setdefault(str(address), []).append((name, 'address'))
    problems = []
    for key, owners in claims.items():
        whats = {}
        for owner, what in owners:
            if what not in whats.setdefault(owner, []):
                whats[owner].append(what)
        if len(whats) > 1 and any(what != 'address' for _owner, what in owners):
            problems.append('%r is a name of more than one node: %s; each node needs names of its own (fix the '
                            'host names, ansible_host or trainops_ssh_mesh_extra_names)'
                            % (key, ', '.join('%s (%s)' % (owner, ', '.join(w)) for owner, w in whats.items())))
    return problems


def check_from(patterns):
    """``(canonical patterns, problems)`` of ``trainops_ssh_mesh_from``: addresses, CIDR networks (no host bits)
    or address patterns with ``*``/``?``, each optionally negated by a leading ``!``."""
    found, problems = [], []
    for pattern in _strings(patterns):
        negated = isinstance(pattern, str) and pattern.startswith('!')
        body = pattern[1:] if negated else pattern
        canonical = None
        if isinstance(body, str) and ('*' in body or '?' in body):
            canonical = body if _WILDCARD_RE.fullmatch(body) else None
        elif isinstance(body, str) and _WILDCARD_RE.fullmatch(body.replace('/', '', 1)):
            try:
                # sshd refuses the whole line for a network with host bits set ("inconsistent mask length")
                network = ipaddress.ip_network(body, strict=True)
            except ValueError:
                network = None
            if network is not None:
                canonical = str(network.network_address) if network.num_addresses == 1 else str(network)
        if canonical is None:
            problems.append('trainops_ssh_mesh_from: %r is not an address, a CIDR network without host bits '
                            '(10.0.0.0/24) or an address pattern (digits, hex, ".", ":", "*", "?"), optionally '
                            'with "!" first; host names do not match (sshd compares addresses)' % (pattern, ))
        elif ('!' if negated else '') + canonical not in found:
            found.append(('!' if negated else '') + canonical)
    return found, problems


def from_patterns(addresses, extra=(), cluster=True):
    """The ``from=`` pattern list (one string, comma-separated): with ``cluster``, every address in ``addresses``
    and loopback, collapsed into the fewest networks that hold exactly them (IPv4 first, IPv6 link-local left
    out: sshd compares its zone too); then the ``extra`` patterns (already checked by :func:`check_from`)."""
    out = []
    if cluster:
        wanted = _addresses(list(addresses) + list(LOOPBACK))
        for version in (4, 6):
            networks = [ipaddress.ip_network(a) for a in wanted if a.version == version and not a.is_link_local]
            for network in ipaddress.collapse_addresses(networks):
                out.append(str(network.network_address) if network.num_addresses == 1 else str(network))
    # a negated pattern refuses its addresses whatever else matches (sshd's addr_match_list)
    return ','.join(out + [p for p in extra if p not in out])


def key_options(sources, permits=()):
    """``from="..."``, ``restrict`` and what ``permits`` gives back, as ansible.posix.authorized_key takes them."""
    return ','.join(['from="%s"' % sources, 'restrict'] + [p for p in KEY_PERMITS if p in permits])


def plan(nodes, sources=(), from_cluster=True, permits=()):
    """``{problems, from, key_options}`` for the mesh of ``nodes``.

    ``nodes``: {inventory name: {address (ansible_host), nodename, hostname (the node's own report), addresses
    (its interface addresses, facts), extra_names}}; ``sources``: ``trainops_ssh_mesh_from``; ``from_cluster``:
    whether every node's addresses are sources too; ``permits``: ``trainops_ssh_mesh_key_permits``.
    """
    problems = []
    for name in nodes:
        problems += node_problems(name, nodes[name])
    problems += duplicate_problems(nodes)
    extra, bad = check_from(sources)
    problems += bad
    unknown = [p for p in _strings(permits) if p not in KEY_PERMITS]
    if unknown:
        problems.append('trainops_ssh_mesh_key_permits: %s not among %s'
                        % (', '.join(repr(p) for p in unknown), ', '.join(KEY_PERMITS)))
    addresses = []
    for node in nodes.values():
        addresses += [str(a) for a in _addresses(node.get('addresses'))]
    result = from_patterns(addresses, extra, cluster=from_cluster)
    if not [p for p in result.split(',') if p and not p.startswith('!')]:
        problems.append('the mesh key would be usable from nowhere: trainops_ssh_mesh_from_cluster is false and '
                        'trainops_ssh_mesh_from names no source')
    return {'problems': problems, 'from': result, 'key_options': key_options(result, _strings(permits))}


# --- known_hosts.yml and verify.yml: what the role reads of every node through hostvars --------------------------

TARGET_KINDS = ('address', 'hostname', 'inventory_hostname')
"""The names of a node the mesh check connects to (``trainops_ssh_mesh_verify_targets``)."""

NOT_CHECKED = 'not checked: the node failed or was unreachable earlier in the play'


def _var(hostvars, node, name):
    """``hostvars[node][name]``; a ValueError naming both where it is not set."""
    try:
        return hostvars[node][name]
    except (KeyError, TypeError):
        raise ValueError('node %s has no %s' % (node, name))


def _text(value):
    return value if isinstance(value, str) else str(value)


def known_hosts_lines(nodes, hostvars):
    """``[{node, name, key}]``: for every node, one ``known_hosts`` line per host key it showed
    (``__trainops_ssh_mesh_host_keys``), ``key`` its names (``__trainops_ssh_mesh_known_names``) comma-separated, then
    the key; ``name`` its first name."""
    lines = []
    for node in nodes:
        names = [_text(name) for name in _var(hostvars, node, '__trainops_ssh_mesh_known_names')]
        for hostkey in _var(hostvars, node, '__trainops_ssh_mesh_host_keys'):
            lines.append({'node': node, 'name': names[0], 'key': ','.join(names) + ' ' + _text(hostkey)})
    return lines


def mesh_targets(nodes, here, hostvars, kinds):
    """``[{node, target}]``: the names the node ``here`` connects to, every node of ``nodes`` by each kind of name in
    ``kinds`` (address: ``__trainops_ssh_mesh_address``, hostname: ``__trainops_ssh_mesh_hostname``,
    inventory_hostname), a name once per node; starting with the node after ``here``, so that the nodes do not all
    knock on one sshd at once."""
    nodes = list(nodes)
    if here not in nodes:
        raise ValueError('%s is not one of the nodes (%s)' % (here, ', '.join(nodes)))
    unknown = [kind for kind in kinds if kind not in TARGET_KINDS]
    if unknown:
        raise ValueError('unknown kind(s) of name %s, not among %s'
                         % (', '.join(map(str, unknown)), ', '.join(TARGET_KINDS)))
    at = nodes.index(here)
    targets = []
    for node in nodes[at + 1:] + nodes[:at + 1]:
        names = []
        for kind in kinds:
            if kind == 'inventory_hostname':
                name = node
            else:
                name = _var(hostvars, node, '__trainops_ssh_mesh_' + kind)
            if name not in names:
                names.append(name)
                targets.append({'node': node, 'target': name})
    return targets


def _row(node, want, line):
    fields = line.split('\t')
    ok = len(fields) >= 2 and fields[0] == want['target'] and fields[1] == '0'
    if ok:
        error = ''
    elif len(fields) > 2 and fields[2]:
        error = fields[2]
    else:
        error = 'exit status ' + fields[1] if len(fields) > 1 else 'no result'
    return {'from': node, 'to': want['node'], 'target': want['target'], 'ok': ok, 'error': error}


def check_results(nodes, hostvars, play_hosts):
    """``[{from, to, target, ok, error}]``: per node, its check's line for each of its targets
    (``__trainops_ssh_mesh_check``, ``ssh_mesh_check.sh``: ``TARGET<TAB>status<TAB>error``, in the order of
    ``__trainops_ssh_mesh_targets``); a node that left the play (or has no check) is one row to ``*``, not ok."""
    rows = []
    for node in nodes:
        try:
            check = hostvars[node].get('__trainops_ssh_mesh_check') or {}
        except (KeyError, AttributeError):
            check = {}
        if node not in play_hosts or 'stdout_lines' not in check:
            rows.append({'from': node, 'to': '*', 'target': '*', 'ok': False, 'error': NOT_CHECKED})
            continue
        lines = [_text(line) for line in check['stdout_lines'] if '\t' in _text(line)]
        for index, want in enumerate(_var(hostvars, node, '__trainops_ssh_mesh_targets')):
            rows.append(_row(node, want, lines[index] if index < len(lines) else ''))
    return rows


def report_lines(results, nodes, kinds):
    """What the role shows of the mesh: how many of the connections work, then a table of the broken ones."""
    broken = [row for row in results if not row['ok']]
    lines = ['ssh mesh of %d nodes: %d/%d connections work (BatchMode, StrictHostKeyChecking=yes, by %s)' % (
        len(nodes), len(results) - len(broken), len(results), ', '.join(_text(kind) for kind in kinds))]
    if broken:
        lines.append('FROM -> TO (NAME): ERROR')
    lines += ['%s -> %s (%s): %s' % (row['from'], row['to'], row['target'], row['error']) for row in broken]
    return lines


def broken_pairs(results):
    """``['A -> B (by NAME: ERROR, by NAME: ERROR)']``: the broken connections, one per pair of nodes (in the order of
    its first broken row), its names' errors in order."""
    pairs = {}
    for row in results:
        if not row['ok']:
            pairs.setdefault('%s -> %s' % (row['from'], row['to']), []).append(
                'by %s: %s' % (row['target'], row['error']))
    return ['%s (%s)' % (pair, ', '.join(errors)) for pair, errors in pairs.items()]
