# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The steps of playbooks/sweep.yml as data: a node's sweep and settings, the gate, the points' variables, a point's
outcome, what the play shows and publishes."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _sweep, _sweep_play
from ansible_collections.trainops.multinode.plugins.module_utils._sweep import SweepError

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
DEFAULTS = _sweep_play.role_defaults(os.path.join(ROOT, 'roles'))


def node(**given):
    """A node's variables: the roles' defaults and ``given`` (the command line's)."""
    return dict(DEFAULTS, __trainops_allreduce_args=['--iters', '5'], **given)


def plan(variables, name='node0', environ=None):
    return _sweep_play.host_plan(variables.__getitem__, variables.__contains__, DEFAULTS, name, environ or {})


def test_a_new_sweep_sets_nothing_and_records_the_settings():
    result = plan(node(sweep={'channels': [28, 42]}, sweep_name='nccl', config='config/tiny.yaml'))
    assert result['error'] == '' and result['problems'] == [] and result['vars'] == {}
    assert result['name'] == 'nccl' and result['sweep_dir'] == '' and result['grid'] == {'channels': [28, 42]}
    assert result['workload'] == 'train' and result['stop_on_failure'] is False
    # the short knob over its role variable; the swept knob is no setting
    assert result['settings']['config'] == 'config/tiny.yaml' and 'channels' not in result['settings']


def test_the_allreduce_workload_sets_the_benchmark_and_its_arguments():
    result = plan(node(sweep={'threads': [256]}, workload='allreduce', stop_on_failure='yes'))
    assert result['vars'] == {'trainops_script': 'allreduce_bench.py', 'trainops_pass_config_args': False,
                              'trainops_run_name': 'allreduce', 'trainops_script_args': ['--iters', '5']}
    assert result['settings']['script'] == 'allreduce_bench.py' and result['settings']['script_args'] == ['--iters', '5']
    assert result['stop_on_failure'] is True
    assert plan(node(workload='allreduce', run_name='ar'))['vars']['trainops_run_name'] == 'ar'


@pytest.mark.parametrize('given, expected', [
    (dict(workload='eval'), 'workload=eval: must be train or allreduce (e.g. -e workload=allreduce)'),
    (dict(sweep_dir='/nonexistent/sweep_x'), 'sweep_dir=/nonexistent/sweep_x: no sweep.json there; give the directory '
                                             'of an earlier sweep (experiments/sweep_<name>_<timestamp>), or leave '
                                             'sweep_dir out to start a new sweep'),
])
def test_a_bad_workload_or_sweep_dir_is_an_error_that_ends_the_sweep(given, expected):
    result = plan(node(**given))
    assert result['error'] == expected and result['vars'] == {}
    assert _sweep_play.gate({'node0': result, 'node1': result}) == expected


def test_a_resume_takes_the_grid_workload_and_settings_from_sweep_json(tmp_path):
    first = plan(node(sweep={'threads': [256, 512]}, workload='allreduce', overrides=['a=1']))
    path = _sweep.plan_sweep(str(tmp_path), 's', first['grid'], 'allreduce', settings={'node0': first['settings']})[0]
    again = plan(node(sweep_dir=os.path.relpath(path)))
    assert again['sweep_dir'] == path and again['grid'] == {'threads': [256, 512]} and again['workload'] == 'allreduce'
    assert again['problems'] == [] and again['recorded'] is True
    assert again['vars']['trainops_overrides'] == ['a=1'] and again['vars']['trainops_script'] == 'allreduce_bench.py'
    # given again with another value: refused, once for every node that has it
    refused = plan(node(sweep_dir=path, overrides=['a=2']))
    message = _sweep_play.gate({'node0': refused, 'node1': refused})
    assert message.startswith('Not resuming the sweep:\noverrides=["a=2"]: the sweep %s ran with overrides=["a=1"]' % path)
    assert message.count('\n') == 1
    assert _sweep_play.gate({'node0': again, 'node1': again}) is None


def test_an_extra_variable_that_kept_its_default_is_an_effective_problem(tmp_path):
    first = plan(node(sweep={'threads': [256]}, overrides=['a=1']))
    path = _sweep.plan_sweep(str(tmp_path), 's', first['grid'], 'train', settings={'node0': first['settings']})[0]
    again = plan(node(sweep_dir=path))
    after = node(sweep_dir=path, **again['vars'])
    assert _sweep_play.effective_problems(after.__getitem__, after.__contains__, again) == []
    kept = dict(after, trainops_overrides=DEFAULTS['trainops_overrides'])
    [line] = _sweep_play.effective_problems(kept.__getitem__, kept.__contains__, again)
    assert line.startswith('overrides=%s: the sweep %s ran with overrides=["a=1"]' % (
        json.dumps(DEFAULTS['trainops_overrides']), path))


