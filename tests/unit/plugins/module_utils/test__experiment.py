# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
import os
import stat

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _experiment as exp
from ansible_collections.trainops.multinode.plugins.module_utils import _experiment_metrics
from ansible_collections.trainops.multinode.plugins.module_utils import _srun


def record(rank, global_step, world_size=4, loss=None, samples_per_s=100.0, step_time_s=0.5, tflops=10.0, node=None):
    return dict(
        rank=rank,
        world_size=world_size,
        local_rank=rank % 2,
        node=node or 'node{0}'.format(rank // 2),
        epoch=0,
        step=global_step,
        global_step=global_step,
        loss=(10.0 - global_step) if loss is None else loss,
        grad_norm=1.0,
        lr=0.001,
        step_time_s=step_time_s,
        samples_per_s=samples_per_s,
        tflops=tflops,
    )


def write_metrics(exp_path, rank, records, tail='', node=None):
    """``outputs/<node>/rank_<rank>_metrics.jsonl``, as the collect lays them out (node: node<rank // 2> by default)."""
    outputs = os.path.join(str(exp_path), 'outputs', node or 'node{0}'.format(rank // 2))
    if not os.path.isdir(outputs):
        os.makedirs(outputs)
    with open(os.path.join(outputs, 'rank_{0}_metrics.jsonl'.format(rank)), 'w') as fd:
        for rec in records:
            fd.write(json.dumps(rec) + '\n')
        fd.write(tail)


# --- state=created ---------------------------------------------------------

def test_create_makes_root_leaf_and_subdirs(tmp_path):
    root = tmp_path / 'a' / 'b'
    result = exp.create_experiment_dir(str(root), 'run')
    assert result['path'] == str(root / 'run')
    assert result['name'] == 'run'
    assert (root / 'run' / 'logs').is_dir()
    assert (root / 'run' / 'outputs').is_dir()
    assert result['logs_dir'] == str(root / 'run' / 'logs')
    assert result['outputs_dir'] == str(root / 'run' / 'outputs')


def test_create_never_reuses_existing(tmp_path):
    (tmp_path / 'run').mkdir()
    (tmp_path / 'run' / 'keep.txt').write_text('x')
    (tmp_path / 'run_2').write_text('a file, not a dir')
    result = exp.create_experiment_dir(str(tmp_path), 'run')
    assert result['name'] == 'run_3'
    assert (tmp_path / 'run' / 'keep.txt').read_text() == 'x'
    assert not (tmp_path / 'run' / 'logs').exists()
    again = exp.create_experiment_dir(str(tmp_path), 'run')
    assert again['name'] == 'run_4'


def test_create_check_mode_creates_nothing(tmp_path):
    root = tmp_path / 'root'
    result = exp.create_experiment_dir(str(root), 'run', check_mode=True)
    assert result['path'] == str(root / 'run')
    assert not root.exists()
    root.mkdir()
    (root / 'run').mkdir()
    result = exp.create_experiment_dir(str(root), 'run', check_mode=True)
    assert result['name'] == 'run_2'
    assert not (root / 'run_2').exists()


@pytest.mark.parametrize('name', ['', '.', '..', 'a/b', '../x'])
def test_create_rejects_bad_names(tmp_path, name):
    with pytest.raises(exp.ExperimentError):
        exp.create_experiment_dir(str(tmp_path), name)


def test_create_root_is_a_file(tmp_path):
    (tmp_path / 'f').write_text('')
    with pytest.raises(exp.ExperimentError):
        exp.create_experiment_dir(str(tmp_path / 'f'), 'run')


# --- reading metrics ---------------------------------------------------------

def test_read_tolerates_truncated_last_line(experiment):
    write_metrics(experiment, 0, [record(0, 1), record(0, 2)], tail='{"rank": 0, "global_st')
    metrics = exp.read_metrics(str(experiment))
    assert len(metrics['by_rank'][0]) == 2
    assert metrics['truncated_files'] == ['node0/rank_0_metrics.jsonl']
    assert metrics['bad_lines'] == 0


def test_read_counts_bad_middle_lines_and_uses_file_rank(experiment):
    rec = record(3, 1)
    del rec['rank']
    write_metrics(experiment, 3, [rec], tail='garbage\n\n' + json.dumps(record(3, 2)) + '\n')
    metrics = exp.read_metrics(str(experiment))
    assert [r['global_step'] for r in metrics['by_rank'][3]] == [1, 2]
    assert metrics['bad_lines'] == 1
    assert metrics['truncated_files'] == []


def test_read_takes_each_node_from_its_own_directory_only(experiment):
    write_metrics(experiment, 0, [record(0, 1)], node='node0')
    write_metrics(experiment, 2, [record(2, 1)], node='node1')
    # the flat layout of before, a symbolic link posing as a node and a linked metrics file are nobody's
    (experiment / 'outputs' / 'rank_1_metrics.jsonl').write_text(json.dumps(record(1, 1)) + '\n')
    os.symlink(str(experiment / 'outputs' / 'node0'), str(experiment / 'outputs' / 'node9'))
    os.symlink(str(experiment / 'outputs' / 'node0' / 'rank_0_metrics.jsonl'),
               str(experiment / 'outputs' / 'node1' / 'rank_3_metrics.jsonl'))
    metrics = exp.read_metrics(str(experiment))
    assert sorted(metrics['by_rank']) == [0, 2]
    assert metrics['files'] == ['node0/rank_0_metrics.jsonl', 'node1/rank_2_metrics.jsonl']
    assert metrics['rank_nodes'] == {0: 'node0', 2: 'node1'}


def test_a_rank_two_nodes_report_is_named_not_merged(experiment):
    write_metrics(experiment, 0, [record(0, s, world_size=2, loss=2.0) for s in (1, 2)], node='node0')
    write_metrics(experiment, 1, [record(1, s, world_size=2, loss=4.0) for s in (1, 2)], node='node0')
    # node1 was launched with the same ranks by mistake: its rank 1 must not be folded into node0's
    write_metrics(experiment, 1, [record(1, s, world_size=2, loss=8.0) for s in (1, 2, 3)], node='node1')
    metrics = exp.read_metrics(str(experiment))
    assert [r['loss'] for r in metrics['by_rank'][1]] == [4.0, 4.0]
    summary = exp.summarize(metrics)
    assert summary['duplicate_ranks'] == {'1': ['node0', 'node1']}
    assert summary['records_per_rank'] == {'0': 2, '1': 2} and summary['steps'] == 2
    assert summary['final_loss'] == pytest.approx(3.0)
    ranks = next(line for line in exp.summary_table(summary) if line.startswith('ranks'))
    assert ranks.endswith(": 2/2 (rank 1 reported by node0, node1: node0's kept)")


def test_nodes_count_the_logical_nodes_not_the_hosts(experiment):
    # the local default: two logical nodes (inventory node0, node1) on one host
    for rank in range(4):
        write_metrics(experiment, rank, [record(rank, 1, node='box')], node='node{0}'.format(rank // 2))
    summary = exp.summarize(exp.read_metrics(str(experiment)))
    assert summary['nodes'] == ['node0', 'node1'] and summary['hosts'] == ['box']
    assert 'nodes      : 2 on 1 host' in exp.summary_table(summary)


@pytest.mark.parametrize('tflops, shown', [
    (None, 'n/a'),
    (0.0, '0 TFLOP/s'),
    (0.000423456, '423 MFLOP/s'),
    (0.0042, '4.20 GFLOP/s'),
    (0.0421, '42.1 GFLOP/s'),
    (0.999, '999 GFLOP/s'),
    (1.0, '1.00 TFLOP/s'),
    (12.34, '12.3 TFLOP/s'),
    (1520.0, '1520 TFLOP/s'),
    (1.5e-7, '0.150 MFLOP/s'),
])
def test_flops_read_with_three_significant_digits(tflops, shown):
    assert exp.format_flops(tflops) == shown


def test_a_cpu_run_s_tiny_tflops_is_kept_and_shown(experiment):
    # a CPU rank reports ~1e-4 TFLOP/s: the summary keeps it (6 significant digits) instead of rounding it to 0.0
    for rank in range(2):
        write_metrics(experiment, rank, [record(rank, 1, world_size=2, tflops=0.000211728)])
    summary = exp.summarize(exp.read_metrics(str(experiment)))
    assert summary['tflops_total'] == 0.000423456
    assert 'compute    : 423 MFLOP/s total' in exp.summary_table(summary)


# --- summary -----------------------------------------------------------------

def test_summary_full_run(experiment):
    for rank in range(4):
        recs = [record(rank, step, loss=5.0 - step * 0.5 + rank * 0.1, samples_per_s=100.0 + step, tflops=None if step == 8 else 10.0 + rank)
                for step in range(1, 9)]
        write_metrics(experiment, rank, recs)
    summary = exp.summarize(exp.read_metrics(str(experiment)))
    assert summary['metrics_found'] is True
    assert summary['world_size'] == 4
    assert summary['ranks_seen'] == [0, 1, 2, 3]
    assert summary['missing_ranks'] == []
    assert summary['records_per_rank'] == {'0': 8, '1': 8, '2': 8, '3': 8}
    assert summary['nodes'] == ['node0', 'node1'] and summary['hosts'] == ['node0', 'node1']
    assert summary['duplicate_ranks'] == {}
    assert summary['steps'] == 8
    assert summary['first_step'] == 1
    # mean over ranks at the first / last global step
    assert summary['first_loss'] == pytest.approx(4.5 + 0.15)
    assert summary['final_loss'] == pytest.approx(1.0 + 0.15)
    assert summary['loss_decreased'] is True
    # last 5 records: steps 4..8 -> mean samples_per_s 106 per rank
    assert summary['throughput_samples_per_s'] == pytest.approx(4 * 106.0)
    assert summary['mean_step_time_s'] == pytest.approx(0.5)
    # last non-null tflops per rank (step 8 is null)
    assert summary['tflops_total'] == pytest.approx(10 + 11 + 12 + 13)


def test_summary_missing_ranks_and_uneven_progress(experiment):
    write_metrics(experiment, 0, [record(0, s, world_size=4, loss=3.0) for s in (1, 2, 3)])
    write_metrics(experiment, 2, [record(2, s, world_size=4, loss=1.0, tflops=None) for s in (1, 2)])
    summary = exp.summarize(exp.read_metrics(str(experiment)))
    assert summary['world_size'] == 4
    assert summary['ranks_seen'] == [0, 2]
    assert summary['missing_ranks'] == [1, 3]
    assert summary['steps'] == 3
    assert summary['first_loss'] == pytest.approx(2.0)
    assert summary['final_loss'] == pytest.approx(3.0)  # only rank 0 reached step 3
    assert summary['loss_decreased'] is False
    assert summary['tflops_total'] == pytest.approx(10.0)


def test_summary_all_tflops_null_and_nan_loss(experiment):
    # a NaN is no number a record may hold (module_utils/_node_files.py): its record is refused, named by node, file
    # and line, and the summary is made of the others
    recs = [record(0, 1, world_size=1, tflops=None), record(0, 2, world_size=1, loss=float('nan'), tflops=None)]
    write_metrics(experiment, 0, recs)
    metrics = exp.read_metrics(str(experiment))
    assert metrics['refused'] == ['node0: rank_0_metrics.jsonl line 2 refused: a number that is not finite (NaN)']
    summary = exp.summarize(metrics)
    assert summary['tflops_total'] is None
    assert summary['steps'] == 1 and summary['final_loss'] == 9.0 and summary['bad_lines'] == 1
    assert summary['loss_decreased'] is False
    # a null loss is left out of the mean
    write_metrics(experiment, 0, [record(0, 1, world_size=1), dict(record(0, 2, world_size=1), loss=None)])
    summary = exp.summarize(exp.read_metrics(str(experiment)))
    assert summary['steps'] == 2 and summary['final_loss'] is None and summary['loss_decreased'] is False


def test_summary_no_metrics(experiment):
    summary = exp.summarize(exp.read_metrics(str(experiment)))
    assert summary['metrics_found'] is False
    assert summary['world_size'] is None
    assert summary['ranks_seen'] == []
    assert summary['missing_ranks'] == []
    assert summary['steps'] is None
    table = exp.summary_table(summary)
    assert any('no metrics' in line for line in table)


def test_table_is_aligned(experiment):
    write_metrics(experiment, 0, [record(0, s, world_size=2) for s in (1, 2)])
    table = exp.summary_table(exp.summarize(exp.read_metrics(str(experiment))))
    assert len(set(line.index(' : ') for line in table)) == 1
    labels = [line.split(' : ')[0].strip() for line in table]
    for label in ('world size', 'ranks', 'nodes', 'steps', 'loss', 'throughput', 'step time', 'compute'):
        assert label in labels
    joined = '\n'.join(table)
    assert '1/2 (missing: 1)' in joined
    assert '9.0000 -> 8.0000 (decreased)' in joined


# --- report ------------------------------------------------------------------

def test_report_writes_manifest_and_is_idempotent(experiment):
    write_metrics(experiment, 0, [record(0, s, world_size=1) for s in (1, 2, 3)])
    result = exp.report_experiment(str(experiment), {'nodes': ['a'], 'summary': 'replaced'})
    assert result['changed'] is True
    manifest_path = experiment / 'manifest.json'
    assert result['manifest_path'] == str(manifest_path)
    text = manifest_path.read_text()
    data = json.loads(text)
    assert data['nodes'] == ['a']
    assert data['summary'] == result['summary']
    assert text == json.dumps(data, sort_keys=True, indent=2) + '\n'
    assert (experiment / 'summary.txt').read_text() == '\n'.join(result['table']) + '\n'
    assert not [f for f in os.listdir(str(experiment)) if f.endswith('.tmp')]

    again = exp.report_experiment(str(experiment), {'nodes': ['a']})
    assert again['changed'] is False

    write_metrics(experiment, 0, [record(0, s, world_size=1) for s in (1, 2, 3, 4)])
    third = exp.report_experiment(str(experiment), {'nodes': ['a']})
    assert third['changed'] is True
    assert json.loads(manifest_path.read_text())['summary']['steps'] == 4


def test_report_splits_the_node_logs_by_rank_and_writes_the_rank_map(experiment):
    (experiment / 'logs' / 'node_0.txt').write_bytes(b'torchrun banner\n[rank 1] one\n[rank 0] zero\n')
    manifest = {'world_size': 2, 'nodes': [{'host': 'gpu1', 'ranks': [0, 1]}]}
    result = exp.report_experiment(str(experiment), manifest)
    assert result['table'][-3:] == ['rank map   : rank  node  local rank  log',
                                    '           :    0  gpu1           0  logs/rank_0.txt',
                                    '           :    1  gpu1           1  logs/rank_1.txt']
    written = json.loads((experiment / 'manifest.json').read_text())
    assert [(r['rank'], r['node'], r['local_rank'], r['log'], r['lines']) for r in written['rank_logs']] == [
        (0, 'gpu1', 0, 'logs/rank_0.txt', 1), (1, 'gpu1', 1, 'logs/rank_1.txt', 1)]
    assert (experiment / 'logs' / 'rank_1.txt').read_text() == 'one\n'
    assert exp.report_experiment(str(experiment), manifest)['changed'] is False


def test_report_check_mode_writes_nothing(experiment):
    write_metrics(experiment, 0, [record(0, 1, world_size=1)])
    result = exp.report_experiment(str(experiment), {}, check_mode=True)
    assert result['changed'] is True
    assert result['summary']['steps'] == 1
    assert not (experiment / 'manifest.json').exists()
    assert not (experiment / 'summary.txt').exists()


def test_report_no_metrics_does_not_fail(experiment):
    result = exp.report_experiment(str(experiment), {})
    assert result['summary']['metrics_found'] is False
    assert json.loads((experiment / 'manifest.json').read_text())['summary']['world_size'] is None


def test_report_missing_dir(tmp_path):
    with pytest.raises(exp.ExperimentError):
        exp.report_experiment(str(tmp_path / 'nope'), {})


# --- judge_results: which node caused a failed job --------------------------------------------

def _job(exit_code, ended=None, status='exited', stop=None, node_rank=None, signal=None):
    job = {'exit_code': exit_code, 'ended_at_epoch': ended, 'status': status, 'node_rank': node_rank, 'signal': signal}
    if stop:
        reason, at = stop
        job['stop'] = {'reason': reason, 'detail': 'why', 'requested_at_epoch': at,
                       'requested_at': '2026-11-23T19:00:%02dZ' % (at % 60)}
    return job


def test_judge_results_all_zero_is_success():
    verdict = exp.judge_results({'n0': _job(0, 10.0), 'n1': _job(0, 11.0)})
    assert verdict == {'outcome': 'succeeded', 'outcome_detail': 'succeeded', 'failed_nodes': [], 'also_failed': [],
                       'stopped_nodes': [], 'stop': None, 'blame': None}


def test_judge_results_first_failure_is_the_cause_and_later_ones_follow():
    verdict = exp.judge_results({'n0': _job(1, 100.25, node_rank=0), 'n1': _job(1, 100.75), 'n2': _job(0, 99.0)})
    assert verdict['outcome'] == 'failed'
    assert verdict['failed_nodes'] == ['n0']
    assert verdict['also_failed'] == ['n1']
    assert verdict['stopped_nodes'] == []
    assert verdict['outcome_detail'] == 'failed on n0 (node rank 0: exit code 1); then failed: n1'


def test_judge_results_names_the_signal_that_ended_the_first_node():
    verdict = exp.judge_results({'n0': _job(137, 10.0, node_rank=0, signal='SIGKILL'), 'n1': _job(-15, 20.0, stop=('peer', 11.0))})
    assert verdict['outcome_detail'] == 'failed on n0 (node rank 0: signal SIGKILL); stopped: n1'


def test_judge_results_stopped_nodes_are_never_the_cause():
    # n1 was stopped by the wait (it ended first, killed), n0 failed on its own
    verdict = exp.judge_results({'n0': _job(1, 100.5), 'n1': _job(-15, 100.1, stop=('peer', 100.6))})
    assert verdict['failed_nodes'] == ['n0']
    assert verdict['stopped_nodes'] == ['n1']


def test_judge_results_a_user_stop_is_stopped_not_failed():
    verdict = exp.judge_results({'n0': _job(143, 50.3, stop=('user', 50.0)), 'n1': _job(143, 50.4, stop=('user', 50.1))})
    assert verdict['outcome'] == 'stopped'
    assert verdict['outcome_detail'] == 'stopped by the user at 2026-11-23T19:00:50Z'
    assert verdict['failed_nodes'] == [] and verdict['stop']['reason'] == 'user'


def test_judge_results_a_collective_broken_by_the_stop_is_no_failure():
    # n1's ranks died of a broken collective just after n0 was stopped, before the stop reached n1
    verdict = exp.judge_results({'n0': _job(143, 50.3, stop=('user', 50.0)), 'n1': _job(1, 50.2)})
    assert verdict['outcome'] == 'stopped' and verdict['stopped_nodes'] == ['n0', 'n1']


def test_judge_results_a_failure_long_before_the_stop_is_the_cause():
    verdict = exp.judge_results({'n0': _job(143, 90.3, stop=('user', 90.0)), 'n1': _job(1, 20.0, node_rank=1)})
    assert verdict['outcome'] == 'failed' and verdict['failed_nodes'] == ['n1']


def test_judge_results_stalled_and_gone_come_from_the_wait():
    results = {'n0': _job(-15, 60.0, stop=('stalled', 59.0)), 'n1': _job(-15, 60.5, stop=('peer', 59.5))}
    verdict = exp.judge_results(results, verdicts={'n0': {'state': 'stalled', 'detail': 'no new output for 20 s'},
                                                   'n1': {'state': 'stopped'}})
    assert verdict['outcome'] == 'stalled' and verdict['failed_nodes'] == ['n0']
    assert verdict['outcome_detail'] == 'stalled on n0 (no new output for 20 s); stopped: n1'
    verdict = exp.judge_results({'n0': _job(-15, 60.0, stop=('peer', 59.0))}, verdicts={
        'n1': {'state': 'gone', 'detail': 'no answer since 19:00:01Z, 300 s'}}, missing_nodes=['n1'])
    assert verdict['outcome'] == 'unreachable'
    assert verdict['outcome_detail'] == 'unreachable: n1 (no answer since 19:00:01Z, 300 s); stopped: n0'


def test_judge_results_refuses_a_verdict_the_vocabulary_does_not_have():
    # module_utils/_outcomes.py defines the wait's verdicts; a node without one ({}, the collect of status.yml) is fine
    assert exp.judge_results({'n0': _job(0, 1.0)}, verdicts={'n0': {}, 'n1': {'state': None}})['outcome'] == 'succeeded'
    with pytest.raises(exp.ExperimentError, match="verdicts: node n0: 'hung' is not a wait verdict"):
        exp.judge_results({'n0': _job(0, 1.0)}, verdicts={'n0': {'state': 'hung'}})


@pytest.mark.parametrize('results, verdicts', [
    ({'n0': _job(0, 1.0)}, None),
    ({'n0': _job(1, 1.0)}, None),
    ({'n0': _job(143, 50.3, stop=('user', 50.0)), 'n1': _job(1, 50.2)}, None),
    ({'n0': _job(143, 50.3, stop=('timeout', 50.0))}, None),
    ({'n0': _job(-15, 60.0, stop=('stalled', 59.0))}, {'n0': {'state': 'stalled'}}),
    ({'n0': _job(-15, 60.0, stop=('peer', 59.0))}, {'n1': {'state': 'gone'}}),
])
def test_judge_results_gives_the_vocabularys_judged_outcomes(results, verdicts):
    from ansible_collections.trainops.multinode.plugins.module_utils._outcomes import JUDGED_OUTCOMES
    assert exp.judge_results(results, verdicts=verdicts)['outcome'] in JUDGED_OUTCOMES


def test_judge_results_missing_nodes_are_unreachable_and_named():
    verdict = exp.judge_results({'n0': _job(0, 1.0)}, missing_nodes=['n3'])
    assert verdict['outcome'] == 'unreachable' and verdict['failed_nodes'] == ['n3']
    assert verdict['outcome_detail'] == 'unreachable: n3 (unreachable at the end)'


def test_judge_results_an_own_failure_with_a_missing_node_is_failed():
    # the node that vanished is the cause; the one that failed (its collective timed out on the lost peer) follows
    verdict = exp.judge_results({'n0': _job(1, 5.0)}, missing_nodes=['n3'])
    assert verdict['outcome'] == 'failed' and verdict['failed_nodes'] == ['n3'] and verdict['also_failed'] == ['n0']
    assert verdict['outcome_detail'] == 'failed on n3 (unreachable at the end); then failed: n0'
    assert verdict['blame']['by'] == 'vanished'


def test_judge_results_a_wait_timeout_is_timed_out():
    verdict = exp.judge_results({'n0': _job(143, 5.0, stop=('timeout', 4.0))})
    assert verdict['outcome'] == 'timed_out' and 'trainops_wait_timeout' in verdict['outcome_detail']


def test_judge_results_unknown_exit_counts_as_failure_and_iso_time_is_a_fallback():
    verdict = exp.judge_results({
        'n0': {'exit_code': None, 'status': 'absent'},
        'n1': {'exit_code': 2, 'ended_at': '2026-11-22T08:00:01Z'},
        'n2': {'exit_code': 2, 'ended_at': '2026-11-22T08:00:05Z'},
    })
    assert verdict['failed_nodes'] == ['n1']
    assert verdict['also_failed'] == ['n0', 'n2']
    assert verdict['blame'] == {'by': 'node_clocks', 'detail': "n1 ended first by the nodes' own clocks (the wait saw "
                                                               "no end time of n0, n1, n2)"}


def test_mark_interrupted_only_changes_a_running_experiment(tmp_path):
    (tmp_path / 'manifest.json').write_text(json.dumps({'outcome': 'running', 'run_id': 'r'}))
    (tmp_path / 'summary.txt').write_text('experiment : x\n')
    assert exp.mark_interrupted(str(tmp_path), 0, 4242) is True
    manifest = json.loads((tmp_path / 'manifest.json').read_text())
    assert manifest['outcome'] == 'interrupted' and manifest['interrupted_at'] == '1970-01-01T00:00:00Z'
    assert exp.mark_interrupted(str(tmp_path), 5, 4242) is False  # already marked
    assert (tmp_path / 'summary.txt').read_text().splitlines()[1] == 'experiment : x'


def test_report_with_results_writes_outcome_into_manifest(tmp_path):
    (tmp_path / 'outputs').mkdir()
    result = exp.report_experiment(str(tmp_path), {'run_id': 'r'}, results={'a': _job(0, 1.0), 'b': _job(3, 2.0)})
    manifest = json.loads((tmp_path / 'manifest.json').read_text())
    assert result['outcome'] == manifest['outcome'] == 'failed'
    assert manifest['failed_nodes'] == ['b'] and manifest['results']['b']['exit_code'] == 3
    assert result['table'][0].startswith('outcome') and 'failed on b' in result['table'][0]


def test_files_written_on_the_controller_follow_the_users_umask(tmp_path):
    old = os.umask(0o077)
    try:
        exp._write_atomic(str(tmp_path / 'manifest.json'), '{}')
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(str(tmp_path / 'manifest.json')).st_mode) == 0o600
    exp._write_atomic(str(tmp_path / 'summary.txt'), 'x')
    assert stat.S_IMODE(os.stat(str(tmp_path / 'summary.txt')).st_mode) == 0o666 & ~old


# --- launcher=srun: the nodes Slurm ended because of another node are stopped (reason peer) ----------

def _step_job(exit_code, ended=None, status='exited', signals=(), stop=None, node_rank=None):
    job = _job(exit_code, ended, status=status, stop=stop, node_rank=node_rank)
    job.update(supervisor_signals=list(signals), launcher={'name': 'srun', 'job_id': '7', 'step_id': '2', 'step': '7.2'})
    return job


def test_judge_results_srun_nodes_killed_after_the_culprit_are_stopped_by_the_step():
    results = {'n0': _step_job(None, status='lost', node_rank=0), 'n1': _step_job(None, status='lost', node_rank=1),
               'n2': _step_job(1, 100.5, node_rank=2), 'n3': _step_job(143, 100.9, signals=['SIGTERM'], node_rank=3)}
    verdict = exp.judge_results(results)
    assert verdict['outcome'] == 'failed' and verdict['failed_nodes'] == ['n2'] and verdict['also_failed'] == []
    assert verdict['stopped_nodes'] == ['n0', 'n1', 'n3']
    assert verdict['outcome_detail'] == 'failed on n2 (node rank 2: exit code 1); stopped: n0, n1, n3'
    stops = exp.launcher_stops(results)
    assert sorted(stops) == ['n0', 'n1', 'n3']
    assert stops['n0'] == {'reason': 'peer', 'by': 'slurm', 'requested_at_epoch': 100.5,
                           'requested_at': '1970-01-01T00:01:40Z',
                           'detail': 'ended by Slurm with step 7.2 (srun --kill-on-bad-exit) because n2 failed '
                                     '(node rank 2: exit code 1)'}


def test_judge_results_srun_a_node_that_failed_by_itself_later_still_followed():
    results = {'n0': _step_job(1, 100.0, node_rank=0), 'n1': _step_job(1, 100.4), 'n2': _step_job(None, status='lost')}
    verdict = exp.judge_results(results)
    assert verdict['outcome_detail'] == 'failed on n0 (node rank 0: exit code 1); then failed: n1; stopped: n2'


def test_judge_results_srun_without_a_cause_the_killed_nodes_are_the_failure():
    # the whole step was killed (a time limit, a cancelled job): nobody else is a cause, nobody is excused
    results = {'n0': _step_job(None, status='lost'), 'n1': _step_job(None, status='lost')}
    assert exp.launcher_stops(results) == {}
    verdict = exp.judge_results(results)
    assert verdict['outcome'] == 'failed' and verdict['failed_nodes'] == ['n0', 'n1']


def test_judge_results_srun_a_stall_the_wait_stopped_is_the_cause():
    results = {'n0': _step_job(143, 60.0, stop=('stalled', 59.0)), 'n1': _step_job(None, status='lost')}
    verdict = exp.judge_results(results, verdicts={'n0': {'state': 'stalled', 'detail': 'no new output for 20 s'}})
    assert verdict['outcome_detail'] == 'stalled on n0 (no new output for 20 s); stopped: n1'
    assert exp.launcher_stops(results)['n1']['detail'].endswith('because n0 was stopped (stalled)')


def test_judge_results_over_ssh_a_lost_node_stays_a_failure():
    # over ssh no launcher ends a node: the lost node (rebooted, its supervisor gone) vanished, the cause
    results = {'n0': _job(1, 100.0, node_rank=0), 'n1': _job(None, None, status='lost')}
    assert exp.launcher_stops(results) == {}
    verdict = exp.judge_results(results)
    assert verdict['failed_nodes'] == ['n1'] and verdict['also_failed'] == ['n0']


def test_report_records_the_stop_of_the_nodes_slurm_ended(tmp_path):
    experiment = tmp_path / 'exp'
    experiment.mkdir()
    results = {'n0': _step_job(None, status='lost'), 'n1': _step_job(1, 100.5, node_rank=1)}
    result = exp.report_experiment(str(experiment), {'run_id': 'r'}, results=results)
    assert result['outcome_detail'] == 'failed on n1 (node rank 1: exit code 1); stopped: n0'
    manifest = json.loads((experiment / 'manifest.json').read_text())
    assert manifest['results']['n0']['stop']['reason'] == 'peer' and manifest['results']['n0']['stop']['by'] == 'slurm'
    assert 'stop' not in manifest['results']['n1'] and 'stop' not in results['n0']  # the input is left alone


def test_report_records_what_the_collect_refused(tmp_path):
    (tmp_path / 'outputs').mkdir()
    line = "node1: refused profile '/r/profiles/../../x': a \"\", \".\" or \"..\" component"
    result = exp.report_experiment(str(tmp_path), {'run_id': 'r'}, results={'node1': _job(0, 1.0)}, refused=[line])
    manifest = json.loads((tmp_path / 'manifest.json').read_text())
    assert manifest['collect_refused'] == [line] and manifest['outcome'] == 'succeeded'
    assert result['table'][-1] == 'refused    : 1 file(s) not collected (manifest.json collect_refused)'
    assert result['collect_refused'] == [line]


def test_rank_zero_output_is_the_file_of_the_node_that_ran_rank_0(experiment):
    for node in ('node0', 'node1'):
        (experiment / 'outputs' / node).mkdir()
        (experiment / 'outputs' / node / 'allreduce.json').write_text(node)
    (experiment / 'manifest.json').write_text(json.dumps({'nodes': [{'host': 'node1', 'ranks': [0, 1]},
                                                                    {'host': 'node0', 'ranks': [2, 3]}]}))
    assert exp.rank_zero_output(str(experiment), 'allreduce.json') == str(experiment / 'outputs' / 'node1' / 'allreduce.json')
    # without a manifest: the only node that has it, else none (no guessing between nodes)
    (experiment / 'manifest.json').unlink()
    assert exp.rank_zero_output(str(experiment), 'allreduce.json') is None
    (experiment / 'outputs' / 'node0' / 'allreduce.json').unlink()
    assert exp.rank_zero_output(str(experiment), 'allreduce.json') == str(experiment / 'outputs' / 'node1' / 'allreduce.json')
    assert exp.rank_zero_output(str(experiment), 'nope.json') is None


# --- launcher=srun: a step Slurm ended at its time limit is timed_out, with the last checkpoint ---------------

# sacct of a step that reached its time limit (srun --time=1), as the lab's Slurm 22.05 prints it
# (JobID|JobName|NodeList|State|ExitCode|Elapsed); the module asks for JobID,JobName,State,ExitCode
SACCT_STEP_TIMEOUT = ('JobID|JobName|NodeList|State|ExitCode|Elapsed\n'
                      '14|srun-tests|lab-node[01-02]|RUNNING|0:0|00:03:10\n'
                      '14.0|trainops-x|lab-node[01-02]|TIMEOUT|0:15|00:01:00\n')


def _sacct_as_queried(text):
    """The fixture's lines in the srun_step module's sacct format (JobID,JobName,State,ExitCode; no header)."""
    rows = [line.split('|') for line in text.splitlines()[1:]]
    return ''.join('|'.join((row[0], row[1], row[3], row[4])) + '\n' for row in rows)


def _slurm_query(step_state='RUNNING', job_state='RUNNING', step_source='sacct', job_source='sacct'):
    return {'job_id': '14', 'step_id': '0', 'step': {'state': step_state, 'exit_code': None, 'source': step_source},
            'job': {'state': job_state, 'exit_code': None, 'source': job_source}}


def _limited_step(node_rank, ended=100.0, exit_code=143):
    job = _step_job(exit_code, ended, signals=['SIGTERM'], node_rank=node_rank)
    job['launcher'] = {'name': 'srun', 'job_id': '14', 'step_id': '0', 'step': '14.0'}
    return job


def test_the_step_state_comes_from_sacct_of_a_step_that_reached_its_time_limit():
    record_ = _srun.parse_sacct(_sacct_as_queried(SACCT_STEP_TIMEOUT), step_id='0')
    assert record_ == {'step_id': '0', 'name': 'trainops-x', 'state': 'TIMEOUT', 'exit_code': '0:15'}


def test_judge_results_a_step_slurm_ended_at_its_time_limit_is_timed_out_with_the_checkpoint():
    results = {'lab-node01': _limited_step(0, 100.0), 'lab-node02': _limited_step(1, 100.5, exit_code=1)}
    limit = _srun.slurm_time_limit(_slurm_query(step_state='TIMEOUT'), results)
    assert limit == {'by': 'step', 'source': 'sacct', 'detail': 'Slurm ended step 14.0 at its time limit (sacct: TIMEOUT)'}
    checkpoint = {'node': 'lab-node01', 'global_step': 12, 'epoch': 0, 'reason': 'signal', 'signal': 'SIGUSR1',
                  'path': '/srv/trainops/state/lab-node01/runs/r1/outputs/checkpoint.pt'}
    verdict = exp.judge_results(results, time_limit=limit, checkpoint=checkpoint)
    assert verdict['outcome'] == 'timed_out' and verdict['failed_nodes'] == [] and verdict['also_failed'] == []
    assert verdict['stopped_nodes'] == ['lab-node01', 'lab-node02']
    assert verdict['outcome_detail'] == (
        'timed out: Slurm ended step 14.0 at its time limit (sacct: TIMEOUT); last checkpoint: global step 12 (SIGUSR1) '
        'on lab-node01: /srv/trainops/state/lab-node01/runs/r1/outputs/checkpoint.pt')
    assert verdict['stop']['reason'] == 'timeout' and verdict['stop']['by'] == 'slurm'


def test_slurm_time_limit_of_the_job_counts_only_when_no_node_failed_on_its_own():
    ended = {'n0': _limited_step(0), 'n1': _step_job(None, status='lost')}
    assert _srun.slurm_time_limit(_slurm_query(step_state='CANCELLED', job_state='TIMEOUT'), ended)['by'] == 'job'
    # a node that failed by itself (no signal from Slurm, no stop): the step ended for that, the job's limit came later
    failed = {'n0': _step_job(1, 50.0), 'n1': _limited_step(1)}
    assert _srun.slurm_time_limit(_slurm_query(step_state='FAILED', job_state='TIMEOUT'), failed) is None
    # a node the wait stopped because a peer ended counts as ended with the step
    peer = {'n0': _limited_step(0), 'n1': _step_job(143, 101.0, stop=('peer', 100))}
    assert _srun.slurm_time_limit(_slurm_query(job_state='TIMEOUT'), peer)['by'] == 'job'


def test_slurm_time_limit_is_none_for_other_ends_and_without_a_step():
    ended = {'n0': _limited_step(0)}
    for state in ('COMPLETED', 'FAILED', 'CANCELLED', 'RUNNING', 'UNKNOWN'):
        assert _srun.slurm_time_limit(_slurm_query(step_state=state, job_state=state), ended) is None
    assert _srun.slurm_time_limit({'job_id': '14', 'step_id': None}, ended) is None
    assert _srun.slurm_time_limit(None, ended) is None
    # only Slurm's own accounting says TIMEOUT: a state that did not come from sacct is not taken
    assert _srun.slurm_time_limit(_slurm_query(step_state='TIMEOUT', step_source='squeue', job_source=None), ended) is None


SRUN_LOG_TIME_LIMIT = ('0: slurmstepd-lab-node01: error: *** STEP 14.0 ON lab-node01 CANCELLED AT 2026-11-25T03:11:02 '
                       'DUE TO TIME LIMIT ***\n'
                       'srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n')
"""What the lab's srun.log held when Slurm ended a step at its limit: slurmstepd's line comes through task 0's output."""


def test_without_an_answer_from_sacct_no_time_limit_is_taken_from_what_a_rank_could_print(tmp_path):
    ended = {'n0': _limited_step(0)}
    no_sacct = _slurm_query(step_state='UNKNOWN', job_state='UNKNOWN', step_source=None, job_source=None)
    assert _srun.slurm_time_limit(no_sacct, ended) is None
    # sacct answered (not TIMEOUT): not a time limit either
    assert _srun.slurm_time_limit(_slurm_query(step_state='CANCELLED', job_state='RUNNING'), ended) is None
    # the report does not read srun.log for it: a forged (or real) line there changes nothing
    (tmp_path / 'srun.log').write_text(SRUN_LOG_TIME_LIMIT)
    result = exp.report_experiment(str(tmp_path), {}, results=ended, launcher_end=no_sacct)
    assert result['outcome'] == 'failed'
    assert json.loads((tmp_path / 'manifest.json').read_text())['slurm_end']['time_limit'] is None


def _write_checkpoint(tmp_path, node, record_):
    out = tmp_path / 'outputs' / node
    out.mkdir(parents=True, exist_ok=True)
    (out / 'checkpoint.json').write_text(json.dumps(record_))


def test_report_a_time_limit_records_timed_out_the_stops_and_the_checkpoint(tmp_path):
    (tmp_path / 'manifest.json').write_text(json.dumps({'nodes': [{'host': 'lab-node01', 'ranks': [0, 1]},
                                                                  {'host': 'lab-node02', 'ranks': [2, 3]}]}))
    signalled = {'global_step': 12, 'epoch': 0, 'reason': 'signal', 'signal': 'SIGUSR1', 'path': '/srv/o/checkpoint.pt'}
    _write_checkpoint(tmp_path, 'lab-node01', dict(signalled, last_signal_checkpoint=signalled, time=1.0))
    (tmp_path / 'srun.log').write_text(SRUN_LOG_TIME_LIMIT)
    results = {'lab-node01': _limited_step(0), 'lab-node02': _limited_step(1)}
    slurm = _slurm_query(step_state='TIMEOUT')
    result = exp.report_experiment(str(tmp_path), json.loads((tmp_path / 'manifest.json').read_text()),
                                   results=results, launcher_end=slurm)
    assert result['outcome'] == 'timed_out'
    manifest = json.loads((tmp_path / 'manifest.json').read_text())
    assert manifest['outcome'] == 'timed_out'
    assert manifest['checkpoint'] == dict(signalled, node='lab-node01', last_signal_checkpoint=signalled)
    assert manifest['slurm_end']['time_limit']['source'] == 'sacct'
    assert manifest['results']['lab-node02']['stop']['reason'] == 'timeout'
    assert manifest['results']['lab-node02']['stop']['by'] == 'slurm'
    summary = (tmp_path / 'summary.txt').read_text().splitlines()
    assert summary[0].startswith('outcome    : timed out: Slurm ended step 14.0 at its time limit (sacct: TIMEOUT); '
                                 'last checkpoint: global step 12 (SIGUSR1) on lab-node01: /srv/o/checkpoint.pt')
    assert 'checkpoint : global step 12 (SIGUSR1) on lab-node01: /srv/o/checkpoint.pt' in summary


def test_report_without_slurm_keeps_the_old_judgment_and_reads_no_srun_log(tmp_path):
    (tmp_path / 'srun.log').write_text(SRUN_LOG_TIME_LIMIT)
    result = exp.report_experiment(str(tmp_path), {}, results={'n0': _limited_step(0)})
    assert result['outcome'] == 'failed'
    assert 'slurm_end' not in json.loads((tmp_path / 'manifest.json').read_text())


@pytest.mark.parametrize('written', [
    'not json', '[]', json.dumps({'global_step': 'twelve'}), json.dumps({'path': '/x'}), json.dumps({'global_step': True})])
def test_read_checkpoint_ignores_what_does_not_read_as_one(tmp_path, written):
    out = tmp_path / 'outputs' / 'n0'
    out.mkdir(parents=True)
    (out / 'checkpoint.json').write_text(written)
    assert exp.read_checkpoint(str(tmp_path)) is None


def test_read_checkpoint_keeps_only_well_typed_fields(tmp_path):
    _write_checkpoint(tmp_path, 'n0', {'global_step': 3, 'path': ['not', 'a', 'path'], 'signal': 'x\ny', 'reason': 'end',
                                       'last_signal_checkpoint': 'no'})
    assert exp.read_checkpoint(str(tmp_path)) == {'global_step': 3, 'epoch': None, 'reason': 'end', 'signal': None,
                                                  'path': None, 'node': 'n0', 'last_signal_checkpoint': None}


# --- per-node step times and stragglers (module_utils/_stragglers.py) --------------------------------------------

def _node_run(experiment, compute_by_node, steps=8, step_time_s=0.5):
    """Two ranks per node (node<rank // 2>); each record of a node's ranks has that node's compute_time_s."""
    for rank in range(2 * len(compute_by_node)):
        compute = compute_by_node[rank // 2]
        recs = []
        for step in range(1, steps + 1):
            rec = record(rank, step, world_size=2 * len(compute_by_node), step_time_s=step_time_s + 0.01 * step)
            if compute is not None:
                rec['compute_time_s'] = compute if step > 3 else 99.0   # the warm-up is out of the window
            recs.append(rec)
        write_metrics(experiment, rank, recs)


def test_the_summary_gives_each_nodes_step_time_over_the_mean_s_window(experiment):
    _node_run(experiment, [0.1, 0.1])
    summary = exp.summarize(exp.read_metrics(str(experiment)))
    # the last 5 records of each of the node's 2 ranks: step_time_s 0.54 .. 0.58, twice
    assert summary['node_step_times']['node0'] == {
        'ranks': 2, 'records': 10, 'step_time_s': {'median': pytest.approx(0.56), 'p90': pytest.approx(0.58)},
        'compute_time_s': {'median': 0.1, 'p90': 0.1}}
    assert sorted(summary['node_step_times']) == ['node0', 'node1']
    assert summary['stragglers'] == {'basis': 'compute_time_s', 'threshold': 0.15, 'compared': ['node0', 'node1'],
                                     'nodes': []}
    table = exp.summary_table(summary)
    assert ('node step  : node0 0.56 s (p90 0.58; compute 0.1 s, p90 0.1), node1 0.56 s (p90 0.58; compute 0.1 s, '
            'p90 0.1)') in table
    assert ("straggler  : none (no node's compute time is more than 15% above the other nodes' median)" in table)
    assert max(len(row.split(' : ')[0]) for row in table) == 10   # the outcome line's width


def test_the_summary_names_the_slow_node_and_the_threshold_decides(experiment):
    _node_run(experiment, [0.1, 0.1, 0.13])
    summary = exp.summarize(exp.read_metrics(str(experiment)))
    assert summary['stragglers']['nodes'] == [
        {'node': 'node2', 'median_s': 0.13, 'others_median_s': 0.1, 'above': pytest.approx(0.3)}]
    line = next(row for row in exp.summary_table(summary) if row.startswith('straggler'))
    assert line.endswith("node2: compute time 0.13 s, 30% above the other nodes' median 0.1 s (threshold 15%)")
    assert exp.summarize(exp.read_metrics(str(experiment)), straggler_threshold=0.5)['stragglers']['nodes'] == []


def test_without_compute_time_the_step_time_is_compared_and_without_either_nothing(experiment):
    _node_run(experiment, [None, None])
    summary = exp.summarize(exp.read_metrics(str(experiment)))
    assert summary['node_step_times']['node1']['compute_time_s'] is None
    assert summary['stragglers']['basis'] == 'step_time_s' and summary['stragglers']['nodes'] == []
    assert 'node step  : node0 0.56 s (p90 0.58), node1 0.56 s (p90 0.58)' in exp.summary_table(summary)


def test_a_script_without_step_times_gets_na_and_no_error(experiment):
    write_metrics(experiment, 0, [{'rank': 0, 'global_step': 1, 'loss': 1.0}])
    summary = exp.summarize(exp.read_metrics(str(experiment)))
    assert summary['node_step_times'] == {} and summary['stragglers']['nodes'] == []
    table = exp.summary_table(summary)
    assert 'node step  : n/a' in table
    assert 'straggler  : n/a (no step_time_s or compute_time_s in the metrics)' in table
    empty = exp.summarize(exp.read_metrics(str(experiment / 'nothing')))
    assert empty['node_step_times'] == {} and empty['stragglers']['basis'] is None


def test_one_node_gets_its_figures_and_no_straggler(experiment):
    _node_run(experiment, [0.1])
    summary = exp.summarize(exp.read_metrics(str(experiment)))
    assert list(summary['node_step_times']) == ['node0']
    assert 'straggler  : n/a (compute time of one node only)' in exp.summary_table(summary)


def test_the_report_names_one_slow_rank_of_eight_and_what_changed_on_fewer_nodes(experiment):
    """Two nodes of 8 ranks, rank 13 at 3x the others' compute time: the node medians hide it, the per-rank judgment
    names it with its node (summary.txt's slow rank line, the manifest's summary). The records of a run resumed on
    half its ranks (32 -> 16, trainops_min_nodes) give the resized line."""
    for rank in range(16):
        recs = []
        for step in range(1, 9):
            rec = record(rank, step, world_size=16, node='node%d' % (rank // 8))
            rec.update(compute_time_s=0.3 if rank == 13 else 0.1, previous_world_size=32, accumulation_steps=2,
                       global_batch=2048, global_batch_kept=True)
            recs.append(rec)
        write_metrics(experiment, rank, recs, node='node%d' % (rank // 8))
    result = exp.report_experiment(str(experiment), {'world_size': 16})
    summary = result['summary']
    assert summary['stragglers']['nodes'] == []
    assert summary['rank_stragglers']['slowest'] == {
        'rank': 13, 'node': 'node1', 'median_s': 0.3, 'others_median_s': 0.1, 'above': 2.0, 'basis': 'compute_time_s'}
    assert summary['rank_step_times']['13']['compute_time_s'] == 0.3
    text = (experiment / 'summary.txt').read_text()
    assert "slow rank  : rank 13 on node1: compute time 0.3 s, 200% above the other ranks' median 0.1 s (threshold 15%)\n" in text
    assert 'resized    : world size 32 -> 16: gradient accumulation 2 keeps the global batch of 2048 samples\n' in text
    manifest = json.loads((experiment / 'manifest.json').read_text())
    assert manifest['summary']['rank_stragglers']['ranks'][0]['rank'] == 13
    assert manifest['summary']['world_change']['previous_world_size'] == 32


def test_the_report_takes_the_threshold_given_else_the_manifests_parameter(experiment):
    _node_run(experiment, [0.1, 0.13])
    flagged = exp.report_experiment(str(experiment), {'parameters': {'straggler_threshold': 0.2}})
    assert [s['node'] for s in flagged['summary']['stragglers']['nodes']] == ['node1']
    assert flagged['summary']['stragglers']['threshold'] == 0.2
    manifest = json.loads((experiment / 'manifest.json').read_text())
    assert manifest['summary']['node_step_times']['node1']['compute_time_s']['median'] == 0.13
    assert manifest['summary']['stragglers']['nodes'][0]['node'] == 'node1'
    assert 'straggler' in (experiment / 'summary.txt').read_text()
    assert exp.report_experiment(str(experiment), {'parameters': {'straggler_threshold': 0.2}},
                                 straggler_threshold=0.5)['summary']['stragglers']['nodes'] == []
    # a manifest's value that is no threshold: the default
    odd = exp.report_experiment(str(experiment), {'parameters': {'straggler_threshold': 'x'}})
    assert odd['summary']['stragglers']['threshold'] == 0.15


# --- what a job writes is read within bounds (module_utils/_node_files.py) ----------------------------------------

def test_a_hostile_job_s_metrics_are_refused_by_node_and_file_and_the_report_is_still_written(experiment):
    # world_size 1e12 must not size the missing ranks, a 400-digit number must not reach float(), a 200k-deep value
    # must not reach json.loads, a NaN is no number: each is refused naming the node and the file; the rest is read
    good = [record(0, s, world_size=2) for s in (1, 2)]
    write_metrics(experiment, 0, good, tail='{"rank": 0, "world_size": 1e12, "global_step": 3}\n'
                  '{"rank": 0, "world_size": 2, "global_step": %s}\n{"rank": 0, "x": %s}\n'
                  '{"rank": 0, "world_size": 2, "global_step": 4, "loss": NaN}\n' % ('9' * 400, '[' * 30000 + ']' * 30000),
                  node='node0')
    write_metrics(experiment, 1, [record(1, 1, world_size=2), record(7, 2, world_size=2)], node='node1')
    (experiment / 'outputs' / 'node1' / 'checkpoint.json').write_text('{"global_step": %s}' % ('[' * 200000))
    manifest = {'world_size': 2, 'run_id': 'r1'}
    results = {'node0': {'exit_code': 0, 'status': 'exited'}, 'node1': {'exit_code': 1, 'status': 'exited'}}
    attempt = {'number': 1, 'first': 'r1', 'previous': None, 'retries': 1, 'rows': []}
    result = exp.report_experiment(str(experiment), manifest, results=results, attempt=attempt)
    assert result['read_refused'] == [
        'node0: rank_0_metrics.jsonl line 4 refused: a number beyond +-2**53 (400 digits)',
        'node0: rank_0_metrics.jsonl line 5 refused: nesting deeper than 32 levels',
        'node0: rank_0_metrics.jsonl line 6 refused: a number that is not finite (NaN)',
        "node0: rank_0_metrics.jsonl refused: 1 record(s), the first: world_size 1000000000000 is not the job's 2",
        "node1: rank_1_metrics.jsonl refused: 1 record(s), the first: rank 7 is not one of the job's 2 ranks",
        'node1: checkpoint.json refused: nesting deeper than 32 levels',
    ]
    summary = result['summary']
    assert summary['world_size'] == 2 and summary['missing_ranks'] == [] and summary['ranks_seen'] == [0, 1]
    assert summary['steps'] == 2 and summary['bad_lines'] == 5
    # the outcome, the manifest, the summary and the retry decision are written
    assert result['outcome'] == 'failed' and result['retry']['decision'] == 'retry', result['retry']
    written = json.loads((experiment / 'manifest.json').read_text())
    assert written['read_refused'] == result['read_refused'] and written['retry'] == result['retry']
    table = (experiment / 'summary.txt').read_text().splitlines()
    assert table[0] == 'outcome    : failed on node1 (exit code 1)'
    assert 'not read   : node1: checkpoint.json refused: nesting deeper than 32 levels' in table


def test_without_the_job_s_world_size_a_record_s_claim_is_bounded(experiment):
    write_metrics(experiment, 0, [record(0, 1, world_size=10 ** 12), record(0, 2, world_size=3)])
    metrics = exp.read_metrics(str(experiment))
    assert metrics['refused'] == ['node0: rank_0_metrics.jsonl refused: 1 record(s), the first: world_size '
                                  '1000000000000 is not a number of ranks from 1 to %d' % exp.MAX_WORLD_SIZE]
    summary = exp.summarize(metrics)
    assert summary['world_size'] == 3 and summary['missing_ranks'] == [1, 2]
    # the manifest's world size is the job's
    assert exp.job_world_size({'world_size': '4'}) == 4 and exp.job_world_size({'world_size': 4.0}) == 4
    assert exp.job_world_size({'world_size': 10 ** 400}) is None and exp.job_world_size({}) is None


def test_the_experiment_s_metrics_records_are_bounded_together(experiment, monkeypatch):
    monkeypatch.setattr(_experiment_metrics, 'MAX_RECORDS', 3)
    write_metrics(experiment, 0, [record(0, s) for s in (1, 2, 3)])
    write_metrics(experiment, 1, [record(1, s) for s in (1, 2, 3)])
    metrics = exp.read_metrics(str(experiment))
    assert sorted(metrics['by_rank']) == [0]
    assert metrics['refused'] == ["node0: rank_1_metrics.jsonl refused: not read: the experiment's files held 3 metrics "
                                  "records before it"]


def test_only_what_the_summary_uses_is_kept_of_a_record_and_a_rank_names_one_host(experiment):
    write_metrics(experiment, 0, [dict(record(0, 1, world_size=1, node='h' * 256), pad='x' * 5000),
                                  record(0, 2, world_size=1, node='box'), record(0, 3, world_size=1, node='other')])
    metrics = exp.read_metrics(str(experiment), 1)
    resized = {'previous_world_size', 'accumulation_steps', 'global_batch', 'global_batch_kept'}
    assert set(metrics['by_rank'][0][0]) == set(exp.SUMMARY_FIELDS) - {'node', 'compute_time_s'} - resized
    assert exp.summarize(metrics)['hosts'] == ['box']


def test_a_job_without_metrics_of_ours_gets_world_size_and_ranks_from_torchrun(experiment):
    manifest = {'world_size': '3', 'nodes': [{'host': 'gpu1', 'ranks': [0, 1]}, {'host': 'gpu2', 'ranks': [2]}]}
    summary = exp.summarize(exp.read_metrics(str(experiment), exp.job_world_size(manifest)))
    assert summary['world_size'] == 3 and summary['metrics_found'] is False
    table = exp.torchrun_rows(exp.summary_table(summary), manifest,
                              {'gpu1': {'exit_code': 0}, 'gpu2': {'status': 'prepared', 'exit_code': None}})
    lines = dict((part.strip() for part in line.split(' : ', 1)) for line in table)
    assert lines['world size'] == '3 (torchrun: 2 nodes x per node gpu1 2, gpu2 1)'
    assert lines['ranks'] == '2 ran (gpu1: 0,1 exit 0; gpu2: 2 did not run); no metrics of ours'
    assert lines['nodes'] == '2'
    # without the manifest's facts the table stays as it is
    assert exp.torchrun_rows(table[:2], {}, None) == table[:2]
