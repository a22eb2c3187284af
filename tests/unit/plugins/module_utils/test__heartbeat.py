# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Each rank's heartbeat (module_utils/_heartbeat.py): the supervisor's samples, and the rank the controller names from
the nodes' records; the verdict it gives (_judgment.judge_results' frozen) and the retry's spare (_retries.decide)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from ansible_collections.trainops.multinode.plugins.module_utils import _experiment as exp
from ansible_collections.trainops.multinode.plugins.module_utils import _heartbeat as hb
from ansible_collections.trainops.multinode.plugins.module_utils import _retries
from ansible_collections.trainops.multinode.plugins.module_utils import _torchrun as tr

# /proc/<pid>/stat of a rank frozen by SIGSTOP (recorded; utime 1234 and stime 66 ticks at 100 Hz: 13.0 s)
STOPPED_STAT = ('4242 (python3 (x)) T 4200 4200 3594 0 -1 4194304 100 0 0 0 1234 66 0 0 20 0 3 0 2507313 3133440 388 '
                '18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0')


# --- on the node: samples ------------------------------------------------------------------------------------

def test_a_sample_is_the_state_letter_and_the_cpu_time():
    assert hb.parse_sample(STOPPED_STAT, 100) == ('T', 13.0)
    assert hb.parse_sample('4242 (python3) R', 100) is None and hb.parse_sample('garbage', 100) is None
    own = hb.proc_sample(os.getpid())
    assert own[0] in 'RS' and own[1] > 0
    assert hb.proc_sample(2 ** 22 + 1) is None


def test_the_last_step_is_the_last_whole_record_of_the_metrics_file(tmp_path):
    path = tmp_path / 'rank_1_metrics.jsonl'
    assert hb.last_step(str(path)) is None
    path.write_text('{"global_step": 3}\n{"global_step": 4, "loss": 1.0}\n{"global_st')  # the last one being written
    assert hb.last_step(str(path)) == 4
    # a long file: only its tail is read, and the tail's cut first line is not taken
    path.write_text('{"global_step": 1}\n' + ' ' * (2 * hb.TAIL_BYTES) + '\n{"global_step": 9}\n')
    assert hb.last_step(str(path)) == 9
    path.write_text('{"global_step": "7"}\n[1]\n{"global_step": true}\n')
    assert hb.last_step(str(path)) is None
    link = tmp_path / 'rank_2_metrics.jsonl'
    link.symlink_to(path)
    assert hb.last_step(str(link)) is None and hb.last_step(None) is None
    # the rank is read from the file's name, as the summary reads it (the shipped train.py writes rank_01_...)
    (tmp_path / 'rank_01_metrics.jsonl').write_text('')
    (tmp_path / 'rank_x_metrics.jsonl').write_text('')
    assert hb.metrics_files(str(tmp_path)) == {1: str(tmp_path / 'rank_01_metrics.jsonl'), 2: str(link)}
    assert hb.metrics_files(str(tmp_path / 'none')) == {}


def test_the_recorder_keeps_the_last_samples_and_when_each_rank_last_worked():
    rec = hb.Recorder(interval=2, keep=3)
    cpu = {10: 1.0, 11: 1.0}
    steps = {0: 5, 1: 5}

    def take(now, ranks=None):
        rec.sample(ranks or {0: 10, 1: 11}, now, sampler=lambda pid: ('S', cpu[pid]), step_of=steps.get)

    take(100.0)
    cpu[10], cpu[11] = 2.9, 1.1  # rank 0 computes (0.95 s a second), rank 1 does not (0.05 s a second)
    take(102.0)
    assert rec.ranks[0]['active_at'] == 102.0 and rec.ranks[1]['active_at'] == 100.0
    steps[1] = 6  # a new step counts as work whatever the CPU time says
    take(104.0)
    assert rec.ranks[1]['active_at'] == 104.0
    take(106.0)
    assert [s[0] for s in rec.ranks[0]['samples']] == [102.0, 104.0, 106.0]  # keep=3
    assert rec.ranks[0]['samples'][-1] == [106.0, 'S', 2.9, 5]
    take(108.0, ranks={0: 10})  # rank 1 is gone
    assert rec.ranks[1]['gone_at'] == 108.0 and rec.ranks[0]['gone_at'] is None
    cpu[12] = 1.1
    take(110.0, ranks={0: 10, 1: 12})  # rank 1 again, another process (torchrun restarted it): a new entry
    assert rec.ranks[1]['samples'] == [[110.0, 'S', 1.1, 6]] and rec.ranks[1]['gone_at'] is None
    record = rec.record(110.0)
    assert sorted(record['ranks']) == ['0', '1'] and record['interval_s'] == 2.0 and record['version'] == 1
    json.dumps(record)


