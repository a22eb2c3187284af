# -*- coding: utf-8 -*-

# Copyright (c) 2025, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for the torchrun_wait action plugin; _execute_module, the clock and the display are mocked."""

from __future__ import annotations

import json
import re
import time

import pytest

from unittest.mock import MagicMock

from ansible.errors import AnsibleActionFail

from ansible_collections.trainops.multinode.plugins.action import torchrun_wait as wait_mod
from ansible_collections.trainops.multinode.plugins.action.torchrun_wait import ActionModule, find_progress

PROGRESS = '[trainops] node=gpu1 rank=0/4 epoch=0 step=12/40 loss=2.3456 samples_per_s=1234.5'


def job(status, exit_code=None, signal=None, run_id='run1', node_rank=None):
    return {'run_id': run_id, 'status': status, 'exit_code': exit_code, 'signal': signal, 'pid': 100, 'pgid': 100,
            'supervisor_pid': 99, 'node_rank': node_rank, 'log_path': '/state/runs/%s/node.log' % run_id}


class Harness(object):
    """An ActionModule with a fake clock and a scripted remote module."""

    def __init__(self, tmp_path, args=None, script=None, check_mode=False, host='hostA'):
        self.clock = 0.0
        self.calls = []
        self.script = script or (lambda h, n, args: {'job': job('running'), 'log_tail': [PROGRESS]})
        task = MagicMock()
        task.args = dict({'state_dir': '/state', 'sync_dir': str(tmp_path / 'sync')}, **(args or {}))
        task.async_val = 0
        task.check_mode = check_mode
        task.action = 'trainops.multinode.torchrun_wait'
        connection = MagicMock()
        connection._shell.tmpdir = '/tmp/remote'
        self.action = ActionModule(task, connection, MagicMock(), loader=None, templar=None, shared_loader_obj=None)
        self.action._clock = lambda: self.clock
        self.action._sleep = self._sleep
        self.action._execute_module = self._execute_module
        self.action._display = MagicMock()
        self.host = host
        self.sync_dir = tmp_path / 'sync'

    def _sleep(self, seconds):
        assert seconds >= 0
        self.clock += seconds

    def _execute_module(self, module_name=None, module_args=None, task_vars=None, **kwargs):
        assert module_name == 'trainops.multinode.torchrun'
        self.calls.append(dict(module_args))
        if module_args['state'] == 'stopped':
            return {'changed': True, 'job': job('exited', 143), 'log_tail': ['terminated'], 'stopped_pids': [100, 101]}
        n = len([c for c in self.calls if c['state'] == 'query'])
        # the module watches the job on the node for up to wait_for_change seconds (here, always all of them: a job
        # that ends meanwhile is answered at once, which at the end of the watch is the latest it can be)
        self.clock += module_args.get('wait_for_change', 0)
        return self.script(self, n, module_args)

    def run(self):
        return self.action.run(task_vars={'inventory_hostname': self.host})

    def own_status(self):
        return json.loads((self.sync_dir / ('%s.json' % self.host)).read_text())

    def displayed(self):
        return [c.args[0] for c in self.action._display.display.call_args_list]


def write_peer(tmp_path, host, state, run_id='run1', node_rank=1, exit_code=1):
    sync = tmp_path / 'sync'
    sync.mkdir(exist_ok=True)
    (sync / ('%s.json' % host)).write_text(json.dumps(
        {'host': host, 'node_rank': node_rank, 'state': state, 'status': 'exited', 'exit_code': exit_code, 'signal': None,
         'run_id': run_id, 'progress': 'epoch=0 step=3/40'}))


def test_find_progress_default_pattern():
    pattern = re.compile(wait_mod.DEFAULT_PROGRESS_PATTERN)
    lines = ['noise', PROGRESS, '[trainops] node=gpu1 rank=0/4 epoch=1 step=2/40 loss=1.0 samples_per_s=99.0  ', 'torch warning']
    assert find_progress(lines, pattern) == 'epoch=1 step=2/40 loss=1.0 samples_per_s=99.0'
    assert find_progress([PROGRESS], pattern) == 'epoch=0 step=12/40 loss=2.3456 samples_per_s=1234.5'
    assert find_progress(['[trainops] node=a rank=0/1 step=5/9 loss=3'], pattern) == 'step=5/9 loss=3'
    assert find_progress(['nothing here'], pattern) is None
    assert find_progress(['x loss=1'], re.compile(r'loss=\S+')) == 'loss=1'


