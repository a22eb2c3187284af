# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""What a launch knows about its nodes, read from what each node's tasks registered (roles/job/tasks).

The launch's tasks run on the controller once for all nodes (``run_once``) and read every node's results
through ``hostvars``: these functions are that reading, so that it is one rule each, tested, instead of
Jinja loops in the task files. Each takes the node names and the play's ``hostvars`` (any mapping of host
name to a mapping of its variables) and returns plain data:

* :func:`host_facts`: ``{host: value}`` of a fact, where it is set (the nodes that failed, and why);
* :func:`not_started`: ``{node: why}`` for the nodes where the job does not run after the start;
* :func:`step_nodes`: the Slurm step's per-node commands (launcher=srun);
* :func:`node_records`: the per-node records of the experiment manifest;
* :func:`chosen_run` and :func:`run_nodes`: the run playbooks/status.yml and stop.yml act on, and its nodes.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.trainops.multinode.plugins.module_utils import _launchers, _outcomes, _torchrun

UNREACHABLE_AT_START = 'could not be reached during the start'
"""Why the job does not run on a node that left the play during the start (launcher=ssh)."""

UNREACHABLE = 'could not be reached'
"""Why the step's supervisor does not run on a node that left the play (launcher=srun)."""

REDACTED = '<redacted>'


def host_vars(hostvars, host):
    """``hostvars[host]`` as a mapping (``{}`` for a host it does not know)."""
    try:
        found = hostvars[host]
    except KeyError:
        return {}
    return found if isinstance(found, Mapping) or hasattr(found, 'get') else {}


def dig(value, *keys, **kwargs):
    """``value[k1][k2]...``, or ``default`` (None) where a key is missing or a level is not a mapping."""
    default = kwargs.get('default')
    for key in keys:
        if not (isinstance(value, Mapping) or hasattr(value, 'get')):
            return default
        try:
            value = value[key]
        except KeyError:
            return default
    return value


def truncate(text, length):
    """Jinja's ``truncate(length)``: whole words, ``...`` at the end, 5 characters of leeway."""
    text = str(text)
    if len(text) <= length + 5:
        return text
    return text[:length - 3].rsplit(' ', 1)[0] + '...'


def host_facts(hosts, hostvars, name):
    """``{host: value}`` of the fact ``name`` for the hosts where it is set and not empty, in ``hosts``' order."""
    facts = {}
    for host in hosts:
        value = host_vars(hostvars, host).get(name)
        if value:
            facts[host] = value
    return facts


def not_started(nodes, hostvars, play_hosts, launcher=None):
    """``{node: why}`` for the nodes (in ``nodes``' order) where the job does not run after the start.

    A node that left the play (unreachable) does not run it. Otherwise, with a launcher that the module starts the
    supervisor for (``launcher='ssh'``) a node whose start failed (``__trainops_start_error``)
    does not, and with one that starts the prepared supervisor itself (_launchers.Launcher.deferred_start,
    ``launcher='srun'``) a node whose supervisor it has not started (its ``__trainops_started`` query still says
    ``prepared``, or has no job: the query failed) does not.
    """
    play_hosts = set(play_hosts)
    why = {}
    for node in nodes:
        node_vars = host_vars(hostvars, node)
        if _launchers.get(launcher).deferred_start:
            if node not in play_hosts:
                why[node] = UNREACHABLE
                continue
            result = node_vars.get('__trainops_started') or {}
            if (dig(result, 'job', 'status') or _outcomes.STATUS_PREPARED) == _outcomes.STATUS_PREPARED:
                why[node] = truncate(dig(result, 'msg') or 'not started', 200)
        else:
            error = node_vars.get('__trainops_start_error')
            if node not in play_hosts or error:
                why[node] = str(error or UNREACHABLE_AT_START)
    return why


def step_nodes(nodes, hostvars):
    """The nodes of the Slurm step (srun_step's ``nodes``), in rank order.

    Each is the node's ``step_command`` (its prepared run directory, torchrun's ``state: prepared``) with its
    ``rank`` and its Slurm ``name``: ``trainops_slurm_node_name``, else the inventory name (the slurm inventory's).
    """
    out = []
    for rank, node in enumerate(nodes):
        node_vars = host_vars(hostvars, node)
        entry = dict(dig(node_vars, '__trainops_started', 'step_command') or {})
        entry['name'] = node_vars.get('trainops_slurm_node_name', node)
        entry['rank'] = rank
        out.append(entry)
    return out


