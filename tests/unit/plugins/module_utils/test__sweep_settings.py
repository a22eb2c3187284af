# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A sweep's launch settings: what sweep.json records, what a resume takes from it and what it refuses."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _knobs, _sweep, _sweep_play, _sweep_results, _sweep_settings
from ansible_collections.trainops.multinode.plugins.module_utils._sweep_settings import SETTINGS, settings, variables

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
DEFAULTS = _sweep_play.role_defaults(os.path.join(ROOT, 'roles'))
SECRET_VALUE = 'hf_do_not_write_me'


def values(**changed):
    """The role variables' values (in the order of variables()), the roles' defaults with ``changed`` (by key)."""
    result = []
    for key in SETTINGS:
        var = _knobs.BY_KEY[key].var
        result.append(changed[key] if key in changed else DEFAULTS[var])
    return result


FIRST = dict(config='config/tiny.yaml', overrides=['training.max_steps=16'], nproc_per_node=2,
             env={'NCCL_ALGO': 'Ring'}, secret_env={'HF_TOKEN': SECRET_VALUE}, script_args=['--seed', '1'])
GRID = {'threads': [256, 512]}


def first_record(tmp_path, **changed):
    """A new sweep's sweep.json, planned with the settings of two nodes that ran with FIRST (and ``changed``)."""
    mine = settings(values(**dict(FIRST, **changed)), defaults=DEFAULTS, node='node0', sweep=GRID)
    assert mine['problems'] == [] and mine['vars'] == {} and mine['recorded'] is False
    path, record, resumed = _sweep.plan_sweep(str(tmp_path), 's', GRID, 'train',
                                              settings={'node0': mine['settings'], 'node1': mine['settings']}, now=0)
    assert not resumed
    return path, record


def resume(record, node='node0', given=(), knobs=None, environ=None, sweep='grid', workload='train', **now):
    sweep = GRID if sweep == 'grid' else sweep
    return settings(values(**now), knobs=knobs, defaults=DEFAULTS, given=given, record=record, node=node, sweep=sweep,
                    sweep_dir='/x/sweep_s', environ={'HF_TOKEN': 'from-env'} if environ is None else environ,
                    workload=workload)


def test_settings_and_operational_knobs_cover_every_launch_knob_once():
    assert not set(SETTINGS) & set(_sweep_settings.OPERATIONAL)
    launch = set(_sweep_settings.launch_keys())
    assert launch - set(SETTINGS) - set(_sweep_settings.OPERATIONAL) == set(), 'a new launch knob needs a decision'
    assert set(SETTINGS) <= set(_knobs.BY_KEY)
    # the NCCL/RCCL knobs of the nccl_env role that are no launch knob are settings too
    assert set(k.key for k in _knobs.NCCL_ENV if k.roles == ('nccl_env',) and k.per_node and k.key not in (
        'gpu_ids',)) <= set(SETTINGS)


def test_a_resume_sets_the_role_variable_of_every_setting_its_secrets_from_the_environment(tmp_path):
    # what sweep.yml sets before the launch is validated (module_utils/_sweep_play.py, host_plan)
    path = first_record(tmp_path)[0]
    node = dict(DEFAULTS, sweep_dir=path, __trainops_allreduce_args=[])
    plan = _sweep_play.host_plan(node.__getitem__, node.__contains__, DEFAULTS, 'node0', {'HF_TOKEN': 'from-env'})
    assert plan['problems'] == [] and plan['recorded'] is True
    # every setting's role variable but the swept knob's; the secrets' values from the controller's environment
    assert set(plan['vars']) == set(variables()) - {'trainops_threads'}
    assert plan['vars']['trainops_secret_env'] == {'HF_TOKEN': 'from-env'}
    assert plan['vars']['trainops_overrides'] == ['training.max_steps=16'] and plan['settings']['secret_env'] == ['HF_TOKEN']


def test_a_new_sweep_records_every_setting_secrets_by_name_only(tmp_path):
    path, record = first_record(tmp_path)
    text = open(os.path.join(path, 'sweep.json')).read()
    assert SECRET_VALUE not in text
    saved = json.loads(text)
    assert saved['settings']['secret_env'] == ['HF_TOKEN']
    assert saved['settings']['overrides'] == ['training.max_steps=16']
    assert saved['settings']['config'] == 'config/tiny.yaml' and saved['settings']['nproc_per_node'] == 2
    assert saved['settings']['script_args'] == ['--seed', '1'] and saved['settings']['env'] == {'NCCL_ALGO': 'Ring'}
    # the swept knob is the grid's, not a setting; the operational knobs are not recorded
    assert 'threads' not in saved['settings'] and 'master_port' not in saved['settings']
    assert saved['node_settings'] == {} and len(saved['settings_id']) == 8


