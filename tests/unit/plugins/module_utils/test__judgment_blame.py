# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Which node is blamed (module_utils/_judgment.py blame, judge_results' hung): the controller's clock before the
nodes' clocks, a vanished node before one that ended by a collective timeout, and the hung rank the stack dumps name
before the node whose wait saw the stall."""

from __future__ import annotations

import json
import os

from ansible_collections.trainops.multinode.plugins.module_utils import _experiment as exp
from ansible_collections.trainops.multinode.plugins.module_utils import _judgment, _retries


def _job(exit_code, ended=None, status='exited', node_rank=None, signal=None, stop=None):
    job = {'exit_code': exit_code, 'ended_at_epoch': ended, 'status': status, 'node_rank': node_rank, 'signal': signal}
    if stop:
        job['stop'] = {'reason': stop[0], 'detail': 'why', 'requested_at_epoch': stop[1], 'requested_at': 'then'}
    return job


def _seen(state, running=None, ended=None, unreachable=None, detail=None):
    """A wait's verdict with the controller's times (torchrun_wait: seen_running_at, seen_ended_at, unreachable_since)."""
    return {'state': state, 'detail': detail, 'seen_running_at': running, 'seen_ended_at': ended,
            'unreachable_since': unreachable}


# --- the controller's clock before the nodes' ------------------------------------------------------------

def test_the_controllers_clock_overrides_a_node_clock_that_runs_behind():
    # n0's clock is 100 s behind: by the nodes' clocks it ended first; the controller saw it still running at 1015,
    # after n1 had ended (1010): n1 is the cause
    results = {'n0': _job(1, 100.0, node_rank=0), 'n1': _job(1, 200.0, node_rank=1)}
    verdicts = {'n0': _seen('failed', running=1015.0, ended=1022.0), 'n1': _seen('failed', running=1002.0, ended=1010.0)}
    verdict = exp.judge_results(results, verdicts)
    assert verdict['failed_nodes'] == ['n1'] and verdict['also_failed'] == ['n0']
    assert verdict['outcome_detail'] == 'failed on n1 (node rank 1: exit code 1); then failed: n0'
    assert verdict['blame'] == {'by': 'controller_clock', 'detail': "n1 ended first on the controller's clock "
                                                                    "(the controller saw n0 still running after)"}
    # without the controller's times the nodes' clocks decide, and the judgment says so
    verdict = exp.judge_results(results)
    assert verdict['failed_nodes'] == ['n0'] and verdict['blame']['by'] == 'node_clocks'
    assert 'the wait saw no end time of n0, n1' in verdict['blame']['detail']


def test_ends_the_controller_cannot_order_fall_back_to_the_nodes_clocks():
    # both were last seen running before either was seen ended (one question's time apart): the nodes' clocks decide
    results = {'n0': _job(1, 500.4), 'n1': _job(-6, 500.1, signal='SIGABRT')}
    verdicts = {'n0': _seen('failed', running=1000.0, ended=1003.0), 'n1': _seen('failed', running=1000.5, ended=1009.0)}
    verdict = exp.judge_results(results, verdicts)
    assert verdict['failed_nodes'] == ['n1']
    assert verdict['blame'] == {'by': 'node_clocks', 'detail': "n1 ended first by the nodes' own clocks (the "
                                                               "controller saw n0, n1 end within one question of each other)"}


def test_times_that_are_no_numbers_are_not_believed():
    results = {'n0': _job(1, 100.0), 'n1': _job(1, 200.0)}
    verdicts = {'n0': _seen('failed', running='1015', ended=True), 'n1': _seen('failed', running=float('nan'), ended=1010.0)}
    assert exp.judge_results(results, verdicts)['failed_nodes'] == ['n0']


def test_a_single_own_failure_is_blamed_as_the_only_one():
    verdict = exp.judge_results({'n0': _job(1, 5.0), 'n1': _job(-15, 6.0, stop=('peer', 5.5))})
    assert verdict['failed_nodes'] == ['n0'] and verdict['blame']['by'] == 'only'


# --- a node that vanished before one that ended by a collective timeout ----------------------------------

def test_a_rebooted_node_is_the_cause_before_the_peers_whose_collective_timed_out():
    # n1 rebooted (no answer from 1005 to 1390, then its job is lost, with no end time); n0 and n2 ended by the
    # collective timeout (SIGABRT at about 1310) while n1 did not answer: the controller cannot order them, n1 vanished
    results = {'n0': _job(-6, 1309.0, node_rank=0, signal='SIGABRT'), 'n1': _job(None, status='lost', node_rank=1),
               'n2': _job(-6, 1309.5, node_rank=2, signal='SIGABRT')}
    verdicts = {'n0': _seen('failed', running=1300.0, ended=1312.0), 'n1': _seen('failed', running=1000.0, ended=1392.0),
                'n2': _seen('failed', running=1301.0, ended=1311.0)}
    verdict = exp.judge_results(results, verdicts)
    assert verdict['outcome'] == 'failed' and verdict['failed_nodes'] == ['n1']
    assert verdict['also_failed'] == ['n0', 'n2']
    assert verdict['outcome_detail'].startswith('failed on n1 (node rank 1: lost (its supervisor is gone)); then failed')
    assert verdict['blame']['by'] == 'vanished'
    # and without any time at all
    assert exp.judge_results(results)['failed_nodes'] == ['n1']


def test_a_node_gone_in_the_wait_or_missing_at_the_end_is_the_cause():
    results = {'n0': _job(-6, 1309.0, signal='SIGABRT')}
    verdicts = {'n0': _seen('failed', running=1300.0, ended=1312.0),
                'n2': _seen('gone', running=990.0, unreachable=1001.0, detail='no answer since 1001')}
    verdict = exp.judge_results(results, verdicts, missing_nodes=['n2'])
    assert verdict['failed_nodes'] == ['n2'] and verdict['also_failed'] == ['n0']
    # the controller saw n2 stop answering (1001) while n0 still ran (1300)
    assert verdict['blame'] == {'by': 'vanished', 'detail': 'n2 vanished (unreachable or lost) before the others ended '
                                                            '(the controller saw n0 still running after)'}


def test_a_node_that_ended_while_the_lost_one_still_ran_is_the_cause():
    # n0 failed (1005) before n1 was last seen running (1010); n1 was lost later: n0 is the cause
    results = {'n0': _job(1, 1004.0, node_rank=0), 'n1': _job(None, status='lost', node_rank=1)}
    verdicts = {'n0': _seen('failed', running=1000.0, ended=1005.0), 'n1': _seen('failed', running=1010.0, ended=1200.0)}
    verdict = exp.judge_results(results, verdicts)
    assert verdict['failed_nodes'] == ['n0'] and verdict['also_failed'] == ['n1']
    assert verdict['blame']['by'] == 'controller_clock'


def test_blame_alone_orders_the_candidates():
    jobs = {'a': _job(1, 3.0), 'b': _job(1, 2.0)}
    assert _judgment.blame(['a', 'b'], jobs)[0] == ['b']
    assert _judgment.blame(['a', 'b', 'm'], jobs, missing=['m'])[0] == ['m']
    assert _judgment.blame(['m'], {}, missing=['m']) == (['m'], {'by': 'vanished', 'detail': 'm vanished (unreachable or lost)'})
    assert _judgment.vanished('x', None, {'x': {'state': 'gone'}}, ()) is True
    assert _judgment.vanished('x', {'status': 'exited'}, {}, ()) is False


# --- a hang: the rank the stack dumps name ------------------------------------------------------------------

HUNG = [{'node': 'n1', 'rank': 3, 'where': 'stuck (train.py:9)'}]


def _stalled_job():
    results = {'n0': _job(-15, 960.0, node_rank=0, stop=('stalled', 959.0)),
               'n1': _job(-15, 961.0, node_rank=1, stop=('peer', 960.0)),
               'n2': _job(-15, 961.0, node_rank=2, stop=('peer', 960.0))}
    verdicts = {'n0': _seen('stalled', detail='no new output for 900 s'), 'n1': _seen('stopped'), 'n2': _seen('stopped')}
    return results, verdicts


def test_a_stall_blames_the_node_of_the_hung_rank_not_the_first_wait_to_see_it():
    results, verdicts = _stalled_job()
    verdict = exp.judge_results(results, verdicts, hung=HUNG)
    assert verdict['outcome'] == 'stalled' and verdict['failed_nodes'] == ['n1']
    assert verdict['stopped_nodes'] == ['n0', 'n2']
    assert verdict['outcome_detail'] == ('stalled on n1 (rank 3 hung at stuck (train.py:9); its peers wait in torch); '
                                         'the stall was seen on n0 (no new output for 900 s); stopped: n0, n2')
    assert verdict['blame'] == {'by': 'stacks', 'detail': 'the stack dumps name rank(s) 3 (n1) outside torch while the '
                                                          'others wait in it'}
    # without a hung rank: the node whose wait saw the stall, as before
    verdict = exp.judge_results(results, verdicts)
    assert verdict['failed_nodes'] == ['n0'] and verdict['blame']['by'] == 'wait'


def test_a_collective_timeout_during_the_stall_follows_the_hung_rank():
    results, verdicts = _stalled_job()
    results['n2'] = _job(-6, 955.0, node_rank=2, signal='SIGABRT')  # its watchdog fired before the stop
    verdict = exp.judge_results(results, verdicts, hung=HUNG)
    assert verdict['outcome'] == 'stalled' and verdict['failed_nodes'] == ['n1'] and verdict['also_failed'] == ['n2']


def test_hung_ranks_count_only_for_a_stall_and_for_the_jobs_nodes():
    results, verdicts = _stalled_job()
    assert exp.judge_results(results, verdicts, hung=[dict(HUNG[0], node='elsewhere')])['failed_nodes'] == ['n0']
    assert exp.judge_results({'n0': _job(1, 5.0), 'n1': _job(0, 6.0)}, hung=HUNG)['failed_nodes'] == ['n0']


def test_the_retry_blames_the_hung_ranks_node():
    # the verdict's failed_nodes are what the retry holds against a node (_retries.failure): twice stalled on n1 -> the
    # spare takes n1's node rank, not n0's
    results, verdicts = _stalled_job()
    verdict = exp.judge_results(results, verdicts, hung=HUNG)
    assert _retries.failure(verdict, results) == [['n1', 'stalled']]
    before = _retries.row(1, 'r1', '/e/1', verdict, 0, 40, failed_how=[['n1', 'stalled']])
    attempt = {'number': 2, 'retries': 2, 'rows': [before], 'resumed_from': {'path': '/c', 'global_step': 40},
               'nodes': ['n0', 'n1', 'n2'], 'spares': ['s0'], 'spare_group': 'spares'}
    recorded = _retries.record(attempt, verdict, results, {'steps': 40})
    assert recorded['retry']['decision'] == 'retry' and recorded['retry']['nodes'] == ['n0', 's0', 'n2']


# --- the report: the stacks read from the experiment decide the stall's culprit -------------------------------

def test_the_report_blames_the_rank_the_dumps_name_and_says_so(tmp_path):
    dumps = {('n0', 0): 'Thread 1 (idle): "MainThread"\n    _engine_run_backward (torch/autograd/graph.py:979)\n',
             ('n1', 3): 'Thread 2 (idle): "MainThread"\n    stuck (train.py:9)\n',
             ('n2', 5): 'Thread 3 (idle): "MainThread"\n    all_reduce (torch/distributed/distributed_c10d.py:2501)\n'}
    for (node, rank), text in dumps.items():
        os.makedirs(str(tmp_path / 'outputs' / node), exist_ok=True)
        (tmp_path / 'outputs' / node / ('trainops_stacks_rank_%d.txt' % rank)).write_text(text)
    results, verdicts = _stalled_job()
    result = exp.report_experiment(str(tmp_path), {'run_id': 'r'}, results=results, verdicts=verdicts)
    manifest = json.loads((tmp_path / 'manifest.json').read_text())
    assert result['failed_nodes'] == manifest['failed_nodes'] == ['n1']
    assert manifest['blame']['by'] == 'stacks' and manifest['stacks']['culprits'][0]['rank'] == 3
    assert result['table'][0].startswith('outcome    : stalled on n1 (rank 3 hung at stuck (train.py:9)')
    assert result['table'][1] == ('blamed     : the stack dumps name rank(s) 3 (n1) outside torch while the others '
                                  'wait in it')


# --- the logs: a node whose ranks died of a lost peer follows the one that failed on its own -------------------

# recorded from tests/e2e/test_retries_local.py (gloo, torch 2.13): node1's rank raised, node0's lost its peer
OWN_FAILURE = ['[rank 1] RuntimeError: debug failure injected: rank 1 at global_step 7 (debug.fail_rank/debug.fail_step)',
               'torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ',
               '  exitcode  : 1 (pid: 32328) ',
               '  RuntimeError: debug failure injected: rank 1 at global_step 7 (debug.fail_rank/debug.fail_step)']
LOST_PEER = ['[rank 0] [rank0]: RuntimeError: Got the following error when running the callback: RuntimeError: '
             '[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer '
             '[127.0.0.1]:42403. This is typically caused by a remote worker crashing.',
             'torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ',
             '  exitcode  : 1 (pid: 32329) ',
             '  RuntimeError: Got the following error when running the callback: RuntimeError: [/__w/pytorch/pytorch/'
             'third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:42403.']
KILLED = ['Signal 9 (SIGKILL) received by PID 4242', 'torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ',
          '  exitcode  : -9 (pid: 4242) ']


def test_the_node_that_failed_on_its_own_is_blamed_before_one_whose_ranks_lost_their_peer():
    # by the nodes' clocks node0 ended first (its rank's collective failed at once, node1's torchrun noticed later)
    results = {'node0': _job(1, 100.0, node_rank=0), 'node1': _job(1, 100.4, node_rank=1)}
    for own in (OWN_FAILURE, KILLED):
        verdict = exp.judge_results(results, tails={'node0': LOST_PEER, 'node1': own})
        assert verdict['failed_nodes'] == ['node1'] and verdict['also_failed'] == ['node0'], verdict
        assert verdict['blame'] == {'by': 'logs', 'detail': "node1 failed on its own; the others' ranks died of a lost "
                                                            "peer (node0: a gloo error)"}
    # logs that tell nothing apart leave it to the nodes' clocks
    for tails in (None, {'node0': LOST_PEER, 'node1': LOST_PEER}, {'node0': OWN_FAILURE, 'node1': OWN_FAILURE}):
        verdict = exp.judge_results(results, tails=tails)
        assert verdict['failed_nodes'] == ['node0'] and verdict['blame']['by'] == 'node_clocks', verdict