# --- on the controller: which rank stopped -------------------------------------------------------------------

def _entry(samples, active_at=None):
    return {'pid': 1, 'samples': [list(s) for s in samples], 'active_at': active_at, 'gone_at': None}


def _working(start, end, step=2.0):
    """Samples of a rank that computes from ``start`` to ``end``."""
    out, now = [], start
    while now <= end:
        out.append((now, 'R', round(now - start, 2), None))
        now += step
    return out


# three nodes, one rank each: rank 1 froze (SIGSTOP) at 130; ranks 0 and 2 waited in their collective (gloo: no CPU)
# until it timed out at 145 and they exited
FROZEN = {
    'node0': {'ranks': {'0': _entry(_working(100, 130) + [(132.0, 'S', 30.1, None), (144.0, 'S', 30.1, None)], 130.0)}},
    'node1': {'ranks': {'1': _entry(_working(100, 128) + [(130.0, 'T', 28.0, None), (132.0, 'T', 28.0, None),
                                                          (160.0, 'T', 28.0, None)], 128.0)}},
    'node2': {'ranks': {'2': _entry(_working(100, 130) + [(144.0, 'S', 30.2, None)], 130.0)}},
}


def test_a_rank_stopped_in_its_last_samples_is_named_while_its_peers_are_not():
    judgment = hb.judge(FROZEN)
    why = 'stopped (state T) since 00:02:10Z, CPU time flat at 28.0 s'
    assert judgment['culprits'] == [{'node': 'node1', 'rank': 1, 'why': why}]
    assert [(row['node'], row['rank'], row['state']) for row in judgment['rows']] == [
        ('node0', 0, 'S'), ('node1', 1, 'T'), ('node2', 2, 'S')]


def test_a_stop_of_one_sample_or_of_every_rank_names_nobody():
    once = dict(FROZEN, node1={'ranks': {'1': _entry(_working(100, 128) + [(130.0, 'T', 28.0, None)], 128.0)}})
    assert hb.judge(once)['culprits'] == []  # py-spy's ptrace stop of a dump lasts well under a sample
    every = {}
    for node, record in FROZEN.items():
        every[node] = {'ranks': dict((rank, _entry(entry['samples'] + [(170.0, 'T', 40.0, None)] * 2))
                                     for rank, entry in record['ranks'].items())}
    assert hb.judge(every)['culprits'] == []  # the whole job suspended: no rank stands apart


def test_a_rank_idle_while_its_peers_worked_is_named_after_the_margin():
    # rank 1 sleeps from 100 on; ranks 0 and 2 spin in their collective (NCCL) until 150
    records = {'n0': {'ranks': {'0': _entry(_working(90, 150), 150.0)}},
               'n1': {'ranks': {'1': _entry([(100.0, 'S', 5.0, None), (150.0, 'S', 5.0, None)], 100.0)}},
               'n2': {'ranks': {'2': _entry(_working(90, 150), 140.0)}}}
    judgment = hb.judge(records)
    assert [(c['node'], c['rank']) for c in judgment['culprits']] == [('n1', 1)]
    assert judgment['culprits'][0]['why'] == ('no work since 00:01:40Z (CPU time flat at 5.0 s) while the other ranks '
                                              'worked until 00:02:20Z or later')
    assert hb.judge(records, margin=41.0)['culprits'] == []
    # ranks that wait in a collective without CPU time (gloo) went idle a step after it: nobody stands apart
    records['n0']['ranks']['0']['active_at'] = records['n2']['ranks']['2']['active_at'] = 101.0
    assert hb.judge(records)['culprits'] == []


