# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Experiment directories and their metrics summaries (logic behind ``trainops.multinode.experiment``)."""

from __future__ import annotations

import calendar
import errno
import glob
import json
import math
import os
import re
import time

from ansible_collections.trainops.multinode.plugins.module_utils._files import FOLLOW_UMASK, write_text_atomic
from ansible_collections.trainops.multinode.plugins.module_utils._outcomes import (
    CAUSING_STOPS, INTERRUPTED, RUNNING, STATUS_LOST, OutcomeError, decisive_outcome, stop_outcome, stop_words)
from ansible_collections.trainops.multinode.plugins.module_utils import _launchers, _node_files, _rank_logs, _retries, _stacks, _stragglers
from ansible_collections.trainops.multinode.plugins.module_utils import _rank_stragglers, _world_change


LOG_DIR = 'logs'
OUTPUT_DIR = 'outputs'
MANIFEST_FILE = 'manifest.json'
SUMMARY_FILE = 'summary.txt'
METRICS_GLOB = _stragglers.METRICS_GLOB

# How many of a rank's most recent records make up its steady-state window
# (throughput and step time are averaged over it, so warm-up steps do not count).
STEADY_STATE_WINDOW = 5

# Upper bound on ``name_2``, ``name_3``, ... attempts before giving up.
MAX_NAME_ATTEMPTS = 10000

_RANK_FROM_FILE = re.compile(r'^rank_(\d+)_metrics\.jsonl$')


class ExperimentError(Exception):
    """Raised for conditions the module reports with ``fail_json``."""


# ---------------------------------------------------------------------------
# state=created
# ---------------------------------------------------------------------------

def _check_leaf_name(name):
    if not name or name in ('.', '..') or os.sep in name or (os.altsep and os.altsep in name) or '\0' in name:
        raise ExperimentError('name must be a single, non-empty path component, got {0!r}'.format(name))


def _candidates(name):
    yield name
    for index in range(2, MAX_NAME_ATTEMPTS + 1):
        yield '{0}_{1}'.format(name, index)


def create_experiment_dir(root, name, check_mode=False):
    """Create ``root/name`` exclusively (or ``name_2``, ``name_3``, ... when taken).

    An existing directory is never reused: the leaf is created with ``os.mkdir``, which fails
    atomically when anything already exists at that path, and the next suffix is tried.
    ``logs/`` and ``outputs/`` are created inside it.

    In check mode nothing is created; the first name that does not exist yet is returned.

    Returns a dict with ``path``, ``name``, ``logs_dir`` and ``outputs_dir``.
    """
    _check_leaf_name(name)
    root = os.path.abspath(root)
    if os.path.exists(root) and not os.path.isdir(root):
        raise ExperimentError('root {0} exists and is not a directory'.format(root))

    chosen = None
    if check_mode:
        for candidate in _candidates(name):
            if not os.path.lexists(os.path.join(root, candidate)):
                chosen = candidate
                break
    else:
        try:
            os.makedirs(root, exist_ok=True)
        except OSError as exc:
            raise ExperimentError('cannot create root {0}: {1}'.format(root, exc))
        for candidate in _candidates(name):
            try:
                os.mkdir(os.path.join(root, candidate))
            except OSError as exc:
                if exc.errno == errno.EEXIST:
                    continue
                raise ExperimentError('cannot create {0}: {1}'.format(os.path.join(root, candidate), exc))
            chosen = candidate
            break

    if chosen is None:
        raise ExperimentError('no free experiment name under {0} for {1} after {2} attempts'.format(root, name, MAX_NAME_ATTEMPTS))

    path = os.path.join(root, chosen)
    result = dict(
        path=path,
        name=chosen,
        logs_dir=os.path.join(path, LOG_DIR),
        outputs_dir=os.path.join(path, OUTPUT_DIR),
    )
    if not check_mode:
        for sub in (result['logs_dir'], result['outputs_dir']):
            try:
                os.mkdir(sub)
            except OSError as exc:
                raise ExperimentError('cannot create {0}: {1}'.format(sub, exc))
    return result


# ---------------------------------------------------------------------------
# state=reported: reading metrics
# ---------------------------------------------------------------------------

