# -*- coding: utf-8 -*-

# Copyright (c) 2025, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for the thin trainops.multinode.torchrun module: argument handling, documentation, result plumbing."""

from __future__ import annotations

import pytest

from unittest.mock import patch

from ansible.module_utils.testing import patch_module_args

from module_harness import ExitJson, FailJson, assert_documentation_matches_argument_spec

from ansible_collections.trainops.multinode.plugins.modules import torchrun as module
from ansible_collections.trainops.multinode.plugins.module_utils._torchrun import TorchrunError


def run(args, check_mode=False, result=None, error=None):
    if check_mode:
        args = dict(args, _ansible_check_mode=True)
    calls = []

    def fake_run_module(params, check_mode=False):
        calls.append((dict(params), check_mode))
        if error is not None:
            raise error
        return dict(result or {'changed': False, 'job': {}, 'log_tail': []})

    with patch_module_args(args), patch.object(module, 'run_module', fake_run_module):
        try:
            module.main()
        except ExitJson as e:
            return 'exit', e.args[0], calls
        except FailJson as e:
            return 'fail', e.args[0], calls
    raise AssertionError('module did not exit')


START = dict(state_dir='/tmp/s', run_id='r1', nnodes=2, nproc_per_node=8, node_rank=1, master_addr='10.0.0.1',
             master_port=29500, entrypoint='train.py')


def test_started_passes_defaults():
    kind, res, calls = run(START)
    assert kind == 'exit'
    params, check_mode = calls[0]
    assert check_mode is False
    assert params['state'] == 'started'
    assert params['rdzv_backend'] == 'static'
    assert params['python'] == 'python3'
    assert params['max_restarts'] == 0
    assert params['entrypoint_args'] == [] and params['command_prefix'] == [] and params['env'] == {}
    assert params['replace'] is False and params['stop_timeout'] == 15 and params['log_lines'] == 20


@pytest.mark.parametrize('missing', ['run_id', 'nnodes', 'nproc_per_node', 'node_rank', 'master_addr', 'master_port', 'entrypoint'])
def test_started_requires(missing):
    args = dict(START)
    del args[missing]
    kind, res, calls = run(args)
    assert kind == 'fail'
    assert missing in res['msg']
    assert calls == []


def test_query_needs_only_state_dir():
    kind, res, calls = run(dict(state='query', state_dir='/tmp/s'))
    assert kind == 'exit'
    assert calls[0][0]['run_id'] is None


def test_check_mode_is_passed():
    kind, res, calls = run(dict(state='stopped', state_dir='/tmp/s'), check_mode=True)
    assert kind == 'exit' and calls[0][1] is True


def test_error_becomes_fail_json_with_details():
    kind, res, calls = run(START, error=TorchrunError('Another run is still running', running=[{'run_id': 'old'}]))
    assert kind == 'fail'
    assert res['msg'] == 'Another run is still running'
    assert res['running'] == [{'run_id': 'old'}]


def test_warnings_go_through_module_warn():
    with patch('ansible.module_utils.basic.AnsibleModule.warn') as warn:
        kind, res, calls = run(dict(state='stopped', state_dir='/tmp/s'),
                               result={'changed': True, 'job': {}, 'log_tail': [], 'stopped_pids': [1], 'warnings': ['supervisor slow']})
    assert kind == 'exit'
    assert res['stopped_pids'] == [1]
    assert 'warnings' not in res
    warn.assert_called_once_with('supervisor slow')


def test_bad_choice():
    kind, res, calls = run(dict(START, rdzv_backend='etcd'))
    assert kind == 'fail' and 'rdzv_backend' in res['msg']


def test_documentation_matches_argument_spec():
    """DOCUMENTATION options (with the doc fragment) and argument_spec agree on names, types, defaults, choices, elements."""
    from ansible_collections.trainops.multinode.plugins.doc_fragments._torchrun import ModuleDocFragment
    assert_documentation_matches_argument_spec(module, ModuleDocFragment)


def test_documented_stop_reasons_are_the_vocabularys():
    """stop_reason's documented choices are written out; they, and the reasons its description names (with
    replaced, which only replace=true records), are module_utils/_outcomes.py's."""
    import re
    import yaml
    from ansible_collections.trainops.multinode.plugins.module_utils import _outcomes
    option = yaml.safe_load(module.DOCUMENTATION)['options']['stop_reason']
    assert option['choices'] == list(_outcomes.ASKED_STOP_REASONS)
    assert set(re.findall(r'V\(([a-z_]+)\)', ' '.join(option['description']))) == set(_outcomes.STOP_REASONS)