def test_success_after_polling(tmp_path):
    def script(h, n, args):
        if n < 4:
            return {'job': job('running'), 'log_tail': [PROGRESS]}
        return {'job': job('exited', 0), 'log_tail': ['done']}
    h = Harness(tmp_path, args={'node_rank': 0, 'run_id': 'run1'}, script=script)
    res = h.run()
    assert not res.get('failed')
    assert res['job']['status'] == 'exited'
    # asked at once, then every ASK_INTERVAL (10 s): the poll's 2 s of sleep and 8 s of watching the job on the node
    assert res['waited_s'] == pytest.approx(30.0)
    assert [c.get('wait_for_change') for c in h.calls] == [None, 8.0, 8.0, 8.0]
    assert res['peer_failures'] == [] and res['timed_out'] is False
    assert res['progress'] == 'epoch=0 step=12/40 loss=2.3456 samples_per_s=1234.5'
    assert all(c['state'] == 'query' and c['run_id'] == 'run1' and c['state_dir'] == '/state' for c in h.calls)
    assert h.own_status()['state'] == 'succeeded'
    assert h.own_status()['node_rank'] == 0


def test_the_verdict_says_when_the_controller_saw_the_job_run_and_end(tmp_path):
    # on the controller's clock: the last question that found it running was sent at 12 s, the answer that found it
    # ended came at 30 s (asked at 22 s, watched 8 s); _judgment.blame orders the nodes' ends by these
    def script(h, n, args):
        return {'job': job('running') if n < 4 else job('exited', 1), 'log_tail': []}
    h = Harness(tmp_path, script=script)
    h.action._wall = lambda: 1000.0 + h.clock
    res = h.run()
    assert res['verdict']['state'] == 'failed'
    assert res['verdict']['seen_running_at'] == pytest.approx(1012.0)
    assert res['verdict']['seen_ended_at'] == pytest.approx(1030.0)
    assert res['verdict']['unreachable_since'] is None


def test_a_gone_verdict_says_since_when_on_the_controllers_clock(tmp_path):
    def script(h, n, args):
        return {'job': job('running'), 'log_tail': []} if n == 1 else {'unreachable': True, 'msg': 'No route to host'}
    h = Harness(tmp_path, args={'poll_interval': 5, 'unreachable_grace': 30}, script=script)
    h.action._wall = lambda: 1000.0 + h.clock
    res = h.run()
    assert res['verdict']['state'] == 'gone' and res['verdict']['seen_ended_at'] is None
    assert res['verdict']['seen_running_at'] == pytest.approx(1000.0)
    assert res['verdict']['unreachable_since'] > res['verdict']['seen_running_at']


@pytest.mark.parametrize('args, watches', [
    # a progress line due every second: the node is asked every second, without watching
    ({'poll_interval': 1, 'progress_interval': 1}, [None, None, None, None]),
    # a poll longer than ASK_INTERVAL: asked every poll, as before
    ({'poll_interval': 10}, [None, None, None, None]),
    # the wait's timeout (20 s) bounds the watch: asked at 0, 1 (+9 s), 11 (+8 s, to its end less the poll), then at
    # its end without watching
    ({'poll_interval': 1, 'timeout': 20}, [None, 9.0, 8.0, None]),
])
def test_a_running_node_is_watched_between_questions_within_the_progress_poll_and_timeout(tmp_path, args, watches):
    def script(h, n, module_args):
        if n < len(watches):
            return {'job': job('running'), 'log_tail': [PROGRESS]}
        return {'job': job('exited', 0), 'log_tail': ['done']}
    h = Harness(tmp_path, args=args, script=script)
    res = h.run()
    assert [c.get('wait_for_change') for c in h.calls if c['state'] == 'query'][:len(watches)] == watches, h.calls
    assert not res.get('failed') or res.get('timed_out'), res


@pytest.mark.parametrize('status, exit_code, signal, expect', [
    ('exited', 1, None, 'exited with code 1'),
    ('exited', 137, 'SIGKILL', 'exited with code 137 (SIGKILL)'),
    ('lost', None, None, 'is lost'),
    ('absent', None, None, 'does not exist'),
])
def test_own_failure(tmp_path, status, exit_code, signal, expect):
    def script(h, n, args):
        if n < 2:
            return {'job': job('running'), 'log_tail': [PROGRESS]}
        return {'job': job(status, exit_code, signal), 'log_tail': ['Traceback', 'RuntimeError: NCCL error']}
    h = Harness(tmp_path, args={'node_rank': 3}, script=script)
    res = h.run()
    assert res['failed'] is True
    assert res['msg'].startswith('hostA rank 3: ')
    assert expect in res['msg']
    assert 'RuntimeError: NCCL error' in res['msg']
    assert res['log_tail'] == ['Traceback', 'RuntimeError: NCCL error']
    assert h.own_status()['state'] == 'failed'
    assert not [c for c in h.calls if c['state'] == 'stopped']