def _number(value):
    """Return ``value`` as a finite float, or None (null, NaN, inf, strings, booleans)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    if math.isnan(value) or math.isinf(value):
        return None
    return value


def _mean(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return sum(values) / len(values)


def read_metrics_file(filename, node=None, name=None):
    """Parse one JSON-lines metrics file within the bounds of _node_files.read_jsonl (the one rule for what a job
    writes): ``dict(records, refused, bad_lines, truncated)``. A last line that does not parse is a record that was
    being written when the file was read (``truncated``) and is skipped; any other line that is not a JSON object, or
    breaks a bound, is refused (``refused`` names the node, the file and the line) and counted in ``bad_lines``."""
    return _node_files.read_jsonl(filename, node=node, name=name or os.path.basename(filename))


def node_output_dirs(path):
    """The per-node directories of ``path/outputs`` (``outputs/<node>/``, one per logical node): ``[(node, dir)]``,
    sorted by node. Anything else there (a file, a symbolic link) is not a node's and is left out."""
    outputs = os.path.join(path, OUTPUT_DIR)
    try:
        names = sorted(os.listdir(outputs))
    except OSError:
        return []
    found = []
    for name in names:
        node_dir = os.path.join(outputs, name)
        if not os.path.islink(node_dir) and os.path.isdir(node_dir):
            found.append((name, node_dir))
    return found


MAX_WORLD_SIZE = 65536
"""The most ranks a record may claim when the job's own world size is not known (no manifest says it)."""


def job_world_size(manifest):
    """The job's own world size, as the launch wrote it in the manifest (``world_size``: nodes x ranks per node), or
    None when the manifest does not say it."""
    value = (manifest or {}).get('world_size') if isinstance(manifest, dict) else None
    if isinstance(value, str) and value.isdigit() and len(value) < 10:
        value = int(value)
    value = _stragglers.whole(value)
    return value if value is not None and 0 < value <= _node_files.MAX_MAGNITUDE else None


def _record_rank(record, file_rank, world_size, refused):
    """The rank of one record when it and its ``world_size`` fit the job's (``world_size``: the job's own, or None);
    else None, counted in ``refused`` (``{field: [records, the first one's reason]}``). What a record claims never
    sizes anything."""
    limit = world_size or MAX_WORLD_SIZE
    why = None
    claimed = record.get('world_size')
    rank = _stragglers.whole(record.get('rank'))
    if rank is None:
        rank = file_rank
    if claimed is not None:
        claimed = _stragglers.whole(claimed)
        if world_size is not None and claimed != world_size:
            why = 'world_size', 'world_size %s is not the job\'s %d' % ('n/a' if claimed is None else claimed, world_size)
        elif claimed is None or not 0 < claimed <= limit:
            why = 'world_size', 'world_size %s is not a number of ranks from 1 to %d' % (
                'n/a' if claimed is None else claimed, limit)
    if why is None and (rank is None or not 0 <= rank < limit):
        why = 'rank', 'rank %s is not one of the job\'s %d ranks' % ('n/a' if rank is None else rank, limit)
    if why is None:
        return rank
    counted = refused.setdefault(why[0], [0, why[1]])
    counted[0] += 1
    return None


MAX_RECORDS = 1000000
"""Metrics records read from all the experiment's files together (each file's own bounds: module_utils/_node_files)."""

SUMMARY_FIELDS = ('rank', 'world_size', 'node', 'global_step', 'loss', 'samples_per_s', 'step_time_s', 'compute_time_s',
                  'tflops', 'previous_world_size', 'accumulation_steps', 'global_batch', 'global_batch_kept')
"""What the summary takes from a metrics record; the rest is not kept in memory."""

MAX_HOST_NAME = 255


def _kept(record):
    """The fields of a metrics record the summary uses; a ``node`` that is no host name (not a string of at most
    MAX_HOST_NAME characters) is left out."""
    kept = dict((field, record[field]) for field in SUMMARY_FIELDS if field in record)
    node = kept.get('node')
    if node is not None and not (isinstance(node, str) and len(node) <= MAX_HOST_NAME):
        del kept['node']
    return kept


