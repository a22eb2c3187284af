# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The launch plan of roles/job, on the controller (plugins/modules/launch_plan.py documents it; the steps are
module_utils/_launch_plan.py). Each step reads the variables it needs from the task's variables, each templated
once; the task registers what it finds (roles/job/vars/main.yml names its fields). Facts are not used: Ansible
deprecates top-level injected facts."""

from __future__ import annotations

import os
import shutil

from ansible import context
from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.trainops.multinode.plugins.filter.node_order import master_addr_problems, node_order
from ansible_collections.trainops.multinode.plugins.module_utils import _launch_plan
from ansible_collections.trainops.multinode.plugins.module_utils import _git_state_task as git_state_task
from ansible_collections.trainops.multinode.plugins.module_utils._git_state import GitStateError, Runner
from ansible_collections.trainops.multinode.plugins.plugin_utils._role_action import RoleStepAction
from ansible_collections.trainops.multinode.plugins.plugin_utils._secret_args import literal_secret_problems

ARGUMENT_SPEC = dict(step=dict(type='str', required=True, choices=list(_launch_plan.STEPS)),
                     nodes=dict(type='list', elements='str'), spares=dict(type='bool', default=False),
                     since=dict(type='str', default='before the start'))


def controller_git(path):
    """The controller's checkout of the workspace, as the action git_state reads it (``scope``): ``{'git': state}``,
    or ``{'msg': why}`` (with the state where there is one) when it cannot be read; never a failure."""
    git = shutil.which('git')
    try:
        path = os.path.expanduser(os.path.expandvars(str(path)))
        return git_state_task.run(dict(path=path, remote='origin', max_files=50, untracked=True, scope=True),
                                  Runner.local(git) if git else None)
    except GitStateError as exc:
        return dict({'msg': exc.msg}, **({'git': exc.state} if exc.state is not None else {}))


class ActionModule(RoleStepAction):
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        task_vars = self.task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        result['changed'] = False

        read = self.var
        hostvars = task_vars.get('hostvars') or {}
        step = args['step']
        if step == 'knobs':
            plan = _launch_plan.knobs(read, set(task_vars), to_text(task_vars.get('inventory_hostname')),
                                      literal_secret_problems(context.CLIARGS.get('extra_vars', ())))
        elif step == 'nodes':
            plan = _launch_plan.nodes(read, hostvars, node_order, master_addr_problems, args['nodes'], args['spares'])
        elif step == 'preflight':
            # the node's one read-only module run, with the options the plan gives it
            return self._execute_module(module_name='trainops.multinode.preflight',
                                        module_args=_launch_plan.preflight_args(read), task_vars=task_vars)
        elif step == 'checks':
            plan = _launch_plan.checks(read, hostvars, bool(self._task.check_mode or task_vars.get('ansible_check_mode')),
                                       controller_git(read('trainops_workspace_src')))
        elif step == 'in_play':
            plan = dict(fields={}, problems=_launch_plan.left_nodes(read, args['since']), lines=[])
        else:
            try:
                plan = _launch_plan.shares(read, hostvars)
            except ValueError as exc:
                raise AnsibleActionFail('launch_plan shares: %s' % exc)
        if plan['problems']:
            result.update(failed=True, msg='\n'.join(plan['problems']))
            return result
        result.update(plan['fields'])
        if plan['lines']:
            # shown without -v, as an assert's success_msg is
            result.update(msg=plan['lines'], _ansible_verbose_always=True)
        return result
