# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where a hung job's ranks are (module_utils/_stacks.py): the ranks among a run's processes, py-spy's dumps written
per rank (a fake py-spy, and the real one on a real process), and the judgment of recorded dumps: the rank outside
torch while its peers wait in it is the one named."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections import namedtuple

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _proc, _stacks
from ansible_collections.trainops.multinode.plugins.module_utils._proc import ProcInfo

Proc = namedtuple('Proc', ['pid', 'ppid'])

# recorded with py-spy 0.4.3 from torchrun ranks (gloo, DDP): rank 0 in the backward whose gradients DDP all-reduces,
# rank 1 hung in its own code, rank 2 in an explicit all_reduce
WAITING_BACKWARD = textwrap.dedent('''\
    Process 14744: /work/main/.venv/bin/python -u hang.py
    Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)

    Thread 14744 (idle): "MainThread"
        _engine_run_backward (torch/autograd/graph.py:979)
        backward (torch/autograd/__init__.py:395)
        Tensor.backward (torch/_tensor.py:623)
        <module> (hang.py:11)
    Thread 14790 (idle): "Thread-1 (_pin_memory_loop)"
        wait (threading.py:331)
    ''')
HUNG = textwrap.dedent('''\
    Process 14745: /work/main/.venv/bin/python -u hang.py
    Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)

    Thread 14745 (idle): "MainThread"
        stuck (hang.py:9)
        <module> (hang.py:10)
    ''')
ALL_REDUCE = textwrap.dedent('''\
    Thread 20001 (active): "MainThread"
        all_reduce (/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py:2501)
        wrapper (/opt/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py:83)
        train_step (train.py:120)
    ''')


def test_a_dump_parses_into_threads_with_the_innermost_frame_first():
    # a thread Python has no name for is printed without one
    assert _stacks.parse_dump('Thread 7 (idle)\n    stuck (hang.py:5)\n') == [
        {'id': '7', 'state': 'idle', 'name': '', 'frames': [{'function': 'stuck', 'file': 'hang.py', 'line': 5}]}]
    threads = _stacks.parse_dump(WAITING_BACKWARD)
    assert [(t['id'], t['state'], t['name']) for t in threads] == [
        ('14744', 'idle', 'MainThread'), ('14790', 'idle', 'Thread-1 (_pin_memory_loop)')]
    assert threads[0]['frames'][0] == {'function': '_engine_run_backward', 'file': 'torch/autograd/graph.py', 'line': 979}
    assert [f['function'] for f in _stacks.main_frames(threads)] == [
        '_engine_run_backward', 'backward', 'Tensor.backward', '<module>']


def test_the_rank_outside_torch_is_named_while_the_others_wait_in_it():
    judgment = _stacks.judge({('node0', 0): WAITING_BACKWARD, ('node1', 1): HUNG, ('node1', 2): ALL_REDUCE})
    assert [(r['node'], r['rank'], r['where']) for r in judgment['culprits']] == [('node1', 1, 'stuck (hang.py:9)')]
    assert [r['rank'] for r in judgment['waiting']] == [0, 2]
    assert _stacks.lines(judgment) == [
        'hung rank  : 1 (node1) at stuck (hang.py:9); 2 other rank(s) wait in torch '
        '(_engine_run_backward (torch/autograd/graph.py:979))']
    assert _stacks.record(judgment)['culprits'] == judgment['culprits']


@pytest.mark.parametrize('dumps, expected', [
    ({('n0', 0): WAITING_BACKWARD, ('n1', 1): ALL_REDUCE},
     ['stacks     : every rank waits in torch (_engine_run_backward (torch/autograd/graph.py:979)): no rank stands apart']),
    ({('n0', 0): HUNG, ('n1', 1): HUNG},
     ['stacks     : no rank waits in torch: ranks 0 (n0), 1 (n1), first at stuck (hang.py:9)']),
    ({('n0', 0): 'py-spy is not installed on this node (pip install py-spy next to the ranks\' Python): no stack dumped\n'},
     ["stacks     : not dumped for rank(s) 0 (n0): py-spy is not installed on this node (pip install py-spy next to the "
      "ranks' Python): no stack dumped"]),
])
def test_no_rank_is_named_when_none_stands_apart(dumps, expected):
    judgment = _stacks.judge(dumps)
    assert judgment['culprits'] == []
    assert _stacks.lines(judgment) == expected


def test_node_text_is_one_printable_bounded_line():
    text = 'Thread 1 (idle): "MainThread"\n    %s (x\x1b[31m.py:1)\n' % ('f' * 500)
    where = _stacks.judge({('n0', 0): text})['outside'][0]['where']
    assert len(where) == 160 and where.endswith('...') and '\x1b' not in where


