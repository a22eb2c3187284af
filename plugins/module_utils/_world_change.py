# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""What changed when a run resumed on another world size (a retry on fewer nodes, trainops_min_nodes), from the
metrics records of the shipped workload (files/workspace/train.py, ``data_parallel_plan``): ``previous_world_size``
(the checkpoint's), ``world_size``, ``accumulation_steps``, ``global_batch`` and ``global_batch_kept``.

Used by the experiment summary (``_experiment.summarize``: ``world_change`` of the manifest's summary, the
``resized`` line of summary.txt). A script that writes no such fields gives no line.
"""

from __future__ import annotations

from ansible_collections.trainops.multinode.plugins.module_utils import _stragglers


def _count(value):
    value = _stragglers.whole(value)
    return value if value is not None and value > 0 else None


def world_change(by_rank):
    """``{'previous_world_size', 'world_size', 'accumulation_steps', 'global_batch', 'global_batch_kept'}`` from the
    last record of the lowest rank whose records carry a ``previous_world_size`` (a count), or None: no such record,
    or the run resumed on its own world size without gradient accumulation (nothing changed)."""
    for rank in sorted(by_rank or {}):
        records = [r for r in by_rank[rank] or [] if isinstance(r, dict) and _count(r.get('previous_world_size'))]
        if not records:
            continue
        last = records[-1]
        change = dict(previous_world_size=_count(last.get('previous_world_size')), world_size=_count(last.get('world_size')),
                      accumulation_steps=_count(last.get('accumulation_steps')), global_batch=_count(last.get('global_batch')),
                      global_batch_kept=last.get('global_batch_kept') if isinstance(last.get('global_batch_kept'), bool) else None)
        if (change['previous_world_size'] == change['world_size'] and change['accumulation_steps'] in (None, 1)
                and change['global_batch_kept'] is not False):
            return None
        return change
    return None


def _n(value):
    return 'n/a' if value is None else str(value)


def summary_line(change):
    """``world size 4 -> 2: gradient accumulation 2 keeps the global batch of 256 samples`` (or says that the global
    batch changed); None for no change."""
    if not change:
        return None
    head = 'world size %s -> %s' % (_n(change['previous_world_size']), _n(change['world_size']))
    if change['global_batch_kept'] is False:
        return '%s: the global batch CHANGED, now %s samples (gradient accumulation %s); the schedule stays on the global step' % (
            head, _n(change['global_batch']), _n(change['accumulation_steps']))
    if change['global_batch_kept'] is None:
        return '%s (gradient accumulation %s, global batch %s)' % (
            head, _n(change['accumulation_steps']), _n(change['global_batch']))
    return '%s: gradient accumulation %s keeps the global batch of %s samples' % (
        head, _n(change['accumulation_steps']), _n(change['global_batch']))
