"""The node's watcher (plugins/module_utils/_node_watch.py): its decisions, and the program itself on a real run
directory with real processes (a stand-in torchrun that starts one sleeping "rank")."""
import json
import os
import re
import select
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _node_watch as nw
from ansible_collections.trainops.multinode.plugins.module_utils import _torchrun as tr

MODULE_UTILS = os.path.dirname(tr.__file__)


def test_watch_libs_are_what_the_query_imports_to_the_end():
    found, todo = set(), ['_torchrun']
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        with open(os.path.join(MODULE_UTILS, name + '.py')) as handle:
            source = handle.read()
        todo += re.findall(r'plugins\.module_utils\.(_\w+) import', source)
        for group in re.findall(r'plugins\.module_utils import \(?([\w, \n]+?)\)?\n', source):
            todo += [word.split()[0] for word in group.split(',') if word.strip()]
    assert sorted(found) == sorted(nw.WATCH_LIBS)


def test_pacing_queries_on_a_change_paces_the_log_and_beats_when_nothing_changes():
    pacing = nw.Pacing(progress_interval=10, heartbeat=5)
    running = (False, False, True, True, 100)
    assert pacing.look(0.0, running) == 'query'
    pacing.printed(0.0, status=True)
    assert pacing.look(0.5, running) is None
    # the log grew: its status waits for the progress interval
    assert pacing.look(1.0, running[:-1] + (200,)) is None
    assert pacing.look(5.0, running[:-1] + (300,)) == 'heartbeat'
    pacing.printed(5.0)
    assert pacing.look(9.5, running[:-1] + (300,)) is None
    assert pacing.look(10.0, running[:-1] + (300,)) == 'query'
    pacing.printed(10.0, status=True)
    assert pacing.look(12.0, running[:-1] + (300,)) is None
    # exit.json, a stop record, the supervisor gone: at once, whatever the interval
    for changed in ((True, False, True, True, 300), (False, True, True, True, 300), (False, False, True, False, 300)):
        pacing = nw.Pacing(progress_interval=10, heartbeat=5)
        pacing.look(0.0, running)
        pacing.printed(0.0, status=True)
        assert pacing.look(0.5, changed) == 'query'


def test_status_line_is_bounded_log_lines_go_first(monkeypatch):
    monkeypatch.setattr(nw, 'MAX_LINE', 2000)
    result = {'job': {'status': 'running', 'env': {'A': 'x' * 300}}, 'log_tail': ['y' * 900, 'z' * 900]}
    line = json.loads(nw.status_line('status', 1.0, result=result))
    assert line['kind'] == 'status' and line['result']['job']['status'] == 'running'
    assert line['result']['log_tail'] == [] and line['result']['job']['env'] == {'A': 'x' * 300}
    result['job']['env'] = {'A': 'x' * 3000}
    line = json.loads(nw.status_line('status', 1.0, result=result))
    assert line['result']['job']['env'] is None
    assert json.loads(nw.status_line('status', 1.0, result={'job': {'x': 'y' * 5000}}))['kind'] == 'error'
    assert len(nw.status_line('heartbeat', 2.5)) < 100


@pytest.mark.parametrize('line, expected', [
    (b'{"cmd": "stop", "reason": "peer", "detail": "stopped because n2 (rank 1) failed"}',
     {'cmd': 'stop', 'reason': 'peer', 'detail': 'stopped because n2 (rank 1) failed', 'dump_stacks': False,
      'stop_timeout': 15}),
    (b'{"cmd": "stop", "reason": "peer", "detail": "d", "dump_stacks": true, "stop_timeout": 3}',
     {'cmd': 'stop', 'reason': 'peer', 'detail': 'd', 'dump_stacks': True, 'stop_timeout': 3}),
    (b'{"cmd": "stop", "reason": "user", "detail": "d"}', None),
    (b'{"cmd": "rm", "reason": "peer", "detail": "d"}', None),
    (b'{"cmd": "stop", "reason": "peer", "detail": 3}', None),
    (b'{"cmd": "stop", "reason": "peer", "detail": "d", "stop_timeout": true}', None),
    (b'{"cmd": "stop", "reason": "peer", "detail": "d", "dump_stacks": "yes"}', None),
    (b'stop peer n2', None),
    (b'[1]', None),
    (b'{"cmd": "stop", "reason": "peer", "detail": "' + b'x' * 9000 + b'"}', None),
])
def test_parse_command(line, expected):
    assert nw.parse_command(line) == expected


# --- the real program --------------------------------------------------------------------------

FAKE_TORCHRUN = r'''#!%s
import os, signal, subprocess, sys, time
print('[trainops] step=1', flush=True)
rank = subprocess.Popen(['sleep', '600'])
signal.signal(signal.SIGTERM, lambda *a: (rank.terminate(), sys.exit(143)))
code = rank.wait()
if code:
    # what torchrun's agent logs at once; then its shutdown waits for a store that is gone
    print('E1128 08:13:54.908000 14911 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: %%d) '
          'local_rank: 0 (pid: %%d) of binary: /usr/bin/python3' %% (code, rank.pid), file=sys.stderr, flush=True)
    time.sleep(30)
sys.exit(code and 1)
'''


@pytest.fixture
def run(tmp_path):
    """A run started by the module's own start (a real supervisor) with a stand-in torchrun and one sleeping rank."""
    fake = tmp_path / 'torchrun'
    fake.write_text(FAKE_TORCHRUN % sys.executable)
    fake.chmod(0o755)
    params = dict(state='started', state_dir=str(tmp_path / 'state'), node_id='n0', run_id='run1', nnodes=2,
                  nproc_per_node=1, node_rank=0, master_addr='127.0.0.1', master_port=29500, entrypoint='train.py',
                  torchrun=str(fake), chdir=str(tmp_path), python=sys.executable)
    result = tr.run_module(params)
    run_dir = result['job']['run_dir']
    yield run_dir, result['job']
    tr.run_module(dict(state='stopped', state_dir=str(tmp_path / 'state'), node_id='n0', run_id='run1', stop_timeout=2))


