# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Action plugins that are steps of the job role (roles/job/tasks): they read the role's variables they need from
the task's variables, each templated once, instead of the task passing them in Jinja (the variables each reads are
named in its module's documentation)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.trainops.multinode.plugins.module_utils._launch_records import host_vars

_REQUIRED = object()


class RoleStepAction(ActionBase):
    """``self.var(name)``: a variable of the task, templated; ``self.hostvar(host, name)``: another host's."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    task_vars = None

    def var(self, name, default=_REQUIRED):
        """The task's variable ``name``, templated; ``default`` where it is not defined (AnsibleActionFail without)."""
        if name not in self.task_vars:
            if default is _REQUIRED:
                raise AnsibleActionFail('%s: the variable %s is not defined (the step runs in the role '
                                        'trainops.multinode.job)' % (self._task.action, name))
            return default
        return self._templar.template(self.task_vars[name])

    def hostvar(self, host, *keys):
        """``hostvars[host][key1][key2]...`` (a fact or registered result of another host), None where missing."""
        value = host_vars(self.task_vars.get('hostvars') or {}, host)
        for key in keys:
            if not hasattr(value, 'get'):
                return None
            value = value.get(key)
        return value
