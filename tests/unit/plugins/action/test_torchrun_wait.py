# -*- coding: utf-8 -*-

# Copyright (c) 2025, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for the torchrun_wait action plugin; _execute_module, the clock and the display are mocked."""

from __future__ import annotations

import json
import re

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
    assert res['waited_s'] == pytest.approx(6.0)
    assert res['peer_failures'] == [] and res['timed_out'] is False
    assert res['progress'] == 'epoch=0 step=12/40 loss=2.3456 samples_per_s=1234.5'
    assert all(c['state'] == 'query' and c['run_id'] == 'run1' and c['state_dir'] == '/state' for c in h.calls)
    assert h.own_status()['state'] == 'succeeded'
    assert h.own_status()['node_rank'] == 0


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
    assert stops == [{'state': 'stopped', 'state_dir': '/state', 'stop_timeout': 30, 'log_lines': 20, 'run_id': 'run1'}]
    assert res['peer_failures'][0]['host'] == 'hostB' and res['peer_failures'][0]['exit_code'] == 1
    assert res['stopped_pids'] == [100, 101]
    assert res['timed_out'] is False
    assert h.own_status()['state'] == 'stopped'


def test_peer_error_counts_as_failure(tmp_path):
    write_peer(tmp_path, 'hostC', 'error', node_rank=2)
    h = Harness(tmp_path)
    res = h.run()
    assert res['failed'] is True and 'stopped because hostC (rank 2) failed' in res['msg']


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
