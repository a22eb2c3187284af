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
from ansible_collections.trainops.multinode.plugins.module_utils import _launch_plan, _sweep_play
from ansible_collections.trainops.multinode.plugins.module_utils import _git_state_task as git_state_task
from ansible_collections.trainops.multinode.plugins.module_utils._git_state import GitStateError, Runner
from ansible_collections.trainops.multinode.plugins.plugin_utils._role_action import RoleStepAction
from ansible_collections.trainops.multinode.plugins.plugin_utils._secret_args import literal_secret_problems

ARGUMENT_SPEC = dict(step=dict(type='str', required=True, choices=list(_launch_plan.STEPS)),
                     nodes=dict(type='list', elements='str'), spares=dict(type='bool', default=False),
                     since=dict(type='str', default='before the start'))


ROLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'roles')
"""The collection's roles: their defaults tell a sweep's resume which settings were given again."""


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

    def _read(self, name):
        """A variable, templated; KeyError where it is not defined (module_utils/_sweep_play.py's ``read``)."""
        if name not in self.task_vars:
            raise KeyError(name)
        return self.var(name)

    def _defined(self, name):
        return name in self.task_vars

    def run(self, tmp=None, task_vars=None):
        task_vars = self.task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        result['changed'] = False

        read = self.var
        hostvars = task_vars.get('hostvars') or {}
        step = args['step']
        # a sweep's launch (roles/job/tasks/sweep.yml imports validate.yml with __trainops_sweeping)
        sweeping = _launch_plan.truth(read('__trainops_sweeping', False)) and step in ('knobs', 'nodes')
        if step == 'knobs':
            node = to_text(task_vars.get('inventory_hostname'))
            # a sweep's launch settings first, a resume's from sweep.json (module_utils/_sweep_play.py)
            sweep = _sweep_play.host_plan(self._read, self._defined, _sweep_play.role_defaults(ROLES), node,
                                          os.environ) if sweeping else None
            overlay = sweep.pop('vars') if sweep else {}
            plan = _launch_plan.knobs(read, set(task_vars), node,
                                      literal_secret_problems(context.CLIARGS.get('extra_vars', ())), overlay)
            if sweep is not None:
                plan['fields']['sweep'] = sweep
            # a resume's secrets, read from the controller's environment: never shown (validate.yml's set_fact neither)
            result['_ansible_no_log'] = _launch_plan.SECRET_VAR in plan['fields']['changed']
        elif step == 'nodes':
            plan = _launch_plan.nodes(read, hostvars, node_order, master_addr_problems, args['nodes'], args['spares'])
            if sweeping and not plan['problems']:
                # then the sweep's check and its points, before any node is touched
                plans = dict((host, self.hostvar(host, _launch_plan.KNOBS_RESULT, 'sweep'))
                             for host in read('ansible_play_hosts'))
                message, points = _sweep_play.plan_points(self._read, self._defined, plans,
                                                          read(_launch_plan.KNOBS_RESULT)['sweep'])
                plan['problems'] = [message] if message else []
                plan['fields']['points'] = points
        elif step == 'preflight':
            # the node's one read-only module run, with the options the plan gives it; and the directories the
            # launch marks once the checks passed (checks.yml)
            found = self._execute_module(module_name='trainops.multinode.preflight',
                                         module_args=_launch_plan.preflight_args(read), task_vars=task_vars)
            if isinstance(found.get('paths'), dict) and not found.get('failed'):
                found['unmarked'] = _launch_plan.unmarked(read, found['paths'])
            return found
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
