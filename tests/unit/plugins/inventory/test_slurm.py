# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trainops.multinode.slurm through Ansible's InventoryManager/DataLoader with Slurm allocation environments."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleError, AnsibleParserError
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader

from ansible_collections.trainops.multinode.plugins.inventory import slurm as slurm_plugin
from ansible_collections.trainops.multinode.plugins.module_utils._hostlist import HostlistError

pytestmark = pytest.mark.usefixtures('no_slurm_env')

SOURCE = 'plugin: trainops.multinode.slurm\n'


def own_vars(inventory, name):
    host = inventory.get_host(name)
    assert host is not None, name
    return {key: value for key, value in host.vars.items() if not key.startswith('inventory_')}


def members(inventory, group):
    return inventory.get_groups_dict().get(group)


def source(tmp_path, text=SOURCE, name='allocation.slurm.yml'):
    path = tmp_path / name
    path.write_text(text)
    return path


def setenv(monkeypatch, **values):
    for key, value in values.items():
        monkeypatch.setenv(key, value)


def test_sbatch_allocation_with_tasks_per_node(tmp_path, manager, monkeypatch):
    setenv(monkeypatch, SLURM_JOB_NODELIST='gpu-[01-02,07],cpu9', SLURM_JOB_NUM_NODES='4', SLURM_JOB_ID='4242',
           SLURM_TASKS_PER_NODE='2(x3),1')
    inventory = manager(source(tmp_path))
    assert members(inventory, 'trainops_nodes') == ['gpu-01', 'gpu-02', 'gpu-07', 'cpu9']
    assert own_vars(inventory, 'gpu-01') == {'trainops_master': True, 'trainops_node_rank': 0,
                                             'trainops_nproc_per_node': 2}
    assert own_vars(inventory, 'gpu-07') == {'trainops_node_rank': 2, 'trainops_nproc_per_node': 2}
    assert own_vars(inventory, 'cpu9') == {'trainops_node_rank': 3, 'trainops_nproc_per_node': 1}
    assert inventory.groups['trainops_nodes'].get_vars() == {
        'trainops_slurm_nodelist': 'gpu-[01-02,07],cpu9', 'trainops_slurm_job_id': '4242'}
    # no ansible_host: the allocation's host names are the addresses
    assert 'ansible_host' not in own_vars(inventory, 'gpu-02')


def test_gpus_per_node_from_the_request(tmp_path, manager, monkeypatch):
    setenv(monkeypatch, SLURM_JOB_NODELIST='node[001-003]-ib', SLURM_GPUS_PER_NODE='h100:8',
           SLURM_TASKS_PER_NODE='1(x3)')
    inventory = manager(source(tmp_path))
    assert members(inventory, 'trainops_nodes') == ['node001-ib', 'node002-ib', 'node003-ib']
    assert [own_vars(inventory, n)['trainops_nproc_per_node'] for n in members(inventory, 'trainops_nodes')] == [8] * 3


@pytest.mark.parametrize('env, nproc', [
    ({'SLURM_GPUS_PER_NODE': 'a100:4', 'SLURM_GPUS_ON_NODE': '2', 'SLURM_JOB_GPUS': '0', 'SLURM_TASKS_PER_NODE': '1(x2)'},
     4),
    ({'SLURM_GPUS_ON_NODE': '2', 'SLURM_JOB_GPUS': '0', 'SLURM_TASKS_PER_NODE': '1(x2)'}, 2),
    ({'SLURM_JOB_GPUS': '0,1,2', 'SLURM_TASKS_PER_NODE': '1(x2)'}, 3),
    ({'SLURM_GPUS_ON_NODE': '0', 'SLURM_TASKS_PER_NODE': '6(x2)'}, 6),   # CPU-only: tasks decide
    ({'SLURM_TASKS_PER_NODE': '8(x2)'}, 8),
])
def test_ranks_per_node_precedence(tmp_path, manager, monkeypatch, env, nproc):
    setenv(monkeypatch, SLURM_JOB_NODELIST='node[6-7]', **env)
    inventory = manager(source(tmp_path))
    assert [own_vars(inventory, n).get('trainops_nproc_per_node') for n in ('node6', 'node7')] == [nproc, nproc]


def test_gpus_per_node_option_wins(tmp_path, manager, monkeypatch):
    setenv(monkeypatch, SLURM_JOB_NODELIST='node[6-7]', SLURM_GPUS_PER_NODE='8')
    inventory = manager(source(tmp_path, SOURCE + 'gpus_per_node: 2\n'))
    assert [own_vars(inventory, n)['trainops_nproc_per_node'] for n in ('node6', 'node7')] == [2, 2]


