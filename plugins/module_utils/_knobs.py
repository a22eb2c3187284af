# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The knobs of the collection, declared once, and the one rule for a knob left unset.

Each :class:`Knob` row says what a knob is: its role variable (``trainops_channels``), its key in the launch
parameters and the manifest (``channels``), its short ``-e`` name (``channels``), its ``nccl_env`` setting name and
the variables that setting decides, its type, range or choices, whether it may differ per node (a host variable),
whether a sweep may vary it, whether the manifest records it, and the library versions that read it (where that is
a simple range; the rules that depend on the version in detail stay in the deciders of ``_nccl_env/network.py`` and ``_nccl_env/gpudirect.py``
and ``_nccl_env/gpu.py``).

Read by: ``_launch_params.py`` (the range rules, ``launch_problems``), ``_sweep.py`` (the knobs a sweep varies),
``_nccl_env/deciders.py`` (``SETTINGS``, ``DECIDERS``), ``_nccl_env/network.py`` (``QOS``), the action ``nccl_env``
(``SETTINGS_SPEC``) and the filter ``knob_values`` (roles/job/vars/main.yml: the short knobs, the launch parameters
and the manifest's ``parameters``; roles/nccl_env/tasks/compute.yml: the settings). The role defaults, the roles'
argument specs, the ``nccl_env`` module's knob options and docs/reference/knobs.md are generated from these rows and
``_declarations/`` (descriptions, defaults, entry points) by ``hack/gen_docs.py`` (``--check`` in the tests).

Adding a per-node NCCL/RCCL knob such as ``NCCL_IB_TIMEOUT`` (an integer in a range, decided by ``_qos``): one row
here, its declaration in ``_declarations/roles.py`` (``option=`` for the module), docs/nccl.md, a test and a
changelog fragment; then run ``hack/gen_docs.py`` (docs/contributing/development.md, "Knobs").

roles/nccl_env/tasks/compute.yml passes ``role_vars`` to the action ``nccl_env``, which reads the settings from the
role variables itself (``role_settings``): the same values the filter ``knob_values`` gives for ``nccl_env``.
"""

from __future__ import annotations

import os
import re
import shlex
from collections import namedtuple

from ansible_collections.trainops.multinode.plugins.module_utils import _launchers

_INTEGER = re.compile(r'-?[0-9]+')

UNSET_WORDS = ('', 'none', 'null', 'unset')
"""Strings (any case, surrounding blanks ignored) that leave a knob to the library, as null does."""


def is_unset(value):
    """True when ``value`` leaves a knob to the library: null, or one of UNSET_WORDS (``''``, ``None``, ``unset``).

    The one rule for every knob: the launch validation, the ``nccl_env`` settings, the manifest. ``auto`` is not
    unset: where a knob has an automatic choice (``gid_index``, ``net_gdr_level``) it means that choice.
    """
    return value is None or (isinstance(value, str) and value.strip().lower() in UNSET_WORDS)


Knob = namedtuple('Knob', [
    'key',          # key in the launch parameters (launch_problems) and the manifest's parameters
    'var',          # the role variable
    'short',        # the short -e name (playbooks/launch.yml, sweep.yml), or None
    'setting',      # the nccl_env setting (module option) it is passed as, or None
    'env',          # the variables that setting decides (a tuple; empty when none of its own)
    'type',         # the role variable's type in the argument specs (raw where -e gives a string for a number)
    'kind',         # what its value is: int, bool, argv (a string is split as a shell would: argv()), path (on the
                    # controller, made absolute: controller_path()), ... (None: as type); the manifest records it so
    'option_type',  # the nccl_env module option's type (None: no option)
    'low',          # an integer knob's range (None: no bound); such a knob may be unset
    'high',
    'choices',      # the values a str knob takes (the role's argument specs), or None
    'omitted',      # values of the role variable compute.yml does not pass (the module decides): gpu_vendor auto
    'per_node',     # may differ per node (a host variable; each node's nccl_env computation reads its own)
    'sweep',        # a sweep may vary it (its short name is the sweep knob)
    'manifest',     # the manifest's parameters record it
    'launch',       # launch_problems checks it (a key of the launch parameters)
    'roles',        # the roles that declare the variable (defaults and argument specs)
    'library',      # the library versions that read it, where that is a simple range: 'NCCL >= 2.22.3', or None
    'decider',      # the function that decides its variables (DECIDERS; in _nccl_env.network or .gpu), or None
    'roce_only',    # a range knob of _qos that only RoCE ports use (a traffic class)
    'what',         # what it does, in a few words (messages, the nccl_env reasons)
])

_DEFAULTS = dict(short=None, setting=None, env=(), type='raw', kind=None, option_type=None, low=None, high=None, choices=None, omitted=(),
                 per_node=True, sweep=False, manifest=False, launch=False, roles=('job',), library=None, decider=None,
                 roce_only=False, what='')


def _knob(key, var=None, **fields):
    values = dict(_DEFAULTS, key=key, var='trainops_' + key if var is None else var)
    values.update(fields)
    return Knob(**values)


_NCCL = ('nccl_env',)
_BOTH = ('job', 'nccl_env')

KNOBS = (
    # NCCL/RCCL knobs: each node's nccl_env computation (roles/nccl_env/tasks/compute.yml) passes them as settings
    _knob('channels', short='channels', setting='channels', env=('NCCL_MAX_NCHANNELS',), option_type='int', low=1,
          sweep=True, manifest=True, launch=True, roles=_BOTH, decider='_channels',
          what='the maximum NCCL/RCCL channels'),
    _knob('min_channels', short='min_channels', setting='min_channels', env=('NCCL_MIN_NCHANNELS',), option_type='int',
          low=1, sweep=True, manifest=True, launch=True, roles=_BOTH, decider='_channels',
          what='the minimum channels'),
    _knob('threads', short='threads', setting='threads', env=('NCCL_NTHREADS', 'RCCL_THREADS_PER_BLOCK'),
          option_type='int', low=32, high=1024, sweep=True, manifest=True, launch=True, roles=_BOTH,
          decider='_threads', what='threads per block'),
    _knob('nproc_per_node', short='nproc', setting='nproc_per_node', option_type='int', low=1, high=256, sweep=True,
          manifest=True, launch=True, roles=_BOTH, what='ranks per node'),
    _knob('network_mode', short='network_mode', setting='network_mode', type='str', option_type='str',
          choices=('auto', 'rdma', 'tcp'), roles=_NCCL, what='the transport between nodes'),
    _knob('socket_ifname', setting='socket_ifname', env=('NCCL_SOCKET_IFNAME', 'GLOO_SOCKET_IFNAME'), type='str',
          option_type='raw', roles=_BOTH, decider='_socket', what='the socket interface'),
    _knob('ib_hca', setting='ib_hca', env=('NCCL_IB_HCA',), option_type='raw', roles=_NCCL,
          decider='_ib_hca (ports: _transport, _auto_ports, _explicit_ports)', what='the RDMA ports'),
    _knob('gid_index', var='trainops_ib_gid_index', setting='gid_index', env=('NCCL_IB_GID_INDEX',), option_type='raw',
          roles=_NCCL, decider='_gid', what='the RoCE GID index'),
    _knob('net_gdr_level', setting='net_gdr_level', env=('NCCL_NET_GDR_LEVEL',), option_type='raw', roles=_NCCL,
          decider='_gdr', what='the GPUDirect RDMA distance'),
    _knob('ib_tc', setting='ib_tc', env=('NCCL_IB_TC',), option_type='int', low=0, high=255, roles=_NCCL,
          decider='_qos', roce_only=True,
          what='traffic class of the data QPs (DSCP << 2 on RoCE, e.g. 106 for DSCP 26)'),
    _knob('ib_fifo_tc', setting='ib_fifo_tc', env=('NCCL_IB_FIFO_TC',), option_type='int', low=0, high=255,
          roles=_NCCL, library='NCCL >= 2.22.3', decider='_qos', roce_only=True,
          what='traffic class of the control (FIFO) messages'),
    _knob('ib_sl', setting='ib_sl', env=('NCCL_IB_SL',), option_type='int', low=0, high=15, roles=_NCCL,
          decider='_qos', what='InfiniBand service level'),
    _knob('ib_qps_per_connection', setting='ib_qps_per_connection', env=('NCCL_IB_QPS_PER_CONNECTION',),
          option_type='int', low=1, high=128, roles=_NCCL, decider='_qos',
          what='queue pairs per connection (NCCL_IB_MAX_QPS 128), spreads a connection over ECMP paths'),
    _knob('cross_nic', setting='cross_nic', env=('NCCL_CROSS_NIC',), option_type='int', low=0, high=2, roles=_NCCL,
          decider='_cross_nic', what='whether a ring may cross NICs'),
    _knob('library_version', var='trainops_nccl_library_version', setting='library_version', type='str',
          option_type='str', roles=_NCCL, what='the NCCL/RCCL version the ranks load'),
    _knob('nccl_debug', setting='nccl_debug', env=('NCCL_DEBUG',), type='str', option_type='str', roles=_NCCL,
          decider='_debug', what='NCCL_DEBUG'),
    _knob('gpu_vendor', setting='vendor', type='str', option_type='str', choices=('auto', 'nvidia', 'amd', 'none'),
          omitted=('auto',), launch=True, roles=_BOTH, what='the GPU vendor'),
    _knob('nnodes', var='trainops_nccl_env_nnodes', setting='nnodes', type='int', option_type='int', per_node=False,
          roles=_NCCL, what='the nodes in the job'),
    _knob('gpu_ids', var='trainops_nccl_env_gpu_ids', setting='gpu_ids',
          env=('CUDA_VISIBLE_DEVICES', 'ROCR_VISIBLE_DEVICES'), type='list', option_type='raw', roles=_NCCL,
          decider='_visible_devices', what='the GPUs the ranks may use'),
    _knob('rocm_env', setting='rocm_defaults', type='dict', option_type='dict', roles=_NCCL,
          what='ROCm settings on AMD nodes'),
    _knob('require_transport', var='', setting='require_transport', env=('NCCL_NET',), type=None, option_type='bool',
          roles=(), decider='_require_transport', what='NCCL fails instead of falling back'),
    _knob('env', setting='env_overrides', type='dict', option_type='dict', launch=True, roles=_BOTH,
          what='the ranks\' extra environment'),
    # the job's other knobs
    # the user's code: the workspace on the controller, its entrypoint (a file in it, or a module as python -m runs it),
    # the entrypoint's own arguments (a string split as a shell would, or a list) and what its progress lines match
    _knob('workspace_src', short='src', type='str', kind='path', per_node=False, launch=True,
          what='the workspace on the controller'),
    _knob('script', short='script', type='str', manifest=True, launch=True),
    _knob('module', short='module', type='str', manifest=True, launch=True),
    _knob('script_args', short='args', type='raw', kind='argv', manifest=True, launch=True),
    _knob('progress_pattern', short='progress_pattern', type='str', launch=True),
    _knob('sync_exclude', short='sync_exclude', type='list', launch=True, what='what the workspace sync leaves out'),
    _knob('replace_source', short='replace_source', kind='bool', launch=True,
          what='syncing over a workspace that holds another source'),
    _knob('config', short='config', type='str', sweep=True, manifest=True, launch=True,
          what='the config file passed as C(--config)'),
    _knob('overrides', short='overrides', type='list', manifest=True, launch=True),
    _knob('master_port', short='master_port', kind='int', low=1024, high=65535, per_node=False, manifest=True,
          launch=True),
    _knob('rdzv_backend', type='str', choices=('static', 'c10d'), per_node=False, manifest=True, launch=True),
    _knob('rdzv_timeout', type='int', low=1, manifest=True, launch=True),
    _knob('max_restarts', type='int', low=0, manifest=True, launch=True),
    _knob('collective_timeout', type='int', low=1, launch=True),
    _knob('run_name', short='run_name', type='str', per_node=False, manifest=True, launch=True),
    _knob('wait', short='wait', kind='bool', per_node=False, manifest=True, launch=True),
    _knob('unreachable_grace', type='int', low=0, manifest=True, launch=True),
    _knob('stall_timeout', type='int', low=0, manifest=True, launch=True),
    _knob('straggler_threshold', type='float', manifest=True, launch=True),
    _knob('wait_timeout', type='int', low=0, manifest=True, launch=True),
    _knob('resume_from', type='str', per_node=False, manifest=True, launch=True),
    _knob('retries', short='retries', kind='int', low=0, per_node=False, manifest=True, launch=True),
    _knob('retry_policy', type='dict', per_node=False, manifest=True, launch=True,
          what='exit codes and log patterns that make a failure retryable or fatal'),
    _knob('exclude_after', type='int', low=0, per_node=False, manifest=True, launch=True,
          what='failures after which a node is left out, remembered across launches'),
    _knob('retries_without_progress', type='int', low=0, per_node=False, manifest=True, launch=True,
          what='attempts in a row without progress before the retries end'),
    _knob('replace', short='replace', kind='bool', launch=True),
    _knob('allow_dirty', short='allow_dirty', kind='bool', launch=True),
    _knob('runtime', short='runtime', type='str', choices=('host', 'container'), launch=True),
    _knob('git_check', type='str', choices=('auto', 'always', 'never'), launch=True),
    _knob('git_reference', type='str', choices=('controller', 'first_node'), launch=True),
    _knob('secret_env', type='dict', launch=True),
    _knob('node_id', type='str', launch=True),
    _knob('command_prefix', type='list', launch=True),
    _knob('training_network', type='str', launch=True),
    _knob('profile', short='profile', type='str', launch=True),
    _knob('profile_ranks', short='profile_ranks', type='raw', launch=True),
    _knob('profile_stats', short='profile_stats', type='bool', launch=True),
    _knob('profile_args', short='profile_args', type='list', launch=True),
    # the launchers' registry (module_utils/_launchers.py) names them
    _knob('launcher', short='launcher', type='str', choices=_launchers.NAMES, launch=True),
    _knob('checkpoint_signal', type='str', launch=True),
    _knob('checkpoint_signal_seconds', type='int', low=0, launch=True),
    _knob('srun_start_timeout', type='int', low=1, launch=True),
    # what a Slurm allocation must hold on each node (the slurm inventory's trainops_slurm_cpus, trainops_slurm_mem_mb)
    _knob('allow_few_cpus', type='bool', launch=True, what='launching with fewer allocated CPUs than ranks on a node'),
    _knob('mem_per_node', type='str', launch=True, what='the memory the workload needs on each node'),
)
"""Every knob, in the order the launch parameters and the manifest list them."""


def option(knob):
    """The ``nccl_env`` module's option (argument spec) for a knob's setting."""
    spec = dict(type=knob.option_type)
    if knob.choices:
        spec['choices'] = [choice for choice in knob.choices if choice not in knob.omitted]
    return spec


BY_KEY = dict((knob.key, knob) for knob in KNOBS)
BY_SETTING = dict((knob.setting, knob) for knob in KNOBS if knob.setting)
SETTINGS = tuple(knob.setting for knob in KNOBS if knob.setting)
"""The settings of ``_nccl_env.deciders.compute`` (the ``nccl_env`` module's options besides facts and cluster)."""

SHORT = tuple(knob for knob in KNOBS if knob.short)
SWEEP = tuple(knob for knob in KNOBS if knob.sweep)
LAUNCH = tuple(knob for knob in KNOBS if knob.launch)
MANIFEST = tuple(knob for knob in KNOBS if knob.manifest)
NCCL_ENV = tuple(knob for knob in KNOBS if knob.setting and knob.var)
"""The knobs roles/nccl_env/tasks/compute.yml passes from role variables (require_transport has none)."""

RANGE_SETTINGS = tuple(knob for knob in KNOBS if knob.setting and knob.option_type == 'int' and knob.low is not None)
"""The integer settings of a range, unset (omitted) when the role variable is unset."""

QOS_KNOBS = tuple(knob for knob in KNOBS if knob.decider == '_qos')
"""The settings ``_nccl_env.network._qos`` checks against their range and sets as they are (no rule of their own)."""


def integer(value):
    """The value as an int when it is a whole number (8, '8', ' 8 ', '-1'), else None (bools are not numbers)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    return int(text) if _INTEGER.fullmatch(text) else None


def argv(value):
    """An argument list from a string split as a shell would (``shlex.split``: ``'--lr 0.1 --name "run 1"'``), or
    the value as it is: a list, or a string that cannot be split (an unclosed quote; launch_problems says so)."""
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError:
            return value
    return value


def controller_path(value):
    """A path on the controller as an absolute one: ``~`` expanded, a relative path from the directory ansible-playbook
    runs in (``-e src=~/src/myproject``, ``-e src=.``); what is no string, or empty, as it is."""
    if isinstance(value, str) and value.strip():
        return os.path.realpath(os.path.expanduser(value.strip()))
    return value


def _truth(value):
    return str(value).strip().lower() in ('true', 'yes', 'on', '1')


# --- the filter knob_values (roles/job/vars/main.yml) and the action nccl_env's role_vars (compute.yml) --------

USES = ('short', 'launch', 'manifest', 'nccl_env')


def _rows(use):
    return {'short': SHORT, 'launch': LAUNCH, 'manifest': MANIFEST, 'nccl_env': NCCL_ENV}[use]


def names(use):
    """The role variables one use reads, in order (the terms of ``query('ansible.builtin.vars', ...)``); for
    ``short``, also ``short`` (the short names) and ``short_pattern`` (for ``query('ansible.builtin.varnames')``)."""
    rows = _rows(use)
    result = dict(variables=[knob.var for knob in rows])
    if use == 'short':
        result.update(short=[knob.short for knob in rows],
                      short_pattern='^(%s)$' % '|'.join(knob.short for knob in rows),
                      sweep=[knob.short for knob in rows if knob.sweep])
    return result


def _manifest_value(knob, value):
    if (knob.kind or knob.type) == 'bool':
        return _truth(value) if isinstance(value, str) else bool(value)
    if (knob.kind or knob.type) == 'float' and not isinstance(value, bool):
        try:
            return float(value)
        except (TypeError, ValueError):
            return value
    if knob.low is not None:
        if is_unset(value):
            return None
        number = integer(value)
        return value if number is None else number
    return value


_OMIT = object()


def _setting_value(knob, value):
    """What compute.yml passes for a knob: _OMIT leaves the setting out (the library or the facts decide: an unset
    range knob, an ``omitted`` value); any
    other value, null included, is passed (a null gid_index, net_gdr_level or nccl_debug means unset)."""
    if value in knob.omitted:
        return _OMIT
    if knob in RANGE_SETTINGS:
        if is_unset(value):
            return _OMIT
        number = integer(value)
        return value if number is None else number
    if knob.option_type == 'int':
        number = integer(value)
        return value if number is None else number
    return value


def values(values, use, given=None):
    """The knobs of one use as a mapping, from their role variables' values (a list, in the order of
    ``names(use)``) and ``given``:

    * ``short``: ``{key: value}``, the short knob's value where ``given`` (``{short name: value}``, the short
      knobs the command line set) has it, else the role variable's (validate.yml sets the role variables to them);
    * ``launch``: ``{key: value}`` for ``launch_problems``, a short knob's value taken from ``given`` (the
      ``short`` result) where it has the key;
    * ``manifest``: ``{key: value}``, a range knob that is unset as null and a number as an int, a boolean as one, a
      float knob's number as a float;
    * ``nccl_env``: ``{setting: value}`` for the ``nccl_env`` module's ``settings``, leaving out what the library
      should decide (an unset range knob; gpu_vendor auto).
    """
    rows = _rows(use)
    values = list(values)
    if len(values) != len(rows):
        raise ValueError('knob_values %s: %d values for %d knobs (%s)' % (
            use, len(values), len(rows), ', '.join(knob.var for knob in rows)))
    given = dict(given or {})
    result = {}
    for knob, value in zip(rows, values):
        if use == 'short':
            result[knob.key] = given.get(knob.short, value)
            if knob.kind == 'argv':
                result[knob.key] = argv(result[knob.key])
            elif knob.kind == 'path':
                result[knob.key] = controller_path(result[knob.key])
        elif use == 'launch':
            result[knob.key] = given.get(knob.key, value) if knob.short else value
        elif use == 'manifest':
            result[knob.key] = _manifest_value(knob, value)
        else:
            value = _setting_value(knob, value)
            if value is not _OMIT:
                result[knob.setting] = value
    return result


def jinja_int(value):
    """Jinja's ``int`` filter: ``'8'`` and ``8.0`` are 8, what is no number is 0."""
    try:
        return int(value, 10) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return 0