def test_the_ranks_are_the_topmost_processes_with_torchruns_environment():
    tree = {10: Proc(10, 1), 11: Proc(11, 10), 12: Proc(12, 10), 13: Proc(13, 11), 14: Proc(14, 10)}
    environs = {
        10: {},  # torchrun itself
        11: {'RANK': '4', 'TORCHELASTIC_RUN_ID': 'none'},
        12: {'RANK': '5', 'TORCHELASTIC_RUN_ID': 'none'},
        13: {'RANK': '4', 'TORCHELASTIC_RUN_ID': 'none'},  # rank 4's DataLoader worker
        14: {'RANK': 'x', 'TORCHELASTIC_RUN_ID': 'none'},
    }
    assert _stacks.rank_processes(tree, environs.get) == {4: 11, 5: 12}


class FakePopen(object):
    made = []

    def __init__(self, argv, **_kwargs):
        self.argv = argv
        self.returncode = 0 if argv[-1] != '12' else 1
        FakePopen.made.append(argv)

    def communicate(self, timeout=None):
        return (b'Thread 1 (idle): "MainThread"\n    step (train.py:%s)\n' % self.argv[-1].encode(), b'')


def test_each_rank_is_dumped_once_into_its_own_file(tmp_path):
    FakePopen.made = []
    tree = {11: Proc(11, 10), 12: Proc(12, 10)}
    environs = {11: {'RANK': '0', 'TORCHELASTIC_RUN_ID': 'r'}, 12: {'RANK': '1', 'TORCHELASTIC_RUN_ID': 'r'}}
    done = _stacks.dump_run(tree, str(tmp_path), environs.get, pyspy='/x/py-spy', popen=FakePopen)
    assert _stacks.without_command_line('Process 11: python train.py --token s3cret\nPython v3.11\n\n' + HUNG.split('\n', 3)[3]) \
        == HUNG.split('\n', 3)[3]
    assert done == {'ranks': [0, 1], 'error': None}
    assert sorted(FakePopen.made) == [['/x/py-spy', 'dump', '--pid', '11'], ['/x/py-spy', 'dump', '--pid', '12']]
    assert (tmp_path / 'trainops_stacks_rank_0.txt').read_text().endswith('step (train.py:11)\n')
    failed = (tmp_path / 'trainops_stacks_rank_1.txt').read_text()
    assert failed.startswith('py-spy exited 1 on pid 12 (may it attach?'), failed


def test_a_link_planted_at_the_stack_files_name_is_replaced_not_followed(tmp_path):
    target = tmp_path / 'elsewhere'
    target.write_text('keep')
    out = tmp_path / 'out'
    out.mkdir()
    os.symlink(str(target), str(out / 'trainops_stacks_rank_0.txt'))
    tree = {11: Proc(11, 10)}
    _stacks.dump_run(tree, str(out), {11: {'RANK': '0', 'TORCHELASTIC_RUN_ID': 'r'}}.get, pyspy='/x/py-spy',
                     popen=FakePopen)
    assert target.read_text() == 'keep'
    assert not os.path.islink(str(out / 'trainops_stacks_rank_0.txt'))


def test_without_py_spy_each_rank_file_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(_stacks, 'find_pyspy', lambda pids: None)
    tree = {11: Proc(11, 10)}
    done = _stacks.dump_run(tree, str(tmp_path), {11: {'RANK': '3', 'TORCHELASTIC_RUN_ID': 'r'}}.get)
    assert done == {'ranks': [3], 'error': 'py-spy is not installed on this node'}
    assert 'py-spy is not installed' in (tmp_path / 'trainops_stacks_rank_3.txt').read_text()
    assert _stacks.dump_run({}, str(tmp_path)) == {'ranks': [], 'error': "no rank processes found among the run's processes"}


def test_the_controller_reads_the_files_within_bounds_and_not_through_links(tmp_path):
    node0, node1 = tmp_path / 'outputs' / 'node0', tmp_path / 'outputs' / 'node1'
    node0.mkdir(parents=True)
    node1.mkdir(parents=True)
    (node0 / 'trainops_stacks_rank_0.txt').write_text(WAITING_BACKWARD + 'x' * (2 * _stacks.MAX_STACK_BYTES))
    (node0 / 'other.txt').write_text('not a stack file')
    secret = tmp_path / 'secret'
    secret.write_text(HUNG)
    os.symlink(str(secret), str(node1 / 'trainops_stacks_rank_1.txt'))
    refused = []
    dumps = _stacks.read_experiment(str(tmp_path), {'node0': str(node0), 'node1': str(node1)}, refused)
    assert list(dumps) == [('node0', 0)] and len(dumps[('node0', 0)]) == _stacks.MAX_STACK_BYTES
    assert len(refused) == 1 and refused[0].startswith('node1: outputs/node1/trainops_stacks_rank_1.txt not read'), refused


