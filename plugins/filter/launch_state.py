# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The launch's filters (roles/job/tasks): what it reads of its nodes through hostvars, what torchrun runs and the
ranks' environment (the checks across nodes and the directories nodes share are steps of the action launch_plan).
Each is documented in the YAML file of its name next to this one; the rules are in module_utils/_launch_records.py,
module_utils/_launch_plan.py (launch_entry) and module_utils/_launch_dirs.py (the run a launch resumes: resume.yml).
One file for all of them: ansible-core imports every filter file of the collection to find one by its name."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.module_utils import _launch_plan, _launch_records, _launchers

# the directories nodes share, the run a launch resumes (checks.yml, resume.yml)
from ansible_collections.trainops.multinode.plugins.module_utils import _launch_dirs

# the spare nodes of a launch (nodes.yml; trainops_spare_nodes), and the health check before an attempt
from ansible_collections.trainops.multinode.plugins.module_utils import _retries
from ansible_collections.trainops.multinode.plugins.plugin_utils import _filter_input


def not_started(nodes, hostvars, play_hosts, launcher=_launchers.DEFAULT):
    if launcher not in _launchers.NAMES:
        raise AnsibleFilterError('not_started: launcher must be %s, not %r' % (' or '.join(_launchers.NAMES), launcher))
    return _launch_records.not_started(nodes, hostvars, play_hosts, launcher=launcher)


def _nodes(name, nodes, what='the input'):
    return [str(node) for node in _filter_input.sequence(name, nodes, what, kind='the list of node names')]


def resume_checkpoint(nodes, hostvars, run_id, recorded=None, per_node=None):
    return _launch_dirs.resume_checkpoint(_nodes('resume_checkpoint', nodes), hostvars, run_id, recorded, per_node)


def spare_pool(nodes, spare_group, groups, min_nodes=0, play_hosts=None, launcher=_launchers.DEFAULT):
    groups = _filter_input.mapping('spare_pool', groups, 'groups')
    found = groups.get(spare_group) if spare_group and spare_group in groups else None
    return _retries.spare_pool(_nodes('spare_pool', nodes), spare_group, None if found is None else list(found),
                               min_nodes, None if play_hosts is None else list(play_hosts), launcher)


def health_gate(report, nodes, spares=(), min_nodes=0, spare_group=''):
    report = _filter_input.mapping('health_gate', report, kind="the health check's report (module health_report)", optional=True)
    return _retries.health_gate(report, _nodes('health_gate', nodes, 'nodes'), _nodes('health_gate', spares or [], 'spares'),
                                min_nodes, str(spare_group or ''))


def launch_entry(params, what='entry'):
    params = dict(_filter_input.mapping('launch_entry', params, kind='a mapping of the role variables'))
    if what not in ('entry', 'env'):
        raise AnsibleFilterError('launch_entry: what must be entry or env, not %r' % (what, ))
    try:
        return _launch_plan.entry(params) if what == 'entry' else _launch_plan.env(params)
    except (KeyError, ValueError) as exc:
        raise AnsibleFilterError('launch_entry %s: %s' % (what, exc))


class FilterModule(object):
    def filters(self):
        return {
            'host_facts': _launch_records.host_facts,
            'launch_entry': launch_entry,
            'node_records': _launch_records.node_records,
            'not_started': not_started,
            'step_nodes': _launch_records.step_nodes,
            'resume_checkpoint': resume_checkpoint,
            'spare_pool': spare_pool,
            'health_gate': health_gate,
        }
