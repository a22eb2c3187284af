# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmarks' arithmetic (docs/contributing/benchmarks.md): the scale estimate's fits and what it reads from the
benchmarks' JSON, the watch benchmark's CPU per node-minute and task log, the controller tree's process kinds."""
import importlib.machinery
import importlib.util
import json
import os
import shlex
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def load(rel, name):
    loader = importlib.machinery.SourceFileLoader(name, os.path.join(REPO, rel))
    spec = importlib.util.spec_from_loader(name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


scale = load('bench/scale_estimate', 'bench_scale_estimate')
watch_cost = load('bench/watch_cost', 'bench_watch_cost')
tree = sys.modules['_controller_tree']  # (bench/_controller_tree.py, imported by bench/launch_latency)


def test_a_line_through_exact_points_is_found():
    fixed, per_node = scale.linear_fit([(2, 1 + 2 * 0.5), (4, 1 + 4 * 0.5), (16, 1 + 16 * 0.5), (32, 1 + 32 * 0.5)])
    assert fixed == pytest.approx(1.0) and per_node == pytest.approx(0.5)
    assert scale.at((1.0, 0.5), 1024) == pytest.approx(513.0)


def test_noisy_points_get_the_least_squares_line():
    # y = 2x + 1 with +1/-1 noise at x = 0, 1, 2, 3: the line through the means, slope 1.6, intercept 1.6
    fixed, per_node = scale.linear_fit([(0, 2), (1, 2), (2, 6), (3, 6)])
    assert per_node == pytest.approx(1.6) and fixed == pytest.approx(1.6)


def test_a_parabola_through_exact_points_is_found_and_fewer_than_three_counts_give_a_line():
    a, b, c = scale.quadratic_fit([(n, 7 + 2 * n + 5 * n * n) for n in (2, 4, 16, 32)])
    assert (a, b, c) == (pytest.approx(7.0), pytest.approx(2.0), pytest.approx(5.0))
    assert scale.at((7.0, 2.0, 5.0), 1024) == pytest.approx(7 + 2048 + 5 * 1024 ** 2)
    assert scale.formula((7.0, 2.0, 5.0), 'fds', 1) == '7.0 + 2.0 x N + 5.0 x N^2 fds'
    assert scale.quadratic_fit([(4, 10.0), (8, 18.0)]) == (pytest.approx(2.0), pytest.approx(2.0), 0.0)
    assert scale.quadratic_fit([]) is None


def test_one_node_count_is_proportional_and_nothing_measured_is_no_fit():
    assert scale.linear_fit([(4, 2.0), (4, 4.0)]) == (0.0, pytest.approx(0.75))
    assert scale.linear_fit([(4, None), (16, None)]) is None
    assert scale.linear_fit([(4, None), (16, 8.0)]) == (0.0, 0.5)
    assert scale.at(None, 1024) is None
    assert scale.formula(None, 's') == '(not measured)'
    assert scale.formula((1.5, 0.25), 'CPU-s') == '1.500 + 0.250 x N CPU-s'
    assert scale.formula((-1.5, -0.25), 'fds', 1) == '-1.5 - 0.2 x N fds'


def launch_json():
    def sample(cpu, main, stop):
        return {'secs': 1.0, 'cpu': cpu, 'main_cpu': main, 'stop_cpu': stop}
    return {'run': {'date': '2026-11-28 08:00 UTC', 'cpus': 2, 'commit': 'abc1234', 'loadavg_start': '1.0 1.0 1.0'},
            'methods': [{'label': 'ansible'}],
            'results': {'2': {'ansible': [sample(4.0, 1.0, 1.0), sample(6.0, 1.0, 1.0)], 'ssh fan-out': [{'cpu': 0.1}]},
                        '16': {'ansible': [sample(19.0, 3.0, 4.0)], 'ssh fan-out': [{'cpu': 0.8}]}}}


def watch_sample(n, window=30.0, cpu_per_node_min=0.5):
    return {'window': window, 'cpu': cpu_per_node_min * n * window / 60.0,
            'tree': {'procs': {'max': 1 + 2 * n}, 'kinds_max': {'ssh master': n, 'ssh': n // 2, 'python': 1 + n},
                     'fds': {'max': 10 + 8 * n}, 'max_fds': {'max': 5 + 3 * n}, 'pss_kb': {'max': 1024 * (50 + 20 * n)}}}


def watch_json():
    before = dict(watch_sample(4, cpu_per_node_min=5.0), method='before (a75a325)')  # a --baseline's: left out
    return {'run': {'date': '2026-11-28 08:30 UTC', 'cpus': 2, 'commit': 'abc1234', 'loadavg_start': '2.0'},
            'methods': [{'label': 'ansible'}, {'label': 'before (a75a325)'}],
            'results': {'4': {'watch': [dict(watch_sample(4), method='ansible'), before], 'failfast': []},
                        '32': {'watch': [watch_sample(32, window=20.0)], 'failfast': []}}}


def test_the_launch_figures_are_the_medians_of_the_reference_method_per_node_count():
    points = scale.launch_points(launch_json())
    assert points['cpu'] == [(2, 5.0), (16, 19.0)]
    assert points['main_cpu'] == [(2, 1.0), (16, 3.0)]
    assert points['stop_cpu'] == [(2, 1.0), (16, 4.0)]


def test_the_watch_figures_per_node_count_and_their_estimate():
    points = scale.watch_points(watch_json())
    assert points['cpu_per_min'] == [(4, pytest.approx(2.0)), (32, pytest.approx(16.0))]
    assert points['ssh_masters'] == [(4, 4), (32, 32)]
    assert points['ssh_clients'] == [(4, 2), (32, 16)]
    assert points['max_fds'] == [(4, 17), (32, 101)]
    assert points['pss_mib'] == [(4, 130.0), (32, 690.0)]
    lines = '\n'.join(scale.estimate(watch=watch_json(), nodes=1024))
    # 0.5 CPU-s per node-minute: 512 CPU-s a minute at 1,024 nodes, 8.53 cores
    assert 'controller CPU per minute of watching: 0.000 + 0.500 x N CPU-s/min (fitted on N=4,32) -> at N=1024: 512.000 CPU-s/min' in lines
    assert '= 8.53 controller core(s) busy for the whole job, 0.500 CPU-s per node-minute' in lines
    assert 'per node-minute as measured: 0.500 to 0.500 CPU-s; proportional to N that is 8.53 to 8.53 core(s) at N=1024' in lines
    assert 'ssh ControlPersist masters (one TCP connection each): 0.0 + 1.0 x N processes (fitted on N=4,32) -> at N=1024: 1024.0' in lines
    assert 'file descriptors of the busiest process (ulimit -n bounds it): 5.0 + 3.0 x N fds' in lines
    assert 'at N=1024: 3077.0 fds' in lines
    assert 'memory of the tree (PSS): 50.0 + 20.0 x N MiB (fitted on N=4,32) -> at N=1024: 20530.0 MiB' in lines
    assert 'measured 2026-11-28 08:30 UTC on 2 CPU(s), commit abc1234' in lines


def test_the_shortest_launch_is_bounded_by_the_cores_and_by_the_main_process():
    # cpu = 3 + 1 x N (5 at 2 nodes, 19 at 16): 1027 CPU-s at 1,024 nodes; main = 0.714 + 0.143 x N: 147 CPU-s
    lines = '\n'.join(scale.estimate(launch=launch_json(), nodes=1024, cores=2))
    assert 'controller CPU per launch: 3.000 + 1.000 x N CPU-s (fitted on N=2,16) -> at N=1024: 1027.000 CPU-s' in lines
    assert 'shortest launch on 2 controller core(s): max(total / 2, main process) = 514 s (8.6 min)' in lines
    lines = '\n'.join(scale.estimate(launch=launch_json(), nodes=1024, cores=64))
    # 64 cores: 16 s of parallel CPU, but the main process alone takes 147 s
    assert 'shortest launch on 64 controller core(s): max(total / 64, main process) = 147 s (2.5 min)' in lines


def test_the_estimate_reads_the_benchmarks_json_files(tmp_path, capsys):
    (tmp_path / 'l.json').write_text(json.dumps(launch_json()))
    (tmp_path / 'w.json').write_text(json.dumps(watch_json()))
    assert scale.main(['--launch', str(tmp_path / 'l.json'), '--watch', str(tmp_path / 'w.json'), '--nodes', '512']) == 0
    out = capsys.readouterr().out
    assert out.startswith('Estimate for 512 nodes') and 'launch (measured 2026-11-28 08:00 UTC' in out and '-> at N=512: 256.000 CPU-s/min' in out
    with pytest.raises(SystemExit):
        scale.parse_args([])


def test_several_runs_of_a_benchmark_count_together():
    first, second = launch_json(), launch_json()
    del second['results']['2']
    second['results']['32'] = {'ansible': [{'cpu': 35.0, 'main_cpu': 5.0, 'stop_cpu': 9.0}]}
    merged = scale.merge([first, second])
    assert merged['run'] == first['run'] and sorted(merged['results'], key=int) == ['2', '16', '32']
    assert [x['cpu'] for x in merged['results']['16']['ansible']] == [19.0, 19.0]
    assert scale.launch_points(merged)['cpu'] == [(2, 5.0), (16, 19.0), (32, 35.0)]
    assert scale.merge([]) is None


def test_watching_cpu_is_per_node_and_minute_and_the_task_log_is_read(tmp_path):
    assert watch_cost.per_node_minute(6.0, 4, 30.0) == pytest.approx(3.0)
    assert watch_cost.per_node_minute(6.0, 0, 30.0) is None
    log = tmp_path / 'tasks.tsv'
    log.write_text('100.000\tjob : Check the node\n105.500\tjob : Wait for torchrun on the node\n')
    assert watch_cost.last_task(str(log)) == (105.5, 'job : Wait for torchrun on the node')
    assert watch_cost.tasks_between(str(log), 101.0, 200.0) == ['job : Wait for torchrun on the node']
    assert watch_cost.last_task(str(tmp_path / 'none.tsv')) == (None, None)


@pytest.mark.parametrize('argv, comm, kind', [
    (['ssh: /root/.ansible/cp/4f2a9c1d0e [mux]'], 'ssh', 'ssh master'),
    (['ssh', '-o', 'ControlPath=/x/cp/%C', 'lab-node01', '/bin/sh -c ...'], 'ssh', 'ssh'),
    (['/work/.venv/bin/python', '/work/.venv/bin/ansible-playbook', 'launch.yml'], 'ansible-playboo', 'python'),
    (['rsync', '-a'], 'rsync', 'rsync'),
])
def test_the_controller_tree_names_its_processes(argv, comm, kind):
    assert tree.proc_kind(argv, comm) == kind


def test_the_controller_tree_samples_summarize_to_mean_and_largest():
    samples = [{'procs': 3, 'kinds': {'python': 2, 'ssh master': 1}, 'fds': 10, 'max_fds': 6, 'pss_kb': 100},
               {'procs': 5, 'kinds': {'python': 2, 'ssh master': 2, 'ssh': 1}, 'fds': 20, 'max_fds': 8, 'pss_kb': 300}]
    out = tree.summarize(samples)
    assert out['procs'] == {'mean': 4.0, 'max': 5} and out['pss_kb'] == {'mean': 200.0, 'max': 300}
    assert out['kinds_max'] == {'python': 2, 'ssh master': 2, 'ssh': 1} and out['samples'] == 2
    assert tree.summarize([]) == {}


def test_the_documented_estimate_is_what_the_script_prints_from_the_committed_results():
    """docs/contributing/benchmarks.md shows the 1,024-node estimates of the committed figures (before and after): the
    script's own output, line for line, for each command the page shows just before it."""
    with open(os.path.join(REPO, 'docs', 'contributing', 'benchmarks.md')) as handle:
        page = handle.read()
    marker = '$ bench/scale_estimate '
    shown = page.split(marker)[1:]
    assert len(shown) >= 2
    for part in shown:
        command, output = part.split('\n    Estimate for', 1)
        output = output.split('\n\n', 1)[0]
        args = scale.parse_args(shlex.split(command.replace('\\\n', ' ')))
        data = {}
        for key in ('launch', 'watch'):
            loaded = []
            for path in getattr(args, key):
                with open(os.path.join(REPO, path)) as handle:
                    loaded.append(json.load(handle))
            data[key] = scale.merge(loaded)
        assert data['launch'] and data['watch']
        for line in scale.estimate(data['launch'], data['watch'], nodes=args.nodes, cores=args.cores):
            assert line.strip() in output, line


def test_a_run_s_control_path_directory_leaves_room_for_ssh_s_socket_name(monkeypatch):
    launch = sys.modules['launch_latency'] if 'launch_latency' in sys.modules else load('bench/launch_latency', 'launch_latency')
    bench = launch.Bench.__new__(launch.Bench)
    bench.workdir = '/var/tmp/trainops-bench-abcdefgh'   # as tempfile names the benchmark's work directory
    monkeypatch.setattr(launch.os, 'makedirs', lambda path, exist_ok=False: None)
    short = bench.control_dir(launch.Ansible('ansible', 'launch.yml'), 'n04-r1')
    assert os.path.basename(short) == 'cp-ansible-n04-r1'
    label = launch.Ansible('before (a75a325)', 'launch.yml')
    long_dir = bench.control_dir(label, 'n04-r1-before--a75a325-failfast-fdefault')
    assert len(long_dir) <= launch.CONTROL_DIR_MAX
    assert long_dir == bench.control_dir(label, 'n04-r1-before--a75a325-failfast-fdefault')
    assert len(long_dir + '/757ec90602.auBtGINwkg8ZLVWf') < 108
