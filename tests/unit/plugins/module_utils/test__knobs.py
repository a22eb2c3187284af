# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The knob registry (module_utils/_knobs.py) and the places that stay written out: the task file that sets the
short knobs (validate.yml) and a sweep point's knobs (module_utils/_sweep_play.py). The role defaults, the argument
specs and the nccl_env module's knob options are generated from the registry (hack/gen_docs.py;
tests/unit/hack/test_gen_docs.py and test__declarations.py)."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.trainops.multinode.plugins.action import nccl_env as action
from ansible_collections.trainops.multinode.plugins.module_utils import _knobs, _launch_plan, _sweep, _sweep_play
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env import core, deciders, network

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))


def _yaml(*path):
    with open(os.path.join(ROOT, *path)) as handle:
        return yaml.safe_load(handle)


def _set_fact_keys(*path):
    """The keys of the file's set_fact task that sets trainops_ variables."""
    tasks = _yaml(*path)
    while len(tasks) == 1 and 'block' in tasks[0]:
        tasks = tasks[0]['block']
    facts = [set(t['ansible.builtin.set_fact']) for t in tasks if 'ansible.builtin.set_fact' in t]
    return [keys for keys in facts if any(k.startswith('trainops_') for k in keys)][0]


def test_validate_yml_sets_the_role_variable_of_every_short_knob_the_launch_plan_changes():
    tasks = _yaml('roles', 'job', 'tasks', 'validate.yml')
    assert tasks[0]['trainops.multinode.launch_plan'] == {'step': 'knobs'}
    assert tasks[1]['ansible.builtin.set_fact'] == {'{{ item.key }}': '{{ item.value }}'}
    assert tasks[1]['loop'] == '{{ %s.changed | dict2items }}' % tasks[0]['register']
    read = dict((knob.var, None) for knob in _knobs.KNOBS).get
    changed = _launch_plan.knobs(lambda var, default=None: read(var, default), set(knob.short for knob in _knobs.SHORT),
                                 'node0')['fields']['changed']
    assert set(changed) == set(knob.var for knob in _knobs.SHORT)


def test_a_point_sets_the_role_variable_of_every_key_a_point_changes():
    assert [key for key, var in _sweep_play.POINT_VARS] == list(_sweep.POINT_KEYS)
    assert all(_knobs.BY_KEY[key].var == var for key, var in _sweep_play.POINT_VARS)


def test_sweep_knobs_and_settings_come_from_the_registry():
    assert _sweep.PLAIN_KNOBS == {'channels': 'channels', 'min_channels': 'min_channels', 'threads': 'threads',
                                  'nproc': 'nproc_per_node', 'config': 'config'}
    assert deciders.SETTINGS == tuple(action.SETTINGS_SPEC)
    assert action.SETTINGS_SPEC['vendor'] == dict(type='str', choices=['nvidia', 'amd', 'none'])
    assert [q[:4] for q in network.QOS] == [
        ('ib_tc', 'NCCL_IB_TC', 0, 255), ('ib_fifo_tc', 'NCCL_IB_FIFO_TC', 0, 255), ('ib_sl', 'NCCL_IB_SL', 0, 15),
        ('ib_qps_per_connection', 'NCCL_IB_QPS_PER_CONNECTION', 1, 128)]
    for knob in _knobs.KNOBS:
        for var in knob.env:
            assert deciders.DECIDERS[var] == knob.decider


@pytest.mark.parametrize('value', [None, '', 'None', 'none', ' NULL ', 'unset', 'Unset'])
def test_one_unset_rule(value):
    assert _knobs.is_unset(value)
    assert core._is_unset(value)


@pytest.mark.parametrize('value', ['auto', 0, '0', 'off', False, [], 'WARN'])
def test_what_is_not_unset(value):
    assert not _knobs.is_unset(value)


def _values(use, given=None, **overrides):
    names = _knobs.names(use)['variables']
    return _knobs.values([overrides.get(name) for name in names], use, given)