def read_metrics(path, world_size=None):
    """Read every node's ``path/outputs/<node>/rank_*_metrics.jsonl`` (module_utils/_node_files.py's bounds).

    Returns a dict with ``by_rank`` (rank -> list of records in file order), ``rank_nodes`` (rank -> the node whose
    files gave its records), ``files`` (``<node>/<file name>``, sorted), ``bad_lines``, ``truncated_files``,
    ``duplicate_ranks`` (rank -> every node that reported it, when more than one did: the first node's records are
    kept, the others' are not merged into them), ``world_size`` (the job's own, as given) and ``refused`` (lines naming
    the node and the file of what was not read). A record's rank is its ``rank`` field, or the number in its file name
    when the field is missing; a record whose rank is not one of the job's ``world_size`` ranks, or whose
    ``world_size`` is not the job's, is refused (without the job's world size: above MAX_WORLD_SIZE).
    """
    by_rank = {}
    rank_nodes = {}
    duplicates = {}
    files = []
    bad_lines = 0
    truncated_files = []
    refused_lines = []
    read = 0
    for node, node_dir in node_output_dirs(path):
        node_ranks = {}
        for filename in sorted(glob.glob(os.path.join(glob.escape(node_dir), METRICS_GLOB))):
            if os.path.islink(filename):
                continue
            shown = '{0}/{1}'.format(node, os.path.basename(filename))
            files.append(shown)
            match = _RANK_FROM_FILE.match(os.path.basename(filename))
            file_rank = int(match.group(1)) if match and len(match.group(1)) < 10 else None
            if read >= MAX_RECORDS:
                refused_lines.append(_node_files.refusal(node, os.path.basename(filename), 'not read: the experiment\'s '
                                                         'files held %d metrics records before it' % read))
                continue
            found = read_metrics_file(filename, node)
            read += len(found['records'])
            bad_lines += found['bad_lines']
            refused_lines += found['refused']
            if found['truncated']:
                truncated_files.append(shown)
            refused = {}
            for record in found['records']:
                rank = _record_rank(record, file_rank, world_size, refused)
                if rank is None:
                    continue
                node_ranks.setdefault(rank, []).append(_kept(record))
            for _field, (count, why) in sorted(refused.items()):
                bad_lines += count
                refused_lines.append(_node_files.refusal(node, os.path.basename(filename), '%d record(s), the first: %s'
                                                         % (count, why)))
        for rank, records in node_ranks.items():
            if rank in rank_nodes:
                duplicates.setdefault(rank, [rank_nodes[rank]]).append(node)
                continue
            rank_nodes[rank] = node
            by_rank[rank] = records
    return dict(
        by_rank=by_rank,
        rank_nodes=rank_nodes,
        files=files,
        bad_lines=bad_lines,
        truncated_files=truncated_files,
        duplicate_ranks=dict((str(rank), nodes) for rank, nodes in sorted(duplicates.items())),
        world_size=world_size,
        refused=refused_lines,
    )


def rank_zero_output(path, name):
    """``path/outputs/<node>/<name>`` of the node that ran global rank 0 (files a job writes once, such as the
    all-reduce benchmark's ``allreduce.json``), or None when it has none.

    The node is the one the manifest's ``nodes`` gives rank 0 (``host``, ``ranks``); without a manifest saying so,
    the only node whose directory holds ``name``.
    """
    manifest_path = os.path.join(path, MANIFEST_FILE)
    try:
        with open(manifest_path) as handle:
            nodes = json.load(handle).get('nodes') or []
    except (OSError, ValueError, AttributeError):
        nodes = []
    owners = [n.get('host') for n in nodes if isinstance(n, dict) and 0 in (n.get('ranks') or [])]
    if not owners:
        owners = [node for node, node_dir in node_output_dirs(path) if os.path.isfile(os.path.join(node_dir, name))]
    if len(owners) != 1 or not isinstance(owners[0], str):
        return None
    candidate = os.path.join(path, OUTPUT_DIR, owners[0], name)
    return candidate if os.path.isfile(candidate) and not os.path.islink(candidate) else None


def read_rank_zero_json(path, name):
    """``(value, refused)``: :func:`rank_zero_output` ``name`` of the experiment at ``path`` (a JSON object, such as
    ``allreduce.json``) read within bounds (module_utils/_node_files.py; None when there is none or it is refused),
    and the lines naming the node and the file of what was refused."""
    found = rank_zero_output(path, name)
    if found is None:
        return None, []
    return _node_files.read_json_object(found, os.path.basename(os.path.dirname(found)), name)


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


# ---------------------------------------------------------------------------
# state=reported: writing
# ---------------------------------------------------------------------------

def _read_text(filename):
    try:
        with open(filename, 'rb') as fd:
            return fd.read().decode('utf-8')
    except (IOError, OSError, UnicodeDecodeError):
        return None


def _write_atomic(filename, text):
    """The experiment's files are the user's to share: their mode follows the umask, as ``open()``'s would."""
    write_text_atomic(filename, text, mode=FOLLOW_UMASK)


def render_manifest(manifest, summary):
    """Return the manifest file text: ``manifest`` plus ``summary``, sorted keys, indent 2."""
    content = dict(manifest or {})
    content['summary'] = summary
    return json.dumps(content, sort_keys=True, indent=2, default=str) + '\n'


def _ended_epoch(job):
    """When a node's job ended, in seconds since the epoch (None when unknown)."""
    value = job.get('ended_at_epoch')
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text = job.get('ended_at')
    if text:
        try:
            return calendar.timegm(time.strptime(str(text), '%Y-%m-%dT%H:%M:%SZ'))
        except ValueError:
            return None
    return None


STOP_SLACK_S = 2.0
"""A node's failure that ended less than this before the first stop request counts as caused by the stop
(the nodes' clocks differ a little; a collective breaks on the peers as soon as one node is stopped)."""


