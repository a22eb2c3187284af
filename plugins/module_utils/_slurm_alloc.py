# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""What a Slurm job holds on each node, from ``scontrol --details show job <id>``. Pure parsing, no I/O.

The ``trainops.multinode.slurm`` inventory runs scontrol and hands its output here:

* :func:`parse_job` -- one job's record: id, state, node list, heterogeneous component, and per node the GPUs it
  holds, from the detail lines Slurm prints under ``JOB_GRES=`` (``-d``/``--details``)::

      JOB_GRES=gpu:labgpu:8
        Nodes=lab-node[01-02] CPU_IDs=0 Mem=0 GRES=gpu:labgpu:4(IDX:0-3)

  ``Nodes=`` is a hostlist expression for every node with that same detail; ``GRES=`` lists the job's generic
  resources on them, in the forms slurmctld writes (22.05.8 src/slurmctld/gres_ctld.c:1738-1747
  gres_ctld_job_build_details; 23.11 the same file, 2033-2043; 24.05 and later src/stepmgr/gres_stepmgr.c):
  ``gpu:4(IDX:0-3)``, typed ``gpu:h100:4(IDX:0-3)``, several types ``gpu:a:2(IDX:0-1),gpu:b:2(IDX:2-3)``, GPUs
  without device files in gres.conf (no ``File=``) as a count only, ``gpu(CNT:4)`` or ``gpu:h100(CNT:4)``, other
  GRES (``nic:1(IDX:0)``, ``nic(CNT:1)``, a shared ``shard:2(2/4,0/4)``) left aside. ``IDX`` are the indexes of
  the node's GPUs in its gres.conf order, what Slurm's gres/gpu plugin puts into
  ``CUDA_VISIBLE_DEVICES``/``ROCR_VISIBLE_DEVICES`` of a step without ConstrainDevices (with it, the step gets
  them numbered from 0: module_utils/_gpu_visibility.py). ``CPU_IDs=`` (the CPUs the job holds there, a bit
  list) and ``Mem=`` (MB; 0 when Slurm does not track memory) give ``cpus`` and ``mem_mb`` per node.
  A job that holds more GPUs on a node than it asked for per node (``--exclusive --gres=gpu:2`` holds them all,
  ``TresPerNode=gres:gpu:2``) counts what its steps get there: the first ones asked for of each type
  (:func:`step_share`; the lab's steps got 0,1 of ``IDX:0-3``).
* :func:`gpu_ids_text` -- ``[4, 5, 6, 7]`` -> ``"4,5,6,7"``, the value of those variables.

The per-node detail is what Slurm allocated whatever the request was (``--gres=gpu:N``, ``--gpus-per-node``,
``--gpus=N``, typed or not); the ``SLURM_GPUS_*`` environment variables are set for some requests only, and
``SLURM_TASKS_PER_NODE`` counts tasks (CPUs without ``-n``), not GPUs.
"""

from __future__ import annotations

import re

from ansible_collections.trainops.multinode.plugins.module_utils._hostlist import HostlistError, expand_hostlist

SCONTROL_ARGS = ('--details', 'show', 'job')
"""scontrol's arguments before the job id: the global option first, then the command (valid in every version)."""

_RECORD_START_RE = re.compile(r'^JobId=', re.M)
_FIELD_RE = r'(?:^|\s)%s=(\S*)'
_DETAIL_RE = re.compile(r'(?:^|\s)Nodes=(\S+)((?:[ \t]+(?!Nodes=)\S+=\S*)*)')
_GPU_ITEM_RE = re.compile(r'gpu(?::([^:(\s]+))?(?::([0-9]+))?(?:\(([^)]*)\))?\Z')
_CNT_RE = re.compile(r'CNT:([0-9]+)\Z')
_TRES_PER = ('TresPerJob', 'TresPerNode', 'TresPerSocket', 'TresPerTask')
_TRES_ANY_GPU_RE = re.compile(r'gres[:/]gpu(?::[^:=,\s]+)?[:=]([0-9]+)\Z')
_IDS_RE = re.compile(r'[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*\Z')
HET_ENV_RE = re.compile(r'SLURM_JOB_NODELIST_HET_GROUP_([0-9]+)\Z')


class SlurmJobError(HostlistError):
    """scontrol output that does not describe a running job the way this module expects; the message says why."""


def _field(record, name):
    match = re.search(_FIELD_RE % re.escape(name), record)
    return match.group(1) if match else None


def _split_outside_parens(text):
    items, depth, current = [], 0, []
    for char in text:
        if char == '(':
            depth += 1
        elif char == ')':
            depth = max(depth - 1, 0)
        if char == ',' and depth == 0:
            items.append(''.join(current))
            current = []
            continue
        current.append(char)
    if current:
        items.append(''.join(current))
    return [item for item in items if item]


def parse_ids(text):
    """``0-3`` -> [0, 1, 2, 3]; ``0,2-3`` -> [0, 2, 3]. Raises SlurmJobError."""
    if not _IDS_RE.match(text or ''):
        raise SlurmJobError('invalid GPU index list %r' % (text,))
    ids = []
    for item in text.split(','):
        low, _dash, high = item.partition('-')
        low, high = int(low), int(high or low)
        if high < low or high - low > 4096:
            raise SlurmJobError('invalid GPU index range %r' % (item,))
        ids.extend(range(low, high + 1))
    return ids


def parse_gres(gres):
    """The GPUs of one ``GRES=`` value: ``dict(count=int, ids=[int] or None, types=[str])``.

    ``gpu:labgpu:4(IDX:0-3)`` -> count 4, ids [0..3], types ['labgpu']. ``ids`` is None when Slurm gives no index
    (a gres.conf without ``File=``: ``gpu(CNT:4)``, ``gpu:h100(CNT:4)``; ``gpu:4`` or ``IDX:N/A`` in older
    outputs). Items other than ``gpu`` are left aside.
    """
    count, ids, types, known, items = 0, [], [], True, []
    for item in _split_outside_parens(gres or ''):
        if item != 'gpu' and not item.startswith(('gpu:', 'gpu(')):
            continue
        match = _GPU_ITEM_RE.match(item)
        if not match:
            raise SlurmJobError('cannot read GPU item %r of GRES=%s' % (item, gres))
        kind, number, detail = match.groups()
        if number is None and kind is not None and kind.isdigit():
            kind, number = None, kind
        counted = _CNT_RE.match(detail or '')
        if counted and number is None:
            number, detail = counted.group(1), None   # gpu(CNT:4): a count, no index (gres.conf without File=)
        if number is None:
            raise SlurmJobError('no GPU count in %r of GRES=%s' % (item, gres))
        number = int(number)
        if kind:
            types.append(kind)
        found = re.search(r'IDX:([^()\s]*)', detail or '')
        index = found.group(1) if found else None
        if index is None or index in ('', 'N/A'):
            known = False
        else:
            item_ids = parse_ids(index)
            if len(item_ids) != number:
                raise SlurmJobError('%r counts %d GPUs but lists %d indexes' % (item, number, len(item_ids)))
            ids.extend(item_ids)
        items.append((kind, number, item_ids if index not in (None, '', 'N/A') else None))
        count += number
    if known and len(set(ids)) != len(ids):
        raise SlurmJobError('GRES=%s lists a GPU index twice' % gres)
    return dict(count=count, ids=sorted(ids) if known else None, types=types, items=items)


_TRES_GPU_RE = re.compile(r'gres[:/]gpu(?::([^:,\s]+))?:([0-9]+)\Z')


def parse_tres_per_node(value):
    """The GPUs a job asked for per node, ``TresPerNode=gres:gpu:labgpu:2`` -> ``{'labgpu': 2}`` (``gres:gpu:4`` ->
    ``{None: 4}``; ``gres/gpu:4`` as newer Slurm writes it); None when it asks for none per node (``--gpus=N``)."""
    wanted = {}
    for item in (value or '').split(','):
        match = _TRES_GPU_RE.match(item.strip())
        if match:
            kind = None if match.group(1) is None or match.group(1).isdigit() else match.group(1)
            wanted[kind] = wanted.get(kind, 0) + int(match.group(2))
    return wanted or None


def step_share(gpus, wanted):
    """What a step of the job gets on a node: ``gpus`` (:func:`parse_gres`) cut to ``wanted`` per node.

    A job asking for fewer GPUs per node than it holds (``--exclusive --gres=gpu:2`` holds every GPU of the node)
    gives its steps the first ones of each type asked for (the lab: ``IDX:0-3`` held, steps get 0,1).
    """
    if not wanted or sum(wanted.values()) >= gpus['count']:
        return gpus
    ids, count = [], 0
    for kind, number in sorted(wanted.items(), key=lambda kv: kv[0] or ''):
        pool = [item for item in gpus['items'] if kind is None or item[0] == kind]
        have = sum(item[1] for item in pool)
        if have < number:
            raise SlurmJobError('the job asks for %d %sGPU(s) per node but holds %d there (GRES %s)' % (
                number, '%s ' % kind if kind else '', have, ','.join(
                    '%s:%d' % (item[0] or 'gpu', item[1]) for item in gpus['items'])))
        count += number
        if gpus['ids'] is not None:
            ids.extend(sorted(i for item in pool for i in item[2])[:number])
    return dict(gpus, count=count, ids=sorted(ids) if gpus['ids'] is not None else None, held=gpus['count'])


def parse_cpu_ids(text):
    """How many CPUs a detail line's ``CPU_IDs=`` names (``0-3,8-11`` -> 8; bit_fmt's form), None when unreadable."""
    try:
        return len(parse_ids(text))
    except SlurmJobError:
        return None


def gpus_requested(record):
    """Whether the job asked for GPUs (``--gres=gpu``, ``--gpus*``): a GPU count above 0 in one of its
    ``TresPer*`` fields (22.05 ``gres:gpu:2``, 23.02 and later ``gres/gpu:2``, ``gres/gpu:h100=1`` per task).

    A job that holds GPUs it did not ask for got them with the whole node (``--exclusive``, or a partition with
    ``OverSubscribe=EXCLUSIVE``), and its steps get none of them: srun(1) --gres, "a job step is allocated all of
    the generic resources that have been requested by the job, except those implicitly requested when a job is
    exclusive" (22.05.8 doc/man/man1/srun.1:1452-1454).
    """
    for name in _TRES_PER:
        for item in (_field(record, name) or '').split(','):
            match = _TRES_ANY_GPU_RE.match(item.strip())
            if match and int(match.group(1)) > 0:
                return True
    return False


def split_records(text):
    """The job records of scontrol's output (one per job; several for a heterogeneous job or an array)."""
    starts = [match.start() for match in _RECORD_START_RE.finditer(text or '')]
    return [text[start:end] for start, end in zip(starts, starts[1:] + [len(text)])]


def parse_record(record):
    """One job record -> ``dict(job_id, state, nodelist, het_job_id, het_offset, nodes={host: gpus})``."""
    job_id = _field(record, 'JobId')
    details = {}
    for match in _DETAIL_RE.finditer(record):
        expression, rest = match.group(1), match.group(2)
        gres_match = re.search(r'(?:^|\s)GRES=(\S*)', rest)
        cpu_match = re.search(r'(?:^|\s)CPU_IDs=(\S+)', rest)
        mem_match = re.search(r'(?:^|\s)Mem=([0-9]+)(?:\s|$)', rest)
        held = dict(cpus=parse_cpu_ids(cpu_match.group(1)) if cpu_match else None,
                    mem_mb=(int(mem_match.group(1)) or None) if mem_match else None)
        try:
            hosts = expand_hostlist(expression)
        except HostlistError as exc:
            raise SlurmJobError('job %s: detail line Nodes=%s: %s' % (job_id, expression, exc))
        try:
            gpus = parse_gres(gres_match.group(1) if gres_match else '')
        except SlurmJobError as exc:
            raise SlurmJobError('job %s, Nodes=%s: %s' % (job_id, expression, exc))
        for host in hosts:
            if host in details:
                raise SlurmJobError('job %s: node %s has two detail lines' % (job_id, host))
            details[host] = dict(gpus, **held)
    wanted = parse_tres_per_node(_field(record, 'TresPerNode'))
    for host in details:
        try:
            details[host] = step_share(details[host], wanted)
        except SlurmJobError as exc:
            raise SlurmJobError('job %s, node %s: %s' % (job_id, host, exc))
    return dict(job_id=job_id, state=_field(record, 'JobState'), nodelist=_field(record, 'NodeList'),
                het_job_id=_field(record, 'HetJobId'), het_offset=_field(record, 'HetJobOffset'), nodes=details,
                tres_per_node=_field(record, 'TresPerNode'), job_gres=_field(record, 'JOB_GRES'),
                gpus_requested=gpus_requested(record))


class JobNotRunning(SlurmJobError):
    """The job holds no GPUs now: pending, or ending (COMPLETING: a cancelled job's batch script stopping its ranks,
    when ``scontrol`` shows ``GRES=`` empty)."""


def parse_job(text, job_id):
    """The record of ``job_id`` in ``scontrol --details show job <job_id>`` output, with its nodes' GPUs.

    A heterogeneous job's components (``HetJobId=<job_id>``) are all returned: ``dict(..., components=[record,
    ...])`` in ``HetJobOffset`` order, and ``nodes`` merges theirs. Raises SlurmJobError when the job is not there,
    is not running, or has no per-node detail.
    """
    job_id = str(job_id)
    records = [parse_record(record) for record in split_records(text)]
    mine = [r for r in records if r['job_id'] == job_id or (r['het_job_id'] and r['het_job_id'] == job_id)]
    if not mine:
        raise SlurmJobError('no record of job %s in the output (%s)'
                            % (job_id, ', '.join('JobId=%s' % r['job_id'] for r in records) or 'no JobId= at all'))
    if mine[0]['het_job_id']:
        mine.sort(key=lambda r: int(r['het_offset']) if (r['het_offset'] or '').isdigit() else 0)
    job = dict(mine[0])
    job['job_id'] = job_id
    job['components'] = mine if mine[0]['het_job_id'] else []
    for record in mine:
        if record['state'] != 'RUNNING':
            raise JobNotRunning('job %s is %s, not RUNNING: its nodes and GPUs are not allocated yet (or any more)'
                                % (record['job_id'], record['state'] or 'in no state (no JobState=)'))
        if not record['nodes']:
            raise SlurmJobError('job %s: no per-node detail (Nodes=... GRES=...) in the output; scontrol must be '
                                'called with --details' % record['job_id'])
    nodes = {}
    for record in mine[1:]:
        for host in record['nodes']:
            if host in mine[0]['nodes'] or host in nodes:
                raise SlurmJobError('heterogeneous job %s holds %s in two components' % (job_id, host))
            nodes[host] = record['nodes'][host]
    job['nodes'] = dict(mine[0]['nodes'], **nodes)
    # GPUs held with the whole node only (--exclusive without --gpus*): a srun step gets none (gpus_requested)
    job['gpus_implicit'] = (any(gpus['count'] for gpus in job['nodes'].values())
                            and not any(record['gpus_requested'] for record in mine))
    return job


CPU_HINT = ('allocate a CPU per rank or more (--cpus-per-gpu=N, or -c N with --ntasks-per-node=<ranks>, or '
            '--exclusive)')
"""How to get CPUs for the ranks, in the inventory's warning and the launch's error."""


def few_cpus(cpus, ranks):
    """``'1 CPU for 2 ranks'`` when a node's allocation holds fewer CPUs than the ranks it runs, else None.

    With ``cons_tres``, ``salloc -N4 --gpus-per-node=8`` holds one CPU per node unless the site sets DefCpuPerGPU;
    under task/cgroup (ConstrainCores) or a srun step every rank and its data loader workers then share it.
    """
    if cpus is None or ranks is None or int(ranks) <= int(cpus):
        return None
    return '%d CPU%s for %d ranks' % (cpus, '' if cpus == 1 else 's', int(ranks))


def threads_per_rank(cpus, ranks):
    """The intra-op threads of each rank (OMP_NUM_THREADS): the node's allocated CPUs shared out, at least 1;
    None when the CPUs are unknown."""
    if cpus is None or not ranks or int(ranks) < 1:
        return None
    return max(1, int(cpus) // int(ranks))


THREADS_VAR = 'OMP_NUM_THREADS'


def rank_threads_env(cpus, ranks, overrides=None):
    """``{'OMP_NUM_THREADS': '<CPUs / ranks>'}`` for the ranks of a node whose allocated CPUs are known, else ``{}``;
    also ``{}`` when the launch's own environment (``overrides``, trainops_env) names the variable (a null there
    removes it, a value sets it)."""
    threads = threads_per_rank(cpus, ranks)
    if threads is None or THREADS_VAR in (overrides or {}):
        return {}
    return {THREADS_VAR: str(threads)}


_MEM_RE = re.compile(r'([0-9]+)\s*([KMGT]?)B?\Z', re.I)
_MEM_UNITS = {'': 1, 'K': 1.0 / 1024, 'M': 1, 'G': 1024, 'T': 1024 * 1024}


def mem_mb(value):
    """A memory size as Slurm's --mem takes it (``64G``, ``500000``: MB, ``512M``, ``1T``) in MB; None when it is
    not one. Slurm's ``Mem=`` is in MB (MiB) too."""
    if isinstance(value, bool):
        return None
    match = _MEM_RE.match(str(value).strip())
    if not match:
        return None
    return int(int(match.group(1)) * _MEM_UNITS[match.group(2).upper()])


def gpu_ids_text(ids):
    """[4, 5, 6, 7] -> "4,5,6,7" (CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES)."""
    return ','.join(str(int(i)) for i in ids)


def het_groups(environ):
    """The node lists of a heterogeneous allocation's components from its environment, in component order."""
    groups = {}
    for name, value in environ.items():
        match = HET_ENV_RE.match(name)
        if match and str(value).strip():
            groups[int(match.group(1))] = str(value).strip()
    return [groups[key] for key in sorted(groups)]