def test_nothing_known_leaves_ranks_to_group_vars(tmp_path, manager, monkeypatch):
    setenv(monkeypatch, SLURM_NODELIST='node[6-7]')
    inventory = manager(source(tmp_path, SOURCE + 'vars:\n  trainops_nproc_per_node: 3\n'))
    assert 'trainops_nproc_per_node' not in own_vars(inventory, 'node6')
    assert inventory.groups['trainops_nodes'].get_vars()['trainops_nproc_per_node'] == 3


def test_nested_brackets_and_vars_group_and_compose(tmp_path, manager, monkeypatch):
    setenv(monkeypatch, SLURM_JOB_NODELIST='rack[1-2]-n[01-02]', SLURM_GPUS_ON_NODE='4')
    text = SOURCE + ('group: allocation\nvars:\n  ansible_user: train\n'
                     'compose:\n  ansible_host: inventory_hostname ~ \'-ib\'\n')
    inventory = manager(source(tmp_path, text))
    assert members(inventory, 'allocation') == ['rack1-n01', 'rack1-n02', 'rack2-n01', 'rack2-n02']
    assert 'trainops_nodes' not in inventory.groups
    assert own_vars(inventory, 'rack2-n01') == {'trainops_node_rank': 2, 'trainops_nproc_per_node': 4,
                                                'ansible_host': 'rack2-n01-ib'}
    assert inventory.groups['allocation'].get_vars()['ansible_user'] == 'train'


def test_nodelist_option_overrides_the_environment(tmp_path, manager, monkeypatch):
    # the option picks part of the allocation: the job's node count and task list do not apply to it
    setenv(monkeypatch, SLURM_JOB_NODELIST='gpu-[01-04]', SLURM_JOB_NUM_NODES='4', SLURM_TASKS_PER_NODE='8(x4)')
    inventory = manager(source(tmp_path, SOURCE + 'nodelist: gpu-[03-04]\n'))
    assert members(inventory, 'trainops_nodes') == ['gpu-03', 'gpu-04']
    assert own_vars(inventory, 'gpu-03') == {'trainops_master': True, 'trainops_node_rank': 0}


def test_outside_an_allocation_works_with_a_nodelist(tmp_path, manager):
    inventory = manager(source(tmp_path, SOURCE + 'nodelist: n[1-2]\ngpus_per_node: 1\n'))
    assert members(inventory, 'trainops_nodes') == ['n1', 'n2']
    assert 'trainops_slurm_job_id' not in inventory.groups['trainops_nodes'].get_vars()


def parse_error(plugin, path):
    with pytest.raises(AnsibleParserError) as err:
        plugin('trainops.multinode.slurm').parse(InventoryData(), DataLoader(), str(path))
    return str(err.value)


def test_not_inside_an_allocation(tmp_path, plugin):
    path = source(tmp_path)
    assert parse_error(plugin, path) == (
        '%s: not inside a Slurm allocation: neither SLURM_JOB_NODELIST nor SLURM_NODELIST is set, and the source '
        'sets no "nodelist"' % path)


@pytest.mark.parametrize('env, fragment', [
    ({'SLURM_JOB_NODELIST': 'gpu-[01-03]', 'SLURM_JOB_NUM_NODES': '4'},
     'SLURM_JOB_NODELIST=gpu-[01-03] expands to 3 nodes, but SLURM_JOB_NUM_NODES=4'),
    ({'SLURM_JOB_NODELIST': 'gpu-[01-02]', 'SLURM_TASKS_PER_NODE': '1(x3)'},
     'SLURM_TASKS_PER_NODE=1(x3) gives 3 counts for 2 nodes'),
    ({'SLURM_JOB_NODELIST': 'gpu-[01-02],gpu-01'}, 'names gpu-01 twice'),
    ({'SLURM_JOB_NODELIST': 'gpu-[02-01]'}, 'goes down'),
    ({'SLURM_JOB_NODELIST': 'gpu-[01-02]', 'SLURM_GPUS_PER_NODE': 'h100:lots'}, 'SLURM_GPUS_PER_NODE: invalid GPU count'),
])
def test_inconsistent_allocations_are_errors(tmp_path, plugin, monkeypatch, env, fragment):
    setenv(monkeypatch, **env)
    assert fragment in parse_error(plugin, source(tmp_path))


@pytest.mark.parametrize('name, wanted', [
    ('allocation.slurm.yml', True), ('x.slurm.yaml', True), ('slurm.yml', False), ('x.trainops_nodes.yml', False),
    ('node_ip_list.txt', False),
])
def test_verify_file(tmp_path, plugin, name, wanted):
    assert plugin('trainops.multinode.slurm').verify_file(str(source(tmp_path, SOURCE, name))) is wanted


