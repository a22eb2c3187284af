# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Parameter sweeps: the grid, its validation, the sweep directory's ``sweep.json`` (logic behind
``trainops.multinode.sweep`` and ``trainops.multinode.sweep_step``).

A sweep is a mapping of knob to a list of values, in the order given; its grid is their cartesian product, the
first knob varying slowest. Knobs: those module_utils/_knobs.py declares sweepable (``channels``, ``min_channels``,
``threads``, ``nproc``, ``config``), ``env.NAME``
(one variable of the ranks' environment) and ``override.KEY`` (one ``--override KEY=value`` of the config).

:func:`apply_point` maps one point onto the launch parameters of ``launch_problems``: the same function decides the
values the role runs with and the values the validation checks, so a value the launch would reject fails before
any point starts.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import time
from collections.abc import Mapping, Sequence

from ansible_collections.trainops.multinode.plugins.module_utils import _files, _sweep_settings
from ansible_collections.trainops.multinode.plugins.module_utils._knobs import SWEEP
from ansible_collections.trainops.multinode.plugins.module_utils._launch_params import launch_problems

SWEEP_FILE = 'sweep.json'
RESULTS_CSV = 'results.csv'
RESULTS_MD = 'results.md'

PLAIN_KNOBS = dict((knob.short, knob.key) for knob in SWEEP)
"""Sweep knob (the short -e name) -> key of the launch parameters (``launch_problems``): the knobs
module_utils/_knobs.py declares sweepable."""

ENV_PREFIX = 'env.'
OVERRIDE_PREFIX = 'override.'

_ENV_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
_OVERRIDE_KEY = re.compile(r'[A-Za-z_][A-Za-z0-9_.]*')
_SWEEP_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]*')

DONE = 'succeeded'
"""The outcome of a point that a resumed sweep skips."""

KNOB_EXAMPLE = ('e.g. -e \'{"sweep": {"channels": [28, 42], "threads": [256, 512], "env.NCCL_ALGO": ["Ring", "Tree"], '
                '"override.training.batch_size": [16, 32]}}\'')


class SweepError(Exception):
    """Raised for conditions the module reports with ``fail_json``."""


def _is_list(value):
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


# ---------------------------------------------------------------------------
# The grid and its validation
# ---------------------------------------------------------------------------

def knob_problem(knob):
    """A line when ``knob`` is not a knob a sweep can vary, else None."""
    text = str(knob)
    if text in PLAIN_KNOBS:
        return None
    if text.startswith(ENV_PREFIX):
        if _ENV_NAME.fullmatch(text[len(ENV_PREFIX):]):
            return None
        return '%s: env. must be followed by a variable name (letters, digits, _), e.g. env.NCCL_ALGO' % text
    if text.startswith(OVERRIDE_PREFIX):
        if _OVERRIDE_KEY.fullmatch(text[len(OVERRIDE_PREFIX):]):
            return None
        return '%s: override. must be followed by a config key (letters, digits, _ and .), e.g. override.training.lr' % text
    return '%s: not a knob a sweep can vary; one of %s, env.NAME or override.KEY (%s)' % (
        text, ', '.join(PLAIN_KNOBS), KNOB_EXAMPLE)


def shape_problems(sweep):
    """Lines for a sweep that is not a non-empty mapping of knob to a non-empty list of scalar values."""
    if not isinstance(sweep, Mapping) or not sweep:
        return ['sweep=%s: must be a mapping of knob to a list of values (%s)' % (sweep, KNOB_EXAMPLE)]
    problems = []
    for knob, values in sweep.items():
        line = knob_problem(knob)
        if line:
            problems.append(line)
        elif not _is_list(values):
            problems.append('%s=%s: must be a list of values (e.g. "%s": [%s])' % (knob, values, knob, json.dumps(values)))
        elif not values:
            problems.append('%s=[]: the list of values is empty; give at least one value' % knob)
        else:
            bad = [v for v in values if v is None or isinstance(v, (Mapping, list, tuple, bool))]
            if bad:
                problems.append('%s: %s: each value must be a number or a string' % (knob, ', '.join(json.dumps(b) for b in bad)))
            repeated = sorted(set(str(v) for v in values if [str(w) for w in values].count(str(v)) > 1))
            if repeated:
                problems.append('%s: %s given more than once' % (knob, ', '.join(repeated)))
    return problems


def sweep_grid(sweep):
    """The points of ``sweep`` in order: a list of ``{knob: value}`` (the first knob varies slowest)."""
    knobs = list(sweep)
    return [dict(zip(knobs, combo)) for combo in itertools.product(*[list(sweep[k]) for k in knobs])]