def _stop_epoch(job):
    value = (job.get('stop') or {}).get('requested_at_epoch')
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _first_stop(jobs):
    """The earliest stop record that was a cause of its own (None when nobody stopped the job that way)."""
    stops = [(_stop_epoch(job), job['stop']) for job in jobs.values()
             if _stop_epoch(job) is not None and job['stop'].get('reason') in CAUSING_STOPS]
    return min(stops, key=lambda item: item[0])[1] if stops else None


def _own_failures(jobs, first_stop):
    """Nodes whose job failed on its own, before anyone stopped the job (those are candidate causes)."""
    cutoff = None if first_stop is None else float(first_stop['requested_at_epoch']) - STOP_SLACK_S
    own = []
    for node, job in sorted(jobs.items()):
        if job.get('exit_code') == 0 or job.get('stop'):
            continue
        ended = _ended_epoch(job)
        if cutoff is None or ended is None or ended < cutoff:
            own.append(node)
    return own


def _first_ended(nodes, jobs):
    """Of ``nodes``, the one(s) whose job ended first (all of them when no end time is known)."""
    ends = dict((node, _ended_epoch(jobs[node])) for node in nodes)
    known = [end for end in ends.values() if end is not None]
    first = min(known) if known else None
    return [node for node in nodes if ends[node] == first]


def _how_it_ended(job):
    """``node rank 1: exit code 1`` / ``node rank 1: signal SIGKILL`` / ``node rank 1: lost (reason)``."""
    rank = job.get('node_rank')
    where = 'node rank %s: ' % rank if rank is not None else ''
    if job.get('signal'):
        return where + 'signal %s' % job['signal']
    if job.get('status') == STATUS_LOST:
        return where + 'lost (%s)' % (job.get('lost_reason') or 'its supervisor is gone')
    if job.get('exit_code') is None:
        return where + 'status %s' % (job.get('status') or 'unknown')
    return where + 'exit code %s' % job['exit_code']


def _verdict_nodes(verdicts, outcome):
    """The nodes whose wait's verdict decides ``outcome`` (_outcomes.decisive_outcome: ``stalled``, ``gone``)."""
    nodes = []
    for node, verdict in sorted((verdicts or {}).items()):
        try:
            decided = decisive_outcome((verdict or {}).get('state'))
        except OutcomeError as exc:
            raise ExperimentError('verdicts: node {0}: {1}'.format(node, exc))
        if decided == outcome:
            nodes.append(node)
    return nodes


def _with_followers(line, failed_nodes, also_failed, stopped):
    if also_failed:
        line += '; then failed: ' + ', '.join(also_failed)
    if stopped:
        line += '; stopped: ' + ', '.join(stopped)
    return line


def launcher_stops(results):
    """The nodes the job's launcher ended because of another node, as stop records (e.g. a Slurm step's nodes that
    ``srun --kill-on-bad-exit`` ended when one failed; _launchers.Launcher.ended_it).

    Returns ``{node: {'reason': 'peer', 'detail', 'requested_at', 'requested_at_epoch', 'by'}}``: every node that the
    launcher says it ended (killed, or signalled without a stop request) when another node is a cause: one whose run
    failed on its own (the first to end of those), else one that was stopped for a reason of its own (stalled, by the
    user, ...; its stop made its task exit non-zero). The record is what the wait writes on a node that it stops
    because a peer failed (reason ``peer``), with the cause's end as the moment; so the nodes the launcher ended count
    as stopped, never as failures. Empty for a launcher that ends nothing itself (ssh), or when no other node is a
    cause.
    """
    jobs = dict((node, job or {}) for node, job in (results or {}).items())
    launcher = _launchers.of_results(jobs)
    ended = sorted(node for node, job in jobs.items() if launcher.ended_it(job))
    if not ended:
        return {}
    others = dict((node, job) for node, job in jobs.items() if node not in ended)
    own = [node for node, job in sorted(others.items()) if job.get('exit_code') != 0 and not job.get('stop')]
    if own:
        culprits = _first_ended(own, others)
        cause = ', '.join('%s failed (%s)' % (node, _how_it_ended(others[node])) for node in culprits)
        when = _ended_epoch(others[culprits[0]])
    else:
        first_stop = _first_stop(others)
        if first_stop is None:
            return {}
        node = next(n for n, job in sorted(others.items()) if job.get('stop') is first_stop)
        cause = '%s was stopped (%s)' % (node, first_stop.get('reason'))
        when = _ended_epoch(others[node]) or _stop_epoch(others[node])
    stops = {}
    for node in ended:
        stops[node] = {'reason': 'peer', 'detail': launcher.ended_detail(jobs[node], cause), 'by': launcher.stop_by,
                       'requested_at_epoch': when,
                       'requested_at': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(when)) if when is not None else None}
    return stops


