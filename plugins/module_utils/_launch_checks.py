# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The launch's checks across nodes (roles/job/tasks/checks.yml), from every node's preflight result.

Each node's preflight (module trainops.multinode.preflight) checked the node itself; what must fit *across*
nodes is judged here, on the controller, before anything is created or started:

* :func:`node_problems`: the same torch everywhere, the same code (git, see ``_git_state.compare``) and the
  profiler where profile= asks for it; one message per failed check, each naming what to fix;
* :func:`reach_table`: how every node reached the master (the preflight's ``reach``), as table lines.
"""

from __future__ import annotations

from ansible_collections.trainops.multinode.plugins.module_utils._git_state import compare
from ansible_collections.trainops.multinode.plugins.module_utils._launch_records import dig

_ROW = '%-14s %-12s %-15s %-21s %s'


def _text(value):
    return None if value is None else str(value)


def torch_problem(preflights):
    """The message for nodes that run different torch versions, or None."""
    versions = dict((node, _text(dig(preflight, 'torch', 'version'))) for node, preflight in preflights.items())
    if len(set(versions.values())) <= 1:
        return None
    return ('Nodes run different torch versions (%s); mixed versions hang or crash in collectives. Install the same '
            'torch on every node.' % ('{%s}' % ', '.join('%r: %r' % item for item in versions.items())))


def git_problem(preflights, reference='controller', controller_git=None, compare_nodes=True, allow_dirty=False):
    """The message (with the comparison table) when the code differs across nodes or is dirty, or None.

    ``reference='controller'`` compares every node with the controller's checkout (``controller_git``, the
    ``git`` of module git_state's result), ``'first_node'`` with the first node's. With ``compare_nodes`` false (the
    workspace is synced from the controller) only the controller's checkout is judged.
    """
    states = dict((node, dig(preflight, 'git')) for node, preflight in preflights.items()) if compare_nodes else {}
    if reference == 'controller':
        ok, _problems, table = compare(controller_git, states, allow_dirty=allow_dirty)
    else:
        first = next(iter(preflights), None)
        others = dict((node, state) for node, state in states.items() if node != first)
        ok, _problems, table = compare(states.get(first), others, allow_dirty=allow_dirty, reference_name=str(first))
    if ok:
        return None
    return ('Not starting anything: the code differs across nodes or has uncommitted changes.\n%s\n'
            'Bring every node to the reference\'s commit (playbooks/sync.yml), commit or stash the changes, or launch '
            'with -e allow_dirty=true to accept uncommitted changes.' % table)


def profiler_problem(preflights, profile, executable):
    """The message naming the nodes whose PATH lacks the profiler's ``executable``, or None."""
    if not executable:
        return None
    missing = [node for node, preflight in preflights.items() if not dig(preflight, 'executables', executable)]
    if not missing:
        return None
    return ('Not starting anything: profile=%s runs %s, which is not on the PATH of %s. Install it there (nsys: NVIDIA '
            'Nsight Systems; rocprofv3: ROCm\'s rocprofiler-sdk) or add its directory to that node\'s PATH, or profile '
            'with -e profile=torch.' % (profile, executable, ', '.join(missing)))


def node_problems(preflights, git_check=True, git_reference='controller', controller_git=None, compare_nodes=True,
                  allow_dirty=False, profile='', profile_executable=''):
    """Every failed check across the nodes (``preflights``: ``{node: preflight result}``), one message each."""
    problems = [torch_problem(preflights)]
    if git_check:
        problems.append(git_problem(preflights, git_reference, controller_git, compare_nodes, allow_dirty))
    problems.append(profiler_problem(preflights, profile, profile_executable))
    return [problem for problem in problems if problem]


def reach_table(preflights):
    """Lines of a table node | interface | from | master port | result, from the preflights' ``reach``."""
    lines = [_ROW % ('node', 'interface', 'from', 'master port', 'result')]
    for node, preflight in preflights.items():
        reach = dig(preflight, 'reach') or {}
        if reach.get('ok'):
            result = 'ok %d ms' % reach.get('ms')
        else:
            result = 'FAILED: %s' % (reach['error'] if 'error' in reach else '?', )
        lines.append(_ROW % (node, reach.get('ifname', '?'), reach.get('source', '?'), reach.get('target', '?'), result))
    return lines
