# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Nodes that failed too often (``trainops_exclude_after``, docs/failures.md "Nodes that fail too often"): how many
times each node of an inventory failed, of any kind, remembered across launches in a small file on the controller,
``<experiments dir>/node_failures.json``, that you may read, edit or delete (deleting it forgets every failure).

Each attempt's collect adds its failed nodes (the verdict's cause, and the nodes it could not reach) to the file
(:func:`add`, from module_utils/_experiment.py); a node with ``trainops_exclude_after`` failures or more is judged
bad by the retries (module_utils/_retries.py) and is left out of the first attempt of a later launch of the same
inventory (:func:`gate`; roles/job/tasks/next_attempt.yml). The file is the user's; what it holds is checked:
counts are whole numbers, names strings, and the file is read within bounds.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping

from ansible_collections.trainops.multinode.plugins.module_utils import _node_files, _retry_policy
from ansible_collections.trainops.multinode.plugins.module_utils._files import FOLLOW_UMASK, write_text_atomic
from ansible_collections.trainops.multinode.plugins.module_utils._outcomes import RETRIED_OUTCOMES

FILE_NAME = 'node_failures.json'
"""The file in the experiments directory."""
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_LAST = 5
"""The latest failures a node's entry keeps (run id, cause, time)."""
VERSION = 1


def inventory_key(sources):
    """The inventory a launch used, as the file names it: its sources (``ansible_inventory_sources``), sorted."""
    if isinstance(sources, str):
        sources = [sources]
    return ','.join(sorted(str(s) for s in sources or ())) or 'default'


def path_in(experiments_dir):
    return os.path.join(experiments_dir, FILE_NAME)


def read(path):
    """The file's content: ``{'version': 1, 'inventories': {key: {node: {'failures': n, 'last': [...]}}}}``; an empty
    one when there is no file. What does not fit is left out, and named in ``problems``."""
    state = dict(version=VERSION, inventories={})
    if not os.path.isfile(path):
        return state, []
    value, refused = _node_files.read_json_object(path, None, FILE_NAME, MAX_FILE_BYTES)
    problems = list(refused)
    inventories = (value or {}).get('inventories')
    for key, nodes in (inventories.items() if isinstance(inventories, Mapping) else ()):
        if not isinstance(key, str) or not isinstance(nodes, Mapping):
            problems.append('%s: inventory %r is not a mapping of nodes' % (path, key))
            continue
        kept = state['inventories'].setdefault(key, {})
        for node, entry in nodes.items():
            count = (entry or {}).get('failures') if isinstance(entry, Mapping) else None
            if not isinstance(node, str) or isinstance(count, bool) or not isinstance(count, int) or count < 0:
                problems.append('%s: %s: node %r needs a whole number of failures' % (path, key, node))
                continue
            last = [dict(one) for one in entry.get('last') or [] if isinstance(one, Mapping)][-MAX_LAST:]
            kept[node] = dict(failures=count, last=last)
    return state, problems


def counts(state, inventory):
    """``{node: failures}`` remembered for ``inventory``."""
    return dict((node, entry['failures']) for node, entry in ((state or {}).get('inventories') or {}).get(
        inventory, {}).items())


def add(state, inventory, failed, run_id, when=None):
    """``state`` with one failure more for each node of ``failed`` (``[[node, cause], ...]``) in ``inventory``."""
    state = json.loads(json.dumps(state or dict(version=VERSION, inventories={})))
    nodes = state.setdefault('inventories', {}).setdefault(inventory, {})
    stamp = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(when))
    for node, cause in failed:
        entry = nodes.setdefault(node, dict(failures=0, last=[]))
        entry['failures'] += 1
        entry['last'] = (entry.get('last') or [])[-(MAX_LAST - 1):] + [dict(run_id=run_id, cause=cause, at=stamp)]
    return state


def strikes(verdict, failed, tails=None):
    """The failures of an attempt that count against its nodes: ``failed`` (_retries.failure's ``[[node, cause]]``:
    the attempt's cause) when it ended ``failed``, ``stalled`` or ``unreachable``. A script error (the same exception
    line at the end of every failed node's log ``tails``, module_utils/_retry_policy.py) counts only the nodes that
    could not be reached; an unclean exit after the work counts none."""
    verdict = verdict or {}
    if verdict.get('unclean_exit') or verdict.get('outcome') not in RETRIED_OUTCOMES:
        return []
    own = sorted(set(verdict.get('failed_nodes') or []) | set(verdict.get('also_failed') or []))
    if own and _retry_policy.script_error(own, tails) is not None:
        return [list(pair) for pair in failed if pair[1] == 'unreachable']
    return [list(pair) for pair in failed]


def record(experiments_dir, inventory, failed, run_id, check_mode=False):
    """Add ``failed`` to the experiments directory's file and return ``{node: failures}`` for ``inventory`` (its
    sources, :func:`inventory_key`) after
    it; the file is written atomically (nothing is written in check mode or when nothing failed)."""
    path, inventory = path_in(experiments_dir), inventory_key(inventory)
    state, _problems = read(path)
    if failed:
        state = add(state, inventory, failed, run_id)
        if not check_mode:
            write_text_atomic(path, json.dumps(state, sort_keys=True, indent=2) + '\n', mode=FOLLOW_UMASK)
    return counts(state, inventory)


def too_often(known, limit):
    """``{node: 'failed 3 times (trainops_exclude_after=3)'}`` of the nodes in ``known`` (``{node: failures}``) with
    ``limit`` (above 0) failures or more."""
    limit = int(limit or 0)
    if limit <= 0:
        return {}
    return dict((node, 'failed %d times (trainops_exclude_after=%d; %s)' % (count, limit, FILE_NAME))
                for node, count in sorted((known or {}).items()) if count >= limit)