def test_a_rank_that_ended_before_its_peers_worked_is_not_idle():
    records = {'n0': {'ranks': {'0': _entry(_working(90, 200), 200.0)}},
               'n1': {'ranks': {'1': _entry(_working(90, 100), 100.0)}}}  # it ended at 100 (its samples stop)
    assert hb.judge(records)['culprits'] == []
    assert hb.judge({'n0': records['n0']})['culprits'] == []  # one rank alone


def test_what_a_job_wrote_is_checked_field_by_field():
    records = {
        'n0': {'ranks': {'0': _entry(_working(100, 104)), 'x': _entry(_working(100, 104)), '7': _entry(_working(100, 104)),
                         '1': {'samples': 'no'}, '2': _entry([('soon', 'T', 1, None), [1e300, 'T', 1, 2]]),
                         '3': _entry([(100.0, 'Tt', 'lots', -1), (102.0, '\x1b', True, 2 ** 60)])}},
        'n1': 'not a record', 'n2': {'ranks': ['0']}}
    rows = hb.rows(records, world_size=4)
    assert [(row['node'], row['rank']) for row in rows] == [('n0', 0), ('n0', 3)]
    assert rows[1] == {'node': 'n0', 'rank': 3, 'state': '?', 'stopped_since': None, 'active_at': 100.0,
                       'last_seen': 102.0, 'cpu_s': None, 'step': None}


def test_the_summary_line_names_the_rank_its_step_and_its_stack():
    judgment = hb.judge(dict(FROZEN, node1={'ranks': {'1': dict(FROZEN['node1']['ranks']['1'], samples=[
        [130.0, 'T', 28.0, 12], [132.0, 'T', 28.0, 12]])}}))
    assert hb.lines(judgment, {('node1', 1): 'forward (train.py:901)'}) == [
        'heartbeat  : rank 1 (node1) stopped (state T) since 00:02:10Z, CPU time flat at 28.0 s; last step 12; '
        'its stack: forward (train.py:901)']
    assert hb.lines(hb.judge({})) == []


# --- the verdict: the frozen rank's node, not the first to fail ----------------------------------------------

# recorded from the lab (gloo, torch 2.13): a peer's collective timed out waiting for the frozen rank
TIMED_OUT = ['[rank 0] [rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:'
             '81] Timed out waiting 15000ms for recv operation to complete',
             'torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ',
             '  exitcode  : 1 (pid: 5150) ']
OWN_ERROR = ['[rank 2] ZeroDivisionError: division by zero', '  exitcode  : 1 (pid: 5151) ']
FROZEN_RANK = [{'node': 'node1', 'rank': 1, 'why': 'stopped (state T) since 08:41:02Z, CPU time flat at 3.1 s'}]


def _job(exit_code, ended, node_rank, stop=None, status='exited'):
    job = {'exit_code': exit_code, 'ended_at_epoch': ended, 'status': status, 'node_rank': node_rank, 'signal': None}
    if stop:
        job['stop'] = {'reason': stop, 'detail': 'stopped because node0 (rank 0) failed', 'requested_at_epoch': ended - 1,
                       'requested_at': 'then'}
    return job


def _timed_out_job():
    results = {'node0': _job(1, 145.0, 0), 'node1': _job(-9, 170.0, 1, stop='peer'), 'node2': _job(1, 145.5, 2)}
    return results, {'node0': TIMED_OUT, 'node2': TIMED_OUT}


