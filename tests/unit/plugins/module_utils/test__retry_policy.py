# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The retry policy (module_utils/_retry_policy.py) on recorded node log tails: torchrun 2.13's failure report, the
NCCL watchdog's and gloo's texts as torch writes them, a script error, a finished job that aborts on its way out; and
how _retries.decide uses it."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _experiment, _retries, _retry_policy


def _torchrun_report(node, pid, exitcode, traceback):
    """The end of torchrun's output when a rank failed (torch/distributed/elastic/multiprocessing/errors)."""
    signal = ' (SIGABRT)' if exitcode == -6 else ' (SIGKILL)' if exitcode == -9 else ''
    return [
        'E1128 04:10:05.000000 1234 torch/distributed/elastic/multiprocessing/api.py:882] failed (exitcode: %d) '
        'local_rank: 0 (pid: %d) of binary: /usr/bin/python3' % (exitcode, pid),
        'Traceback (most recent call last):',
        '  File "/usr/local/bin/torchrun", line 8, in <module>',
        '    sys.exit(main())',
        'torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ',
        '============================================================',
        'train.py FAILED',
        'Root Cause (first observed failure):',
        '[0]:',
        '  time      : 2026-11-28_04:10:05',
        '  host      : %s' % node,
        '  rank      : 0 (local_rank: 0)',
        '  exitcode  : %d (pid: %d)%s' % (exitcode, pid, signal),
        '  error_file: <N/A>',
        '  traceback : %s' % traceback,
        '============================================================',
    ]


NCCL_TIMEOUT = [
    '[rank 0] [trainops] node=node0 rank=0/2 epoch=0 step=0/40 loss=2.3 samples_per_s=10.0',
    '[rank 0] [rank0]:[E1128 04:10:02.123456789 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective '
    'operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=300000) ran for '
    '300042 milliseconds before timing out.',
    '[rank 0] torch.distributed.DistBackendError: [Rank 0] Watchdog caught collective operation timeout',
] + _torchrun_report('node0', 1240, -6, 'Signal 6 (SIGABRT) received by PID 1240')

NCCL_REMOTE = [
    '[rank 1] torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:'
    '317, remote process exited or there was a network error, NCCL version 2.27.5',
    '[rank 1] ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.',
] + _torchrun_report('node1', 2240, 1, 'To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html')

GLOO_PEER = [
    '[rank 0] RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer '
    '[10.0.0.2]:35177',
] + _torchrun_report('node0', 1240, 1, 'To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html')

GLOO_TIMEOUT = [
    '[rank 1] RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting '
    '300000ms for recv operation to complete',
] + _torchrun_report('node1', 2240, 1, 'To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html')

KILLED = _torchrun_report('node1', 2240, -9, 'Signal 9 (SIGKILL) received by PID 2240')


def _script_error(node):
    return [
        '[rank 0] Traceback (most recent call last):',
        '[rank 0]   File "/srv/ws/train.py", line 12, in <module>',
        '[rank 0]     lr = cfg["lr"]',
        "[rank 0] KeyError: 'lr'",
    ] + _torchrun_report(node, 1240, 1, "KeyError: 'lr'")


def _finished_then_aborted(node, marker):
    return ['[rank 0] %s' % marker, '[rank 0] terminate called without an active exception'] + _torchrun_report(
        node, 1240, -6, 'Signal 6 (SIGABRT) received by PID 1240')


HF_END = "{'train_runtime': 41.2, 'train_samples_per_second': 97.1, 'train_loss': 2.1, 'epoch': 3.0}"
FAILED = {'node0': {'exit_code': 1}, 'node1': {'exit_code': 1}}


@pytest.mark.parametrize('tails, why', [
    ({'node0': NCCL_TIMEOUT, 'node1': NCCL_REMOTE}, 'node0: a collective timeout, node1: a NCCL error'),
    ({'node0': GLOO_PEER, 'node1': GLOO_TIMEOUT}, 'node0: a gloo error, node1: a collective timeout'),
    ({'node0': GLOO_PEER, 'node1': KILLED}, 'node0: a gloo error, node1: a rank killed by a signal'),
])
def test_an_early_failure_that_looks_like_infrastructure_is_retried(tails, why):
    assert _retry_policy.early_failure(['node0', 'node1'], FAILED, tails) == dict(
        retry=True, reason='it looks like infrastructure (%s)' % why)


