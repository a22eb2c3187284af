# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The declarations (module_utils/_declarations/) the roles' defaults and argument specs and the nccl_env module's
knob options are generated from: a knob takes its type and choices from its row in _knobs.py and is an option of
every entry point of its role's group; a declaration that is missing or contradicts the registry is named."""

from __future__ import annotations

from ansible_collections.trainops.multinode.plugins.module_utils import _declarations, _knobs
from ansible_collections.trainops.multinode.plugins.module_utils._declarations.base import NO_DEFAULT, _var


def test_the_declarations_agree_with_the_registry():
    assert _declarations.problems() == []


def test_a_knob_takes_type_and_choices_from_its_row_and_is_an_option_of_its_roles_group():
    mode = _declarations.BY_NAME['trainops_network_mode']
    spec = _declarations.argument_spec(mode, 'nccl_env')
    assert spec['type'] == 'str' and spec['choices'] == ['auto', 'rdma', 'tcp'] and spec['default'] == 'auto'
    assert _declarations.roles(mode) == ['nccl_env']
    assert _declarations.entry_points(mode, 'nccl_env') == ['main', 'compute']
    nproc = _declarations.BY_NAME['trainops_nproc_per_node']
    assert _declarations.roles(nproc) == ['job', 'nccl_env']
    assert _declarations.entry_points(nproc, 'job')[0] == 'main' and 'status' in _declarations.entry_points(nproc, 'job')
    launcher = _declarations.argument_spec(_declarations.BY_NAME['trainops_launcher'], 'job')
    assert launcher['choices'] == list(_knobs.BY_KEY['launcher'].choices)


def test_a_description_may_differ_per_role():
    root = _declarations.BY_NAME['trainops_node_root']
    assert _declarations.description(root, 'nccl_env') == ['Per-node directory of trainops files.']
    assert _declarations.description(root, 'job') != _declarations.description(root, 'nccl_env')


def test_role_defaults_leave_out_an_entry_points_parameter_and_a_variable_without_default():
    job = _declarations.role_defaults('job')
    assert job['trainops_nproc_per_node'] == 8 and job['trainops_channels'] is None
    attempt = _declarations.BY_NAME['trainops_collect_attempt']
    assert not attempt.role_default and 'trainops_collect_attempt' not in job
    assert _declarations.argument_spec(attempt, 'job')['default'] == {}
    assert 'run_id' not in job and _declarations.BY_NAME['run_id'].default == NO_DEFAULT
    inventory = _declarations.argument_spec(_declarations.BY_NAME['trainops_sbatch_inventory'], 'sbatch')
    assert inventory['required'] and 'default' not in inventory
    assert _declarations.role_defaults('sbatch')['trainops_sbatch_inventory'] == ''


def test_the_module_option_of_a_setting_takes_type_and_choices_from_the_row():
    vendor = _declarations.module_option(_knobs.BY_SETTING['vendor'])
    assert vendor['type'] == 'str' and vendor['choices'] == ['nvidia', 'amd', 'none']
    assert _declarations.module_option(_knobs.BY_SETTING['require_transport'])['default'] is False
    assert _declarations.module_option(_knobs.BY_SETTING['ib_tc'])['type'] == 'int'


def test_each_declaration_that_contradicts_the_registry_is_named():
    variables = [var for var in _declarations.VARIABLES if var.name != 'trainops_ib_sl'] + [
        _var('trainops_ib_tc', 300, doc='x', type='int'),
        _var('trainops_cross_nic', None),
        _var('trainops_thing', 1, doc='y', entries={'job': ('main', 'launch')}, type='int'),
        _var('trainops_other', 1, doc='z', entries={'jobs': ('main',)}, option={'doc': 'o'}),
    ]
    variables = [var._replace(option=None) if var.name == 'trainops_nccl_debug' else var for var in variables]
    options = dict(nonsense={'doc': 'n'})
    assert _declarations.problems(variables, options) == [
        'trainops_ib_tc is declared twice',
        "trainops_ib_tc: a knob's type and choices are its row's in _knobs.py; do not declare them",
        "trainops_ib_tc: the default 300 is outside the row's range",
        'trainops_cross_nic is declared twice',
        'trainops_cross_nic: no description for role nccl_env',
        'trainops_thing: role job has no entry point launch',
        'trainops_other: no role jobs',
        'trainops_other: an option of the nccl_env module is declared, but the variable is no knob with a setting',
        'trainops_ib_sl (knob ib_sl) has no declaration in _declarations/',
        'nccl_env option ib_tc (knob ib_tc) has no declaration (option= of its variable, or OPTIONS)',
        'nccl_env option cross_nic (knob cross_nic) has no declaration (option= of its variable, or OPTIONS)',
        'nccl_env option nccl_debug (knob nccl_debug) has no declaration (option= of its variable, or OPTIONS)',
        'nccl_env option require_transport (knob require_transport) has no declaration (option= of its variable, '
        'or OPTIONS)',
        'nccl_env option nonsense in OPTIONS is no knob setting without a role variable',
    ]


def test_var_refuses_an_argument_spec_key_ansible_does_not_know():
    try:
        _var('trainops_x', 1, doc='x', entries={'job': ('main',)}, kind='int')
    except TypeError as error:
        assert 'trainops_x: no such argument spec key kind' in str(error)
    else:
        raise AssertionError('no error')