def role_settings(read, play_hosts):
    """The ``nccl_env`` settings from the role variables, as roles/nccl_env passes them (the module's ``role_vars``):
    ``read(var)`` gives a role variable's value (templated; it raises for one that is not defined), ``play_hosts`` the
    play's hosts. ``values(..., 'nccl_env')`` of every variable ``names('nccl_env')`` lists; the node count (``nnodes``)
    is ``trainops_nccl_env_nnodes`` where that is more than 0 (the job role passes its own), else the play's hosts."""
    settings = values([read(knob.var) for knob in NCCL_ENV], 'nccl_env')
    nnodes = jinja_int(settings.get(BY_KEY['nnodes'].setting))
    settings[BY_KEY['nnodes'].setting] = nnodes if nnodes > 0 else len(play_hosts or ())
    return settings


def range_problem(params, knob, name=None, example=None):
    """A line when ``params[knob.key]`` is neither unset nor an integer in the knob's range, else None."""
    value = params.get(knob.key)
    if is_unset(value):
        return None
    number = integer(value)
    if number is not None and number >= knob.low and (knob.high is None or number <= knob.high):
        return None
    bounds = ('an integer >= %d' % knob.low if knob.high is None else
              'an integer from %d to %d' % (knob.low, knob.high))
    name = name or knob.short or knob.var
    return '%s=%s: %s must be unset or %s (e.g. -e %s=%s)' % (name, value, knob.what or knob.key, bounds, name,
                                                              knob.low if example is None else example)