def test_peer_failure_stops_own_job(tmp_path):
    def script(h, n, args):
        if n == 3:
            write_peer(tmp_path, 'hostB', 'failed', node_rank=1)
        return {'job': job('running', node_rank=0), 'log_tail': [PROGRESS]}
    h = Harness(tmp_path, args={'stop_timeout': 30}, script=script)
    res = h.run()
    assert res['failed'] is True
    assert 'stopped because hostB (rank 1) failed' in res['msg']
    assert res['msg'].startswith('hostA rank 0: ')  # node_rank taken from the job
    stops = [c for c in h.calls if c['state'] == 'stopped']
    assert stops == [{'state': 'stopped', 'state_dir': '/state', 'stop_timeout': 30, 'log_lines': 20, 'run_id': 'run1',
                      'stop_reason': 'peer', 'stop_detail': 'stopped because hostB (rank 1) failed'}]
    assert res['verdict']['state'] == 'stopped'
    assert res['peer_failures'][0]['host'] == 'hostB' and res['peer_failures'][0]['exit_code'] == 1
    assert res['stopped_pids'] == [100, 101]
    assert res['timed_out'] is False
    assert h.own_status()['state'] == 'stopped'


def test_peer_error_counts_as_failure(tmp_path):
    write_peer(tmp_path, 'hostC', 'error', node_rank=2)
    h = Harness(tmp_path)
    res = h.run()
    assert res['failed'] is True and 'stopped because hostC (rank 2) could not be queried' in res['msg']


def test_peers_that_are_fine_or_stale_are_ignored(tmp_path):
    write_peer(tmp_path, 'hostB', 'stopped')
    write_peer(tmp_path, 'hostC', 'running')
    write_peer(tmp_path, 'hostD', 'failed', run_id='older-run')
    (tmp_path / 'sync' / 'garbage.json').write_text('{not json')

    def script(h, n, args):
        if n < 3:
            return {'job': job('running'), 'log_tail': []}
        return {'job': job('exited', 0), 'log_tail': []}
    res = Harness(tmp_path, script=script).run()
    assert not res.get('failed'), res['msg']


def test_timeout_does_not_stop(tmp_path):
    h = Harness(tmp_path, args={'timeout': 9, 'poll_interval': 2})
    res = h.run()
    assert res['failed'] is True and res['timed_out'] is True
    assert 'timed out after 9 seconds' in res['msg']
    assert not [c for c in h.calls if c['state'] == 'stopped']
    assert h.clock == pytest.approx(9.0)
    assert h.own_status()['state'] == 'running'


def test_progress_lines_every_interval(tmp_path):
    def script(h, n, args):
        if h.clock < 35:
            return {'job': job('running'), 'log_tail': ['x', PROGRESS]}
        return {'job': job('exited', 0), 'log_tail': []}
    h = Harness(tmp_path, args={'node_rank': 0, 'poll_interval': 2, 'progress_interval': 10}, script=script)
    res = h.run()
    assert not res.get('failed')
    shown = h.displayed()
    assert len(shown) == 3  # at 10, 20, 30 seconds
    assert shown[0] == 'hostA rank 0: running  epoch=0 step=12/40 loss=2.3456 samples_per_s=1234.5'


def test_query_failures_fail_after_retries(tmp_path):
    h = Harness(tmp_path, script=lambda h, n, args: {'failed': True, 'msg': 'Permission denied'})
    res = h.run()
    assert res['failed'] is True
    assert 'cannot query' in res['msg'] and 'Permission denied' in res['msg']
    assert len(h.calls) == wait_mod.MAX_QUERY_FAILURES
    assert h.own_status()['state'] == 'error'


def test_transient_query_failure_is_retried(tmp_path):
    def script(h, n, args):
        if n == 1:
            return {'unreachable': True, 'msg': 'ssh hiccup'}
        return {'job': job('exited', 0), 'log_tail': []}
    res = Harness(tmp_path, script=script).run()
    assert not res.get('failed')


def test_check_mode_queries_once_and_writes_nothing(tmp_path):
    write_peer(tmp_path, 'hostB', 'failed')
    h = Harness(tmp_path, check_mode=True)
    res = h.run()
    assert not res.get('failed')
    assert len(h.calls) == 1 and h.calls[0]['state'] == 'query'
    assert 'check mode' in res['msg']
    assert not (tmp_path / 'sync' / 'hostA.json').exists()


def test_invalid_args(tmp_path):
    with pytest.raises(AnsibleActionFail):
        Harness(tmp_path, args={'bogus': 1}).run()
    with pytest.raises(AnsibleActionFail, match='progress_pattern'):
        Harness(tmp_path, args={'progress_pattern': '(unclosed'}).run()


# --- unreachable is not failed: peers keep running until the grace is over ------------------------

def test_unreachable_within_the_grace_keeps_waiting_and_shows_it(tmp_path):
    def script(h, n, args):
        # four questions unreachable, about 40 s (each asked ASK_INTERVAL after the one before): within the grace
        if 3 <= n <= 6:
            return {'unreachable': True, 'msg': 'ssh: connect to host 10.78.0.12 port 22: Connection timed out'}
        if n < 16:
            return {'job': job('running', node_rank=1), 'log_tail': [PROGRESS]}
        return {'job': job('exited', 0, node_rank=1), 'log_tail': []}
    h = Harness(tmp_path, args={'poll_interval': 2, 'progress_interval': 10, 'unreachable_grace': 60}, script=script)
    res = h.run()
    assert not res.get('failed'), res['msg']
    assert res['verdict']['state'] == 'succeeded'
    unreachable = [line for line in h.displayed() if 'unreachable' in line]
    assert unreachable and re.match(r'hostA rank 1: unreachable \d+s \(peers keep running; the job fails after 60 s\)',
                                    unreachable[0]), unreachable
    assert not [c for c in h.calls if c['state'] == 'stopped']


