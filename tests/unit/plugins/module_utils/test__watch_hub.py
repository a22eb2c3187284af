"""The job's watch hub (plugins/module_utils/_watch_hub.py): what it sends whom on which line, the lines it takes,
and the loop itself with local watchers (stand-in programs that print what a node's watcher prints)."""
import json
import os
import sys
import time

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _watch_hub as hub

RUNNING = {'status': 'running', 'node_rank': 1, 'run_id': 'r1'}


def job(**fields):
    return dict(RUNNING, **fields)


@pytest.mark.parametrize('fields, expected', [
    ({}, 'running'),
    ({'status': 'prepared'}, 'running'),
    ({'status': 'exited', 'exit_code': 0}, 'succeeded'),
    ({'status': 'exited', 'exit_code': 1}, 'failed'),
    ({'status': 'exited', 'exit_code': -9, 'signal': 'SIGKILL'}, 'failed'),
    ({'status': 'exited', 'exit_code': 0, 'signal': 'SIGTERM'}, 'failed'),
    ({'status': 'lost'}, 'failed'),
    ({'status': 'absent'}, 'failed'),
    # stopped (by the user, the wait, the hub): not a cause of its own
    ({'status': 'exited', 'exit_code': -15, 'stop': {'reason': 'peer'}}, 'ended'),
    # a Slurm step's run that Slurm ended (srun --kill-on-bad-exit): ended because of another node
    ({'status': 'exited', 'exit_code': -15, 'signal': 'SIGTERM', 'launcher': {'name': 'srun'},
      'supervisor_signals': ['SIGTERM']}, 'ended'),
    ({'status': 'lost', 'launcher': {'name': 'srun'}}, 'ended'),
    # the same over ssh: a failure
    ({'status': 'lost', 'launcher': {'name': 'ssh'}}, 'failed'),
])
def test_run_judgment(fields, expected):
    assert hub.run_judgment(job(**fields)) == expected


def test_stop_command_names_the_causes_and_dumps_stacks_for_a_stall():
    causes = [{'host': 'n2', 'node_rank': 1, 'state': 'failed', 'seen': 5.0}]
    command = hub.stop_command(causes)
    assert command == {'cmd': 'stop', 'reason': 'peer', 'detail': 'stopped because n2 (rank 1) failed',
                       'dump_stacks': False, 'stop_timeout': hub.PEER_STOP_TIMEOUT}
    causes.append({'host': 'n3', 'node_rank': None, 'state': 'stalled', 'seen': 6.0})
    command = hub.stop_command(causes)
    assert command['detail'] == 'stopped because n2 (rank 1) failed, n3 stalled' and command['dump_stacks']
    assert hub.stop_command([{'host': 'n4', 'node_rank': 3, 'state': 'gone'}])['detail'] == \
        'stopped because n4 (rank 3) was unreachable too long'


def test_stop_due_at_once_or_after_the_launchers_own_seconds():
    failed = [{'host': 'n2', 'node_rank': 1, 'state': 'failed', 'seen': 5.0}]
    assert hub.stop_due([], {}, 10.0) is None
    assert hub.stop_due(failed, {'launcher': {'name': 'ssh'}}, 5.0) == 5.0
    step = {'launcher': {'name': 'srun'}}
    assert hub.stop_due(failed, step, 5.0) == 5.0 + hub.STEP_PEER_WAIT
    # a stall or a gone node: Slurm ends nothing for those
    assert hub.stop_due(failed + [{'host': 'n3', 'state': 'stalled', 'seen': 7.0}], step, 7.0) == 5.0


def test_targets_are_the_running_reachable_nodes_not_yet_stopped():
    nodes = {'n1': {'state': 'running', 'up': True}, 'n2': {'state': 'failed', 'up': True},
             'n3': {'state': 'running', 'up': False}, 'n4': {'state': 'running', 'up': True},
             'n5': {'state': 'succeeded', 'up': True}}
    causes = [{'host': 'n2', 'state': 'failed', 'seen': 0.0}]
    assert hub.targets(nodes, causes, set()) == ['n1', 'n4']
    assert hub.targets(nodes, causes, {'n1'}) == ['n4']


def test_parse_line_takes_known_kinds_within_bounds(monkeypatch):
    status = json.dumps({'kind': 'status', 'at': 1.0, 'result': {'job': RUNNING, 'log_tail': []}}).encode()
    assert hub.parse_line(status)['result']['job'] == RUNNING
    assert hub.parse_line(b'{"kind": "heartbeat", "at": 2.0}') == {'kind': 'heartbeat', 'at': 2.0}
    for bad in (b'not json', b'[1, 2]', b'{"kind": "rm -rf"}', b'{"kind": "status", "result": "x"}',
                b'{"kind": "status", "result": {"job": []}}'):
        assert hub.parse_line(bad) is None
    monkeypatch.setattr(hub, 'MAX_LINE', 50)
    assert hub.parse_line(status) is None


