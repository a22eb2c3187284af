# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""How torchrun is started on the nodes: the launchers behind one interface, chosen in one place (:data:`LAUNCHERS`).

- ``ssh``: the torchrun module starts a detached supervisor per node over the play's own connection;
- ``srun``: the torchrun module only writes the run (``state=prepared``); one Slurm step of the allocation runs each
  node's supervisor in the foreground (plugins/module_utils/_srun.py, the srun_step module).

The generic code (the torchrun module's _torchrun.py, the supervisor, the judgment in _judgment.py, the wait in
plugins/action/torchrun_wait.py, the launch checks in _launch_params.py) asks the run's launcher, never names one:

- :meth:`Launcher.problems`: what the launcher needs of the launch parameters (before any node is touched);
- :attr:`Launcher.deferred_start` and :meth:`Launcher.spec_fields`: whether the module starts the node's supervisor
  itself, and what the launcher adds to the run's job.json (read back by the supervisor, which ships without this
  file: job.json carries everything it needs, see _supervisor.rank_environment and _supervisor.launcher_record);
- :meth:`Launcher.view`: what the launcher adds to a run's records (the torchrun module's ``job.launcher``);
- :meth:`Launcher.run_record`: the run's launcher from every node's records (filter run_launcher), with ``own_tasks``:
  whether the launcher has a part of its own in the run's stop, status and end (the launcher action's steps,
  module_utils/_launcher_steps.py);
- :meth:`Launcher.ended_it`, :meth:`Launcher.ended_detail`, :attr:`Launcher.stop_by`,
  :attr:`Launcher.peer_failure_ends_node`: a node's run that the launcher ended because another node failed (the wait
  and the judgment count it as stopped, not failed);
- :meth:`Launcher.time_limit` and :meth:`Launcher.end_record`: whether the launcher ended the job at a time limit, from
  what the controller asked it after the end (``end``), and what the manifest keeps of that;
- :attr:`Launcher.supports_spares` (and :attr:`Launcher.no_spares_why`): whether a launch with it may keep spare nodes
  (_retries.spare_pool); :attr:`Launcher.inventory_gpu_ids`: whether the ranks use the Slurm job's GPUs the inventory
  names for the node (roles/job: preflight.yml, vars/main.yml, filter launcher_capability).

