# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The launch parameters of the ``job`` role that do not fit, one line each.

:func:`launch_problems` takes the values of the launch knobs (after the short ``-e`` knobs are mapped onto
the ``trainops_*`` variables, roles/job/tasks/validate.yml) and returns one line per value that is wrong,
each naming the value, what it must be and an example; a value that fits is not mentioned.
:func:`merge_problems` joins the lines of every node into one list: a line every node has is shown once,
as it is; a line only some nodes have (a host variable) names them.

Every rule the role checks on the controller lives here. What depends on the node (the maximum channels
and the threads each library takes, the interfaces, the training network's addresses) is checked per node
later (roles/nccl_env, the ``preflight`` module).
"""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
import shutil
from collections.abc import Mapping, Sequence

from ansible_collections.trainops.multinode.plugins.module_utils import _launchers, _retry_policy
from ansible_collections.trainops.multinode.plugins.module_utils._knobs import BY_KEY, is_unset
from ansible_collections.trainops.multinode.plugins.module_utils._collect import CollectRefused, node_dir_name
from ansible_collections.trainops.multinode.plugins.module_utils._local_copy import needs_rsync
from ansible_collections.trainops.multinode.plugins.module_utils._slurm_alloc import CPU_HINT, few_cpus, mem_mb
from ansible_collections.trainops.multinode.plugins.module_utils._supervisor import CHECKPOINT_SIGNAL_NAMES
from ansible_collections.trainops.multinode.plugins.module_utils._stragglers import threshold_problem
from ansible_collections.trainops.multinode.plugins.module_utils._torchrun import TorchrunError, validate_run_id

BOOLEANS = ('true', 'false', 'yes', 'no', '1', '0')

PROFILERS = ('nsys', 'rocprof', 'torch')
"""The per-rank profilers (``profile``); roles/job/files/profile_rank.py runs them."""

_DIGITS = re.compile(r'[0-9]+')
_RUN_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]*')
_NODE_ID = re.compile(r'([A-Za-z0-9][A-Za-z0-9_.-]*)?')
_OVERRIDE = re.compile(r'[A-Za-z_][A-Za-z0-9_.]*=')
_ENV_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
_MODULE = re.compile(r'[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*')

SHIPPED_SCRIPT = 'train.py'
SHIPPED_CONFIG = 'config/default.yaml'
"""The shipped workspace's script (files/workspace/train.py): the one ``pass_config_args=auto`` gives our config arguments."""

_TRUE = ('true', 'yes', 'on', '1')
_FALSE = ('false', 'no', 'off', '0')


def _integer(value):
    """The value as an int when it is written with digits only (8 or '8', not -1, 8.5, True), else None."""
    text = str(value)
    return int(text) if _DIGITS.fullmatch(text) else None


def _is_list(value):
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _relative_path_problem(value):
    text = str(value)
    if text.startswith('/') or '..' in text.split('/'):
        return 'must be a path relative to the workspace, without ..'
    return None


def _integer_rule(params, key, name, what, example=None):
    """One line when params[key] is not an integer in its knob's range (module_utils/_knobs.py)."""
    low, high = BY_KEY[key].low, BY_KEY[key].high
    value = params.get(key)
    number = _integer(value)
    if number is not None and number >= low and (high is None or number <= high):
        return None
    if high is None:
        bounds = 'an integer >= %d' % low
    else:
        bounds = 'an integer from %d to %d' % (low, high)
    return '%s=%s: %s must be %s (e.g. -e %s=%s)' % (name, value, what, bounds, name, example)


def _choice_rule(params, key, name, what, example=None):
    """One line when params[key] is not one of its knob's choices (module_utils/_knobs.py)."""
    choices = BY_KEY[key].choices
    value = params.get(key)
    if value in choices:
        return None
    return '%s=%s: %s must be one of %s (e.g. -e %s=%s)' % (
        name, value, what, ', '.join(choices), name, example or choices[0])


def _boolean_rule(params, key, name, what):
    value = params.get(key)
    if str(value).lower() in BOOLEANS:
        return None
    return '%s=%s: %s must be true or false (e.g. -e %s=false)' % (name, value, what, name)


def _list_rule(params, key, name, what, example):
    value = params.get(key)
    if _is_list(value):
        return None
    return '%s=%s: %s must be a list (e.g. %s)' % (name, value, what, example)


def _nccl_problems(params):
    """channels, min_channels, threads: the part of their rules that does not depend on the node."""
    problems = []
    low, threads_knob = BY_KEY['channels'].low, BY_KEY['threads']
    channels = params.get('channels')
    channels_number = None
    if not is_unset(channels):
        channels_number = _integer(channels)
        if channels_number is None or channels_number < low:
            channels_number = None
            problems.append('channels=%s: the maximum NCCL/RCCL channels (NCCL_MAX_NCHANNELS) must be unset or an '
                            'integer >= %d; each node checks it against its library\'s maximum (e.g. -e channels=32)'
                            % (channels, low))
    min_channels = params.get('min_channels')
    if not is_unset(min_channels):
        number = _integer(min_channels)
        if number is None or number < BY_KEY['min_channels'].low:
            problems.append('min_channels=%s: the minimum channels (NCCL_MIN_NCHANNELS) must be unset or an integer '
                            'from %d to channels (e.g. -e channels=32 -e min_channels=16)'
                            % (min_channels, BY_KEY['min_channels'].low))
        elif channels_number is not None and number > channels_number:
            problems.append('min_channels=%s: the minimum channels (NCCL_MIN_NCHANNELS) must not exceed channels=%s '
                            '(e.g. -e channels=%s -e min_channels=%s)'
                            % (min_channels, channels, channels, channels_number))
    threads = params.get('threads')
    if not is_unset(threads):
        number = _integer(threads)
        if number is None or number < threads_knob.low or number > threads_knob.high or number % threads_knob.low:
            problems.append('threads=%s: threads per block (NCCL_NTHREADS / RCCL_THREADS_PER_BLOCK) must be unset or '
                            'a multiple of %d up to %d; each node checks the values its library takes '
                            '(e.g. -e threads=256)' % (threads, threads_knob.low, threads_knob.high))
    return problems


def _module(params):
    value = params.get('module')
    return '' if value is None else str(value).strip()


def config_args_passed(params):
    """Whether the entrypoint gets our config arguments (``--config ... --override ...``): ``pass_config_args``
    true or false as given; ``auto`` (or anything else) only for the script ``train.py``, not a module, whose
    workspace on the controller (``workspace_src``) holds the shipped config file (the shipped workspace, or a copy of
    it), or that is given another ``config`` or ``overrides``. A script of the user's own gets exactly its
    ``script_args``."""
    value = str(params.get('pass_config_args')).strip().lower()
    if value in _TRUE or value in _FALSE:
        return value in _TRUE
    if _module(params) or str(params.get('script')) != SHIPPED_SCRIPT:
        return False
    asked = str(params.get('config')) != SHIPPED_CONFIG or (_is_list(params.get('overrides')) and params['overrides'])
    return bool(asked or os.path.isfile(os.path.join(str(params.get('workspace_src')), SHIPPED_CONFIG)))


def _entry_problems(params):
    """src, module (a dotted name, exclusive with script), args (a string split as a shell would, or a list of
    strings), progress_pattern (a regular expression), pass_config_args (auto, true or false)."""
    problems = []
    src = params.get('workspace_src')
    if params.get('sync_workspace') and not os.path.isdir(str(src)):
        problems.append('src=%s: the workspace (trainops_workspace_src) is no directory on the controller; give the '
                        'directory of your code (e.g. -e src=~/src/myproject)' % (src,))
    module = _module(params)
    if module:
        if not _MODULE.fullmatch(module):
            problems.append('module=%s: the entrypoint module must be a dotted Python name, as python -m takes it '
                            '(e.g. -e module=torchtitan.train)' % (params.get('module'),))
        elif params.get('script_given') or str(params.get('script')) != SHIPPED_SCRIPT:
            problems.append('module=%s and script=%s: give one entrypoint, a script file or a module'
                            % (module, params.get('script')))
        elif params.get('profile') not in (None, ''):
            problems.append('module=%s with profile=%s: per-rank profiling runs a script file; give script= instead '
                            'of module=, or leave profile out' % (module, params.get('profile')))
    args = params.get('script_args')
    if isinstance(args, str):
        try:
            shlex.split(args)
        except ValueError as exc:
            problems.append('args=%s: the entrypoint\'s arguments cannot be split as a shell would (%s); quote them '
                            'as a shell would (e.g. -e \'args=--lr 0.1 --name "run 1"\')' % (args, exc))
    elif not (_is_list(args) and all(isinstance(a, str) for a in args)):
        problems.append('args=%s: the entrypoint\'s arguments must be a string, split as a shell would, or a list '
                        'of strings (e.g. -e \'args=--lr 0.1 --name "run 1"\')' % (args,))
    pattern = params.get('progress_pattern')
    if pattern not in (None, ''):
        try:
            re.compile(str(pattern))
        except re.error as exc:
            problems.append('progress_pattern=%s: not a Python regular expression (%s) (e.g. -e '
                            '\'progress_pattern=step (\\d+)\')' % (pattern, exc))
    overrides = params.get('overrides')
    value = str(params.get('pass_config_args')).strip().lower()
    # (only where the overrides, the module and pass_config_args are good: a bad one is its own line)
    well_formed = (_is_list(overrides) and overrides and all(isinstance(o, str) and _OVERRIDE.match(o) for o in overrides)
                   and value in _TRUE + _FALSE + ('auto',) and (not module or _MODULE.fullmatch(module)))
    if well_formed and not config_args_passed(params):
        problems.append('overrides=%s: config overrides go only to the shipped train.py, with --config; give your '
                        'script\'s own arguments in args (e.g. -e \'args=--lr 0.1\')' % ', '.join(str(o) for o in overrides))
    if value not in _TRUE + _FALSE + ('auto',):
        problems.append('trainops_pass_config_args=%s: must be auto, true or false (e.g. -e '
                        'trainops_pass_config_args=false)' % (params.get('pass_config_args'),))
    return problems


def _path_problems(params):
    """script and config: their shape, and (when the workspace is synced from the controller) that they exist."""
    problems = []
    src = params.get('workspace_src')
    sync = params.get('sync_workspace')
    # a workspace that is no directory is named once (_entry_problems), not once per file
    sync = sync and os.path.isdir(str(src))
    files = [('script', 'the training entrypoint', 'train.py', sync and not _module(params)),
             ('config', 'the config file', 'config/default.yaml', sync and config_args_passed(params))]
    for key, what, example, must_exist in files:
        value = params.get(key)
        text = '' if value is None else str(value)
        if key == 'script' and not text:
            problems.append('script=: the training entrypoint must be given, relative to the workspace '
                            '(e.g. -e script=train.py)')
            continue
        shape = _relative_path_problem(text)
        if shape:
            problems.append('%s=%s: %s (e.g. -e %s=%s)' % (key, text, shape, key, example))
        elif must_exist and not os.path.isfile(os.path.join(str(src), text)):
            problems.append('%s=%s: no such file under the workspace %s (trainops_workspace_src) on the controller; '
                            '%s is given relative to that directory (e.g. -e %s=%s)'
                            % (key, text, src, what, key, example))
    return problems


def _mapping_problems(params):
    """overrides, trainops_env, trainops_secret_env (never their values: only names)."""
    problems = []
    overrides = params.get('overrides')
    if not _is_list(overrides):
        problems.append('overrides=%s: the config overrides must be a list of key=value '
                        '(e.g. -e \'{"overrides": ["training.epochs=1"]}\')' % (overrides,))
    else:
        bad = [item for item in overrides if not (isinstance(item, str) and _OVERRIDE.match(item))]
        if bad:
            problems.append('overrides=%s: each override must be key=value, the key made of letters, digits, _ and . '
                            '(e.g. -e \'{"overrides": ["training.epochs=1"]}\')' % ', '.join(str(b) for b in bad))
    env = params.get('env')
    if not isinstance(env, Mapping):
        problems.append('trainops_env: must be a mapping of variable name to value, not a %s '
                        '(e.g. trainops_env: {NCCL_DEBUG: INFO})' % type(env).__name__)
    secret = params.get('secret_env')
    if not isinstance(secret, Mapping):
        problems.append('trainops_secret_env: must be a mapping of variable name to value, not a %s '
                        '(e.g. trainops_secret_env: {HF_TOKEN: "{{ lookup(\'ansible.builtin.env\', \'HF_TOKEN\') }}"})'
                        % type(secret).__name__)
    else:
        names = [str(name) for name in secret]
        bad = [name for name in names if not _ENV_NAME.fullmatch(name)]
        if bad:
            problems.append('trainops_secret_env: %s: each name must be a variable name (letters, digits, _; not '
                            'starting with a digit) (e.g. HF_TOKEN)' % ', '.join(bad))
        both = [name for name in names if isinstance(env, Mapping) and name in env]
        if both:
            problems.append('trainops_secret_env: %s also in trainops_env: give each variable once, a secret only in '
                            'trainops_secret_env' % ', '.join(both))
    return problems


def _profile_problems(params):
    """profile, profile_ranks, profile_stats, profile_args (per-rank profiling, roles/job/files/profile_rank.py)."""
    profile = params.get('profile')
    if profile in (None, ''):
        return []
    problems = []
    if profile not in PROFILERS:
        problems.append('profile=%s: the per-rank profiler must be one of %s, or empty for none (e.g. -e profile=torch)'
                        % (profile, ', '.join(PROFILERS)))
    ranks = params.get('profile_ranks')
    listed = ranks if _is_list(ranks) else str(ranks).split(',')
    if not (ranks in ('first', 'all') or (listed and all(_integer(r) is not None for r in listed))):
        problems.append('profile_ranks=%s: the ranks to profile must be first (local rank 0 of every node), all, or '
                        'global ranks (e.g. -e profile_ranks=0,3)' % (ranks,))
    if str(params.get('profile_stats')).lower() not in BOOLEANS:
        problems.append('profile_stats=%s: the profiler\'s summary must be true or false (e.g. -e profile_stats=true)'
                        % (params.get('profile_stats'),))
    args = params.get('profile_args')
    if not (_is_list(args) and all(isinstance(a, str) for a in args)):
        problems.append('profile_args=%s: the profiler\'s further arguments must be a list of strings '
                        '(e.g. -e \'{"profile_args": ["--trace=cuda,nvtx"]}\')' % (args,))
    return problems


def _launcher_problems(params):
    """launcher and what that launcher needs (_launchers.problems); and an allocation whose GPUs the slurm inventory
    could not read (``slurm_problem``: a job that is ending), which no launch may use, whatever starts it."""
    if params.get('slurm_problem'):
        return ['%s (trainops_slurm_problem, from the slurm inventory)' % (params['slurm_problem'], )]
    return _launchers.problems(params, _integer_rule)


def _slurm_problems(params):
    """What the Slurm allocation holds on this node (the slurm inventory's trainops_slurm_* variables) against what the
    launch needs: GPUs a srun step gets (``slurm_gpus_implicit``), a CPU per rank (``slurm_cpus``, unless
    ``allow_few_cpus``) and the workload's memory (``mem_per_node`` against ``slurm_mem_mb``)."""
    problems = []
    ranks = _integer(params.get('nproc_per_node'))
    launcher = _launchers.LAUNCHERS.get(params.get('launcher'))
    if launcher is not None and launcher.requested_gpus_only and params.get('slurm_gpus_implicit'):
        problems.append(
            'launcher=%s: Slurm job %s holds the GPUs of its nodes only because it holds the whole nodes '
            '(--exclusive without --gpus*), and Slurm gives a step none of those (srun(1) --gres: "except those '
            'implicitly requested when a job is exclusive"); allocate them explicitly: add --gpus-per-node=%s (or '
            '--gres=gpu:%s) to salloc/sbatch, or launch over SSH (launcher=%s)' % (
                launcher.name, params.get('slurm_job_id') or '(the allocation)', ranks or 'N', ranks or 'N',
                _launchers.DEFAULT))
    cpus = _integer(params.get('slurm_cpus'))
    short = few_cpus(cpus, ranks) if cpus is not None and ranks else None
    if short and str(params.get('allow_few_cpus')).strip().lower() not in ('true', 'yes', '1', 'on'):
        problems.append('the Slurm allocation holds %s on this node (trainops_slurm_cpus): every rank and its data '
                        'loader workers would share them; %s, or launch anyway with -e trainops_allow_few_cpus=true'
                        % (short, CPU_HINT))
    needed = params.get('mem_per_node')
    if needed not in (None, ''):
        need = mem_mb(needed)
        held = _integer(params.get('slurm_mem_mb'))
        if need is None:
            problems.append('trainops_mem_per_node=%s: the memory the workload needs on each node must be a size as '
                            'Slurm\'s --mem takes it (e.g. trainops_mem_per_node: 64G, or 500000 for MB)' % (needed,))
        elif held is not None and held < need:
            problems.append('the Slurm allocation holds %d MB of memory on this node (Mem=), the workload needs %s '
                            '(trainops_mem_per_node, %d MB): allocate it with --mem=%s (or --mem-per-gpu)' % (
                                held, needed, need, needed))
    return problems


def _resume_problems(params):
    """``resume_from``: the run id of an earlier launch (a directory name on the nodes, as every run id), or empty."""
    resume_from = params.get('resume_from')
    if resume_from in (None, ''):
        return []
    try:
        validate_run_id(resume_from)
    except TorchrunError:
        return ['trainops_resume_from=%s: must be the run id of an earlier launch on these nodes (its experiment '
                'directory\'s name: letters, digits and _ . @ + = -, starting with a letter or digit; e.g. -e '
                'trainops_resume_from=multinode_autoch_autoth_20261123_101500)' % (resume_from, )]
    return []


def _retry_problems(params):
    """``retries`` above 0 needs a job that is waited for: only the wait sees that it failed."""
    retries = _integer(params.get('retries'))
    wait = params.get('wait')
    if retries and retries > 0 and str(wait).strip().lower() in ('false', 'no', 'off', '0'):
        return ['retries=%s: a job that is not waited for (wait=false) is not retried; wait for it, or retry none '
                '(e.g. -e retries=0)' % (params.get('retries'),)]
    return []


def _checkpoint_problems(params):
    """The checkpoint signal (USR1, USR2, or empty/null: none) and the seconds before a step's time limit at which the
    srun launcher sends it (an integer >= 0; 0 leaves it to the allocation's own --signal)."""
    problems = []
    signal_name = params.get('checkpoint_signal')
    if signal_name not in (None, '') + CHECKPOINT_SIGNAL_NAMES:
        problems.append('trainops_checkpoint_signal=%s: the checkpoint signal must be USR1, USR2, or empty for none '
                        '(e.g. -e trainops_checkpoint_signal=USR1)' % (signal_name,))
    seconds = params.get('checkpoint_signal_seconds')
    if seconds is not None:
        line = _integer_rule(params, 'checkpoint_signal_seconds', 'trainops_checkpoint_signal_seconds',
                             'seconds before the step\'s time limit at which the checkpoint signal is sent (0: not sent '
                             'by the launch)', 90)
        if line:
            problems.append(line)
        elif _integer(seconds) > 0 and signal_name in (None, ''):
            problems.append('trainops_checkpoint_signal_seconds=%s: there is no checkpoint signal to send '
                            '(trainops_checkpoint_signal is empty); set trainops_checkpoint_signal=USR1, or 0 seconds'
                            % (seconds,))
    return problems


def _controller_problems(params, which):
    """What the controller itself needs: rsync, when it syncs the workspace to a node that is not the controller
    itself, or with rsync options that only rsync implements (module_utils/_local_copy.py)."""
    if (params.get('sync_workspace') and needs_rsync(params.get('connection'), params.get('sync_rsync_opts') or ())
            and not which('rsync')):
        return ['rsync: not found on the controller (PATH=%s); the workspace is synced to this node with rsync. Install '
                'it (Debian/Ubuntu: sudo apt-get install rsync; RHEL/Fedora: sudo dnf install rsync), or set '
                'trainops_sync_workspace=false when every node already has the code' % os.environ.get('PATH', '')]
    return []


def launch_problems(params, which=shutil.which):
    """One line per launch parameter in ``params`` that does not fit; an empty list when all fit.

    ``params`` has the keys of the role's knobs without their ``trainops_`` prefix (``channels``,
    ``min_channels``, ``threads``, ``nproc_per_node``, ``master_port``, ``max_restarts``, ``rdzv_timeout``,
    ``collective_timeout``, ``rdzv_backend``, ``runtime``, ``git_check``, ``git_reference``, ``allow_dirty``,
    ``gpu_vendor``, ``run_name``, ``wait``, ``replace``, ``script``, ``config``, ``overrides``, ``env``,
    ``secret_env``, ``node_id``, ``script_args``, ``command_prefix``, ``training_network``, ``wait_timeout``,
    ``unreachable_grace``, ``stall_timeout``, ``straggler_threshold``, ``profile``, ``profile_ranks``, ``profile_stats``, ``profile_args``,
    ``launcher``, ``slurm_job_id``, ``slurm_problem``, ``resume_from``, ``retries``, ``retry_policy``,
    ``retries_without_progress``, ``exclude_after``, ``checkpoint_signal``,
    ``checkpoint_signal_seconds``, ``srun_start_timeout``, ``allow_few_cpus``, ``mem_per_node``, ``slurm_cpus``,
    ``slurm_mem_mb``, ``slurm_gpus_implicit`` (the slurm inventory's per-node variables, _slurm_problems),
    ``raw_params`` (the words of an ``-e`` that set no variable, :func:`stray_word_problems`)
    (what a launcher needs is checked by that launcher, _launchers.Launcher.problems), ``node``: the node's
    inventory name, which names its directories in the
    experiment, module_utils._collect),
    ``workspace_src`` (``src``), ``module``, ``progress_pattern``, ``pass_config_args`` (auto, true or false;
    config_args_passed), ``script_given`` (whether the command line gave ``script``), plus ``sync_workspace`` (a
    boolean) for the file checks, and ``connection`` (the node's ``ansible_connection``) and ``sync_rsync_opts``
    for the controller's rsync (looked up with ``which``; a local node needs none, module_utils/_local_copy.py).
    """
    rules = [
        _integer_rule(params, 'nproc_per_node', 'nproc', 'ranks per node (trainops_nproc_per_node)', 8),
        _integer_rule(params, 'master_port', 'master_port', 'the rendezvous port on the master', 29500),
        _integer_rule(params, 'max_restarts', 'trainops_max_restarts', 'torchrun --max-restarts', 0),
        _integer_rule(params, 'rdzv_timeout', 'trainops_rdzv_timeout', 'seconds to wait for every node to join', 300),
        _integer_rule(params, 'collective_timeout', 'trainops_collective_timeout',
                      'seconds a collective may wait for a peer', 300),
        _integer_rule(params, 'wait_timeout', 'trainops_wait_timeout', 'seconds to wait for the job (0: no limit)', 0),
        _integer_rule(params, 'unreachable_grace', 'trainops_unreachable_grace',
                      'seconds a node may stay unreachable during the wait', 300),
        _integer_rule(params, 'stall_timeout', 'trainops_stall_timeout',
                      'seconds without new log output before the job counts as stalled (0: off)', 900),
        _integer_rule(params, 'retries', 'retries',
                      'times a failed job is relaunched from its latest checkpoint (trainops_retries)', 1),
        _integer_rule(params, 'exclude_after', 'trainops_exclude_after',
                      'failures after which a node is left out (0: never)', 3),
        _integer_rule(params, 'retries_without_progress', 'trainops_retries_without_progress',
                      'attempts in a row without progress before the retries end (0: no limit)', 2),
        _choice_rule(params, 'rdzv_backend', 'trainops_rdzv_backend', 'the rendezvous'),
        _choice_rule(params, 'runtime', 'runtime', 'where the ranks run (trainops_runtime)'),
        _choice_rule(params, 'git_check', 'trainops_git_check', 'the code comparison'),
        _choice_rule(params, 'git_reference', 'trainops_git_reference', 'what the nodes\' code is compared with'),
        _choice_rule(params, 'gpu_vendor', 'trainops_gpu_vendor', 'the GPU vendor'),
        _boolean_rule(params, 'allow_dirty', 'allow_dirty', 'accepting uncommitted changes (trainops_allow_dirty)'),
        _boolean_rule(params, 'wait', 'wait', 'waiting for the job (trainops_wait)'),
        _boolean_rule(params, 'replace', 'replace', 'replacing a running job (trainops_replace)'),
        _boolean_rule(params, 'replace_source', 'replace_source',
                      'syncing over a workspace that holds another source (trainops_replace_source)'),
        _list_rule(params, 'sync_exclude', 'sync_exclude', 'what the workspace sync leaves out',
                   '-e \'{"sync_exclude": ["data/", "*.ckpt"]}\''),
        _list_rule(params, 'command_prefix', 'trainops_command_prefix', 'the wrapper before torchrun',
                   'trainops_command_prefix: [nsys, profile]'),
    ]
    rules.append(threshold_problem(params.get('straggler_threshold')))
    problems = _nccl_problems(params) + [line for line in rules if line]
    run_name = params.get('run_name')
    if not _RUN_NAME.fullmatch(str(run_name)):
        problems.append('run_name=%s: the experiment name prefix must start with a letter or digit and hold only '
                        'letters, digits, ., _ and - (e.g. -e run_name=llama_sweep)' % (run_name,))
    node_id = params.get('node_id')
    if not _NODE_ID.fullmatch('' if node_id is None else str(node_id)):
        problems.append('trainops_node_id=%s: the name of the node\'s state directory must be empty or letters, '
                        'digits, ., _ and -, starting with a letter or digit (e.g. trainops_node_id: node-07)'
                        % (node_id,))
    if params.get('node') is not None:
        try:
            node_dir_name(params['node'])
        except CollectRefused as exc:
            problems.append(str(exc))
    network = params.get('training_network')
    if network not in (None, ''):
        try:
            ipaddress.ip_network(str(network), strict=False)
        except ValueError:
            problems.append('trainops_training_network=%s: the training network must be empty or a network in CIDR '
                            'form (e.g. trainops_training_network: 10.0.0.0/16)' % (network,))
    problems.extend(stray_word_problems(params.get('raw_params')))
    return (problems + _entry_problems(params) + _path_problems(params) + _mapping_problems(params)
            + _profile_problems(params) + _launcher_problems(params) + _slurm_problems(params) + _checkpoint_problems(params)
            + _resume_problems(params) + _retry_problems(params) + _retry_policy.problems(params.get('retry_policy'))
            + _controller_problems(params, which))


def stray_word_problems(raw_params):
    """Words of an ``-e`` that set no variable: ansible-playbook keeps them as ``_raw_params``. ``-e 'args=--lr 3e-4'``
    sets ``args`` to ``--lr`` and leaves ``3e-4`` there. Such a launch would run with other values than the user
    wrote."""
    if raw_params in (None, ''):
        return []
    return ['-e was given words that set no variable: %s. A value with spaces needs quotes inside the -e '
            '(-e \'args="--lr 3e-4 --epochs 2"\') or JSON (-e \'{"args": ["--lr", "3e-4"]}\'); give each variable '
            'its own -e.' % (raw_params, )]


def merge_problems(by_node):
    """The lines of every node (a mapping of node to its list of lines, in node order) as one list.

    A line that every node has is kept as it is (the value came from the command line or a group variable);
    a line only some nodes have gets their names, ``line (node1, node3)``. Order: first seen.
    """
    nodes = list(by_node)
    seen = {}
    for node in nodes:
        for line in by_node[node] or []:
            holders = seen.setdefault(line, [])
            if node not in holders:
                holders.append(node)
    return [line if len(holders) == len(nodes) else '%s (on %s)' % (line, ', '.join(holders))
            for line, holders in seen.items()]
