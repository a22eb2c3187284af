# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The launch's filters (roles/job/tasks: manifest, start, start_srun, launch_failed): registered under their names,
their argument checks, and called by FQCN from a template over a real inventory's hostvars, as the task files call
them; the checks step of the action launch_plan over the same hostvars."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleError, AnsibleFilterError
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

from ansible_collections.trainops.multinode.plugins.filter.launch_state import (
    FilterModule,
    not_started,
)
from ansible_collections.trainops.multinode.plugins.module_utils import _launch_plan


def test_registered():
    assert sorted(FilterModule().filters()) == [
        'health_gate', 'host_facts', 'launch_entry', 'node_records', 'not_started', 'resume_checkpoint', 'spare_pool',
        'step_nodes']


def test_argument_checks():
    with pytest.raises(AnsibleFilterError, match="health_gate: the input must be the health check's report"):
        FilterModule().filters()['health_gate']('suspect: n1', ['n0', 'n1'])
    with pytest.raises(AnsibleFilterError, match='launcher must be ssh or srun'):
        not_started(['a'], {}, ['a'], launcher='pdsh')


@pytest.fixture
def inventory(tmp_path, collection_finder):
    (tmp_path / 'hosts.yml').write_text(
        'trainops_nodes:\n'
        '  hosts:\n'
        '    node0:\n'
        '      trainops_nproc_per_node: 2\n'
        '      __trainops_start_error: ""\n'
        '      __trainops_launch_error: ""\n'
        '      __trainops_preflight: {torch: {version: 2.5.1}, paths: {state_dir: /s/node0}, host: {hostname: h0}}\n'
        '      __trainops_nccl: {vendor: nvidia, env: {NCCL_DEBUG: WARN}, transport: socket, link_layer: null,\n'
        '                        socket_ifname: lo, hcas: [], sources: {}}\n'
        '      __trainops_started: {job: {pid: 7, argv: [torchrun], status: running},\n'
        '                           step_command: {python: /p, supervisor: /s/node0/sup.py, job: /s/node0/job.json}}\n'
        '    node1:\n'
        '      trainops_nproc_per_node: 2\n'
        '      trainops_slurm_node_name: gpu-01\n'
        '      __trainops_start_error: "address in use"\n'
        '      __trainops_launch_error: "The job did not start on node1"\n'
        '      __trainops_preflight: {torch: {version: 2.4.0}, paths: {state_dir: /s/node1}}\n'
        '      __trainops_nccl: {vendor: nvidia, env: {}, transport: socket, link_layer: null, socket_ifname: lo,\n'
        '                        hcas: [], sources: {}}\n'
        '      __trainops_started: {job: {status: prepared}, msg: "", step_command: {python: /p}}\n')
    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(tmp_path / 'hosts.yml')])
    manager_vars = VariableManager(loader=loader, inventory=manager)
    HostVars(inventory=manager, variable_manager=manager_vars, loader=loader)   # as a play run sets it up
    nodes = ['node0', 'node1']
    variables = dict(manager_vars.get_vars(host=manager.get_host('node0')), nodes=nodes, ansible_play_hosts=nodes)
    return Templar(loader=loader, variables=variables)


def render(templar, expression):
    return templar.template(trust_as_template(expression))


def test_fqcn_filters_over_real_hostvars(inventory):
    records = render(inventory, "{{ nodes | trainops.multinode.node_records(hostvars, {'node0': 0, 'node1': 1}, 'r1') }}")
    assert [(r['host'], r['ranks'], r['pid'], r['run_dir']) for r in records] == [
        ('node0', [0, 1], 7, '/s/node0/runs/r1'), ('node1', [2, 3], None, '/s/node1/runs/r1')]
    assert records[0]['env'] == {'NCCL_DEBUG': 'WARN'} and records[1]['hostname'] is None
    assert render(inventory, "{{ nodes | trainops.multinode.not_started(hostvars, ansible_play_hosts) }}") == {
        'node1': 'address in use'}
    assert render(inventory, "{{ nodes | trainops.multinode.not_started(hostvars, ['node1'], 'srun') }}") == {
        'node0': 'could not be reached', 'node1': 'not started'}
    assert render(inventory, "{{ nodes | trainops.multinode.step_nodes(hostvars) }}") == [
        {'python': '/p', 'supervisor': '/s/node0/sup.py', 'job': '/s/node0/job.json', 'name': 'node0', 'rank': 0},
        {'python': '/p', 'name': 'gpu-01', 'rank': 1}]
    assert render(inventory, "{{ nodes | trainops.multinode.host_facts(hostvars, '__trainops_launch_error') }}") == {
        'node1': 'The job did not start on node1'}
    # the launch plan's checks step over the same hostvars (roles/job/tasks/checks.yml)
    variables = dict(ansible_play_hosts=['node0', 'node1'], __trainops_order={'nodes': ['node0', 'node1']},
                     trainops_git_check='no', trainops_sync_workspace='yes', trainops_git_reference='controller',
                     trainops_allow_dirty=False, trainops_profile='', trainops_check_reachability=True, trainops_replace=False)
    found = _launch_plan.checks(lambda var, default=KeyError: variables.get(var, default), inventory.available_variables['hostvars'])
    assert found['problems'] == ["Nodes run different torch versions ({'node0': '2.5.1', 'node1': '2.4.0'}); mixed versions "
                                 "hang or crash in collectives. Install the same torch on every node."]
    found = _launch_plan.checks(lambda var, default=KeyError: dict(variables, ansible_play_hosts=['node0']).get(var, default),
                                inventory.available_variables['hostvars'])
    assert found['problems'] == ['Not starting anything: node1 failed or could not be reached during the checks above. '
                                 'Fix that node, or leave it out of the inventory.']
    variables['ansible_play_hosts'] = variables['__trainops_order']['nodes'] = ['node0']
    table = _launch_plan.checks(lambda var, default=KeyError: variables.get(var, default), inventory.available_variables['hostvars'])
    assert [line.split()[0] for line in table['lines'] if line] == ['node', 'node0']


def test_fqcn_filter_error_reaches_the_template(inventory):
    with pytest.raises(AnsibleError, match='launcher must be ssh or srun'):
        render(inventory, "{{ nodes | trainops.multinode.not_started(hostvars, ansible_play_hosts, 'pdsh') }}")
