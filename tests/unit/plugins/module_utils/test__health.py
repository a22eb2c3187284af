# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The health check's logic: node checks on recorded node trees, the search's decisions, the verdict."""

from __future__ import annotations

import importlib.util
import os

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _health as health

_TREE = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures', 'node_facts', 'fixture_tree.py')
_SPEC = importlib.util.spec_from_file_location('node_facts_fixture_tree_health', _TREE)
fixture_tree = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(fixture_tree)


def tree(tmp_path, name):
    return fixture_tree.materialize(name, str(tmp_path / name))


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, 'w') as handle:
        handle.write(text + '\n')


def set_link(root, sysfs_dir, width, max_width=16, speed='32.0 GT/s PCIe', max_speed='32.0 GT/s PCIe'):
    """The link files the kernel writes for a PCIe device (drivers/pci/pci-sysfs.c), written through the tree's links."""
    write(root, os.path.join(sysfs_dir, 'current_link_width'), str(width))
    write(root, os.path.join(sysfs_dir, 'max_link_width'), str(max_width))
    write(root, os.path.join(sysfs_dir, 'current_link_speed'), speed)
    write(root, os.path.join(sysfs_dir, 'max_link_speed'), max_speed)


# ------------------------------------------------------------------------------------------------
# node checks
# ------------------------------------------------------------------------------------------------

def test_cpu_node_reports_none_and_is_healthy(tmp_path):
    facts = health.node_checks(tree(tmp_path, 'cpu_only'))
    assert facts == dict(gpus='none', rdma='none', problems=[], warnings=[])


def test_dgx_all_links_full_is_healthy(tmp_path):
    root = tree(tmp_path, 'dgx_h100_compute_storage')
    facts = health.node_checks(root)
    assert facts['gpus']['count'] == 8
    assert facts['rdma']['count'] == 12
    # the recorded tree has no link files: nothing to judge, nothing wrong; every port ACTIVE
    assert facts['problems'] == []
    for gpu in facts['gpus']['links']:
        set_link(root, 'sys/bus/pci/devices/' + gpu['pci_id'], 16)
    assert health.node_checks(root)['problems'] == []


def test_degraded_gpu_link_is_named(tmp_path):
    root = tree(tmp_path, 'dgx_h100_compute_storage')
    ids = health.node_checks(root)['gpus']['links']
    for gpu in ids:
        set_link(root, 'sys/bus/pci/devices/' + gpu['pci_id'], 16)
    set_link(root, 'sys/bus/pci/devices/0000:43:00.0', 8)
    facts = health.node_checks(root)
    assert facts['problems'] == ['GPU 0000:43:00.0 PCIe link x8 of x16']
    link = {'width': '8', 'max_width': '16', 'speed': '32.0 GT/s PCIe', 'max_speed': '32.0 GT/s PCIe'}
    assert {'pci_id': '0000:43:00.0', 'link': link} in facts['gpus']['links']


def test_idle_gpu_link_speed_is_a_warning_a_nic_one_a_problem(tmp_path):
    root = tree(tmp_path, 'dgx_h100_compute_storage')
    set_link(root, 'sys/bus/pci/devices/0000:1b:00.0', 16, speed='2.5 GT/s PCIe')
    set_link(root, 'sys/class/infiniband/mlx5_0/device', 16, speed='16.0 GT/s PCIe')
    facts = health.node_checks(root)
    assert facts['problems'] == ['mlx5_0 PCIe link 16.0 GT/s of 32.0 GT/s']
    assert facts['warnings'] == ['GPU 0000:1b:00.0 PCIe link 2.5 GT/s of 32.0 GT/s (an idle GPU lowers its link speed)']


def test_ports_down_are_named(tmp_path):
    facts = health.node_checks(tree(tmp_path, 'hca_ports_down'))
    assert facts['gpus']['count'] == 2
    assert [p for p in facts['problems'] if 'port' in p] == ['mlx5_0 port 1 DOWN (Disabled)', 'mlx5_1 port 1 DOWN (Disabled)']


def test_ignored_devices_are_left_out(tmp_path):
    facts = health.node_checks(tree(tmp_path, 'hca_ports_down'), ignore=['mlx5_0', 'mlx5_1'])
    assert facts['rdma'] == 'none'
    assert facts['problems'] == []