def test_the_same_nccl_error_on_every_node_is_no_script_error():
    tails = {'node0': NCCL_REMOTE, 'node1': NCCL_REMOTE}
    assert _retry_policy.early_failure(['node0', 'node1'], FAILED, tails)['retry'] is True


def test_a_node_killed_by_a_signal_is_infrastructure():
    results = {'node0': {'exit_code': None, 'signal': 'SIGKILL'}}
    assert _retry_policy.early_failure(['node0'], results, {})['reason'] == 'it looks like infrastructure (node0: killed by SIGKILL)'


def test_the_same_exception_at_the_end_of_every_failed_node_is_a_script_error_not_retried():
    tails = {'node0': _script_error('node0'), 'node1': _script_error('node1')}
    assert _retry_policy.early_failure(['node0', 'node1'], FAILED, tails) == dict(
        retry=False, reason="a script error (the same on every failed node: KeyError: 'lr')")
    assert _retry_policy.last_exception(_retry_policy.tail_lines(KILLED)) is None  # torchrun's own is no rank's


def test_an_early_failure_with_nothing_in_the_logs_is_not_retried():
    assert _retry_policy.early_failure(['node0'], FAILED, {}) == dict(
        retry=False, reason='nothing in the logs looks like infrastructure')


@pytest.mark.parametrize('marker', ['[trainops] done node=node0 rank=0/2 final_loss=2.1000', HF_END])
def test_a_job_that_finished_then_aborted_on_its_way_out_is_an_unclean_exit(marker):
    tails = {'node0': _finished_then_aborted('node0', marker),
             # the Hugging Face Trainer prints its last line on the first node only
             'node1': ['[rank 1] terminate called without an active exception']
             + _torchrun_report('node1', 2240, -6, 'Signal 6 (SIGABRT) received by PID 2240')}
    found = _retry_policy.unclean_exit(['node0', 'node1'], FAILED, tails)
    assert found['nodes'] == ['node0', 'node1']
    assert found['detail'].startswith('finished its work, then exited uncleanly on node0, node1 (SIGABRT')
    assert 'destroy_process_group()' in found['detail']


def test_no_unclean_exit_without_the_end_of_training_the_abort_or_with_an_exception_after_it():
    done = '[trainops] done node=node0 rank=0/2 final_loss=2.1000'
    assert _retry_policy.unclean_exit(['node0'], FAILED, {'node0': NCCL_TIMEOUT}) is None  # not finished
    assert _retry_policy.unclean_exit(['node0'], FAILED, {'node0': ['[rank 0] ' + done] + KILLED}) is None
    after = _finished_then_aborted('node0', done)
    after.insert(1, '[rank 0] RuntimeError: boom')
    assert _retry_policy.unclean_exit(['node0'], FAILED, {'node0': after}) is None
    assert _retry_policy.unclean_exit([], FAILED, {}) is None


def test_without_progress_counts_the_attempts_in_a_row_that_did_not_pass_the_end_step_before():
    rows = [dict(end_step=9), dict(end_step=9), dict(end_step=7)]
    assert _retry_policy.without_progress(rows) == 2
    assert _retry_policy.without_progress(rows + [dict(end_step=10)]) == 0
    assert _retry_policy.without_progress([dict(end_step=9), dict(end_step=None), dict(end_step=3)]) == 0
    assert _retry_policy.without_progress([dict(end_step=9)]) == 0


