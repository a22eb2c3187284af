# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trainops.multinode.health_verdict: the health check's first step on each node and its verdict, on the controller,
from the play's own state (roles/job/tasks/health_check.yml). Documented in plugins/modules/health_verdict.py; the
rules are module_utils/_health.py (the search, the report) and module_utils/_retries.py (the gate)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.utils.unsafe_proxy import wrap_var

from ansible_collections.trainops.multinode.plugins.filter.node_order import node_order
from ansible_collections.trainops.multinode.plugins.module_utils import _health, _retries
from ansible_collections.trainops.multinode.plugins.plugin_utils._role_action import RoleStepAction

ARGUMENT_SPEC = dict(step=dict(type='str', default='verdict', choices=['begin', 'verdict']),
                     gate=dict(type='bool'))
NODE_HEALTH = 'trainops.multinode.node_health'


class ActionModule(RoleStepAction):
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        self.task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, self.task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        # the check before an attempt is the one given the spare nodes to check (attempt.yml)
        gate = args['gate'] if args['gate'] is not None else '__trainops_health_spares' in self.task_vars
        try:
            result.update(self._begin(gate) if args['step'] == 'begin' else self._verdict(gate))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        # the node's state, the launch's facts, the verdict and the tables carry what nodes wrote (node names, device
        # names, error text): never templated
        return wrap_var(result)

    def _begin(self, gate):
        """On each node, before anything of the check runs: the nodes to check in rank order, the settings checked
        and the search with nothing measured (the same on every node), the launch's facts to give back after the
        check (before an attempt), then the node's accelerator and NIC state (module node_health)."""
        node = str(self.var('inventory_hostname'))
        if gate:
            nodes = [str(n) for n in self.var('__trainops_nodes')]
            order = node_order(nodes + [str(s) for s in self.var('__trainops_health_spares')],
                               self.task_vars.get('hostvars') or {})
            saved = dict((name, self.var(name)) for name in _health.LAUNCH_FACTS)
            # the launch's rank order and attempt as they are, unless the verdict changes them
            saved.update(__trainops_order=self.var('__trainops_order'), __trainops_next_attempt=self.var('__trainops_attempt'))
        else:
            nodes, order, saved = None, dict(self.var('__trainops_order')), None
        begun = dict(order=order, gate=gate, changed=False, restore={node: saved} if saved else {},
                     name=_health.check_name(gate, self.var('__trainops_health_name', None),
                                             (saved or {}).get('__trainops_experiment')))
        try:
            begun['search'] = _health.search_start(order['nodes'], order['master'], _health.settings(
                self.var('trainops_health_min_busbw', None), self.var('trainops_health_slow_ratio', 0.5),
                self.var('trainops_health_all_pairs_max', 8), self.var('trainops_health_timeout', 60)))
        except _health.HealthError as exc:
            # before any node is touched; the launch's facts stay what they are
            return dict(begun, failed=True, msg=str(exc))
        if gate and order['nodes'] and node == order['nodes'][0]:
            self._display.display(_health.checking_line(self.var('__trainops_attempt')['number'], nodes,
                                                        self.var('__trainops_run_id')))
        if node not in order['nodes']:
            return begun
        found = self._execute_module(module_name=NODE_HEALTH, module_args=dict(ignore=self.var('trainops_health_ignore', [])),
                                     task_vars=self.task_vars)
        found.update(begun)
        return found

    def _verdict(self, gate):
        """Once, after the check's steps: health.json, the tables and the verdict; the published stats (the check) or
        the attempt's nodes (before an attempt) and what each node of the play sets again (``restore``, also when the
        verdict fails: the launch's facts); why the play stops, or nothing."""
        if not gate:
            return self._judged(gate)
        # what each node's first step kept (the task registers the verdict where that step registered it)
        restore = {}
        for node in self.var('ansible_play_hosts_all', None) or []:
            kept = (self.hostvar(node, '__trainops_health_check', 'restore') or {}).get(node)
            if kept is not None:
                restore[str(node)] = dict(kept)
        try:
            result = self._judged(gate)
        except Exception as exc:  # pylint: disable=broad-except  # whatever fails, the launch gets its facts back
            return dict(failed=True, msg=str(exc), restore=restore, failure='')
        if result.get('attempt') is not None:
            for kept in restore.values():
                kept.update(__trainops_order=result['order'], __trainops_next_attempt=result['attempt'])
        result['restore'] = restore
        return result

    def _judged(self, gate):
        if self._task.check_mode:
            # nothing was measured: no verdict, no health.json
            return dict(skipped=True, changed=False, msg='the health check has no verdict in check mode', failure='')
        state = self.var('__trainops_health', None)
        directory = (self.var('__trainops_health_dir', None) or {}).get('path')
        if not isinstance(state, dict) or not directory:
            raise AnsibleActionFail('health_verdict: no health check ran in this play (__trainops_health, '
                                    '__trainops_health_dir: roles/job/tasks/health_steps.yml)')
        in_play = set(self.var('ansible_play_hosts', None) or [])
        node_facts = {}
        for node in state['nodes']:
            if node in in_play:
                found = self.hostvar(node, '__trainops_health_check')
                found = self._templar.template(found) if found is not None else {}
                node_facts[node] = found.get('health') if isinstance(found, dict) else None
        report, search = _health.finish(state, node_facts)
        try:
            report['file'] = _health.write_report(directory, report, search)
        except OSError as exc:
            raise AnsibleActionFail('health_verdict: cannot write health.json in %s: %s' % (directory, exc))
        result = dict(changed=True, verdict=report['verdict'], healthy=report['healthy'], suspects=report['suspects'],
                      file=report['file'], lines=report['lines'], _ansible_verbose_always=True)
        if not gate:
            result.update(msg=report['lines'] + ['', 'written: ' + report['file']], failure=_health.failure(report),
                          ansible_stats=dict(aggregate=False, per_host=False, data=dict(trainops_health=dict(
                              verdict=report['verdict'], suspects=report['suspects'], file=report['file']))))
            return result
        return self._gate(report, result)

    def _gate(self, report, result):
        """The attempt's nodes after the check (module_utils/_retries.py health_gate): the attempt and the nodes'
        order from here on where a node or spare leaves, the lines that say so, and why the attempt does not start."""
        attempt = dict(self.var('__trainops_attempt'))
        gate = _retries.health_gate(report, self.var('__trainops_nodes'), self.var('__trainops_health_spares'),
                                    self.var('trainops_min_nodes', 0), self.var('trainops_spare_nodes', ''))
        lines = list(report['lines'])
        if gate['replaced']:
            lines.append('left out: %s; the attempt runs on %s' % (', '.join(r['node'] for r in gate['replaced']),
                                                                   ', '.join(gate['nodes'])))
        if gate['unfit_spares']:
            lines.append('no longer spare nodes: ' + ', '.join(gate['unfit_spares']))
        changes = bool(gate['excluded'] or gate['unfit_spares'])
        result.update(msg=lines, gate=gate, changes=changes, leaving=gate['excluded'] + gate['unfit_spares'],
                      failure=_health.failure(report, gate, attempt))
        if changes and not gate['stop']:
            result.update(attempt=_health.gated_attempt(attempt, gate),
                          order=node_order(list(gate['nodes']), self.task_vars.get('hostvars') or {}))
        return result