def test_the_frozen_ranks_node_is_the_cause_not_the_peers_whose_collective_timed_out():
    results, tails = _timed_out_job()
    # today's rule without a heartbeat: a healthy node by the nodes' clocks
    assert exp.judge_results(results, tails=tails)['failed_nodes'] == ['node0']
    verdict = exp.judge_results(results, tails=tails, frozen=FROZEN_RANK)
    assert verdict['outcome'] == 'failed' and verdict['failed_nodes'] == ['node1']
    assert verdict['also_failed'] == ['node0', 'node2'] and verdict['stopped_nodes'] == []
    assert verdict['outcome_detail'] == ('failed on node1 (rank 1 stopped (state T) since 08:41:02Z, CPU time flat at '
                                         '3.1 s); its peers waited for it; then failed: node0, node2')
    assert verdict['blame'] == {'by': 'heartbeat', 'detail': 'the heartbeat shows rank(s) 1 (node1) stopped progressing '
                                                             'while the other ranks did not; the nodes that failed first '
                                                             'died of a lost peer (node0: a collective timeout; node2: a '
                                                             'collective timeout)'}


def test_a_failure_of_its_own_or_a_vanished_node_comes_before_the_heartbeat():
    results, tails = _timed_out_job()
    verdict = exp.judge_results(results, tails=dict(tails, node2=OWN_ERROR), frozen=FROZEN_RANK)
    assert verdict['failed_nodes'] == ['node2'] and verdict['blame']['by'] == 'logs'
    del results['node2']  # it could not be reached at the end: no record of its run
    verdict = exp.judge_results(results, missing_nodes=['node2'], tails=tails, frozen=FROZEN_RANK)
    assert verdict['failed_nodes'] == ['node2'] and verdict['blame']['by'] == 'vanished'
    # a rank of a node that is not the job's is not believed
    results, tails = _timed_out_job()
    verdict = exp.judge_results(results, tails=tails, frozen=[dict(FROZEN_RANK[0], node='elsewhere')])
    assert verdict['blame']['by'] != 'heartbeat'
    # nothing failed: the heartbeat changes nothing
    assert exp.judge_results({'node0': _job(0, 5.0, 0)}, frozen=FROZEN_RANK)['outcome'] == 'succeeded'


def test_a_stall_without_a_stack_that_names_a_rank_is_blamed_on_the_frozen_one():
    results = {'node0': _job(-15, 960.0, 0, stop='stalled'), 'node1': _job(-15, 961.0, 1, stop='peer')}
    verdicts = {'node0': {'state': 'stalled', 'detail': 'no new output for 900 s'}, 'node1': {'state': 'stopped'}}
    verdict = exp.judge_results(results, verdicts, frozen=FROZEN_RANK)
    assert verdict['outcome'] == 'stalled' and verdict['failed_nodes'] == ['node1'] and verdict['blame']['by'] == 'heartbeat'
    assert verdict['outcome_detail'].startswith('stalled on node1 (rank 1 stopped (state T)')
    assert verdict['outcome_detail'].endswith('the stall was seen on node0; stopped: node0')


def test_the_retry_leaves_the_frozen_ranks_node_to_a_spare_and_keeps_the_nodes_without_one():
    results, tails = _timed_out_job()
    verdict = exp.judge_results(results, tails=tails, frozen=FROZEN_RANK)
    current = _retries.row(1, 'r1', '/e/1', verdict, 0, 8, failed_how=_retries.failure(verdict, results))
    decided = _retries.decide(current, [], 1, verdict, nodes=['node0', 'node1', 'node2'], spares=['spare0'],
                              spare_group='spares')
    assert decided['decision'] == 'retry' and decided['nodes'] == ['node0', 'spare0', 'node2']
    assert decided['replaced'][0]['node'] == 'node1' and decided['replaced'][0]['by'] == 'spare0'
    assert decided['replaced'][0]['reason'] == 'its rank hung (blamed by heartbeat)'
    decided = _retries.decide(current, [], 1, verdict, nodes=['node0', 'node1', 'node2'])
    assert decided['decision'] == 'retry' and 'nodes' not in decided


