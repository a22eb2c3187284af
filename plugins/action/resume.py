# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The steps of a resume (roles/job/tasks/resume.yml; see plugins/modules/resume.py for the documentation): each
reads the role's variables itself, decides on the controller (module_utils/_resume_plan.py) and runs the module
trainops.multinode.checkpoint_carry on the node where the step touches the node."""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.trainops.multinode.plugins.module_utils import _resume_plan
from ansible_collections.trainops.multinode.plugins.plugin_utils._role_action import RoleStepAction

MODULE = 'trainops.multinode.checkpoint_carry'
STEPS = ('inspect', 'carry', 'pull', 'fetch', 'receive')


class ActionModule(RoleStepAction):
    _VALID_ARGS = frozenset(('step', ))

    def run(self, tmp=None, task_vars=None):
        self.task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, self.task_vars)
        del tmp
        step = self._task.args.get('step')
        if step not in STEPS:
            raise AnsibleActionFail('resume: step must be one of %s, not %r' % (', '.join(STEPS), step))
        self.node = str(self.var('inventory_hostname'))
        self.run_id = str(self.var('__trainops_resume_from'))
        self.run_dir = '%s/runs/%s' % (self.var('__trainops_node_dir'), self.run_id)
        try:
            result.update(getattr(self, '_' + step)())
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result

    def _module(self, **args):
        return self._execute_module(module_name=MODULE, module_args=args, task_vars=self.task_vars)

    def _plan(self):
        return dict(self.var('__trainops_resume'))

    def _inspect(self):
        return self._module(run_dir=self.run_dir, digest=False)

    def _carry(self):
        nodes = [str(node) for node in self.var('__trainops_nodes')]
        pass_config = bool(self.var('__trainops_pass_config'))
        recorded, refused = _resume_plan.resumed_record(self.var('__trainops_experiment_dir'), self.run_id)
        resume = _resume_plan.plan(nodes, self.task_vars.get('hostvars') or {}, self.run_id, recorded, pass_config,
                                   boolean(self.var('trainops_ssh_mesh', False), strict=False))
        output_dir = str(self.var('__trainops_output_dir'))
        found = self.var('__trainops_resume_found', {})
        mine = _resume_plan.for_node(resume, self.node, found, self.run_dir, output_dir, pass_config)
        result = dict(resume, env=mine['env'], args=mine['args'], carried=None, msg=resume['msg'], changed=False)
        if refused:
            result['warnings'] = ['trainops_resume_from: the resumed run\'s manifest was not read: %s' % '; '.join(refused)]
        if not resume['with_run']:
            # every node fails; what the launch records of the resume stays (the launch's rescue)
            result.update(failed=True, msg=_resume_plan.no_run_message(self.run_id, nodes, self.run_dir))
            return result
        if mine['carry']:
            carried = self._module(state='carried', run_dir=self.run_dir, output_dir=output_dir,
                                   expect=(found.get('checkpoint') or {}).get('identity'), digest=mine['digest'])
            if carried.get('failed'):
                return carried
            result.update(carried=dict((key, carried.get(key)) for key in ('dest', 'checksum', 'size', 'method')),
                          changed=bool(carried.get('changed')))
        return result

    def _sent(self):
        return _resume_plan.sent(self._plan(), self.task_vars.get('hostvars') or {})

    def _pull(self):
        resume, sent = self._plan(), self._sent()
        source = resume['source']
        pulled = self._module(state='pulled', source=str(self.hostvar(source, 'ansible_host') or source),
                              source_path=sent.get('dest'), output_dir=str(self.var('__trainops_output_dir')),
                              checksum=sent.get('checksum'), size=sent.get('size'))
        if pulled.get('pulled') is False:
            pulled['warnings'] = list(pulled.get('warnings') or []) + [
                'The checkpoint goes through the controller to %s: the copy from node to node failed (%s: %s).'
                % (self.node, self.node, pulled.get('error'))]
        return pulled

    def _fetch(self):
        """Run once, delegated to the source node: its copy to the controller, for the nodes that need it there."""
        resume = self._plan()
        via, _line = _resume_plan.via_controller(resume, self.task_vars.get('hostvars') or {})
        if not via:
            return dict(changed=False, via_controller=[])
        local = _resume_plan.controller_copy(self.var('__trainops_experiment_dir'), resume['source'])
        # readable by the user only, as the run's own files on the nodes (a finished experiment is never written to)
        os.makedirs(os.path.dirname(local), 0o700, exist_ok=True)
        os.chmod(os.path.dirname(local), 0o700)
        task = self._task.copy()
        task.args = dict(src=self._sent().get('dest'), dest=local, flat=True)
        fetch = self._shared_loader_obj.action_loader.get(
            'ansible.legacy.fetch', task=task, connection=self._connection, play_context=self._play_context,
            loader=self._loader, templar=self._templar, shared_loader_obj=self._shared_loader_obj)
        fetched = fetch.run(task_vars=self.task_vars)
        if fetched.get('failed'):
            return fetched
        return dict(changed=bool(fetched.get('changed')), via_controller=via, dest=local)

    def _receive(self):
        resume, sent = self._plan(), self._sent()
        local = _resume_plan.controller_copy(self.var('__trainops_experiment_dir'), resume['source'])
        if self._task.check_mode:
            # nothing was carried or fetched to send (the module copies nothing in check mode)
            return dict(changed=True, dest='%s/checkpoint.pt' % str(self.var('__trainops_output_dir')).rstrip('/'))
        if not self._connection._shell.tmpdir:
            self._make_tmp_path()
        remote = self._connection._shell.join_path(self._connection._shell.tmpdir, 'checkpoint.pt')
        self._transfer_file(local, remote)
        self._fixup_perms2((self._connection._shell.tmpdir, remote))
        return self._module(state='received', src=remote, output_dir=str(self.var('__trainops_output_dir')),
                            checksum=sent.get('checksum'), size=sent.get('size'))