def with_launcher_stops(results):
    """``results`` with the stop records of ``launcher_stops`` added to the nodes the launcher ended (a new dict)."""
    stops = launcher_stops(results)
    if not stops:
        return results
    return dict((node, dict(job or {}, stop=stops[node]) if node in stops else job) for node, job in results.items())


def with_time_limit_stops(results, limit, by):
    """``results`` with a stop record ``{reason: timeout, by, detail}`` for every node whose run the launcher (``by``:
    its stop_by) ended at the time limit (``limit`` from _launchers.Launcher.time_limit; a new dict), as the wait
    records for its own limit."""
    if not limit:
        return results
    stopped = {}
    for node, job in (results or {}).items():
        job = job or {}
        if job.get('exit_code') == 0 or job.get('stop'):
            stopped[node] = job
            continue
        stopped[node] = dict(job, stop={'reason': 'timeout', 'by': by, 'detail': limit['detail'],
                                        'requested_at': job.get('ended_at'), 'requested_at_epoch': _ended_epoch(job)})
    return stopped


CHECKPOINT_RECORD = 'checkpoint.json'
"""Rank 0's record of the last checkpoint it wrote (files/workspace/train.py), collected with its outputs."""


def _checkpoint_fields(record):
    """The fields of one checkpoint record that have the expected types (what the job wrote is not trusted)."""
    if not isinstance(record, dict) or _stragglers.whole(record.get('global_step')) is None:
        return None
    fields = {'global_step': _stragglers.whole(record['global_step'])}
    for key in ('reason', 'signal', 'path'):
        value = record.get(key)
        fields[key] = value if isinstance(value, str) and len(value) <= 4096 and '\n' not in value else None
    fields['epoch'] = _stragglers.whole(record.get('epoch'))
    return fields


def read_checkpoint(path):
    """The job's last checkpoint as rank 0 reported it in ``outputs/<node>/checkpoint.json``: ``{node, global_step,
    epoch, reason, signal, path (on the node), last_signal_checkpoint}``, None when there is none or it does not
    read as one."""
    found = rank_zero_output(path, CHECKPOINT_RECORD)
    record, _refused = read_rank_zero_json(path, CHECKPOINT_RECORD)  # read_checkpoints names what it refused
    fields = _checkpoint_fields(record)
    if fields is None:
        return None
    fields['node'] = os.path.basename(os.path.dirname(found))
    fields['last_signal_checkpoint'] = _checkpoint_fields(record.get('last_signal_checkpoint'))
    return fields


def read_checkpoints(path, refused=None):
    """Every node's record of its last checkpoint (files/workspace/train.py writes it on every node), by node:
    ``{node: {global_step, epoch, reason, signal, path}}`` of the ``outputs/<node>/checkpoint.json`` that read as one
    (a retry resumes from one of them: module_utils/_launch_dirs.resume_checkpoint). The lines naming the node and
    the file of what was not read (module_utils/_node_files.py) are added to the list ``refused``."""
    found = {}
    for node, node_dir in node_output_dirs(path):
        record_path = os.path.join(node_dir, CHECKPOINT_RECORD)
        if not os.path.isfile(record_path) or os.path.islink(record_path):
            continue
        record, why = _node_files.read_json_object(record_path, node, CHECKPOINT_RECORD)
        if refused is not None:
            refused += why
        fields = _checkpoint_fields(record)
        if fields is not None:
            found[node] = fields
    return found


def checkpoint_line(checkpoint):
    """``global step 12 (SIGUSR1) on lab-node01: /srv/.../checkpoint.pt`` for the summary and the outcome."""
    if not checkpoint:
        return None
    why = checkpoint.get('signal') or checkpoint.get('reason')
    return 'global step %s%s on %s: %s' % (checkpoint['global_step'], ' (%s)' % why if why else '', checkpoint['node'],
                                           checkpoint.get('path') or '?')


