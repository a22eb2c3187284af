# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""What an experiment's ranks measured: their metrics records read within bounds from every node's outputs (a
record that names a rank the job did not have is refused), and what rank 0 wrote as JSON (module_utils/_experiment.py
reports them)."""

from __future__ import annotations

import glob
import json
import math
import os
import re

from ansible_collections.trainops.multinode.plugins.module_utils import _node_files, _stragglers

LOG_DIR = 'logs'
OUTPUT_DIR = 'outputs'
MANIFEST_FILE = 'manifest.json'
SUMMARY_FILE = 'summary.txt'
METRICS_GLOB = _stragglers.METRICS_GLOB


class ExperimentError(Exception):
    """Raised for conditions the module reports with ``fail_json``."""


_RANK_FROM_FILE = re.compile(r'^rank_(\d+)_metrics\.jsonl$')


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
