# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trainops.multinode.experiment in the task's worker when the task targets the controller (plugin_utils._in_worker).

The states of the launch's manifest (``launched``, ``failed``, ``collected``; see plugins/modules/experiment.py) read
the run's variables here, each templated once (as plugins/action/nccl_env.py does), and the nodes' registered
results through ``hostvars``; the manifest is built by module_utils/_experiment_manifest.py and written by
module_utils/_experiment.py. Variables read:

* every state: ``__trainops_publish`` (default true: the experiment is published with set_stats' ``ansible_stats``);
* ``created`` without root or name: ``trainops_experiments_dir``, ``trainops_run_name``, ``trainops_channels``,
  ``trainops_threads``;
* ``launched``: what the launcher action registered (``__trainops_launch`` on the controller, every node's
  ``__trainops_started``: module_utils/_launcher_steps.py, ``started``), ``__trainops_run_id``,
  ``__trainops_experiment_dir``, ``__trainops_parameters``, ``__trainops_nnodes``, ``__trainops_nodes``,
  ``__trainops_order``, ``__trainops_master_host``, ``__trainops_master_addr``, ``__trainops_git_ref`` (optional),
  ``__trainops_root_shares``, ``__trainops_workspace_shares``, ``__trainops_attempt``, ``__trainops_resumed_from``,
  ``trainops_nproc_per_node``, ``trainops_master_port``, ``trainops_workspace_src``, ``trainops_git_check``,
  ``trainops_sync_workspace``, ``trainops_training_network``, ``trainops_launcher``; for the lines it shows (``msg``):
  ``trainops_wait``, ``trainops_progress_interval``, ``trainops_unreachable_grace``, ``trainops_stall_timeout``,
  ``__trainops_pb``, ``__trainops_ext``, ``__trainops_spares_arg``;
* ``failed``: those of the run, and every node's ``__trainops_launch_error``;
* ``collected``: the ``trainops_collect_*`` variables, ``trainops_straggler_threshold``, and every node's
  ``__trainops_final`` (the action trainops.multinode.collect's answer: its job, log lines and the files refused),
  ``__trainops_waited``, ``__trainops_run_error``. It first asks the run's launcher how the job ended, on the
  controller (the launcher's own module, e.g. Slurm's accounting of its step: module_utils/_launchers.py, ``end_args``
  and ``end_answer``; the run's launcher from the nodes' final jobs: _launcher_steps.run_launcher_of).
"""

from __future__ import annotations

from ansible.module_utils.ansible_release import __version__ as ANSIBLE_VERSION

from ansible_collections.trainops.multinode.plugins.module_utils import _launcher_steps
from ansible_collections.trainops.multinode.plugins.module_utils._experiment import ExperimentError
from ansible_collections.trainops.multinode.plugins.module_utils._experiment_manifest import (
    FAILED,
    ManifestError,
    as_bool,
    collect_failure,
    collect_inputs,
    experiment_name,
    failed_manifest,
    follow_lines,
    launch_errors,
    launch_manifest,
    read_manifest,
    recorded_manifest,
    stamp,
    stats,
)
from ansible_collections.trainops.multinode.plugins.module_utils._experiment_task import ACTION_REQUIRED_IF, ARGUMENT_SPEC, run
from ansible_collections.trainops.multinode.plugins.module_utils._launch_records import host_vars
from ansible_collections.trainops.multinode.plugins.plugin_utils._in_worker import InWorkerAction

_MISSING = object()


class ActionModule(InWorkerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    REQUIRED_IF = ACTION_REQUIRED_IF
    ERROR = (ExperimentError, ManifestError)

    _task_vars = None

    def run(self, tmp=None, task_vars=None):
        self._task_vars = task_vars or {}
        return super(ActionModule, self).run(tmp, task_vars)

    def _var(self, name, default=_MISSING):
        """The run variable ``name``, templated; ``default`` when it is not defined (ManifestError without one)."""
        if name not in self._task_vars:
            if default is _MISSING:
                raise ManifestError('the variable %s is not defined: the experiment action builds the manifest from the '
                                    "job role's variables (run it through the role)" % name)
            return default
        return self._templar.template(self._task_vars[name])

    def _published(self, result, data):
        """``result`` with the experiment published for ansible-runner and CI (set_stats), unless __trainops_publish is
        false (a health check's measurement: a launch's stats are its job's)."""
        if as_bool(self._var('__trainops_publish', True)):
            result['ansible_stats'] = dict(data=dict(trainops_experiment=data), per_host=False, aggregate=False)
        return result

    def run_task(self, params, check_mode):
        state = params['state']
        if state == 'created':
            params = dict(params, root=params['root'] or self._var('trainops_experiments_dir'),
                          name=params['name'] or experiment_name(self._var))
            return run(params, check_mode=check_mode)
        if state not in ('launched', 'failed', 'collected'):
            return run(params, check_mode=check_mode)
        hostvars = self._task_vars.get('hostvars') or {}
        return getattr(self, '_' + state)(params, check_mode, hostvars)

    def _launch(self, hostvars):
        """The launch as the launcher's steps read it (module_utils/_launcher_steps.py)."""
        def var(name):
            if name not in self._task_vars:
                raise KeyError(name)
            return self._templar.template(self._task_vars[name])
        return _launcher_steps.Context(var, lambda node, name: host_vars(hostvars, node).get(name),
                                       self._var('__trainops_nodes'), self._task_vars.get('ansible_play_hosts'))

    def _launched(self, params, check_mode, hostvars):
        failure, launcher = _launcher_steps.started(self._launch(hostvars))
        if failure:
            raise ManifestError(failure)
        path = self._var('__trainops_experiment_dir')
        manifest = launch_manifest(self._var, hostvars, ANSIBLE_VERSION, launcher=launcher)
        written = run(dict(params, state='reported', path=path, manifest=manifest), check_mode=check_mode)
        # the lines to follow the job, shown as a debug task's are (without -v)
        return dict(changed=written['changed'], path=path, run_id=manifest['run_id'], msg=follow_lines(self._var),
                    _ansible_verbose_always=True)

    def _failed(self, params, check_mode, hostvars):
        path = self._var('__trainops_experiment_dir')
        recorded, refused = read_manifest(path)
        if refused:
            raise ManifestError(refused[0])
        errors = launch_errors(self._var('ansible_play_hosts_all'), hostvars)
        manifest = failed_manifest(recorded or {}, self._var, errors, ANSIBLE_VERSION)
        result = run(dict(params, state='reported', path=path, manifest=manifest), check_mode=check_mode)
        result.update(outcome=FAILED, outcome_detail=manifest['outcome_detail'], failed_nodes=list(errors),
                      launch_errors=manifest['launch_errors'])
        return self._published(result, stats(path, manifest['run_id'], FAILED, manifest['outcome_detail'], errors))

    def _launcher_end(self, hostvars):
        """How the run's launcher ended the job: ``(record, answer)``; the record from the nodes' final jobs, the answer
        from the launcher's own module on the controller when the run has its own tasks there (a failed answer:
        ManifestError with its message)."""
        play = list(self._var('ansible_play_hosts'))
        nodes = [node for node in self._var('trainops_collect_nodes') if node in play]
        ctx = _launcher_steps.Context(self._var, lambda node, name: host_vars(hostvars, node).get(name), nodes, play)
        record = _launcher_steps.run_launcher_of(ctx, nodes)
        launcher = _launcher_steps.launcher_of(record)
        args = launcher.end_args(record) if record['own_tasks'] else None
        answer = None
        if args:
            answer = self._execute_module(module_name=launcher.controller_module, module_args=args, task_vars=self._task_vars)
            if answer.get('failed'):
                raise ManifestError(str(answer.get('msg') or '%s failed' % launcher.controller_module))
        return record, launcher.end_answer(record, answer)

    def _collected(self, params, check_mode, hostvars):
        path = self._var('trainops_collect_experiment_dir')
        launcher, end = self._launcher_end(hostvars)
        manifest = dict(recorded_manifest(path), finished_at=stamp())
        found = collect_inputs(self._var, hostvars, launcher, end)
        result = run(dict(params, state='reported', path=path, manifest=manifest, results=found['results'],
                          verdicts=found['verdicts'], missing_nodes=found['missing_nodes'], refused=found['refused'],
                          slurm=found['launcher_end'], straggler_threshold=found['straggler_threshold'],
                          attempt=found['attempt']), check_mode=check_mode)
        result.update(shown=['experiment : %s' % path] + result['table'], failure=collect_failure(result, self._var, hostvars))
        return self._published(result, stats(path, self._var('trainops_collect_run_id'), result['outcome'],
                                             result['outcome_detail'], result['failed_nodes'], result))
