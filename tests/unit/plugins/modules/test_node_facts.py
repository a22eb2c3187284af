# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node_facts module's main() on recorded node trees, with AnsibleModule's commands replaced."""

from __future__ import annotations

import importlib.util
import json
import os

from unittest.mock import patch

import yaml

from ansible.module_utils.testing import patch_module_args

from module_harness import ExitJson, FailJson

from ansible_collections.trainops.multinode.plugins.modules import node_facts as module

_TREE = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures', 'node_facts', 'fixture_tree.py')
_SPEC = importlib.util.spec_from_file_location('node_facts_fixture_tree', _TREE)
fixture_tree = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(fixture_tree)

LINKS = [{'ifname': 'lo', 'mtu': 65536, 'operstate': 'UNKNOWN',
          'addr_info': [{'family': 'inet', 'local': '127.0.0.1', 'prefixlen': 8}]},
         {'ifname': 'enp170s0f0np0', 'mtu': 9000, 'operstate': 'UP',
          'addr_info': [{'family': 'inet', 'local': '10.10.0.12', 'prefixlen': 24}]}]
ROUTE = [{'dst': '10.10.0.11', 'dev': 'enp170s0f0np0', 'prefsrc': '10.10.0.12'}]


class Machine:
    """What AnsibleModule.run_command / get_bin_path / warn see on the node (patched in as plain functions)."""

    def __init__(self, tools, outputs):
        self.tools = dict((name, '/usr/bin/' + name) for name in tools)
        self.outputs = outputs
        self.commands, self.lookups, self.warnings = [], [], []

    def run_command(self, args, **kwargs):
        self.commands.append((list(args), kwargs))
        key = tuple([os.path.basename(args[0])] + list(args[1:]))
        if key not in self.outputs:
            raise AssertionError('unexpected command {0}'.format(args))
        return self.outputs[key]

    def get_bin_path(self, name, required=False, opt_dirs=None):
        self.lookups.append((name, required, opt_dirs))
        return self.tools.get(name)

    def warn(self, warning):
        self.warnings.append(warning)


def run(args, machine, check_mode=False):
    if check_mode:
        args = dict(args, _ansible_check_mode=True)
    with patch_module_args(args), patch.object(module.AnsibleModule, 'run_command', machine.run_command), \
            patch.object(module.AnsibleModule, 'get_bin_path', machine.get_bin_path), \
            patch.object(module.AnsibleModule, 'warn', machine.warn):
        try:
            module.main()
        except ExitJson as exc:
            return 'exit', exc.args[0]
        except FailJson as exc:
            return 'fail', exc.args[0]
    raise AssertionError('module did not exit')


def ip_outputs():
    return {('ip', '-j', 'addr', 'show'): (0, json.dumps(LINKS), ''),
            ('ip', '-j', 'route', 'get', '10.10.0.11'): (0, json.dumps(ROUTE), '')}


def test_dgx_h100_facts_through_main(tmp_path):
    root = fixture_tree.materialize('h100_8gpu_mlx5_ib', tmp_path / 'node')
    topo = fixture_tree.command_output('h100_8gpu_mlx5_ib', 'nvidia-smi_topo_-m.txt')
    outputs = dict(ip_outputs())
    outputs[('timeout', '-k', '5', '30', '/usr/bin/nvidia-smi', 'topo', '-m')] = (0, topo, '')
    machine = Machine(['nvidia-smi', 'timeout'], outputs)
    kind, result = run(dict(master_addr='10.10.0.11', root=root), machine)
    assert kind == 'exit' and result['changed'] is False
    node = result['ansible_facts']['trainops_node']
    assert sorted(node) == ['gpu', 'library', 'network', 'pci', 'rdma']
    assert node['gpu'] == dict(vendor='nvidia', count=8, models=['NVIDIA H100 80GB HBM3'] * 8,
                               pci_ids=['0000:1b:00.0', '0000:43:00.0', '0000:52:00.0', '0000:61:00.0',
                                        '0000:9d:00.0', '0000:c3:00.0', '0000:d1:00.0', '0000:df:00.0'],
                               driver_version='535.161.08',
                               interconnect=dict(type='nvlink', source='nvidia-smi topo -m'),
                               sources=['procfs', 'nvidia-smi'])
    assert node['rdma']['transport'] == 'infiniband'
    assert node['rdma']['active_ports'] == ['mlx5_{0}:1'.format(i) for i in range(8)]
    assert node['rdma']['devices'][0]['ports'][0]['netdev'] == 'ibp24s0'
    assert node['rdma']['gpudirect']['available'] is True and node['rdma']['gpudirect']['nvidia_peermem'] is True
    assert (node['network']['ifname'], node['network']['address'], node['network']['mtu']) == \
        ('enp170s0f0np0', '10.10.0.12', 9000)
    # every command under LC_ALL=C, exceptions turned into results; tools looked up in /opt/rocm/bin too
    assert all(kw == dict(environ_update={'LC_ALL': 'C'}, handle_exceptions=False) for _a, kw in machine.commands)
    assert ('nvidia-smi', False, ['/opt/rocm/bin']) in machine.lookups
    assert machine.warnings == []


