"""End-to-end: playbooks/sweep.yml on the embedded local default, through the ansible-runner entry.

A 2x2 sweep (with torch profiling) leaves a sweep directory whose table and plots hold the points' real figures
(read back from each point's own experiment manifest) and each point's traces; stop_on_failure ends a sweep at its
failed point; without it a failing point is recorded and the sweep goes on; Ctrl-C leaves a consistent sweep.json
and a resume with sweep_dir alone runs the remaining points with the settings the sweep started with; bad input fails
before any node is touched. Several promises share one sweep where they can, one rank a node: every point is a real
launch, and CI pays for each (a resume skipping the points that succeeded is the lab's, tests/lab/test_sweep_lab.py).
"""
import csv
import glob
import json
import os
import signal

import pytest


pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PNG_MAGIC = b'\x89PNG\r\n\x1a\n'
TINY = 'config/tiny.yaml'


def sweep_dirs(lab):
    return sorted(glob.glob(os.path.join(lab.experiments, 'sweep_*')))


def point_dirs(lab):
    return [d for d in lab.experiment_dirs() if not os.path.basename(d).startswith('sweep_')]


def load(path):
    with open(path) as handle:
        return json.load(handle)


def test_a_2x2_sweep_runs_each_point_once_and_tabulates_real_figures(lab):
    # with torch profiling, whose default in a sweep is the first rank of every node (one trace each per point)
    # a tiny point with one thread a rank trains in under a second: 50 ms more a step (about 3 s a point) and a
    # progress line every second, so that each point's labelled progress line shows
    proc = lab.run('playbooks/sweep.yml', {'sweep': {'channels': [28, 42], 'threads': [256, 512]}, 'config': TINY,
                                           'nproc': 1, 'profile': 'torch', 'trainops_progress_interval': 1,
                                           'overrides': ['debug.sleep_per_step_s=0.05']}, timeout=900)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
    out = proc.stdout
    # one preflight and one sync for the whole sweep; every point starts, waits and collects
    assert out.count('TASK trainops.multinode.job : Check the node (facts, interface') == 1
    assert out.count('TASK trainops.multinode.job : Sync the workspace to the node\n') == 1
    assert out.count('TASK trainops.multinode.job : Start the ranked torchrun detached\n') == 4
    # progress names the point
    assert 'point 3/4 channels=42 threads=256: node0 rank 0: running' in out

    published = proc.summary['artifact_data']['trainops_sweep']
    assert published['outcome'] == 'succeeded'
    [path] = sweep_dirs(lab)
    assert published['path'] == path and os.path.basename(path).startswith('sweep_sweep_')
    record = load(os.path.join(path, 'sweep.json'))
    assert record['grid'] == {'channels': [28, 42], 'threads': [256, 512]} and record['outcome'] == 'succeeded'
    assert [p['label'] for p in record['points']] == [
        'channels=28 threads=256', 'channels=28 threads=512', 'channels=42 threads=256', 'channels=42 threads=512']
    assert sorted(p['experiment_dir'] for p in record['points']) == point_dirs(lab)

    with open(os.path.join(path, 'results.csv')) as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4
    for point, row in zip(record['points'], rows):
        manifest = load(os.path.join(point['experiment_dir'], 'manifest.json'))
        # each point is an ordinary experiment with the launch's naming, run with its own knobs
        assert os.path.basename(point['experiment_dir']).startswith(
            'multinode_%sch_%sth_' % (point['values']['channels'], point['values']['threads']))
        assert manifest['outcome'] == 'succeeded' == point['outcome'] == row['outcome']
        assert manifest['parameters']['channels'] == point['values']['channels'] == int(row['channels'])
        assert manifest['parameters']['threads'] == point['values']['threads'] == int(row['threads'])
        assert {n['env']['NCCL_MAX_NCHANNELS'] for n in manifest['nodes']} == {str(point['values']['channels'])}
        assert sorted(n for n in os.listdir(os.path.join(point['experiment_dir'], 'logs')) if n.startswith('node_')) == ['node_0.txt', 'node_1.txt']
        # each node's traces in its own place, profiles/<node>/
        profiles = os.path.join(point['experiment_dir'], 'profiles')
        traces = sorted(os.path.join(node, name) for node in os.listdir(profiles)
                        for name in os.listdir(os.path.join(profiles, node)))
        assert traces == ['node0/node0_rank0.json', 'node1/node1_rank1.json']
        # the table holds the figures of that point's own manifest
        summary = manifest['summary']
        assert summary['throughput_samples_per_s'] > 0
        assert float(row['throughput_samples_per_s']) == summary['throughput_samples_per_s']
        assert float(row['mean_step_time_s']) == summary['mean_step_time_s']
        assert int(row['steps']) == summary['steps']

    markdown = open(os.path.join(path, 'results.md')).read()
    assert markdown.startswith('| point | channels | threads | outcome | throughput_samples_per_s |')
    assert len([line for line in markdown.splitlines() if line.startswith('| ')]) == 5
    # the table the playbook prints is published for ansible-runner too
    assert published['table'][0].split()[:5] == ['point', 'channels', 'threads', 'outcome', 'throughput_samples_per_s']
    assert [line.split()[3] for line in published['table'][1:]] == ['succeeded'] * 4
    for name in ('plot_channels.png', 'plot_threads.png', 'heatmap.png'):
        data = open(os.path.join(path, name), 'rb').read()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000, name
    assert not lab.leftovers()


