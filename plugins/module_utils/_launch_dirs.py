# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The launch's directories across its nodes (roles/job/tasks/checks.yml and resume.yml), read from what each node's
tasks registered, through ``hostvars`` (as in ``_launch_records``), instead of Jinja loops in the task files:

* :func:`shared_dirs`: which nodes see one directory (the same token), and the node that acts for them (filter
  ``shared_dirs``);
* :func:`dir_shares`: every node's tokens, read by the preflight or just made, grouped into the nodes that share the
  node root, the synced workspace, and one state directory;
* :func:`share_lines`: what the launch shows of the directories nodes share;
* :func:`resume_nodes`: which nodes have the run a launch resumes, and its checkpoint, and what it says of them.
* :func:`newest_checkpoint`, :func:`resume_source`: which node's checkpoint a launch resumes (the newest), and why.
* :func:`resume_checkpoint`: which checkpoint a launch resumed (the manifest's ``resumed_from``).
* :func:`resume_copies`: how the nodes without the checkpoint got it (node to node, or through the controller).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ansible_collections.trainops.multinode.plugins.module_utils._launch_records import dig, host_vars


def shared_dirs(tokens):
    """``{'primary': {node: the first node with its token}, 'groups': [[nodes sharing a token], ...], 'shared': bool}``
    from ``{node: token}`` in node order; a node without a token (null, ``''``) shares with nobody."""
    first = {}
    members = {}
    primary = {}
    for node, token in tokens.items():
        if not token:
            primary[node] = node
            continue
        first.setdefault(token, node)
        members.setdefault(token, []).append(node)
        primary[node] = first[token]
    groups = [nodes for nodes in members.values() if len(nodes) > 1]
    return dict(primary=primary, groups=groups, shared=bool(groups))


def _made(hostvars, node):
    """``{path: token}`` of the tokens the node's first launch made (``__trainops_marked``, module dir_token)."""
    results = dig(host_vars(hostvars, node), '__trainops_marked', 'results') or []
    return dict((result.get('item'), result.get('token')) for result in results if 'token' in result)


def _str(value):
    """Jinja's ``~``: None as ``'None'``, strings as they are."""
    return value if isinstance(value, str) else str(value)


def node_tokens(nodes, hostvars):
    """``{node: {'state_root': token, 'workspace': token, 'state_dir': '<root token or node>:<state dir>'}}``: the
    tokens the preflight read (``__trainops_preflight.paths``), else those the node's first launch made."""
    tokens = {}
    for node in nodes:
        paths = dig(host_vars(hostvars, node), '__trainops_preflight', 'paths')
        if not hasattr(paths, 'get'):
            raise ValueError('node %s has no preflight result (__trainops_preflight.paths)' % node)
        made = _made(hostvars, node)
        root = paths.get('state_root_token') or made.get(paths.get('state_root'))
        tokens[node] = dict(state_root=root, workspace=paths.get('workspace_token') or made.get(paths.get('workspace_dir')),
                            state_dir='%s:%s' % (_str(root or node), _str(paths.get('state_dir'))))
    return tokens


def dir_shares(nodes, hostvars):
    """``{'root': ..., 'workspace': ..., 'state': ...}``, each :func:`shared_dirs` of one token of every node (the
    same root token and the same path below it: one state directory)."""
    tokens = node_tokens(nodes, hostvars)
    return dict((kind, shared_dirs(dict((node, tokens[node][key]) for node in nodes)))
                for kind, key in (('root', 'state_root'), ('workspace', 'workspace'), ('state', 'state_dir')))


def share_lines(root_shares, workspace_shares):
    """One line per group of nodes sharing the node root or the synced workspace (:func:`shared_dirs` results)."""
    lines = []
    for group in root_shares.get('groups') or []:
        lines.append('shared node root (trainops_node_root): %s see the same directory; each node keeps its state '
                     'in its own directory below it' % ', '.join(group))
    for group in workspace_shares.get('groups') or []:
        lines.append('shared workspace (trainops_workspace_dir): %s see the same directory; synced once, through %s'
                     % (', '.join(group), group[0]))
    return lines


def resume_nodes(nodes, hostvars, run_id, source=None):
    """Which of ``nodes`` have the run ``run_id`` and its checkpoint, from what each found
    (``__trainops_resume_found``, module checkpoint_carry: ``run``, ``checkpoint.isreg``), in order: ``with_run``,
    ``with_checkpoint``, ``without_run``, ``without_checkpoint`` (they get a copy from ``source``, resume.yml), and
    ``msg``, what the launch says it resumes. ``source``: :func:`resume_source`'s choice (its ``node`` and ``why``);
    without it, the first of ``with_checkpoint``."""
    def having(*keys):
        return [node for node in nodes if dig(host_vars(hostvars, node), '__trainops_resume_found', *keys)]

    with_run = having('run')
    with_checkpoint = having('checkpoint', 'isreg')
    without_run = [node for node in nodes if node not in with_run]
    without_checkpoint = [node for node in nodes if node not in with_checkpoint]
    msg = 'Resuming run %s: its checkpoint is on %s%s.' % (
        _str(run_id), ', '.join(with_checkpoint) if with_checkpoint else 'no node (the script starts from scratch)',
        '; not on %s, which did not take part in it' % ', '.join(without_run) if without_run else '')
    chosen = source.get('node') if isinstance(source, dict) else None
    if chosen is not None and len(with_checkpoint) > 1:
        msg += ' The newest is %s\'s: %s.' % (chosen, source.get('why'))
    if with_checkpoint and without_checkpoint:
        msg += ' %s get(s) a copy from %s.' % (', '.join(without_checkpoint), chosen or with_checkpoint[0])
    return dict(with_run=with_run, with_checkpoint=with_checkpoint, without_run=without_run,
                without_checkpoint=without_checkpoint, msg=msg)


AGE_TIE_S = 2.0
"""Checkpoints whose ages (seconds since their mtime, each on its own node's clock) differ by less than this are as
new as each other: the nodes are looked at a moment apart."""


def _mapping(value):
    return isinstance(value, Mapping) or hasattr(value, 'get')


def _whole(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _number(value):
    """``value`` as a float when it is a finite number of at most 1e12, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or abs(value) > 1e12:
        return None
    return float(value)


def _recorded_step(node, stat, per_node, recorded):
    """The global step ``node``'s run recorded for its last checkpoint: the node's own ``checkpoint.json`` (the
    resumed run's manifest's ``checkpoints``), else rank 0's (its ``checkpoint``) where it is that node's; None
    without one, or when the record names another file than the one found."""
    own = per_node.get(node) if _mapping(per_node) else None
    if not _mapping(own) and _mapping(recorded) and recorded.get('node') == node:
        own = recorded
    if not _mapping(own) or _whole(own.get('global_step')) is None:
        return None
    if own.get('path') and _below_run(own.get('path')) != _below_run(stat.get('path')):
        return None
    return _whole(own['global_step'])


def newest_checkpoint(nodes, found, per_node=None, recorded=None, tie_s=AGE_TIE_S):
    """The node whose checkpoint is the newest, of ``nodes`` in rank order: ``{'node', 'by', 'why'}``, None when no
    node has one. ``found``: ``{node: what module checkpoint_carry found there (its checkpoint)}``.

    1. ``by`` ``only``: one node has it.
    2. ``by`` ``global_step``: the highest global step a node's run recorded for its last checkpoint
       (:func:`_recorded_step`: its ``checkpoint.json``, as the collect kept it); a node without such a record is
       never taken before one with it (a record says which step the file holds, a time does not).
    3. ``by`` ``mtime``: without any record, the youngest file by its age, the seconds since its mtime on the node's
       own clock when it was looked at (``age``), so that clocks set apart do not count; ages less than ``tie_s``
       apart are as young. Where a node gave no age, the mtimes themselves (the nodes' clocks trusted).
    Ties go to rank order (the first of ``nodes``)."""
    have = [node for node in nodes if _mapping(found.get(node)) and found[node].get('isreg')]
    if not have:
        return None
    if len(have) == 1:
        return dict(node=have[0], by='only', why='the only node with the checkpoint')
    steps = dict((node, _recorded_step(node, found[node], per_node, recorded)) for node in have)
    known = [node for node in have if steps[node] is not None]
    if known:
        top = max(steps[node] for node in known)
        chosen = next(node for node in known if steps[node] == top)
        others = ['%s: %s' % (node, 'global step %d' % steps[node] if steps[node] is not None
                              else 'no checkpoint.json record') for node in have if node != chosen]
        return dict(node=chosen, by='global_step', why='global step %d, the highest its checkpoint.json records (%s)'
                    % (top, '; '.join(others)))
    ages = dict((node, _number(found[node].get('age'))) for node in have)
    if any(age is None for age in ages.values()):
        # a node gave no age: the mtimes themselves, the nodes' clocks trusted (the youngest: the latest mtime)
        ages = dict((node, -(_number(found[node].get('mtime')) or 0.0)) for node in have)

        def describe(node):
            return 'mtime %.3f' % -ages[node]
        clock = 'by the nodes\' clocks (a node gave no age)'
    else:
        def describe(node):
            return '%.1fs old' % ages[node] if ages[node] >= 0 else '%.1fs ahead' % -ages[node]
        clock = 'each on its own node\'s clock'
    youngest = min(ages.values())
    chosen = next(node for node in have if ages[node] - youngest < tie_s)
    others = ', '.join('%s %s' % (node, describe(node)) for node in have if node != chosen)
    return dict(node=chosen, by='mtime', why='no checkpoint.json records its step; its checkpoint.pt is the newest by '
                'its modification time, %s %s (%s); times less than %ss apart count as the same, the first in rank order '
                'taken' % (describe(chosen), clock, others, _str(tie_s)))


def resume_source(nodes, hostvars, recorded=None, per_node=None):
    """:func:`newest_checkpoint` of ``nodes`` from what each found (``__trainops_resume_found``, resume.yml),
    ``{'node': None, 'by': None, 'why': None}`` when no node has the checkpoint."""
    found = dict((node, dig(host_vars(hostvars, node), '__trainops_resume_found', 'checkpoint')) for node in nodes)
    newest = newest_checkpoint(nodes, found, per_node, recorded)
    return newest or dict(node=None, by=None, why=None)


def resume_checkpoint(nodes, hostvars, run_id, recorded=None, per_node=None):
    """The checkpoint a launch resumed, for its manifest's ``resumed_from``: ``run_id``; the node it was taken from,
    the newest (:func:`resume_source`: ``node``, ``by``, ``why``), with what resume.yml registered there
    (``__trainops_resume_found``, module checkpoint_carry: its ``checkpoint``) ``path``, ``size`` and ``mtime``, and
    ``sha256`` where the checkpoint was read for one (it was copied to another node: ``__trainops_resume.carried``);
    ``global_step`` (and ``epoch``) from that node's own ``checkpoint.json`` in ``per_node`` (the resumed run's
    manifest's ``checkpoints``), else from ``recorded``, the resumed run's manifest's ``checkpoint`` (rank 0's
    ``checkpoint.json``), where it names the same file (the same node, or the same path below the run's directory:
    every node writes the same checkpoint); ``copied_to``: the nodes the checkpoint was copied to from ``node``, and
    ``copied_via`` how (:func:`resume_copies`). Without a node that has the checkpoint, ``node`` and ``path`` are None
    (the script starts from scratch)."""
    found = dict(run_id=_str(run_id), node=None, by=None, why=None, path=None, sha256=None, size=None, mtime=None,
                 global_step=None, epoch=None, copied_to=[], copied_via={})
    found.update(resume_source(nodes, hostvars, recorded, per_node))
    if found['node'] is None:
        return found
    source = host_vars(hostvars, found['node'])
    stat = dig(source, '__trainops_resume_found', 'checkpoint')
    found.update(path=stat.get('path'), size=stat.get('size'), mtime=stat.get('mtime'),
                 sha256=dig(source, '__trainops_resume', 'carried', 'checksum') or stat.get('checksum'))
    found['copied_via'] = resume_copies(nodes, hostvars)['copied_via']
    found['copied_to'] = [node for node in nodes if node in found['copied_via']]
    own = (per_node or {}).get(found['node']) if isinstance(per_node, dict) else None
    if isinstance(own, dict) and own.get('global_step') is not None:
        found.update(global_step=own.get('global_step'), epoch=own.get('epoch'))
    elif isinstance(recorded, dict):
        same = (recorded.get('path') in (None, found['path']) or recorded.get('node') == found['node']
                or _below_run(recorded.get('path')) == _below_run(found['path']))
        if same:
            found.update(global_step=recorded.get('global_step'), epoch=recorded.get('epoch'))
    return found


def resume_copies(nodes, hostvars):
    """How the nodes of ``nodes`` that lacked the checkpoint got it (resume.yml): ``copied_via`` ``{node: 'node'}``
    for a copy from the source node over the nodes' SSH (``__trainops_resume_pulled.pulled``), ``'controller'`` for
    one through the controller, checked on arrival (``__trainops_resume_copied.checksum``); ``not_pulled``, the
    nodes whose copy over SSH failed (the controller carries it to them: ``__trainops_resume_pulled.error``), in
    order; ``msg``, a line naming them and why (``''`` when none)."""
    copied_via = {}
    not_pulled = []
    errors = []
    for node in nodes:
        facts = host_vars(hostvars, node)
        pulled = dig(facts, '__trainops_resume_pulled', 'pulled')
        if pulled is True:
            copied_via[node] = 'node'
        elif dig(facts, '__trainops_resume_copied', 'checksum'):
            copied_via[node] = 'controller'
        if pulled is False:
            not_pulled.append(node)
            errors.append('%s: %s' % (node, _str(dig(facts, '__trainops_resume_pulled', 'error'))))
    msg = ('The checkpoint goes through the controller to %s: the copy from node to node failed (%s).'
           % (', '.join(not_pulled), '; '.join(errors))) if not_pulled else ''
    return dict(copied_via=copied_via, not_pulled=not_pulled, msg=msg)


MAX_WORLD_SIZE = 65536
"""The most ranks a resumed run's manifest may name (module_utils/_experiment.py's bound)."""


def resumed_env(manifest):
    """The variables a resumed run's ranks get from the run it resumes, read from that run's manifest on the controller
    (``manifest``; the launch wrote its ``world_size``: nodes x ranks per node): ``{'TRAINOPS_PREVIOUS_WORLD_SIZE':
    '<n>'}`` where the manifest gives a whole number from 1 to MAX_WORLD_SIZE (an int, or a string of digits), else
    ``{}`` (no manifest: a run resumed from another controller's experiments)."""
    value = manifest.get('world_size') if isinstance(manifest, dict) else None
    if isinstance(value, str) and value.isdigit() and len(value) <= 6:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_WORLD_SIZE:
        return {}
    return {'TRAINOPS_PREVIOUS_WORLD_SIZE': str(value)}


def _below_run(path):
    """``<run id>/outputs/checkpoint.pt`` of ``.../runs/<run id>/outputs/checkpoint.pt`` (None without ``/runs/``)."""
    text = _str(path) if path else ''
    return text.rsplit('/runs/', 1)[1] if '/runs/' in text else None