def test_unreachable_status_file_is_not_a_failure_for_peers(tmp_path):
    write_peer(tmp_path, 'hostB', 'unreachable')

    def script(h, n, args):
        return {'job': job('running' if n < 4 else 'exited', 0 if n >= 4 else None), 'log_tail': []}
    res = Harness(tmp_path, script=script).run()
    assert not res.get('failed'), res['msg']


def test_unreachable_past_the_grace_is_gone(tmp_path):
    h = Harness(tmp_path, args={'poll_interval': 5, 'unreachable_grace': 30},
                script=lambda h, n, args: {'unreachable': True, 'msg': 'Connection timed out'})
    res = h.run()
    assert res['failed'] is True
    assert res['verdict']['state'] == 'gone'
    assert 'unreachable: no answer since' in res['msg'] and '30 s (trainops_unreachable_grace=30)' in res['msg']
    assert h.clock == pytest.approx(30.0)
    assert h.own_status()['state'] == 'gone' and h.own_status()['unreachable_since'] is not None


def test_a_gone_peer_stops_the_job(tmp_path):
    write_peer(tmp_path, 'hostB', 'gone', node_rank=1)
    h = Harness(tmp_path)
    res = h.run()
    assert res['failed'] is True and 'hostB (rank 1) was unreachable too long' in res['msg']
    assert [c['stop_reason'] for c in h.calls if c['state'] == 'stopped'] == ['peer']


# --- stalls: no new output for stall_timeout seconds -----------------------------------------------

def _running_with_log(size_of):
    def script(h, n, args):
        running = dict(job('running', node_rank=0), log_bytes=size_of(h.clock))
        return {'job': running, 'log_tail': ['[trainops] node=a rank=0/2 epoch=0 step=7/40 loss=1.0', '*' * 40, '']}
    return script


def test_a_log_that_stops_growing_is_stalled_and_stopped(tmp_path):
    h = Harness(tmp_path, args={'poll_interval': 2, 'stall_timeout': 20},
                script=_running_with_log(lambda clock: min(clock, 10) * 100))
    res = h.run()
    assert res['failed'] is True and res['verdict']['state'] == 'stalled'
    assert 'no new output for 20 s (trainops_stall_timeout=20)' in res['msg']
    assert 'last line: [trainops] node=a rank=0/2 epoch=0 step=7/40 loss=1.0' in res['msg']
    assert h.clock == pytest.approx(30.0)  # last growth at 10 s, + 20 s
    stops = [c for c in h.calls if c['state'] == 'stopped']
    assert [c['stop_reason'] for c in stops] == ['stalled']
    assert h.own_status()['state'] == 'stalled'


def _two_node_stall(tmp_path, peer_settles_at=None):
    """hostA's log stops growing at 10 s in a 2-node job; hostB says it stopped at ``peer_settles_at`` (None: never)."""
    def script(h, n, args):
        running = dict(job('running', node_rank=0), log_bytes=min(h.clock, 10) * 100, nnodes=2)
        return {'job': running, 'log_tail': ['[trainops] node=a rank=0/2 epoch=0 step=7/40 loss=1.0']}
    h = Harness(tmp_path, args={'poll_interval': 2, 'stall_timeout': 20}, script=script)
    write_peer(tmp_path, 'hostB', 'running')
    sleep = h._sleep

    def sleeping(seconds):
        sleep(seconds)
        if peer_settles_at is not None and h.clock >= peer_settles_at:
            write_peer(tmp_path, 'hostB', 'stopped')
    h.action._sleep = sleeping
    return h


def test_a_stall_dumps_every_ranks_stack_and_stops_only_once_the_peers_dumped_theirs(tmp_path):
    h = _two_node_stall(tmp_path, peer_settles_at=37)
    res = h.run()
    assert res['verdict']['state'] == 'stalled'
    # this node's stacks first (its ranks left running), then the stall said, then the stop once hostB has settled
    dumped = [i for i, c in enumerate(h.calls) if c.get('dump_stacks')]
    stops = [i for i, c in enumerate(h.calls) if c['state'] == 'stopped']
    assert len(dumped) == 1 and h.calls[dumped[0]]['state'] == 'query' and stops == [dumped[0] + 1], h.calls
    assert 'dump_stacks' not in h.calls[stops[0]]
    assert h.clock == pytest.approx(37.0)  # stalled at 30 s, hostB settled at 37 s
    assert h.own_status()['state'] == 'stalled'


