# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The experiment's summary: the steady-state numbers of every rank, the stragglers, and the table summary.txt
shows (module_utils/_experiment.py writes it)."""

from __future__ import annotations

import math

from ansible_collections.trainops.multinode.plugins.module_utils import _rank_stragglers, _stragglers, _world_change
from ansible_collections.trainops.multinode.plugins.module_utils._experiment_metrics import (
    MAX_WORLD_SIZE, _mean, _number, job_world_size)

# How many of a rank's most recent records make up its steady-state window
# (throughput and step time are averaged over it, so warm-up steps do not count).
STEADY_STATE_WINDOW = 5


# ---------------------------------------------------------------------------
# state=reported: the summary
# ---------------------------------------------------------------------------

def _empty_summary(metrics):
    return dict(
        metrics_found=False,
        metrics_files=metrics['files'],
        bad_lines=metrics['bad_lines'],
        truncated_files=metrics['truncated_files'],
        world_size=None,
        ranks_seen=[],
        missing_ranks=[],
        records_per_rank={},
        duplicate_ranks=metrics.get('duplicate_ranks') or {},
        nodes=[],
        hosts=[],
        steps=None,
        first_step=None,
        first_loss=None,
        final_loss=None,
        loss_decreased=False,
        throughput_samples_per_s=None,
        mean_step_time_s=None,
        tflops_total=None,
        node_step_times={},
        stragglers=_stragglers.stragglers({}, metrics.get('straggler_threshold', _stragglers.DEFAULT_THRESHOLD)),
    )


def _loss_at_step(by_rank, step):
    """Mean loss over the ranks that logged ``global_step == step`` (a rank's last such record)."""
    losses = []
    for records in by_rank.values():
        value = None
        found = False
        for record in records:
            if _stragglers.whole(record.get('global_step')) == step:
                found = True
                value = _number(record.get('loss'))
        if found and value is not None:
            losses.append(value)
    return _mean(losses)


def _round(value, digits=6):
    return None if value is None else round(value, digits)


def _significant(value, digits=6):
    """``value`` rounded to ``digits`` significant digits (a CPU run's TFLOP/s is tiny: decimals would lose it)."""
    return float('{0:.{1}g}'.format(value, digits))


def summarize(metrics, straggler_threshold=_stragglers.DEFAULT_THRESHOLD):
    """Compute the experiment summary from :func:`read_metrics` output.

    - ``world_size``: the job's own (read_metrics' ``world_size``, from the manifest); without it the largest
      ``world_size`` a record reports (the number of distinct ranks seen when no record carries it).
    - ``steps``: the largest ``global_step``; ``first_step`` the smallest.
    - ``first_loss`` / ``final_loss``: the mean ``loss`` over all ranks that logged a record at the
      smallest / largest ``global_step`` (null, NaN and infinite losses are left out).
    - ``throughput_samples_per_s``: the sum over ranks of each rank's mean ``samples_per_s`` over its
      last (up to) ``STEADY_STATE_WINDOW`` records.
    - ``mean_step_time_s``: the mean over ranks of each rank's mean ``step_time_s`` over the same window.
    - ``tflops_total``: the sum over ranks of each rank's most recent non-null ``tflops`` (6 significant digits);
      None when no rank reports any.
    - ``nodes``: the logical nodes whose ``outputs/<node>/`` held metrics (two nodes on one host are two);
      ``hosts``: the distinct host names the ranks report (each rank's first); ``duplicate_ranks``: ranks more than
      one node reported.
    - ``node_step_times``: per node, the median and p90 of ``step_time_s`` (and of ``compute_time_s``, where the
      records carry it) over its ranks' records of the same window (_stragglers.node_figure); ``stragglers``: the
      nodes more than ``straggler_threshold`` above the other nodes' median (_stragglers.stragglers).
    """
    by_rank = metrics['by_rank']
    metrics = dict(metrics, straggler_threshold=straggler_threshold)
    if not by_rank:
        # a script that writes no metrics of ours: the job's own world size (the manifest's, torchrun's nnodes x nproc)
        return dict(_empty_summary(metrics), world_size=metrics.get('world_size'))

    summary = _empty_summary(metrics)
    summary['metrics_found'] = True

    ranks = sorted(by_rank)
    summary['ranks_seen'] = ranks
    summary['records_per_rank'] = dict((str(rank), len(by_rank[rank])) for rank in ranks)

    # the job's own world size; without it the largest a record claims (read_metrics kept only claims up to
    # MAX_WORLD_SIZE), else the ranks seen
    world_size = metrics.get('world_size')
    if not world_size:
        world_sizes = [_stragglers.whole(r.get('world_size')) for records in by_rank.values() for r in records]
        world_sizes = [w for w in world_sizes if w is not None and 0 < w <= MAX_WORLD_SIZE]
        world_size = max(world_sizes) if world_sizes else len(ranks)
    summary['world_size'] = world_size
    summary['missing_ranks'] = sorted(set(range(world_size)) - set(ranks))

    # the logical nodes are the experiment's outputs/<node>/ directories that held metrics (two on one host count
    # two); the hosts are the host names the ranks report (a rank's first: one host a rank at most)
    summary['nodes'] = sorted(set(metrics.get('rank_nodes', {}).values()))
    summary['hosts'] = sorted(set(next((r['node'] for r in records if r.get('node')), None)
                                  for records in by_rank.values()) - {None})

    steps = [_stragglers.whole(r.get('global_step')) for records in by_rank.values() for r in records]
    steps = [s for s in steps if s is not None]
    if steps:
        first_step, last_step = min(steps), max(steps)
        summary['first_step'] = first_step
        summary['steps'] = last_step
        first_loss = _loss_at_step(by_rank, first_step)
        final_loss = _loss_at_step(by_rank, last_step)
        summary['first_loss'] = _round(first_loss)
        summary['final_loss'] = _round(final_loss)
        summary['loss_decreased'] = bool(
            last_step > first_step and first_loss is not None and final_loss is not None and final_loss < first_loss
        )

    throughputs = []
    step_times = []
    tflops = []
    for rank in ranks:
        window = by_rank[rank][-STEADY_STATE_WINDOW:]
        rank_throughput = _mean([_number(r.get('samples_per_s')) for r in window])
        if rank_throughput is not None:
            throughputs.append(rank_throughput)
        rank_step_time = _mean([_number(r.get('step_time_s')) for r in window])
        if rank_step_time is not None:
            step_times.append(rank_step_time)
        for record in reversed(by_rank[rank]):
            value = _number(record.get('tflops'))
            if value is not None:
                tflops.append(value)
                break

    summary['throughput_samples_per_s'] = _round(sum(throughputs), 3) if throughputs else None
    summary['mean_step_time_s'] = _round(_mean(step_times))
    summary['tflops_total'] = _significant(sum(tflops)) if tflops else None

    by_node = {}
    for rank in ranks:
        by_node.setdefault(metrics.get('rank_nodes', {}).get(rank), {})[rank] = by_rank[rank]
    by_node.pop(None, None)
    summary['node_step_times'] = _stragglers.node_figures(by_node, STEADY_STATE_WINDOW)
    summary['stragglers'] = _stragglers.stragglers(summary['node_step_times'], straggler_threshold)
    summary.update(_per_rank(by_rank, metrics.get('rank_nodes', {}), straggler_threshold))
    return summary


def _per_rank(by_rank, rank_nodes, straggler_threshold):
    """The summary's per-rank step times and stragglers (module_utils/_rank_stragglers.py) and what changed when the
    run resumed on another world size (module_utils/_world_change.py)."""
    figures = _rank_stragglers.rank_figures(by_rank, rank_nodes, STEADY_STATE_WINDOW)
    return dict(rank_step_times=figures, rank_stragglers=_rank_stragglers.rank_stragglers(figures, straggler_threshold),
                world_change=_world_change.world_change(by_rank))


def _fmt(value, fmt):
    if value is None:
        return 'n/a'
    return fmt.format(value)


_FLOPS_UNITS = ((1.0, 'TFLOP/s'), (1e-3, 'GFLOP/s'), (1e-6, 'MFLOP/s'))


def format_flops(tflops):
    """A TFLOP/s figure, readable at any size: 3 significant digits in the largest unit (TFLOP/s, GFLOP/s,
    MFLOP/s) in which it is at least 1, so a CPU run's 0.00042 TFLOP/s reads ``420 MFLOP/s``; ``n/a`` for None."""
    if tflops is None:
        return 'n/a'
    for scale, unit in _FLOPS_UNITS:
        if abs(tflops) >= scale:
            break
    if tflops == 0:
        scale, unit = 1.0, 'TFLOP/s'
    return '{0} {1}'.format(_three_digits(tflops / scale), unit)


def _three_digits(value):
    """3 significant digits without an exponent: 123, 12.3, 1.23, 0.123."""
    if value == 0:
        return '0'
    digits = max(0, 2 - int(math.floor(math.log10(abs(value)))))
    return '{0:.{1}f}'.format(round(value, digits), digits)


def _nodes(summary):
    """``2`` (logical nodes), ``2 on 1 host`` when fewer hosts than nodes reported, ``n/a`` without metrics."""
    nodes, hosts = summary.get('nodes') or [], summary.get('hosts') or []
    if not nodes:
        return 'n/a'
    if hosts and len(hosts) != len(nodes):
        return '{0} on {1} host{2}'.format(len(nodes), len(hosts), '' if len(hosts) == 1 else 's')
    return str(len(nodes))


def torchrun_rows(table, manifest, results):
    """The summary's ``world size`` and ``ranks`` lines from torchrun's own facts, for a job without metrics of ours:
    nnodes x nproc (the manifest's ``nnodes`` and ``nodes``), and the ranks of each node whose torchrun ran
    (``results``, node -> the torchrun module's ``job``: it has an exit code or still runs) with its exit code."""
    manifest = manifest if isinstance(manifest, dict) else {}
    nodes = [n for n in manifest.get('nodes') or [] if isinstance(n, dict) and isinstance(n.get('host'), str)]
    world_size = job_world_size(manifest)
    if not nodes or world_size is None:
        return table
    per_node = set(len(n.get('ranks') or []) for n in nodes)
    nproc = ('%d rank%s' % (min(per_node), '' if min(per_node) == 1 else 's') if len(per_node) == 1
             else 'per node ' + ', '.join('%s %d' % (n['host'], len(n.get('ranks') or [])) for n in nodes))
    world = '{0} (torchrun: {1} nodes x {2})'.format(world_size, len(nodes), nproc)
    ran, parts = 0, []
    for node in nodes:
        job = (results or {}).get(node['host']) or {}
        ranks = ','.join(str(r) for r in node.get('ranks') or [])
        if job.get('exit_code') is not None or job.get('status') == 'running':
            ran += len(node.get('ranks') or [])
            end = 'running' if job.get('exit_code') is None else 'exit %s' % job['exit_code']
            parts.append('%s: %s %s' % (node['host'], ranks, end))
        else:
            parts.append('%s: %s did not run' % (node['host'], ranks))
    rows = {'world size': world, 'nodes': str(len(nodes)),
            'ranks': '{0} ran ({1}); no metrics of ours'.format(ran, '; '.join(parts))}
    return ['{0} : {1}'.format(line.split(' : ', 1)[0], rows[line.split(' : ', 1)[0].strip()])
            if ' : ' in line and line.split(' : ', 1)[0].strip() in rows else line for line in table]


def summary_table(summary):
    """Render the summary as a list of aligned ``label : value`` lines."""
    if summary.get('metrics_found'):
        seen = len(summary['ranks_seen'])
        missing = summary['missing_ranks']
        ranks = '{0}/{1}'.format(seen, summary['world_size'])
        if missing:
            ranks += ' (missing: {0})'.format(', '.join(str(r) for r in missing))
        for rank, nodes in sorted((summary.get('duplicate_ranks') or {}).items(), key=lambda item: int(item[0])):
            ranks += ' (rank {0} reported by {1}: {2}\'s kept)'.format(rank, ', '.join(nodes), nodes[0])
        if summary['first_loss'] is None and summary['final_loss'] is None:
            loss = 'n/a'
        else:
            loss = '{0} -> {1}'.format(_fmt(summary['first_loss'], '{0:.4f}'), _fmt(summary['final_loss'], '{0:.4f}'))
            loss += ' (decreased)' if summary['loss_decreased'] else ' (not decreased)'
    else:
        ranks = 'none (no metrics found)'
        loss = 'n/a'
    rows = [
        ('world size', _fmt(summary.get('world_size'), '{0}')),
        ('ranks', ranks),
        ('nodes', _nodes(summary)),
        ('steps', _fmt(summary.get('steps'), '{0}')),
        ('loss', loss),
        ('throughput', _fmt(summary.get('throughput_samples_per_s'), '{0:.1f} samples/s')),
        ('step time', _fmt(summary.get('mean_step_time_s'), '{0:.4f} s')),
        ('node step', _stragglers.figures_line(summary.get('node_step_times')) or 'n/a'),
    ]
    if summary.get('stragglers'):
        rows.append(('straggler', _stragglers.summary_line(summary['stragglers'])))
    rows += _per_rank_rows(summary)
    rows.append(
        ('compute', format_flops(summary.get('tflops_total')) + (' total' if summary.get('tflops_total') is not None else '')))
    width = max(len(label) for label, dummy in rows)
    return ['{0} : {1}'.format(label.ljust(width), value) for label, value in rows]


def _per_rank_rows(summary):
    """The ``slow rank`` and ``resized`` lines, where the summary has them (:func:`_per_rank`)."""
    rows = []
    if summary.get('rank_stragglers'):
        rows.append(('slow rank', _rank_stragglers.summary_line(summary['rank_stragglers'])))
    if summary.get('world_change'):
        rows.append(('resized', _world_change.summary_line(summary['world_change'])))
    return rows
