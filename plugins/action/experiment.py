# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trainops.multinode.experiment in the task's worker when the task targets the controller (plugin_utils._in_worker)."""

from __future__ import annotations

from ansible_collections.trainops.multinode.plugins.module_utils._experiment import ExperimentError
from ansible_collections.trainops.multinode.plugins.module_utils._experiment_task import ARGUMENT_SPEC, REQUIRED_IF, run
from ansible_collections.trainops.multinode.plugins.plugin_utils._in_worker import InWorkerAction


class ActionModule(InWorkerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    REQUIRED_IF = REQUIRED_IF
    ERROR = ExperimentError

    def run_task(self, params, check_mode):
        return run(params, check_mode=check_mode)
