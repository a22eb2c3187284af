# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""A sweep's launch settings: what every point shares besides its swept knobs, recorded in ``sweep.json`` and taken
again by a resume (module_utils/_sweep_play.py, the action ``sweep_step``).

:data:`SETTINGS` are the launch knobs that decide what a point runs (config, overrides, env, script and its arguments,
nproc, the NCCL/RCCL knobs, the launcher, profiling, ...); :data:`OPERATIONAL` the knobs a resume may change freely
(ports, timeouts, ``replace``, ``allow_dirty``, the git check, ...): a unit test keeps the two covering every launch
knob of module_utils/_knobs.py, so a new knob needs a decision here.

A resume (``-e sweep_dir=...``) takes every setting from ``sweep.json``. A setting counts as given again when its
short knob is on the command line (``-e config=...``) or its role variable differs from the role's default (an
inventory, a vars file, ``-e trainops_env=...``); a given value that differs from the recorded one is refused, naming
the setting and both values. ``trainops_secret_env`` is recorded by its names only; a resume that does not give it
again reads those names' values from the controller's environment, as ``lookup('ansible.builtin.env', NAME)`` does.

The values of a setting may differ per node (a host variable): :func:`record` keeps the values every node shares in
``settings`` and the others per node in ``node_settings``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from ansible_collections.trainops.multinode.plugins.module_utils._knobs import BY_KEY, LAUNCH, SWEEP, _manifest_value

SECRET = 'secret_env'

SETTINGS = (
    # what the ranks run and with which arguments and environment
    'script', 'config', 'overrides', 'script_args', 'module', 'env', SECRET, 'nproc_per_node', 'run_name',
    # the NCCL/RCCL knobs (those a sweep varies are left out when it varies them) and the GPUs
    'channels', 'min_channels', 'threads', 'network_mode', 'socket_ifname', 'ib_hca', 'gid_index', 'net_gdr_level',
    'ib_tc', 'ib_fifo_tc', 'ib_sl', 'ib_qps_per_connection', 'cross_nic', 'library_version', 'nccl_debug',
    'rocm_env', 'gpu_vendor',
    # how the ranks are started
    'launcher', 'runtime', 'command_prefix', 'max_restarts',
    'profile', 'profile_ranks', 'profile_stats', 'profile_args',
)
"""The launch settings a sweep's points share (keys of module_utils/_knobs.py), in the order sweep.json lists them."""

OPERATIONAL = (
    'master_port', 'rdzv_backend', 'rdzv_timeout', 'collective_timeout', 'wait', 'unreachable_grace', 'stall_timeout',
    'wait_timeout', 'resume_from', 'replace', 'allow_dirty', 'git_check', 'git_reference', 'node_id',
    'training_network', 'checkpoint_signal', 'checkpoint_signal_seconds', 'srun_start_timeout',
    'straggler_threshold', 'retries', 'allow_few_cpus', 'mem_per_node', 'workspace_src', 'progress_pattern',
    'sync_exclude', 'replace_source', 'retry_policy', 'retries_without_progress', 'exclude_after',
)
"""Launch knobs that change how a point is started, waited for or checked, not what it runs: a resume may give other
values (a free port, ``-e replace=true`` to stop a point's job still running, a longer timeout, another straggler
threshold: it judges the step times, the ranks run the same). ``retries`` (and the retry policy's ``retry_policy``,
``retries_without_progress``, ``exclude_after``): a sweep's points are not retried (a failed point is recorded and the
sweep goes on, or stops: stop_on_failure). ``allow_few_cpus``, ``mem_per_node``: checks of the Slurm allocation a
resume runs in, which may be another one. ``workspace_src``: where the code is read on the
controller (the nodes' code is compared by the git check); ``progress_pattern``: what the wait shows."""


def variables():
    """The role variables of :data:`SETTINGS`, in order (the terms of ``query('ansible.builtin.vars', ...)``)."""
    return [BY_KEY[key].var for key in SETTINGS]


def _name(key):
    knob = BY_KEY[key]
    return knob.short or knob.var


