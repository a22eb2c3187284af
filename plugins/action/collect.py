# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trainops.multinode.collect: the node's part of the collect (roles/job/tasks/collect.yml; documented in
plugins/modules/collect.py). It stops the job on the node when a node of the play failed, reads the node's final job
state (the torchrun module's query), lists the node's outputs and profiles (ansible.builtin.find: regular files,
symbolic links neither listed nor followed), plans where each lands in the experiment (module_utils/_collect_node.py,
whose rule refuses any path the node wrote that would leave the node's place) and fetches them (the fetch action)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.utils.unsafe_proxy import wrap_var

from ansible_collections.trainops.multinode.plugins.module_utils import _collect_node
from ansible_collections.trainops.multinode.plugins.module_utils._collect import CollectRefused
from ansible_collections.trainops.multinode.plugins.module_utils._outcomes import OutcomeError
from ansible_collections.trainops.multinode.plugins.plugin_utils._role_action import RoleStepAction

TORCHRUN = 'trainops.multinode.torchrun'
FIND = 'ansible.legacy.find'
INTERNAL = ('invocation', '_ansible_parsed', '_ansible_no_log')


class ActionModule(RoleStepAction):
    _VALID_ARGS = frozenset()

    def run(self, tmp=None, task_vars=None):
        self.task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, self.task_vars)
        del tmp
        try:
            result.update(self._collect())
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        # the node's answers (its job, log lines, file names) are never templated again
        return wrap_var(result)

    def _module(self, name, **args):
        return self._execute_module(module_name=name, module_args=args, task_vars=self.task_vars)

    def _collect(self):
        node = str(self.var('inventory_hostname'))
        state_dir, run_id = self.var('trainops_collect_state_dir'), str(self.var('trainops_collect_run_id'))
        run = dict(state_dir=state_dir, node_id=self.var('trainops_node_id'), run_id=run_id)
        stopped = self._stop(run)
        if stopped is not None and stopped.get('failed'):
            return dict(stopped, stopped=None)
        final = self._module(TORCHRUN, state='query', log_lines=int(self.var('trainops_log_lines')), **run)
        if final.get('failed'):
            return final
        warnings = list(final.get('warnings') or [])
        run_dir = _collect_node.node_run_dir(final.get('job'), state_dir, run_id)
        outputs = self._find(run_dir + '/outputs', warnings, patterns=self.var('trainops_collect_patterns'))
        profiles = None
        if self.var('trainops_profile', ''):
            profiles = self._find(run_dir + '/profiles', warnings, recurse=True)
        try:
            plans = _collect_node.node_plan(self.var('trainops_collect_experiment_dir'), node,
                                            self.var('trainops_collect_nodes'), final.get('job'), run_dir,
                                            outputs, profiles)
        except CollectRefused as exc:
            raise AnsibleActionFail('collect_plan: %s' % exc)
        fetched, failures = self._fetch(_collect_node.planned_files(plans))
        result = dict((key, value) for key, value in final.items() if key not in INTERNAL)
        result.update(stopped=stopped, collected=plans, fetched=fetched, warnings=warnings,
                      changed=bool(fetched) or bool(stopped and stopped.get('changed')))
        if failures:
            result.update(failed=True, msg='the fetch from %s failed: %s' % (node, '; '.join(failures)))
        return result

    def _stop(self, run):
        """The stop of the job on the node when a node of the play failed (its error recorded), else None."""
        play = self.var('ansible_play_hosts')
        errors = [self.hostvar(host, '__trainops_run_error') for host in play]
        try:
            why = _collect_node.stop_reason_detail(errors, self.hostvar(str(self.var('inventory_hostname')),
                                                                        '__trainops_waited', 'verdict', 'state'))
        except OutcomeError as exc:
            raise AnsibleActionFail('verdict_stop_reason: %s' % exc)
        if why is None:
            return None
        # the first stop's reason is kept on the node: a node the wait stopped keeps that reason
        return self._module(TORCHRUN, state='stopped', stop_timeout=int(self.var('trainops_stop_timeout')),
                            stop_reason=why[0], stop_detail=why[1], **run)

    def _find(self, path, warnings, **args):
        """The paths of the regular files under ``path`` on the node (symbolic links neither listed nor followed)."""
        found = self._module(FIND, paths=path, file_type='file', follow=False, **args)
        if found.get('failed'):
            raise AnsibleActionFail('cannot list %s: %s' % (path, found.get('msg')))
        warnings.extend(found.get('warnings') or [])
        return _collect_node.found_paths(found)

    def _fetch(self, files):
        """Each planned file fetched from the node to its place (one missing on the node is left out): how many were
        fetched, and what failed."""
        fetched, failures = 0, []
        for item in files:
            task = self._task.copy()
            task.args = dict(src=item['src'], dest=item['dest'], flat=True, fail_on_missing=False)
            fetch = self._shared_loader_obj.action_loader.get(
                'ansible.legacy.fetch', task=task, connection=self._connection, play_context=self._play_context,
                loader=self._loader, templar=self._templar, shared_loader_obj=self._shared_loader_obj)
            answer = fetch.run(task_vars=self.task_vars)
            if answer.get('failed'):
                failures.append('%s: %s' % (item['src'], answer.get('msg')))
            elif answer.get('changed'):
                fetched += 1
        return fetched, failures
