# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trainops.multinode.node_list through Ansible's InventoryManager/DataLoader on temporary node lists."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleError, AnsibleParserError
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible.vars.manager import VariableManager

NODE_LIST = """\
# master first
10.0.0.11 slots=8    # rack 1
10.0.0.12 slots=4

gpu-03.cluster.local
"""


def own_vars(inventory, name):
    host = inventory.get_host(name)
    assert host is not None, name
    return {key: value for key, value in host.vars.items() if not key.startswith('inventory_')}


def members(inventory, group):
    return inventory.get_groups_dict().get(group)


def write(path, text):
    path.write_text(text)
    return path


def test_node_ip_list_given_directly(tmp_path, manager):
    inventory = manager(write(tmp_path / 'node_ip_list.txt', NODE_LIST))
    assert members(inventory, 'trainops_nodes') == ['10.0.0.11', '10.0.0.12', 'gpu-03.cluster.local']
    assert members(inventory, 'ungrouped') == []
    assert own_vars(inventory, '10.0.0.11') == {
        'ansible_host': '10.0.0.11', 'trainops_master': True, 'trainops_node_rank': 0, 'trainops_nproc_per_node': 8}
    assert own_vars(inventory, '10.0.0.12') == {
        'ansible_host': '10.0.0.12', 'trainops_node_rank': 1, 'trainops_nproc_per_node': 4}
    assert own_vars(inventory, 'gpu-03.cluster.local') == {
        'ansible_host': 'gpu-03.cluster.local', 'trainops_node_rank': 2}


def test_file_order_is_kept_not_sorted(tmp_path, manager):
    inventory = manager(write(tmp_path / 'cluster.nodes', 'node9\nnode10\nnode1\n'))
    assert members(inventory, 'trainops_nodes') == ['node9', 'node10', 'node1']
    assert own_vars(inventory, 'node9')['trainops_master'] is True
    assert [own_vars(inventory, n)['trainops_node_rank'] for n in ('node9', 'node10', 'node1')] == [0, 1, 2]


def test_any_txt_that_is_a_node_list_is_taken(tmp_path, manager):
    inventory = manager(write(tmp_path / 'hosts.txt', 'gpu-a\ngpu-b slots=2\n'))
    assert members(inventory, 'trainops_nodes') == ['gpu-a', 'gpu-b']


def test_an_ini_inventory_given_with_it_stays_with_ini(tmp_path, manager):
    """Several sources: the node list goes to node_list, an INI file (also .txt) to ini, nothing is stolen."""
    write(tmp_path / 'node_ip_list.txt', '10.0.0.11\n10.0.0.12\n')
    write(tmp_path / 'extra.txt', '[monitoring]\nmon1 ansible_host=10.0.1.5\n')
    inventory = manager(tmp_path / 'node_ip_list.txt', tmp_path / 'extra.txt')
    assert members(inventory, 'trainops_nodes') == ['10.0.0.11', '10.0.0.12']
    assert members(inventory, 'monitoring') == ['mon1']
    assert own_vars(inventory, 'mon1') == {'ansible_host': '10.0.1.5'}


def test_inventory_directory_with_a_nodes_file_and_an_ini_file(tmp_path, manager):
    """In a directory source Ansible skips *.txt (inventory_ignore_extensions): there the list is a *.nodes file."""
    write(tmp_path / 'cluster.nodes', 'gpu-01 slots=8\ngpu-02 slots=8\n')
    write(tmp_path / 'hosts', '[monitoring]\nmon1\n')
    write(tmp_path / 'ignored.txt', 'gpu-99\n')
    inventory = manager(tmp_path)
    assert members(inventory, 'trainops_nodes') == ['gpu-01', 'gpu-02']
    assert members(inventory, 'monitoring') == ['mon1']
    assert inventory.get_host('gpu-99') is None


