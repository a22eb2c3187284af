# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The thin trainops.multinode.preflight module: documentation, argument spec, failing with every problem."""

from __future__ import annotations

import json
from unittest.mock import patch

import pytest
import yaml

from ansible.module_utils.testing import patch_module_args

from module_harness import ExitJson, FailJson, assert_documentation_matches_argument_spec

from ansible_collections.trainops.multinode.plugins.doc_fragments._node_network import ModuleDocFragment
from ansible_collections.trainops.multinode.plugins.modules import preflight as module

LINKS = [{'ifname': 'eth1', 'mtu': 1500, 'operstate': 'UP', 'addr_info': [
    {'family': 'inet', 'local': '10.77.0.13', 'prefixlen': 24}]}]
TORCH = {'python': '3.11.9', 'executable': '/usr/bin/python3', 'version': '2.13.0', 'location': '/x/torch/__init__.py',
         'imported': False, 'error': None}


def fake_run_command(torch):
    def run_command(self, argv, **kwargs):
        if argv[:4] == ['ip', '-j', 'addr', 'show']:
            return 0, json.dumps(LINKS), ''
        if argv[:4] == ['ip', '-j', 'route', 'get']:
            return 0, json.dumps([{'dst': argv[4], 'dev': 'eth1', 'prefsrc': '10.77.0.13'}]), ''
        if argv[1] == '-c':
            return 0, json.dumps(torch), ''
        raise AssertionError(argv)
    return run_command


def run(args, torch=None):
    torch = TORCH if torch is None else torch
    with patch.object(module.AnsibleModule, 'run_command', fake_run_command(torch)):
        with patch_module_args(args):
            with pytest.raises((ExitJson, FailJson)) as caught:
                module.main()
    return caught.type.__name__, caught.value.args[0]


def test_documentation_matches_argument_spec():
    assert_documentation_matches_argument_spec(module, ModuleDocFragment)
    returned = yaml.safe_load(module.RETURN)
    assert {'problems', 'torch', 'job', 'paths', 'reach', 'git', 'master_port_free'} <= set(returned)


def test_a_ready_node_exits_with_its_facts(tmp_path):
    kind, result = run(dict(master_addr='10.77.0.11', python='python3', state_dir=str(tmp_path / 'state')))
    assert kind == 'ExitJson', result
    assert result['problems'] == [] and result['changed'] is False
    assert result['ansible_facts']['trainops_node']['network']['ifname'] == 'eth1'
    assert result['torch']['version'] == '2.13.0'


def test_problems_fail_the_module_listing_all_of_them(tmp_path):
    kind, result = run(dict(master_addr='10.77.0.11', python='python3', socket_ifname='ens5',
                            workspace_dir=str(tmp_path), script='train.py'),
                       torch=dict(TORCH, version=None, error="No module named 'torch'"))
    assert kind == 'FailJson'
    assert len(result['problems']) == 3
    assert result['msg'] == ' | '.join(result['problems'])
    assert "'ens5' does not exist" in result['msg'] and 'train.py does not exist' in result['msg']


def test_problems_are_only_returned_when_asked(tmp_path):
    kind, result = run(dict(master_addr='10.77.0.11', python='python3', socket_ifname='ens5', fail_on_problems=False))
    assert kind == 'ExitJson' and len(result['problems']) == 1
