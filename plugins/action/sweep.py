# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trainops.multinode.sweep in the task's worker when the task targets the controller (plugin_utils._in_worker)."""

from __future__ import annotations

from ansible_collections.trainops.multinode.plugins.module_utils._sweep import SweepError
from ansible_collections.trainops.multinode.plugins.module_utils._sweep_task import ARGUMENT_SPEC, REQUIRED_IF, run
from ansible_collections.trainops.multinode.plugins.plugin_utils._in_worker import InWorkerAction


class ActionModule(InWorkerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    REQUIRED_IF = REQUIRED_IF
    ERROR = SweepError
    _supports_check_mode = False

    def run_task(self, params, check_mode):
        return run(params)