def test_a_stalled_node_stops_after_a_bounded_wait_for_a_peer_that_never_settles(tmp_path):
    h = _two_node_stall(tmp_path)
    h.run()
    assert h.clock == pytest.approx(30.0 + wait_mod.PEER_DUMP_WAIT)
    assert [c['stop_reason'] for c in h.calls if c['state'] == 'stopped'] == ['stalled']


@pytest.mark.parametrize('peer_state, dumps', [('stalled', True), ('failed', False)])
def test_a_node_dumps_its_stacks_when_a_peer_stalled_not_when_it_failed(tmp_path, peer_state, dumps):
    write_peer(tmp_path, 'hostB', peer_state, node_rank=1)
    h = Harness(tmp_path)
    h.run()
    stops = [c for c in h.calls if c['state'] == 'stopped']
    assert [c['stop_reason'] for c in stops] == ['peer'] and bool(stops[0].get('dump_stacks')) is dumps


def test_a_growing_log_is_never_stalled(tmp_path):
    def script(h, n, args):
        if h.clock >= 100:
            return {'job': dict(job('exited', 0), log_bytes=int(h.clock)), 'log_tail': []}
        return {'job': dict(job('running'), log_bytes=int(h.clock)), 'log_tail': []}
    res = Harness(tmp_path, args={'poll_interval': 2, 'stall_timeout': 5}, script=script).run()
    assert not res.get('failed'), res['msg']


def test_stall_detection_off_by_default(tmp_path):
    def script(h, n, args):
        if h.clock >= 500:
            return {'job': dict(job('exited', 0), log_bytes=1), 'log_tail': []}
        return {'job': dict(job('running'), log_bytes=1), 'log_tail': []}
    res = Harness(tmp_path, args={'poll_interval': 10}, script=script).run()
    assert not res.get('failed'), res['msg']


def test_a_stalled_peer_stops_the_job(tmp_path):
    write_peer(tmp_path, 'hostB', 'stalled', node_rank=1)
    res = Harness(tmp_path).run()
    assert res['failed'] is True and 'hostB (rank 1) stalled' in res['msg']


# --- the controller watcher: Ctrl-C leaves an experiment marked interrupted -------------------------

def test_the_first_host_starts_one_watcher(tmp_path):
    started = []
    for host in ('hostA', 'hostB'):
        h = Harness(tmp_path, args={'manifest': str(tmp_path / 'exp' / 'manifest.json')}, host=host,
                    script=lambda h, n, args: {'job': job('exited', 0), 'log_tail': []})
        h.action._start_watcher = lambda pid, path: started.append((pid, path))
        assert not h.run().get('failed')
    assert len(started) == 1 and started[0][1].endswith('manifest.json')
    marker = json.loads((tmp_path / 'sync' / wait_mod.WATCHER_FILE).read_text())
    assert marker['manifest'] == started[0][1]


def _manifest(tmp_path, outcome):
    exp = tmp_path / 'exp'
    exp.mkdir()
    (exp / 'manifest.json').write_text(json.dumps({'run_id': 'r1', 'outcome': outcome}))
    (exp / 'summary.txt').write_text('experiment : r1\n')
    return exp


def test_watcher_marks_interrupted_when_the_controller_is_gone(tmp_path):
    import subprocess
    exp = _manifest(tmp_path, 'running')
    dead = subprocess.Popen(['true'])
    dead.wait()
    wait_mod.watch_controller(dead.pid, str(exp / 'manifest.json'), interval=0.01)
    manifest = json.loads((exp / 'manifest.json').read_text())
    assert manifest['outcome'] == 'interrupted' and manifest['interrupted_at']
    assert 'status.yml' in manifest['outcome_detail']
    assert (exp / 'summary.txt').read_text().startswith('outcome    : interrupted: the controller (pid %d)' % dead.pid)


def test_watcher_leaves_a_collected_experiment_alone(tmp_path):
    import os
    exp = _manifest(tmp_path, 'succeeded')
    wait_mod.watch_controller(os.getpid(), str(exp / 'manifest.json'), interval=0.01)  # returns at once
    assert json.loads((exp / 'manifest.json').read_text())['outcome'] == 'succeeded'


def test_start_watcher_detaches_and_marks_the_experiment(tmp_path):
    import subprocess
    import time
    exp = _manifest(tmp_path, 'running')
    controller = subprocess.Popen(['sleep', '30'])
    try:
        wait_mod.start_watcher(controller.pid, str(exp / 'manifest.json'))
        time.sleep(0.5)
        assert json.loads((exp / 'manifest.json').read_text())['outcome'] == 'running'
    finally:
        controller.kill()
        controller.wait()
    deadline = time.time() + 10
    while time.time() < deadline and json.loads((exp / 'manifest.json').read_text())['outcome'] == 'running':
        time.sleep(0.1)
    assert json.loads((exp / 'manifest.json').read_text())['outcome'] == 'interrupted'


