# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller's steps of playbooks/sweep.yml (roles/job/tasks/sweep.yml and point.yml); the documentation is
plugins/modules/sweep_step.py. Each step reads the play's variables it needs itself, templated once here, instead of
the task passing them; the decisions are module_utils/_sweep_play.py's, sweep.json is module_utils/_sweep.py's.

The sweep's launch settings (a resume's from sweep.json) and its points are the launch plan's knobs and nodes steps
(the action trainops.multinode.launch_plan, roles/job/tasks/validate.yml imported with __trainops_sweeping), registered
as __trainops_plan_knobs (``sweep``: each node's) and __trainops_plan (``points``).

Variables read, by step:

- ``planned`` (once): trainops_experiments_dir, __trainops_nodes, __trainops_plan_knobs of every node and
  __trainops_plan;
- ``started``: __trainops_sweep_record (the planned step's result), __trainops_point, __trainops_experiment_dir;
- ``finished``: __trainops_sweep_record, __trainops_point, __trainops_plan_knobs, __trainops_point_record (the
  previous point's result), __trainops_point_error of every host of the play;
- ``reported``: __trainops_sweep_record, __trainops_point_record.

Nothing runs on a node. What a job wrote (a manifest's outcome detail, the results table) comes back wrapped as unsafe:
it is never templated again.
"""

from __future__ import annotations

import os
import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.unsafe_proxy import wrap_var

from ansible_collections.trainops.multinode.plugins.module_utils import _sweep_play
from ansible_collections.trainops.multinode.plugins.module_utils._experiment_metrics import MANIFEST_FILE
from ansible_collections.trainops.multinode.plugins.module_utils._node_files import read_json_object
from ansible_collections.trainops.multinode.plugins.module_utils._sweep import (
    RESULTS_CSV, RESULTS_MD, SWEEP_FILE, SweepError, finish_sweep, plan_sweep, read_sweep, record_point)
from ansible_collections.trainops.multinode.plugins.module_utils._sweep_results import (
    import_pyplot, render_table, write_plots, write_results)

STEPS = ('planned', 'started', 'finished', 'reported')

PLAN = '__trainops_plan_knobs'
"""Each node's knobs step of the launch plan: its ``sweep`` (module_utils/_sweep_play.py, host_plan)."""


def _utc():
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('step',))
    _requires_connection = False
    _supports_check_mode = False
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=dict(step=dict(type='str', required=True, choices=list(STEPS))))
        self._vars = task_vars
        try:
            result.update(getattr(self, '_' + args['step'])())
        except SweepError as exc:
            result.update(failed=True, msg=str(exc))
        return result

    # the play's variables -------------------------------------------------------------------------------------

    def _read(self, name):
        if name not in self._vars:
            raise KeyError(name)
        return self._templar.template(self._vars[name])

    def _defined(self, name):
        return name in self._vars

    def _need(self, name):
        try:
            return self._read(name)
        except KeyError:
            raise AnsibleActionFail('sweep_step: the variable %s is not defined (run the step from roles/job/tasks/sweep.yml)'
                                    % name)

    def _hosts_var(self, hosts, name):
        """``{host: value}`` of ``name`` for each of ``hosts`` that has it."""
        hostvars = self._vars.get('hostvars') or {}
        found = {}
        for host in hosts:
            host_vars = hostvars[host]
            if name in host_vars:
                found[host] = host_vars[name]
        return found

    # the steps ------------------------------------------------------------------------------------------------

    def _planned(self):
        import_pyplot()
        mine = self._need(PLAN)['sweep']
        hosts = self._need('ansible_play_hosts')
        settings = dict((host, plan['sweep']['settings']) for host, plan in self._hosts_var(hosts, PLAN).items())
        path, record, resumed = plan_sweep(self._need('trainops_experiments_dir'), mine['name'], mine['grid'] or {},
                                           mine['workload'], sweep_dir=mine['sweep_dir'] or None, settings=settings)
        recorded = bool(record.get('runs') and record['runs'][-1].get('settings_recorded'))
        lines = _sweep_play.plan_lines(path, resumed, recorded, record['points'], mine['workload'],
                                       len(self._need('__trainops_nodes')))
        # the indexes of the points to run (sweep.yml loops over those of the launch plan's points, __trainops_plan)
        todo = [point['index'] for point in _sweep_play.to_run(record['points'], self._need('__trainops_plan')['points'])]
        # the plan, shown without -v as an assert's success_msg is
        return dict(changed=True, path=path, resumed=resumed, settings_recorded=recorded, todo=todo, msg=lines,
                    _ansible_verbose_always=True)

    def _started(self):
        point = record_point(self._need('__trainops_sweep_record')['path'], int(self._need('__trainops_point')['index']),
                             dict(status='running', experiment_dir=self._need('__trainops_experiment_dir'),
                                  outcome='running', outcome_detail=None, started_at=_utc(), finished_at=None))
        return dict(changed=True, point=point)

    def _finished(self):
        path = self._need('__trainops_sweep_record')['path']
        point = self._need('__trainops_point')
        label = point['vars']['__trainops_wait_label']
        previous = self._vars.get('__trainops_point_record') or {}
        if previous.get('stop'):
            return dict(changed=False, stop=True, msg='%s: not run, the sweep stopped at a failed point (stop_on_failure)' % label,
                        _ansible_verbose_always=True)
        index = int(point['index'])
        experiment_dir = read_sweep(path)['points'][index - 1].get('experiment_dir')
        manifest, refused = (None, [])
        if experiment_dir:
            manifest, refused = read_json_object(os.path.join(experiment_dir, MANIFEST_FILE), name=MANIFEST_FILE)
        errors = [str(e) for e in self._hosts_var(self._need('ansible_play_hosts_all'), '__trainops_point_error').values() if e]
        update = _sweep_play.point_outcome(manifest, refused, errors)
        update['finished_at'] = _utc()
        recorded = record_point(path, index, update)
        stop = recorded['outcome'] != _sweep_play.SUCCEEDED and self._need(PLAN)['sweep']['stop_on_failure']
        return dict(changed=True, stop=bool(stop), msg=wrap_var(_sweep_play.point_line(label, recorded)),
                    _ansible_verbose_always=True)

    def _reported(self):
        path = self._need('__trainops_sweep_record')['path']
        stopped = bool((self._vars.get('__trainops_point_record') or {}).get('stop'))
        record = finish_sweep(path, stopped=stopped)
        columns, rows, benches = write_results(path, record)
        plots = write_plots(path, record, rows, benches)
        files = [SWEEP_FILE, RESULTS_CSV, RESULTS_MD, 'results.json'] + plots
        report = _sweep_play.report(path, record, render_table(columns, rows), files)
        return wrap_var(dict(changed=True, outcome=record['outcome'], lines=report['lines'], failure=report['failure'],
                             ansible_stats=dict(data=dict(trainops_sweep=report['stats']), per_host=False, aggregate=False)))
