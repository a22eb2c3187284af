"""End-to-end: per-rank profiling (-e profile=...) on the embedded local default.

torch: the workload's torch.profiler writes one Chrome trace per selected rank, collected into the experiment's
profiles/<node>/. nsys and rocprofv3 are not installed here: stand-in executables on the test's PATH record the exact
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
                 'master_port': lab.port, 'trainops_progress_interval': 10, 'config': TINY}
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
    assert profiles(path) == ['node0/node0_rank1.json', 'node1/node1_rank2.json']
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
    assert profiles(path) == [n[:5] + '/' + n + '.nsys-standin.json' for n in names]
    for name in names:
        node = manifest['nodes'][0 if name.startswith('node0') else 1]
        with open(os.path.join(path, 'profiles', name[:5], name + '.nsys-standin.json')) as handle:
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


def assert_rocprofv3_argv(argv, node, name, stand_in):
    """rocprofv3 wraps the rank: its runtime trace into the run's profiles/, named after the node and rank."""
    assert argv[0] == stand_in
    assert [os.path.basename(argv[0])] + argv[1:7] == ['rocprofv3', '--runtime-trace', '-d', node['run_dir'] + '/profiles', '-o', name, '--']
    assert os.path.basename(argv[7]).startswith('python') and argv[8] == '-u'
    assert argv[9:] == script_argv(node)


HOSTILE = '''#!%s
"""A hostile job (the attacker is the job's own code), as the rocprofv3 stand-in: on every node, the same output name
and symbolic links out of its run directory; on node0, a link planted in the controller's experiment directory (the
local default's nodes share the controller's disk) where node0's profiles would go. Then it runs the rank."""
import glob, json, os, sys
argv = sys.argv[:]
profiles = argv[argv.index('-d') + 1]
run_dir = os.path.dirname(profiles)
outside = os.environ['TRAINOPS_E2E_OUTSIDE']
node = os.environ['TRAINOPS_NODE']
os.makedirs(profiles, exist_ok=True)
os.makedirs(os.path.join(run_dir, 'outputs'), exist_ok=True)
with open(os.path.join(run_dir, 'outputs', 'same.json'), 'w') as handle:
    json.dump({'node': node}, handle)
os.symlink(os.path.join(outside, 'secret.json'), os.path.join(run_dir, 'outputs', 'link.json'))
os.symlink(os.path.join(outside, 'secret.json'), os.path.join(profiles, 'leak.json'))
os.symlink(outside, os.path.join(profiles, 'linkdir'))
with open(os.path.join(profiles, argv[argv.index('-o') + 1] + '.rocprof-standin.json'), 'w') as handle:
    json.dump({'argv': argv, 'rank': os.environ.get('RANK')}, handle)
if node == 'node0':
    (experiment,) = glob.glob(os.path.join(os.environ['TRAINOPS_E2E_EXPERIMENTS'], '*'))
    os.makedirs(os.path.join(experiment, 'profiles'), exist_ok=True)
    os.symlink(os.path.join(outside, 'planted'), os.path.join(experiment, 'profiles', 'node0'))
start = argv.index('--') + 1
os.execv(argv[start], argv[start:])
''' % sys.executable

LIAR = '''#!%s
"""node1's Python, compromised: its ansible.builtin.find answer for the profiles directory gains a '../' path,
whose file it also creates, so a collect that trusts the node writes it beside the experiment."""
import json, os, subprocess, sys
# the module comes as a file (AnsiballZ_find.py) or, pipelined, on stdin; its wrapper names the module
module = sys.stdin.buffer.read() if len(sys.argv) < 2 else b''
source = module or open(sys.argv[1], 'rb').read()
if b"module_fqn='ansible.modules.find'" not in source:
    sys.exit(subprocess.run([sys.executable] + sys.argv[1:], input=module).returncode)
out = subprocess.run([sys.executable] + sys.argv[1:], input=module.decode(), capture_output=True, text=True)
result = json.loads(out.stdout)
profiles = [f['path'].split('/profiles/')[0] + '/profiles' for f in result.get('files', []) if '/profiles/' in f['path']]
if profiles:
    lie = profiles[0] + '/../../escaped.json'
    with open(os.path.normpath(lie), 'w') as handle:
        handle.write('from node1')
    result['files'].append(dict(result['files'][0], path=lie))
sys.stdout.write(json.dumps(result))
sys.exit(out.returncode)
''' % sys.executable


