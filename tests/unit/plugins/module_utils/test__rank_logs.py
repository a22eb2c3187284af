# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Per-rank logs (module_utils._rank_logs): node logs split by torchrun's rank prefix, the rank map, a rank's lines
read from a running node log a bounded chunk at a time, and the experiment logs.yml reads."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _rank_logs as rl
from ansible_collections.trainops.multinode.plugins.module_utils import _supervisor

# what torchrun --tee 3 with the supervisor's prefix writes to node.log (torch 2.13, read from a run): its own lines
# have no prefix, each rank's line starts with "[rank <global rank>] "
NODE0 = (b'*****************************************\n'
         b'Setting OMP_NUM_THREADS environment variable for each process to be 1 in default\n'
         b'[rank 1] hello from 1\n'
         b'[rank 0] hello from 0\n'
         b'[rank 0] Traceback (most recent call last):\n'
         b'[rank 1] [rank 7] a rank that prints a prefix of its own\n')
NODE1 = b'[rank 3] step=1\n[rank 2] step=1\n[rank 3] step=2\n[rank 9999] not one of the job\'s ranks\n'
MANIFEST = {'world_size': 4, 'nodes': [{'host': 'node0', 'ranks': [0, 1]}, {'host': 'node1', 'ranks': [2, 3]}]}


@pytest.fixture
def experiment(tmp_path):
    (tmp_path / 'logs').mkdir()
    (tmp_path / 'logs' / 'node_0.txt').write_bytes(NODE0)
    (tmp_path / 'logs' / 'node_1.txt').write_bytes(NODE1)
    (tmp_path / 'manifest.json').write_text(json.dumps(dict(MANIFEST, launched_at='2026-01-01T00:00:00Z')))
    return tmp_path


def test_the_supervisor_gives_torchrun_tee_a_log_dir_and_the_prefix_unless_the_launch_sets_them():
    env = _supervisor.rank_log_environment('/n/runs/r1', {'PET_TEE': '0'})
    assert env == {'PET_LOG_DIR': '/n/runs/r1/ranks', 'TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE': '[rank ${rank}] ',
                   'PYTHONUNBUFFERED': '1'}


@pytest.mark.parametrize('line, world, expected', [
    (b'[rank 5] x\n', None, (5, b'x\n')),
    (b'[rank 5] x\n', 4, (None, b'[rank 5] x\n')),
    (b'[default5]:x\n', None, (None, b'[default5]:x\n')),
    (b' [rank 5] x\n', None, (None, b' [rank 5] x\n')),
    (b'[rank 12345678] x\n', None, (None, b'[rank 12345678] x\n')),
])
def test_a_line_s_rank_is_torchrun_s_prefix_at_its_start_and_one_of_the_job_s(line, world, expected):
    assert rl.split_line(line, world) == expected


def test_node_logs_split_into_one_log_per_rank_with_the_rank_map(experiment):
    result = rl.split_node_logs(str(experiment), MANIFEST, 4)
    assert result['refused'] == []
    assert result['rows'] == [
        dict(rank=0, node='node0', local_rank=0, log='logs/rank_0.txt', lines=2),
        dict(rank=1, node='node0', local_rank=1, log='logs/rank_1.txt', lines=2),
        dict(rank=2, node='node1', local_rank=0, log='logs/rank_2.txt', lines=1),
        dict(rank=3, node='node1', local_rank=1, log='logs/rank_3.txt', lines=2)]
    logs = experiment / 'logs'
    assert (logs / 'rank_0.txt').read_bytes() == b'hello from 0\nTraceback (most recent call last):\n'
    assert (logs / 'rank_1.txt').read_bytes() == b'hello from 1\n[rank 7] a rank that prints a prefix of its own\n'
    assert (logs / 'rank_3.txt').read_bytes() == b'step=1\nstep=2\n'
    assert sorted(os.listdir(str(logs))) == ['node_0.txt', 'node_1.txt'] + ['rank_%d.txt' % r for r in range(4)]
    # a second report (status.yml collects again) writes the same files, not twice the lines
    rl.split_node_logs(str(experiment), MANIFEST, 4)
    assert (logs / 'rank_3.txt').read_bytes() == b'step=1\nstep=2\n'
    assert rl.map_lines(result['rows']) == [
        'rank map   : rank  node   local rank  log',
        '           :    0  node0           0  logs/rank_0.txt',
        '           :    1  node0           1  logs/rank_1.txt',
        '           :    2  node1           0  logs/rank_2.txt',
        '           :    3  node1           1  logs/rank_3.txt']


def test_a_rank_without_lines_is_in_the_map_and_nothing_is_written_in_check_mode(tmp_path):
    (tmp_path / 'logs').mkdir()
    (tmp_path / 'logs' / 'node_0.txt').write_bytes(b'[rank 0] a\n')
    result = rl.split_node_logs(str(tmp_path), MANIFEST, 4, check_mode=True)
    assert [(r['rank'], r['log'], r['lines']) for r in result['rows']] == [
        (0, 'logs/rank_0.txt', 1), (1, None, 0), (2, None, None), (3, None, None)]
    assert os.listdir(str(tmp_path / 'logs')) == ['node_0.txt']
    assert rl.map_lines(result['rows'])[2:4] == ['           :    1  node0           1  (no lines)',
                                                 '           :    2  node1           0  (not collected)']