def judge_results(results, verdicts=None, missing_nodes=None, time_limit=None, checkpoint=None):
    """Decide the outcome of a job from each node's final ``job`` state and the wait's verdicts.

    ``results`` maps node -> the torchrun module's ``job`` dict (with its ``stop`` record, when the job was
    stopped). ``verdicts`` maps node -> what the wait judged there (``state``, a name of ``_outcomes.VERDICTS``;
    the decisive ones, ``stalled`` and ``gone`` (unreachable past the grace), with a ``detail`` line; another name
    is an ExperimentError). ``missing_nodes`` could not be reached at the end. What each verdict and stop reason
    stands for is ``plugins/module_utils/_outcomes.py``; the outcome is the first that applies:

    - ``failed``: a node's job failed on its own before anyone stopped the job; the cause (``failed_nodes``)
      is the missing nodes plus the node(s) whose own failure ended first;
    - ``stalled``: the wait stopped the job because a node showed no new output for too long;
    - ``unreachable``: a node could not be reached for longer than the grace, or at the end;
    - ``stopped``: the user stopped it (``timed_out`` when the wait's time limit did);
    - ``failed`` for any other non-zero exit; ``succeeded`` when every node's job exited 0.

    The nodes that the job's launcher ended because another node failed or was stopped (``launcher_stops``, e.g. a
    Slurm step's) count as stopped by that node (reason ``peer``), not as failures; and a job that its launcher ended at
    a time limit (``time_limit``, from _launchers.Launcher.time_limit) is ``timed_out`` before anything else, its nodes
    stopped by it, with the job's last ``checkpoint`` (:func:`read_checkpoint`) in the line.
    """
    if time_limit:
        by = _launchers.of_results(results).stop_by
        jobs = with_time_limit_stops(results or {}, time_limit, by)
        stopped = sorted(node for node, job in jobs.items() if (job or {}).get('exit_code') != 0)
        line = 'timed out: %s' % time_limit['detail']
        if checkpoint_line(checkpoint):
            line += '; last checkpoint: %s' % checkpoint_line(checkpoint)
        stop = {'reason': 'timeout', 'by': by, 'source': time_limit['source'], 'detail': time_limit['detail'],
                'requested_at': None}
        return dict(outcome=stop_outcome('timeout'), outcome_detail=line, failed_nodes=[], also_failed=[],
                    stopped_nodes=stopped, stop=stop)
    # the nodes the launcher ended because of another node are stopped, as if the wait had stopped them
    jobs = dict((node, job or {}) for node, job in with_launcher_stops(results or {}).items())
    missing = sorted(set(missing_nodes or []))
    failed = sorted(node for node, job in jobs.items() if job.get('exit_code') != 0)
    first_stop = _first_stop(jobs)
    own = _own_failures(jobs, first_stop)
    stalled = _verdict_nodes(verdicts, 'stalled')
    gone = sorted(set(_verdict_nodes(verdicts, 'unreachable')) | set(missing))
    verdict_detail = dict((node, (verdicts or {}).get(node, {}).get('detail')) for node in stalled + gone)

    by_stop = False
    if own:
        culprits = _first_ended(own, jobs)
        failed_nodes = missing + [node for node in culprits if node not in missing]
        also = [node for node in own if node not in failed_nodes]
        line = 'failed on ' + ', '.join(
            '%s (%s)' % (node, 'unreachable at the end' if node in missing else _how_it_ended(jobs[node]))
            for node in failed_nodes)
        outcome = 'failed'
    elif stalled:
        failed_nodes, also, outcome = stalled, [], 'stalled'
        line = 'stalled on ' + '; '.join('%s (%s)' % (node, verdict_detail[node] or 'no new output') for node in stalled)
    elif gone:
        failed_nodes, also, outcome = gone, [], 'unreachable'
        line = 'unreachable: ' + '; '.join('%s (%s)' % (node, verdict_detail.get(node) or 'unreachable at the end')
                                           for node in gone)
    elif first_stop is not None and stop_words(first_stop['reason']) and failed:
        # the outcome a stop of its own stands for (_outcomes.STOP_REASONS: user, timeout), said with its words
        failed_nodes, also, by_stop = [], [], True
        outcome = stop_outcome(first_stop['reason'])
        line = '%s %s at %s' % (outcome.replace('_', ' '), stop_words(first_stop['reason']), first_stop.get('requested_at'))
    elif failed or missing:
        failed_nodes = _first_ended(failed, jobs)
        also, outcome = [], 'failed'
        line = 'failed on ' + ', '.join('%s (%s)' % (node, _how_it_ended(jobs[node])) for node in failed_nodes)
    else:
        return dict(outcome='succeeded', outcome_detail='succeeded', failed_nodes=[], also_failed=[], stopped_nodes=[],
                    stop=None)
    stopped = [node for node in failed if node not in failed_nodes and node not in also]
    return dict(
        outcome=outcome,
        outcome_detail=line if by_stop else _with_followers(line, failed_nodes, also, stopped),
        failed_nodes=failed_nodes,
        also_failed=also,
        stopped_nodes=stopped,
        stop=first_stop,
    )


def _manifest_at(path):
    """The manifest of the experiment at ``path`` as a dict, or None (missing, unreadable, not a JSON object)."""
    text = _read_text(os.path.join(path, MANIFEST_FILE))
    try:
        manifest = json.loads(text) if text else None
    except ValueError:
        return None
    return manifest if isinstance(manifest, dict) else None


