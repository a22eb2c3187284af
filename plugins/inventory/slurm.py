# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: slurm
short_description: Training nodes of the current Slurm allocation
version_added: 0.1.0
author:
  - trainops maintainers (@trainops)
description:
  - 'Builds the inventory of the Slurm allocation this command runs in (inside C(salloc) or an C(sbatch) script):
    every node goes into one group (default C(trainops_nodes)) in allocation order, the first node being the master
    (node rank 0), as C(scontrol show hostnames) lists them, with the GPUs the job holds on each node.'
  - The nodes come from O(nodelist), else C(SLURM_JOB_NODELIST), else C(SLURM_NODELIST). Hostlist expressions are
    expanded like C(scontrol show hostnames) does (C(gpu-[01-04,07],cpu9), C(node[001-003]-ib),
    C(rack[1-2]-n[01-02]); order and zero padding kept). When the node list comes from the environment and
    C(SLURM_JOB_NUM_NODES) (or C(SLURM_NNODES)) is set, the counts must agree.
  - 'The GPUs come from Slurm itself: with C(SLURM_JOB_ID) set, the plugin runs C(scontrol --details show job
    <SLURM_JOB_ID>) (O(scontrol), within O(scontrol_timeout) seconds) and reads, for every node, the GPUs the job was
    allocated there (the detail line C(Nodes=lab-node[01-02] ... GRES=gpu:h100:4(IDX:0-3)); several types are summed),
    whatever the request was (C(--gres=gpu:N), C(--gpus-per-node=N), C(--gpus=N), typed or not). A job holding more
    GPUs on a node than it asked for per node (C(--exclusive --gres=gpu:2) holds them all, C(TresPerNode=gres:gpu:2))
    counts the ones its steps get, the first of each type asked for. The job must hold every node of the inventory and
    be C(RUNNING); a job that is ending (C(COMPLETING), GPUs released: a cancelled batch job whose script runs
    C(stop.yml)) still gives its nodes, without ranks per node, and the group variable C(trainops_slurm_problem)
    saying why, which the C(job) role refuses to launch with (C(stop.yml) and C(status.yml) need no ranks).'
  - 'Ranks per node (C(trainops_nproc_per_node)): O(gpus_per_node) when set, else the number of GPUs the job holds on
    each node, which must be the same on every node (C(--gpus=N) may spread them unevenly: allocate with
    C(--gpus-per-node=N), or set O(gpus_per_node)). Parsing fails, naming O(gpus_per_node) and C(--gpus-per-node),
    when the job holds no GPU (a CPU-only allocation: set O(gpus_per_node) to the ranks wanted), when there is no job
    to ask (no C(SLURM_JOB_ID), for example O(nodelist) outside an allocation), or when scontrol cannot be run or read.
    C(SLURM_TASKS_PER_NODE) and C(SLURM_JOB_CPUS_PER_NODE) count tasks and CPUs, never ranks; C(SLURM_GPUS_*) are not
    read (they are set for some requests only and describe one node).'
  - Heterogeneous allocations (C(SLURM_JOB_NODELIST_HET_GROUP_<n>), C(SLURM_HET_SIZE)) are refused, naming their
    components, unless O(nodelist) picks the nodes (then the GPUs of every component are read).
  - Outside an allocation, with no O(nodelist), parsing fails with C(not inside a Slurm allocation).
  - 'The source is a YAML file whose name ends in C(.slurm.yml) or C(.slurm.yaml), with
    C(plugin: trainops.multinode.slurm); the C(auto) inventory plugin, enabled by default, hands it to this plugin.'
  - 'Variables set on every node: C(trainops_node_rank) (0, 1, ... in allocation order), C(trainops_nproc_per_node),
    C(trainops_slurm_gpu_ids) (the indexes of the GPUs the job holds on that node, as Slurm numbers them: C([4, 5, 6,
    7]); set only when Slurm gives them, not for GPUs configured without device files, C(gpu(CNT:4))),
    C(trainops_slurm_cpus) (the CPUs the job holds there, C(CPU_IDs=)) and C(trainops_slurm_mem_mb) (its memory in MB,
    C(Mem=); not set when Slurm does not track memory); the first node also gets C(trainops_master=true). On the
    group: C(trainops_slurm_nodelist) (the expression), C(trainops_slurm_job_id) (from C(SLURM_JOB_ID), when set),
    C(trainops_slurm_gpus_implicit) (true when the job holds GPUs it did not ask for, with whole nodes: a srun step
    gets none of them, and C(launcher=srun) refuses it), then O(vars).'
  - 'A node whose allocation holds fewer CPUs than its ranks (C(salloc --gres=gpu:2) holds one CPU per node unless
    the site sets C(DefCpuPerGPU)) gets a warning naming it; the launch refuses it unless
    C(trainops_allow_few_cpus=true), and gives each rank C(OMP_NUM_THREADS) = CPUs / ranks (at least 1).'
  - A launch over SSH (C(launcher=ssh)) gives each node's ranks C(CUDA_VISIBLE_DEVICES) (NVIDIA) or
    C(ROCR_VISIBLE_DEVICES) (AMD), both when the node has no GPU vendor, from C(trainops_slurm_gpu_ids), as Slurm does
    for its own steps (docs/slurm.md).
