# -*- coding: utf-8 -*-
# Copyright (c) 2025, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller CPU per task, for bench/launch_latency (not part of the collection)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: controller_cpu
type: aggregate
short_description: CPU seconds of the controller per task and per host
description:
  - Adds up, per task, the user and system CPU seconds of the ansible-playbook process and of the workers
    it forked and reaped (module runs on a local connection, ssh clients, rsync) while the task ran, and
    counts the hosts the task ran for. At the end of the play it writes them as JSON to the file named
    by E(TRAINOPS_CONTROLLER_CPU_OUT), or prints a table; C(main_cpu) is the ansible-playbook process's own
    CPU (the strategy's loop, results and templating, in one Python thread whatever the forks).
  - With E(TRAINOPS_CONTROLLER_TASKS_OUT), it also appends a line per task as the task starts (the epoch
    time, a tab and the task's name), so that a benchmark sees which task runs now.
  - The ssh ControlPersist masters run detached and are not counted. A worker's CPU counts once it is joined,
    which the callback does when the next task starts; the linear strategy has every worker of a task ended by then.
requirements:
  - enabled in callbacks_enabled (or ANSIBLE_CALLBACKS_ENABLED)
"""

import json
import multiprocessing
import os
import time

from ansible.plugins.callback import CallbackBase


def _own_cpu():
    t = os.times()
    return t.user + t.system


def _cpu():
    # join the workers that have ended (multiprocessing reaps them only when it starts the next one), so that
    # their CPU counts for the task they ran
    multiprocessing.active_children()
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'controller_cpu'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._rows = []
        self._current = None
        self._start = _cpu()
        self._own_start = _own_cpu()
        self._wall = time.monotonic()

    def _close(self):
        if self._current is not None:
            self._current['cpu'] = round(_cpu() - self._current.pop('_cpu0'), 3)
            self._current['wall'] = round(time.monotonic() - self._current.pop('_wall0'), 3)
            self._rows.append(self._current)
            self._current = None

    def _open(self, name):
        self._close()
        started = os.environ.get('TRAINOPS_CONTROLLER_TASKS_OUT')
        if started:
            with open(started, 'a') as handle:
                handle.write('%.3f\t%s\n' % (time.time(), ' '.join(name.split())))
        self._current = {'task': name, 'hosts': 0, 'skipped': 0, '_cpu0': _cpu(), '_wall0': time.monotonic()}

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._open(task.get_name())

    def v2_playbook_on_handler_task_start(self, task):
        self._open(task.get_name())

    def _count(self, skipped=False):
        if self._current is not None:
            self._current['hosts'] += 1
            self._current['skipped'] += int(skipped)

    def v2_runner_on_ok(self, result):
        self._count()

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._count()

    def v2_runner_on_unreachable(self, result):
        self._count()

    def v2_runner_on_skipped(self, result):
        self._count(skipped=True)

    def v2_playbook_on_stats(self, stats):
        self._close()
        total = round(_cpu() - self._start, 3)
        out = os.environ.get('TRAINOPS_CONTROLLER_CPU_OUT')
        report = {'total_cpu': total, 'main_cpu': round(_own_cpu() - self._own_start, 3), 'wall': round(time.monotonic() - self._wall, 3), 'tasks': self._rows}
        if out:
            with open(out, 'w') as handle:
                json.dump(report, handle, indent=1)
            return
        self._display.display('CONTROLLER CPU per task (s, hosts):')
        for row in sorted(self._rows, key=lambda r: -r['cpu']):
            self._display.display('%7.3f %3d  %s' % (row['cpu'], row['hosts'], row['task']))
        self._display.display('%7.3f total' % total)
