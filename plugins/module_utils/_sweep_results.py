# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""A sweep's results: one row per point read from its experiment directory (the manifest's summary and, for the
all-reduce benchmark, ``outputs/<node of rank 0>/allreduce.json``), written as ``results.csv`` and ``results.md``, and plotted with
matplotlib (Agg backend, PNG files) by :func:`write_plots`.
"""

from __future__ import annotations

import csv
import io
import json
import os

from ansible_collections.trainops.multinode.plugins.module_utils import _sweep_settings
from ansible_collections.trainops.multinode.plugins.module_utils._experiment import read_rank_zero_json
from ansible_collections.trainops.multinode.plugins.module_utils._sweep import (
    RESULTS_CSV, RESULTS_MD, SweepError, write_json_atomic)

METRICS = [
    # (column, what, unit)
    ('throughput_samples_per_s', 'throughput', 'samples/s'),
    ('mean_step_time_s', 'step time', 's'),
    ('final_loss', 'final loss', ''),
    ('steps', 'steps', ''),
    ('avg_busbw_gbps', 'avg bus bandwidth', 'GB/s'),
    ('peak_busbw_gbps', 'peak bus bandwidth', 'GB/s'),
]
FIXED_COLUMNS = ['point', 'outcome']
SETTINGS_COLUMN = 'settings'
"""The id of the launch settings a point ran with (sweep.json's ``settings_id``, module_utils/_sweep_settings.py);
empty for a point that ran before its sweep recorded settings."""
TAIL_COLUMNS = ['experiment', 'outcome_detail']
NOT_RECORDED = 'not recorded'

MATPLOTLIB_MISSING = ('matplotlib is not installed in the controller\'s Python (%s); the sweep plots its results with it. '
                      'Install it: pip install -r requirements.txt (or pip install matplotlib)')


def _load_json(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def _allreduce(experiment_dir):
    data, _refused = read_rank_zero_json(experiment_dir, 'allreduce.json')
    if not isinstance(data, dict) or data.get('benchmark') != 'all_reduce':
        return None
    return data


def point_row(point):
    """The row of one point: its values, outcome and figures (empty where the point has none)."""
    row = dict(point=point['index'], outcome=point.get('outcome') or point.get('status'),
               outcome_detail=point.get('outcome_detail') or '', experiment='')
    row[SETTINGS_COLUMN] = (point.get('settings_id') or NOT_RECORDED) if point.get('experiment_dir') else ''
    row.update(point.get('values') or {})
    path = point.get('experiment_dir')
    if not path:
        return row, None
    row['experiment'] = os.path.basename(path)
    manifest = _load_json(os.path.join(path, 'manifest.json')) or {}
    summary = manifest.get('summary') or {}
    for column in ('throughput_samples_per_s', 'mean_step_time_s', 'final_loss', 'steps'):
        if summary.get(column) is not None:
            row[column] = summary[column]
    bench = _allreduce(path)
    if bench:
        row['avg_busbw_gbps'] = round(bench['avg_busbw_gbps'], 4)
        row['peak_busbw_gbps'] = round(max(r['busbw_gbps'] for r in bench['results']), 4) if bench['results'] else None
    if manifest.get('outcome') and point.get('outcome') in (None, 'running'):
        row['outcome'] = manifest['outcome']
    return row, bench


def result_rows(record):
    """``(columns, rows, benches)``: the table's columns (knobs, outcome, the metrics any point has) and rows."""
    rows, benches = [], {}
    for point in record['points']:
        row, bench = point_row(point)
        rows.append(row)
        if bench:
            benches[point['index']] = bench
    metrics = [metric[0] for metric in METRICS if any(row.get(metric[0]) is not None for row in rows)]
    columns = ['point'] + list(record['knobs']) + ['outcome'] + metrics + [SETTINGS_COLUMN] + TAIL_COLUMNS
    return columns, rows, benches


def mixed(rows):
    """Whether the points that ran did not all run with the same settings."""
    return len(set(row.get(SETTINGS_COLUMN) for row in rows if row.get(SETTINGS_COLUMN))) > 1


def settings_lines(record, rows):
    """Under the Markdown table: what each settings id stands for (secrets by name), and a warning when the points
    ran with different settings."""
    ids = []
    for row in rows:
        if row.get(SETTINGS_COLUMN) and row[SETTINGS_COLUMN] not in ids:
            ids.append(row[SETTINGS_COLUMN])
    lines = []
    for settings_id in ids:
        if settings_id == record.get('settings_id'):
            described = _sweep_settings.describe(record.get('settings'), record.get('node_settings'))
            lines.append('- settings %s: %s' % (settings_id, described))
        elif settings_id == NOT_RECORDED:
            lines.append('- settings %s: the point ran before the sweep recorded its launch settings' % NOT_RECORDED)
        else:
            lines.append('- settings %s: not the settings sweep.json holds now' % settings_id)
    if mixed(rows):
        lines.append('- the points ran with different settings (column settings): compare them with care')
    return lines


def _cell(value):
    if value is None:
        return ''
    if isinstance(value, float):
        return '%.4g' % value if abs(value) < 1e-3 or abs(value) >= 1e5 else ('%.4f' % value).rstrip('0').rstrip('.')
    return str(value)


def render_csv(columns, rows):
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction='ignore', lineterminator='\n')
    writer.writeheader()
    for row in rows:
        writer.writerow(dict((c, '' if row.get(c) is None else row.get(c)) for c in columns))
    return out.getvalue()