def test_error_counters_are_warnings(tmp_path):
    root = tree(tmp_path, 'h100_8gpu_mlx5_ib')
    write(root, 'sys/class/infiniband/mlx5_3/ports/1/counters/symbol_error', '17')
    write(root, 'sys/class/infiniband/mlx5_3/ports/1/counters/link_downed', '0')
    write(root, 'sys/class/infiniband/mlx5_3/ports/1/counters/port_rcv_packets', '123456')
    write(root, 'sys/class/infiniband/mlx5_3/ports/1/hw_counters/local_ack_timeout_err', '4')
    facts = health.node_checks(root)
    assert facts['problems'] == []
    assert facts['warnings'] == ['mlx5_3 port 1 error counters since boot: local_ack_timeout_err=4, symbol_error=17']
    port = facts['rdma']['devices'][3]['ports'][0]
    assert port['errors'] == {'symbol_error': 17, 'local_ack_timeout_err': 4}


# ------------------------------------------------------------------------------------------------
# the search
# ------------------------------------------------------------------------------------------------

def run_search(nodes, speed, min_busbw=None, fails=(), **kwargs):
    """Drive next_step to the end; a group's busbw is the slowest of its nodes' ``speed`` (a slow node slows every
    group it is in), a group with a node of ``fails`` fails. Returns (the groups measured, the final answer)."""
    measured = []
    while True:
        answer = health.next_step(nodes, measured, min_busbw=min_busbw, **kwargs)
        if answer['done']:
            return [m['nodes'] for m in measured], answer
        group = answer['group']
        assert len(measured) < health.max_steps(len(nodes), kwargs.get('all_pairs_max', 8))
        if any(n in fails for n in group):
            measured.append(dict(nodes=group, ok=False, busbw_gbps=None, error='failed'))
        else:
            measured.append(dict(nodes=group, ok=True, busbw_gbps=min(speed.get(n, 10.0) for n in group)))


def test_two_healthy_nodes_one_measurement():
    groups, answer = run_search(['a', 'b'], {})
    assert groups == [['a', 'b']]
    assert answer['suspects'] == []


def test_floor_met_ends_the_search_after_all_nodes():
    groups, answer = run_search(['n%d' % i for i in range(6)], {}, min_busbw=5.0)
    assert len(groups) == 1
    assert answer['suspects'] == []


def test_without_floor_a_slow_node_is_found_by_halves():
    nodes = ['n0', 'n1', 'n2', 'n3']
    groups, answer = run_search(nodes, {'n2': 0.5})
    # all nodes, the halves, n2 and n3 each with n0 of the good half, n2 again
    assert groups == [nodes, ['n0', 'n1'], ['n2', 'n3'], ['n0', 'n2'], ['n0', 'n3'], ['n0', 'n2']]
    assert answer['suspects'] == [dict(node='n2', reason='0.5 GB/s with n0, under 0.5 x the best 10 GB/s, again when re-measured')]


def test_without_floor_a_healthy_cluster_costs_three_measurements_not_every_pair():
    nodes = ['n%d' % i for i in range(8)]
    groups, answer = run_search(nodes, {})
    assert groups == [nodes, nodes[:4], nodes[4:]] and answer['suspects'] == []


def test_a_failed_all_reduce_of_all_nodes_measures_every_pair():
    nodes = ['n0', 'n1', 'n2', 'n3']
    groups, answer = run_search(nodes, {}, fails=('n1', ))
    assert len(groups) == 1 + 6 and answer['suspects'] == [dict(node='n1', reason='3 of its 3 pair(s) failed')]


@pytest.mark.parametrize('count', range(1, 13))
def test_the_search_never_measures_more_than_max_steps(count):
    nodes = ['n%d' % i for i in range(count)]
    patterns = [({}, ()), ({nodes[-1]: 0.5}, ()), ({}, (nodes[0], )), ({nodes[0]: 0.5, nodes[-1]: 0.2}, ()),
                ({}, tuple(nodes[::2]))]
    for speed, fails in patterns:
        for floor in (None, 5.0):
            run_search(nodes, speed, min_busbw=floor, fails=fails)  # asserts the bound on every step


def test_three_nodes_one_slow_uses_the_best_pair():
    groups, answer = run_search(['a', 'b', 'c'], {'c': 1.0})
    assert [s['node'] for s in answer['suspects']] == ['c']


def test_one_slow_link_names_the_pair():
    nodes = ['a', 'b', 'c', 'd']
    measured = [dict(nodes=nodes, ok=True, busbw_gbps=1.0)]
    pairs = [('a', 'b'), ('a', 'c'), ('a', 'd'), ('b', 'c'), ('b', 'd'), ('c', 'd')]
    for pair in pairs:
        measured.append(dict(nodes=list(pair), ok=True, busbw_gbps=0.5 if pair == ('b', 'd') else 10.0))
    answer = health.next_step(nodes, measured, min_busbw=5.0)
    assert answer['group'] == ['b', 'd'] and not answer['done']  # measured again before it is named
    measured.append(dict(nodes=['b', 'd'], ok=True, busbw_gbps=0.7))
    answer = health.next_step(nodes, measured, min_busbw=5.0)
    assert answer['done']
    assert answer['suspects'] == [dict(node='b<->d', reason='the pair slow: 0.7 GB/s below trainops_health_min_busbw 5, '
                                                            'again when re-measured')]


