# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The launch's filters (roles/job/tasks): what it reads of its nodes through hostvars, and its checks across
nodes. Each is documented in the YAML file of its name next to this one; the rules are in
module_utils/_launch_records.py, module_utils/_launch_checks.py and module_utils/_launch_dirs.py (the directories
nodes share, the run a launch resumes: shares.yml, resume.yml). One file for all of them: ansible-core imports every
filter file of the collection to find one by its name."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.trainops.multinode.plugins.module_utils import _launch_checks, _launch_records, _launchers

# the directories nodes share, the run a launch resumes (shares.yml, resume.yml)
from ansible_collections.trainops.multinode.plugins.module_utils import _launch_dirs

# the spare nodes of a launch (nodes.yml; trainops_spare_nodes), and the health check before an attempt
from ansible_collections.trainops.multinode.plugins.module_utils import _retries
from ansible_collections.trainops.multinode.plugins.plugin_utils import _filter_input


def _preflights(name, value):
    return dict(_filter_input.mapping(name, value, kind='a mapping of node name to preflight result'))


def not_started(nodes, hostvars, play_hosts, launcher=_launchers.DEFAULT):
    if launcher not in _launchers.NAMES:
        raise AnsibleFilterError('not_started: launcher must be %s, not %r' % (' or '.join(_launchers.NAMES), launcher))
    return _launch_records.not_started(nodes, hostvars, play_hosts, launcher=launcher)


def node_problems(preflights, git_check=True, git_reference='controller', controller_git=None, compare_nodes=True,
                  allow_dirty=False, profile='', profile_executable=''):
    if git_reference not in ('controller', 'first_node'):
        raise AnsibleFilterError('node_problems: git_reference must be controller or first_node, not %r'
                                 % (git_reference, ))
    return _launch_checks.node_problems(
        _preflights('node_problems', preflights), git_check=boolean(git_check), git_reference=git_reference,
        controller_git=controller_git, compare_nodes=boolean(compare_nodes), allow_dirty=boolean(allow_dirty),
        profile=str(profile or ''), profile_executable=str(profile_executable or ''))


def reach_table(preflights):
    return _launch_checks.reach_table(_preflights('reach_table', preflights))


def _nodes(name, nodes, what='the input'):
    return [str(node) for node in _filter_input.sequence(name, nodes, what, kind='the list of node names')]


def dir_shares(nodes, hostvars):
    try:
        return _launch_dirs.dir_shares(_nodes('dir_shares', nodes), hostvars)
    except ValueError as exc:
        raise AnsibleFilterError('dir_shares: %s' % exc)


def dir_share_lines(root_shares, workspace_shares):
    return _launch_dirs.share_lines(
        _filter_input.mapping('dir_share_lines', root_shares, "the input (the node root's shares)"),
        _filter_input.mapping('dir_share_lines', workspace_shares, 'workspace_shares'))


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


class FilterModule(object):
    def filters(self):
        return {
            'host_facts': _launch_records.host_facts,
            'node_records': _launch_records.node_records,
            'not_started': not_started,
            'step_nodes': _launch_records.step_nodes,
            'node_problems': node_problems,
            'reach_table': reach_table,
            'dir_shares': dir_shares,
            'dir_share_lines': dir_share_lines,
            'resume_checkpoint': resume_checkpoint,
            'spare_pool': spare_pool,
            'health_gate': health_gate,
        }
