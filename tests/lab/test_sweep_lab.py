"""sweep.yml across real hosts: the namespace lab of hack/lab.py (root only).

A 2x2 sweep over 4 lab nodes: one preflight and one sync over SSH for the whole sweep, each point an ordinary
experiment whose ranks ran on their hosts; the sweep directory's table and plots hold the points' real figures;
a failing point is recorded and the sweep goes on; a resume skips the points that succeeded. torch profiling
collects one trace per node from the real hosts.
"""
import csv
import json
import os

import pytest

from playbook_runner import run_playbook
from test_launch_lab import launch_vars

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.usefixtures('lab_session_lock')]

PNG_MAGIC = b'\x89PNG\r\n\x1a\n'


def sweep_vars(tmp_path, **extra):
    """The lab launch tests' variables (experiments under tmp_path, a free port, the tiny config)."""
    return launch_vars(tmp_path, **extra)


def load(path):
    with open(path) as handle:
        return json.load(handle)


def test_a_2x2_sweep_on_four_lab_nodes(lab_nodes, tmp_path):
    lab = lab_nodes(4)
    proc = run_playbook('playbooks/sweep.yml', str(tmp_path),
                        sweep_vars(tmp_path, sweep={'channels': [28, 42], 'threads': [256, 512]}),
                        inventory=lab.inventory, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert proc.stdout.count('TASK trainops.multinode.job : Check the node (facts, interface') == 1
    assert proc.stdout.count('TASK trainops.multinode.job : Sync the workspace to the node\n') == 1
    assert 'point 4/4 channels=42 threads=512: ' in proc.stdout
    published = proc.summary['artifact_data']['trainops_sweep']
    assert published['outcome'] == 'succeeded'
    path = published['path']
    record = load(os.path.join(path, 'sweep.json'))
    rows = list(csv.DictReader(open(os.path.join(path, 'results.csv'))))
    assert len(rows) == 4
    for point, row in zip(record['points'], rows):
        manifest = load(os.path.join(point['experiment_dir'], 'manifest.json'))
        assert manifest['outcome'] == 'succeeded' and manifest['nnodes'] == 4
        assert manifest['summary']['ranks_seen'] == list(range(8))
        assert [n['hostname'] for n in manifest['nodes']] == [n['hostname'] for n in lab.nodes]
        for node in manifest['nodes']:
            assert node['env']['NCCL_MAX_NCHANNELS'] == str(point['values']['channels'])
        assert float(row['throughput_samples_per_s']) == manifest['summary']['throughput_samples_per_s']
        assert float(row['mean_step_time_s']) == manifest['summary']['mean_step_time_s']
    for name in ('plot_channels.png', 'plot_threads.png', 'heatmap.png'):
        assert open(os.path.join(path, name), 'rb').read().startswith(PNG_MAGIC)


def test_a_failed_point_is_recorded_and_a_resume_skips_the_done_point(lab_nodes, tmp_path):
    lab = lab_nodes(4)
    # rank 5 (on node rank 2: 2 ranks per node) crashes at step 3 in point 1; point 2 never reaches step 1000
    extra = dict(sweep={'override.debug.fail_step': [3, 1000]}, overrides=['debug.fail_rank=5'])
    proc = run_playbook('playbooks/sweep.yml', str(tmp_path), sweep_vars(tmp_path, **extra), inventory=lab.inventory,
                        timeout=1200)
    assert proc.returncode != 0
    path = proc.summary['artifact_data']['trainops_sweep']['path']
    record = load(os.path.join(path, 'sweep.json'))
    first, second = record['points']
    assert first['outcome'] == 'failed' and first['outcome_detail'].startswith('failed on %s (node rank 2' % lab.names[2])
    assert second['outcome'] == 'succeeded'

    again = run_playbook('playbooks/sweep.yml', str(tmp_path),
                         sweep_vars(tmp_path, sweep_dir=path, overrides=['debug.fail_rank=5']),
                         inventory=lab.inventory, timeout=1200)
    assert again.returncode != 0
    assert again.stdout.count('TASK trainops.multinode.job : Start the ranked torchrun detached\n') == 1
    resumed = load(os.path.join(path, 'sweep.json'))
    assert resumed['points'][1]['experiment_dir'] == second['experiment_dir']
    assert resumed['points'][0]['experiment_dir'] != first['experiment_dir']
    assert len(resumed['runs']) == 2


def test_torch_profiling_collects_one_trace_per_lab_node(lab_nodes, tmp_path):
    lab = lab_nodes(4)
    proc = run_playbook('playbooks/launch.yml', str(tmp_path), sweep_vars(tmp_path, profile='torch'),
                        inventory=lab.inventory, timeout=900)
    assert proc.returncode == 0, proc.stdout[-5000:]
    path = proc.summary['artifact_data']['trainops_experiment']['path']
    expected = sorted('%s_rank%d.json' % (name, 2 * index) for index, name in enumerate(lab.names))
    assert sorted(os.listdir(os.path.join(path, 'profiles'))) == expected
    for name in expected:
        trace = load(os.path.join(path, 'profiles', name))
        assert any(str(e.get('name', '')).startswith('ProfilerStep#') for e in trace['traceEvents'])