def test_the_report_reads_the_heartbeats_and_names_the_rank_with_its_stack(tmp_path):
    for node, record in FROZEN.items():
        os.makedirs(str(tmp_path / 'outputs' / node))
        (tmp_path / 'outputs' / node / hb.HEARTBEAT_FILE).write_text(json.dumps(record))
    (tmp_path / 'outputs' / 'node1' / 'trainops_stacks_rank_1.txt').write_text(
        'Thread 7 (idle): "MainThread"\n    inject_failure (train.py:874)\n    train (train.py:1020)\n')
    (tmp_path / 'outputs' / 'node2' / hb.HEARTBEAT_FILE).write_text('[' * 100000)
    results, _tails = _timed_out_job()
    result = exp.report_experiment(str(tmp_path), {'run_id': 'r', 'world_size': 3}, results=results)
    manifest = json.loads((tmp_path / 'manifest.json').read_text())
    assert result['failed_nodes'] == ['node1'] and manifest['blame']['by'] == 'heartbeat'
    assert [(c['node'], c['rank']) for c in manifest['heartbeat']['culprits']] == [('node1', 1)]
    assert ('heartbeat  : rank 1 (node1) stopped (state T) since 00:02:10Z, CPU time flat at 28.0 s; its stack: '
            'inject_failure (train.py:874)') in result['table']
    assert 'stacks     : 1 of 3 ranks dumped (the others had ended)' in result['table']
    assert any(line.startswith('not read   : node2: %s' % hb.HEARTBEAT_FILE) for line in result['table']), result['table']


# --- the supervisor samples for real -----------------------------------------------------------------------

# torchrun's stand-in: starts one "rank" with torchrun's variables that writes a metrics record and stops itself
RANK_THAT_STOPS = ('import json, os, signal, sys\n'
                   'out = sys.argv[1]\n'
                   'open(os.path.join(out, "rank_00_metrics.jsonl"), "w").write(json.dumps({"global_step": 4}) + "\\n")\n'
                   'open(os.path.join(out, "rank.pid"), "w").write(str(os.getpid()))\n'
                   'os.kill(os.getpid(), signal.SIGSTOP)\n')
TORCHRUN = ('import os, subprocess, sys\n'
            'env = dict(os.environ, RANK="0", TORCHELASTIC_RUN_ID="r")\n'
            'sys.exit(subprocess.call([sys.executable, "-c", sys.argv[1], sys.argv[2]], env=env))\n')


def test_the_supervisor_records_a_stopped_rank_in_the_output_directory(tmp_path):
    run_dir = tmp_path / 'run'
    out = run_dir / 'outputs'
    out.mkdir(parents=True)
    (run_dir / 'job.json').write_text(json.dumps({'argv': [sys.executable, '-c', TORCHRUN, RANK_THAT_STOPS, str(out)],
                                                  'env': {}, 'chdir': str(tmp_path), 'heartbeat_interval': 0.2,
                                                  'cleanup_grace': 0.5}))
    program = tr.write_supervisor(str(run_dir))
    assert (run_dir / '_heartbeat.py').exists()
    subprocess.run([sys.executable, '-E', '-s', program, str(run_dir / 'job.json')], check=True, timeout=30,
                   cwd=str(run_dir), stdout=subprocess.DEVNULL)
    path = out / hb.HEARTBEAT_FILE

    def stopped_twice():
        try:
            samples = json.loads(path.read_text())['ranks']['0']['samples']
        except (OSError, ValueError, KeyError):
            return False
        return len(samples) >= 2 and samples[-1][1] == samples[-2][1] == 'T'
    try:
        _wait(stopped_twice)
        record = json.loads(path.read_text())
        assert record['ranks']['0']['samples'][-1][3] == 4  # its last metrics step
        assert hb.judge({'n0': record})['rows'][0]['stopped_since'] is not None
    finally:
        os.kill(int((out / 'rank.pid').read_text()), signal.SIGKILL)
    _wait((run_dir / 'exit.json').exists)
    assert oct(os.stat(str(path)).st_mode & 0o777) == '0o600'


def _wait(condition, timeout=20.0):
    import time
    deadline = time.time() + timeout
    while not condition():
        assert time.time() < deadline, 'timed out'
        time.sleep(0.05)