def test_a_connection_failure_raised_by_ansible_is_unreachable_not_the_end_of_the_task(tmp_path):
    from ansible.errors import AnsibleConnectionFailure

    def script(h, n, args):
        if 2 <= n <= 6:
            raise AnsibleConnectionFailure('Failed to connect to the host via ssh: Connection reset by peer')
        return {'job': job('running' if n < 9 else 'exited', 0 if n >= 9 else None), 'log_tail': []}
    h = Harness(tmp_path, args={'progress_interval': 2}, script=script)
    res = h.run()
    assert not res.get('failed'), res['msg']
    assert any('unreachable' in line for line in h.displayed())


# --- launcher=srun: a node Slurm ended because a peer failed is stopped, not failed ---------------

def srun_job(status, exit_code=None, signals=(), node_rank=0):
    return dict(job(status, exit_code, node_rank=node_rank), supervisor_signals=list(signals),
                launcher={'name': 'srun', 'job_id': '7', 'step_id': '2', 'step': '7.2'})


@pytest.mark.parametrize('ended', [srun_job('lost'), srun_job('exited', 143, signals=['SIGTERM'])])
def test_srun_node_ended_by_slurm_after_a_peer_failed_is_stopped_by_the_step(tmp_path, ended):
    def script(h, n, args):
        return {'job': srun_job('running') if n < 3 else ended, 'log_tail': [PROGRESS]}
    h = Harness(tmp_path, args={'poll_interval': 1}, script=script)
    sleep = h._sleep

    def later(seconds):  # the culprit's wait publishes seconds after this one saw its node killed
        sleep(seconds)
        if h.clock >= 5:
            write_peer(tmp_path, 'hostC', 'failed', node_rank=2)
    h.action._sleep = later
    res = h.run()
    assert res['failed'] is True and res['verdict']['state'] == 'stopped'
    assert res['msg'] == ('hostA rank 0: ended by Slurm with step 7.2 (srun --kill-on-bad-exit) because hostC (rank 2) '
                          'failed')
    assert res['peer_failures'][0]['host'] == 'hostC'
    assert h.own_status()['state'] == 'stopped'
    # nothing to stop: Slurm ended it; the stop record comes from the judgment (_experiment.step_stops)
    assert not [c for c in h.calls if c['state'] == 'stopped']


def test_srun_node_ended_by_slurm_without_a_failed_peer_is_a_failure(tmp_path):
    write_peer(tmp_path, 'hostB', 'stopped')  # another node Slurm ended: no cause
    h = Harness(tmp_path, args={'poll_interval': 1},
                script=lambda h, n, args: {'job': srun_job('lost' if n > 1 else 'running'), 'log_tail': []})
    res = h.run()
    assert res['failed'] is True and res['verdict']['state'] == 'failed' and 'is lost' in res['msg']
    assert h.own_status()['state'] == 'failed'
    assert h.clock >= wait_mod.STEP_PEER_WAIT  # it looked for the peer that failed for that long


@pytest.mark.parametrize('ended', [srun_job('exited', 1), dict(srun_job('lost'), stop={'reason': 'user'}),
                                   dict(job('lost'), launcher={'name': 'ssh'})])
def test_a_node_that_failed_by_itself_or_over_ssh_stays_a_failure(tmp_path, ended):
    write_peer(tmp_path, 'hostC', 'failed', node_rank=2)
    h = Harness(tmp_path, script=lambda h, n, args: {'job': ended, 'log_tail': []})
    res = h.run()
    assert res['verdict']['state'] == 'failed' and h.own_status()['state'] == 'failed'


def test_srun_a_failed_peer_leaves_the_end_to_slurm_first(tmp_path):
    write_peer(tmp_path, 'hostC', 'failed', node_rank=2)

    def script(h, n, args):  # Slurm kills this node's task 3 s after the peer failed
        return {'job': srun_job('running' if h.clock < 3 else 'lost'), 'log_tail': [PROGRESS]}
    h = Harness(tmp_path, args={'poll_interval': 1}, script=script)
    res = h.run()
    assert res['verdict']['state'] == 'stopped' and 'ended by Slurm with step 7.2' in res['msg']
    assert not [c for c in h.calls if c['state'] == 'stopped']


def test_srun_when_slurm_does_not_end_the_node_the_wait_stops_it(tmp_path):
    write_peer(tmp_path, 'hostC', 'failed', node_rank=2)
    h = Harness(tmp_path, args={'poll_interval': 1},
                script=lambda h, n, args: {'job': srun_job('running'), 'log_tail': [PROGRESS]})
    res = h.run()
    assert res['verdict']['state'] == 'stopped' and 'stopped because hostC (rank 2) failed' in res['msg']
    assert [c['stop_reason'] for c in h.calls if c['state'] == 'stopped'] == ['peer']
    assert h.clock >= wait_mod.STEP_PEER_WAIT