def test_a_rank_on_another_node_than_planned_is_mapped_where_its_lines_are(tmp_path):
    (tmp_path / 'logs').mkdir()
    (tmp_path / 'logs' / 'node_1.txt').write_bytes(b'[rank 0] moved\n')  # node0's log is not there
    rows = rl.split_node_logs(str(tmp_path), MANIFEST, 4)['rows']
    assert rows[0] == dict(rank=0, node='node1', local_rank=None, log='logs/rank_0.txt', lines=1)


def test_a_long_line_is_cut_into_pieces_that_keep_its_rank(tmp_path):
    (tmp_path / 'logs').mkdir()
    long = b'x' * (rl.MAX_LINE_BYTES * 2 + 10)
    (tmp_path / 'logs' / 'node_0.txt').write_bytes(b'[rank 1] ' + long + b'\n[rank 0] short\n')
    rows = rl.split_node_logs(str(tmp_path), MANIFEST, 4)['rows']
    assert (tmp_path / 'logs' / 'rank_1.txt').read_bytes() == long + b'\n'
    assert (tmp_path / 'logs' / 'rank_0.txt').read_bytes() == b'short\n'
    assert rows[1]['lines'] == 1


def test_a_symbolic_link_planted_in_logs_is_refused_not_written_through(tmp_path):
    (tmp_path / 'logs').mkdir()
    (tmp_path / 'logs' / 'node_0.txt').write_bytes(b'[rank 0] a\n')
    target = tmp_path / 'elsewhere'
    target.write_text('keep')
    os.symlink(str(target), str(tmp_path / 'logs' / 'rank_0.txt'))
    result = rl.split_node_logs(str(tmp_path), MANIFEST, 4)
    assert result['refused'] and 'symbolic link' in result['refused'][0]
    assert target.read_text() == 'keep'


def test_a_running_log_is_read_a_bounded_chunk_of_whole_lines_at_a_time(tmp_path):
    log = tmp_path / 'node.log'
    log.write_bytes(NODE1 + b'[rank 3] half a li')
    first = rl.read_rank_lines(str(log), 3, 0, max_bytes=20)
    assert first['lines'] == ['step=1'] and first['offset'] == len(b'[rank 3] step=1\n')
    rest = rl.read_rank_lines(str(log), 3, first['offset'])
    assert rest['lines'] == ['step=2'] and rest['offset'] == len(NODE1)
    ended = rl.read_rank_lines(str(log), 3, rest['offset'], final=True)
    assert ended['lines'] == ['half a li'] and ended['offset'] == ended['size']
    assert rl.read_rank_lines(str(tmp_path / 'none'), 3)['missing'] is True
    # a new, shorter log starts again from its beginning
    assert rl.read_rank_lines(str(log), 2, 10 ** 6)['lines'] == ['step=1']


def test_the_latest_experiment_is_the_last_launched_and_run_id_names_one(experiment, tmp_path):
    root = experiment.parent
    later = root / 'later'
    later.mkdir()
    (later / 'manifest.json').write_text(json.dumps({'launched_at': '2026-02-01T00:00:00Z', 'nodes': []}))
    assert rl.experiment_dir(str(root))[0] == str(later)
    assert rl.experiment_dir(str(root), experiment.name) == (str(experiment), json.loads(
        (experiment / 'manifest.json').read_text()))
    with pytest.raises(rl.RankLogError, match='no experiment nope under'):
        rl.experiment_dir(str(root), 'nope')
    with pytest.raises(rl.RankLogError, match="is not an experiment's name"):
        rl.experiment_dir(str(root), '../etc')


def test_a_rank_s_node_comes_from_the_manifest():
    assert rl.rank_node(MANIFEST, 3) == ('node1', 1, 4)
    with pytest.raises(rl.RankLogError, match=r"rank 4 is not one of the job's ranks \(0 to 3\)"):
        rl.rank_node(MANIFEST, 4)


def test_the_tail_of_a_rank_log_is_bounded(tmp_path):
    path = tmp_path / 'rank_0.txt'
    path.write_text(''.join('line %d\n' % i for i in range(100)))
    assert rl.tail_file(str(path), 3) == dict(lines=['line 97', 'line 98', 'line 99'], truncated=True)
    assert rl.tail_file(str(path), 1000, max_bytes=16) == dict(lines=['line 98', 'line 99'], truncated=True)
    assert rl.tail_file(str(tmp_path / 'none'), 3) is None


@pytest.mark.parametrize('value', ['5', 5, 0])
def test_the_rank_given_is_a_number(value):
    assert rl.given_rank(value) == int(value)


@pytest.mark.parametrize('value, shown', [(None, 'None'), ('-1', '-1'), ('x', 'x'), (True, 'True'), ('', '')])
def test_a_rank_that_is_not_digits_says_what_to_give(value, shown):
    with pytest.raises(rl.RankLogError) as caught:
        rl.given_rank(value)
    assert str(caught.value) == ('Give the rank whose lines to print: -e rank=N (a global rank, 0 to world size - 1), '
                                 'not %s.' % shown)