def test_stop_on_failure_then_a_resume_that_goes_on_past_a_failed_point(lab):
    # fail_step=3 crashes rank 1 (node1's, one rank a node) at step 3; fail_step=1000 is never reached and succeeds.
    # (A resume that skips the points that succeeded is the lab's: tests/lab/test_sweep_lab.py.)
    sweep = {'override.debug.fail_step': [3, 1000]}
    extra = {'sweep': sweep, 'config': TINY, 'nproc': 1, 'overrides': ['debug.fail_rank=1'], 'sweep_name': 'faults'}
    # 1. stop_on_failure: the sweep ends at the failed point, the next one stays pending
    stopped = lab.run('playbooks/sweep.yml', dict(extra, stop_on_failure=True), timeout=600)
    assert stopped.returncode != 0
    [path] = sweep_dirs(lab)
    assert os.path.basename(path).startswith('sweep_faults_')
    record = load(os.path.join(path, 'sweep.json'))
    assert record['outcome'] == 'stopped'
    assert [p['outcome'] for p in record['points']] == ['failed', None]
    assert [p['status'] for p in record['points']] == ['done', 'pending']
    assert len(point_dirs(lab)) == 1

    # 2. resume without stop_on_failure: the failed point runs again and fails, is recorded, and the sweep goes on
    resume = {'sweep_dir': path, 'config': TINY, 'nproc': 1, 'overrides': ['debug.fail_rank=1']}
    proc = lab.run('playbooks/sweep.yml', resume, timeout=900)
    assert proc.returncode != 0
    assert sweep_dirs(lab) == [path]
    record = load(os.path.join(path, 'sweep.json'))
    first, second = record['points']
    assert record['outcome'] == 'failed' and record['failed_points'] == ['override.debug.fail_step=3']
    assert first['outcome'] == 'failed' and first['outcome_detail'].startswith('failed on node1 (node rank 1: exit code 1)')
    assert second['outcome'] == 'succeeded'
    assert load(os.path.join(first['experiment_dir'], 'manifest.json'))['outcome'] == 'failed'
    rows = list(csv.DictReader(open(os.path.join(path, 'results.csv'))))
    assert [r['outcome'] for r in rows] == ['failed', 'succeeded']
    assert float(rows[1]['throughput_samples_per_s']) > 0
    assert 'point 1 override.debug.fail_step=3: failed: failed on node1 (node rank 1: exit code 1)' in proc.failure_text
    assert len(point_dirs(lab)) == 3
    assert not lab.leftovers()


@pytest.mark.parametrize('sweep, expected', [
    ({'chanels': [28]}, ['chanels: not a knob a sweep can vary']),
    ({'threads': []}, ['threads=[]: the list of values is empty']),
    ({'channels': [28, 0], 'threads': [256]},
     ['sweep point channels=0 threads=256: channels=0: the maximum NCCL/RCCL channels']),
    ({'config': ['config/tiny.yaml', 'config/nope.yaml']},
     ['sweep point config=config/nope.yaml: config=config/nope.yaml: no such file under the workspace']),
])
def test_bad_input_fails_before_any_node_is_touched(lab, sweep, expected):
    proc = lab.run('playbooks/sweep.yml', {'sweep': sweep}, timeout=300)
    assert proc.returncode != 0
    text = proc.stdout + proc.failure_text
    assert 'Not starting the sweep:' in text
    for line in expected:
        assert line in text, text[-3000:]
    assert not os.path.exists(lab.experiments) or not os.listdir(lab.experiments)
    assert not os.path.exists(lab.nodes), 'no node was touched'