def _rewrite(path, manifest, key, line, first=False):
    """Write the experiment's changed ``manifest``, and ``line`` as summary.txt's ``key`` row (first or last)."""
    _write_atomic(os.path.join(path, MANIFEST_FILE), json.dumps(manifest, sort_keys=True, indent=2, default=str) + '\n')
    summary_path = os.path.join(path, SUMMARY_FILE)
    rows = [row for row in (_read_text(summary_path) or '').splitlines() if not row.startswith(key + ' ')]
    row = '{0:<10} : {1}'.format(key, line)
    _write_atomic(summary_path, '\n'.join([row] + rows if first else rows + [row]) + '\n')


def link_next(path, next_run_id, check_mode=False):
    """Record in the experiment at ``path`` (an attempt of a launch with retries) the run id of the attempt after it:
    the manifest's ``next`` and a ``next`` line in ``summary.txt``. Returns True when it changed."""
    manifest = _manifest_at(path)
    if manifest is None:
        raise ExperimentError('{0} holds no manifest to link the next attempt {1} into'.format(
            os.path.join(path, MANIFEST_FILE), next_run_id))
    if manifest.get('next') == next_run_id:
        return False
    if not check_mode:
        manifest['next'] = next_run_id
        _rewrite(path, manifest, 'next', next_run_id)
    return True


def mark_interrupted(path, when, pid):
    """Record in the experiment at ``path`` that the controller went away while the job was waited for.

    Only a manifest whose outcome is still ``running`` is changed (``interrupted``, ``interrupted_at``); the job may
    still run on the nodes, and ``playbooks/status.yml`` records its real end later. Returns True when it changed.
    """
    manifest = _manifest_at(path)
    if manifest is None or manifest.get('outcome') != RUNNING:
        return False
    stamp = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(when))
    line = ('interrupted: the controller (pid %d) went away at %s while waiting; the job may still run. '
            'playbooks/status.yml collects it and records its real end' % (pid, stamp))
    manifest.update(outcome=INTERRUPTED, outcome_detail=line, interrupted_at=stamp)
    _rewrite(path, manifest, 'outcome', line, first=True)
    return True


MAX_REFUSED_SHOWN = 20
"""Lines of what was not read shown in summary.txt; the manifest keeps up to MAX_REFUSED_KEPT."""
MAX_REFUSED_KEPT = 1000