def test_group_vars_next_to_the_node_list_apply(tmp_path, manager):
    write(tmp_path / 'node_ip_list.txt', '10.0.0.11\n10.0.0.12 slots=4\n')
    (tmp_path / 'group_vars').mkdir()
    write(tmp_path / 'group_vars' / 'trainops_nodes.yml', 'ansible_user: train\ntrainops_nproc_per_node: 2\n')
    inventory = manager(tmp_path / 'node_ip_list.txt')
    variables = VariableManager(loader=DataLoader(), inventory=inventory)
    first = variables.get_vars(host=inventory.get_host('10.0.0.11'), include_hostvars=False)
    second = variables.get_vars(host=inventory.get_host('10.0.0.12'), include_hostvars=False)
    assert (first['ansible_user'], first['trainops_nproc_per_node']) == ('train', 2)
    # slots=N from the file is a host variable: it wins over the group's
    assert (second['ansible_user'], second['trainops_nproc_per_node']) == ('train', 4)


@pytest.mark.parametrize('name, text, wanted', [
    ('node_ip_list.txt', '10.0.0.1\n', True),
    ('node_ip_list.txt', 'not a node list ansible_user=x\n', True),   # by name: errors then name the line
    ('cluster.nodes', '10.0.0.1\n', True),
    ('hosts.txt', '10.0.0.1 slots=8\n# c\n', True),
    ('hosts.txt', '[gpus]\n10.0.0.1\n', False),
    ('requirements.txt', 'ansible-core>=2.17\n', False),
    ('empty.txt', '# nothing\n', False),
    ('hosts', '10.0.0.1\n', False),
    ('hosts.yml', 'all:\n  hosts:\n    a:\n', False),
    ('x.trainops_nodes.yml', 'plugin: trainops.multinode.node_list\n', True),
    ('x.trainops_nodes.yaml', 'plugin: trainops.multinode.node_list\n', True),
    ('x.slurm.yml', 'plugin: trainops.multinode.slurm\n', False),
])
def test_verify_file_is_conservative(tmp_path, plugin, name, text, wanted):
    path = write(tmp_path / name, text)
    assert plugin('trainops.multinode.node_list').verify_file(str(path)) is wanted


def test_verify_file_declines_directories_and_missing_files(tmp_path, plugin):
    node_list = plugin('trainops.multinode.node_list')
    (tmp_path / 'node_ip_list.txt').mkdir()
    assert node_list.verify_file(str(tmp_path / 'node_ip_list.txt')) is False
    assert node_list.verify_file(str(tmp_path / 'missing.nodes')) is False


def parse_error(plugin, path):
    with pytest.raises(AnsibleParserError) as err:
        plugin('trainops.multinode.node_list').parse(InventoryData(), DataLoader(), str(path))
    return str(err.value)


def test_duplicate_is_an_error_naming_the_lines(tmp_path, plugin):
    path = write(tmp_path / 'node_ip_list.txt', '10.0.0.11\n10.0.0.12\n10.0.0.11\n')
    message = parse_error(plugin, path)
    assert str(path) in message
    assert 'line 3: 10.0.0.11 is listed twice (first on line 1)' in message


def test_bad_line_is_an_error_naming_it(tmp_path, plugin):
    path = write(tmp_path / 'node_ip_list.txt', '10.0.0.11\n10.0.0.12 slots=eight\n')
    assert "line 2: unexpected 'slots=eight' after 10.0.0.12" in parse_error(plugin, path)


def test_empty_node_list_is_an_error(tmp_path, plugin):
    path = write(tmp_path / 'node_ip_list.txt', '# nodes go here, master first\n')
    assert parse_error(plugin, path) == 'node list %s: it lists no nodes (one address or host name a line, the master first)' % path


def test_a_broken_node_list_is_reported_even_when_ini_takes_the_file(tmp_path, manager, monkeypatch):
    """Ansible hides a plugin's error when a later plugin (ini) parses the file: the warning must not be hidden."""
    from ansible.utils.display import Display
    warnings = []
    monkeypatch.setattr(Display, 'warning', lambda self, msg, *args, **kwargs: warnings.append(msg))
    write(tmp_path / 'node_ip_list.txt', '10.0.0.11\n10.0.0.12\n10.0.0.11\n')
    inventory = manager(tmp_path / 'node_ip_list.txt')
    assert 'trainops_nodes' not in inventory.groups
    assert any('line 3: 10.0.0.11 is listed twice (first on line 1)' in msg
               and 'not used as a node list (group trainops_nodes)' in msg for msg in warnings), warnings


