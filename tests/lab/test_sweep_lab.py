"""sweep.yml across real hosts: the namespace lab of hack/lab.py (root only).

One two-point sweep over 3 lab nodes covers what the sweep promises on real hosts, in as few launches as CI's
time allows (three): one preflight and one sync over SSH for the whole sweep; each point an ordinary experiment
whose ranks ran on their hosts with the sweep's settings, with torch profiling collecting one trace per node;
the sweep directory's table holds the points' real figures; the point where a rank on another host crashes is
recorded, naming that node, and the sweep goes on; a resume runs only the point that did not succeed. (The
local default's e2e tests cover the rest on one host: the 2x2 grid with each point's own knobs, the table's
plots and heatmap, stop_on_failure, Ctrl-C, bad input, nsys/rocprofv3 wrapping.)
"""
import csv
import json
import os

import pytest

from playbook_runner import run_playbook
from test_launch_lab import launch_vars

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.usefixtures('lab_session_lock')]

START_TASK = 'TASK trainops.multinode.job : Start the ranked torchrun detached\n'
# three hosts: a rank crashes on node rank 2, a host that is not the master, beside a healthy one
NODES = 3


def load(path):
    with open(path) as handle:
        return json.load(handle)


def test_a_sweep_with_a_failing_point_and_profiles_then_a_resume(lab_nodes, tmp_path):
    lab = lab_nodes(NODES)
    # one rank a node (what the sweep promises across hosts needs no second rank on a node): rank 2 (node rank 2)
    # crashes at step 3 where fail_step=3; fail_step=1000 is never reached
    extra = dict(sweep={'override.debug.fail_step': [3, 1000]}, channels=28, overrides=['debug.fail_rank=2'],
                 profile='torch', nproc=1)
    proc = run_playbook('playbooks/sweep.yml', str(tmp_path), launch_vars(tmp_path, **extra), inventory=lab.inventory,
                        timeout=1200)
    assert proc.returncode != 0, 'two points failed, so the sweep fails'
    out = proc.stdout
    failed = '\n'.join(line for line in out.splitlines() if line.startswith('FAILED'))[-6000:]
    assert out.count('TASK trainops.multinode.job : Check the node (facts, interface') == 1, failed
    assert out.count('TASK trainops.multinode.job : Sync the workspace to the node\n') == 1, failed
    assert out.count(START_TASK) == 2, 'a failed point does not stop the sweep: %s' % failed
    # (progress lines labelled with their point are the e2e sweep's: test_a_2x2_sweep_runs_each_point_once_...; this
    # job's points are shorter than the default progress interval)
    published = proc.summary['artifact_data']['trainops_sweep']
    path = published['path']
    record = load(os.path.join(path, 'sweep.json'))
    assert record['outcome'] == 'failed'
    assert [p['outcome'] for p in record['points']] == ['failed', 'succeeded']
    assert record['failed_points'] == ['override.debug.fail_step=3']
    rows = list(csv.DictReader(open(os.path.join(path, 'results.csv'))))
    assert [r['outcome'] for r in rows] == ['failed', 'succeeded']
    traces = sorted('%s_rank%d.json' % (name, index) for index, name in enumerate(lab.names))
    for point, row in zip(record['points'], rows):
        manifest = load(os.path.join(point['experiment_dir'], 'manifest.json'))
        assert manifest['outcome'] == point['outcome'] and manifest['nnodes'] == NODES
        assert [n['hostname'] for n in manifest['nodes']] == [n['hostname'] for n in lab.nodes]
        for node in manifest['nodes']:
            assert node['env']['NCCL_MAX_NCHANNELS'] == '28'
        assert manifest['parameters']['channels'] == 28
        if point['outcome'] == 'failed':
            assert point['outcome_detail'].startswith('failed on %s (node rank 2' % lab.names[2]), point
            continue
        assert manifest['summary']['ranks_seen'] == list(range(NODES))
        assert float(row['throughput_samples_per_s']) == manifest['summary']['throughput_samples_per_s']
        assert float(row['mean_step_time_s']) == manifest['summary']['mean_step_time_s']
        # profile=torch: the first rank of every node, traced on its host and collected into profiles/<node>/
        profiles = os.path.join(point['experiment_dir'], 'profiles')
        assert sorted(os.listdir(profiles)) == sorted(lab.names)
        assert sorted(os.listdir(os.path.join(profiles, name)) for name in lab.names) == sorted([t] for t in traces)
        for name in traces:
            trace = load(os.path.join(profiles, name.rsplit('_rank', 1)[0], name))
            assert any(str(e.get('name', '')).startswith('ProfilerStep#') for e in trace['traceEvents']), name

    # resume with only the sweep directory: the points that succeeded are kept, the failed ones run again
    done = {i: p['experiment_dir'] for i, p in enumerate(record['points']) if p['outcome'] == 'succeeded'}
    # (channels, overrides and profile come from sweep.json's recorded settings, not from the command line; nproc=1
    # is given again because the lab's inventory says 2, and a resume refuses a value that differs from the record)
    again = run_playbook('playbooks/sweep.yml', str(tmp_path), launch_vars(tmp_path, sweep_dir=path, nproc=1),
                         inventory=lab.inventory, timeout=1200)
    assert again.returncode != 0
    assert again.stdout.count(START_TASK) == 1
    resumed = load(os.path.join(path, 'sweep.json'))
    assert len(resumed['runs']) == 2 and resumed['runs'][1]['resumed'] is True
    for i, point in enumerate(resumed['points']):
        if i in done:
            assert point['experiment_dir'] == done[i]
        else:
            assert point['experiment_dir'] != record['points'][i]['experiment_dir'] and point['outcome'] == 'failed'
            # the point ran again with the settings the sweep started with
            assert point['outcome_detail'].startswith('failed on %s (node rank 2' % lab.names[2]), point
            manifest = load(os.path.join(point['experiment_dir'], 'manifest.json'))
            assert manifest['parameters']['channels'] == 28 and 'debug.fail_rank=2' in manifest['parameters']['overrides']
            assert {n['env']['NCCL_MAX_NCHANNELS'] for n in manifest['nodes']} == {'28'}
            assert point['settings_id'] == record['settings_id']
