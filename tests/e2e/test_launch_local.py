"""End-to-end: playbooks/launch.yml, status.yml and stop.yml on the embedded local default.

Every test drives the real playbooks through the ansible-runner entry (tools/trainops_run.py), the
way CI does, with the local inventory's two logical nodes redirected into a temporary directory.
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

from playbook_runner import free_port, run_playbook

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def processes_under(path):
    """PIDs of live processes whose command line or working directory mentions ``path``."""
    found = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open('/proc/%s/cmdline' % entry, 'rb') as handle:
                cmdline = handle.read().replace(b'\0', b' ').decode(errors='replace')
            cwd = os.readlink('/proc/%s/cwd' % entry)
        except OSError:
            continue
        if path in cmdline or cwd.startswith(path):
            found.append((int(entry), cmdline))
    return found


class Lab:
    """A temporary home for the two local nodes and the controller's experiments."""

    def __init__(self, root):
        self.root = str(root)
        self.nodes = os.path.join(self.root, 'nodes')
        self.experiments = os.path.join(self.root, 'experiments')
        self.port = free_port()

    def run(self, playbook, extra=None, timeout=420, inventory=None, env=None):
        extravars = {
            'trainops_node_root': self.nodes + '/{{ inventory_hostname }}',
            'trainops_experiments_dir': self.experiments,
            'master_port': self.port,
            'trainops_progress_interval': 5,
        }
        extravars.update(extra or {})
        return run_playbook(playbook, self.root, extravars, timeout=timeout, inventory=inventory, env=env)

    def experiment_dirs(self):
        return sorted(glob.glob(os.path.join(self.experiments, '*')))

    def leftovers(self):
        return processes_under(self.nodes)

    def kill_leftovers(self):
        """Nothing of ours may outlive a test; end only what runs under this test's node directories."""
        for pid, _cmd in self.leftovers():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def read_jsonl(path):
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def test_launch_trains_four_ranks_and_collects_everything(lab):
    # 4 ranks on CI's 2 shared cores: a healthy run's nodes' compute times differ by up to ~15 % (13 % measured),
    # where a GPU's (CUDA events) differ by a few: the local default's threshold is 50 % (inventories/local); the
    # straggler below is 0.2 s slower per step
    proc = lab.run('playbooks/launch.yml', {'channels': 42, 'threads': 256, 'nproc': 2})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    # progress was visible while it ran
    assert 'rank 0: running' in proc.stdout and 'step=' in proc.stdout

    experiment = proc.summary['artifact_data']['trainops_experiment']
    assert experiment['outcome'] == 'succeeded'
    path = experiment['path']
    assert os.path.basename(path).startswith('multinode_42ch_256th_')
    assert lab.experiment_dirs() == [path]

    # every node's log and every rank's metrics came back, each node's outputs in its own outputs/<node>/
    # and each rank's lines in logs/rank_<rank>.txt, split from its node's log by torchrun's [rank N] prefix
    assert sorted(os.listdir(os.path.join(path, 'logs'))) == ['node_0.txt', 'node_1.txt'] + [
        'rank_%d.txt' % r for r in range(4)]
    assert sorted(os.listdir(os.path.join(path, 'outputs'))) == ['node0', 'node1']
    metrics = sorted(glob.glob(os.path.join(path, 'outputs', '*', 'rank_*_metrics.jsonl')))
    assert [os.path.relpath(m, os.path.join(path, 'outputs')) for m in metrics] == [
        'node%d/rank_%02d_metrics.jsonl' % (r // 2, r) for r in range(4)]
    ranks = []
    for metric_file in metrics:
        records = read_jsonl(metric_file)
        assert {r['world_size'] for r in records} == {4}
        assert len({r['rank'] for r in records}) == 1
        ranks.append(records[0]['rank'])
        assert records[-1]['loss'] < records[0]['loss'], metric_file
    assert sorted(ranks) == [0, 1, 2, 3]

    manifest = json.load(open(os.path.join(path, 'manifest.json')))
    assert manifest['world_size'] == 4 and manifest['nnodes'] == 2
    assert manifest['parameters']['channels'] == 42 and manifest['parameters']['threads'] == 256
    assert manifest['outcome'] == 'succeeded' and manifest['failed_nodes'] == []
    assert manifest['master'] == {'host': 'node0', 'addr': '127.0.0.1', 'port': lab.port}
    assert manifest['code']['commit'] and len(manifest['code']['commit']) == 40
    assert [n['host'] for n in manifest['nodes']] == ['node0', 'node1']
    assert [n['ranks'] for n in manifest['nodes']] == [[0, 1], [2, 3]]
    for node in manifest['nodes']:
        assert node['env']['NCCL_MAX_NCHANNELS'] == '42'
        assert node['torch'].startswith('2.13.0')
        assert '--node-rank' in node['argv']
    assert {h: r['exit_code'] for h, r in manifest['results'].items()} == {'node0': 0, 'node1': 0}
    summary = manifest['summary']
    assert summary['world_size'] == 4 and summary['ranks_seen'] == [0, 1, 2, 3]
    assert summary['loss_decreased'] is True
    assert summary['throughput_samples_per_s'] > 0
    # two logical nodes on this one host count two; a CPU run's tiny TFLOP/s still reads as a figure
    assert summary['nodes'] == ['node0', 'node1'] and len(summary['hosts']) == 1
    table = open(os.path.join(path, 'summary.txt')).read().splitlines()
    assert 'nodes      : 2 on 1 host' in table
    compute = next(line for line in table if line.startswith('compute'))
    assert summary['tflops_total'] > 0 and compute.endswith('FLOP/s total') and ' 0 ' not in compute, compute
    # each node's step time (median, p90 over its ranks' records) and no straggler on a healthy run
    assert sorted(summary['node_step_times']) == ['node0', 'node1']
    for figures in summary['node_step_times'].values():
        assert figures['ranks'] == 2 and figures['records'] == 10, figures
        for field in ('step_time_s', 'compute_time_s'):
            assert 0 < figures[field]['median'] <= figures[field]['p90'], figures
    # a healthy run: the judgment agrees with the figures it published. (That no node is named is not asserted: the
    # four ranks share CI's 2 cores with the lab's suite, whose bursts can give one node's ranks 50 % more compute
    # time; that healthy nodes are not named is the lab's health test, next to a node slowed on purpose.)
    found = summary['stragglers']
    assert found['basis'] == 'compute_time_s' and found['compared'] == ['node0', 'node1'], found
    medians = {node: figures['compute_time_s']['median'] for node, figures in summary['node_step_times'].items()}
    assert [s['node'] for s in found['nodes']] == [
        node for node in sorted(medians) if medians[node] > 1.5 * min(medians.values())], (found, medians)
    assert manifest['parameters']['straggler_threshold'] == 0.5 and found['threshold'] == 0.5
    assert any(line.startswith('node step') and 'node0 ' in line and 'node1 ' in line for line in table), table
    assert any(line.startswith('straggler') and (': none (' in line) == (not found['nodes']) for line in table), table

    # each rank ran on the node its rank says (static rendezvous: node rank = inventory order) and saw
    # the settings the launch computed for that node
    for rank in range(4):
        seen = json.load(open(os.path.join(path, 'outputs', 'node%d' % (rank // 2), 'rank_%02d_env.json' % rank)))
        assert seen['env']['TRAINOPS_NODE'] == ('node0' if rank < 2 else 'node1'), (rank, seen['env'])
        assert seen['env']['TRAINOPS_NODE_RANK'] == ('0' if rank < 2 else '1')
        assert seen['env']['NCCL_MAX_NCHANNELS'] == '42'
        assert seen['env']['GLOO_SOCKET_IFNAME'] == 'lo' and seen['env']['NCCL_SOCKET_IFNAME'] == '=lo'

    assert not lab.leftovers()

    # per-rank logs (the demo's local rank 0 prints the progress, every rank its last line): node1's log holds
    # ranks 2 and 3, each line prefixed; rank 3's own log has only its lines; the
    # rank map is in summary.txt and the manifest
    node1_log = open(os.path.join(path, 'logs', 'node_1.txt')).read()
    assert re.search(r'^\[rank 3\] \[trainops\] done node=\S+ rank=3/4 final_loss=', node1_log, re.M), node1_log[-2000:]
    rank3 = open(os.path.join(path, 'logs', 'rank_3.txt')).read()
    assert re.search(r'^\[trainops\] done node=\S+ rank=3/4 final_loss=', rank3, re.M) and '[rank ' not in rank3, rank3[-2000:]
    assert not re.search(r'rank=[012]/4', rank3)
    assert [(r['rank'], r['node'], r['local_rank'], r['log']) for r in manifest['rank_logs']] == [
        (r, 'node%d' % (r // 2), r % 2, 'logs/rank_%d.txt' % r) for r in range(4)]
    assert table[-5:] == ['rank map   : rank  node   local rank  log'] + [
        '           :    %d  node%d           %d  logs/rank_%d.txt' % (r, r // 2, r % 2, r) for r in range(4)], table
    # logs.yml prints rank 3's lines, and no other rank's; follow=true reads them from the node (the job has ended
    # there: it prints them all and stops)
    for extra, heading in (({'rank': 3}, 'rank 3 on node1 (node rank 1): %s/logs/rank_3.txt' % path),
                           ({'rank': 3, 'follow': True}, 'Follow the rank')):
        shown = lab.run('playbooks/logs.yml', extra, timeout=120)
        assert shown.returncode == 0, shown.stdout[-3000:]
        assert heading in shown.stdout, shown.stdout
        assert re.search(r'rank=3/4 final_loss=', shown.stdout) and not re.search(r'rank=[012]/4', shown.stdout), shown.stdout
    missing = lab.run('playbooks/logs.yml', {'rank': 4}, timeout=120)
    assert missing.returncode != 0 and "rank 4 is not one of the job's ranks (0 to 3)" in missing.stdout, missing.stdout

    # a second launch gets its own directory; the first is untouched. Its node1 is a straggler on purpose
    # (files/workspace/train.py: every rank of node rank 1 takes 0.2 s longer per step): named while it runs and in
    # the summary, and the job still succeeds
    before = open(os.path.join(path, 'manifest.json')).read()
    again = lab.run('playbooks/launch.yml', {
        'channels': 42, 'overrides': ['training.epochs=1', 'debug.slow_node_rank=1', 'debug.slow_step_s=0.2'],
        'trainops_progress_interval': 1, 'trainops_poll_interval': 1, 'trainops_straggler_threshold': 0.15})
    assert again.returncode == 0, again.stdout[-3000:]
    assert len(lab.experiment_dirs()) == 2
    assert open(os.path.join(path, 'manifest.json')).read() == before
    slow = json.load(open(os.path.join(again.summary['artifact_data']['trainops_experiment']['path'], 'manifest.json')))
    assert slow['outcome'] == 'succeeded'
    found = slow['summary']['stragglers']
    assert found['basis'] == 'compute_time_s' and [s['node'] for s in found['nodes']] == ['node1'], found
    assert found['nodes'][0]['median_s'] >= 0.2 and found['nodes'][0]['above'] > 1, found
    assert re.search(r'node1 rank 1: running .*STRAGGLER compute time \S+ s, \d+% above the other nodes\' median', again.stdout)
    assert not re.search(r'node0 rank 0: running .*STRAGGLER', again.stdout)
    # what the play published (set_stats, for ansible-runner and CI) and printed (summary.txt's table)
    published = again.summary['artifact_data']['trainops_experiment']['summary']['stragglers']
    assert [s['node'] for s in published['nodes']] == ['node1'], published
    slow_table = open(os.path.join(again.summary['artifact_data']['trainops_experiment']['path'], 'summary.txt')).read()
    assert re.search(r"^straggler  : node1: compute time \S+ s, \d+% above the other nodes' median \S+ s \(threshold 15%\)$",
                     slow_table, re.M), slow_table


@pytest.mark.parametrize('extra, words, absent', [
    # checked on the controller: one line per bad value, shown once, naming no node and no value that fits
    ({'channels': 'abc'}, ['channels=abc: '], ['nproc=', 'threads=']),
    ({'channels': 0}, ['channels=0: '], ['nproc=', 'min_channels=']),
    ({'nproc': 0}, ['nproc=0: ranks per node', '(e.g. -e nproc=8)'], ['channels=', 'master_port=', 'node0', 'node1']),
    ({'nproc': 'eight'}, ['nproc=eight: '], ['channels=', 'master_port=']),
    ({'threads': 100}, ['threads=100: '], ['channels=', 'nproc=']),
    ({'master_port': 80}, ['master_port=80: ', 'from 1024 to 65535'], ['channels=', 'nproc=']),
    ({'channels': 8, 'min_channels': 9}, ['min_channels=9: '], ['nproc=', 'threads=']),
    ({'nproc': 0, 'master_port': 80}, ['nproc=0: ', 'master_port=80: '], ['channels=', 'threads=']),
    ({'script': 'does_not_exist.py'},
     ['script=does_not_exist.py: no such file under the workspace', '(trainops_workspace_src) on the controller'],
     ['config=', 'channels=', 'nproc=']),
    ({'config': 'config/nope.yaml'},
     ['config=config/nope.yaml: no such file under the workspace', '(trainops_workspace_src) on the controller'],
     ['script=', 'channels=', 'nproc=']),
    ({'overrides': ['no-equals-sign']}, ['overrides=no-equals-sign: '], ['channels=', 'nproc=']),
    ({'module': 'pkg.train', 'script': 'mine.py', 'args': '--name "run'},
     ['module=pkg.train and script=mine.py: give one entrypoint', 'args=--name "run: the entrypoint\'s arguments cannot be split'],
     ['channels=', 'nproc=', 'no such file']),
    ({'trainops_training_network': '10.1.0.0/33'}, ['trainops_training_network=10.1.0.0/33: '], ['channels=']),
    # -e 'args=--lr 3e-4 --epochs 2' on the command line: ansible-playbook's parse_kv gives exactly these two variables
    ({'args': '--lr', '_raw_params': '3e-4 --epochs 2'},
     ['-e was given words that set no variable: 3e-4 --epochs 2. A value with spaces needs quotes inside the -e'],
     ['channels=', 'nproc=']),
    # -e sets it for every host: with retries that may leave a node out, the master can move away from it
    ({'trainops_master_addr': '10.9.9.9', 'retries': 1, 'trainops_min_nodes': 1},
     ['trainops_master_addr is 10.9.9.9 for 2 hosts (node0, node1): a retry can make another node the master'],
     ['channels=', 'nproc=']),
    ({'trainops_straggler_threshold': 0}, ['trainops_straggler_threshold=0: ', 'above 0 and at most 10'],
     ['channels=', 'nproc=']),
    ({'launcher': 'srun'}, ['launcher=srun: not inside a Slurm allocation (SLURM_JOB_ID is not set'], ['channels=']),
    ({'launcher': 'srun', 'runtime': 'container', 'trainops_slurm_job_id': '42'},
     ['launcher=srun with runtime=container: a Slurm step cannot start the ranks'], ['not inside', 'channels=']),
    # checked on each node
    ({'trainops_socket_ifname': 'nosuchnic0'}, ["'nosuchnic0' does not exist on this node"], []),
    ({'network_mode': 'rdma'}, ['network_mode rdma but no ACTIVE RDMA port on this host'], []),
    ({'trainops_ib_hca': ['mlx5_0']}, ["ib_hca names HCA 'mlx5_0', which does not exist on this host"], []),
    ({'trainops_gpu_vendor': 'nvidia', 'nproc': 2}, ['nproc_per_node 2'], []),
])
def test_bad_input_fails_before_any_node_is_touched(lab, extra, words, absent):
    proc = lab.run('playbooks/launch.yml', extra, timeout=300)
    assert proc.returncode != 0
    messages = proc.failure_text
    for word in words:
        assert word in messages, messages
    if absent:
        # a controller check fails once, with the bad values only
        failures = proc.summary.get('failures', [])
        assert len(failures) == 1, messages
        for word in absent:
            assert word not in failures[0].get('msg', ''), messages
    # nothing was created on any node, nothing started, no experiment directory
    assert not os.path.exists(lab.nodes)
    assert lab.experiment_dirs() == []
    assert not lab.leftovers()


def test_a_crashing_rank_fails_fast_stops_every_node_and_collects_logs(lab):
    # rank 1 lives on node0 (ranks 0,1); node1 must be stopped, not left hanging
    proc = lab.run('playbooks/launch.yml', {
        'overrides': ['debug.fail_rank=1', 'debug.fail_step=5', 'distributed.timeout_s=60'],
        'trainops_poll_interval': 1,
    })
    assert proc.returncode != 0
    messages = proc.failure_text
    assert 'Job multinode_' in messages and 'failed on node0 (node rank 0: exit code' in messages, messages
    assert 'debug failure injected' in messages
    experiment = proc.summary['artifact_data']['trainops_experiment']
    assert experiment['outcome'] == 'failed' and experiment['failed_nodes'] == ['node0']
    path = experiment['path']
    assert sorted(n for n in os.listdir(os.path.join(path, 'logs')) if n.startswith('node_')) == ['node_0.txt', 'node_1.txt']
    assert 'debug failure injected' in open(os.path.join(path, 'logs', 'node_0.txt')).read()
    # the failing rank's traceback is in its own log, not in its neighbour's
    assert 'debug failure injected' in open(os.path.join(path, 'logs', 'rank_1.txt')).read()
    assert 'debug failure injected' not in open(os.path.join(path, 'logs', 'rank_0.txt')).read()
    manifest = json.load(open(os.path.join(path, 'manifest.json')))
    assert manifest['outcome'] == 'failed'
    assert manifest['results']['node0']['exit_code'] != 0
    assert not lab.leftovers()


def test_wait_false_then_status_then_stop(lab):
    proc = lab.run('playbooks/launch.yml', {
        'wait': False, 'overrides': ['debug.sleep_per_step_s=0.5', 'training.epochs=20'],
    })
    assert proc.returncode == 0, proc.stdout[-3000:]
    path = proc.summary['artifact_data'].get('trainops_experiment', {}).get('path') or lab.experiment_dirs()[0]
    assert lab.leftovers(), 'the job should be running after wait=false'

    # a second launch refuses while the job runs, and starts nothing
    refused = lab.run('playbooks/launch.yml', {}, timeout=300)
    assert refused.returncode != 0
    assert 'is still running here' in refused.failure_text
    assert len(lab.experiment_dirs()) == 1

    status = lab.run('playbooks/status.yml', {}, timeout=300)
    assert status.returncode == 0, status.stdout[-3000:]
    states = status.summary['artifact_data']['trainops_status']
    assert sorted(states) == ['node0', 'node1']
    assert {job['status'] for job in states.values()} == {'running'}
    assert {job['run_id'] for job in states.values()} == {os.path.basename(path)}

    stopped = lab.run('playbooks/stop.yml', {}, timeout=300)
    assert stopped.returncode == 0, stopped.stdout[-3000:]
    assert not lab.leftovers()
    # the stopped job was collected into its experiment directory
    assert sorted(n for n in os.listdir(os.path.join(path, 'logs')) if n.startswith('node_')) == ['node_0.txt', 'node_1.txt']
    manifest = json.load(open(os.path.join(path, 'manifest.json')))
    assert manifest['outcome'] == 'stopped', manifest.get('outcome_detail')
    assert manifest['outcome_detail'].startswith('stopped by the user at ')
    assert manifest['failed_nodes'] == [] and manifest['stop']['reason'] == 'user'
    assert all(r['status'] == 'exited' for r in manifest['results'].values())
    assert open(os.path.join(path, 'summary.txt')).readline().startswith('outcome    : stopped by the user at ')


def test_bench_measures_allreduce_bus_bandwidth_with_each_hosts_environment(lab):
    proc = lab.run('playbooks/bench.yml', {'min_bytes': '64K', 'max_bytes': '256K', 'iters': 3, 'warmup': 1, 'nproc': 2})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    results = proc.summary['artifact_data']['trainops_allreduce']
    assert results['world_size'] == 4 and results['ok'] is True
    assert [r['size'] for r in results['results']] == [65536, 131072, 262144]
    for record in results['results']:
        assert record['wrong'] == 0
        assert abs(record['busbw_gbps'] - record['algbw_gbps'] * 2 * 3 / 4) < 1e-6 * max(1.0, record['busbw_gbps'])
    experiment = proc.summary['artifact_data']['trainops_experiment']['path']
    with open(os.path.join(experiment, 'manifest.json')) as handle:
        manifest = json.load(handle)
    for node in manifest['nodes']:
        assert node['network']['transport'] == 'tcp'
        assert node['env']['NCCL_SOCKET_IFNAME'] == '=lo' and node['env']['NCCL_IB_DISABLE'] == '1'
        # the env file in the node's run directory holds exactly what the ranks got
        with open(node['env_file']) as handle:
            text = handle.read()
        assert "export NCCL_SOCKET_IFNAME='=lo'" in text or 'export NCCL_SOCKET_IFNAME==lo' in text
    # every rank saw its host's settings
    for rank in range(4):
        with open(os.path.join(experiment, 'outputs', 'node%d' % (rank // 2), 'rank_%02d_env.json' % rank)) as handle:
            seen = json.load(handle)
        env = seen.get('env', seen)
        assert env['NCCL_SOCKET_IFNAME'] == '=lo' and env['GLOO_SOCKET_IFNAME'] == 'lo'


def _git(cwd, *args):
    subprocess.run(['git', '-C', str(cwd)] + list(args), check=True, capture_output=True,
                   env=dict(os.environ, GIT_AUTHOR_NAME='t', GIT_AUTHOR_EMAIL='t@example.com',
                            GIT_COMMITTER_NAME='t', GIT_COMMITTER_EMAIL='t@example.com'))


def _checkouts(lab, tmp_path):
    """The controller's repository of the workspace, and a clone of it as each node's own workspace."""
    origin = tmp_path / 'code'
    shutil.copytree(os.path.join(REPO, 'files', 'workspace'), str(origin))
    _git(tmp_path, 'init', '-q', '-b', 'main', str(origin))
    _git(origin, 'add', '-A')
    _git(origin, 'commit', '-q', '-m', 'code')
    for node in ('node0', 'node1'):
        os.makedirs(os.path.join(lab.nodes, node))
        _git(tmp_path, 'clone', '-q', str(origin), os.path.join(lab.nodes, node, 'workspace'))
    return origin


def test_nodes_on_another_branch_or_dirty_refuse_to_launch_with_a_table(lab, tmp_path):
    origin = _checkouts(lab, tmp_path)
    node1 = os.path.join(lab.nodes, 'node1', 'workspace')
    _git(node1, 'checkout', '-q', '-b', 'experiment')
    with open(os.path.join(node1, 'train.py'), 'a') as handle:
        handle.write('# local edit\n')
    _git(node1, 'commit', '-q', '-am', 'edit')
    base = {'trainops_sync_workspace': False, 'trainops_workspace_src': str(origin)}
    proc = lab.run('playbooks/launch.yml', base, timeout=300)
    assert proc.returncode != 0
    text = proc.failure_text
    assert 'the code differs across nodes' in text, text
    assert '! node1' in text and 'on branch experiment (controller is on branch main)' in text, text
    assert '! node0' not in text
    assert lab.experiment_dirs() == [] and not lab.leftovers()

    # back on main, but with an uncommitted change: refused, unless allow_dirty
    _git(node1, 'checkout', '-q', 'main')
    with open(os.path.join(node1, 'train.py'), 'a') as handle:
        handle.write('# uncommitted\n')
    dirty = lab.run('playbooks/launch.yml', base, timeout=300)
    assert dirty.returncode != 0 and 'dirty: 1 changed or untracked file (train.py)' in dirty.failure_text, dirty.failure_text
    allowed = lab.run('playbooks/launch.yml', dict(base, allow_dirty=True, config='config/tiny.yaml'))
    assert allowed.returncode == 0, allowed.stdout[-3000:]
    manifest_path = os.path.join(allowed.summary['artifact_data']['trainops_experiment']['path'], 'manifest.json')
    with open(manifest_path) as handle:
        code = json.load(handle)['code']
    assert code['branch'] == 'main' and code['checked_on_nodes'] is True and len(code['commit']) == 40


def test_a_node_that_cannot_start_means_no_node_runs_the_job(lab, tmp_path):
    # node1's torchrun cannot be executed: node0 did start, and must be stopped again
    inventory = tmp_path / 'hosts.yml'
    with open(os.path.join(REPO, 'inventories', 'local', 'hosts.yml')) as handle:
        text = handle.read()
    inventory.write_text(text.replace('    node1:\n', '    node1:\n      trainops_torchrun: /nonexistent/torchrun\n'))
    proc = run_playbook('playbooks/launch.yml', lab.root, {
        'trainops_node_root': lab.nodes + '/{{ inventory_hostname }}', 'trainops_experiments_dir': lab.experiments,
        'master_port': lab.port, 'config': 'config/tiny.yaml'}, inventory=str(inventory), timeout=300)
    assert proc.returncode != 0
    assert 'The job did not start on node1; it was stopped on every other node.' in proc.failure_text, proc.failure_text
    assert not lab.leftovers()
    # node0's run was started and then stopped: its record says so
    node0_runs = glob.glob(os.path.join(lab.nodes, 'node0', 'state', '*', 'runs', '*', 'exit.json'))
    assert len(node0_runs) == 1
