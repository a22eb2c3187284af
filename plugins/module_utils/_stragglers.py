# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Stragglers: each node's step time from its ranks' metrics records, and the node that is slower than the others.

A node's figures are the median and the 90th percentile over its ranks' step records: each rank's last ``window``
records (the steady-state window of the experiment's summary), pooled. Two fields of a record count
(docs/failures.md, "Stragglers"):

- ``step_time_s``: a step's wall time. In a synchronous job (DDP) every rank waits for the slowest in the gradient
  all-reduce, so it is about the same on every node and names no straggler by itself;
- ``compute_time_s`` (optional): the rank's own time per step, without the time it waits for other ranks
  (files/workspace/train.py: the forward pass, the backward pass up to its last gradient bucket, the optimizer step).
  It differs between nodes when one is slow.

The flag compares ``compute_time_s`` when every node that has figures has it, else ``step_time_s`` (the basis). A
node is a straggler when its median is more than ``threshold`` (0.15: 15 %) above the median of the OTHER nodes'
medians; one node alone is never one, of two nodes only the slower can be.

Used by the experiment summary (``_experiment_summary.summarize``: the manifest and summary.txt), by the torchrun module's
query (``recent_figure``: a node's figure from the tail of its metrics files while the job runs) and by the action
``torchrun_wait`` (``stragglers``: the progress line of a node that is one). ``threshold_problem`` is the one rule for
``trainops_straggler_threshold`` (launch_problems, the wait, the experiment module). Per rank: module_utils/
_rank_stragglers.py.
"""

from __future__ import annotations

import math

METRICS_GLOB = 'rank_*_metrics.jsonl'
"""The metrics files of a node's ranks in its output directory (TRAINOPS_OUTPUT_DIR): the summary reads them as the
collect fetched them, the torchrun module's query their tails while the job runs."""

DEFAULT_THRESHOLD = 0.15
MAX_THRESHOLD = 10.0
BASES = ('compute_time_s', 'step_time_s')
"""The record fields a node's figures are taken from, the one the flag prefers first."""

WORDS = {'compute_time_s': 'compute time', 'step_time_s': 'step time'}


def seconds(value):
    """``value`` as a finite number of seconds >= 0, or None (null, NaN, inf, negative, strings, booleans)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    if math.isnan(value) or math.isinf(value) or value < 0:
        return None
    return value


def whole(value):
    """``value`` from a rank's records as a whole number (a rank, a step): an int, or a float without a fraction;
    None for anything else (null, booleans, strings, 2.5). The rule the seconds above follow for times."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def percentile(values, q):
    """The ``q``-th percentile (0-100) of ``values``, linearly interpolated between the closest ranks (numpy's
    default); None for no values."""
    values = sorted(values)
    if not values:
        return None
    position = (len(values) - 1) * q / 100.0
    low = int(math.floor(position))
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)


def median(values):
    return percentile(values, 50)


def significant(value, digits=6):
    return None if value is None else float('{0:.{1}g}'.format(value, digits))


def threshold_problem(value, name='trainops_straggler_threshold'):
    """A line when ``value`` is no number above 0 and at most MAX_THRESHOLD (a string that reads as one, as ``-e``
    gives it, is one), else None."""
    number = None
    if not isinstance(value, bool):
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = None
    if number is not None and not math.isnan(number) and 0 < number <= MAX_THRESHOLD:
        return None
    example = ('-e %s=0.15' if name.startswith('trainops_') else '%s: 0.15') % name
    return ('%s=%s: how far (a fraction) a node\'s step time may lie above the other nodes\' median before the node is '
            'named a straggler must be a number above 0 and at most %g (e.g. %s for 15 %%)'
            % (name, value, MAX_THRESHOLD, example))


def threshold(value):
    """``value`` as the threshold (a float), DEFAULT_THRESHOLD when it does not pass ``threshold_problem``."""
    return DEFAULT_THRESHOLD if value is None or threshold_problem(value) else float(value)


def node_figure(by_rank, window):
    """One node's figures from its ranks' records (``{rank: [record, ...]}`` in file order): each rank's last
    ``window`` records pooled; for each of BASES that some of them carry, ``{'median': s, 'p90': s}``, else None.
    Returns ``{'ranks', 'records', 'step_time_s', 'compute_time_s'}``, or None when no record has either field."""
    pooled = dict((field, []) for field in BASES)
    ranks = 0
    records = 0
    for rank_records in (by_rank or {}).values():
        counted = False
        for record in list(rank_records or [])[-window:] if window > 0 else []:
            if not isinstance(record, dict):
                continue
            found = False
            for field in BASES:
                value = seconds(record.get(field))
                if value is not None:
                    pooled[field].append(value)
                    found = True
            records += found
            counted = counted or found
        ranks += counted
    if not records:
        return None
    figure = dict(ranks=ranks, records=records)
    for field in BASES:
        values = pooled[field]
        figure[field] = (dict(median=significant(median(values)), p90=significant(percentile(values, 90)))
                         if values else None)
    return figure


def node_figures(by_node, window):
    """``{node: node_figure(by_rank, window)}`` for ``by_node`` (``{node: {rank: [records]}}``), nodes without
    figures left out."""
    figures = {}
    for node, by_rank in (by_node or {}).items():
        figure = node_figure(by_rank, window)
        if figure is not None:
            figures[node] = figure
    return figures


def _median_of(figure, field):
    if not isinstance(figure, dict) or not isinstance(figure.get(field), dict):
        return None
    return seconds(figure[field].get('median'))


def basis(figures):
    """The field the flag compares: ``compute_time_s`` when every node with figures has it, else ``step_time_s`` when
    some node has that, else None."""
    nodes = [figure for figure in (figures or {}).values() if isinstance(figure, dict)]
    if nodes and all(_median_of(figure, 'compute_time_s') is not None for figure in nodes):
        return 'compute_time_s'
    if any(_median_of(figure, 'step_time_s') is not None for figure in nodes):
        return 'step_time_s'
    return None


def stragglers(figures, limit=DEFAULT_THRESHOLD):
    """The stragglers among ``figures`` (``{node: node_figure}``, a node's figure may be None: no data).

    Returns ``{'basis', 'threshold', 'compared' (the nodes that have a figure of the basis, sorted), 'nodes'}``;
    ``nodes`` lists, sorted by node, ``{'node', 'median_s', 'others_median_s', 'above'}`` for every node whose median
    is more than ``limit`` above the median of the other compared nodes' medians (``above``: how far, a fraction,
    4 significant digits). Fewer than two compared nodes give no straggler; neither does an others' median of 0.
    """
    field = basis(figures)
    result = dict(basis=field, threshold=limit, compared=[], nodes=[])
    if field is None:
        return result
    medians = dict((node, _median_of(figure, field)) for node, figure in figures.items())
    medians = dict((node, value) for node, value in medians.items() if value is not None)
    result['compared'] = sorted(medians)
    if len(medians) < 2:
        return result
    for node in sorted(medians):
        others = median([value for other, value in medians.items() if other != node])
        if others and medians[node] > others * (1.0 + limit):
            result['nodes'].append(dict(node=node, median_s=medians[node], others_median_s=significant(others),
                                        above=significant(medians[node] / others - 1.0, 4)))
    return result


def straggler_words(straggler, field, limit):
    """``compute time 0.031 s, 140% above the other nodes' median 0.0129 s (threshold 15%)``."""
    return '%s %s s, %s above the other nodes\' median %s s (threshold %s)' % (
        WORDS.get(field, field), short(straggler['median_s']), percent(straggler['above']),
        short(straggler['others_median_s']), percent(limit))


def straggler_line(straggler, field, limit):
    """``node1: compute time 0.031 s, 140% above the other nodes' median 0.0129 s (threshold 15%)``."""
    return '%s: %s' % (straggler['node'], straggler_words(straggler, field, limit))


def summary_line(found):
    """The summary's straggler line for ``stragglers(...)``: the stragglers, ``none`` (with what was compared) or
    ``n/a`` (why)."""
    if found['basis'] is None:
        return 'n/a (no step_time_s or compute_time_s in the metrics)'
    if len(found['compared']) < 2:
        return 'n/a (%s of one node only)' % WORDS[found['basis']]
    if not found['nodes']:
        return 'none (no node\'s %s is more than %s above the other nodes\' median)' % (
            WORDS[found['basis']], percent(found['threshold']))
    return '; '.join(straggler_line(node, found['basis'], found['threshold']) for node in found['nodes'])


def figures_line(figures):
    """``node0 0.0251 s (p90 0.0262; compute 0.0041 s, p90 0.0044), node1 ...``: each node's step time, and its compute
    time where it has one; None when no node has either."""
    parts = []
    for node in sorted(figures or {}):
        figure = figures[node] if isinstance(figures[node], dict) else {}
        step, compute = figure.get('step_time_s'), figure.get('compute_time_s')
        text = '%s s (p90 %s' % (short(step['median']), short(step['p90'])) if step else 'n/a (no step time'
        if compute:
            text += '; compute %s s, p90 %s' % (short(compute['median']), short(compute['p90']))
        if step or compute:
            parts.append('%s %s)' % (node, text))
    return ', '.join(parts) or None


def short(value):
    """4 significant digits: 0.01234, 1.234, 123.4."""
    return 'n/a' if value is None else '{0:.4g}'.format(value)


def percent(fraction):
    return '{0:.0f}%'.format(fraction * 100.0)