extends_documentation_fragment:
  - ansible.builtin.constructed
options:
  plugin:
    description:
      - The name of this plugin; V(trainops.multinode.slurm) marks a YAML file as this plugin's source.
    type: str
    required: true
    choices: [trainops.multinode.slurm]
  nodelist:
    description:
      - A Slurm hostlist expression used instead of C(SLURM_JOB_NODELIST)/C(SLURM_NODELIST), for example
        V(gpu-[01-04]) to run on part of the allocation (every node must belong to the job), or to try the inventory
        outside one (with O(gpus_per_node)).
    type: str
  gpus_per_node:
    description:
      - Ranks to start on every node (C(trainops_nproc_per_node)), instead of the GPUs the job holds on each node;
        needed for a job without GPUs (training on CPUs) and outside an allocation. C(trainops_slurm_gpu_ids) is
        still read from the job when there is one (a failing scontrol is then only a warning).
    type: int
  scontrol:
    description:
      - The C(scontrol) program to ask for the job's GPUs, a name looked up in C(PATH) or a path.
    type: str
    default: scontrol
  scontrol_timeout:
    description:
      - Seconds scontrol may take before parsing fails.
    type: int
    default: 30
  group:
    description:
      - The group the nodes are put in. The launch playbooks run on O(group) through C(trainops_nodes_group); for a
        name other than V(trainops_nodes) pass C(-e trainops_nodes_group=<name>).
    type: str
    default: trainops_nodes
  vars:
    description:
      - Variables set on O(group), for example C(ansible_user), C(trainops_python), C(trainops_socket_ifname).
        Per-node values (C(trainops_nproc_per_node), C(trainops_slurm_gpu_ids)) are host variables and win over
        these; use O(gpus_per_node) to override the ranks per node.
    type: dict
    default: {}
notes:
  - 'Host names are used as they appear in the node list, which is how nodes of one allocation reach each other; use
    O(compose) to set C(ansible_host) when Ansible must use another name or address (for example
    C(ansible_host: inventory_hostname ~ "-ib")).'
  - 'The GPU indexes are those of the node''s gres.conf (C(IDX)), which Slurm puts into C(CUDA_VISIBLE_DEVICES) of its
    steps when devices are not constrained by cgroups. Where C(pam_slurm_adopt) confines SSH sessions to the job''s
    devices (C(ConstrainDevices=yes)), a job holding only part of a node sees its GPUs numbered from 0: the launch''s
    preflight finds that on the node and gives the ranks those local indexes (docs/slurm.md).'
seealso:
  - plugin: trainops.multinode.node_list
    plugin_type: inventory
  - plugin: trainops.multinode.hostfile
    plugin_type: filter
"""

EXAMPLES = r"""
# allocation.slurm.yml -- inside the allocation:
#   salloc -N 4 --gpus-per-node=8        (or --gres=gpu:8, or --gpus-per-node=h100:8)
#   ansible-inventory -i allocation.slurm.yml --graph --vars
#   ansible-playbook -i allocation.slurm.yml playbooks/launch.yml -e channels=42
plugin: trainops.multinode.slurm
vars:
  trainops_python: /opt/venv/bin/python
  trainops_gpu_vendor: nvidia

---
# Part of the allocation, 4 ranks each, over the InfiniBand host names
plugin: trainops.multinode.slurm
nodelist: gpu-[01-02]
gpus_per_node: 4
compose:
  ansible_host: inventory_hostname ~ '-ib'