def test_short_knobs_win_over_the_role_variables_and_launch_takes_them():
    short = _values('short', {'nproc': '4', 'channels': 'unset'}, trainops_nproc_per_node=8, trainops_threads=256)
    assert short['nproc_per_node'] == '4' and short['channels'] == 'unset' and short['threads'] == 256
    launch = _values('launch', short, trainops_nproc_per_node=8, trainops_max_restarts=3)
    assert launch['nproc_per_node'] == '4' and launch['max_restarts'] == 3 and 'network_mode' not in launch


def test_the_manifest_records_an_unset_range_knob_as_null_and_numbers_as_integers():
    record = _values('manifest', trainops_channels='None', trainops_min_channels='16', trainops_threads=256,
                     trainops_nproc_per_node='2', trainops_wait='false', trainops_master_port='29500')
    assert (record['channels'], record['min_channels'], record['threads']) == (None, 16, 256)
    assert (record['nproc_per_node'], record['wait'], record['master_port']) == (2, False, 29500)
    assert list(record)[:4] == ['channels', 'min_channels', 'threads', 'nproc_per_node']


def test_the_manifest_records_a_float_knob_given_as_text_as_a_number_and_leaves_what_is_none_as_it_is():
    assert _values('manifest', trainops_straggler_threshold='0.3')['straggler_threshold'] == 0.3
    assert _values('manifest', trainops_straggler_threshold='abc')['straggler_threshold'] == 'abc'


def test_nccl_env_settings_leave_out_unset_range_knobs_and_vendor_auto_but_pass_a_null_debug():
    settings = _values('nccl_env', trainops_ib_tc='106', trainops_ib_sl='', trainops_channels=None,
                       trainops_gpu_vendor='auto', trainops_nccl_debug=None, trainops_ib_gid_index='auto')
    assert settings['ib_tc'] == 106 and 'ib_sl' not in settings and 'channels' not in settings
    assert 'vendor' not in settings and settings['nccl_debug'] is None and settings['gid_index'] == 'auto'
    assert 'require_transport' not in settings
    assert _values('nccl_env', trainops_gpu_vendor='amd')['vendor'] == 'amd'


def test_knob_values_refuses_a_list_of_the_wrong_length():
    with pytest.raises(ValueError, match='knob_values manifest: 1 values for'):
        _knobs.values([1], 'manifest')


@pytest.mark.parametrize('value, number', [
    (8, 8), ('8', 8), (' 8 ', 8), ('2.5', 2), (2.5, 2), ('-1', -1), (None, 0), ('', 0), ('many', 0), ('0x10', 0),
    (True, 1), ([1], 0),
])
def test_jinja_int_is_the_int_filter(value, number):
    assert _knobs.jinja_int(value) == number


def test_role_settings_reads_every_nccl_env_variable_once_and_takes_the_node_count_from_the_job_or_the_play():
    read = []
    variables = {knob.var: None for knob in _knobs.NCCL_ENV}
    variables.update(trainops_channels='32', trainops_gpu_vendor='auto', trainops_nccl_env_nnodes='3')

    def reader(var):
        read.append(var)
        return variables[var]

    settings = _knobs.role_settings(reader, ['a', 'b'])
    assert read == _knobs.names('nccl_env')['variables']
    assert settings['channels'] == 32 and 'vendor' not in settings and settings['nnodes'] == 3
    for nnodes in (0, None, 'unset', -2):
        variables['trainops_nccl_env_nnodes'] = nnodes
        assert _knobs.role_settings(variables.get, ['a', 'b'])['nnodes'] == 2
    assert _knobs.role_settings(variables.get, None)['nnodes'] == 0


def test_args_given_as_a_string_are_split_as_a_shell_would_and_a_list_passes_unchanged():
    short = _values('short', {'args': '--lr 0.1 --name "run 1"', 'src': '/home/me/code', 'module': 'pkg.train'})
    assert short['script_args'] == ['--lr', '0.1', '--name', 'run 1']
    assert short['workspace_src'] == '/home/me/code' and short['module'] == 'pkg.train'
    home = _values('short', {'src': '~/code/'})['workspace_src']
    assert home == os.path.join(os.path.realpath(os.path.expanduser('~')), 'code')
    assert _values('short', {}, trainops_script_args=['--a b', "'c'"])['script_args'] == ['--a b', "'c'"]
    # what cannot be split stays as it is: launch_problems names it
    assert _values('short', {'args': '--name "run'})['script_args'] == '--name "run'