def test_mi300x_facts_through_main_run_no_vendor_tool(tmp_path):
    root = fixture_tree.materialize('mi300x_8gpu_bnxt_roce', tmp_path / 'node')
    machine = Machine(['amd-smi', 'rocm-smi'], ip_outputs())
    kind, result = run(dict(master_addr='10.10.0.11', root=root), machine, check_mode=True)
    assert kind == 'exit'
    node = result['ansible_facts']['trainops_node']
    assert (node['gpu']['vendor'], node['gpu']['count'], node['gpu']['interconnect']) == \
        ('amd', 8, dict(type='xgmi', source='kfd-topology'))
    assert node['rdma']['transport'] == 'roce'
    assert [p['roce_v2_gid_index'] for d in node['rdma']['devices'] for p in d['ports']] == [3] * 8
    assert [c[0][0] for c in machine.commands] == ['ip', 'ip']


def test_a_failing_tool_is_a_warning(tmp_path):
    root = fixture_tree.materialize('hca_ports_down', tmp_path / 'node')
    outputs = dict(ip_outputs())
    failure = (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", '')
    outputs[('nvidia-smi', 'topo', '-m')] = failure
    outputs[('nvidia-smi', 'nvlink', '-s')] = failure
    machine = Machine(['nvidia-smi'], outputs)
    kind, result = run(dict(master_addr='10.10.0.11', root=root), machine)
    assert kind == 'exit'
    node = result['ansible_facts']['trainops_node']
    assert node['gpu']['interconnect'] == dict(type='unknown', source=None)
    assert (node['rdma']['active_ports'], node['rdma']['transport']) == ([], 'none')
    assert len(machine.warnings) == 2
    assert machine.warnings[0].startswith("nvidia-smi topo -m failed (rc=9): NVIDIA-SMI has failed")


def test_cpu_only_without_any_tool(tmp_path):
    root = fixture_tree.materialize('cpu_only', tmp_path / 'node')
    machine = Machine([], ip_outputs())
    kind, result = run(dict(master_addr='10.10.0.11', root=root), machine)
    assert kind == 'exit'
    node = result['ansible_facts']['trainops_node']
    assert node['gpu']['vendor'] == 'none' and node['rdma']['transport'] == 'none'
    assert node['rdma']['devices'] == [] and machine.warnings == []


def test_network_errors_still_fail_the_module(tmp_path):
    root = fixture_tree.materialize('cpu_only', tmp_path / 'node')
    kind, result = run(dict(master_addr='gpu-01', root=root), Machine([], ip_outputs()))
    assert kind == 'fail' and 'not an IP address' in result['msg']


def test_documentation_lists_every_returned_key(tmp_path):
    """RETURN documents exactly the keys main() returns, down to the port level."""
    returned = yaml.safe_load(module.RETURN)['ansible_facts']['contains']['trainops_node']['contains']
    root = fixture_tree.materialize('h100_4gpu_sriov_roce', tmp_path / 'node')
    kind, result = run(dict(master_addr='10.10.0.11', root=root), Machine([], ip_outputs()))
    node = result['ansible_facts']['trainops_node']
    assert kind == 'exit'
    assert sorted(returned) == sorted(node)
    # every key returned is documented; keys documented as always returned are returned
    gpu_docs = returned['gpu']['contains']
    assert set(node['gpu']) <= set(gpu_docs)
    assert set(k for k, v in gpu_docs.items() if v['returned'] == 'always') == set(node['gpu'])
    assert sorted(returned['gpu']['contains']['interconnect']['contains']) == sorted(node['gpu']['interconnect'])
    rdma = returned['rdma']['contains']
    assert sorted(rdma) == sorted(node['rdma'])
    assert sorted(rdma['devices']['contains']) == sorted(node['rdma']['devices'][0])
    assert sorted(rdma['devices']['contains']['ports']['contains']) == sorted(node['rdma']['devices'][0]['ports'][0])
    assert sorted(rdma['gpudirect']['contains']) == sorted(node['rdma']['gpudirect'])
    assert sorted(returned['pci']['contains']) == sorted(node['pci'])
    from ansible_collections.trainops.multinode.plugins.doc_fragments._node_network import ModuleDocFragment
    documented_options = dict(yaml.safe_load(ModuleDocFragment.DOCUMENTATION)['options'])
    documented_options.update(yaml.safe_load(module.DOCUMENTATION).get('options') or {})
    assert sorted(documented_options) == ['check_ifname', 'container', 'container_engine', 'master_addr', 'python', 'root',
                                          'socket_ifname']
    assert 'trainops.multinode._node_network' in yaml.safe_load(module.DOCUMENTATION)['extends_documentation_fragment']
