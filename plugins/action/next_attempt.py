# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node set of an attempt when it changes (roles/job/tasks/next_attempt.yml; see plugins/modules/next_attempt.py
for the documentation): on the controller only, from the role's variables; the rules are in
module_utils/_attempt_plan.py and module_utils/_retries.py."""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.utils.unsafe_proxy import wrap_var

from ansible_collections.trainops.multinode.plugins.filter.node_order import node_order
from ansible_collections.trainops.multinode.plugins.module_utils import _attempt_plan, _retries
from ansible_collections.trainops.multinode.plugins.module_utils._experiment import (
    ExperimentError, create_experiment_dir, link_next)
from ansible_collections.trainops.multinode.plugins.plugin_utils._role_action import RoleStepAction

STATES = ('planned', 'started')
PREFLIGHT = 'trainops.multinode.preflight'


class ActionModule(RoleStepAction):
    _VALID_ARGS = frozenset(('state', ))

    def run(self, tmp=None, task_vars=None):
        self.task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, self.task_vars)
        del tmp
        state = self._task.args.get('state')
        if state not in STATES:
            raise AnsibleActionFail('next_attempt: state must be one of %s, not %r' % (', '.join(STATES), state))
        result.update(self._planned() if state == 'planned' else self._started())
        return result

    def _order_of(self, nodes):
        return node_order(list(nodes), self.task_vars.get('hostvars') or {})

    def _planned(self):
        """On each node (the same plan everywhere): the attempt's node set, then, where the master may have moved,
        this node's check that it reaches it (module preflight; problems in ``reach_again``)."""
        plan = self._plan()
        check = boolean(self.var('trainops_check_reachability', True), strict=False) and not self._task.check_mode
        args = _attempt_plan.reach_args(plan, str(self.var('inventory_hostname')), self.var('trainops_master_port'),
                                        self.var('trainops_socket_ifname'), self.var('trainops_reach_timeout')) if check else None
        if args:
            # what the node found: node text, never templated
            plan['reach_again'] = wrap_var(self._execute_module(module_name=PREFLIGHT, module_args=args, task_vars=self.task_vars))
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return plan

    def _first(self):
        """Whether this node says what the plan does: the first host of the play, where a run_once task runs."""
        hosts = [str(h) for h in self.var('ansible_play_hosts', None) or []]
        return not hosts or str(self.var('inventory_hostname')) == hosts[0]

    def _plan(self):
        attempt, order = dict(self.var('__trainops_attempt')), dict(self.var('__trainops_order'))
        run_id, report = self.var('__trainops_run_id'), self.var('__trainops_report', None)
        if _attempt_plan.is_retry(report, run_id):
            return _attempt_plan.retry_plan(report, attempt, order, self._order_of, run_id,
                                            self.var('__trainops_experiment_dir'), self.var('trainops_retries'))
        gate = _retries.failures_gate(
            os.path.expanduser(str(self.var('trainops_experiments_dir'))), self.var('ansible_inventory_sources', None),
            int(self.var('trainops_exclude_after') or 0), [str(n) for n in self.var('__trainops_nodes')],
            [str(n) for n in attempt.get('spares') or []], self.var('trainops_min_nodes', 0),
            str(self.var('trainops_spare_nodes', '') or ''))
        plan = _attempt_plan.failures_plan(gate, attempt, order, self._order_of)
        for line in plan['lines'] if self._first() else ():
            self._display.display(line)
        if plan['stop']:
            return dict(plan, failed=True, msg='Not starting attempt %s: %s' % (attempt['number'], plan['stop']))
        return plan

    def _started(self):
        plan = self.var('__trainops_nodes_plan')
        # what the task registers, __trainops_experiment: the attempt's experiment as it is, also when the attempt
        # cannot start (the launch's rescue records why in it), or the retry's new one
        experiment = dict(self.var('__trainops_experiment'))
        nodes = [str(n) for n in self.var('__trainops_nodes')]
        attempt = self.var('__trainops_attempt')
        check = boolean(self.var('trainops_check_reachability', True), strict=False) and not self._task.check_mode
        if plan.get('reach') and check:
            problems = dict((node, self.hostvar(node, '__trainops_nodes_plan', 'reach_again', 'problems')) for node in nodes)
            why = _attempt_plan.reach_problem(attempt['number'], nodes, self.var('__trainops_master_host'),
                                              self.var('__trainops_master_addr'),
                                              [str(h) for h in self.var('ansible_play_hosts')], problems)
            if why:
                return dict(experiment, failed=True, changed=False, msg=why)
        if not plan.get('retry'):
            return dict(experiment, changed=False)
        name = _attempt_plan.experiment_name(self.var('trainops_run_name'), self.var('trainops_channels', None),
                                             self.var('trainops_threads', None))
        try:
            created = create_experiment_dir(os.path.expanduser(str(self.var('trainops_experiments_dir'))), name,
                                            check_mode=self._task.check_mode)
            link_next(attempt['previous_dir'], created['name'], check_mode=self._task.check_mode)
        except ExperimentError as exc:
            return dict(experiment, failed=True, changed=False, msg=str(exc))
        self._display.display(_attempt_plan.started_line(attempt, self.var('trainops_retries'), created['name'], nodes,
                                                         self.var('__trainops_master_host'), created['path']))
        return dict(created, changed=True)
