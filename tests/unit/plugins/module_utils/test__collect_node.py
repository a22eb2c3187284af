# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node's part of the collect (module_utils._collect_node): the stop when a node failed, the run directory and
the plan of the node's files (the rule that refuses a path is _collect's: test__collect.py)."""

from __future__ import annotations

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _collect_node as node
from ansible_collections.trainops.multinode.plugins.module_utils._collect import CollectRefused
from ansible_collections.trainops.multinode.plugins.module_utils._outcomes import OutcomeError

RUN = '/home/u/.cache/trainops/node1/runs/r1'


def test_no_stop_when_no_node_failed():
    assert node.stop_reason_detail(['', None, ''], 'failed') is None
    assert node.stop_reason_detail([], '') is None


def test_the_stop_names_the_verdict_s_reason_and_the_first_failed_node_s_error_cut_on_a_word():
    assert node.stop_reason_detail(['', 'node1: exit code 1', 'node2: lost'], '') == ('peer', 'node1: exit code 1')
    long = 'word ' * 100
    reason, detail = node.stop_reason_detail([long], '')
    assert detail == long[:297].rsplit(' ', 1)[0] + '...' and len(detail) <= 300
    assert node.stop_reason_detail(['x' * 305], '')[1] == 'x' * 305   # Jinja's leeway of 5 characters
    with pytest.raises(OutcomeError):
        node.stop_reason_detail(['boom'], 'no-such-verdict')


def test_the_run_directory_is_the_final_job_s_or_the_state_dir_s():
    assert node.node_run_dir({'run_dir': '/r/runs/r1'}, '/s', 'r1') == '/r/runs/r1'
    assert node.node_run_dir({}, '/s', 'r1') == node.node_run_dir(None, '/s', 'r1') == '/s/runs/r1'


def test_the_plan_puts_the_log_outputs_and_profiles_each_in_the_node_s_place(tmp_path):
    job = {'log_path': RUN + '/node.log'}
    plans = node.node_plan(str(tmp_path), 'node1', ['node0', 'node1'], job, RUN,
                           [RUN + '/outputs/rank_01_metrics.jsonl', RUN + '/outputs/../../../x'],
                           [RUN + '/profiles/node1_rank1.json'])
    assert [len(plan['files']) for plan in plans] == [1, 1, 1]
    assert node.planned_files(plans) == [
        {'src': RUN + '/node.log', 'dest': str(tmp_path / 'logs' / 'node_1.txt')},
        {'src': RUN + '/outputs/rank_01_metrics.jsonl', 'dest': str(tmp_path / 'outputs' / 'node1' / 'rank_01_metrics.jsonl')},
        {'src': RUN + '/profiles/node1_rank1.json', 'dest': str(tmp_path / 'profiles' / 'node1' / 'node1_rank1.json')}]
    assert plans[1]['refused'] == ["node1: refused output '%s/outputs/../../../x': a \"\", \".\" or \"..\" component" % RUN]
    # without profile=..., no profiles are planned; without a log, none is
    assert len(node.node_plan(str(tmp_path), 'node1', ['node1'], {}, RUN, [])) == 2
    assert node.node_plan(str(tmp_path), 'node1', ['node1'], None, RUN, [])[0] == {'files': [], 'refused': []}


def test_the_plan_refuses_a_node_that_cannot_name_its_directory_or_is_not_the_job_s(tmp_path):
    with pytest.raises(CollectRefused, match="node name '../up' cannot name its directory"):
        node.node_plan(str(tmp_path), '../up', ['../up'], {}, RUN, [])
    with pytest.raises(CollectRefused, match=r"node9 is not one of the job's nodes \(node0, node1\)"):
        node.node_plan(str(tmp_path), 'node9', ['node0', 'node1'], {}, RUN, [])


def test_found_paths_reads_a_find_answer():
    assert node.found_paths({'files': [{'path': '/a'}, {'mode': '0644'}, 'x', {'path': '/b'}]}) == ['/a', '/b']
    assert node.found_paths({}) == node.found_paths(None) == []