---
# A CPU-only allocation (salloc -N 2 -c 16): 2 ranks per node, Slurm's own client elsewhere
plugin: trainops.multinode.slurm
gpus_per_node: 2
scontrol: /opt/slurm/bin/scontrol
vars:
  trainops_gpu_vendor: none
"""

import os
import re
import subprocess

from ansible.errors import AnsibleParserError
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable

from ansible_collections.trainops.multinode.plugins.inventory.node_list import add_nodes
from ansible_collections.trainops.multinode.plugins.module_utils._hostlist import (
    HostlistError,
    expand_hostlist,
    is_address,
    node_layout,
)
from ansible_collections.trainops.multinode.plugins.module_utils._slurm_alloc import (
    CPU_HINT,
    SCONTROL_ARGS,
    JobNotRunning,
    SlurmJobError,
    few_cpus,
    het_groups,
    parse_job,
)

YAML_SUFFIXES = ('.slurm.yml', '.slurm.yaml')
NODELIST_VARS = ('SLURM_JOB_NODELIST', 'SLURM_NODELIST')
NUM_NODES_VARS = ('SLURM_JOB_NUM_NODES', 'SLURM_NNODES')
GPUS_HINT = 'set gpus_per_node: N in the source, or allocate the GPUs with --gpus-per-node=N (or --gres=gpu:N)'
"""How to give the ranks per node, in every message that cannot find them."""


def _first_env(environ, names):
    """(name, value) of the first variable in ``names`` that is set and not empty, else (None, None)."""
    for name in names:
        value = environ.get(name, '').strip()
        if value:
            return name, value
    return None, None


def allocation_nodes(environ, nodelist=None):
    """The allocation's nodes as ``(hosts, origin)``; origin: ``{'nodelist': where from, 'expression': ...}``.

    ``environ`` is a mapping like ``os.environ``; ``nodelist`` overrides it. Raises HostlistError with a message for
    the user.
    """
    if nodelist:
        nodelist_from = 'nodelist option'
    else:
        groups = het_groups(environ)
        size = environ.get('SLURM_HET_SIZE', '').strip()
        if groups or size:
            raise HostlistError(
                'heterogeneous job with %s components (%s): a launch needs one list of nodes with the same ranks on '
                'each; allocate one component (no ":" between option groups of salloc/sbatch), or set nodelist: in '
                'the source to the nodes to use' % (
                    size or len(groups), ', '.join('SLURM_JOB_NODELIST_HET_GROUP_%d=%s' % (index, group)
                                                   for index, group in enumerate(groups)) or 'SLURM_HET_SIZE=%s' % size))
        nodelist_from, nodelist = _first_env(environ, NODELIST_VARS)
        if not nodelist:
            raise HostlistError('not inside a Slurm allocation: neither %s is set, and the source sets no "nodelist"'
                                % ' nor '.join(NODELIST_VARS))
    hosts = expand_hostlist(nodelist)
    if not hosts:
        raise HostlistError('%s %r names no nodes' % (nodelist_from, nodelist))
    seen = set()
    for host in hosts:
        if not is_address(host):
            raise HostlistError('%s %r gives %r, which is not a host name' % (nodelist_from, nodelist, host))
        if host in seen:
            raise HostlistError('%s %r names %s twice' % (nodelist_from, nodelist, host))
        seen.add(host)

    if nodelist_from != 'nodelist option':
        num_name, num_value = _first_env(environ, NUM_NODES_VARS)
        if num_value and num_value.isdigit() and int(num_value) != len(hosts):
            raise HostlistError('%s=%s expands to %d nodes, but %s=%s'
                                % (nodelist_from, nodelist, len(hosts), num_name, num_value))
    return hosts, {'nodelist': nodelist_from, 'expression': nodelist}


def job_id_from(environ):
    """``SLURM_JOB_ID`` (digits), or None when not set. Raises HostlistError for anything else."""
    value = environ.get('SLURM_JOB_ID', '').strip()
    if value and not re.fullmatch(r'[0-9]+', value):
        raise HostlistError('SLURM_JOB_ID=%s is not a job id (digits)' % value)
    return value or None


def node_gpus(hosts, job=None, gpus_per_node=None, job_id=None):
    """Ranks per node and GPU ids per node as ``(nproc list, {host: ids}, where the ranks came from)``.

    ``job`` is :func:`parse_job`'s result for ``job_id``, or None when there is no job to ask (or asking failed and
    ``gpus_per_node`` is set). Raises HostlistError naming gpus_per_node / --gpus-per-node when the ranks cannot be
    known or differ between nodes.
    """
    gpus = {}
    if job is not None:
        missing = [host for host in hosts if host not in job['nodes']]
        if missing:
            raise HostlistError('%s %s not a node of job %s (its nodes: %s)' % (
                ', '.join(missing), 'is' if len(missing) == 1 else 'are', job['job_id'],
                ', '.join(job['nodes']) if len(job['nodes']) <= 8 else job['nodelist']))
        gpus = dict((host, job['nodes'][host]) for host in hosts)
    ids = dict((host, gpus[host]['ids']) for host in hosts if gpus.get(host) and gpus[host]['ids'])
    if gpus_per_node is not None:
        if int(gpus_per_node) < 1:
            raise HostlistError('gpus_per_node must be at least 1, not %s' % gpus_per_node)
        return [int(gpus_per_node)] * len(hosts), ids, 'gpus_per_node option'
    if job is None:
        raise HostlistError('ranks per node unknown: there is no Slurm job to ask for its GPUs (SLURM_JOB_ID is not '
                            'set); %s' % GPUS_HINT)
    counts = [gpus[host]['count'] for host in hosts]
    if not any(counts):
        raise HostlistError('job %s holds no GPUs on %s (scontrol: no gpu in the GRES of its nodes): %s; for training '
                            'on CPUs set gpus_per_node: N to the ranks per node' % (
                                job['job_id'], ', '.join(hosts) if len(hosts) <= 8 else job['nodelist'], GPUS_HINT))
    if len(set(counts)) > 1:
        raise HostlistError('job %s holds different numbers of GPUs on its nodes (%s), and a launch starts the same '
                            'number of ranks on every node: allocate with --gpus-per-node=N (not --gpus=N), or set '
                            'gpus_per_node: N in the source (at most %d)' % (
                                job['job_id'], ', '.join('%s: %d' % (h, c) for h, c in zip(hosts, counts)),
                                min(counts)))
    return counts, ids, 'job %s GRES (scontrol)' % job['job_id']


def run_scontrol(job_id, program='scontrol', timeout=30):
    """The text of ``scontrol --details show job <job_id>``. Raises SlurmJobError saying what went wrong."""
    argv = [program] + list(SCONTROL_ARGS) + [str(job_id)]
    command = ' '.join(argv)
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        raise SlurmJobError('`%s` did not answer within %d s (scontrol_timeout)' % (command, timeout))
    except OSError as exc:
        raise SlurmJobError('cannot run `%s`: %s (set scontrol: to the path of Slurm\'s scontrol)'
                            % (command, exc.strerror or exc))
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout or '').strip().splitlines()
        raise SlurmJobError('`%s` exited with %d: %s' % (command, proc.returncode, said[-1] if said else 'no output'))
    return proc.stdout


def allocation(environ, nodelist=None, gpus_per_node=None, scontrol=None, warn=None):
    """Everything the inventory needs: ``(hosts, nproc list, {host: gpu ids}, origin)``.

    A job that is not running (ending: a cancelled batch job whose script stops its ranks with stop.yml) still gives
    its nodes, so that stop.yml and status.yml work; without ``gpus_per_node`` its nproc list is None and
    ``origin['problem']`` says why a launch must not use it (the job role refuses a launch with it).

    ``scontrol(job_id)`` returns scontrol's output (:func:`run_scontrol`); ``warn(message)`` reports what does not
    stop the parse. Raises HostlistError (SlurmJobError is one) with a message for the user.
    """
    hosts, origin = allocation_nodes(environ, nodelist)
    job_id = job_id_from(environ)
    job = None
    if job_id:
        try:
            job = parse_job((scontrol or run_scontrol)(job_id), job_id)
        except JobNotRunning as exc:
            if gpus_per_node is None:
                problem = 'cannot read the GPUs of job %s: %s; %s' % (job_id, exc, GPUS_HINT)
                if warn:
                    warn(problem + ' (only playbooks that need no ranks per node, stop.yml and status.yml, can use it)')
                return hosts, None, {}, dict(origin, nproc=None, job_id=job_id, problem=problem)
            job = None
        except SlurmJobError as exc:
            if gpus_per_node is None:
                raise SlurmJobError('cannot read the GPUs of job %s: %s; %s' % (job_id, exc, GPUS_HINT))
            if warn:
                warn('cannot read the GPUs of job %s (%s): CUDA_VISIBLE_DEVICES/ROCR_VISIBLE_DEVICES are left to the '
                     'nodes' % (job_id, exc))
            job = None
    if job is not None and job['components'] and origin['nodelist'] != 'nodelist option':
        raise SlurmJobError('heterogeneous job %s with %d components (%s): a launch needs one list of nodes with the '
                            'same ranks on each; allocate one component (no ":" between option groups of '
                            'salloc/sbatch), or set nodelist: in the source to the nodes to use' % (
                                job_id, len(job['components']),
                                ', '.join(str(c['nodelist']) for c in job['components'])))
    nproc, ids, nproc_from = node_gpus(hosts, job, gpus_per_node, job_id)
    held = {}
    if job is not None:
        held = dict((host, dict(cpus=job['nodes'][host].get('cpus'), mem_mb=job['nodes'][host].get('mem_mb')))
                    for host in hosts)
    if job is not None and warn:
        unknown = [host for host in hosts if host not in ids and job['nodes'][host]['count']]
        if unknown:
            warn('job %s: Slurm gives no GPU indexes for %s (a gres.conf without File=): their ranks see every GPU of '
                 'the node' % (job_id, ', '.join(unknown)))
        short = [(host, few_cpus(held[host]['cpus'], ranks)) for host, ranks in zip(hosts, nproc)]
        short = [(host, line) for host, line in short if line]
        if short:
            held_text = ', '.join('%s on %s' % (line, host) for host, line in short)
            warn('job %s holds %s: the ranks of a node and their data loaders share those CPUs; %s. A launch refuses '
                 'it unless trainops_allow_few_cpus=true' % (job_id, held_text, CPU_HINT))
    origin = dict(origin, nproc=nproc_from, job_id=job_id, held=held,
                  gpus_implicit=bool(job is not None and job['gpus_implicit']))
    return hosts, nproc, ids, origin


class InventoryModule(BaseInventoryPlugin, Constructable):
    """Training nodes of the current Slurm allocation, from a ``*.slurm.yml`` source."""

    NAME = 'trainops.multinode.slurm'

    def verify_file(self, path):
        return (super(InventoryModule, self).verify_file(path) and not os.path.isdir(path)
                and os.path.basename(path).endswith(YAML_SUFFIXES))

    def parse(self, inventory, loader, path, cache=True):
        super(InventoryModule, self).parse(inventory, loader, path, cache=cache)
        self._read_config_data(path)
        group_vars = self.get_option('vars') or {}
        if not isinstance(group_vars, dict):
            raise AnsibleParserError('%s: "vars" must be a mapping of variable names to values' % path)
        program, timeout = self.get_option('scontrol'), self.get_option('scontrol_timeout')
        if not program or int(timeout) < 1:
            raise AnsibleParserError('%s: scontrol must name a program and scontrol_timeout be at least 1' % path)

        def scontrol(job_id):
            return run_scontrol(job_id, program, int(timeout))

        def warn(message):
            self.display.warning('%s: %s' % (path, message))

        try:
            hosts, nproc, gpu_ids, origin = allocation(os.environ, self.get_option('nodelist'),
                                                       self.get_option('gpus_per_node'), scontrol, warn)
        except HostlistError as exc:
            raise AnsibleParserError('%s: %s' % (path, to_native(exc)))
        self.display.vvv('%s: %d node(s) from %s, ranks per node from %s'
                         % (path, len(hosts), origin['nodelist'], origin['nproc']))

        slurm_vars = {'trainops_slurm_nodelist': origin['expression']}
        if origin['job_id']:
            slurm_vars['trainops_slurm_job_id'] = origin['job_id']
        if origin.get('problem'):
            slurm_vars['trainops_slurm_problem'] = origin['problem']
        if origin.get('gpus_implicit'):
            slurm_vars['trainops_slurm_gpus_implicit'] = True
        slurm_vars.update(group_vars)
        layout = node_layout([(host, None, count) for host, count in zip(hosts, nproc or [None] * len(hosts))])
        for name, variables in layout:
            if name in gpu_ids:
                variables['trainops_slurm_gpu_ids'] = list(gpu_ids[name])
            held = origin.get('held', {}).get(name) or {}
            for key in ('cpus', 'mem_mb'):
                if held.get(key):
                    variables['trainops_slurm_' + key] = held[key]
        add_nodes(self, self.get_option('group'), layout, slurm_vars, strict=self.get_option('strict'))