def render_markdown(columns, rows, settings=()):
    """The table, then the failed points' details and ``settings`` (lines: what each settings id stands for)."""
    shown = [c for c in columns if c != 'outcome_detail']
    lines = ['| ' + ' | '.join(shown) + ' |', '|' + '---|' * len(shown)]
    for row in rows:
        lines.append('| ' + ' | '.join(_cell(row.get(c)).replace('|', '\\|') for c in shown) + ' |')
    failed = [row for row in rows if row.get('outcome_detail') and row.get('outcome') != 'succeeded']
    if failed:
        lines.append('')
        lines.extend('- point %s: %s' % (row['point'], row['outcome_detail']) for row in failed)
    if settings:
        lines.append('')
        lines.extend(settings)
    return '\n'.join(lines) + '\n'


def render_table(columns, rows):
    """Aligned plain-text lines for the console; the settings column only when the points ran with different ones."""
    shown = [c for c in columns if c not in TAIL_COLUMNS and (c != SETTINGS_COLUMN or mixed(rows))]
    cells = [shown] + [[_cell(row.get(c)) for c in shown] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(shown))]
    return ['  '.join(text.ljust(width) for text, width in zip(line, widths)).rstrip() for line in cells]


def write_results(sweep_dir, record):
    """Write results.csv and results.md; return ``(columns, rows, benches)``."""
    columns, rows, benches = result_rows(record)
    markdown = render_markdown(columns, rows, settings_lines(record, rows))
    for name, text in ((RESULTS_CSV, render_csv(columns, rows)), (RESULTS_MD, markdown)):
        tmp = os.path.join(sweep_dir, '.%s.tmp' % name)
        with open(tmp, 'w') as handle:
            handle.write(text)
        os.replace(tmp, os.path.join(sweep_dir, name))
    write_json_atomic(os.path.join(sweep_dir, 'results.json'),
                      dict(columns=columns, rows=rows, settings_id=record.get('settings_id'),
                           settings=record.get('settings'), node_settings=record.get('node_settings')))
    return columns, rows, benches


# ---------------------------------------------------------------------------
# Plots
# ---------------------------------------------------------------------------

def import_pyplot():
    """matplotlib's pyplot on the Agg backend (no display), or SweepError naming the install command."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        import sys
        raise SweepError(MATPLOTLIB_MISSING % sys.executable)
    return plt


def _numeric(values):
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _positions(values):
    """x positions and tick labels: numbers stay numbers, strings are evenly spaced categories."""
    if _numeric(values):
        return list(values), None
    return list(range(len(values))), [str(v) for v in values]


def _series(record, rows, knob, metric):
    """One line per combination of the other knobs: ``[(label, xs, ys)]`` over the knob's values, in grid order."""
    values = record['grid'][knob]
    others = [k for k in record['knobs'] if k != knob]
    groups = {}
    for row in rows:
        key = tuple((k, row.get(k)) for k in others)
        groups.setdefault(key, {})[str(row.get(knob))] = row.get(metric)
    xs, ticks = _positions(values)
    series = []
    for key, by_value in groups.items():
        points = [(x, by_value.get(str(v))) for x, v in zip(xs, values)]
        points = [(x, y) for x, y in points if y is not None]
        if points:
            series.append((' '.join('%s=%s' % kv for kv in key) or 'all', [p[0] for p in points], [p[1] for p in points]))
    return series, xs, ticks