def _network(nccl):
    return {
        'transport': nccl.get('transport'), 'link_layer': nccl.get('link_layer'),
        'socket_ifname': nccl.get('socket_ifname'), 'hcas': nccl.get('hcas'), 'library': nccl.get('library'),
        'sources': nccl.get('sources'), 'warnings': nccl.get('warning_messages', []),
    }


def node_record(node, node_vars, node_rank, run_id, nproc_per_node):
    """One node's record in the manifest (the experiment action, state=launched), from what its preflight, NCCL computation and start found."""
    nproc = int(node_vars.get('trainops_nproc_per_node', nproc_per_node))
    preflight = node_vars.get('__trainops_preflight') or {}
    nccl = node_vars.get('__trainops_nccl') or {}
    job = dig(node_vars, '__trainops_started', 'job') or {}
    state_dir = dig(preflight, 'paths', 'state_dir')
    return {
        'host': node,
        'hostname': dig(preflight, 'host', 'hostname'),
        'node_rank': node_rank,
        'ranks': list(range(node_rank * nproc, (node_rank + 1) * nproc)),
        'gpu_vendor': nccl.get('vendor'),
        'torch': dig(preflight, 'torch', 'version', default=''),
        'python': dig(preflight, 'torch', 'python', default=''),
        'run_dir': '%s/runs/%s' % (state_dir, run_id),
        'pid': job.get('pid'),
        'argv': job.get('argv', []),
        'env': job.get('env', nccl.get('env')),
        # the names only: the values never leave the ranks
        'secret_env': dict((name, REDACTED) for name in job.get('secret_env_names') or []),
        'state_dir': state_dir,
        'env_file': job.get('env_file'),
        'network': _network(nccl),
    }


def node_records(nodes, hostvars, ranks, run_id, nproc_per_node=1):
    """The manifest's ``nodes``: :func:`node_record` of every node, in ``nodes``' order."""
    return [node_record(node, host_vars(hostvars, node), int(ranks[node]), run_id, nproc_per_node) for node in nodes]


def valid_run_id(run_id):
    """``run_id`` when the torchrun module accepts it (a directory name, never a path: the nodes' answers are not
    trusted), else None."""
    try:
        return _torchrun.validate_run_id(run_id)
    except _torchrun.TorchrunError:
        return None


def chosen_run(jobs, selected=''):
    """The run status and stop act on: ``selected`` when given, else the latest started of the nodes' answers.

    ``jobs`` is ``{host: its job}`` as the torchrun module's query answered (``{}`` where it has none). Without a
    selected run each node answers its own latest run, and a node left out of the last attempt of a launch with
    retries answers an older one than the spare node that took its place: the latest start wins, then play order.
    Returns the run id, or None (no node has a run, or the run ids are not valid).
    """
    if selected:
        return valid_run_id(str(selected))
    answered = [(str(dig(job, 'started_at') or ''), -index, valid_run_id(dig(job, 'run_id')))
                for index, job in enumerate((jobs or {}).values())]
    answered = [entry for entry in answered if entry[2]]
    return max(answered)[2] if answered else None


def _answered_in_rank_order(jobs, run_id):
    answered = [(host, job) for host, job in (jobs or {}).items() if run_id and dig(job, 'run_id') == run_id]
    ranked = [(dig(job, 'node_rank') if isinstance(dig(job, 'node_rank'), int) else len(answered), index, host)
              for index, (host, job) in enumerate(answered)]
    return [host for dummy, dummy, host in sorted(ranked)]


def run_nodes(jobs, play_hosts, run_id, manifest=None):
    """The nodes of the run ``run_id``, and those of them the play does not have.

    The run's nodes are its manifest's (the controller's own record, in rank order: a spare node that took a node's
    place is one, the node it replaced is not), where the controller has it; else the hosts whose answer in ``jobs``
    is that run, in the order of the node ranks they answered (then play order). ``play_hosts`` are the play's hosts (``ansible_play_hosts_all``).

    Returns ``{run_id, nodes, ranks: {node: node rank}, missing: [the run's nodes not in the play], recorded: whether
    the manifest named them}``.
    """
    recorded = [str(dig(node, 'host')) for node in dig(manifest, 'nodes', default=None) or []
                if dig(node, 'host') is not None]
    nodes = recorded or _answered_in_rank_order(jobs, run_id)
    play_hosts = set(play_hosts)
    return {
        'run_id': run_id,
        'nodes': nodes,
        'ranks': dict((node, rank) for rank, node in enumerate(nodes)),
        'missing': [node for node in nodes if node not in play_hosts],
        'recorded': bool(recorded),
    }