def test_ctrl_c_leaves_a_consistent_sweep_json_and_the_sweep_resumes(lab, tmp_path):
    import subprocess
    import sys
    from playbook_runner import REPO, wait_until

    base = {'trainops_node_root': lab.nodes + '/{{ inventory_hostname }}', 'trainops_experiments_dir': lab.experiments,
            'master_port': lab.port, 'config': TINY, 'trainops_progress_interval': 2,
            # 20 s a point: point 1 must still run when the Ctrl-C lands, on a busy controller too
            'overrides': ['training.max_steps=40', 'debug.sleep_per_step_s=0.5']}
    varfile = tmp_path / 'vars.json'
    varfile.write_text(json.dumps(dict(base, sweep={'threads': [256, 512]})))
    out = open(str(tmp_path / 'sweep.out'), 'w+')
    argv = [os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), 'playbooks/sweep.yml', '-e', '@%s' % varfile]
    sweep = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: 'point 1/2 threads=256: node0 rank 0: running  epoch=' in open(out.name).read(), 120,
                   what='a progress line of point 1')
        os.killpg(sweep.pid, signal.SIGINT)
        sweep.wait(timeout=120)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
            sweep.wait()
    [path] = sweep_dirs(lab)
    record = load(os.path.join(path, 'sweep.json'))       # complete JSON, not a torn write
    assert record['outcome'] == 'running'
    first, second = record['points']
    assert first['status'] == 'running' and first['experiment_dir'] and second['status'] == 'pending'
    assert not [f for f in os.listdir(path) if f.startswith('.')], 'no temporary file left'
    # the point's job ran on; the watcher marks its experiment interrupted
    manifest_path = os.path.join(first['experiment_dir'], 'manifest.json')
    wait_until(lambda: load(manifest_path)['outcome'] == 'interrupted', 90, what='the point marked interrupted')
    run_id = os.path.basename(first['experiment_dir'])
    stopped = lab.run('playbooks/stop.yml', {'run_id': run_id, 'config': TINY})
    assert stopped.returncode in (0, 2), stopped.stdout[-3000:]

    # sweep.json recorded the launch settings the points share; a resume given another one is refused before any
    # node is touched
    assert record['settings']['config'] == TINY and record['settings']['overrides'] == base['overrides']
    refused = lab.run('playbooks/sweep.yml', {'sweep_dir': path, 'overrides': ['training.max_steps=8']}, timeout=300)
    assert refused.returncode != 0
    assert ('overrides=["training.max_steps=8"]: the sweep %s ran with overrides=%s' % (
        path, json.dumps(base['overrides']))) in ' '.join((refused.stdout + refused.failure_text).split())
    assert 'TASK trainops.multinode.job : Check the node (facts, interface' not in refused.stdout
    assert load(os.path.join(path, 'sweep.json'))['runs'] == record['runs']

    # the resume gives sweep_dir alone: the remaining points run with the recorded settings
    again = lab.run('playbooks/sweep.yml', {'sweep_dir': path}, timeout=600)
    assert again.returncode == 0, again.stdout[-4000:]
    resumed = load(os.path.join(path, 'sweep.json'))
    assert resumed['outcome'] == 'succeeded'
    assert [p['outcome'] for p in resumed['points']] == ['succeeded', 'succeeded']
    assert resumed['points'][0]['experiment_dir'] != first['experiment_dir']
    assert resumed['settings'] == record['settings']
    for point in resumed['points']:
        parameters = load(os.path.join(point['experiment_dir'], 'manifest.json'))['parameters']
        assert parameters['config'] == TINY and parameters['overrides'] == base['overrides'], point['label']
        assert point['settings_id'] == record['settings_id']
    rows = list(csv.DictReader(open(os.path.join(path, 'results.csv'))))
    assert [r['settings'] for r in rows] == [record['settings_id']] * 2
    assert not lab.leftovers()
