"""Spare nodes on the lab (docs/failures.md "Spare nodes"; the lead runs it): a job on every lab node but the last
two, which are the spares (group ``spares``, ``-e trainops_spare_nodes=spares``), with one retry. The first spare
stops answering after the preflight (its SSH refused, iptables in its namespace, as tests/lab/test_failure_judgment.py
cuts SSH); then one node of the job is lost: its job processes killed and its SSH refused. The node lost is the
master (node rank 0): before the retry picks a spare, the unused spares are asked again, the first is left out, and
the retry resumes on the second spare, with node rank 0, from the latest checkpoint, and succeeds; the rendezvous
moves to that spare, which gets the checkpoint copied from a node that has it (every node writes it:
files/workspace/train.py). A recovered success is a success: ansible-playbook exits 0, and the recap counts the lost
node's and the dead spare's unreachable tasks as ignored. (A node of another rank lost is the same path without the
master's move; its replacement is unit-tested in _retries.py's tests, and one lost node on the lab costs CI about 3
CPU-minutes.)

A 3-node job (one rank a node) + 2 spares: the lab is brought to 5 nodes (TRAINOPS_SPARES_LAB_NODES=4 runs 2 + 2,
for a quicker look). Each test prints the attempts table and the time from the failure to the resumed job's first
step (from the metrics' timestamps; the lab's nodes share this machine's clock), for the lead to paste:

    sudo -E .venv/bin/python -m pytest -v -s tests/lab/test_spares_lab.py
"""
import glob
import json
import os
import re
import subprocess
import time

import pytest
import yaml

from playbook_runner import start_playbook, wait_playbook, wait_until
import test_launch_lab
from lab_processes import end_leftover_jobs, job_processes

pytestmark = [pytest.mark.lab, pytest.mark.slow]

TOTAL = int(os.environ.get('TRAINOPS_SPARES_LAB_NODES', '5'))
INTERVAL = 5
SPARES = 2
STEP_RE = re.compile(r'"global_step": (\d+)')


@pytest.fixture(scope='module')
def lab(lab_session_lock, restore_lab, lab_nodes):  # pylint: disable=unused-argument
    return lab_nodes(TOTAL)


class ssh_refused:  # pylint: disable=invalid-name
    """Every TCP packet to the node's port 22 answered with a reset, on every interface: its open ControlMaster
    connection dies at once and new ones fail; the node is unreachable."""

    RULE = ['INPUT', '-p', 'tcp', '--dport', '22', '-j', 'REJECT', '--reject-with', 'tcp-reset']

    def __init__(self, lab, node):
        self.lab, self.node = lab, node

    def __enter__(self):
        self.lab.netns_exec(self.node, ['iptables', '-I'] + self.RULE)
        return self

    def __exit__(self, *exc):
        self.lab.netns_exec(self.node, ['iptables', '-D'] + self.RULE, check=False)


def spare_inventory(lab, tmp_path, spares=None):
    """The lab's inventory with its nodes in two groups: ``job`` (all but the last ``spares``, SPARES by default) and
    ``spares`` (the last ones, in lab order). Each
    host gets its own training address as trainops_master_addr (the lab's is one group-wide value, the first node's):
    the master's address must follow node rank 0 to a spare."""
    with open(lab.inventory) as handle:
        group = yaml.safe_load(handle)['trainops_nodes']
    hosts = dict((name, dict(group['hosts'][name] or {}, trainops_master_addr=lab.node(name)['address']))
                 for name in lab.names)
    count = SPARES if spares is None else spares
    job, spares = lab.names[:-count], lab.names[-count:]
    inventory = {'all': {'vars': group['vars'], 'children': {
        'job': {'hosts': dict((name, hosts[name]) for name in job)},
        'spares': {'hosts': dict((name, hosts[name]) for name in spares)}}}}
    path = str(tmp_path / 'spares.yml')
    with open(path, 'w') as handle:
        yaml.safe_dump(inventory, handle)
    return path


def node_root(lab):
    """The lab's trainops_node_root (its inventory's; the collection's default without one)."""
    with open(lab.inventory) as handle:
        return (yaml.safe_load(handle)['trainops_nodes'].get('vars') or {}).get('trainops_node_root', '~/.trainops')


def runs(lab, node):
    """The node's run directories (<node root>/state/<node id>/runs/<run id>)."""
    return set(lab.ssh(node, 'ls -d %s/state/*/runs/* 2>/dev/null || true' % node_root(lab), check=False).stdout.split())


def last_step(lab, node, earlier=()):
    """The last global step in the node's metrics of its newest run that is not one of ``earlier`` (an earlier test's
    run on the same node; 0 before any)."""
    out = lab.ssh(node, 'for run in $(ls -td %s/state/*/runs/* 2>/dev/null); do case " %s " in *" $run "*) continue;; '
                        'esac; f=$(ls -t "$run"/outputs/rank_*_metrics.jsonl 2>/dev/null | head -1); '
                        '[ -n "$f" ] && tail -n 1 "$f"; break; done; true'
                  % (node_root(lab), ' '.join(sorted(earlier))), check=False).stdout
    steps = [int(s) for s in STEP_RE.findall(out)]
    return max(steps) if steps else 0


def first_step_time(experiment_dir, after_step):
    """The earliest wall-clock time of a metrics record past ``after_step`` in the experiment's outputs."""
    times = []
    for metrics in glob.glob(os.path.join(experiment_dir, 'outputs', '*', 'rank_*_metrics.jsonl')):
        with open(metrics) as handle:
            for line in handle:
                if line.strip().endswith('}'):
                    record = json.loads(line)
                    if record['global_step'] > after_step:
                        times.append(record['time'])
    return min(times) if times else None