@pytest.mark.skipif(not shutil.which('py-spy', path=os.path.dirname(sys.executable)), reason='py-spy is not installed')
def test_the_real_py_spy_dumps_a_real_rank_hung_in_its_own_code(tmp_path):
    script = tmp_path / 'hang.py'
    script.write_text('import time\n\ndef stuck():\n    while True:\n        time.sleep(0.2)\n\nstuck()\n')
    env = dict(os.environ, RANK='7', TORCHELASTIC_RUN_ID='none')
    proc = subprocess.Popen([sys.executable, str(script)], env=env)
    try:
        time.sleep(1.0)
        done = _stacks.dump_run({proc.pid: Proc(proc.pid, os.getpid())}, str(tmp_path))
        assert done == {'ranks': [7], 'error': None}, done
        text = (tmp_path / 'trainops_stacks_rank_7.txt').read_text()
        judgment = _stacks.judge({('node0', 7): text})
        assert [(r['rank'], r['where']) for r in judgment['outside']] == [(7, 'stuck (hang.py:5)')], text
        # py-spy's header repeats the command line (a token given as an argument): not kept
        assert text.startswith('Thread ') and 'hang.py:' in text and str(script) not in text, text
    finally:
        proc.kill()
        proc.wait()


class FramelessOnce(FakePopen):
    """py-spy catching rank 0's thread running: no frame the first time (seen in a CI run), frames the next."""
    calls = 0

    def communicate(self, timeout=None):
        FramelessOnce.calls += 1
        if FramelessOnce.calls == 1:
            return (b'Thread 1459 (active+gil)\n', b'')
        return FakePopen.communicate(self, timeout)


def test_a_dump_without_frames_is_taken_again(tmp_path, monkeypatch):
    monkeypatch.setattr(_stacks, 'EMPTY_RETRY_DELAY', 0)
    FramelessOnce.calls = 0
    tree = {11: Proc(11, 10)}
    _stacks.dump_run(tree, str(tmp_path), {11: {'RANK': '0', 'TORCHELASTIC_RUN_ID': 'r'}}.get, pyspy='/x/py-spy',
                     popen=FramelessOnce)
    assert FramelessOnce.calls == 2
    assert (tmp_path / 'trainops_stacks_rank_0.txt').read_text() == 'Thread 1 (idle): "MainThread"\n    step (train.py:11)\n'


def test_a_stack_file_of_a_rank_the_job_does_not_have_is_not_read(tmp_path):
    # the job writes in its output directory too: it could name a healthy node's rank as the hung one
    node0 = tmp_path / 'outputs' / 'node0'
    node0.mkdir(parents=True)
    (node0 / 'trainops_stacks_rank_1.txt').write_text(HUNG)
    (node0 / 'trainops_stacks_rank_9.txt').write_text(HUNG)
    refused = []
    dumps = _stacks.read_experiment(str(tmp_path), {'node0': str(node0)}, refused, world_size=2)
    assert list(dumps) == [('node0', 1)]
    assert refused == ['node0: outputs/node0/trainops_stacks_rank_9.txt not read: no rank 9 in the job']


@pytest.mark.skipif(os.geteuid() != 0, reason='only root gives a file away')
def test_a_dump_root_writes_belongs_to_the_runs_owner(tmp_path):
    tree = {11: Proc(11, 10)}
    _stacks.dump_run(tree, str(tmp_path), {11: {'RANK': '0', 'TORCHELASTIC_RUN_ID': 'r'}}.get, pyspy='/x/py-spy',
                     popen=FakePopen, owner=(12345, 23456))
    info = os.stat(str(tmp_path / 'trainops_stacks_rank_0.txt'))
    assert (info.st_uid, info.st_gid) == (12345, 23456)


def test_a_stopped_rank_is_read_without_pausing_it(tmp_path):
    # py-spy cannot pause a process stopped by SIGSTOP ("Failed to suspend process"): --nonblocking reads it as it is
    FakePopen.made = []
    tree = {11: ProcInfo(11, 10, 10, 'T', 0), 12: ProcInfo(12, 10, 10, 'S', 0)}
    environs = {11: {'RANK': '0', 'TORCHELASTIC_RUN_ID': 'r'}, 12: {'RANK': '1', 'TORCHELASTIC_RUN_ID': 'r'}}
    _stacks.dump_run(tree, str(tmp_path), environs.get, pyspy='/x/py-spy', popen=FakePopen)
    assert sorted(FakePopen.made) == [['/x/py-spy', 'dump', '--nonblocking', '--pid', '11'],
                                      ['/x/py-spy', 'dump', '--pid', '12']]


def test_the_real_py_spy_dumps_a_rank_frozen_by_sigstop(tmp_path):
    script = tmp_path / 'frozen.py'
    script.write_text('import os, signal\n\ndef freeze():\n    os.kill(os.getpid(), signal.SIGSTOP)\n\nfreeze()\n')
    proc = subprocess.Popen([sys.executable, str(script)], env=dict(os.environ, RANK='2', TORCHELASTIC_RUN_ID='none'))
    try:
        deadline = time.time() + 10
        while _proc.System().read_proc_stat(proc.pid).state != 'T':
            assert time.time() < deadline
            time.sleep(0.05)
        _stacks.dump_run({proc.pid: _proc.System().read_proc_stat(proc.pid)}, str(tmp_path))
        text = (tmp_path / 'trainops_stacks_rank_2.txt').read_text()
        assert _stacks.where(_stacks.judge({('n', 2): text})) == {('n', 2): 'freeze (frozen.py:4)'}, text
    finally:
        proc.kill()
        proc.wait()
