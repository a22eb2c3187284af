# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The node's part of the collect (the action trainops.multinode.collect, roles/job/tasks/collect.yml), decided on the
controller: whether the job is stopped on the node first and why, the node's run directory, and where each file the
node listed lands in the experiment (module_utils/_collect.py's rule, which refuses what would leave the node's place).
"""

from __future__ import annotations

from ansible_collections.trainops.multinode.plugins.module_utils import _outcomes
from ansible_collections.trainops.multinode.plugins.module_utils._collect import CollectRefused, node_dir_name, node_files
from ansible_collections.trainops.multinode.plugins.module_utils._launch_records import truncate

STOP_DETAIL_LENGTH = 300
"""The most characters of the first failed node's error recorded as the stop's detail (Jinja's truncate)."""


def stop_reason_detail(run_errors, verdict_state):
    """Why the collect stops the job on this node, or None: ``(reason, detail)`` when a node of the play failed.

    ``run_errors`` are the play's nodes' errors (``__trainops_run_error``) in play order, empty where a node has none;
    ``verdict_state`` is this node's wait verdict (empty when it has none), mapped to the stop reason by
    _outcomes.collect_stop_reason (OutcomeError for a verdict it does not know). The detail is the first node's
    error, cut to :data:`STOP_DETAIL_LENGTH` characters on a word (_launch_records.truncate, Jinja's ``truncate``).
    """
    errors = [str(error) for error in run_errors if error]
    if not errors:
        return None
    return _outcomes.collect_stop_reason(verdict_state or ''), truncate(errors[0], STOP_DETAIL_LENGTH)


def node_run_dir(job, state_dir, run_id):
    """The node's run directory: its final job's ``run_dir``, else ``<state_dir>/runs/<run_id>``."""
    run_dir = (job or {}).get('run_dir') if isinstance(job, dict) else None
    return run_dir if run_dir else '%s/runs/%s' % (state_dir, run_id)


def node_plan(experiment_dir, node, nodes, job, run_dir, outputs, profiles=None):
    """Where each of the node's files lands: a list of :func:`node_files` plans (log, outputs, then profiles).

    ``job`` is the node's final job (its ``log_path``, when it has one, lands in ``logs/node_<node rank>.txt``);
    ``outputs`` and ``profiles`` the paths the node listed under ``<run_dir>/outputs`` and ``<run_dir>/profiles``
    (``profiles`` None: profile=... was not given, nothing is planned for them). CollectRefused for a node name that
    cannot name a directory, or a node that is not one of the job's ``nodes``.
    """
    node_dir_name(node)
    nodes = list(nodes)
    if node not in nodes:
        raise CollectRefused('%s is not one of the job\'s nodes (%s)' % (node, ', '.join(nodes)))
    log = (job or {}).get('log_path') if isinstance(job, dict) else None
    plans = [node_files(experiment_dir, 'logs', node, '', [str(log)] if log is not None else [],
                        name='node_%d.txt' % nodes.index(node)),
             node_files(experiment_dir, 'outputs', node, run_dir + '/outputs', outputs)]
    if profiles is not None:
        plans.append(node_files(experiment_dir, 'profiles', node, run_dir + '/profiles', profiles))
    return plans


def planned_files(plans):
    """Every ``{'src', 'dest'}`` of ``plans`` (:func:`node_plan`), in order."""
    return [item for plan in plans for item in plan['files']]


def found_paths(found):
    """The paths of a find module's answer (``files``' ``path``), as text; [] for an answer without files."""
    return [str(item['path']) for item in (found or {}).get('files') or [] if isinstance(item, dict) and 'path' in item]