def test_srun_a_stalled_peer_is_stopped_for_at_once(tmp_path):
    write_peer(tmp_path, 'hostC', 'stalled', node_rank=2)
    h = Harness(tmp_path, script=lambda h, n, args: {'job': srun_job('running'), 'log_tail': [PROGRESS]})
    res = h.run()
    assert [c['stop_reason'] for c in h.calls if c['state'] == 'stopped'] == ['peer'] and h.clock == 0


# --- stragglers: the node's step time from its metrics' tail, named in its progress line ----------------------------

def figure(compute=None, step=0.5):
    return {'ranks': 2, 'records': 10, 'step_time_s': {'median': step, 'p90': step},
            'compute_time_s': None if compute is None else {'median': compute, 'p90': compute}}


def write_running_peer(tmp_path, host, step_times, run_id='run1', state='running'):
    sync = tmp_path / 'sync'
    sync.mkdir(exist_ok=True)
    (sync / ('%s.json' % host)).write_text(json.dumps(
        {'host': host, 'node_rank': 1, 'state': state, 'status': 'running', 'exit_code': None, 'signal': None,
         'run_id': run_id, 'progress': 'epoch=0 step=3/40', 'step_times': step_times}))


def _running_then_done(step_times):
    def script(h, n, args):
        if h.clock < 15:
            return {'job': job('running'), 'log_tail': [PROGRESS], 'step_times': step_times}
        return {'job': job('exited', 0), 'log_tail': []}
    return script


def test_the_query_asks_for_the_metrics_tail_and_the_status_file_carries_the_step_time(tmp_path):
    h = Harness(tmp_path, args={'node_rank': 0}, script=_running_then_done(figure(0.1)))
    assert not h.run().get('failed')
    assert all(c['metrics_records'] == 5 for c in h.calls if c['state'] == 'query')
    assert h.own_status()['step_times'] == figure(0.1)


def test_a_slow_node_is_named_a_straggler_in_its_progress_line(tmp_path):
    write_running_peer(tmp_path, 'hostB', figure(0.1))
    write_running_peer(tmp_path, 'hostC', figure(0.1))
    h = Harness(tmp_path, args={'node_rank': 0, 'progress_interval': 10}, script=_running_then_done(figure(0.2)))
    assert not h.run().get('failed')
    assert h.displayed() == [
        'hostA rank 0: running  epoch=0 step=12/40 loss=2.3456 samples_per_s=1234.5  STRAGGLER compute time 0.2 s, '
        '100% above the other nodes\' median 0.1 s (threshold 15%)']


@pytest.mark.parametrize('own, peers, threshold', [
    (figure(0.11), {'hostB': figure(0.1)}, 0.15),          # within the threshold
    (figure(0.2), {'hostB': figure(0.1)}, 1.5),            # a larger threshold
    (figure(0.1), {'hostB': figure(0.2)}, 0.15),           # the other node is the slow one
    (figure(0.2), {}, 0.15),                               # one node alone
    (None, {'hostB': figure(0.1)}, 0.15),                  # this node's script writes no metrics
    (figure(0.2), {'hostB': None}, 0.15),                  # the peer's does not
    (figure(0.2), {'hostB': 'junk'}, 0.15),                # a peer's status file that is odd
])
def test_no_straggler_named_when_it_is_none_or_the_data_is_missing(tmp_path, own, peers, threshold):
    for host, step_times in peers.items():
        write_running_peer(tmp_path, host, step_times)
    h = Harness(tmp_path, args={'node_rank': 0, 'straggler_threshold': threshold}, script=_running_then_done(own))
    assert not h.run().get('failed')
    assert h.displayed() == ['hostA rank 0: running  epoch=0 step=12/40 loss=2.3456 samples_per_s=1234.5']


def test_peers_of_another_run_or_no_longer_running_are_not_compared(tmp_path):
    write_running_peer(tmp_path, 'hostB', figure(0.1), run_id='other')
    write_running_peer(tmp_path, 'hostC', figure(0.1), state='succeeded')
    h = Harness(tmp_path, args={'node_rank': 0, 'run_id': 'run1'}, script=_running_then_done(figure(0.2)))
    assert not h.run().get('failed')
    assert 'STRAGGLER' not in h.displayed()[0]


@pytest.mark.parametrize('value', [0, -0.5, 11])
def test_a_bad_straggler_threshold_fails_before_any_query(tmp_path, value):
    h = Harness(tmp_path, args={'straggler_threshold': value})
    with pytest.raises(AnsibleActionFail, match='straggler_threshold=%s: ' % float(value)):
        h.run()
    assert h.calls == []


def test_a_script_without_progress_lines_shows_its_last_log_line():
    from ansible_collections.trainops.multinode.plugins.action.torchrun_wait import progress_text
    assert progress_text('step=3/9', ['own line']) == 'step=3/9'
    assert progress_text(None, ['epoch 1 of run', '', '****']) == 'log: epoch 1 of run'
    assert progress_text(None, []) == '(no progress line yet)'


