# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a launch reads of its nodes through hostvars (module_utils/_launch_records.py): the manifest's node
records, the nodes where the job does not run (ssh and srun), the Slurm step's nodes, a fact by host."""

from __future__ import annotations

from ansible_collections.trainops.multinode.plugins.module_utils._launch_records import (
    dig,
    host_facts,
    node_records,
    not_started,
    step_nodes,
    truncate,
)

NCCL = {'vendor': 'nvidia', 'env': {'NCCL_SOCKET_IFNAME': 'eth0'}, 'transport': 'socket', 'link_layer': None,
        'socket_ifname': 'eth0', 'hcas': [], 'sources': {'NCCL_SOCKET_IFNAME': 'interface'}}


def preflight(name, torch='2.5.1'):
    return {'host': {'hostname': name + '.lab'}, 'torch': {'version': torch, 'python': '3.11.9'},
            'paths': {'state_dir': '/n/%s/state' % name}}


def test_a_started_node_records_its_job_ranks_and_network():
    hv = {'node0': {'trainops_nproc_per_node': '2', '__trainops_preflight': preflight('node0'),
                    '__trainops_nccl': dict(NCCL, library={'version': '2.21.5'}, warning_messages=['slow']),
                    '__trainops_started': {'job': {'pid': 42, 'argv': ['torchrun'], 'env': {'A': '1'},
                                                   'secret_env_names': ['TOKEN', 'KEY'], 'env_file': '/r/env.sh'}}}}
    assert node_records(['node0'], hv, {'node0': '1'}, 'r1') == [{
        'host': 'node0', 'hostname': 'node0.lab', 'node_rank': 1, 'ranks': [2, 3], 'gpu_vendor': 'nvidia',
        'torch': '2.5.1', 'python': '3.11.9', 'run_dir': '/n/node0/state/runs/r1', 'pid': 42, 'argv': ['torchrun'],
        'env': {'A': '1'}, 'secret_env': {'TOKEN': '<redacted>', 'KEY': '<redacted>'}, 'state_dir': '/n/node0/state',
        'env_file': '/r/env.sh',
        'network': {'transport': 'socket', 'link_layer': None, 'socket_ifname': 'eth0', 'hcas': [],
                    'library': {'version': '2.21.5'}, 'sources': {'NCCL_SOCKET_IFNAME': 'interface'},
                    'warnings': ['slow']}}]


def test_a_node_without_a_job_records_the_computed_environment_and_no_pid():
    hv = {'a': {'__trainops_preflight': {'paths': {'state_dir': '/s'}}, '__trainops_nccl': NCCL}}
    record = node_records(['a'], hv, {'a': 0}, 'r1', nproc_per_node=4)[0]
    assert record['ranks'] == [0, 1, 2, 3] and record['pid'] is None and record['argv'] == []
    assert record['env'] == NCCL['env'] and record['secret_env'] == {} and record['env_file'] is None
    assert record['hostname'] is None and record['torch'] == '' and record['python'] == ''
    assert record['network']['library'] is None and record['network']['warnings'] == []


def test_records_follow_the_rank_order_given():
    hv = dict((h, {'__trainops_preflight': preflight(h), '__trainops_nccl': NCCL}) for h in ('a', 'b'))
    records = node_records(['b', 'a'], hv, {'b': 0, 'a': 1}, 'r')
    assert [(r['host'], r['node_rank'], r['ranks']) for r in records] == [('b', 0, [0]), ('a', 1, [1])]


def test_ssh_not_started_names_failed_and_unreachable_nodes_in_node_order():
    hv = {'a': {'__trainops_start_error': ''}, 'b': {'__trainops_start_error': 'port in use'}, 'c': {}, 'd': {}}
    assert not_started(['a', 'b', 'c', 'd'], hv, ['a', 'b', 'd']) == {
        'b': 'port in use', 'c': 'could not be reached during the start'}
    assert not_started(['a', 'b'], {}, ['b', 'a']) == {}


def test_srun_not_started_names_prepared_failed_and_unreachable_nodes():
    hv = {'a': {'__trainops_started': {'job': {'status': 'running'}}},
          'b': {'__trainops_started': {'job': {'status': 'prepared'}, 'msg': ''}},
          'c': {'__trainops_started': {'failed': True, 'msg': 'x ' * 200}},
          'd': {'__trainops_started': {'job': {'status': 'exited'}}},
          'e': {}}
    why = not_started(['a', 'b', 'c', 'd', 'e', 'f'], hv, ['a', 'b', 'c', 'd', 'e'], launcher='srun')
    assert list(why) == ['b', 'c', 'e', 'f']
    assert why['b'] == 'not started' and why['e'] == 'not started' and why['f'] == 'could not be reached'
    assert why['c'].endswith('...') and len(why['c']) <= 200


def test_truncate_is_jinjas():
    assert truncate('a' * 205, 200) == 'a' * 205
    assert truncate('word ' * 50, 200) == ('word ' * 39).rstrip() + '...'


def test_step_nodes_carry_the_prepared_command_rank_and_slurm_name():
    hv = {'n1': {'__trainops_started': {'step_command': {'python': '/p', 'supervisor': '/r/s.py', 'job': '/r/j.json'}}},
          'n2': {'__trainops_started': {'step_command': {'python': '/p', 'supervisor': '/q/s.py', 'job': '/q/j.json'}},
                 'trainops_slurm_node_name': 'gpu-02'}}
    assert step_nodes(['n1', 'n2'], hv) == [
        {'python': '/p', 'supervisor': '/r/s.py', 'job': '/r/j.json', 'name': 'n1', 'rank': 0},
        {'python': '/p', 'supervisor': '/q/s.py', 'job': '/q/j.json', 'name': 'gpu-02', 'rank': 1}]


def test_host_facts_keeps_the_hosts_where_the_fact_is_set_and_not_empty():
    hv = {'a': {'e': 'boom'}, 'b': {'e': ''}, 'c': {}, 'd': {'e': 'late'}}
    assert host_facts(['d', 'a', 'b', 'c', 'x'], hv, 'e') == {'d': 'late', 'a': 'boom'}
    assert list(host_facts(['d', 'a'], hv, 'e')) == ['d', 'a']


def test_dig():
    assert dig({'a': {'b': 1}}, 'a', 'b') == 1
    assert dig({'a': None}, 'a', 'b') is None and dig({'a': {}}, 'a', 'b', default='') == ''
    assert dig({'a': {'b': None}}, 'a', 'b', default='') is None
