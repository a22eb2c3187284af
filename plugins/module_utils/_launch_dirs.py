# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The launch's directories across its nodes (roles/job/tasks/shares.yml and resume.yml), read from what each node's
tasks registered, through ``hostvars`` (as in ``_launch_records``), instead of Jinja loops in the task files:

* :func:`shared_dirs`: which nodes see one directory (the same token), and the node that acts for them (filter
  ``shared_dirs``);
* :func:`dir_shares`: every node's tokens, read by the preflight or just made, grouped into the nodes that share the
  node root, the synced workspace, and one state directory;
* :func:`share_lines`: what the launch shows of the directories nodes share;
* :func:`resume_nodes`: which nodes have the run a launch resumes, and its checkpoint, and what it says of them.
* :func:`resume_checkpoint`: which checkpoint a launch resumed (the manifest's ``resumed_from``).
"""

from __future__ import annotations

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


def resume_nodes(nodes, hostvars, run_id):
    """Which of ``nodes`` have the run ``run_id`` (fact ``__trainops_resume_has_run``) and its checkpoint
    (``__trainops_resume_has_checkpoint``), in order: ``with_run``, ``with_checkpoint``, ``without_run``,
    ``without_checkpoint`` (they get a copy from the first of ``with_checkpoint``, resume.yml), and ``msg``, what the
    launch says it resumes."""
    def having(fact):
        return [node for node in nodes if host_vars(hostvars, node).get(fact)]

    with_run = having('__trainops_resume_has_run')
    with_checkpoint = having('__trainops_resume_has_checkpoint')
    without_run = [node for node in nodes if node not in with_run]
    without_checkpoint = [node for node in nodes if node not in with_checkpoint]
    msg = 'Resuming run %s: its checkpoint is on %s%s.' % (
        _str(run_id), ', '.join(with_checkpoint) if with_checkpoint else 'no node (the script starts from scratch)',
        '; not on %s, which did not take part in it' % ', '.join(without_run) if without_run else '')
    if with_checkpoint and without_checkpoint:
        msg += ' %s get(s) a copy from %s.' % (', '.join(without_checkpoint), with_checkpoint[0])
    return dict(with_run=with_run, with_checkpoint=with_checkpoint, without_run=without_run,
                without_checkpoint=without_checkpoint, msg=msg)


def resume_checkpoint(nodes, hostvars, run_id, recorded=None, per_node=None):
    """The checkpoint a launch resumed, for its manifest's ``resumed_from``: ``run_id``, and from the first of ``nodes``
    where the run's ``checkpoint.pt`` was found (resume.yml registers ``__trainops_resume_found``, module
    checkpoint_carry: its ``checkpoint``) ``node``, ``path``, ``sha256``, ``size`` and ``mtime``; ``global_step`` (and ``epoch``) from that
    node's own ``checkpoint.json`` in ``per_node`` (the resumed run's manifest's ``checkpoints``), else from
    ``recorded``, the resumed run's manifest's ``checkpoint`` (rank 0's ``checkpoint.json``), where it names the same
    file (the same node, or the same path below the run's directory: every node writes the same checkpoint);
    ``copied_to``: the nodes the checkpoint was copied to from ``node`` (resume.yml's ``__trainops_resume_copied``).
    Without a node that has the checkpoint, ``node`` and ``path`` are None (the script starts from scratch)."""
    found = dict(run_id=_str(run_id), node=None, path=None, sha256=None, size=None, mtime=None, global_step=None,
                 epoch=None, copied_to=[])
    for node in nodes:
        stat = dig(host_vars(hostvars, node), '__trainops_resume_found', 'checkpoint')
        if isinstance(stat, dict) and stat.get('isreg'):
            found.update(node=node, path=stat.get('path'), sha256=stat.get('checksum'), size=stat.get('size'),
                         mtime=stat.get('mtime'))
            break
    if not found['path']:
        return found
    found['copied_to'] = [node for node in nodes
                          if dig(host_vars(hostvars, node), '__trainops_resume_copied', 'stat', 'isreg')]
    own = (per_node or {}).get(found['node']) if isinstance(per_node, dict) else None
    if isinstance(own, dict) and own.get('global_step') is not None:
        found.update(global_step=own.get('global_step'), epoch=own.get('epoch'))
    elif isinstance(recorded, dict):
        same = (recorded.get('path') in (None, found['path']) or recorded.get('node') == found['node']
                or _below_run(recorded.get('path')) == _below_run(found['path']))
        if same:
            found.update(global_step=recorded.get('global_step'), epoch=recorded.get('epoch'))
    return found


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