def normal(key, value):
    """The value as sweep.json records it: as the manifest records the knob (numbers as integers, an unset range
    knob as null, booleans as booleans); ``secret_env`` as its sorted names, never its values."""
    if key == SECRET:
        return sorted(str(name) for name in value) if isinstance(value, Mapping) else []
    return _manifest_value(BY_KEY[key], value)


def _text(value):
    return json.dumps(value, sort_keys=True)


def _swept(sweep):
    """The settings a sweep varies as a whole (a plain knob: ``channels``, ``nproc``, ...)."""
    plain = dict((knob.short, knob.key) for knob in SWEEP)
    return set(plain[knob] for knob in (sweep or {}) if knob in plain)


def current(values, knobs=None):
    """``{key: value}`` of :data:`SETTINGS` from their role variables' values (a list in the order of
    :func:`variables`), a short knob's value taken from ``knobs`` (the command line's short knobs over the role
    variables, ``__trainops_knobs``) where it has the key."""
    values = list(values)
    if len(values) != len(SETTINGS):
        raise ValueError('sweep_settings: %d values for %d settings (%s)'
                         % (len(values), len(SETTINGS), ', '.join(variables())))
    knobs = dict(knobs or {})
    return dict((key, knobs.get(key, value) if BY_KEY[key].short else value) for key, value in zip(SETTINGS, values))


def recorded_value(record, node, key):
    """``(True, value)`` for the value ``record`` (sweep.json) has for ``key`` on ``node``, else ``(False, None)``."""
    per_node = (record.get('node_settings') or {}).get(node) or {}
    if key in per_node:
        return True, per_node[key]
    shared = record.get('settings') or {}
    if key in shared:
        return True, shared[key]
    return False, None


def _differs(key, value, was, sweep_dir):
    if key == SECRET:
        return ('trainops_secret_env: names %s; the sweep %s ran with the secrets %s (sweep.json records their names, '
                'never their values); give the same names, or leave trainops_secret_env out to read %s from the '
                "controller's environment, or leave sweep_dir out to start a new sweep"
                % (', '.join(value) or '(none)', sweep_dir, ', '.join(was) or '(none)', ', '.join(was) or 'none'))
    name = _name(key)
    return ('%s=%s: the sweep %s ran with %s=%s (sweep.json); leave %s out to resume it with that value, or leave '
            'sweep_dir out to start a new sweep' % (name, _text(value), sweep_dir, name, _text(was), name))