def test_points_carry_the_variables_they_set():
    params = {'channels': None, 'min_channels': None, 'threads': None, 'nproc_per_node': 1, 'config': 'c.yaml',
              'env': {'A': '1'}, 'overrides': ['x=1']}
    # a stand-in for launch_problems' parameters: only the keys a point changes (their rules pass here)
    message, points = _sweep_play.points(dict(params, sync_workspace=False, script_given=False),
                                         {'channels': [28, 42], 'env.NCCL_ALGO': ['Ring']}, [])
    assert message is None and [p['label'] for p in points] == ['channels=28 env.NCCL_ALGO=Ring',
                                                                'channels=42 env.NCCL_ALGO=Ring']
    second = points[1]['vars']
    assert second['trainops_channels'] == 42 and second['trainops_env'] == {'A': '1', 'NCCL_ALGO': 'Ring'}
    assert second['__trainops_wait_label'] == 'point 2/2 channels=42 env.NCCL_ALGO=Ring'
    assert second['__trainops_point_error'] == '' and second['trainops_wait'] is True
    assert second['__trainops_fail_on_failure'] is False
    message, points = _sweep_play.points(params, {'chanels': [1]}, [])
    assert message.startswith('Not starting the sweep:\nchanels: not a knob a sweep can vary') and points == []


def test_fixed_knobs_are_the_sweepable_short_knobs_given():
    assert _sweep_play.fixed_knobs({'channels', 'config', 'master_port'}.__contains__) == ['channels', 'config']


def test_a_point_outcome_comes_from_its_manifest_else_from_the_error():
    assert _sweep_play.point_outcome({'outcome': 'succeeded', 'outcome_detail': None}, [], ['x']) == dict(
        status='done', outcome='succeeded', outcome_detail=None)
    assert _sweep_play.point_outcome(None, [], ['node1: boom']) == dict(
        status='done', outcome='failed', outcome_detail='node1: boom')
    assert _sweep_play.point_outcome(None, ['manifest.json: refused (not JSON)'], [])['outcome_detail'] == (
        'manifest.json: refused (not JSON)')
    assert _sweep_play.point_outcome({}, [], [])['outcome_detail'] == 'no manifest written'


def test_what_the_play_shows():
    points = [dict(index=1, label='threads=256', outcome='succeeded'), dict(index=2, label='threads=512', outcome=None)]
    lines = _sweep_play.plan_lines('/e/sweep_s', True, True, points, 'train', 2)
    assert lines[0] == 'Sweep /e/sweep_s (resumed): 2 point(s) of train on 2 node(s)'
    assert lines[1].startswith('  sweep.json had no launch settings') and lines[2:] == [
        '  point 1/2 threads=256: succeeded earlier, skipped', '  point 2/2 threads=512']
    assert [p['index'] for p in _sweep_play.to_run(points, [dict(index=1), dict(index=2)])] == [2]
    assert _sweep_play.point_line('point 1/2 x=1', dict(outcome='succeeded')) == 'point 1/2 x=1: succeeded'
    assert _sweep_play.point_line('point 1/2 x=1', dict(outcome='failed', outcome_detail='why')) == (
        'point 1/2 x=1: failed (why)')


def test_the_report_fails_naming_the_points_that_did_not_succeed():
    record = dict(outcome='failed', points=[
        dict(index=1, label='x=1', outcome='failed', outcome_detail='failed on node1', experiment_dir='/e/p1'),
        dict(index=2, label='x=2', outcome='succeeded', outcome_detail=None, experiment_dir='/e/p2')])
    report = _sweep_play.report('/e/sweep_s', record, ['point  x', '1      1'], ['sweep.json'])
    assert report['lines'] == ['sweep : /e/sweep_s', 'outcome : failed', '', 'point  x', '1      1', '',
                               'files : sweep.json']
    assert 'Sweep failed; 1 point(s) did not succeed:\n  point 1 x=1: failed: failed on node1 (/e/p1)\n' in report['failure']
    assert report['failure'].endswith('-e sweep_dir=/e/sweep_s to run them again (points that succeeded are skipped).')
    assert report['stats'] == dict(path='/e/sweep_s', outcome='failed', points=record['points'], table=['point  x', '1      1'])
    record['outcome'] = 'succeeded'
    assert _sweep_play.report('/e/sweep_s', record, [], [])['failure'] == ''


def test_sweep_of_refuses_a_record_without_a_grid(tmp_path):
    (tmp_path / 'sweep.json').write_text(json.dumps({'points': []}))
    variables = node(sweep_dir=str(tmp_path))
    with pytest.raises(SweepError, match='not a sweep record'):
        _sweep_play.sweep_of(variables.__getitem__, variables.__contains__)
