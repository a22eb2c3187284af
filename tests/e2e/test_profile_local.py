"""End-to-end: per-rank profiling (-e profile=...) on the embedded local default.

torch: the workload's torch.profiler writes one Chrome trace per selected rank, collected into the experiment's
profiles/. nsys and rocprofv3 are not installed here: stand-in executables on the test's PATH record the exact
argv each selected rank runs, next to where the profiler's report would go, and then run the rank, so the
wrapping, the per-rank output names and the collection are checked against real ranks. Without the profiler on
the PATH the preflight fails naming the nodes.
"""
import glob
import json
import os
import shutil
import sys

import pytest

from playbook_runner import run_playbook

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TINY = 'config/tiny.yaml'

STAND_IN = '''#!%s
"""Stand-in for nsys / rocprofv3: record this argv where the profiler's report would go, then run the rank."""
import json, os, sys
argv = sys.argv[:]
if os.path.basename(argv[0]) == 'nsys':
    record = argv[argv.index('-o') + 1] + '.nsys-standin.json'
    start = next(i for i, a in enumerate(argv) if i > 0 and os.path.basename(a).startswith('python'))
else:
    record = os.path.join(argv[argv.index('-d') + 1], argv[argv.index('-o') + 1] + '.rocprof-standin.json')
    start = argv.index('--') + 1
with open(record, 'w') as handle:
    json.dump({'argv': argv, 'rank': os.environ.get('RANK')}, handle)
os.execv(argv[start], argv[start:])
''' % sys.executable


def run(lab, playbook, extra, env=None, timeout=600):
    extravars = {'trainops_node_root': lab.nodes + '/{{ inventory_hostname }}', 'trainops_experiments_dir': lab.experiments,
                 'master_port': lab.port, 'trainops_progress_interval': 5, 'config': TINY}
    extravars.update(extra)
    return run_playbook(playbook, lab.root, extravars, timeout=timeout, env=env)


def stand_in_path(tmp_path):
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    for name in ('nsys', 'rocprofv3'):
        (bin_dir / name).write_text(STAND_IN)
        (bin_dir / name).chmod(0o755)
    return {'PATH': '%s:%s' % (bin_dir, os.environ['PATH'])}


def experiment(proc):
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
    path = proc.summary['artifact_data']['trainops_experiment']['path']
    with open(os.path.join(path, 'manifest.json')) as handle:
        return path, json.load(handle)


def profiles(path):
    return sorted(os.path.relpath(p, os.path.join(path, 'profiles'))
                  for p in glob.glob(os.path.join(path, 'profiles', '**', '*'), recursive=True) if os.path.isfile(p))


def script_argv(node):
    """What torchrun's entrypoint runs after the wrapper's own arguments: the script and its arguments."""
    argv = node['argv']
    wrapper = next(i for i, a in enumerate(argv) if a.endswith('/bin/profile_rank.py'))
    return argv[argv.index('--', wrapper) + 1:]


def test_torch_profiler_writes_one_trace_per_selected_rank(lab):
    proc = run(lab, 'playbooks/launch.yml', {'profile': 'torch', 'profile_ranks': [1, 2]})
    path, manifest = experiment(proc)
    assert profiles(path) == ['node0_rank1.json', 'node1_rank2.json']
    for name in profiles(path):
        with open(os.path.join(path, 'profiles', name)) as handle:
            trace = json.load(handle)
        steps = {e['name'] for e in trace['traceEvents'] if str(e.get('name', '')).startswith('ProfilerStep#')}
        assert len(steps) == 5, (name, steps)
    for node in manifest['nodes']:
        assert node['argv'][node['argv'].index('--max-restarts') + 2].endswith('/bin/profile_rank.py')
        assert '--ranks' in node['argv'] and node['argv'][node['argv'].index('--ranks') + 1] == '1,2'
    # the training itself is unchanged: every rank trained and reported
    assert manifest['outcome'] == 'succeeded' and manifest['summary']['ranks_seen'] == [0, 1, 2, 3]
    assert not lab.leftovers()


def test_nsys_wraps_every_selected_rank_with_its_own_output_name(lab, tmp_path):
    knobs = {'profile': 'nsys', 'profile_ranks': 'all', 'profile_stats': True, 'profile_args': ['--trace=osrt,nvtx']}
    proc = run(lab, 'playbooks/launch.yml', knobs, env=stand_in_path(tmp_path))
    path, manifest = experiment(proc)
    names = ['node0_rank0', 'node0_rank1', 'node1_rank2', 'node1_rank3']
    assert profiles(path) == [n + '.nsys-standin.json' for n in names]
    for name in names:
        node = manifest['nodes'][0 if name.startswith('node0') else 1]
        with open(os.path.join(path, 'profiles', name + '.nsys-standin.json')) as handle:
            seen = json.load(handle)
        argv = seen['argv']
        assert seen['rank'] == name[-1]
        # found through the PATH the ranks got (a script's argv[0] is its path)
        assert argv[0] == str(tmp_path / 'bin' / 'nsys')
        assert [os.path.basename(argv[0])] + argv[1:8] == [
            'nsys', 'profile', '-o', node['run_dir'] + '/profiles/' + name, '--force-overwrite', 'true', '--stats=true',
            '--trace=osrt,nvtx']
        assert os.path.basename(argv[8]).startswith('python') and argv[9] == '-u'
        assert argv[10:] == script_argv(node)
        assert argv[10:12] == ['train.py', '--config']
    assert manifest['outcome'] == 'succeeded'


def test_rocprofv3_wraps_the_first_rank_of_every_node(lab, tmp_path):
    proc = run(lab, 'playbooks/launch.yml', {'profile': 'rocprof'}, env=stand_in_path(tmp_path))
    path, manifest = experiment(proc)
    assert profiles(path) == ['node0_rank0.rocprof-standin.json', 'node1_rank2.rocprof-standin.json']
    for node, name in zip(manifest['nodes'], ('node0_rank0', 'node1_rank2')):
        with open(os.path.join(path, 'profiles', name + '.rocprof-standin.json')) as handle:
            argv = json.load(handle)['argv']
        assert argv[0] == str(tmp_path / 'bin' / 'rocprofv3')
        assert [os.path.basename(argv[0])] + argv[1:7] == ['rocprofv3', '--runtime-trace', '-d', node['run_dir'] + '/profiles', '-o', name, '--']
        assert os.path.basename(argv[7]).startswith('python') and argv[8] == '-u'
        assert argv[9:] == script_argv(node)


@pytest.mark.skipif(shutil.which('nsys') is not None, reason='nsys is installed on this machine')
def test_a_missing_profiler_fails_the_preflight_naming_the_nodes(lab):
    proc = run(lab, 'playbooks/launch.yml', {'profile': 'nsys'})
    assert proc.returncode != 0
    text = proc.stdout + proc.failure_text
    assert 'Not starting anything: profile=nsys runs nsys, which is not on the PATH of node0, node1.' in ' '.join(text.split())
    assert not os.path.exists(lab.experiments) or not os.listdir(lab.experiments)
