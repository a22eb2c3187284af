# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests of the one-run launch preflight: every problem is collected with what to do about it."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _node_facts as nf
from ansible_collections.trainops.multinode.plugins.module_utils import _preflight as pf
from ansible_collections.trainops.multinode.tests.unit.plugins.module_utils.stand_in import stand_in_supervisor

LINKS = [{'ifname': 'lo', 'mtu': 65536, 'operstate': 'UNKNOWN', 'addr_info': [
    {'family': 'inet', 'local': '127.0.0.1', 'prefixlen': 8}]},
    {'ifname': 'enp1s0f0', 'mtu': 9000, 'operstate': 'UP', 'addr_info': [
        {'family': 'inet', 'local': '10.77.0.12', 'prefixlen': 24}]}]
ROUTE = {'dst': '10.77.0.11', 'dev': 'enp1s0f0', 'prefsrc': '10.77.0.12'}
TORCH_OK = {'python': '3.11.9', 'executable': '/opt/venv/bin/python', 'version': '2.13.0+cpu',
            'location': '/opt/venv/lib/python3.11/site-packages/torch/__init__.py', 'imported': False, 'error': None}


class FakeRunner:
    def __init__(self, torch=None, torch_rc=0, torch_err=''):
        self.torch, self.torch_rc, self.torch_err, self.calls = torch, torch_rc, torch_err, []

    def run(self, argv):
        self.calls.append(argv)
        if argv[:4] == ['ip', '-j', 'addr', 'show']:
            return 0, json.dumps(LINKS), ''
        if argv[:4] == ['ip', '-j', 'route', 'get']:
            return 0, json.dumps([ROUTE]), ''
        if argv[1] == '-c':
            out = json.dumps(self.torch) if isinstance(self.torch, dict) else (self.torch or '')
            return self.torch_rc, out, self.torch_err
        raise AssertionError(argv)


def params(**kw):
    base = dict(master_addr='10.77.0.11', socket_ifname='auto', check_ifname=True, python='/opt/venv/bin/python',
                import_torch=False, state_dir=None, workspace_dir=None, script=None, master_port=None, replace=False,
                need_rsync=False)
    base.update(kw)
    return base


def test_a_ready_node_has_no_problems_and_returns_facts_torch_and_paths(tmp_path):
    runner = FakeRunner(torch=TORCH_OK)
    (tmp_path / 'ws').mkdir()
    (tmp_path / 'ws' / 'train.py').write_text('print(1)\n')
    result = pf.preflight(runner, params(state_dir=str(tmp_path / 'state'), workspace_dir=str(tmp_path / 'ws'),
                                         script='train.py', master_port=29500),
                          root=str(tmp_path / 'noroot'), port_check=lambda port: False)
    assert result['problems'] == []
    assert result['ansible_facts']['trainops_node']['network']['ifname'] == 'enp1s0f0'
    assert result['torch']['version'] == '2.13.0+cpu'
    assert result['job']['status'] == 'absent'
    assert result['script_exists'] is True
    assert result['master_port_free'] is True
    assert result['paths'] == {'state_root': str(tmp_path / 'state'), 'state_dir': str(tmp_path / 'state' / socket.gethostname()),
                               'workspace_dir': str(tmp_path / 'ws'), 'state_root_token': None, 'workspace_token': None}
    assert result['host']['hostname'] == socket.gethostname()
    # read-only: the state directory was not created
    assert not (tmp_path / 'state').exists()


def test_every_problem_is_reported_at_once(tmp_path):
    runner = FakeRunner(torch={'python': '3.11.9', 'version': None, 'error': "No module named 'torch'"})
    result = pf.preflight(runner, params(socket_ifname='bond0.2093', workspace_dir=str(tmp_path), script='train.py',
                                         master_port=29500),
                          root=str(tmp_path), port_check=lambda port: True)
    text = '\n'.join(result['problems'])
    assert len(result['problems']) == 4, text
    assert "interface 'bond0.2093' does not exist on this node" in text
    assert "cannot find torch: No module named 'torch'" in text
    assert 'train.py does not exist' in text
    assert 'port 29500 is already in use on the master (10.77.0.11)' in text
    assert result['ansible_facts'] == {}