def test_what_a_node_returns_stays_in_its_own_place_in_the_experiment(lab, tmp_path):
    """A node that returns a '../' profile path, links out of its run directory and a link planted in the
    experiment fail the collect naming the node, and nothing lands outside the experiment; the two nodes' outputs of
    the same name are both kept, each in outputs/<node>/. The job runs under profile=rocprof (its first rank a node,
    wrapped by a stand-in rocprofv3 that turns hostile): the profile node1 returns honestly is rocprofv3's, named
    after its node and rank."""
    env = stand_in_path(tmp_path)
    (tmp_path / 'bin' / 'rocprofv3').write_text(HOSTILE)
    liar = tmp_path / 'liar-python'
    liar.write_text(LIAR)
    liar.chmod(0o755)
    outside = tmp_path / 'outside'
    (outside / 'planted').mkdir(parents=True)
    (outside / 'secret.json').write_text('{"secret": true}')
    env.update(TRAINOPS_E2E_OUTSIDE=str(outside), TRAINOPS_E2E_EXPERIMENTS=lab.experiments)
    interpreter = "{{ '%s' if inventory_hostname == 'node1' else ansible_playbook_python }}" % liar
    proc = run(lab, 'playbooks/launch.yml', {'profile': 'rocprof', 'ansible_python_interpreter': interpreter}, env=env)

    assert proc.returncode != 0
    text = ' '.join((proc.stdout + proc.failure_text).split())
    assert 'the collect refused 2 file(s)' in text, proc.stdout[-4000:]
    path = proc.summary['artifact_data']['trainops_experiment']['path']
    with open(os.path.join(path, 'manifest.json')) as handle:
        manifest = json.load(handle)
    refused = manifest['collect_refused']
    node1_run = next(n['run_dir'] for n in manifest['nodes'] if n['host'] == 'node1')
    assert refused == [
        "node0: refused profile '%s/profiles/node0_rank0.rocprof-standin.json': %s/profiles/node0 is a symbolic link"
        % (next(n['run_dir'] for n in manifest['nodes'] if n['host'] == 'node0'), path),
        'node1: refused profile \'%s/profiles/../../escaped.json\': a "", "." or ".." component' % node1_run]
    for line in refused:
        assert line in text
    # the job itself succeeded; the collect refused, and fetched everything else
    assert manifest['outcome'] == 'succeeded' and manifest['summary']['ranks_seen'] == [0, 1, 2, 3]
    # nothing outside the experiment: not beside it, not through the planted link, no link followed
    assert os.path.exists(os.path.normpath(node1_run + '/../escaped.json'))  # the lie's file was there to take
    assert os.listdir(lab.experiments) == [os.path.basename(path)]
    assert os.listdir(str(outside / 'planted')) == []
    for base, dirs, files in os.walk(path):
        for name in dirs + files:
            assert not os.path.islink(os.path.join(base, name)) or os.path.join(base, name) == path + '/profiles/node0'
    assert profiles(path) == ['node1/node1_rank2.rocprof-standin.json']
    with open(os.path.join(path, 'profiles', 'node1', 'node1_rank2.rocprof-standin.json')) as handle:
        seen = json.load(handle)
    assert seen['rank'] == '2'
    assert_rocprofv3_argv(seen['argv'], next(n for n in manifest['nodes'] if n['host'] == 'node1'), 'node1_rank2',
                          str(tmp_path / 'bin' / 'rocprofv3'))
    # two nodes writing the same output name keep both, each in its node's directory
    for node in ('node0', 'node1'):
        with open(os.path.join(path, 'outputs', node, 'same.json')) as handle:
            assert json.load(handle) == {'node': node}
        assert not os.path.lexists(os.path.join(path, 'outputs', node, 'link.json'))
    assert sorted(os.listdir(os.path.join(path, 'outputs', 'node1'))) == [
        'checkpoint.json', 'rank_02_env.json', 'rank_02_metrics.jsonl', 'rank_03_env.json', 'rank_03_metrics.jsonl',
        'same.json', 'trainops_heartbeat.json']


@pytest.mark.skipif(shutil.which('nsys') is not None, reason='nsys is installed on this machine')
def test_a_missing_profiler_fails_the_preflight_naming_the_nodes(lab):
    proc = run(lab, 'playbooks/launch.yml', {'profile': 'nsys'})
    assert proc.returncode != 0
    text = proc.stdout + proc.failure_text
    assert 'Not starting anything: profile=nsys runs nsys, which is not on the PATH of node0, node1.' in ' '.join(text.split())
    assert not os.path.exists(lab.experiments) or not os.listdir(lab.experiments)