def test_the_policy_is_checked_before_any_node_is_touched():
    assert _retry_policy.problems({}) == [] and _retry_policy.problems(None) == []
    assert _retry_policy.problems({'fatal_patterns': ['CUDA out of memory'], 'retry_exit_codes': [-9, 3]}) == []
    lines = _retry_policy.problems({'fatal_patterns': ['('], 'retry_exit_codes': ['x'], 'retryable': []})
    assert lines[0].startswith('trainops_retry_policy: retryable is not a key (use fatal_exit_codes, fatal_patterns, '
                               'retry_exit_codes, retry_patterns; e.g. ')
    assert lines[1].startswith("trainops_retry_policy.retry_exit_codes=['x']: give a list of exit codes")
    assert lines[2].startswith("trainops_retry_policy.fatal_patterns: '(' is not a regular expression")
    assert _retry_policy.problems('x')[0].startswith("trainops_retry_policy='x': give a mapping")


def test_the_stated_policy_matches_exit_codes_of_torchrun_and_its_ranks_and_patterns_fatal_first():
    policy = {'retry_exit_codes': [-9], 'fatal_patterns': ['KeyError']}
    tails = {'node0': _script_error('node0'), 'node1': KILLED}
    assert _retry_policy.stated(policy, ['node0', 'node1'], FAILED, tails) == (
        'fatal', "node0: the log matches 'KeyError' is fatal (trainops_retry_policy)")
    assert _retry_policy.stated(policy, ['node1'], FAILED, tails) == (
        'retry', 'node1: exit code -9 is retryable (trainops_retry_policy)')
    assert _retry_policy.stated({}, ['node1'], FAILED, tails) is None


# --- how _retries.decide uses it -------------------------------------------------------------------------------------

def _early(tails, policy=None, results=None):
    verdict = dict(outcome='failed', outcome_detail='failed on node0', failed_nodes=['node0'], also_failed=['node1'],
                   stopped_nodes=[])
    attempt = dict(number=1, first='run1', previous=None, retries=2, rows=[], resumed_from=None, run_id='run1',
                   experiment_dir='/e/run1', policy=policy)
    return _retries.record(attempt, verdict, results or FAILED, {'steps': None}, (), None, tails)['retry']


def test_a_job_without_metrics_failing_in_a_nccl_cascade_is_retried_a_script_error_is_not():
    assert _early({'node0': NCCL_TIMEOUT, 'node1': NCCL_REMOTE}) == {
        'decision': 'retry', 'reason': 'failed is retried (2 of 2 retries left)'}
    retry = _early({'node0': _script_error('node0'), 'node1': _script_error('node1')})
    assert retry['decision'] == 'stop'
    assert retry['reason'] == ("every rank failed before its first step (node0 exit code 1; a script error (the same "
                               "on every failed node: KeyError: 'lr')): a retry would fail the same way (bad input or "
                               "a script error; see the logs)")


def test_the_users_policy_makes_a_failure_fatal_or_retryable():
    nccl = {'node0': NCCL_TIMEOUT, 'node1': NCCL_REMOTE}
    assert _early(nccl, {'fatal_patterns': ['Watchdog caught']}) == {
        'decision': 'stop', 'reason': "node0: the log matches 'Watchdog caught' is fatal (trainops_retry_policy)"}
    script = {'node0': _script_error('node0'), 'node1': _script_error('node1')}
    assert _early(script, {'retry_exit_codes': [1]}) == {
        'decision': 'retry',
        'reason': 'failed is retried (2 of 2 retries left) (node0: exit code 1 is retryable (trainops_retry_policy))'}


def test_the_retries_end_after_attempts_without_progress_naming_the_limit():
    verdict = dict(outcome='failed', outcome_detail='failed on node0', failed_nodes=['node0'], also_failed=[],
                   stopped_nodes=['node1'])
    results = {'node0': {'exit_code': 1}, 'node1': {'exit_code': -15, 'stop': {'reason': 'peer'}}}
    rows = []
    for number, (steps, results_node0) in enumerate([(9, 1), (9, 2), (8, 3)], 1):
        results = dict(results, node0={'exit_code': results_node0})
        attempt = dict(number=number, first='run1', previous=None, retries=5, rows=rows, run_id='run%d' % number,
                       experiment_dir='/e', resumed_from={'path': 'p', 'global_step': 5} if rows else None,
                       without_progress=2)
        recorded = _retries.record(attempt, verdict, results, {'steps': steps})
        rows = recorded['attempts']
    assert [r['decision'] for r in rows] == ['retry', 'retry', 'stop']
    assert rows[-1]['reason'] == ('2 attempt(s) in a row ended without progress (end step 8, not past the attempt '
                                  'before; trainops_retries_without_progress=2)')


