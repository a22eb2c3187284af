# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The launch plan (the action ``launch_plan``, roles/job): each step reads the variables it needs through ``read``
(a variable's templated value; a default for one that is not defined) and returns ``{'fields': {...}, 'problems':
[...], 'lines': [...]}``: what the task registers, one line per value to fix (nothing is touched when there is
one), the lines to show.

* :func:`knobs` (every node, validate.yml): the command-line knobs over the ``trainops_`` variables (``_knobs``) and
  the launch parameters of this node that do not fit (``_launch_params.launch_problems``);
* :func:`nodes` (once, nodes.yml): the rank order, the master and the spare nodes (``node_order``,
  ``_retries.spare_pool``), and every node's problems of the first step, merged;
* :func:`preflight_args` (every node, checks.yml): the options of the node's one read-only module run
  (``trainops.multinode.preflight``), which the action runs on the node; :func:`unmarked`: the directories of the
  node that the launch then marks (its result's ``unmarked``);
* :func:`checks` (once, checks.yml): the checks across nodes of every node's preflight (``_launch_checks``), the
  reach table, the nodes that left the play;
* :func:`shares` (once, checks.yml): the nodes that share their node root, workspace or state directory
  (``_launch_dirs``);
* :func:`entry` and :func:`env` (the filter ``launch_entry``, roles/job/vars/main.yml): what torchrun runs on the node
  and the ranks' environment, for each attempt (its run id and directories).
"""

from __future__ import annotations

import os

from ansible_collections.trainops.multinode.plugins.module_utils import _knobs, _launch_checks, _launch_dirs, _launchers, _retries
from ansible_collections.trainops.multinode.plugins.module_utils._local_copy import is_local
from ansible_collections.trainops.multinode.plugins.module_utils._launch_params import launch_problems, merge_problems
from ansible_collections.trainops.multinode.plugins.module_utils._launch_records import host_facts, host_vars
from ansible_collections.trainops.multinode.plugins.module_utils._slurm_alloc import rank_threads_env

STEPS = ('knobs', 'nodes', 'preflight', 'checks', 'in_play', 'shares')

KNOBS_RESULT = '__trainops_plan_knobs'
"""The variable the knobs step is registered as (roles/job/tasks/validate.yml); the nodes step reads it of every host."""

SECRET_VAR = 'trainops_secret_env'
"""The role variable of the ranks' secrets: a step whose result holds it is not shown (no_log)."""


def truth(value):
    """A boolean variable's truth, as Jinja's ``bool`` filter reads it."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ('true', 'yes', 'on', '1', 'y', 't')


def _int(value):
    return _knobs.jinja_int(value)


def short_given(defined):
    """The short knobs (``-e channels=42``) among the ``defined`` variable names, in the registry's order."""
    return [knob.short for knob in _knobs.SHORT if knob.short in defined]


def knob_values(read, given):
    """``{key: value}`` of the short knobs: the short knob's value where given, else the role variable's
    (``_knobs.values(..., 'short')``)."""
    return _knobs.values([read(knob.var) for knob in _knobs.SHORT], 'short', dict((name, read(name)) for name in given))


def launch_params(read, given, knobs, node):
    """The launch parameters ``launch_problems`` checks: the launch knobs (a short knob's value from ``knobs``), and
    what the checks need to know about the node and the controller."""
    params = _knobs.values([read(knob.var) for knob in _knobs.LAUNCH], 'launch', knobs)
    job_id = read('trainops_slurm_job_id', None)
    params.update(sync_workspace=truth(read('trainops_sync_workspace')), script_given='script' in given,
                  connection=read('ansible_connection', None) or 'ssh', sync_rsync_opts=read('trainops_sync_rsync_opts'),
                  pass_config_args=read('trainops_pass_config_args'), slurm_problem=read('trainops_slurm_problem', None),
                  slurm_job_id=str(job_id if job_id else os.environ.get('SLURM_JOB_ID', '')),
                  slurm_cpus=read('trainops_slurm_cpus', None), slurm_mem_mb=read('trainops_slurm_mem_mb', None),
                  slurm_gpus_implicit=read('trainops_slurm_gpus_implicit', False), raw_params=read('_raw_params', None),
                  node=node)
    return params


def overlaid(read, overlay):
    """``read`` with the variables of ``overlay`` (name to value) over the play's: what the play reads once they are
    set."""
    def read_over(name, *default):
        return overlay[name] if name in overlay else read(name, *default)
    return read_over


def knobs(read, defined, node, extra_problems=(), overlay=None):
    """The first step, on every node: every short knob's value (``knobs``), the ``trainops_`` variables whose value
    that changes (``changed``: validate.yml sets them), and the launch
    parameters of this node that do not fit (``launch_problems``, merged by :func:`nodes`). ``overlay``: role variables
    to set first (a sweep's launch settings, module_utils/_sweep_play.py host_plan), read as set and set with the rest
    (``changed``)."""
    overlay = dict(overlay or {})
    read = overlaid(read, overlay)
    given = short_given(defined)
    values = knob_values(read, given)
    problems = launch_problems(launch_params(read, given, values, node)) + list(extra_problems)
    # the trainops_ variables the knobs change: a short knob given, a string of arguments split, a path made absolute
    changed = dict((knob.var, values[knob.key]) for knob in _knobs.SHORT
                   if knob.short in given or values[knob.key] != read(knob.var))
    return dict(fields=dict(knobs=values, changed=dict(overlay, **changed), launch_problems=problems), problems=[],
                lines=[])


def _inventory_problem(group, order):
    return ("The play's hosts must be the members of group '%s' (trainops_nodes_group), with at most one marked "
            "trainops_master: true, and the spare nodes (trainops_spare_nodes). Nodes in play: %s; marked master: %s. "
            "Fix the inventory." % (group, order['nodes'], order['flagged']))


def nodes(read, hostvars, node_order, master_addr_problems, node_list=None, with_spares=False):
    """The second step, once: the launch parameters' problems of every node merged (the first step's), else the rank
    order (``node_order(hosts, hostvars, play_hosts)``), the master and the spare nodes, checked:
    ``order`` and ``spare_pool``
    (``__trainops_order``, ``__trainops_spare_pool``)."""
    play_hosts, play_hosts_all = list(read('ansible_play_hosts')), list(read('ansible_play_hosts_all'))
    by_node = dict((host, (host_vars(hostvars, host).get(KNOBS_RESULT) or {}).get('launch_problems') or []) for host in play_hosts)
    problems = merge_problems(by_node)
    if problems:
        return dict(fields={}, problems=problems, lines=[])
    group = read('trainops_nodes_group')
    hosts = list(node_list or []) or list((read('groups') or {}).get(group) or [])
    order = node_order(hosts, hostvars, play_hosts_all)
    spare_group = read('trainops_spare_nodes', '') if with_spares else ''
    groups = read('groups') or {}
    found = groups.get(spare_group) if spare_group and spare_group in groups else None
    least = read('trainops_min_nodes', 0) if with_spares else 0
    pool = _retries.spare_pool(order['nodes'], spare_group, None if found is None else list(found), least, play_hosts_all,
                               read('trainops_launcher'))
    problems = pool['problems'] + master_addr_problems(order['nodes'], hostvars, pool['spares'], read('trainops_retries', 0),
                                                       least, read('trainops_exclude_after', 0))
    stray = [host for host in play_hosts_all if host not in order['nodes'] + pool['spares']]
    if not problems and (not order['nodes'] or stray or len(order['flagged']) > 1):
        problems = [_inventory_problem(group, order)]
    return dict(fields=dict(order=order, spare_pool=pool), problems=problems, lines=[])


PROFILERS = {'nsys': 'nsys', 'rocprof': 'rocprofv3'}
"""profile=... to the executable every selected rank runs under: the preflight looks for it on each node."""


def profiler(profile):
    """The profiler's executable for ``profile`` (trainops_profile), '' for none (torch's profiler is in torch)."""
    return PROFILERS.get(profile, '') if isinstance(profile, str) else ''


def _git_check(read):
    check = read('trainops_git_check')
    return check == 'always' or (check == 'auto' and not truth(read('trainops_sync_workspace')))


def preflight_args(read):
    """The options of this node's ``trainops.multinode.preflight`` run (checks.yml), from the role's variables: its rank
    decides the master port check (node rank 0) and the reach check (a spare node, rank -1, takes no part)."""
    sync = truth(read('trainops_sync_workspace'))
    rank = _int(read('__trainops_rank'))
    reach = truth(read('trainops_check_reachability')) and not truth(read('trainops_replace'))
    port = _int(read('trainops_master_port'))
    executable = profiler(read('trainops_profile'))
    args = dict(master_addr=read('__trainops_master_addr'), socket_ifname=read('trainops_socket_ifname'),
                python=read('trainops_python'), import_torch=truth(read('trainops_preflight_import_torch')),
                container_engine=read('trainops_container_engine'), state_dir=read('__trainops_state_dir'),
                node_id=read('trainops_node_id'),
                # the tokens by which the controller sees nodes sharing them (an NFS home; checks.yml creates missing
                # ones once every check passed); never in a git checkout the nodes run
                identify_dirs=['state_dir'] + (['workspace_dir'] if sync else []),
                workspace_dir=read('trainops_workspace_dir'),
                # a local node is the controller: the workspace is copied there without rsync (action rsync)
                need_rsync=sync and not is_local(read('ansible_connection', None) or 'ssh'),
                # the profiler every selected rank runs (profile=nsys|rocprof); the checks step names the nodes without it
                find_executables=[executable] if executable else [],
                reach_timeout=_int(read('trainops_reach_timeout')), replace=truth(read('trainops_replace')),
                # the Slurm job's GPUs here, over SSH: renumbered from 0 where the session is confined to them
                gpu_ids=(read('trainops_slurm_gpu_ids', []) if _launchers.capability(read('trainops_launcher'), 'inventory_gpu_ids')
                         else []),
                nproc_per_node=_int(read('trainops_nproc_per_node')))
    if read('trainops_runtime') == 'container':
        container = read('trainops_container', None)
        name = container.get('name') if isinstance(container, dict) else None
        args['container'] = name if name is not None else read('trainops_container_name')
    network = read('trainops_training_network', '') or ''
    if len(network) > 0:
        args['training_network'] = network
    if not sync and not truth(read('__trainops_module')):
        args['script'] = read('trainops_script')
    if _git_check(read):
        args['git_path'] = read('trainops_workspace_dir')
    if rank == 0:
        args['master_port'] = port
        if reach:
            args['reach_peers'] = len(read('__trainops_nodes'))
    if reach and rank >= 0:
        args['reach_port'] = port
    return args


def unmarked(read, paths):
    """The directories a node's first launch marks with a token (checks.yml, module dir_token), from the paths its
    preflight found (``paths``): the node root without one, and the synced workspace (trainops_sync_workspace)
    without one."""
    found = [paths['state_root']] if not paths.get('state_root_token') else []
    if truth(read('trainops_sync_workspace')) and not paths.get('workspace_token'):
        found.append(paths['workspace_dir'])
    return found


def left_nodes(read, since):
    """The nodes of the job no longer in the play, as one problem naming them (``since``: what they went through)."""
    play_hosts = list(read('ansible_play_hosts'))
    left = [node for node in read('__trainops_order')['nodes'] if node not in play_hosts]
    if not left:
        return []
    return ['Not starting anything: %s failed or could not be reached %s. Fix that node, or leave it out of the '
            'inventory.' % (', '.join(left), since)]


def checks(read, hostvars, check_mode=False, git_ref=None):
    """The third step, once, after every node's preflight and NCCL/RCCL environment: the checks across nodes (the same
    torch and code, the profiler), the nodes that left the play; else the lines to show, how every node reaches the
    master, the NCCL/RCCL table, the spare nodes left out. ``git_ref``: the controller's checkout as the action
    ``git_state`` reads it (``{'git': state}``), kept as ``git_ref`` (``__trainops_git_ref``, the manifest's)."""
    play_hosts = list(read('ansible_play_hosts'))
    order = read('__trainops_order')
    spares = list((read('__trainops_spare_pool', None) or {}).get('spares') or [])
    preflights = host_facts([n for n in order['nodes'] if n in play_hosts], hostvars, '__trainops_preflight')
    spare_preflights = host_facts([n for n in spares if n in play_hosts], hostvars, '__trainops_preflight')
    git = (git_ref or {}).get('git')
    problems = _launch_checks.node_problems(
        dict(preflights, **spare_preflights), git_check=_git_check(read), git_reference=read('trainops_git_reference'),
        controller_git=git, compare_nodes=not truth(read('trainops_sync_workspace')),
        allow_dirty=truth(read('trainops_allow_dirty')), profile=str(read('trainops_profile') or ''),
        profile_executable=profiler(read('trainops_profile')))
    problems = problems or left_nodes(read, 'during the checks above')
    lines = []
    if truth(read('trainops_check_reachability')) and not truth(read('trainops_replace')) and not check_mode:
        lines = _launch_checks.reach_table(preflights) + ['']
    lines += str((read('__trainops_nccl_cluster', None) or {}).get('table') or '').splitlines()
    lost = [n for n in spares if n not in play_hosts]
    if lost:
        lines.append('WARNING: spare nodes left out, no retry uses them (they failed their checks or could not be '
                     'reached, above): ' + ', '.join(lost))
    return dict(fields=dict(git_ref=git_ref or {}), problems=problems, lines=lines)


def shares(read, hostvars):
    """The fourth step, once the node root and workspace are marked: the nodes that share their node root, synced
    workspace or one state directory (``root``, ``workspace``, ``state``: ``__trainops_root_shares`` ...); two nodes with one state directory are a problem."""
    play_hosts = list(read('ansible_play_hosts'))
    spares = list((read('__trainops_spare_pool', None) or {}).get('spares') or [])
    found = _launch_dirs.dir_shares(list(read('__trainops_order')['nodes']) + [n for n in spares if n in play_hosts],
                                    hostvars)
    fields = dict(root=found['root'], workspace=found['workspace'], state=found['state'])
    problems = []
    if found['state']['shared']:
        problems = ['Not starting anything: %s would keep their state in the same directory (they share the node root '
                    'and have the same host name). Set trainops_node_id per node, e.g. trainops_node_id: '
                    '"{{ inventory_hostname }}".' % '; '.join(' and '.join(group) for group in found['state']['groups'])]
    return dict(fields=fields, problems=problems, lines=_launch_dirs.share_lines(found['root'], found['workspace']))


def _ranks_text(ranks):
    if isinstance(ranks, (list, tuple)):
        return ','.join(str(rank) for rank in ranks)
    return str(ranks)


def entry(params):
    """What torchrun runs on the node (``{'entrypoint': ..., 'args': [...]}``) from ``params`` (the role's variables,
    roles/job/vars/main.yml ``__trainops_entry``): with a profile, every rank runs the wrapper (``wrapper``), which runs
    the script under the profiler; a module (``module``) as python -m runs it; else the script. The config arguments
    (``--config``, ``--override training.output_dir=...``, the resume's and the overrides) only where ``pass_config``
    says, then the script's own arguments as they are."""
    argv = []
    if params.get('pass_config'):
        argv = (['--config', params['config'], '--override', 'training.output_dir=%s' % params['output_dir']]
                + list(params.get('resume_args') or []) + ['--override=%s' % o for o in params.get('overrides') or []])
    argv += list(params.get('script_args') or [])
    profile = params.get('profile') or ''
    if profile:
        wrapper = ['--profiler', profile, '--ranks', _ranks_text(params.get('profile_ranks')),
                   '--out-dir', '%s/profiles' % params['run_dir'], '--host', params['node']]
        wrapper += ['--stats'] if truth(params.get('profile_stats')) else []
        wrapper += ['--profiler-arg=%s' % a for a in params.get('profile_args') or []] + ['--']
        return dict(entrypoint=params['wrapper'], args=wrapper + [params['script']] + argv)
    module = params.get('module') or ''
    return dict(entrypoint=module if module else params['script'], args=argv)


def env(params):
    """The ranks' environment from ``params`` (roles/job/vars/main.yml ``__trainops_env``), later parts winning: each
    rank's OMP_NUM_THREADS from the CPUs a Slurm allocation holds on the node (``slurm_cpus``; ``env``, trainops_env,
    wins), the node's NCCL/RCCL part (``nccl``), the run's own variables, the checkpoint signal, the resume's
    (``resume_env``: with a resumed run's world size, module_utils/_resume_plan.py)."""
    cpus = params.get('slurm_cpus')
    number = None if cpus in (None, '') else _knobs.integer(cpus)
    if cpus not in (None, '') and (number is None or number < 1):
        raise ValueError('the CPUs must be a positive integer or null, not %r' % (cpus, ))
    result = dict(rank_threads_env(number, _knobs.integer(params.get('nproc_per_node')), params.get('env') or {}))
    result.update(params.get('nccl') or {})
    result.update(TRAINOPS_RUN_ID=str(params['run_id']), TRAINOPS_NODE=str(params['node']),
                  TRAINOPS_NODE_RANK=str(params['rank']), TRAINOPS_OUTPUT_DIR=str(params['output_dir']),
                  TRAINOPS_COLLECTIVE_TIMEOUT_S=str(_int(params.get('collective_timeout'))))
    if params.get('checkpoint_signal'):
        result['TRAINOPS_CHECKPOINT_SIGNAL'] = params['checkpoint_signal']
    result.update(params.get('resume_env') or {})
    return result
