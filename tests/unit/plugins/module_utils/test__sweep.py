# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Sweeps: the grid, its validation through launch_problems, sweep.json, the results table and the plots."""

from __future__ import annotations

import csv
import json
import os

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _sweep, _sweep_results

PNG_MAGIC = b'\x89PNG\r\n\x1a\n'


@pytest.fixture
def params(tmp_path):
    (tmp_path / 'config').mkdir()
    (tmp_path / 'train.py').write_text('')
    (tmp_path / 'config' / 'default.yaml').write_text('')
    (tmp_path / 'config' / 'tiny.yaml').write_text('')
    return {
        'channels': None, 'min_channels': None, 'threads': None, 'nproc_per_node': 2, 'master_port': 29500,
        'max_restarts': 0, 'rdzv_timeout': 300, 'collective_timeout': 300, 'rdzv_backend': 'static',
        'runtime': 'host', 'git_check': 'auto', 'git_reference': 'controller', 'allow_dirty': False,
        'gpu_vendor': 'auto', 'run_name': 'multinode', 'wait': True, 'replace': False, 'script': 'train.py',
        'config': 'config/default.yaml', 'overrides': ['training.epochs=1'], 'env': {'NCCL_DEBUG': 'INFO'},
        'secret_env': {}, 'node_id': '', 'script_args': [], 'command_prefix': [], 'training_network': '',
        'workspace_src': str(tmp_path), 'sync_workspace': True, 'pass_config_args': True, 'wait_timeout': 0,
        'unreachable_grace': 300, 'stall_timeout': 900, 'profile': '', 'profile_ranks': 'first',
        'profile_stats': False, 'profile_args': [],
    }


def test_grid_is_the_product_in_the_given_order_first_knob_slowest():
    points = _sweep.sweep_grid({'channels': [28, 42], 'threads': [256, 512]})
    assert points == [{'channels': 28, 'threads': 256}, {'channels': 28, 'threads': 512},
                      {'channels': 42, 'threads': 256}, {'channels': 42, 'threads': 512}]
    assert _sweep.point_label(points[2]) == 'channels=42 threads=256'


def test_points_carry_the_launch_values_they_run_with(params):
    result = _sweep.sweep_points(params, {'channels': [28], 'env.NCCL_ALGO': ['Ring', 'Tree'],
                                          'override.training.epochs': [2]})
    assert result['problems'] == []
    first = result['points'][0]
    assert first['index'] == 1 and first['label'] == 'channels=28 env.NCCL_ALGO=Ring override.training.epochs=2'
    assert first['params']['channels'] == 28
    # env.NAME joins the inventory's environment; override.KEY replaces the same key's override
    assert first['params']['env'] == {'NCCL_DEBUG': 'INFO', 'NCCL_ALGO': 'Ring'}
    assert first['params']['overrides'] == ['training.epochs=2']
    assert result['points'][1]['params']['env']['NCCL_ALGO'] == 'Tree'
    assert params['env'] == {'NCCL_DEBUG': 'INFO'}, 'the base parameters are not changed'
    assert set(first['params']) == set(_sweep.POINT_KEYS)


@pytest.mark.parametrize('sweep, expected', [
    ({}, ['sweep={}: must be a mapping of knob to a list of values']),
    ([1, 2], ['sweep=[1, 2]: must be a mapping']),
    ({'chanels': [28]}, ['chanels: not a knob a sweep can vary; one of channels, min_channels, threads, nproc, config']),
    ({'threads': []}, ['threads=[]: the list of values is empty; give at least one value']),
    ({'threads': 256}, ['threads=256: must be a list of values']),
    ({'env.1BAD': ['x']}, ['env.1BAD: env. must be followed by a variable name']),
    ({'override.': [1]}, ['override.: override. must be followed by a config key']),
    ({'channels': [28, 28]}, ['channels: 28 given more than once']),
    ({'channels': [None]}, ['channels: null: each value must be a number or a string']),
])
def test_bad_sweeps_are_named(params, sweep, expected):
    problems = _sweep.sweep_problems(params, sweep)
    assert len(problems) == len(expected), problems
    for line, start in zip(problems, expected):
        assert line.startswith(start), (line, start)