def report_experiment(path, manifest=None, check_mode=False, results=None, verdicts=None, missing_nodes=None,
                      refused=None, launcher_end=None, straggler_threshold=None, attempt=None):
    """Summarize the metrics of the experiment at ``path`` and write ``manifest.json`` / ``summary.txt``.

    Returns a dict with ``path`` (absolute), ``summary``, ``table``, ``manifest_path``, ``summary_path``, ``changed``
    (whether either file's content differs from what is on disk) and ``collect_refused`` (``refused``). Nothing is written in check mode.
    With ``results`` (node -> final job state), the outcome (see judge_results) is returned, added to the
    manifest together with ``results``, and shown in the table. ``refused`` (lines naming a node and a path the
    collect refused to write, module_utils._collect) lands in the manifest's ``collect_refused`` and the table.
    ``launcher_end`` (what the controller asked the job's launcher after the end: for launcher=srun the step's and the
    job's state, as the srun_step module's query returns them, with ``job_id`` and ``step_id``) says whether the
    launcher ended the job at a time limit (_launchers.Launcher.time_limit; kept in the manifest as the launcher's
    end_record says, e.g. ``slurm_end``). The job's last checkpoint (rank 0's ``checkpoint.json``) is the manifest's
    ``checkpoint`` and a line of the table. ``straggler_threshold`` (None: the manifest's ``parameters``' one, else
    _stragglers.DEFAULT_THRESHOLD) is the summary's (:func:`summarize`). The collected node logs are split by rank
    (module_utils/_rank_logs.py): the manifest's ``rank_logs`` and the table's rank map.
    ``attempt`` (with ``results``; a launch with retries, module_utils/_retries.py: ``number``, ``first``, ``previous``,
    ``retries``, ``rows``, ``resumed_from``) adds the attempt's links, every attempt's row and whether this one is
    retried (``retry``) to the manifest, the table (when retries are on) and the result.
    """
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise ExperimentError('experiment directory {0} does not exist'.format(path))

    if straggler_threshold is None:
        parameters = (manifest or {}).get('parameters')
        straggler_threshold = parameters.get('straggler_threshold') if isinstance(parameters, dict) else None
    # what the job wrote is read within bounds (module_utils/_node_files.py), checked against the job's own world size
    metrics = read_metrics(path, job_world_size(manifest))
    read_refused = list(metrics['refused'])
    summary = summarize(metrics, _stragglers.threshold(straggler_threshold))
    table = summary_table(summary)
    if not summary['metrics_found']:
        table = torchrun_rows(table, manifest, results)
    checkpoint = read_checkpoint(path)
    checkpoints = read_checkpoints(path, read_refused)
    if checkpoints:
        manifest = dict(manifest or {}, checkpoints=checkpoints)
    if checkpoint is not None:
        manifest = dict(manifest or {}, checkpoint=checkpoint)
        table.append('{0:<10} : {1}'.format('checkpoint', checkpoint_line(checkpoint)))
    verdict = None
    if results is not None:
        time_limit = None
        launcher = _launchers.of_results(results)
        if launcher_end:
            time_limit = launcher.time_limit(launcher_end, results)
            manifest = dict(manifest or {}, **launcher.end_record(launcher_end, time_limit))
        # the records say which nodes the launcher ended because of another, or at a time limit: the manifest keeps that
        results = (with_time_limit_stops(results, time_limit, launcher.stop_by) if time_limit
                   else with_launcher_stops(results))
        verdict = judge_results(results, verdicts, missing_nodes, time_limit=time_limit, checkpoint=checkpoint)
        manifest = dict(manifest or {})
        manifest.update(verdict)
        manifest['results'] = results
        if verdicts:
            manifest['wait'] = verdicts
        table = ['{0:<10} : {1}'.format('outcome', verdict['outcome_detail'])] + table
        if attempt:
            attempt = dict(attempt, run_id=manifest.get('run_id'), experiment_dir=path)
            recorded = _retries.record(attempt, verdict, results, summary, missing_nodes, manifest.get('launch_errors'))
            manifest.update(recorded)
            verdict = dict(verdict, attempts=recorded['attempts'], retry=recorded['retry'])
            if int(attempt.get('retries') or 0) > 0 or recorded['attempt'] > 1:
                table += _retries.lines(recorded['attempts'], attempt.get('retries') or 0)
    elif (manifest or {}).get('outcome_detail'):
        table = ['{0:<10} : {1}'.format('outcome', manifest['outcome_detail'])] + table
    # the collected node logs split by rank (logs/rank_<r>.txt) and the rank map (module_utils/_rank_logs.py)
    rank_logs = _rank_logs.split_node_logs(path, manifest, job_world_size(manifest), check_mode)
    read_refused += rank_logs['refused']
    if rank_logs['rows']:
        manifest = dict(manifest or {}, rank_logs=rank_logs['rows'])
        table += _rank_logs.map_lines(rank_logs['rows'])
    # where every rank was when a stalled job was stopped (the nodes' py-spy dumps, module_utils/_stacks.py)
    stacks = _stacks.judge(_stacks.read_experiment(path, dict(node_output_dirs(path)), read_refused))
    if any(stacks[key] for key in ('outside', 'waiting', 'unknown')):
        manifest = dict(manifest or {}, stacks=_stacks.record(stacks))
        table += _stacks.lines(stacks)
    if refused:
        manifest = dict(manifest or {}, collect_refused=list(refused))
        table.append('{0:<10} : {1} file(s) not collected (manifest.json collect_refused)'.format('refused', len(refused)))
    if read_refused:
        manifest = dict(manifest or {}, read_refused=read_refused[:MAX_REFUSED_KEPT])
        table += ['{0:<10} : {1}'.format('not read', line) for line in read_refused[:MAX_REFUSED_SHOWN]]
        if len(read_refused) > MAX_REFUSED_SHOWN:
            table.append('{0:<10} : {1} more (manifest.json read_refused)'.format(
                'not read', len(read_refused) - MAX_REFUSED_SHOWN))

    manifest_path = os.path.join(path, MANIFEST_FILE)
    summary_path = os.path.join(path, SUMMARY_FILE)
    manifest_text = render_manifest(manifest, summary)
    summary_text = '\n'.join(table) + '\n'

    changed = False
    for filename, text, compare_json in ((manifest_path, manifest_text, True), (summary_path, summary_text, False)):
        current = _read_text(filename)
        same = current == text
        if not same and compare_json and current is not None:
            try:
                same = json.loads(current) == json.loads(text)
            except ValueError:
                same = False
        if same:
            continue
        changed = True
        if not check_mode:
            try:
                _write_atomic(filename, text)
            except (IOError, OSError) as exc:
                raise ExperimentError('cannot write {0}: {1}'.format(filename, exc))

    result = dict(
        path=path,
        summary=summary,
        table=table,
        manifest_path=manifest_path,
        summary_path=summary_path,
        changed=changed,
        collect_refused=list(refused or []),
        read_refused=read_refused,
    )
    if verdict is not None:
        result.update(verdict)
    return result
