# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Stragglers per rank: each rank's step time from its own metrics records, and the slowest rank with its node.

The per-node judgment (module_utils/_stragglers.py) pools a node's ranks: one GPU of 8 at 3x the others' time moves
the node's median little or not at all. Here each rank has its own figures, the medians of its last ``window``
records (the summary's steady-state window) of ``compute_time_s`` and ``step_time_s``; the judgment compares
``compute_time_s`` when every rank has it, else ``step_time_s`` (the basis, as per node). A rank is a straggler when
its median is more than ``threshold`` above the median of the OTHER ranks' medians; the slowest rank is named
whatever it is (its node too), so that a summary says which rank to look at first.

Used by the experiment summary (``_experiment.summarize``: ``rank_step_times`` and ``rank_stragglers`` of the
manifest's summary, the ``slow rank`` line of summary.txt).
"""

from __future__ import annotations

from ansible_collections.trainops.multinode.plugins.module_utils import _stragglers

MAX_NAMED = 8
"""The most straggler ranks the summary line names (the manifest keeps them all)."""


def rank_figures(by_rank, rank_nodes, window):
    """``{'<rank>': {'rank', 'node', 'records', 'step_time_s', 'compute_time_s'}}`` (the rank as a string: the
    manifest is JSON): each rank's medians (None where none of its
    last ``window`` records has the field) over those records; ranks without either are left out. ``rank_nodes`` maps
    a rank to the node whose files gave its records (None when unknown)."""
    figures = {}
    for rank, records in (by_rank or {}).items():
        values = dict((field, []) for field in _stragglers.BASES)
        counted = 0
        for record in list(records or [])[-window:] if window > 0 else []:
            if not isinstance(record, dict):
                continue
            found = False
            for field in _stragglers.BASES:
                value = _stragglers.seconds(record.get(field))
                if value is not None:
                    values[field].append(value)
                    found = True
            counted += found
        if counted:
            figure = dict(rank=rank, node=(rank_nodes or {}).get(rank), records=counted)
            for field in _stragglers.BASES:
                figure[field] = _stragglers.significant(_stragglers.median(values[field]))
            figures[str(rank)] = figure
    return figures


def basis(figures):
    """``compute_time_s`` when every rank with figures has it, else ``step_time_s`` when some rank has that, else
    None."""
    ranks = [figure for figure in (figures or {}).values() if isinstance(figure, dict)]
    if ranks and all(figure.get('compute_time_s') is not None for figure in ranks):
        return 'compute_time_s'
    if any(figure.get('step_time_s') is not None for figure in ranks):
        return 'step_time_s'
    return None


def _entry(key, figures, medians, field):
    others = _stragglers.median([value for other, value in medians.items() if other != key])
    return dict(rank=figures[key].get('rank'), node=figures[key].get('node'), median_s=medians[key],
                others_median_s=_stragglers.significant(others),
                above=_stragglers.significant(medians[key] / others - 1.0, 4) if others else None, basis=field)


def rank_stragglers(figures, limit=_stragglers.DEFAULT_THRESHOLD):
    """The judgment over ``figures`` (:func:`rank_figures`): ``{'basis', 'threshold', 'compared' (how many ranks have
    a figure of the basis), 'slowest', 'ranks'}``. ``slowest`` is the rank with the highest median (the lowest rank of
    a tie) as ``{'rank', 'node', 'median_s', 'others_median_s', 'above', 'basis'}``, None with fewer than two ranks
    compared; ``ranks`` lists (by rank) every rank whose median is more than ``limit`` above the median of the other
    ranks' medians, in the same form. An others' median of 0 names no straggler."""
    field = basis(figures)
    result = dict(basis=field, threshold=limit, compared=0, slowest=None, ranks=[])
    if field is None:
        return result
    medians = dict((key, figure.get(field)) for key, figure in figures.items() if isinstance(figure, dict))
    medians = dict((key, value) for key, value in medians.items() if value is not None)
    result['compared'] = len(medians)
    if len(medians) < 2:
        return result
    order = sorted(medians, key=lambda key: (_stragglers.whole(figures[key].get('rank')) is None, figures[key].get('rank'), key))
    slowest = max(order, key=lambda key: medians[key])
    result['slowest'] = _entry(slowest, figures, medians, field)
    for key in order:
        entry = _entry(key, figures, medians, field)
        if entry['above'] is not None and medians[key] > entry['others_median_s'] * (1.0 + limit):
            result['ranks'].append(entry)
    return result


def _who(entry):
    return 'rank %s on %s' % (entry['rank'], entry['node'] or 'an unknown node')


def _words(entry):
    """``compute time 0.031 s, 200% above the other ranks' median 0.0103 s``."""
    above = 'n/a' if entry['above'] is None else _stragglers.percent(entry['above'])
    return '%s %s s, %s above the other ranks\' median %s s' % (
        _stragglers.WORDS.get(entry['basis'], entry['basis']), _stragglers.short(entry['median_s']), above,
        _stragglers.short(entry['others_median_s']))


def summary_line(found):
    """The summary's ``slow rank`` line for :func:`rank_stragglers`: the straggler ranks (the first MAX_NAMED), else
    ``none`` with the slowest rank, else ``n/a`` (why)."""
    if found['basis'] is None:
        return 'n/a (no step_time_s or compute_time_s in the metrics)'
    if found['slowest'] is None:
        return 'n/a (%s of one rank only)' % _stragglers.WORDS[found['basis']]
    threshold = _stragglers.percent(found['threshold'])
    if not found['ranks']:
        return 'none (threshold %s; slowest: %s, %s)' % (threshold, _who(found['slowest']), _words(found['slowest']))
    named = sorted(found['ranks'], key=lambda entry: (-entry['median_s'], entry['rank']))
    line = '; '.join('%s: %s' % (_who(entry), _words(entry)) for entry in named[:MAX_NAMED])
    if len(named) > MAX_NAMED:
        line += '; %d more (manifest.json summary.rank_stragglers)' % (len(named) - MAX_NAMED)
    return line + ' (threshold %s)' % threshold