def point_label(point):
    """``channels=28 threads=256``."""
    return ' '.join('%s=%s' % (knob, value) for knob, value in point.items())


def apply_point(params, point):
    """The launch parameters (``launch_problems``' keys) with the point's values in place."""
    result = dict(params)
    env = dict(params.get('env') or {}) if isinstance(params.get('env'), Mapping) else params.get('env')
    overrides = list(params.get('overrides') or []) if _is_list(params.get('overrides')) else params.get('overrides')
    for knob, value in point.items():
        if knob in PLAIN_KNOBS:
            result[PLAIN_KNOBS[knob]] = value
        elif knob.startswith(ENV_PREFIX) and isinstance(env, dict):
            env[knob[len(ENV_PREFIX):]] = str(value)
        elif knob.startswith(OVERRIDE_PREFIX) and isinstance(overrides, list):
            key = knob[len(OVERRIDE_PREFIX):]
            overrides = [o for o in overrides if not str(o).startswith(key + '=')] + ['%s=%s' % (key, value)]
    result['env'] = env
    result['overrides'] = overrides
    return result


def sweep_problems(params, sweep, fixed=None):
    """One line per thing wrong with ``sweep`` over the launch parameters ``params``; empty when it can run.

    ``fixed`` names knobs given on their own on the command line (``-e channels=42``): sweeping one of them too
    is refused. Every point's launch parameters go through ``launch_problems``; a line that the base
    parameters do not already have names the first point (and the value) that causes it.
    """
    problems = shape_problems(sweep)
    if problems:
        return problems
    for knob in sweep:
        if knob in (fixed or []):
            problems.append('%s: given both on its own (-e %s=...) and in the sweep; give it in one place' % (knob, knob))
    base = set(launch_problems(params))
    seen = set()
    for point in sweep_grid(sweep):
        for line in launch_problems(apply_point(params, point)):
            if line in base or line in seen:
                continue
            seen.add(line)
            problems.append('sweep point %s: %s' % (point_label(point), line))
    return problems


# ---------------------------------------------------------------------------
# The sweep directory and sweep.json
# ---------------------------------------------------------------------------

def _utc(epoch=None):
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(epoch))


def write_json_atomic(path, data):
    """``sweep.json`` and ``results.json``: indent 2, private to the user (see _files.write_json_atomic)."""
    _files.write_json_atomic(path, data, indent=2)


def read_sweep(sweep_dir):
    path = os.path.join(sweep_dir, SWEEP_FILE)
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise SweepError('%s: cannot read the sweep record (%s); give the directory of an earlier sweep, which holds '
                         'sweep.json, or leave sweep_dir out to start a new sweep' % (path, exc))
    if not isinstance(data, dict) or not isinstance(data.get('points'), list):
        raise SweepError('%s: not a sweep record (no points)' % path)
    return data


def _new_record(name, sweep, workload, now):
    points = [dict(index=i + 1, label=point_label(p), values=p, status='pending', experiment_dir=None,
                   outcome=None, outcome_detail=None, started_at=None, finished_at=None)
              for i, p in enumerate(sweep_grid(sweep))]
    return dict(name=name, grid=dict((k, list(v)) for k, v in sweep.items()), knobs=list(sweep), workload=workload,
                created_at=_utc(now), updated_at=_utc(now), outcome='running', points=points, runs=[])


def _create_dir(root, name, now):
    stamp = time.strftime('%Y%m%d_%H%M%S', time.localtime(now))
    os.makedirs(root, exist_ok=True)
    base = os.path.join(root, 'sweep_%s_%s' % (name, stamp))
    for index in range(1, 1000):
        path = base if index == 1 else '%s_%d' % (base, index)
        try:
            os.mkdir(path)
            return os.path.abspath(path)
        except FileExistsError:
            continue
    raise SweepError('%s: no free sweep directory name' % base)


def _set_settings(record, settings):
    """Record each node's launch settings (``{node: settings}``, module_utils/_sweep_settings.py) in ``record``."""
    shared, per_node = _sweep_settings.record(settings)
    record['settings'] = shared
    record['node_settings'] = per_node
    record['settings_id'] = _sweep_settings.settings_id(shared, per_node)