def _knob_figure(plt, record, rows, knob, metrics, path):
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.5 * len(metrics), 4), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        what, unit = next((w, u) for m, w, u in METRICS if m == metric)
        series, xs, ticks = _series(record, rows, knob, metric)
        for label, sx, sy in series:
            ax.plot(sx, sy, marker='o', label=label)
        ax.set_xlabel(knob)
        ax.set_ylabel('%s (%s)' % (what, unit) if unit else what)
        ax.set_title('%s against %s' % (what, knob))
        ax.set_xticks(xs)
        if ticks:
            ax.set_xticklabels(ticks)
        ax.grid(True, alpha=0.3)
        if len(series) > 1:
            ax.legend(fontsize='small')
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _busbw_figure(plt, record, benches, path):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for point in record['points']:
        bench = benches.get(point['index'])
        if not bench:
            continue
        sizes = [r['size'] for r in bench['results']]
        ax.plot(sizes, [r['busbw_gbps'] for r in bench['results']], marker='o', label=point['label'])
    ax.set_xscale('log', base=2)
    ax.set_xlabel('message size (bytes)')
    ax.set_ylabel('bus bandwidth (GB/s)')
    ax.set_title('all-reduce bus bandwidth against message size')
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize='small')
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _heatmap_figure(plt, record, rows, metric, path):
    first, second = record['knobs']
    ys, xs = record['grid'][first], record['grid'][second]
    cells = dict(((str(row.get(first)), str(row.get(second))), row.get(metric)) for row in rows)
    data = [[cells.get((str(y), str(x))) for x in xs] for y in ys]
    masked = [[float('nan') if v is None else v for v in line] for line in data]
    what, unit = next((w, u) for m, w, u in METRICS if m == metric)
    fig, ax = plt.subplots(figsize=(1.6 * len(xs) + 3, 1.0 * len(ys) + 2))
    image = ax.imshow(masked, cmap='viridis', aspect='auto')
    ax.set_xticks(range(len(xs)))
    ax.set_xticklabels([str(x) for x in xs])
    ax.set_yticks(range(len(ys)))
    ax.set_yticklabels([str(y) for y in ys])
    ax.set_xlabel(second)
    ax.set_ylabel(first)
    ax.set_title('%s (%s)' % (what, unit) if unit else what)
    for i, line in enumerate(data):
        for j, value in enumerate(line):
            ax.text(j, i, 'failed' if value is None else _cell(value), ha='center', va='center', color='w')
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_plots(sweep_dir, record, rows, benches, plt=None):
    """Write the sweep's PNG plots; return their file names.

    - ``<knob>.png`` for each swept knob: throughput and step time (training) or average bus bandwidth (all-reduce)
      against the knob, one line per combination of the other knobs;
    - ``busbw_vs_size.png`` (all-reduce): bus bandwidth against message size, one line per point;
    - ``heatmap.png`` when exactly two knobs are swept: throughput (or average bus bandwidth) over the grid.
    """
    plt = plt or import_pyplot()
    metrics = [m for m in ('throughput_samples_per_s', 'mean_step_time_s', 'avg_busbw_gbps')
               if any(row.get(m) is not None for row in rows)]
    written = []
    if metrics:
        for knob in record['knobs']:
            name = 'plot_%s.png' % knob.replace('/', '_')
            _knob_figure(plt, record, rows, knob, metrics, os.path.join(sweep_dir, name))
            written.append(name)
    if benches:
        _busbw_figure(plt, record, benches, os.path.join(sweep_dir, 'busbw_vs_size.png'))
        written.append('busbw_vs_size.png')
    if len(record['knobs']) == 2 and metrics:
        _heatmap_figure(plt, record, rows, metrics[0], os.path.join(sweep_dir, 'heatmap.png'))
        written.append('heatmap.png')
    return written