YAML_SOURCE = """\
plugin: trainops.multinode.node_list
path: lists/node_ip_list.txt
vars:
  ansible_user: train
  trainops_python: "{{ '/opt/' ~ 'venv/bin/python' }}"
  trainops_socket_ifname: ens5
compose:
  trainops_label: "'rank' ~ trainops_node_rank ~ '-' ~ ansible_user"
groups:
  big_nodes: (trainops_nproc_per_node | default(0)) >= 8
keyed_groups:
  - key: trainops_nproc_per_node | default('unset') | string
    prefix: gpus
"""


def yaml_source(tmp_path, text=YAML_SOURCE, name='cluster.trainops_nodes.yml'):
    (tmp_path / 'lists').mkdir(exist_ok=True)
    write(tmp_path / 'lists' / 'node_ip_list.txt', NODE_LIST)
    return write(tmp_path / name, text)


def test_yaml_source_path_is_relative_to_it_and_vars_go_on_the_group(tmp_path, manager):
    inventory = manager(yaml_source(tmp_path))
    assert members(inventory, 'trainops_nodes') == ['10.0.0.11', '10.0.0.12', 'gpu-03.cluster.local']
    group_vars = inventory.groups['trainops_nodes'].get_vars()
    assert group_vars['ansible_user'] == 'train'
    assert group_vars['trainops_socket_ifname'] == 'ens5'
    assert own_vars(inventory, '10.0.0.12')['trainops_nproc_per_node'] == 4


def test_yaml_source_constructed_features(tmp_path, manager):
    inventory = manager(yaml_source(tmp_path))
    assert [own_vars(inventory, n)['trainops_label'] for n in members(inventory, 'trainops_nodes')] == [
        'rank0-train', 'rank1-train', 'rank2-train']
    assert members(inventory, 'big_nodes') == ['10.0.0.11']
    assert members(inventory, 'gpus_8') == ['10.0.0.11']
    assert members(inventory, 'gpus_4') == ['10.0.0.12']
    assert members(inventory, 'gpus_unset') == ['gpu-03.cluster.local']


def test_yaml_vars_stay_templates_and_resolve_per_host(tmp_path, manager):
    inventory = manager(yaml_source(tmp_path))
    variables = VariableManager(loader=DataLoader(), inventory=inventory).get_vars(
        host=inventory.get_host('10.0.0.12'), include_hostvars=False)
    templar = Templar(loader=DataLoader(), variables=variables)
    assert templar.template(variables['trainops_python']) == '/opt/venv/bin/python'
    assert templar.template(variables['ansible_host']) == '10.0.0.12'


def test_yaml_source_other_group(tmp_path, manager):
    text = 'plugin: trainops.multinode.node_list\npath: lists/node_ip_list.txt\ngroup: gpu_cluster\n'
    inventory = manager(yaml_source(tmp_path, text))
    assert members(inventory, 'gpu_cluster') == ['10.0.0.11', '10.0.0.12', 'gpu-03.cluster.local']
    assert 'trainops_nodes' not in inventory.groups


def test_yaml_source_absolute_path(tmp_path, manager):
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    write(elsewhere / 'nodes.txt', 'a1\na2\n')
    source = write(tmp_path / 'c.trainops_nodes.yaml',
                   'plugin: trainops.multinode.node_list\npath: %s\n' % (elsewhere / 'nodes.txt'))
    assert members(manager(source), 'trainops_nodes') == ['a1', 'a2']


@pytest.mark.parametrize('text, fragment', [
    ('plugin: trainops.multinode.node_list\n', '"path" (the node list file) is required'),
    ('plugin: trainops.multinode.node_list\npath: nope.txt\n', 'cannot read node list'),
    ('plugin: trainops.multinode.node_list\npath: lists/node_ip_list.txt\ngroup: 9lives\n', 'not a valid group name'),
    ('plugin: trainops.multinode.node_list\npath: lists/node_ip_list.txt\nvars: [a, b]\n', "'vars'"),
])
def test_yaml_source_errors(tmp_path, plugin, text, fragment):
    path = yaml_source(tmp_path, text)
    with pytest.raises(AnsibleError) as err:
        plugin('trainops.multinode.node_list').parse(InventoryData(), DataLoader(), str(path))
    assert fragment in str(err.value)