@pytest.mark.parametrize('first', [dict(ok=True, busbw_gbps=0.5), dict(ok=False, busbw_gbps=None, error='timeout')])
def test_a_slow_or_failed_pair_that_is_fine_when_re_measured_is_not_named(first):
    nodes = ['a', 'b', 'c', 'd']
    measured = [dict(nodes=nodes, ok=True, busbw_gbps=1.0)]
    for pair in [('a', 'b'), ('a', 'c'), ('a', 'd'), ('b', 'c'), ('b', 'd'), ('c', 'd')]:
        measured.append(dict(first, nodes=list(pair)) if pair == ('b', 'd') else dict(nodes=list(pair), ok=True, busbw_gbps=10.0))
    assert health.next_step(nodes, measured, min_busbw=5.0)['group'] == ['b', 'd']
    measured.append(dict(nodes=['b', 'd'], ok=True, busbw_gbps=9.0))
    answer = health.next_step(nodes, measured, min_busbw=5.0)
    assert answer['done'] and answer['suspects'] == [dict(node='all nodes', reason='the all-reduce of all 4 nodes was slow, '
                                                                                   'every group measured alone was fine')]


def test_two_nodes_measured_again_when_their_all_reduce_failed():
    nodes = ['a', 'b']
    measured = [dict(nodes=nodes, ok=False, busbw_gbps=None, error='node b: exit 1')]
    assert health.next_step(nodes, measured)['group'] == nodes
    measured.append(dict(nodes=['b', 'a'], ok=True, busbw_gbps=3.0))
    answer = health.next_step(nodes, measured)
    assert answer['done'] and answer['suspects'][0]['node'] == 'all nodes'
    assert len(measured) <= health.max_steps(2)


def test_re_measures_are_bounded_by_half_the_nodes():
    # 4 nodes, 3 links bad (no node in more bad pairs than another): 2 re-measures, the third link named as measured
    nodes = ['a', 'b', 'c', 'd']
    slow = [('a', 'b'), ('c', 'd'), ('a', 'c')]
    measured = [dict(nodes=nodes, ok=True, busbw_gbps=1.0)]
    measured += [dict(nodes=list(p), ok=True, busbw_gbps=0.5 if p in slow else 10.0)
                 for p in [('a', 'b'), ('a', 'c'), ('a', 'd'), ('b', 'c'), ('b', 'd'), ('c', 'd')]]
    while True:
        answer = health.next_step(nodes, measured, min_busbw=5.0)
        if answer['done']:
            break
        measured.append(dict(nodes=answer['group'], ok=True, busbw_gbps=0.5))
    assert len(measured) == 1 + 6 + 2 <= health.max_steps(4)
    assert [s['reason'].endswith('again when re-measured') for s in answer['suspects']] == [True, True, False]


def test_failed_node_among_pairs():
    _groups, answer = run_search(['a', 'b', 'c', 'd', 'e'], {}, fails=('d',), min_busbw=1.0)
    assert [s['node'] for s in answer['suspects']] == ['d']
    assert 'failed' in answer['suspects'][0]['reason']


def test_two_nodes_below_floor_name_the_pair():
    _groups, answer = run_search(['a', 'b'], {'b': 0.1}, min_busbw=1.0)
    assert [s['node'] for s in answer['suspects']] == ['a<->b']


@pytest.mark.parametrize('bad', ['n0', 'n5', 'n11', 'n15'])
def test_bisection_on_16_nodes_finds_the_slow_node(bad):
    nodes = ['n%d' % i for i in range(16)]
    groups, answer = run_search(nodes, {bad: 0.5})
    assert [s['node'] for s in answer['suspects']] == [bad]
    # halves of 8, 4, 2 (both halves each level) then the 2 nodes with a good reference: far fewer than 120 pairs
    # and the slow one measured again with its reference before it is named
    assert len(groups) == 1 + 2 + 2 + 2 + 2 + 1 and groups[-1] == groups[-2 if bad in groups[-2] else -3]
    assert [len(g) for g in groups[:7]] == [16, 8, 8, 4, 4, 2, 2]
    assert answer['suspects'][0]['reason'].endswith('again when re-measured')


