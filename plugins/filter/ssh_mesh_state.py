# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The SSH mesh's filters once the mesh is written (roles/ssh_mesh/tasks/known_hosts.yml and verify.yml): what it
reads of every node through hostvars. Each is documented in the YAML file of its name next to this one; the rules
are in module_utils/_ssh_mesh.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.module_utils import _ssh_mesh


def _list(name, what, value):
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise AnsibleFilterError('%s: %s must be a list, not %s' % (name, what, type(value).__name__))
    return list(value)


def _results(name, results):
    results = _list(name, 'the input (the results of ssh_mesh_results)', results)
    if not all(isinstance(row, Mapping) and all(key in row for key in ('from', 'to', 'target', 'ok', 'error'))
               for row in results):
        raise AnsibleFilterError('%s: the input must be the results of trainops.multinode.ssh_mesh_results (from, to, '
                                 'target, ok, error), not %r' % (name, results))
    return results


def _call(name, function, *args):
    try:
        return function(*args)
    except ValueError as exc:
        raise AnsibleFilterError('%s: %s' % (name, exc))


def ssh_mesh_known_hosts(nodes, hostvars):
    return _call('ssh_mesh_known_hosts', _ssh_mesh.known_hosts_lines,
                 _list('ssh_mesh_known_hosts', 'the input (the nodes)', nodes), hostvars)


def ssh_mesh_targets(nodes, here, hostvars, kinds):
    return _call('ssh_mesh_targets', _ssh_mesh.mesh_targets, _list('ssh_mesh_targets', 'the input (the nodes)', nodes),
                 here, hostvars, _list('ssh_mesh_targets', 'kinds', kinds))


def ssh_mesh_results(nodes, hostvars, play_hosts):
    return _call('ssh_mesh_results', _ssh_mesh.check_results, _list('ssh_mesh_results', 'the input (the nodes)', nodes),
                 hostvars, _list('ssh_mesh_results', 'play_hosts', play_hosts))


def ssh_mesh_report(results, nodes, kinds):
    return _ssh_mesh.report_lines(_results('ssh_mesh_report', results), _list('ssh_mesh_report', 'nodes', nodes),
                                  _list('ssh_mesh_report', 'kinds', kinds))


def ssh_mesh_pairs(results):
    return _ssh_mesh.broken_pairs(_results('ssh_mesh_pairs', results))


class FilterModule(object):
    def filters(self):
        return {
            'ssh_mesh_known_hosts': ssh_mesh_known_hosts,
            'ssh_mesh_targets': ssh_mesh_targets,
            'ssh_mesh_results': ssh_mesh_results,
            'ssh_mesh_report': ssh_mesh_report,
            'ssh_mesh_pairs': ssh_mesh_pairs,
        }