def test_an_unclean_exit_is_reported_as_finished_and_not_retried(tmp_path):
    """report_experiment reads the collected node logs' ends, says the job finished, and does not retry it."""
    done = '[trainops] done node=node%d rank=%d/2 final_loss=2.1000'
    os.makedirs(str(tmp_path / 'logs'))
    for rank in (0, 1):
        (tmp_path / 'logs' / ('node_%d.txt' % rank)).write_text('\n'.join(
            _finished_then_aborted('node%d' % rank, done % (rank, rank))) + '\n')
    manifest = {'run_id': 'run1', 'nodes': [{'host': 'node0', 'ranks': [0]}, {'host': 'node1', 'ranks': [1]}]}
    results = {'node0': {'exit_code': 1, 'node_rank': 0, 'ended_at_epoch': 10.0},
               'node1': {'exit_code': 1, 'node_rank': 1, 'ended_at_epoch': 11.0}}
    attempt = dict(number=1, first='run1', previous=None, retries=2, rows=[], resumed_from=None)
    report = _experiment.report_experiment(str(tmp_path), manifest=manifest, results=results, attempt=attempt)
    written = json.loads((tmp_path / 'manifest.json').read_text())
    assert written['outcome'] == 'failed' and written['unclean_exit']['nodes'] == ['node0', 'node1']
    assert written['outcome_detail'].startswith('finished its work, then exited uncleanly on node0, node1')
    assert written['retry']['decision'] == 'stop'
    assert written['retry']['reason'].startswith('not retried: the job finished its work, then exited uncleanly')
    assert report['table'][0].startswith('outcome    : finished its work')


def test_a_retry_that_leaves_a_node_out_is_made_whatever_the_attempts_without_progress():
    verdict = dict(outcome='failed', outcome_detail='failed on node1', failed_nodes=['node1'], also_failed=[],
                   stopped_nodes=['node0'])
    results = {'node1': {'exit_code': 1}, 'node0': {'exit_code': -15, 'stop': {'reason': 'peer'}}}
    rows = [dict(attempt=1, start_step=0, end_step=9, failure=[['node1', 'exit code 1']])]
    attempt = dict(number=2, first='run1', previous='run1', retries=3, rows=rows, run_id='run2', experiment_dir='/e',
                   resumed_from={'path': 'p', 'global_step': 8}, without_progress=1, nodes=['node0', 'node1'],
                   spares=['node2'], spare_group='spares')
    retry = _retries.record(attempt, verdict, results, {'steps': 9})['retry']
    assert retry['decision'] == 'retry' and retry['nodes'] == ['node0', 'node2']
    # on the same nodes (another failure): the limit ends the retries
    retry = _retries.record(attempt, verdict, {'node1': {'exit_code': 2}, 'node0': results['node0']}, {'steps': 9})['retry']
    assert retry['decision'] == 'stop' and 'trainops_retries_without_progress=1' in retry['reason']


@pytest.mark.parametrize('lines, words', [
    (['[rank0]: RuntimeError: [third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [10.0.0.2]:4'],
     'a gloo error'),
    (['[rank3]:[E1128 10:00:00 ProcessGroupNCCL.cpp:632] Watchdog caught collective operation timeout: WorkNCCL(...)',
     '  exitcode  : -6 (pid: 12) '], 'a collective timeout'),
    (['torch.distributed.DistNetworkError: failed to recv, got 0 bytes'], 'a lost rendezvous'),
    # a failure of the node's own, even with a lost peer's line before it
    (['Connection reset by peer', 'ValueError: bad shape'], None),
    (['Signal 9 (SIGKILL) received by PID 7', 'Connection closed by peer'], None),
    (['  exitcode  : -11 (pid: 7) '], None),
    (['nothing at all'], None),
])
def test_a_peer_cascade_is_told_from_a_failure_of_the_nodes_own(lines, words):
    assert _retry_policy.peer_cascade(lines) == words
