# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The launch's checks across nodes (module_utils/_launch_checks.py): torch, code (git), profiler, reach table."""

from __future__ import annotations

from ansible_collections.trainops.multinode.plugins.module_utils._git_state import STATE_REPOSITORY, empty_state
from ansible_collections.trainops.multinode.plugins.module_utils._launch_checks import node_problems, reach_table


def git(commit='a' * 40, branch='main', dirty=False):
    state = empty_state('/w')
    state.update(state=STATE_REPOSITORY, is_repo=True, commit=commit, short=commit[:7], branch=branch, dirty=dirty)
    return state


def node(torch='2.5.1', state=None, executables=None, reach=None):
    return {'torch': {'version': torch}, 'git': state or git(), 'executables': executables or {}, 'reach': reach}


def test_nodes_that_fit_have_no_problems():
    assert node_problems({'a': node(), 'b': node()}, controller_git=git()) == []


def test_different_torch_versions_are_named_by_node():
    problems = node_problems({'a': node(), 'b': node(torch='2.4.0')}, git_check=False)
    assert problems == ["Nodes run different torch versions ({'a': '2.5.1', 'b': '2.4.0'}); mixed versions hang or "
                        "crash in collectives. Install the same torch on every node."]


def test_code_that_differs_from_the_controller_gives_the_table():
    problems = node_problems({'a': node(), 'b': node(state=git(commit='b' * 40))}, controller_git=git())
    assert len(problems) == 1 and problems[0].startswith(
        'Not starting anything: the code differs across nodes or has uncommitted changes.\n')
    assert 'controller' in problems[0] and 'allow_dirty=true' in problems[0] and '\nBring every node' in problems[0]


def test_dirty_code_is_accepted_with_allow_dirty():
    nodes = {'a': node(state=git(dirty=True))}
    assert len(node_problems(nodes, controller_git=git())) == 1
    assert node_problems(nodes, controller_git=git(), allow_dirty=True) == []


def test_a_synced_workspace_judges_the_controller_only():
    nodes = {'a': node(state=git(commit='b' * 40))}
    assert node_problems(nodes, controller_git=git(), compare_nodes=False) == []
    assert len(node_problems(nodes, controller_git=git(dirty=True), compare_nodes=False)) == 1
    assert len(node_problems(nodes, controller_git=None, compare_nodes=False)) == 1


def test_the_first_node_as_reference():
    nodes = {'a': node(state=git(commit='b' * 40)), 'b': node(state=git(commit='b' * 40))}
    assert node_problems(nodes, git_reference='first_node', controller_git=git()) == []
    nodes['b'] = node(state=git(commit='c' * 40))
    problem = node_problems(nodes, git_reference='first_node')[0]
    assert 'the code differs' in problem and 'controller' not in problem.split('\n', 1)[1].split('\nBring')[0]


def test_git_check_off_skips_the_code():
    assert node_problems({'a': node(state=git(dirty=True))}, git_check=False) == []


def test_nodes_without_the_profiler_are_named():
    nodes = {'a': node(executables={'nsys': '/usr/bin/nsys'}), 'b': node(executables={'nsys': None}), 'c': node()}
    assert node_problems(nodes, git_check=False, profile='nsys', profile_executable='nsys') == [
        "Not starting anything: profile=nsys runs nsys, which is not on the PATH of b, c. Install it there (nsys: "
        "NVIDIA Nsight Systems; rocprofv3: ROCm's rocprofiler-sdk) or add its directory to that node's PATH, or "
        "profile with -e profile=torch."]
    assert node_problems(nodes, git_check=False, profile='', profile_executable='') == []


def test_every_failed_check_is_reported():
    nodes = {'a': node(), 'b': node(torch='2.4.0', state=git(dirty=True))}
    problems = node_problems(nodes, controller_git=git(), profile='rocprof', profile_executable='rocprofv3')
    assert [p.split(' ')[0:3] for p in problems] == [
        ['Nodes', 'run', 'different'], ['Not', 'starting', 'anything:'], ['Not', 'starting', 'anything:']]


def test_reach_table():
    lines = reach_table({
        'node0': node(reach={'ok': True, 'ms': 3, 'ifname': 'eth0', 'source': '10.0.0.1', 'target': '10.0.0.1:29500'}),
        'node1': node(reach={'ok': False, 'error': 'refused', 'ifname': 'eth1', 'source': '10.0.0.2',
                             'target': '10.0.0.1:29500'}),
        'node2': node(reach=None)})
    assert lines == [
        'node           interface    from            master port           result',
        'node0          eth0         10.0.0.1        10.0.0.1:29500        ok 3 ms',
        'node1          eth1         10.0.0.2        10.0.0.1:29500        FAILED: refused',
        'node2          ?            ?               ?                     FAILED: ?']