def test_a_value_the_launch_rejects_is_named_with_its_point(params):
    problems = _sweep.sweep_problems(params, {'channels': [28, 0], 'threads': [256, 100]})
    assert problems == [
        'sweep point channels=28 threads=100: threads=100: threads per block (NCCL_NTHREADS / RCCL_THREADS_PER_BLOCK) '
        'must be unset or a multiple of 32 up to 1024; each node checks the values its library takes '
        '(e.g. -e threads=256)',
        'sweep point channels=0 threads=256: channels=0: the maximum NCCL/RCCL channels (NCCL_MAX_NCHANNELS) must be '
        'unset or an integer >= 1; each node checks it against its library\'s maximum (e.g. -e channels=32)',
    ]


def test_a_missing_config_and_a_knob_given_twice(params):
    problems = _sweep.sweep_problems(params, {'config': ['config/tiny.yaml', 'config/nope.yaml'], 'nproc': [1]},
                                     fixed=['nproc'])
    assert problems[0].startswith('nproc: given both on its own (-e nproc=...) and in the sweep')
    assert problems[1].startswith('sweep point config=config/nope.yaml nproc=1: config=config/nope.yaml: no such file')
    assert len(problems) == 2


def test_a_problem_of_the_base_parameters_is_not_repeated_per_point(params):
    params['master_port'] = 80  # validate.yml reports it once, for the launch
    assert _sweep.sweep_problems(params, {'channels': [28, 42]}) == []


def test_plan_record_finish_and_resume(tmp_path):
    sweep = {'channels': [28, 42], 'threads': [256]}
    path, record, resumed = _sweep.plan_sweep(str(tmp_path), 'nccl', sweep, 'train', now=0)
    assert not resumed and os.path.basename(path) .startswith('sweep_nccl_')
    assert [p['status'] for p in record['points']] == ['pending', 'pending']
    # a second sweep in the same second gets its own directory
    other = _sweep.plan_sweep(str(tmp_path), 'nccl', sweep, 'train', now=0)[0]
    assert other == path + '_2'

    _sweep.record_point(path, 1, {'status': 'running', 'experiment_dir': '/x/e1', 'outcome': 'running'})
    _sweep.record_point(path, 1, {'status': 'done', 'outcome': 'succeeded'})
    _sweep.record_point(path, 2, {'status': 'done', 'outcome': 'failed', 'outcome_detail': 'failed on node1'})
    done = _sweep.finish_sweep(path)
    assert done['outcome'] == 'failed' and done['failed_points'] == ['channels=42 threads=256']
    saved = json.load(open(os.path.join(path, 'sweep.json')))
    assert saved['points'][0]['started_at'] and saved['points'][0]['finished_at']
    assert not [f for f in os.listdir(path) if f.startswith('.')], 'no temporary file is left behind'

    again, record, resumed = _sweep.plan_sweep(str(tmp_path), 'nccl', sweep, 'train', sweep_dir=path)
    assert resumed and again == path and record['outcome'] == 'running'
    assert [p['outcome'] for p in record['points']] == ['succeeded', 'failed']
    assert len(record['runs']) == 2 and record['runs'][1]['resumed']

    with pytest.raises(_sweep.SweepError, match='holds a different sweep'):
        _sweep.plan_sweep(str(tmp_path), 'nccl', {'channels': [28]}, 'train', sweep_dir=path)
    with pytest.raises(_sweep.SweepError, match='cannot read the sweep record'):
        _sweep.plan_sweep(str(tmp_path), 'nccl', sweep, 'train', sweep_dir=str(tmp_path / 'nothing'))
    with pytest.raises(_sweep.SweepError, match='sweep_name=a b'):
        _sweep.plan_sweep(str(tmp_path), 'a b', sweep, 'train')


def test_stopped_sweep_outcome(tmp_path):
    path = _sweep.plan_sweep(str(tmp_path), 's', {'threads': [256, 512]}, 'train')[0]
    _sweep.record_point(path, 1, {'status': 'done', 'outcome': 'failed'})
    assert _sweep.finish_sweep(path, stopped=True)['outcome'] == 'stopped'


def _experiment(root, name, outcome, summary=None, bench=None):
    path = root / name
    (path / 'outputs' / 'node0').mkdir(parents=True)
    nodes = [{'host': 'node0', 'ranks': [0, 1]}, {'host': 'node1', 'ranks': [2, 3]}]
    (path / 'manifest.json').write_text(json.dumps({'outcome': outcome, 'summary': summary or {}, 'nodes': nodes}))
    if bench:
        # global rank 0 writes it, on the node of rank 0 (the collect keeps it in that node's outputs/<node>/)
        (path / 'outputs' / 'node0' / 'allreduce.json').write_text(json.dumps(bench))
    return str(path)