def test_bisection_decisions_from_measured_times():
    """The halves' decision alone: the slow half is searched, the good half gives the reference node."""
    nodes = ['n%d' % i for i in range(16)]
    measured = [dict(nodes=nodes, ok=True, busbw_gbps=1.0)]
    answer = health.next_step(nodes, measured)
    assert answer['group'] == nodes[:8]
    measured.append(dict(nodes=nodes[:8], ok=True, busbw_gbps=10.0))
    assert health.next_step(nodes, measured)['group'] == nodes[8:]
    measured.append(dict(nodes=nodes[8:], ok=True, busbw_gbps=4.0))  # under 0.5 x 10: the second half is searched
    assert health.next_step(nodes, measured)['group'] == nodes[8:12]
    measured[-1]['busbw_gbps'] = 6.0  # not under 0.5 x 10: nothing stands out, healthy
    answer = health.next_step(nodes, measured)
    assert answer['done'] and answer['suspects'] == []


def test_bisection_with_a_floor_and_slow_between_halves():
    nodes = ['n%d' % i for i in range(10)]
    measured = [dict(nodes=nodes, ok=True, busbw_gbps=1.0), dict(nodes=nodes[:5], ok=True, busbw_gbps=10.0),
                dict(nodes=nodes[5:], ok=True, busbw_gbps=10.0)]
    answer = health.next_step(nodes, measured, min_busbw=5.0)
    assert answer['done']
    assert answer['suspects'][0]['node'] == 'all nodes'


def test_single_node():
    _groups, answer = run_search(['solo'], {}, fails=('solo',))
    assert [s['node'] for s in answer['suspects']] == ['solo']


@pytest.mark.parametrize('kwargs, message', [
    (dict(nodes=[]), 'non-empty list'),
    (dict(nodes=['a', 'a']), 'must not repeat'),
    (dict(min_busbw=0), 'trainops_health_min_busbw'),
    (dict(min_busbw='fast'), 'trainops_health_min_busbw'),
    (dict(slow_ratio=1.5), 'trainops_health_slow_ratio'),
    (dict(all_pairs_max=1), 'trainops_health_all_pairs_max'),
])
def test_bad_settings_name_the_value(kwargs, message):
    args = dict(nodes=['a', 'b'], measured=[])
    args.update(kwargs)
    with pytest.raises(health.HealthError, match=message):
        health.next_step(**args)


def test_max_steps_bounds():
    assert health.max_steps(1) == 1
    assert health.max_steps(2) == 2
    assert health.max_steps(3) == 5
    assert health.max_steps(8) == 33
    assert health.max_steps(16) > 9


# ------------------------------------------------------------------------------------------------
# the report and the verdict
# ------------------------------------------------------------------------------------------------

def test_report_healthy_tables():
    measured = [dict(nodes=['a', 'b'], ok=True, busbw_gbps=1.25, time_us=800.0, experiment_dir='/x')]
    facts = dict(a=dict(gpus='none', rdma='none', problems=[], warnings=[]),
                 b=dict(gpus='none', rdma='none', problems=[], warnings=[]))
    result = health.report(['a', 'b'], facts, measured, health.next_step(['a', 'b'], measured))
    assert result['verdict'] == 'healthy'
    assert result['healthy']
    assert result['lines'][0] == 'Nodes:'
    assert result['lines'][2].split() == ['a', 'none', 'none', 'ok', '-']
    assert 'a,b' in result['lines'][7] and '1.250' in result['lines'][7] and result['lines'][7].endswith('ok')
    assert result['lines'][-1] == 'verdict: healthy'


def test_report_names_the_node_with_a_problem_and_the_slow_pair():
    nodes = ['a', 'b']
    measured = [dict(nodes=nodes, ok=True, busbw_gbps=0.1, time_us=10.0), dict(nodes=nodes, ok=True, busbw_gbps=0.2)]
    facts = dict(a=dict(gpus='none', rdma='none', problems=[], warnings=[]),
                 b=dict(gpus=dict(vendor='nvidia', count=8, links=[]), rdma='none',
                        problems=['GPU 0000:43:00.0 PCIe link x8 of x16'], warnings=[]))
    result = health.report(nodes, facts, measured, health.next_step(nodes, measured, min_busbw=1.0), min_busbw=1.0)
    assert result['verdict'] == ('suspect: b (GPU 0000:43:00.0 PCIe link x8 of x16); '
                                 'a<->b (the pair slow: 0.2 GB/s below trainops_health_min_busbw 1, again when re-measured)')
    assert [g['status'] for g in result['groups']] == ['slow', 'slow']


