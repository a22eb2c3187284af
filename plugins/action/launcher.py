# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trainops.multinode.launcher: one step of the launcher's lifecycle (plugins/modules/launcher.py documents it; the
flow and its rules: module_utils/_launcher_steps.py, the launchers: module_utils/_launchers.py).

The step reads the role variables it needs itself (each templated once); the node's steps run the torchrun module on
the node, the controller's steps the launcher's own module (its ``controller_module``) on the controller."""

from __future__ import annotations

import time

from ansible.plugins.action import ActionBase

from ansible_collections.trainops.multinode.plugins.module_utils import _launcher_steps as steps

TORCHRUN = 'trainops.multinode.torchrun'
PARTS = ('node_start', 'start', 'node_started', 'started', 'node_undo', 'undo', 'node_undo_after')
INTERNAL = ('invocation', 'changed', 'failed', 'skipped', 'attempts')


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('part', 'node'))
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        part = self._task.args.get('part')
        if part not in PARTS:
            return dict(result, failed=True, msg='launcher: part must be one of %s, not %r' % (', '.join(PARTS), part))
        failed = task_vars.get('ansible_failed_result')
        ctx = steps.Context(lambda name: self._var(task_vars, name), lambda node, name: self._node_var(task_vars, node, name),
                            self._var(task_vars, '__trainops_nodes'), task_vars.get('ansible_play_hosts'),
                            failed.get('msg') if isinstance(failed, dict) else '')
        result.update(getattr(self, '_' + part)(ctx, task_vars))
        return result

    def _var(self, task_vars, name):
        if name not in task_vars:
            raise KeyError(name)
        return self._templar.template(task_vars[name])

    @staticmethod
    def _node_var(task_vars, node, name):
        try:
            return task_vars['hostvars'][node][name]
        except Exception:  # pylint: disable=broad-except -- a host without the variable (undefined, not a host)
            return None

    def _module(self, name, args, task_vars):
        return self._execute_module(module_name=name, module_args=args, task_vars=task_vars)

    # --- the start ---------------------------------------------------------------------------------------------

    def _node_start(self, ctx, task_vars):
        return self._module(TORCHRUN, steps.node_start(ctx), task_vars)

    def _start(self, ctx, task_vars):
        launcher = ctx.launcher()
        failures = steps.start_failures(ctx, launcher)
        if failures:
            return dict(failed=True, not_started=failures, msg='The job did not start on %s.' % ', '.join(failures))
        args = launcher.start_args(ctx)
        if args is None:
            return dict(changed=False, not_started={})
        return dict(self._module(launcher.controller_module, args, task_vars), not_started={})

    def _node_started(self, ctx, task_vars):
        launcher = ctx.launcher()
        wait = launcher.start_wait(ctx.get(steps.LAUNCH) or {})
        started = ctx.get(steps.STARTED) or {}
        if not wait:
            # the node's own start ran it: its result stays the node's start
            return dict((key, value) for key, value in started.items() if key not in INTERNAL and not key.startswith('_'))
        query = dict(steps.run_args(ctx), state='query', log_lines=20)
        for attempt in range(1, wait + 2):
            answer = self._module(TORCHRUN, query, task_vars)
            if not steps.still_prepared(answer):
                return answer
            if attempt <= wait:
                time.sleep(1)
        return dict(answer, failed=True, attempts=wait + 1)

    def _started(self, ctx, task_vars):
        launcher = ctx.launcher()
        start = ctx.get(steps.LAUNCH) or {}
        if launcher.start_wait(start):
            not_running = steps.not_running(ctx, launcher)
            if not_running:
                return dict(failed=True, not_started=not_running, msg=launcher.start_failure(start, not_running))
        return dict(changed=False, ansible_facts={'__trainops_launcher_record': launcher.start_record(start)})

    # --- the undo of a failed launch ---------------------------------------------------------------------------

    def _node_undo(self, ctx, task_vars, after=False):
        launcher, not_started, todo = steps.undo_plan(ctx)
        if not todo or (after and not launcher.undo_stops_after):
            return dict(skipped=True, msg='nothing to undo here')
        args = steps.undo_node(ctx, not_started, launcher, node=self._task.args.get('node'), after=after)
        return self._module(TORCHRUN, args, task_vars)

    def _node_undo_after(self, ctx, task_vars):
        return self._node_undo(ctx, task_vars, after=True)

    def _undo(self, ctx, task_vars):
        launcher, not_started, todo = steps.undo_plan(ctx)
        if not todo:
            return dict(skipped=True, msg='nothing to undo')
        args = launcher.undo_args(ctx, ctx.get(steps.LAUNCH) or {})
        undone = self._module(launcher.controller_module, args, task_vars) if args is not None else None
        facts = launcher.undo_facts(ctx, not_started, steps.still_away(ctx), undone)
        return dict(changed=bool(undone and undone.get('changed')), undone=undone, ansible_facts=facts)