def test_split_lines_drops_a_line_longer_than_the_bound(monkeypatch):
    monkeypatch.setattr(hub, 'MAX_LINE', 10)
    assert hub.split_lines(b'', b'ab\ncd\nef') == ([b'ab', b'cd'], b'ef')
    lines, rest = hub.split_lines(b'ef', b'0123456789ab')
    assert lines == [] and rest is None
    # the rest of the long line is dropped up to its newline, then lines come again
    assert hub.split_lines(None, b'xyz') == ([], None)
    assert hub.split_lines(None, b'xyz\nok\n') == ([b'ok'], b'')


def test_read_status_trusts_a_recent_line_only(tmp_path):
    os.makedirs(str(tmp_path / hub.HUB_DIR))
    path = hub.status_path(str(tmp_path), 'n1')
    record = {'host': 'n1', 'stream': 'up', 'line_at': 100.0, 'result': {'job': RUNNING}}
    with open(path, 'w') as handle:
        json.dump(record, handle)
    assert hub.read_status(str(tmp_path), 'n1', 100.0 + hub.STALE - 1)['result']['job'] == RUNNING
    # no line for longer than STALE (three heartbeats): the wait asks the node itself
    assert hub.read_status(str(tmp_path), 'n1', 100.0 + hub.STALE + 1) is None
    for stream in ('down', 'error', 'starting'):
        with open(path, 'w') as handle:
            json.dump(dict(record, stream=stream), handle)
        assert hub.read_status(str(tmp_path), 'n1', 100.0) is None
    # a stream that ended after the run's end stays true
    with open(path, 'w') as handle:
        json.dump(dict(record, stream='ended'), handle)
    assert hub.read_status(str(tmp_path), 'n1', 10000.0)
    assert hub.read_status(str(tmp_path), 'other', 100.0) is None
    with open(path, 'w') as handle:
        handle.write('{"stream": "up", "line_at": true, "result": {}}')
    assert hub.read_status(str(tmp_path), 'n1', 100.0) is None


# --- the loop, with stand-in watchers --------------------------------------------------------------

STAND_IN = r'''
import json, sys, time
def test_a_registration_runs_only_a_list_of_strings_and_a_bounded_object_is_read(tmp_path):
    assert hub.valid_argv(['ssh', '-o', 'BatchMode=yes', 'n1', 'python3', 'watch.py'])
    for bad in (None, [], 'ssh n1', ['ssh', 1], ['ssh', None], {'argv': ['ssh']}):
        assert not hub.valid_argv(bad)
    assert hub.json_object(b'{"a": 1}', 8) == {'a': 1}
    assert hub.json_object(b'{"a": 1}', 7) is None
    assert hub.json_object(b'[1]', 8) is None and hub.json_object(b'{', 8) is None
    spec = tmp_path / 'hub' / ('n1' + hub.SPEC_SUFFIX)
    spec.parent.mkdir()
    spec.write_text(json.dumps({'host': 'n1', 'argv': ['true', 7]}))
    registry = hub.Hub(str(tmp_path), os.getpid())
    registry.registrations()
    assert registry.streams == {}


say = lambda **line: (sys.stdout.write(json.dumps(line) + '\n'), sys.stdout.flush())
host, fail_after = sys.argv[1], float(sys.argv[2])
job = {'status': 'running', 'node_rank': int(host[-1]), 'run_id': 'r1'}
say(kind='status', at=time.time(), result={'job': job})
started = time.time()
import select
while True:
    ready = select.select([sys.stdin], [], [], 0.1)[0]
    if ready:
        line = sys.stdin.readline()
        if not line:
            sys.exit(0)
        command = json.loads(line)
        job = dict(job, status='exited', exit_code=-15, signal='SIGTERM', stop={'reason': command['reason'], 'detail': command['detail']})
        say(kind='stopped', at=time.time(), result={})
        say(kind='status', at=time.time(), result={'job': job})
        sys.exit(0)
    if fail_after and time.time() - started > fail_after:
        say(kind='status', at=time.time(), result={'job': dict(job, status='exited', exit_code=1)})
        sys.exit(0)
'''


def register(sync_dir, host, fail_after, program):
    os.makedirs(os.path.join(sync_dir, hub.HUB_DIR), exist_ok=True)
    with open(os.path.join(sync_dir, hub.HUB_DIR, host + hub.SPEC_SUFFIX), 'w') as handle:
        json.dump({'host': host, 'run_id': 'r1', 'argv': [sys.executable, program, host, str(fail_after)]}, handle)


def test_the_hub_stops_every_other_node_at_once_when_one_fails_and_ends_with_the_job(tmp_path):
    program = tmp_path / 'watch.py'
    program.write_text(STAND_IN)
    sync_dir = str(tmp_path / 'sync')
    for host, fail_after in (('n1', 0), ('n2', 1.0), ('n3', 0)):
        register(sync_dir, host, fail_after, str(program))
    started = time.monotonic()
    hub.Hub(sync_dir, os.getpid()).run()
    assert time.monotonic() - started < 10
    records = dict((host, json.load(open(hub.status_path(sync_dir, host)))) for host in ('n1', 'n2', 'n3'))
    assert records['n2']['result']['job']['exit_code'] == 1 and records['n2']['stopped_by_hub'] is None
    for host in ('n1', 'n3'):
        assert records[host]['stopped_by_hub']['detail'] == 'stopped because n2 (rank 2) failed'
        assert records[host]['result']['job']['stop']['reason'] == 'peer'
    assert all(record['stream'] == 'ended' for record in records.values())