def test_report_node_without_facts_is_suspect():
    result = health.report(['a'], {}, [], dict(done=True, suspects=[]))
    assert result['verdict'] == 'suspect: a (its facts could not be read)'


def test_measurement_from_manifest_and_results():
    results = dict(avg_busbw_gbps=2.5, wrong_total=0, results=[dict(time_us=100.0), dict(time_us=400.0)])
    entry = health.measurement(['a', 'b'], dict(outcome='succeeded'), results, '/e')
    assert entry == dict(nodes=['a', 'b'], ok=True, busbw_gbps=2.5, time_us=400.0, experiment_dir='/e', error=None)
    failed = health.measurement(['a', 'b'], dict(outcome='failed', outcome_detail='node b: exit 1'), None)
    assert not failed['ok'] and failed['error'] == 'failed: node b: exit 1'
    wrong = health.measurement(['a', 'b'], dict(outcome='succeeded'), dict(results, wrong_total=3))
    assert not wrong['ok'] and wrong['error'] == '3 wrong element(s)'


def test_report_of_three_nodes_with_a_slow_one_marks_its_pairs_and_names_it():
    # what the lab measured with lab-node03 at 15 % of a CPU: the all-nodes row (3 nodes) is no pair; the two pairs
    # with c are slow relative to the good pair, and c is the suspect
    nodes = ['a', 'b', 'c']
    measured = [dict(nodes=nodes, ok=True, busbw_gbps=0.05, time_us=9000.0),
                dict(nodes=['a', 'b'], ok=True, busbw_gbps=0.9, time_us=500.0),
                dict(nodes=['a', 'c'], ok=True, busbw_gbps=0.08, time_us=6000.0),
                dict(nodes=['b', 'c'], ok=True, busbw_gbps=0.07, time_us=7000.0)]
    facts = dict((node, dict(gpus='none', rdma='none', problems=[], warnings=[])) for node in nodes)
    search = health.next_step(nodes, measured)
    assert search['done']
    result = health.report(nodes, facts, measured, search)
    assert [s['node'] for s in result['suspects']] == ['c'] and result['verdict'].startswith('suspect: c (2 of its 2 pair')
    assert [(g['nodes'], g['status']) for g in result['groups']] == [
        (nodes, 'ok'), (['a', 'b'], 'ok'), (['a', 'c'], 'slow'), (['b', 'c'], 'slow')]
    assert any(line.split()[:1] == ['b,c'] and line.endswith('slow') for line in result['lines'])


def test_measurement_takes_only_finite_numbers_from_the_nodes_file():
    bad = dict(avg_busbw_gbps='fast', wrong_total=0, results=['x'])
    entry = health.measurement(['a', 'b'], dict(outcome='succeeded'), bad)
    assert not entry['ok'] and entry['busbw_gbps'] is None and entry['time_us'] is None
    assert entry['error'] == 'no bus bandwidth in allreduce.json'
    nan = health.measurement(['a', 'b'], dict(outcome='succeeded'), dict(avg_busbw_gbps=float('nan'), results=[]))
    assert not nan['ok']


def test_report_rows_of_a_pair_measured_again_each_say_how_that_measurement_was_judged():
    nodes = ['a', 'b', 'c']
    measured = [dict(nodes=nodes, ok=True, busbw_gbps=0.05), dict(nodes=['a', 'b'], ok=True, busbw_gbps=0.9),
                dict(nodes=['a', 'c'], ok=True, busbw_gbps=0.9), dict(nodes=['b', 'c'], ok=False, error='timeout'),
                dict(nodes=['b', 'c'], ok=True, busbw_gbps=0.8)]
    facts = dict((node, dict(gpus='none', rdma='none', problems=[], warnings=[])) for node in nodes)
    search = health.next_step(nodes, measured)
    result = health.report(nodes, facts, measured, search)
    assert [g['status'] for g in result['groups']] == ['ok', 'ok', 'ok', 'failed', 'ok']
    assert search['done'] and result['verdict'] == 'healthy'


def test_two_equally_slow_nodes_in_different_halves_need_a_floor():
    # what docs/health.md says of the bisection without a floor
    nodes = ['n%d' % i for i in range(8)]
    assert run_search(nodes, {'n0': 0.5, 'n7': 0.5})[1]['suspects'] == []
    found = run_search(nodes, {'n0': 0.5, 'n7': 0.5}, min_busbw=5.0)[1]['suspects']
    assert [s['node'] for s in found] == ['n0', 'n7']
