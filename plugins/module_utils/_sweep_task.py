# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The task of ``trainops.multinode.sweep``: its options, declared once, and what it does with them.

The module runs it on a host; the action plugin of the same name runs it in the task's worker when the task
targets the controller (how sweep.yml uses it, once per point), without shipping a module there.
"""

from __future__ import annotations

from ansible_collections.trainops.multinode.plugins.module_utils._sweep import (
    RESULTS_CSV, RESULTS_MD, SWEEP_FILE, SweepError, finish_sweep, plan_sweep, record_point)
from ansible_collections.trainops.multinode.plugins.module_utils._sweep_results import (
    import_pyplot, render_table, write_plots, write_results)

ARGUMENT_SPEC = dict(
    state=dict(type='str', required=True, choices=['planned', 'recorded', 'reported']),
    root=dict(type='path'),
    name=dict(type='str', default='sweep'),
    sweep=dict(type='dict'),
    workload=dict(type='str', default='train'),
    sweep_dir=dict(type='path'),
    index=dict(type='int'),
    update=dict(type='dict'),
    stopped=dict(type='bool', default=False),
    settings=dict(type='dict'),
)

REQUIRED_IF = [
    ('state', 'planned', ['sweep']),
    ('state', 'recorded', ['sweep_dir', 'index', 'update']),
    ('state', 'reported', ['sweep_dir']),
]


def _planned(params):
    import_pyplot()
    if not params['sweep_dir'] and not params['root']:
        raise SweepError('root or sweep_dir is required with state=planned')
    path, record, resumed = plan_sweep(params['root'], params['name'], params['sweep'] or {}, params['workload'],
                                       sweep_dir=params['sweep_dir'], settings=params['settings'])
    return dict(changed=True, path=path, resumed=resumed, points=record['points'],
                settings_recorded=bool(record.get('runs') and record['runs'][-1].get('settings_recorded')))


def _reported(params):
    record = finish_sweep(params['sweep_dir'], stopped=params['stopped'])
    columns, rows, benches = write_results(params['sweep_dir'], record)
    plots = write_plots(params['sweep_dir'], record, rows, benches)
    return dict(changed=True, path=params['sweep_dir'], outcome=record['outcome'], points=record['points'],
                table=render_table(columns, rows), files=[SWEEP_FILE, RESULTS_CSV, RESULTS_MD, 'results.json'] + plots)


def run(params):
    """The task's result; raises SweepError (module_utils._sweep) with the message to fail with."""
    if params['state'] == 'planned':
        return _planned(params)
    if params['state'] == 'recorded':
        point = record_point(params['sweep_dir'], params['index'], params['update'])
        return dict(changed=True, path=params['sweep_dir'], point=point)
    return _reported(params)
