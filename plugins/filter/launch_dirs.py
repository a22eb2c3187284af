# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The launch's filters of its directories across nodes (roles/job/tasks/shares.yml and resume.yml). Each is
documented in the YAML file of its name next to this one; the rules are in module_utils/_launch_dirs.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.trainops.multinode.plugins.module_utils import _launch_dirs


def _nodes(name, nodes):
    if isinstance(nodes, (str, bytes)) or not isinstance(nodes, Sequence):
        raise AnsibleFilterError('%s: the input must be the list of node names, not %s' % (name, type(nodes).__name__))
    return [str(node) for node in nodes]


def _mapping(name, what, value):
    if not isinstance(value, Mapping):
        raise AnsibleFilterError('%s: %s must be a mapping, not %s' % (name, what, type(value).__name__))
    return value


def dirs_to_mark(paths, sync_workspace):
    try:
        sync = boolean(sync_workspace)
    except TypeError:
        raise AnsibleFilterError('dirs_to_mark: sync_workspace must be a boolean, not %r' % (sync_workspace, ))
    return _launch_dirs.unmarked_dirs(_mapping('dirs_to_mark', 'the input (the preflight\'s paths)', paths), sync)


def dir_shares(nodes, hostvars):
    try:
        return _launch_dirs.dir_shares(_nodes('dir_shares', nodes), hostvars)
    except ValueError as exc:
        raise AnsibleFilterError('dir_shares: %s' % exc)


def dir_share_lines(root_shares, workspace_shares):
    return _launch_dirs.share_lines(_mapping('dir_share_lines', 'the input (the node root\'s shares)', root_shares),
                                    _mapping('dir_share_lines', 'workspace_shares', workspace_shares))


def resume_nodes(nodes, hostvars, run_id):
    return _launch_dirs.resume_nodes(_nodes('resume_nodes', nodes), hostvars, run_id)


class FilterModule(object):
    def filters(self):
        return {
            'dirs_to_mark': dirs_to_mark,
            'dir_shares': dir_shares,
            'dir_share_lines': dir_share_lines,
            'resume_nodes': resume_nodes,
        }