def test_allocation_nodes_reports_its_sources():
    hosts, nproc, origin = slurm_plugin.allocation_nodes(
        {'SLURM_NODELIST': 'c[1-2]', 'SLURM_NNODES': '2', 'SLURM_JOB_GPUS': '0-3'})
    assert (hosts, nproc) == (['c1', 'c2'], [4, 4])
    assert origin == {'nodelist': 'SLURM_NODELIST', 'nproc': 'SLURM_JOB_GPUS', 'expression': 'c[1-2]'}


def test_allocation_nodes_rejects_names_that_are_not_hosts():
    with pytest.raises(HostlistError) as err:
        slurm_plugin.allocation_nodes({}, nodelist='{{lookup("pipe","id")}}')
    assert 'not a host name' in str(err.value)


# The environment of `salloc -N 2` on the lab's real Slurm 22.05 with lab-node01 and lab-node03 busy
# (hack/lab.py up --slurm; `env | grep ^SLURM_` inside the allocation, unchanged).
REAL_SALLOC_ENV = {
    'SLURM_CLUSTER_NAME': 'trainops-lab', 'SLURM_JOBID': '2', 'SLURM_JOB_ACCOUNT': 'root',
    'SLURM_JOB_CPUS_PER_NODE': '2(x2)', 'SLURM_JOB_ID': '2', 'SLURM_JOB_NAME': 'interactive',
    'SLURM_JOB_NODELIST': 'lab-node[02,04]', 'SLURM_JOB_NUM_NODES': '2', 'SLURM_JOB_PARTITION': 'lab',
    'SLURM_JOB_QOS': 'normal', 'SLURM_NNODES': '2', 'SLURM_NODELIST': 'lab-node[02,04]',
    'SLURM_NODE_ALIASES': '(null)', 'SLURM_SUBMIT_DIR': '/work/wtA', 'SLURM_SUBMIT_HOST': 'vm',
    'SLURM_TASKS_PER_NODE': '2(x2)',
}

# The shape of the source `hack/lab.py up --slurm` writes: addresses from maps, by node name.
LAB_SOURCE = '''plugin: trainops.multinode.slurm
vars:
  trainops_lab_ssh_addresses: {lab-node01: 10.77.0.11, lab-node02: 10.77.0.12, lab-node03: 10.77.0.13, lab-node04: 10.77.0.14}
  trainops_lab_addresses: {lab-node01: 10.77.0.11, lab-node02: 10.77.0.12, lab-node03: 10.77.0.13, lab-node04: 10.77.0.14}
compose:
  ansible_host: trainops_lab_ssh_addresses[inventory_hostname]
  trainops_master_addr: trainops_lab_addresses[inventory_hostname]
strict: true
'''


def test_a_real_non_contiguous_allocation_in_allocation_order(tmp_path, manager, monkeypatch):
    setenv(monkeypatch, **REAL_SALLOC_ENV)
    inventory = manager(source(tmp_path, LAB_SOURCE))
    assert members(inventory, 'trainops_nodes') == ['lab-node02', 'lab-node04']
    first, second = own_vars(inventory, 'lab-node02'), own_vars(inventory, 'lab-node04')
    assert (first['trainops_node_rank'], first['trainops_master'], first['trainops_nproc_per_node']) == (0, True, 2)
    assert (second['trainops_node_rank'], second['trainops_nproc_per_node']) == (1, 2)
    assert 'trainops_master' not in second
    # the master is the allocation's first node, not lab-node01
    assert (first['ansible_host'], first['trainops_master_addr']) == ('10.77.0.12', '10.77.0.12')
    assert second['ansible_host'] == '10.77.0.14'
    assert inventory.groups['trainops_nodes'].get_vars()['trainops_slurm_job_id'] == '2'


def test_a_real_allocation_outside_the_lab_map_is_an_error(tmp_path, plugin, monkeypatch):
    # strict compose: a node the source has no address for fails parsing instead of guessing one
    environ = dict(REAL_SALLOC_ENV)
    environ.update({'SLURM_JOB_NODELIST': 'lab-node[02,05]', 'SLURM_NODELIST': 'lab-node[02,05]'})
    setenv(monkeypatch, **environ)
    with pytest.raises(AnsibleError) as err:
        plugin('trainops.multinode.slurm').parse(InventoryData(), DataLoader(), str(source(tmp_path, LAB_SOURCE)))
    assert 'lab-node05' in str(err.value), err.value