# --- the watch hub's files (module_utils/_watch_hub.py) --------------------------------------------------

def write_hub(tmp_path, host, the_job, line_at=None, stream='up', **result):
    hub_dir = tmp_path / 'sync' / 'hub'
    hub_dir.mkdir(parents=True, exist_ok=True)
    (hub_dir / ('%s.json' % host)).write_text(json.dumps(
        {'host': host, 'run_id': 'run1', 'stream': stream, 'line_at': time.time() if line_at is None else line_at,
         'result': dict({'job': the_job, 'log_tail': [PROGRESS]}, **result), 'stopped_by_hub': None}))


def test_with_the_hubs_stream_the_node_is_not_asked(tmp_path):
    write_hub(tmp_path, 'hostA', job('running', node_rank=0))

    def script(h, n, args):
        raise AssertionError('the module must not run while the hub streams the node')
    h = Harness(tmp_path, script=script)
    h.action._sleep = lambda seconds: (h._sleep(seconds), write_hub(tmp_path, 'hostA', job('exited', 0, node_rank=0)))
    res = h.run()
    assert res['failed'] is False and res['verdict']['state'] == 'succeeded' and h.calls == []


def test_a_stale_hub_file_is_not_trusted_the_node_is_asked(tmp_path):
    write_hub(tmp_path, 'hostA', job('running'), line_at=time.time() - 60)
    h = Harness(tmp_path, script=lambda h, n, args: {'job': job('exited', 0), 'log_tail': ['done']})
    res = h.run()
    assert res['verdict']['state'] == 'succeeded' and [c['state'] for c in h.calls] == ['query']


def test_a_node_the_hub_stopped_for_a_peer_past_the_forks_is_stopped_not_failed(tmp_path):
    # hostB's wait has not started (past the forks): the hub's file says its rank failed, the hub stopped hostA
    write_hub(tmp_path, 'hostB', job('running', node_rank=1), rank_failure={'exitcode': -9, 'local_rank': 0, 'pid': 7})
    stopped = dict(job('exited', -15, 'SIGTERM', node_rank=0), stop={'reason': 'peer',
                                                                     'detail': 'stopped because hostB (rank 1) failed'})
    write_hub(tmp_path, 'hostA', stopped)
    h = Harness(tmp_path, script=lambda h, n, args: {'job': stopped, 'log_tail': []})
    res = h.run()
    assert res['failed'] is True and res['verdict']['state'] == 'stopped', res
    assert res['msg'] == 'hostA rank 0: stopped because hostB (rank 1) failed'
    assert res['peer_failures'][0]['host'] == 'hostB' and h.calls == []
    assert h.own_status()['state'] == 'stopped'


def test_each_host_registers_with_the_hub_and_the_first_starts_it(tmp_path, monkeypatch):
    spawned = []
    monkeypatch.setattr(ActionModule, '_spawn_hub', lambda self, sync_dir, pid: spawned.append(sync_dir) or 4242)
    options = {'host': '10.0.0.2', 'port': 2222, 'remote_user': 'trainer', 'ssh_args': '-o ControlMaster=auto -o ControlPersist=60s',
               'ssh_common_args': '', 'ssh_extra_args': '', 'timeout': 10, 'ssh_executable': 'ssh',
               'private_key_file': None, 'control_path': None, 'control_path_dir': '~/.ansible/cp'}
    for host, transport in (('hostA', 'local'), ('hostB', 'ssh')):
        h = Harness(tmp_path, args={'watch_start': True, 'run_dir': '/srv/state/n0/runs/run1', 'run_id': 'run1'}, host=host)
        h.action._connection.transport = transport
        h.action._connection.get_option = options.get
        h.action._connection._create_control_path = lambda host, port, user: '%(directory)s/' + 'cp-%s' % host
        res = h.action.run(task_vars={'inventory_hostname': host, 'ansible_python_interpreter': '/opt/py/bin/python3'})
        assert res['watched'] is True and h.calls == []
    assert len(spawned) == 1
    hub_dir = tmp_path / 'sync' / 'hub'
    assert json.loads((hub_dir / 'hub.json').read_text())['pid'] == 4242
    local = json.loads((hub_dir / 'hostA.spec.json').read_text())
    watcher = ['/opt/py/bin/python3', '/srv/state/n0/runs/run1/watch.py', '--log-lines', '20', '--metrics-records', '5',
               '--progress-interval', '10.0']
    assert local == {'host': 'hostA', 'run_id': 'run1', 'argv': watcher}
    ssh = json.loads((hub_dir / 'hostB.spec.json').read_text())['argv']
    assert ssh[0] == 'ssh' and ssh[-3:-1] == ['-T', 'trainer@10.0.0.2'] and ssh[-1] == 'exec ' + ' '.join(watcher)
    assert any(word.startswith('ControlPath=') and word.endswith('/cp-10.0.0.2') for word in ssh)
    assert 'Port=2222' in ssh
