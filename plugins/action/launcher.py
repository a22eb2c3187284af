# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trainops.multinode.launcher: one step of the launcher's lifecycle (plugins/modules/launcher.py documents it; the
flow and its rules: module_utils/_launcher_steps.py, the launchers: module_utils/_launchers.py).

The step reads the role variables it needs itself (each templated once); the node's steps run the torchrun module on
the node, the controller's steps the launcher's own module (its ``controller_module``) on the controller."""

from __future__ import annotations

import os
import time

from ansible.plugins.action import ActionBase

from ansible_collections.trainops.multinode.plugins.module_utils import _launcher_steps as steps

TORCHRUN = 'trainops.multinode.torchrun'
PARTS = ('node_start', 'start', 'node_started', 'node_undo', 'undo', 'node_undo_after', 'node_query', 'run',
         'node_stop', 'stop', 'node_stopped', 'stopped')
INTERNAL = ('invocation', 'changed', 'failed', 'skipped', 'attempts')


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('part', 'node', 'control'))
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
                            task_vars.get('__trainops_nodes') and self._var(task_vars, '__trainops_nodes'),
                            task_vars.get('ansible_play_hosts'), failed.get('msg') if isinstance(failed, dict) else '',
                            os.environ.get('USER'))
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
        except Exception:  # pylint: disable=broad-except; a host without the variable (undefined, not a host)
            return None

    def _module(self, name, args, task_vars):
        return self._execute_module(module_name=name, module_args=args, task_vars=task_vars)

    def _poll(self, query, seconds, going_on, task_vars):
        """The torchrun module's ``query`` once a second until ``going_on(answer)`` is false (that answer), at most
        ``seconds`` + 1 times (then the last answer, failed, with ``attempts``), as a task's until/retries/delay 1."""
        for attempt in range(1, seconds + 2):
            answer = self._module(TORCHRUN, query, task_vars)
            if not going_on(answer):
                return answer
            if attempt <= seconds:
                time.sleep(1)
        return dict(answer, failed=True, attempts=seconds + 1)

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
        # a query that fails (no job) ends the wait: the check that follows names the node
        return self._poll(dict(steps.run_args(ctx), state='query', log_lines=20), wait, steps.still_prepared, task_vars)

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

    # --- a run's stop and status (stop.yml, status.yml) ---------------------------------------------------

    def _node_query(self, ctx, task_vars):
        return self._module(TORCHRUN, steps.node_query(ctx, self._task.args.get('control')), task_vars)

    def _run(self, ctx, task_vars):
        control = self._task.args.get('control')
        hosts = list(task_vars.get('ansible_play_hosts_all') or [])
        run, problem = steps.find_run(ctx, hosts, control)
        if problem:
            return dict(run, failed=True, msg=problem)
        if control != 'status':
            return run
        launcher = run['launcher']
        chosen = steps.launcher_of(launcher)
        stats = {steps.PUBLISHED[0]: run['jobs']}
        lines = steps.status_lines(ctx, run)
        if launcher['own_tasks']:
            args = chosen.status_args(launcher)
            answer = self._module(chosen.controller_module, args, task_vars) if args else None
            more, launcher_stats = chosen.status_report(launcher, answer)
            lines += more
            stats.update(launcher_stats)
        for line in lines:
            self._display.display(line)
        return dict(run, lines=lines, ansible_stats={'data': stats, 'per_host': False, 'aggregate': False})

    def _node_stop(self, ctx, task_vars):
        run = ctx.get(steps.RUN) or {}
        launcher = steps.launcher_of(run['launcher'])
        return self._module(TORCHRUN, launcher.stop_node(ctx, run['launcher'], steps.user_stop(ctx, run)), task_vars)

    def _stop(self, ctx, task_vars):
        run = ctx.get(steps.RUN) or {}
        launcher = steps.launcher_of(run['launcher'])
        args = launcher.stop_args(ctx, run['launcher'])
        if args is None:
            return dict(skipped=True, msg='the launcher has no stop of its own for this run')
        return self._module(launcher.controller_module, args, task_vars)

    def _node_stopped(self, ctx, task_vars):
        run = ctx.get(steps.RUN) or {}
        launcher = steps.launcher_of(run['launcher'])
        if run['launcher'].get('refused') is not None:
            return dict(skipped=True, msg='the node stopped its run by its verified pids (the launcher was refused)')
        if steps.stop_refused(run, ctx.get(steps.LAUNCHER_STOP)):
            # the launcher's stop did not go through: the node's own torchrun is stopped by its verified pids
            return self._module(TORCHRUN, steps.user_stop(ctx, run), task_vars)
        wait = launcher.stop_wait(ctx, run['launcher'])
        if not wait:
            return dict(skipped=True, msg='nothing to wait for')
        query = dict(state='query', state_dir=ctx.var('__trainops_state_dir'), node_id=ctx.var('trainops_node_id'),
                     run_id=run['run_id'], log_lines=0)
        answer = self._poll(query, wait, steps.still_running, task_vars)
        return dict(answer, msg='the run still runs %d s after its stop' % wait) if answer.get('attempts') else answer

    def _stopped(self, ctx, task_vars):
        run = ctx.get(steps.RUN) or {}
        launcher = steps.launcher_of(run['launcher'])
        refused = steps.stop_refused(run, ctx.get(steps.LAUNCHER_STOP))
        result = dict(changed=False, refused=refused)
        args = None if refused else launcher.stopped_args(ctx, run['launcher'])
        if args is not None:
            ended = self._module(launcher.controller_module, args, task_vars)
            if ended.get('failed'):
                return dict(ended, refused=refused)
            result.update(changed=bool(ended.get('changed')), ended=ended)
        result['lines'] = steps.stopped_lines(ctx, run, list(task_vars.get('ansible_play_hosts_all') or []))
        return result