@pytest.fixture
def stand_in():
    with contextlib.ExitStack() as stack:
        yield lambda run_dir: stack.enter_context(stand_in_supervisor(run_dir))


def test_replace_tolerates_a_running_job_and_a_taken_port(tmp_path, monkeypatch, stand_in):
    state_root = tmp_path / 'state'
    state_dir = state_root / 'n0'  # the node's own directory below the root (node_id n0)
    run_dir = state_dir / 'runs' / 'old-run'
    run_dir.mkdir(parents=True)
    (state_dir / 'current.json').write_text(json.dumps({'run_id': 'old-run'}))
    (run_dir / 'job.json').write_text(json.dumps({'run_id': 'old-run', 'argv': ['torchrun'], 'uid': os.getuid()}))
    # a sleeping process stands in for the running supervisor (and its torchrun)
    pid, start_time = stand_in(run_dir)
    (run_dir / 'pids.json').write_text(json.dumps({'supervisor_pid': pid, 'supervisor_start_time': start_time,
                                                   'pid': pid, 'start_time': start_time,
                                                   'started_at': '2026-11-22T10:00:00Z'}))
    running = pf.preflight(FakeRunner(torch=TORCH_OK), params(state_dir=str(state_root), node_id='n0', master_port=29500),
                           root=str(tmp_path), port_check=lambda port: True)
    assert running['job']['status'] == 'running'
    assert any('job old-run is still running here' in p for p in running['problems'])
    replaced = pf.preflight(FakeRunner(torch=TORCH_OK), params(state_dir=str(state_root), node_id='n0', master_port=29500, replace=True),
                            root=str(tmp_path), port_check=lambda port: True)
    assert replaced['problems'] == []
    assert replaced['master_port_free'] is False


def test_torch_probe_reports_a_crashing_interpreter():
    runner = FakeRunner(torch='', torch_rc=1, torch_err='Traceback ...\nImportError: libcudart.so.12: cannot open')
    probe = nf.interpreter_probe(runner, '/opt/venv/bin/python', import_torch=True)
    assert probe['error'] == 'rc=1: Traceback ... / ImportError: libcudart.so.12: cannot open'
    # the program plugins/module_utils/_torch_probe.py, passed with -c, told to import torch
    assert runner.calls[0][:2] == ['/opt/venv/bin/python', '-c'] and runner.calls[0][3:] == ['--import']
    with open(nf._torch_probe.__file__) as f:
        assert runner.calls[0][2] == f.read()
    nf.interpreter_probe(runner, '/opt/venv/bin/python')
    assert runner.calls[1][3:] == []


def test_torch_probe_runs_for_real_in_this_interpreter():
    """The probe script itself, run by a real interpreter, with and without importing torch."""
    def run(argv):
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    runner = nf.Runner(run)
    by_metadata = nf.interpreter_probe(runner, sys.executable)
    assert by_metadata['error'] is None and by_metadata['imported'] is False
    import torch
    assert by_metadata['version'] == torch.__version__
    imported = nf.interpreter_probe(runner, sys.executable, import_torch=True)
    assert imported['imported'] is True and imported['version'] == torch.__version__
    missing = nf.interpreter_probe(runner, '/nonexistent/python')
    assert missing['version'] is None and missing['error']