def settings(values, knobs=None, defaults=None, given=(), record=None, node=None, sweep=None, sweep_dir='',
             environ=None, workload=None):
    """What one node runs a sweep's points with, and what is wrong with a resume's settings.

    ``values``/``knobs``: see :func:`current`; ``defaults``: the roles' defaults (role variable to value);
    ``given``: the short knobs on the command line; ``record``: sweep.json of the sweep to resume, or None for a new
    sweep; ``node``: this node's inventory name; ``sweep``: the grid (its plain knobs are not settings);
    ``environ``: the controller's environment (only the names of recorded secrets are looked up, for presence).

    Returns ``settings`` (what sweep.json records for this node: ``secret_env`` as names), ``vars`` (resume only: the
    role variable of every setting but ``secret_env`` to its value), ``secret_names`` (resume only: the secrets to read
    from the controller's environment), ``recorded`` (whether sweep.json holds settings) and ``problems``.
    """
    now = current(values, knobs)
    defaults = dict(defaults or {})
    swept = _swept(sweep)
    keys = [key for key in SETTINGS if key not in swept]
    mine = dict((key, normal(key, now[key])) for key in keys)
    result = dict(settings=mine, vars={}, secret_names=[], recorded=False, problems=[])
    if record is None:
        return result
    problems = result['problems']
    if workload is not None and record.get('workload') not in (None, workload):
        problems.append('workload=%s: the sweep %s ran workload=%s (sweep.json); leave workload out to resume it, or '
                        'leave sweep_dir out to start a new sweep' % (workload, sweep_dir, record.get('workload')))
    grid = record.get('grid')
    if isinstance(sweep, Mapping) and isinstance(grid, Mapping):
        asked = dict((k, list(v)) for k, v in sweep.items() if isinstance(v, (list, tuple)))
        if list(sweep) != list(record.get('knobs') or grid) or _text(asked) != _text(grid):
            problems.append('sweep=%s: the sweep %s has the grid %s (sweep.json); leave sweep out to resume it, or '
                            'leave sweep_dir out to start a new sweep' % (_text(sweep), sweep_dir, _text(grid)))
    if not isinstance(record.get('settings'), Mapping):
        # a sweep.json written before sweeps recorded their settings: run with the settings given now
        return result
    result['recorded'] = True
    merged = dict(mine)
    for key in keys:
        known, was = recorded_value(record, node, key)
        if not known or _text(was) == _text(mine[key]):
            continue
        knob = BY_KEY[key]
        default = normal(key, defaults[knob.var]) if knob.var in defaults else None
        is_given = (knob.short in (given or ())) or knob.var not in defaults or _text(mine[key]) != _text(default)
        if is_given:
            problems.append(_differs(key, mine[key], was, sweep_dir))
        else:
            merged[key] = was
    result['settings'] = merged
    result['vars'] = dict((BY_KEY[key].var, merged[key]) for key in keys if key != SECRET)
    if SECRET in keys and merged[SECRET] and not mine[SECRET]:
        missing = [name for name in merged[SECRET] if name not in (environ or {})]
        if missing:
            problems.append('trainops_secret_env: the sweep %s ran with the secrets %s (sweep.json records their names, '
                            "never their values); %s not in the controller's environment: export %s, or give "
                            'trainops_secret_env as the sweep\'s first run did'
                            % (sweep_dir, ', '.join(merged[SECRET]), ', '.join(missing), ', '.join(missing)))
        else:
            result['secret_names'] = list(merged[SECRET])
    return result


def effective_problems(values, knobs, expected, sweep_dir=''):
    """Lines for each setting whose value now (after the resume set the role variables) is not the one the resume
    decided, ``expected`` (``settings``' ``settings``): a role variable given as an extra variable (``-e``), which no
    task can change, with the role's default value while the sweep recorded another."""
    now = current(values, knobs)
    problems = []
    for key, was in (expected or {}).items():
        if key in now and _text(normal(key, now[key])) != _text(was):
            problems.append(_differs(key, normal(key, now[key]), was, sweep_dir))
    return problems


def record(by_node):
    """``(settings, node_settings)`` for sweep.json from each node's ``settings`` (node to mapping): the values every
    node shares, and per node the others."""
    nodes = list(by_node or {})
    if not nodes:
        return {}, {}
    keys = []
    for node in nodes:
        keys.extend(key for key in by_node[node] if key not in keys)
    shared, per_node = {}, {}
    for key in keys:
        texts = set(_text(by_node[node].get(key)) for node in nodes)
        if len(texts) == 1:
            shared[key] = by_node[nodes[0]].get(key)
        else:
            for node in nodes:
                per_node.setdefault(node, {})[key] = by_node[node].get(key)
    return shared, per_node


def settings_id(shared, per_node=None):
    """A short digest of recorded settings: the same settings give the same id (the results table's column)."""
    text = _text(dict(settings=shared or {}, node_settings=per_node or {}))
    return hashlib.sha256(text.encode('utf-8')).hexdigest()[:8]


def describe(shared, per_node=None):
    """One line of ``name=value`` for recorded settings (results.md; secrets by name)."""
    parts = ['%s=%s' % (_name(key), _text(value)) for key, value in (shared or {}).items()]
    for node, values in (per_node or {}).items():
        parts.extend('%s=%s (on %s)' % (_name(key), _text(value), node) for key, value in values.items())
    return ' '.join(parts)


def launch_keys():
    """Every launch knob's key (module_utils/_knobs.py), for the test that SETTINGS and OPERATIONAL cover them."""
    return [knob.key for knob in LAUNCH]