def plan_sweep(root, name, sweep, workload, sweep_dir=None, now=None, settings=None):
    """Create ``<root>/sweep_<name>_<timestamp>/sweep.json``, or reopen ``sweep_dir`` to resume it.

    A resumed sweep must have the same grid; its points that succeeded are kept (and skipped), the others run
    again. ``settings`` (node to its launch settings, module_utils/_sweep_play.py) are recorded in a new sweep,
    and in a resumed one whose sweep.json has none yet (written before sweeps recorded them); a resume with recorded
    settings keeps them (the launch plan's nodes step refused any other before any node was touched, module_utils/_sweep_play.py).
    Returns ``(path, record, resumed)``.
    """
    now = time.time() if now is None else now
    if not _SWEEP_NAME.fullmatch(str(name)):
        raise SweepError('sweep_name=%s: must start with a letter or digit and hold only letters, digits, ., _ and - '
                         '(e.g. -e sweep_name=nccl_channels)' % name)
    if sweep_dir:
        record = read_sweep(sweep_dir)
        grid = dict((k, list(v)) for k, v in sweep.items())
        if record.get('grid') != grid or record.get('knobs') != list(sweep):
            raise SweepError('sweep_dir=%s holds a different sweep (%s); resume it with the same sweep, or leave '
                             'sweep_dir out to start a new one' % (sweep_dir, json.dumps(record.get('grid'))))
        record['outcome'] = 'running'
        record['updated_at'] = _utc(now)
        run = dict(started_at=_utc(now), resumed=True)
        if settings and not isinstance(record.get('settings'), Mapping):
            _set_settings(record, settings)
            run['settings_recorded'] = True
        record.setdefault('runs', []).append(run)
        path = os.path.abspath(sweep_dir)
        write_json_atomic(os.path.join(path, SWEEP_FILE), record)
        return path, record, True
    path = _create_dir(root, name, now)
    record = _new_record(name, sweep, workload, now)
    if settings:
        _set_settings(record, settings)
    record['runs'].append(dict(started_at=_utc(now), resumed=False))
    write_json_atomic(os.path.join(path, SWEEP_FILE), record)
    return path, record, False


def record_point(sweep_dir, index, update, now=None):
    """Merge ``update`` into point ``index`` (1-based) of ``sweep_dir``'s sweep.json; returns the point."""
    now = time.time() if now is None else now
    record = read_sweep(sweep_dir)
    points = record['points']
    if not 1 <= index <= len(points):
        raise SweepError('point %d: the sweep has %d points' % (index, len(points)))
    point = points[index - 1]
    for key, value in (update or {}).items():
        point[key] = value
    if (update or {}).get('status') == 'running':
        # the settings the point runs with: the results table's settings column
        point['settings_id'] = record.get('settings_id')
    if point.get('status') == 'running' and not point.get('started_at'):
        point['started_at'] = _utc(now)
    if point.get('status') in ('done', 'skipped') and not point.get('finished_at'):
        point['finished_at'] = _utc(now)
    record['updated_at'] = _utc(now)
    write_json_atomic(os.path.join(sweep_dir, SWEEP_FILE), record)
    return point


def finish_sweep(sweep_dir, stopped=False, now=None):
    """Set the sweep's outcome from its points: succeeded, failed (some point failed), stopped (stop_on_failure)."""
    now = time.time() if now is None else now
    record = read_sweep(sweep_dir)
    outcomes = [p.get('outcome') for p in record['points']]
    if all(o == DONE for o in outcomes):
        record['outcome'] = 'succeeded'
    elif stopped:
        record['outcome'] = 'stopped'
    else:
        record['outcome'] = 'failed'
    record['failed_points'] = [p['label'] for p in record['points'] if p.get('outcome') not in (DONE, None)]
    record['finished_at'] = record['updated_at'] = _utc(now)
    if record.get('runs'):
        record['runs'][-1]['finished_at'] = record['finished_at']
    write_json_atomic(os.path.join(sweep_dir, SWEEP_FILE), record)
    return record


POINT_KEYS = tuple(PLAIN_KNOBS.values()) + ('env', 'overrides')
"""The launch parameters a point can change (what the role sets before each point, roles/job/tasks/point.yml):
the sweepable knobs, and env and overrides (env.NAME, override.KEY)."""


def sweep_points(params, sweep, fixed=None):
    """``{'problems': [...], 'points': [...]}``: the validation, and each point with the launch values it runs with."""
    problems = sweep_problems(params, sweep, fixed)
    if problems:
        return dict(problems=problems, points=[])
    points = []
    for index, point in enumerate(sweep_grid(sweep), start=1):
        applied = apply_point(params, point)
        points.append(dict(index=index, label=point_label(point), values=point,
                           params=dict((key, applied.get(key)) for key in POINT_KEYS)))
    return dict(problems=[], points=points)