def test_port_in_use_sees_a_real_listener():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(('127.0.0.1', 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        assert pf.port_in_use(port) is True
    finally:
        listener.close()
    assert pf.port_in_use(port) is False


def test_missing_rsync_is_a_problem(tmp_path, monkeypatch):
    monkeypatch.setattr(pf.shutil, 'which', lambda name: None)
    result = pf.preflight(FakeRunner(torch=TORCH_OK), params(need_rsync=True), root=str(tmp_path))
    assert result['rsync'] is None
    assert any('rsync is not installed' in p for p in result['problems'])


def test_executables_are_looked_up_and_reported_not_judged(tmp_path, monkeypatch):
    monkeypatch.setattr(pf.shutil, 'which', lambda name: '/opt/bin/nsys' if name == 'nsys' else None)
    result = pf.preflight(FakeRunner(torch=TORCH_OK), params(find_executables=['nsys', 'rocprofv3']), root=str(tmp_path))
    assert result['executables'] == {'nsys': '/opt/bin/nsys', 'rocprofv3': None}
    assert not any('nsys' in p or 'rocprofv3' in p for p in result['problems'])


def test_no_executables_asked_none_reported(tmp_path):
    result = pf.preflight(FakeRunner(torch=TORCH_OK), params(), root=str(tmp_path))
    assert 'executables' not in result


def _free_port():
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def test_the_master_opens_its_port_and_every_node_reaches_it_for_real():
    port = _free_port()
    assert pf.open_master_port(sys.executable, port, 2, 10) is None
    assert pf.port_in_use(port) is True
    first = pf.reach_master('127.0.0.1', port, '127.0.0.1', 'lo', 5)
    second = pf.reach_master('127.0.0.1', port, '127.0.0.1', 'lo', 5)
    assert first['ok'] and second['ok'] and first['target'] == '127.0.0.1:%d' % port
    # the listener leaves as soon as both peers came: the port is free again for torchrun
    deadline = time.monotonic() + 5
    while pf.port_in_use(port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pf.port_in_use(port) is False


def test_an_unreachable_master_port_is_a_problem_after_the_timeout(tmp_path):
    port = _free_port()
    result = pf.preflight(FakeRunner(torch=TORCH_OK), params(master_addr='127.0.0.1', reach_port=port, reach_timeout=1),
                          root=str(tmp_path))
    assert result['reach']['ok'] is False and result['reach']['attempts'] >= 2
    assert any('cannot reach the master port 127.0.0.1:%d' % port in p for p in result['problems'])


def test_a_taken_master_port_cannot_be_opened_for_the_check():
    listener = socket.socket()
    listener.bind(('127.0.0.1', 0))
    listener.listen(1)
    try:
        error = pf.open_master_port(sys.executable, listener.getsockname()[1], 2, 5)
    finally:
        listener.close()
    assert error and 'cannot listen on port' in error


def test_check_mode_skips_the_reachability_check(tmp_path):
    opened = []
    result = pf.preflight(FakeRunner(torch=TORCH_OK), params(reach_port=29500, reach_peers=2), root=str(tmp_path),
                          check_mode=True, listen=lambda *a: opened.append(a))
    assert 'reach' not in result and opened == []


def test_identify_dirs_reads_the_tokens_that_show_sharing_and_creates_nothing(tmp_path):
    from ansible_collections.trainops.multinode.plugins.module_utils._node_identity import dir_token
    shared = tmp_path / 'nfs-home' / '.trainops'
    fresh = pf.preflight(FakeRunner(torch=TORCH_OK), params(state_dir=str(shared / 'state'), workspace_dir=str(shared / 'ws'),
                                                            identify_dirs=['state_dir', 'workspace_dir']), root=str(tmp_path))
    assert fresh['problems'] == []
    assert fresh['paths']['state_root_token'] is None and fresh['paths']['workspace_token'] is None
    assert not shared.exists()  # read-only: the launch marks the directories once every check passed
    marked = {'state': dir_token(str(shared / 'state')), 'ws': dir_token(str(shared / 'ws')),
              'other': dir_token(str(tmp_path / 'local' / 'state'))}
    one = pf.preflight(FakeRunner(torch=TORCH_OK), params(state_dir=str(shared / 'state'), workspace_dir=str(shared / 'ws'),
                                                          identify_dirs=['state_dir', 'workspace_dir']), root=str(tmp_path))
    other = pf.preflight(FakeRunner(torch=TORCH_OK), params(state_dir=str(tmp_path / 'local' / 'state'),
                                                            identify_dirs=['state_dir']), root=str(tmp_path))
    assert one['paths']['state_root_token'] == marked['state'] and one['paths']['workspace_token'] == marked['ws']
    assert other['paths']['state_root_token'] == marked['other'] != marked['state']


def test_the_training_interface_must_be_on_the_training_network(tmp_path):
    ok = pf.preflight(FakeRunner(torch=TORCH_OK), params(training_network='10.77.0.0/24', master_port=29500),
                      root=str(tmp_path), port_check=lambda port: False)
    assert ok['problems'] == []
    # a management network: the node's route to the master goes through enp1s0f0 (10.77.0.12), not the training net
    wrong = pf.preflight(FakeRunner(torch=TORCH_OK), params(training_network='10.1.0.0/16', master_port=29500),
                         root=str(tmp_path), port_check=lambda port: False)
    assert wrong['problems'] == [
        'the master address 10.77.0.11 is not on the training network 10.1.0.0/16 (trainops_training_network): set '
        "trainops_master_addr to the master's address on that network; ansible_host is often the management address",
        'interface enp1s0f0, which this node would use for training, has no address on the training network 10.1.0.0/16 '
        '(its addresses: 10.77.0.12/24): check trainops_master_addr and trainops_socket_ifname']
    # the master address is judged once, on the master (the node given master_port)
    worker = pf.preflight(FakeRunner(torch=TORCH_OK), params(training_network='10.1.0.0/16'), root=str(tmp_path))
    assert [p for p in worker['problems'] if 'master address' in p] == []
    bad = pf.preflight(FakeRunner(torch=TORCH_OK), params(training_network='10.1.0.0/33'), root=str(tmp_path))
    assert bad['problems'] == ["trainops_training_network='10.1.0.0/33' is not a network in CIDR form (e.g. 10.0.0.0/16)"]


def test_only_the_directories_named_are_read(tmp_path):
    from ansible_collections.trainops.multinode.plugins.module_utils._node_identity import dir_token
    dir_token(str(tmp_path / 'checkout'))
    result = pf.preflight(FakeRunner(torch=TORCH_OK), params(state_dir=str(tmp_path / 's'), workspace_dir=str(tmp_path / 'checkout'),
                                                             identify_dirs=['state_dir']), root=str(tmp_path))
    assert result['paths']['state_root_token'] is None and result['paths']['workspace_token'] is None


def test_a_node_that_fails_a_check_creates_nothing(tmp_path):
    result = pf.preflight(FakeRunner(torch=TORCH_OK), params(state_dir=str(tmp_path / 's'), workspace_dir=str(tmp_path / 'w'),
                                                             identify_dirs=['state_dir', 'workspace_dir'],
                                                             socket_ifname='nosuchnic0'), root=str(tmp_path))
    assert any('nosuchnic0' in p for p in result['problems'])
    assert result['paths']['state_root_token'] is None and not (tmp_path / 's').exists() and not (tmp_path / 'w').exists()


def test_the_ranks_get_the_job_gpus_numbered_as_they_will_see_them(tmp_path, monkeypatch):
    # an NVIDIA node with 4 GPUs whose session may use the last two (a job's devices cgroup): Slurm's IDX 2,3 -> 0,1
    for index in range(4):
        (tmp_path / 'proc' / 'driver' / 'nvidia' / 'gpus' / ('0000:%02x:00.0' % (index + 1))).mkdir(parents=True)
        (tmp_path / 'dev').mkdir(exist_ok=True)
        (tmp_path / 'dev' / ('nvidia%d' % index)).write_text('')
    probe = pf._gpu_visibility.probe
    monkeypatch.setattr(pf._gpu_visibility, 'probe', lambda root, vendor: probe(
        root, vendor, access=lambda path: path in ('/dev/nvidia2', '/dev/nvidia3')))
    result = pf.preflight(FakeRunner(torch=TORCH_OK), params(gpu_ids=[2, 3], nproc_per_node=2), root=str(tmp_path))
    assert result['gpu_view']['constrained'] is True and result['gpu_view']['ids'] == [0, 1]
    assert result['problems'] == []
    result = pf.preflight(FakeRunner(torch=TORCH_OK), params(gpu_ids=[], nproc_per_node=4), root=str(tmp_path))
    assert result['problems'] == [
        socket.gethostname() + ": the ranks would see 2 GPU(s) (CUDA_VISIBLE_DEVICES=(unset)), the launch starts 4 ranks "
        "here: this session may use 2 of the host's 4 GPU devices (/dev/nvidia2, /dev/nvidia3)"]
