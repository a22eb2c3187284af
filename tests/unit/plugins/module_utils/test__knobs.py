# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The knob registry (module_utils/_knobs.py) and the places that stay written out: the role defaults, every
argument_specs entry point of the roles that declare a knob, the nccl_env module's documentation, and the task
files that set the short knobs (validate.yml) and a sweep point's knobs (point.yml). A row that disagrees with one
of them fails here, naming the file, the knob and what differs."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.trainops.multinode.plugins.action import nccl_env as action
from ansible_collections.trainops.multinode.plugins.module_utils import _knobs, _launch_plan, _sweep
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env import core, deciders, network
from ansible_collections.trainops.multinode.plugins.modules import nccl_env as module

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))

ENTRY_POINTS = {'job': ('main',), 'nccl_env': ('main', 'compute')}
"""The entry points that must declare every knob of their role (the others may declare a knob, and must agree)."""


def _yaml(*path):
    with open(os.path.join(ROOT, *path)) as handle:
        return yaml.safe_load(handle)


def _defaults(role):
    return _yaml('roles', role, 'defaults', 'main.yml')


def _specs(role):
    return _yaml('roles', role, 'meta', 'argument_specs.yml')['argument_specs']


def _module_options():
    return yaml.safe_load(module.DOCUMENTATION)['options']


def disagreements(knobs=_knobs.KNOBS):
    """Every way the rows disagree with the written-out declarations, one line each."""
    lines = []
    options = _module_options()
    for knob in knobs:
        for role in knob.roles:
            defaults = _defaults(role)
            where = 'roles/%s/defaults/main.yml' % role
            if knob.var not in defaults:
                lines.append('%s: %s (knob %s) is not declared' % (where, knob.var, knob.key))
                continue
            default = defaults[knob.var]
            for entry, spec in _specs(role).items():
                where = 'roles/%s/meta/argument_specs.yml %s' % (role, entry)
                option = (spec.get('options') or {}).get(knob.var)
                if option is None:
                    if entry in ENTRY_POINTS.get(role, ()):
                        lines.append('%s: %s (knob %s) is not declared' % (where, knob.var, knob.key))
                    continue
                if option.get('type', 'str') != knob.type:
                    lines.append('%s: %s has type %s, the registry says %s' % (
                        where, knob.var, option.get('type', 'str'), knob.type))
                if option.get('default') != default:
                    lines.append('%s: %s has default %r, roles/%s/defaults/main.yml %r' % (
                        where, knob.var, option.get('default'), role, default))
                if knob.choices and list(option.get('choices') or ()) != list(knob.choices):
                    lines.append('%s: %s has choices %s, the registry says %s' % (
                        where, knob.var, option.get('choices'), list(knob.choices)))
            if knob.low is not None and not _knobs.is_unset(default) and _knobs.range_problem(
                    {knob.key: default}, knob):
                lines.append('roles/%s/defaults/main.yml: %s default %r is outside the registry\'s range' % (
                    role, knob.var, default))
        if knob.setting:
            where = 'plugins/modules/nccl_env.py'
            option = options.get(knob.setting)
            if option is None:
                lines.append('%s: option %s (knob %s) is not documented' % (where, knob.setting, knob.key))
                continue
            expected = _knobs.option(knob)
            if option.get('type', 'str') != expected['type']:
                lines.append('%s: option %s has type %s, the registry says %s' % (
                    where, knob.setting, option.get('type', 'str'), expected['type']))
            if list(option.get('choices') or ()) != list(expected.get('choices') or ()):
                lines.append('%s: option %s has choices %s, the registry says %s' % (
                    where, knob.setting, option.get('choices'), expected.get('choices')))
    settings = set(knob.setting for knob in knobs if knob.setting)
    for name in sorted(set(options) - settings - {'facts', 'cluster', 'settings', 'role_vars'}):
        lines.append('plugins/modules/nccl_env.py: option %s is no knob of the registry' % name)
    return lines


def test_the_registry_agrees_with_the_defaults_the_argument_specs_and_the_module_documentation():
    lines = disagreements()
    assert not lines, 'the knob registry (plugins/module_utils/_knobs.py) disagrees with:\n' + '\n'.join(lines)


def test_a_row_that_disagrees_fails_naming_the_file_and_what_differs():
    broken = _knobs.BY_KEY['ib_tc']._replace(type='int', choices=('a', 'b'))
    lines = disagreements([broken, _knobs.BY_KEY['ib_sl']._replace(var='trainops_ib_service_level')])
    assert 'roles/nccl_env/meta/argument_specs.yml main: trainops_ib_tc has type raw, the registry says int' in lines
    assert 'roles/nccl_env/meta/argument_specs.yml compute: trainops_ib_tc has type raw, the registry says int' in lines
    assert ('roles/nccl_env/defaults/main.yml: trainops_ib_service_level (knob ib_sl) is not declared') in lines
    assert any(line.startswith('plugins/modules/nccl_env.py: option ib_tc has choices None') for line in lines)


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


def test_point_yml_sets_the_role_variable_of_every_key_a_point_changes():
    keys = _set_fact_keys('roles', 'job', 'tasks', 'point.yml')
    expected = set(_knobs.BY_KEY[key].var for key in _sweep.POINT_KEYS)
    assert set(k for k in keys if k.startswith('trainops_')) == expected


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
