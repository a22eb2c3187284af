# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Action plugins for modules whose task the job role runs on the controller (``delegate_to: localhost``).

Such a task would ship the module to the controller itself: build its AnsiballZ payload and start a Python
process for it, about 0.3-0.4 s of controller CPU and time each (docs/contributing/benchmarks.md). When the task's connection
is local, ``InWorkerAction`` runs the module's task (its ``module_utils/_<name>_task.py``: options and run) in the
worker that runs the task instead; on any other connection the module runs on the host as usual.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible.plugins.action.normal import ActionModule as NormalAction

from ansible_collections.trainops.multinode.plugins.module_utils._local_copy import is_local


class InWorkerAction(NormalAction):
    """Subclasses set ARGUMENT_SPEC (and REQUIRED_IF), ERROR (the task's exception) and implement run_task."""

    ARGUMENT_SPEC = {}
    REQUIRED_IF = ()
    ERROR = Exception
    _supports_check_mode = True

    def run_task(self, params, check_mode):
        raise NotImplementedError

    @staticmethod
    def failure(exc):
        """The failed result of the task's exception: its message, and what the module would return with it."""
        return {'msg': str(exc)}

    def run(self, tmp=None, task_vars=None):
        if not is_local(self._connection.transport):
            return super(InWorkerAction, self).run(tmp, task_vars)
        result = ActionBase.run(self, tmp, task_vars or {})
        del tmp
        dummy, params = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC, required_if=list(self.REQUIRED_IF))
        try:
            result.update(self.run_task(params, bool(self._task.check_mode)))
        except self.ERROR as exc:  # pylint: disable=catching-non-exception
            result.update(self.failure(exc), failed=True)
        return result