def rank_pid(job):
    out = subprocess.run(['pgrep', '-P', str(job['pid'])], capture_output=True, text=True, check=False).stdout.split()
    return int(out[0])


def start_watcher(run_dir, *args):
    # a Python that cannot import the collection (-E -s, another working directory), as on a node
    return subprocess.Popen([sys.executable, '-E', '-s', os.path.join(run_dir, 'watch.py')] + list(args),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd='/')


def read_line(proc, timeout):
    ready, _w, _x = select.select([proc.stdout], [], [], timeout)
    assert ready, 'no line within %s s' % timeout
    line = proc.stdout.readline()
    return json.loads(line) if line else None


def lines_until(proc, want, timeout):
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = read_line(proc, deadline - time.monotonic())
        seen.append(line)
        if line is None or want(line):
            return seen
    raise AssertionError('not seen within %s s: %s' % (timeout, seen))


def test_restarts_left():
    assert not nw.restarts_left({'argv': ['python', '-m', 'torch.distributed.run', '--max-restarts', '0', 'train.py']})
    assert nw.restarts_left({'argv': ['torchrun', '--max-restarts', '3', 'train.py']})
    assert not nw.restarts_left({'argv': 'not a list'}) and not nw.restarts_left({})


def test_end_due_after_the_grace_once():
    assert not nw.end_due(None, 10.0)
    failure = {'rank': {'exitcode': -9, 'local_rank': 0, 'pid': 5}, 'seen': 10.0, 'ended': False}
    assert not nw.end_due(failure, 10.0 + nw.FAILED_GRACE / 2)
    assert nw.end_due(failure, 10.0 + nw.FAILED_GRACE)
    assert not nw.end_due(dict(failure, ended=True), 20.0)


def test_the_watcher_says_the_run_at_once_and_ends_a_failed_run_that_hangs(run):
    run_dir, job = run
    assert sorted(os.listdir(os.path.join(run_dir, nw.LIB_DIR, *nw.PACKAGE.split('.')))) == sorted(
        [name + '.py' for name in nw.WATCH_LIBS] + ['__init__.py'])
    proc = start_watcher(run_dir, '--progress-interval', '1')
    try:
        first = read_line(proc, 10)
        assert first['kind'] == 'status' and first['result']['job']['status'] == 'running'
        assert first['result']['job']['run_id'] == 'run1'
        # nothing changes: a heartbeat, no status
        beat = read_line(proc, nw.HEARTBEAT + 3)
        assert beat['kind'] == 'heartbeat'
        os.kill(rank_pid(job), signal.SIGKILL)
        killed = time.monotonic()
        # torchrun's line about the rank: said at once, while torchrun still runs
        seen = lines_until(proc, lambda line: line and line['kind'] == 'status' and line['result'].get('rank_failure'), 10)
        assert time.monotonic() - killed < 1.5, seen
        assert seen[-1]['result']['rank_failure']['exitcode'] == -9
        assert seen[-1]['result']['job']['status'] == 'running'
        # torchrun's shutdown hangs (30 s here): the watcher records the rank's death and ends the run's tree after
        # FAILED_GRACE; exit.json says the rank's SIGKILL, not the SIGTERM that ended torchrun, and no stop record
        seen = lines_until(proc, lambda line: line and line['kind'] == 'status'
                           and line['result']['job']['status'] == 'exited', 10)
        assert time.monotonic() - killed < 3.0, seen
        assert 'ended_failed' in [line['kind'] for line in seen], seen
        ended = seen[-1]['result']['job']
        assert (ended['exit_code'], ended['signal'], ended['stop']) == (128 + signal.SIGKILL, 'SIGKILL', None), ended
        assert ended['rank_failure']['exitcode'] == -9 and ended['torchrun_end'] == {'exit_code': 143, 'signal': None}
        assert not os.path.exists('/proc/%d' % job['pid'])
        # the run ended and was said: the watcher ends
        assert proc.wait(timeout=5) == 0
    finally:
        proc.kill()
        proc.wait()


def test_a_stop_command_stops_the_run_with_its_reason_and_end_of_input_leaves_it_running(run):
    run_dir, job = run
    proc = start_watcher(run_dir)
    first = read_line(proc, 10)
    assert first['result']['job']['status'] == 'running'
    proc.stdin.close()
    assert proc.wait(timeout=5) == 0
    assert os.path.exists('/proc/%d' % rank_pid(job)), 'the job must keep running when the watcher goes'
    proc = start_watcher(run_dir)
    try:
        assert read_line(proc, 10)['kind'] == 'status'
        proc.stdin.write(b'not a command\n')
        proc.stdin.write(json.dumps({'cmd': 'stop', 'reason': 'peer', 'detail': 'stopped because n1 (rank 1) failed',
                                     'stop_timeout': 2}).encode() + b'\n')
        proc.stdin.flush()
        seen = lines_until(proc, lambda line: line and line['kind'] == 'status'
                           and line['result']['job']['status'] == 'exited', 20)
        kinds = [line['kind'] for line in seen]
        assert kinds[0] == 'refused' and 'stopped' in kinds, seen
        stop = seen[-1]['result']['job']['stop']
        assert stop['reason'] == 'peer' and stop['detail'] == 'stopped because n1 (rank 1) failed'
        assert not os.path.exists('/proc/%d' % job['pid'])
    finally:
        proc.kill()
        proc.wait()