def test_the_hub_ends_when_the_controller_is_gone_and_the_watchers_see_the_end_of_their_input(tmp_path):
    program = tmp_path / 'watch.py'
    program.write_text(STAND_IN)
    sync_dir = str(tmp_path / 'sync')
    register(sync_dir, 'n1', 0, str(program))
    gone = os.fork()
    if not gone:
        os._exit(0)
    os.waitpid(gone, 0)
    started = time.monotonic()
    hub.Hub(sync_dir, gone).run()
    assert time.monotonic() - started < 5


def test_a_rank_failure_torchrun_logged_is_a_cause_before_its_run_ends(tmp_path):
    sync_dir = str(tmp_path)
    os.makedirs(os.path.join(sync_dir, hub.HUB_DIR))
    the_hub = hub.Hub(sync_dir, os.getpid(), clock=lambda: 7.0)
    stream = hub.Stream('n2', {'name': 'n2', 'run_id': 'r1', 'argv': []})
    the_hub.streams['n2'] = stream
    the_hub.on_line(stream, {'kind': 'status', 'result': {'job': job(node_rank=2)}})
    assert the_hub.causes == [] and not stream.done
    the_hub.on_line(stream, {'kind': 'heartbeat'})
    assert the_hub.causes == []
    the_hub.on_line(stream, {'kind': 'status', 'result': {'job': job(node_rank=2),
                                                          'rank_failure': {'exitcode': -9, 'local_rank': 0, 'pid': 5}}})
    assert the_hub.causes == [{'host': 'n2', 'node_rank': 2, 'state': 'failed', 'seen': 7.0}]
    # still running: its end is still to be said
    assert not stream.done
    the_hub.on_line(stream, {'kind': 'status', 'result': {'job': job(node_rank=2, status='exited', exit_code=1)}})
    assert len(the_hub.causes) == 1 and stream.done
    assert json.load(open(hub.status_path(sync_dir, 'n2')))['result']['job']['exit_code'] == 1


def test_a_wait_that_publishes_a_stall_is_a_cause(tmp_path):
    sync_dir = str(tmp_path)
    with open(os.path.join(sync_dir, 'n3.json'), 'w') as handle:
        json.dump({'host': 'n3', 'node_rank': 2, 'state': 'stalled'}, handle)
    with open(os.path.join(sync_dir, 'n1.json'), 'w') as handle:
        json.dump({'host': 'n1', 'node_rank': 0, 'state': 'running'}, handle)
    the_hub = hub.Hub(sync_dir, os.getpid(), clock=lambda: 3.0)
    the_hub.published_causes()
    assert the_hub.causes == [{'host': 'n3', 'node_rank': 2, 'state': 'stalled', 'seen': 3.0}]
    assert hub.stop_command(the_hub.causes)['dump_stacks']


def test_a_status_file_is_read_again_only_once_it_changed(tmp_path, monkeypatch):
    """The hub looks at every wait's status file each second: it parses one only when the file changed (a wait
    rewrites it, atomically, only when it has something new to say), and a running one that later fails is seen."""
    sync_dir = str(tmp_path)
    running = os.path.join(sync_dir, 'n1.json')

    def write(state):
        tmp = running + '.tmp'
        with open(tmp, 'w') as handle:
            json.dump({'host': 'n1', 'node_rank': 0, 'state': state}, handle)
        os.replace(tmp, running)     # as write_json_atomic: a new inode each time

    write('running')
    the_hub = hub.Hub(sync_dir, os.getpid(), clock=lambda: 5.0)
    reads = []
    real = hub.read_object
    monkeypatch.setattr(hub, 'read_object', lambda path, limit: reads.append(os.path.basename(path)) or real(path, limit))
    the_hub.published_causes()
    the_hub.published_causes()
    assert reads == ['n1.json'] and the_hub.causes == []
    write('failed')
    the_hub.published_causes()
    assert reads == ['n1.json', 'n1.json']
    assert the_hub.causes == [{'host': 'n1', 'node_rank': 0, 'state': 'failed', 'seen': 5.0}]
    os.unlink(running)
    the_hub.published_causes()
    assert 'n1.json' not in the_hub.versions


def test_a_registered_spec_is_not_read_again(tmp_path, monkeypatch):
    spec = tmp_path / 'hub' / ('n1' + hub.SPEC_SUFFIX)
    spec.parent.mkdir()
    spec.write_text(json.dumps({'host': 'n1', 'argv': ['true']}))
    registry = hub.Hub(str(tmp_path), os.getpid())
    reads = []
    real = hub.read_object
    monkeypatch.setattr(hub, 'read_object', lambda path, limit: reads.append(path) or real(path, limit))
    registry.registrations()
    registry.registrations()
    assert list(registry.streams) == ['n1'] and len(reads) == 1
    for stream in registry.streams.values():
        stream.close()
