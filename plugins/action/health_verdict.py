# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trainops.multinode.health_verdict: the health check's verdict, on the controller, from the play's own state.
Documented in plugins/modules/health_verdict.py; the rules are module_utils/_health.py (the report) and
module_utils/_retries.py (the gate)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.unsafe_proxy import wrap_var

from ansible_collections.trainops.multinode.plugins.module_utils import _health, _retries

ARGUMENT_SPEC = dict(gate=dict(type='bool', default=False))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _supports_check_mode = False
    _supports_async = False

    def _var(self, task_vars, name, default=None):
        if name not in task_vars:
            return default
        return self._templar.template(task_vars[name])

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        state = self._var(task_vars, '__trainops_health')
        directory = (self._var(task_vars, '__trainops_health_dir') or {}).get('path')
        if not isinstance(state, dict) or not directory:
            raise AnsibleActionFail('health_verdict: no health check ran in this play (__trainops_health, '
                                    '__trainops_health_dir: roles/job/tasks/health_steps.yml)')
        hostvars = task_vars.get('hostvars') or {}
        in_play = set(task_vars.get('ansible_play_hosts') or [])
        node_facts = {}
        for node in state['nodes']:
            if node in in_play:
                found = self._templar.template(hostvars[node].get('__trainops_health_node')) or {}
                node_facts[node] = found.get('health') if isinstance(found, dict) else None
        report, search = _health.finish(state, node_facts)
        try:
            report['file'] = _health.write_report(directory, report, search)
        except OSError as exc:
            raise AnsibleActionFail('health_verdict: cannot write health.json in %s: %s' % (directory, exc))
        result.update(changed=True, verdict=report['verdict'], healthy=report['healthy'], suspects=report['suspects'],
                      file=report['file'], lines=report['lines'], _ansible_verbose_always=True)
        if args['gate']:
            self._gate(task_vars, report, result)
        else:
            result['msg'] = report['lines'] + ['', 'written: ' + report['file']]
            result['ansible_stats'] = dict(aggregate=False, per_host=False, data=dict(trainops_health=dict(
                verdict=report['verdict'], suspects=report['suspects'], file=report['file'])))
        # the verdict and the tables carry what nodes wrote (node names, device names, error text): never templated
        return wrap_var(result)

    def _gate(self, task_vars, report, result):
        """The attempt's nodes after the check (module_utils/_retries.py health_gate), what the attempt does about it,
        and the failure that starts nothing."""
        attempt = self._var(task_vars, '__trainops_attempt') or {}
        gate = _retries.health_gate(report, self._var(task_vars, '__trainops_nodes') or [],
                                    self._var(task_vars, '__trainops_health_spares') or [],
                                    self._var(task_vars, 'trainops_min_nodes', 0),
                                    self._var(task_vars, 'trainops_spare_nodes', ''))
        lines = list(report['lines'])
        if gate['replaced']:
            lines.append('left out: %s; the attempt runs on %s' % (', '.join(r['node'] for r in gate['replaced']),
                                                                   ', '.join(gate['nodes'])))
        if gate['unfit_spares']:
            lines.append('no longer spare nodes: ' + ', '.join(gate['unfit_spares']))
        result.update(msg=lines, gate=gate, changes=bool(gate['excluded'] or gate['unfit_spares']),
                      leaving=gate['excluded'] + gate['unfit_spares'])
        if gate['stop']:
            result.update(failed=True, msg='Not starting attempt %s: %s' % (attempt.get('number'), gate['stop']),
                          lines=lines)