def read_json(path):
    with open(path) as handle:
        return json.load(handle)


def wait_for_progress(launch, predicate, what, timeout=300):
    """wait_until(``predicate``) while the launch runs. It fails at once when the launch has ended before ``what``
    (a launch that failed its checks), and ends the launch when ``what`` has not come at the deadline: both with the
    launch's output, which says why."""
    def check():
        if launch.poll() is not None:
            raise AssertionError('the launch ended (exit code %s) before %s' % (launch.returncode, what))
        return predicate()
    try:
        return wait_until(check, timeout, interval=1, what=what)
    except AssertionError as exc:
        if launch.poll() is None:
            launch.kill()
        try:
            out = launch.communicate(timeout=30)[0] or ''
        except subprocess.TimeoutExpired:
            out = '(none: its output stayed open 30 s after it ended)'
        raise AssertionError('%s; the launch\'s output:\n%s' % (exc, out[-8000:])) from None


def test_the_lost_master_is_replaced_by_the_second_spare_when_the_first_is_dead_and_the_launch_exits_0(lab, tmp_path):
    victim, (dead_spare, spare) = lab.names[0], lab.names[-SPARES:]
    extra = test_launch_lab.launch_vars(
        tmp_path, retries=1, nproc=1, trainops_nodes_group='job', trainops_spare_nodes='spares', trainops_progress_interval=2,
        trainops_unreachable_grace=15,
        overrides=['training.epochs=50', 'training.max_steps=40', 'training.log_interval=1', 'training.checkpoint_interval=%d' % INTERVAL,
                   'debug.sleep_per_step_s=0.5', 'distributed.timeout_s=30'])
    earlier = runs(lab, victim)  # an earlier test's runs on the victim are not this launch's
    launch = start_playbook('playbooks/launch.yml', str(tmp_path), extra, inventory=spare_inventory(lab, tmp_path))
    failed_at = None
    try:
        wait_for_progress(launch, lambda: last_step(lab, victim, earlier) >= 2 * INTERVAL + 1,
                          '%s past its second checkpoint' % victim)
        # the first spare stops answering after the preflight (the job runs: the workspace was synced to it), then
        # the master is lost
        with ssh_refused(lab, lab.node(dead_spare)), ssh_refused(lab, lab.node(victim)):
            # the job's processes only: a module of the launch running there may be inside `pyenv rehash`, whose
            # lock is machine-wide (the lab's nodes share /root): killed, it leaves the lock, and every python start on
            # every node then waits 60 s for it
            for pid, _cmd in job_processes(lab).get(victim, []):
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
            failed_at = time.time()
            proc = wait_playbook(launch, timeout=900)
    finally:
        if launch.poll() is None:
            launch.kill()
        end_leftover_jobs(lab)
    # a recovered success is a success: the launch's outcome decides, not that a host was once unreachable
    assert proc.returncode == 0, proc.stdout[-6000:]
    stats = proc.summary['stats']
    # both stay visible in the recap: their unreachable tasks ignored, none counted unreachable or failed
    for node in (victim, dead_spare):
        assert stats[node]['ignored'] >= 1 and stats[node]['unreachable'] == 0 and stats[node]['failures'] == 0, stats
    last = proc.summary['artifact_data']['trainops_experiment']
    attempts = last['attempts']
    summary = open(os.path.join(attempts[-1]['experiment_dir'], 'summary.txt')).read()
    table = [line for line in summary.splitlines() if line.startswith('attempt')]
    first, second = attempts
    resumed_at = first_step_time(second['experiment_dir'], second['start_step'])
    print('\n'.join(table))
    print('from the failure (%s lost, spare %s dead) to the resumed job\'s first step on %s: %.1f s' % (
        victim, dead_spare, ', '.join(second['nodes']), resumed_at - failed_at))
    assert last['outcome'] == 'succeeded', last
    assert [(a['attempt'], a['decision']) for a in attempts] == [(1, 'retry'), (2, None)], table
    # the lost node is named in the attempts table: its attempt's failure, and the retry's replacement
    assert first['failure'] == [[victim, 'unreachable']], table
    assert '%s unreachable: replaced by %s as node rank 0' % (victim, spare) in first['reason'], table
    assert first['nodes'] == lab.names[:-SPARES] and second['nodes'] == [spare] + lab.names[1:-SPARES], table
    assert second['outcome'] == 'succeeded' and second['end_step'] == 40, table
    assert 0 < second['start_step'] and second['steps_lost'] <= INTERVAL, table
    manifest = read_json(os.path.join(second['experiment_dir'], 'manifest.json'))
    assert manifest['replaced'] == [{'node': victim, 'by': spare, 'node_rank': 0, 'reason': 'unreachable'}], \
        manifest['replaced']
    assert manifest['spares'] == [], manifest['spares']
    ranks = dict((n['host'], n['node_rank']) for n in manifest['nodes'])
    assert ranks[spare] == 0 and victim not in ranks and dead_spare not in ranks, ranks
    resumed = manifest['resumed_from']
    assert resumed['node'] != victim and len(resumed['sha256']) == 64, resumed
    assert resumed['copied_to'] == [spare], resumed
    assert manifest['master']['host'] == spare and manifest['master']['addr'] == lab.node(spare)['address']
    assert not job_processes(lab)
