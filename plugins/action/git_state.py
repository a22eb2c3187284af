# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trainops.multinode.git_state in the task's worker when the task targets the controller (plugin_utils._in_worker)."""

from __future__ import annotations

import shutil

from ansible_collections.trainops.multinode.plugins.module_utils._git_state import GitStateError, Runner
from ansible_collections.trainops.multinode.plugins.module_utils._git_state_task import ARGUMENT_SPEC, run
from ansible_collections.trainops.multinode.plugins.plugin_utils._in_worker import InWorkerAction


class ActionModule(InWorkerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    ERROR = GitStateError

    def run_task(self, params, check_mode):
        git = shutil.which('git')
        return run(params, Runner.local(git) if git else None)

    @staticmethod
    def failure(exc):
        return dict({'msg': exc.msg}, **({'git': exc.state} if exc.state is not None else {}))