def _train_sweep(tmp_path):
    sweep = {'channels': [28, 42], 'env.NCCL_ALGO': ['Ring', 'Tree']}
    path, record = _sweep.plan_sweep(str(tmp_path / 'exp'), 's', sweep, 'train')[:2]
    figures = {1: (1000.0, 0.032), 2: (1100.5, 0.029), 3: (1500.25, 0.021)}
    for point in record['points']:
        index = point['index']
        if index in figures:
            exp = _experiment(tmp_path, 'e%d' % index, 'succeeded', {
                'throughput_samples_per_s': figures[index][0], 'mean_step_time_s': figures[index][1],
                'final_loss': 0.3, 'steps': 32})
            _sweep.record_point(path, index, {'status': 'done', 'outcome': 'succeeded', 'experiment_dir': exp})
        else:
            exp = _experiment(tmp_path, 'e%d' % index, 'failed')
            _sweep.record_point(path, index, {'status': 'done', 'outcome': 'failed', 'experiment_dir': exp,
                                              'outcome_detail': 'failed on node1 (node rank 1: exit code 1)'})
    return path, _sweep.finish_sweep(path)


def test_results_files_hold_each_points_figures(tmp_path):
    path, record = _train_sweep(tmp_path)
    columns, rows, benches = _sweep_results.write_results(path, record)
    assert columns == ['point', 'channels', 'env.NCCL_ALGO', 'outcome', 'throughput_samples_per_s',
                       'mean_step_time_s', 'final_loss', 'steps', 'settings', 'experiment', 'outcome_detail']
    assert benches == {}
    with open(os.path.join(path, 'results.csv')) as handle:
        table = list(csv.DictReader(handle))
    assert [r['throughput_samples_per_s'] for r in table] == ['1000.0', '1100.5', '1500.25', '']
    assert [r['outcome'] for r in table] == ['succeeded'] * 3 + ['failed']
    assert table[3]['env.NCCL_ALGO'] == 'Tree' and table[3]['experiment'] == 'e4'
    markdown = open(os.path.join(path, 'results.md')).read()
    assert '| 3 | 42 | Ring | succeeded | 1500.25 | 0.021 | 0.3 | 32 | not recorded | e3 |' in markdown
    assert '- point 4: failed on node1 (node rank 1: exit code 1)' in markdown
    lines = _sweep_results.render_table(columns, rows)
    assert lines[0].split() == ['point', 'channels', 'env.NCCL_ALGO', 'outcome', 'throughput_samples_per_s',
                                'mean_step_time_s', 'final_loss', 'steps']
    assert lines[4].split() == ['4', '42', 'Tree', 'failed']


def test_plots_for_each_knob_and_a_heatmap_for_two(tmp_path):
    path, record = _train_sweep(tmp_path)
    rows, benches = _sweep_results.write_results(path, record)[1:]
    written = _sweep_results.write_plots(path, record, rows, benches)
    assert written == ['plot_channels.png', 'plot_env.NCCL_ALGO.png', 'heatmap.png']
    for name in written:
        with open(os.path.join(path, name), 'rb') as handle:
            data = handle.read()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000, name


def test_allreduce_points_plot_bus_bandwidth_against_message_size(tmp_path):
    path, record = _sweep.plan_sweep(str(tmp_path / 'exp'), 's', {'env.NCCL_ALGO': ['Ring', 'Tree']}, 'allreduce')[:2]
    for point in record['points']:
        scale = point['index']
        bench = {'benchmark': 'all_reduce', 'avg_busbw_gbps': 1.5 * scale,
                 'results': [{'size': 1024 * 2 ** i, 'busbw_gbps': 0.5 * scale * (i + 1)} for i in range(4)]}
        exp = _experiment(tmp_path, 'b%d' % scale, 'succeeded', bench=bench)
        _sweep.record_point(path, scale, {'status': 'done', 'outcome': 'succeeded', 'experiment_dir': exp})
    record = _sweep.finish_sweep(path)
    columns, rows, benches = _sweep_results.write_results(path, record)
    assert [r['avg_busbw_gbps'] for r in rows] == [1.5, 3.0]
    assert [r['peak_busbw_gbps'] for r in rows] == [2.0, 4.0]
    assert 'throughput_samples_per_s' not in columns
    written = _sweep_results.write_plots(path, record, rows, benches)
    assert written == ['plot_env.NCCL_ALGO.png', 'busbw_vs_size.png']


def test_a_missing_matplotlib_is_named(monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith('matplotlib'):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, '__import__', no_matplotlib)
    with pytest.raises(_sweep.SweepError, match='matplotlib is not installed'):
        _sweep_results.import_pyplot()