def test_a_resume_with_sweep_dir_alone_takes_every_recorded_setting(tmp_path):
    record = first_record(tmp_path)[1]
    result = resume(record)
    assert result['problems'] == [] and result['recorded'] is True
    assert result['vars']['trainops_overrides'] == ['training.max_steps=16']
    assert result['vars']['trainops_config'] == 'config/tiny.yaml'
    assert result['vars']['trainops_env'] == {'NCCL_ALGO': 'Ring'}
    assert result['vars']['trainops_script_args'] == ['--seed', '1']
    assert 'trainops_secret_env' not in result['vars'] and 'trainops_threads' not in result['vars']
    # the secrets' values come from the controller's environment, by name
    assert result['secret_names'] == ['HF_TOKEN']
    assert result['settings'] == record['settings']


def test_the_same_value_given_again_is_accepted(tmp_path):
    record = first_record(tmp_path)[1]
    result = resume(record, given=['config', 'overrides'], knobs={'config': 'config/tiny.yaml'},
                    overrides=['training.max_steps=16'], nproc_per_node='2', secret_env={'HF_TOKEN': 'other'})
    assert result['problems'] == []
    assert result['secret_names'] == [], 'the secrets given again are used as given'


@pytest.mark.parametrize('now, given, expected', [
    (dict(overrides=['training.max_steps=8']), ['overrides'],
     'overrides=["training.max_steps=8"]: the sweep /x/sweep_s ran with overrides=["training.max_steps=16"] '
     '(sweep.json); leave overrides out to resume it with that value'),
    # a role variable that differs from the role's default counts as given (an inventory, a vars file)
    (dict(env={'NCCL_ALGO': 'Tree'}), [],
     'trainops_env={"NCCL_ALGO": "Tree"}: the sweep /x/sweep_s ran with trainops_env={"NCCL_ALGO": "Ring"}'),
    # a short knob given with the role's default value is given
    (dict(config='config/default.yaml'), ['config'],
     'config="config/default.yaml": the sweep /x/sweep_s ran with config="config/tiny.yaml"'),
    (dict(nproc_per_node=4), [], 'nproc=4: the sweep /x/sweep_s ran with nproc=2'),
])
def test_a_setting_given_again_with_another_value_is_refused_naming_it_and_both_values(tmp_path, now, given, expected):
    record = first_record(tmp_path)[1]
    result = resume(record, given=given, **now)
    assert len(result['problems']) == 1 and result['problems'][0].startswith(expected), result['problems']


def test_other_secrets_are_refused_by_name_and_a_missing_one_names_what_to_export(tmp_path):
    record = first_record(tmp_path)[1]
    [line] = resume(record, secret_env={'WANDB_API_KEY': SECRET_VALUE})['problems']
    assert line.startswith('trainops_secret_env: names WANDB_API_KEY; the sweep /x/sweep_s ran with the secrets '
                           'HF_TOKEN') and SECRET_VALUE not in line
    [line] = resume(record, environ={})['problems']
    assert "HF_TOKEN not in the controller's environment: export HF_TOKEN" in line


def test_operational_knobs_a_workload_and_a_grid_of_another_sweep(tmp_path):
    record = first_record(tmp_path)[1]
    assert resume(record, sweep={'threads': [256, 512]})['problems'] == []
    [line] = resume(record, sweep={'threads': [256]})['problems']
    assert line.startswith('sweep={"threads": [256]}: the sweep /x/sweep_s has the grid {"threads": [256, 512]}')
    [line] = resume(record, workload='allreduce')['problems']
    assert line.startswith('workload=allreduce: the sweep /x/sweep_s ran workload=train')