- its lifecycle, which roles/job's generic tasks (run_job.yml) run through the launcher action
  (plugins/action/launcher.py, module_utils/_launcher_steps.py): :attr:`Launcher.controller_module` (the module the
  controller runs for the launcher's own steps), :meth:`Launcher.start_args`, :meth:`Launcher.start_wait`,
  :meth:`Launcher.start_failure`, :meth:`Launcher.start_record` (start); :meth:`Launcher.undoes`,
  :meth:`Launcher.undo_node`, :meth:`Launcher.undo_args`, :attr:`Launcher.undo_stops_after`,
  :meth:`Launcher.undo_facts` (undo of a failed launch); :meth:`Launcher.stop_node`, :meth:`Launcher.stop_args`,
  :meth:`Launcher.stop_wait`, :meth:`Launcher.stopped_args` (stop.yml), :meth:`Launcher.status_args`,
  :meth:`Launcher.status_report` (status.yml), :meth:`Launcher.end_args`, :meth:`Launcher.end_answer` (collect.yml),
  each for the run's record (:meth:`Launcher.run_record`: ``own_tasks`` when it has its own part of the run).

Generic code names no launcher (tests/unit/plugins/module_utils/test__launchers.py scans plugins/ and roles/): it
asks these methods and attributes.
"""

from __future__ import annotations

from ansible_collections.trainops.multinode.plugins.module_utils import _sbatch, _srun


class Launcher(object):
    """The interface, with what a launcher that adds nothing does (the ``ssh`` one)."""

    def problems(self, params, integer_rule):
        """Lines for the launch parameters ``params`` (_launch_params.launch_problems) the launcher cannot use;
        ``integer_rule(params, key, name, what, example)`` checks one integer knob."""
        return []

    def spec_fields(self, environ, secret_names):
        """What job.json records for this launcher (``environ``: the module's environment on the node)."""
        return {}

    def view(self, spec, pids):
        """The ``launcher`` of a run's job view, from job.json (``spec``) and pids.json (``pids``)."""
        return {'name': self.name}

    def run_record(self, run_id, views):
        """The run's launcher (filter run_launcher) from its nodes' ``launcher`` views (``views``)."""
        return {'name': self.name, 'run_id': run_id, 'job_id': None, 'step_id': None, 'step': None, 'step_name': None,
                'owner_uid': None, 'refused': None, 'own_tasks': False}

    def ended_it(self, job):
        """Whether the launcher, not the run itself, ended this node's run (``job``: the torchrun module's view)."""
        return False

    def ended_detail(self, job, cause):
        """The line that says the launcher ended the node's run because of ``cause`` (``n3 failed (...)``)."""
        return 'ended because %s' % (cause, )

    def time_limit(self, end, results):
        """``{'by', 'source', 'detail'}`` when the launcher ended the job at a time limit, else None."""
        return None

    def end_record(self, end, time_limit):
        """What the experiment manifest keeps of the launcher's answer ``end`` after the job ended."""
        return {}

    # the name trainops_launcher and job.json give it (LAUNCHERS)
    name = None
    # True when the torchrun module only writes the run (state=prepared) and the launcher starts its supervisor
    deferred_start = False
    # True when the launcher itself ends a node's run once another node's run failed (the wait gives it time)
    peer_failure_ends_node = False
    # who the stop records of the runs the launcher ended name (``by``)
    stop_by = None
    # True when the ranks get only the GPUs a Slurm job asked for (a step: not those held with a whole node, srun(1)
    # --gres), so an allocation whose GPUs are all implicit (_launch_params._slurm_problems) gives them none
    requested_gpus_only = False
    # True when a launch with this launcher may keep spare nodes (trainops_spare_nodes) to replace failed ones
    supports_spares = True
    # why it may not (the launch check's words), for a launcher that does not support spares
    no_spares_why = None
    # True when the ranks run in the node's own session and so use the Slurm job's GPUs that the inventory names for
    # the node (trainops_slurm_gpu_ids, as the preflight saw them); False when the launcher's Slurm step gets them
    inventory_gpu_ids = True

    # --- its lifecycle (module_utils/_launcher_steps.py runs these for roles/job's run_job.yml) ---

    # the module the controller runs for the launcher's own steps (None: the nodes' torchrun module does everything)
    controller_module = None
    # why the job does not run on a node that left the play during the start
    unreachable_why = 'could not be reached during the start'
    # True when the undo stops the nodes' runs by their pids once the controller's own undo ran (undo_args)
    undo_stops_after = False

    def start_args(self, ctx):
        """The :attr:`controller_module`'s arguments that start the job once every node's run is written (None: the
        nodes' own start started it). ``ctx``: the launch (_launcher_steps.Context)."""
        return None

    def start_wait(self, start):
        """Seconds each node waits for the launcher to run its supervisor after the controller's start ``start``
        (0: the node's own start ran it)."""
        return 0

    def start_failure(self, start, not_running):
        """The launch's failure when the job does not run on the nodes ``not_running`` (``{node: why}``)."""
        return 'The job did not start on %s.' % (', '.join(not_running), )

    def start_record(self, start):
        """What the manifest keeps of the launcher's start (its ``launcher``)."""
        return {'name': self.name}

    def undoes(self, started, not_started):
        """Whether the undo of a failed launch has anything to stop: ``started`` (the nodes' start ran) and
        ``not_started`` (``{node: why}`` from the start's check)."""
        return bool(not_started)

    def undo_node(self, not_started):
        """The torchrun module's ``stopped`` arguments of the node's first undo step (besides the run's)."""
        return dict(stop_reason='undo', stop_detail='the job did not start on %s' % (', '.join(not_started), ))

    def undo_args(self, ctx, start):
        """The :attr:`controller_module`'s arguments that undo the launcher's own start (None: nothing to undo)."""
        return None

    def undo_facts(self, ctx, not_started, away, undone):
        """The facts the rescue of run_job.yml reads (``__trainops_undo_error``, ``__trainops_launch_cause``,
        ``__trainops_undo_note``), from the start's ``not_started`` ({node: why}), the nodes still ``away`` (could
        not be reached by the undo) and the controller's undo result ``undone`` (None without one)."""
        note = ''
        if away:
            note = (' (not on %s, which cannot be reached: a torchrun that started there gives up after '
                    'trainops_rdzv_timeout=%s s)' % (', '.join(away), ctx.var('trainops_rdzv_timeout')))
        return {'__trainops_undo_error': 'The job did not start on %s; it was stopped on every other node%s. %s' % (
            ', '.join(not_started), note, ' '.join('%s: %s' % item for item in not_started.items()))}

    # --- the run's stop, status and end (stop.yml, status.yml, collect.yml) for its record ``record`` (run_record) ---

    def stop_node(self, ctx, record, stop):
        """The torchrun module's ``stopped`` arguments of the node's stop (``stop``: the stop by pids that stop.yml
        asks for, with its reason and detail)."""
        return stop

    def stop_args(self, ctx, record):
        """The :attr:`controller_module`'s arguments of the launcher's own stop (None: none)."""
        return None

    def stop_wait(self, ctx, record):
        """Seconds a node waits for the launcher's stop to end its run (0: the node's stop ended it)."""
        return 0

    def stopped_args(self, ctx, record):
        """The :attr:`controller_module`'s arguments that end the launcher's part once the run ended (None: none)."""
        return None

    def status_args(self, record):
        """The :attr:`controller_module`'s arguments that ask the launcher where the run stands (None: none)."""
        return None

    def status_report(self, record, answer):
        """``(lines, stats)``: what status.yml shows and publishes of the launcher's answer ``answer``."""
        return [], {}

    # the names status_report publishes (set_stats data) for the docs (tests/unit/docs)
    published = ()

    def end_args(self, record):
        """The :attr:`controller_module`'s arguments that ask the launcher how the job ended (None: none)."""
        return None

    def end_answer(self, record, answer):
        """What the experiment's judgment gets of the launcher's ``answer`` (collect.yml's ``slurm``)."""
        return {}

    CAPABILITIES = ('deferred_start', 'peer_failure_ends_node', 'requested_gpus_only', 'supports_spares',
                    'inventory_gpu_ids')
    """The yes-or-no capabilities roles/job asks by name (filter launcher_capability)."""


class Ssh(Launcher):
    """One detached supervisor per node, started by the torchrun module over the play's connection."""

    name = 'ssh'

    def time_limit(self, end, results):
        # under sbatch: the batch script's stop near the job's time limit says so (the nodes' records never do)
        return _sbatch.batch_time_limit(end)

    def end_record(self, end, time_limit):
        return {'slurm_end': dict(end, time_limit=time_limit)} if time_limit else {}


class Srun(Launcher):
    """One Slurm step of the allocation runs every node's prepared supervisor (plugins/module_utils/_srun.py)."""

    name = 'srun'
    deferred_start = True
    peer_failure_ends_node = True
    stop_by = 'slurm'
    requested_gpus_only = True
    supports_spares = False
    no_spares_why = 'a Slurm step runs on its allocation'
    inventory_gpu_ids = False

    controller_module = 'trainops.multinode.srun_step'
    published = ('trainops_slurm_step', )
    unreachable_why = 'could not be reached'
    undo_stops_after = True

    def problems(self, params, integer_rule):
        return _srun.launch_problems(params, integer_rule)

    def start_args(self, ctx):
        return _srun.start_args(ctx)

    def start_wait(self, start):
        return max(int(start.get('start_timeout') or 0), 60)

    def start_failure(self, start, not_running):
        return _srun.start_failure(start, not_running)

    def start_record(self, start):
        return _srun.start_record(start)

    def undoes(self, started, not_started):
        return started

    def undo_node(self, not_started):
        return dict(signal=False, stop_reason='undo', stop_detail=_srun.UNDO_DETAIL)

    def undo_args(self, ctx, start):
        return _srun.undo_args(ctx, start)

    def undo_facts(self, ctx, not_started, away, undone):
        return _srun.undo_facts(ctx, undone)

    def stop_node(self, ctx, record, stop):
        return _srun.stop_node(ctx, record, stop)

    def stop_args(self, ctx, record):
        return _srun.step_args(record, 'signalled')

    def stop_wait(self, ctx, record):
        return int(ctx.var('trainops_stop_timeout')) + 30 if _srun.step_args(record, 'query') else 0

    def stopped_args(self, ctx, record):
        return _srun.step_args(record, 'cancelled')

    def status_args(self, record):
        return _srun.step_args(record, 'query')

    def status_report(self, record, answer):
        return _srun.status_report(record, answer)

    def end_args(self, record):
        args = _srun.step_args(record, 'query')
        # a step squeue still lists is ending (its tasks exit, srun reports): sacct has its final state seconds later
        return dict(args, end_wait=20) if args else None

    def end_answer(self, record, answer):
        return _srun.end_answer(record, answer)

    def spec_fields(self, environ, secret_names):
        return _srun.spec_fields(environ, secret_names)

    def view(self, spec, pids):
        return _srun.launcher_view(pids)

    def run_record(self, run_id, views):
        record = _srun.run_record(run_id, views)
        # a refused record still runs the launcher's part: it says why nothing goes through Slurm
        record['own_tasks'] = record['step'] is not None or record['refused'] is not None
        return record

    def ended_it(self, job):
        return _srun.ended_by_step(job)

    def ended_detail(self, job, cause):
        return _srun.step_detail(job, cause)

    def time_limit(self, end, results):
        return _srun.slurm_time_limit(end, results)

    def end_record(self, end, time_limit):
        return {'slurm_end': dict(end, time_limit=time_limit)}


LAUNCHERS = {'ssh': Ssh(), 'srun': Srun()}
"""Every launcher by the name trainops_launcher (-e launcher=NAME) and job.json give it: the one place to add one."""
DEFAULT = 'ssh'
"""The launcher of a run whose records name none (job.json without ``launcher``), and of state=started."""
NAMES = tuple(LAUNCHERS)
SPARE_NAMES = tuple(name for name, launcher in LAUNCHERS.items() if launcher.supports_spares)
"""The launchers a launch with spare nodes may use."""


def get(name):
    """The launcher called ``name`` (None or empty: :data:`DEFAULT`); None for a name no launcher has."""
    return LAUNCHERS.get(name or DEFAULT)


def for_state(state, name=None):
    """The launcher a run of the torchrun module's ``state`` (started or prepared) is written for: ``name`` (the
    module's ``launcher``) when given, else the default one for started and the first launcher that starts a prepared
    run's supervisor itself (:attr:`Launcher.deferred_start`) for prepared. None when ``name`` is no launcher, or one
    that does not write runs with that state (started: a launcher that starts them, prepared: one that defers it)."""
    deferred = state == 'prepared'
    if name:
        launcher = get(name)
        return launcher if launcher is not None and launcher.deferred_start is deferred else None
    if not deferred:
        return LAUNCHERS[DEFAULT]
    return next(launcher for launcher in LAUNCHERS.values() if launcher.deferred_start)


def capability(name, what):
    """Launcher ``name``'s yes-or-no capability ``what`` (one of :attr:`Launcher.CAPABILITIES`); ValueError naming
    the one that is unknown."""
    launcher = get(name)
    if launcher is None:
        raise ValueError('launcher must be %s, not %r' % (' or '.join(NAMES), name))
    if what not in Launcher.CAPABILITIES:
        raise ValueError('%r is not a launcher capability (%s)' % (what, ', '.join(Launcher.CAPABILITIES)))
    return bool(getattr(launcher, what))


def of_spec(spec):
    """The launcher that job.json (``spec``) names; the default one for an unknown name (records are not trusted)."""
    return get((spec or {}).get('launcher')) or LAUNCHERS[DEFAULT]


def of_job(job):
    """The launcher of a node's run as the torchrun module's query returns it (``job.launcher.name``)."""
    view = (job or {}).get('launcher')
    name = view.get('name') if isinstance(view, dict) else None   # a node's record: not trusted to be a mapping
    return get(name if isinstance(name, str) else None) or LAUNCHERS[DEFAULT]


def of_results(results):
    """The launcher of a job from its nodes' final job views (``{node: job}``): the first that names another than
    the default one, else the default one."""
    for _node, job in sorted((results or {}).items()):
        launcher = of_job(job)
        if launcher.name != DEFAULT:
            return launcher
    return LAUNCHERS[DEFAULT]


def launcher_view(spec, pids):
    """What started the run, from the node's own records: the ``launcher`` of the torchrun module's job view."""
    return of_spec(spec).view(spec, pids)


def run_launcher(jobs):
    """What launched a run, from its nodes' own records (``jobs``: each node's ``job`` as the torchrun module's query
    returns it, in node order): the one rule by which ``stop``, ``status`` and ``collect`` find the launcher's own
    part of the run (module_utils/_launcher_steps.py). The run is the first node's that has one; its launcher is the first that its nodes name other than
    the default one. Returns :meth:`Launcher.run_record` (``refused``: why its records are not acted on)."""
    jobs = [job for job in (jobs or []) if isinstance(job, dict) and job.get('run_id')]
    run_id = jobs[0]['run_id'] if jobs else None
    # each node's view with the owner of its run directory (the node's lstat, not a record the job writes)
    views = [dict(job.get('launcher') if isinstance(job.get('launcher'), dict) else {}, owner_uid=job.get('owner_uid'))
             for job in jobs if job['run_id'] == run_id]
    launcher = next((of_job({'launcher': view}) for view in views if of_job({'launcher': view}).name != DEFAULT),
                    LAUNCHERS[DEFAULT])
    return launcher.run_record(run_id, views)


def problems(params, integer_rule):
    """The launch parameters' lines about ``launcher`` (trainops_launcher) and what that launcher needs."""
    name = params.get('launcher', DEFAULT)
    launcher = get(name)
    if launcher is None:
        return ['launcher=%s: how torchrun is started must be %s (trainops_launcher, e.g. -e launcher=%s)'
                % (name, ' or '.join(NAMES), NAMES[-1])]
    return launcher.problems(params, integer_rule)