def test_an_older_sweep_json_without_settings_runs_with_the_settings_given_and_records_them(tmp_path):
    path, record = first_record(tmp_path)
    for key in ('settings', 'node_settings', 'settings_id'):
        del record[key]
    _sweep.write_json_atomic(os.path.join(path, 'sweep.json'), record)
    result = resume(record, overrides=['training.max_steps=8'], given=['overrides'])
    assert result['problems'] == [] and result['recorded'] is False and result['vars'] == {}
    again = _sweep.plan_sweep(str(tmp_path), 's', GRID, 'train', sweep_dir=path,
                              settings={'node0': result['settings']})[1]
    assert again['runs'][-1]['resumed'] is True and again['settings']['overrides'] == ['training.max_steps=8']
    assert again['runs'][-1]['settings_recorded'] is True
    # recorded once: a later resume keeps them
    later = _sweep.plan_sweep(str(tmp_path), 's', GRID, 'train', sweep_dir=path, settings={'node0': {}})[1]
    assert later['settings'] == again['settings'] and 'settings_recorded' not in later['runs'][-1]


def test_a_setting_that_differs_per_node_is_recorded_per_node_and_resumed_per_node(tmp_path):
    a = settings(values(socket_ifname='eth0'), defaults=DEFAULTS, node='node0')['settings']
    b = settings(values(socket_ifname='ib0'), defaults=DEFAULTS, node='node1')['settings']
    shared, per_node = _sweep_settings.record({'node0': a, 'node1': b})
    assert 'socket_ifname' not in shared and per_node == {'node0': {'socket_ifname': 'eth0'},
                                                          'node1': {'socket_ifname': 'ib0'}}
    record = dict(settings=shared, node_settings=per_node, workload='train')
    assert resume(record, node='node1', sweep=None)['vars']['trainops_socket_ifname'] == 'ib0'
    assert resume(record, node='node1', sweep=None, socket_ifname='ib0')['problems'] == []
    assert resume(record, node='node0', sweep=None, socket_ifname='ib0')['problems'][0].startswith(
        'trainops_socket_ifname="ib0": the sweep /x/sweep_s ran with trainops_socket_ifname="eth0"')


def test_an_extra_variable_that_kept_the_default_is_caught_after_the_resume_set_the_variables(tmp_path):
    record = first_record(tmp_path)[1]
    expected = resume(record)['settings']
    # -e trainops_script_args=[] wins over set_fact: the effective value is still the default
    lines = _sweep_settings.effective_problems(values(**{**FIRST, 'script_args': []}), None, expected, '/x/sweep_s')
    assert lines == ['args=[]: the sweep /x/sweep_s ran with args=["--seed", "1"] '
                     '(sweep.json); leave args out to resume it with that value, or leave sweep_dir '
                     'out to start a new sweep']
    assert _sweep_settings.effective_problems(values(**FIRST), None, expected) == []


def test_each_point_records_its_settings_id_and_the_results_show_a_mix(tmp_path):
    path, record = first_record(tmp_path)
    exp = tmp_path / 'exp1'
    exp.mkdir()
    _sweep.record_point(path, 1, {'status': 'running', 'experiment_dir': str(exp)})
    saved = _sweep.read_sweep(path)
    assert saved['points'][0]['settings_id'] == record['settings_id']
    # a point that ran before the sweep recorded settings (an older sweep.json)
    saved['points'][1].update(experiment_dir=str(exp), outcome='failed', status='done')
    columns, rows, benches = _sweep_results.write_results(path, saved)
    assert benches == {}
    assert columns[-3:] == ['settings', 'experiment', 'outcome_detail']
    assert [r['settings'] for r in rows] == [record['settings_id'], 'not recorded']
    assert _sweep_results.render_table(columns, rows)[0].split()[-1] == 'settings'
    markdown = open(os.path.join(path, 'results.md')).read()
    [legend] = [line for line in markdown.splitlines() if line.startswith('- settings %s: ' % record['settings_id'])]
    assert 'config="config/tiny.yaml"' in legend and 'overrides=["training.max_steps=16"]' in legend
    assert 'secret_env=["HF_TOKEN"]' in markdown and SECRET_VALUE not in markdown
    assert 'the points ran with different settings' in markdown
    assert json.load(open(os.path.join(path, 'results.json')))['settings'] == record['settings']
    # one settings id for all: the console table does not show the column
    saved['points'][1]['settings_id'] = record['settings_id']
    columns, rows, benches = _sweep_results.result_rows(saved)
    assert 'settings' not in _sweep_results.render_table(columns, rows)[0].split()


def test_the_variables_and_a_wrong_number_of_values():
    assert variables()[:3] == ['trainops_script', 'trainops_config', 'trainops_overrides']
    with pytest.raises(ValueError, match='values for'):
        settings([1, 2])
    result = settings(values(), defaults=DEFAULTS, node='node0')
    assert result['problems'] == [] and result['settings']['config'] == 'config/default.yaml'
