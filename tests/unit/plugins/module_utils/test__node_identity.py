# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Node identity and shared-directory tokens (plugins/module_utils/_node_identity.py)."""

from __future__ import annotations

import multiprocessing
import os
import socket
import stat

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _node_identity as ni


def test_host_identity_reads_the_boot_and_machine_ids():
    files = {ni.BOOT_ID_PATH: 'boot-1', '/etc/machine-id': None, '/var/lib/dbus/machine-id': 'dbus-machine'}
    identity = ni.host_identity(hostname='gpu-01', read=files.get)
    assert identity == {'hostname': 'gpu-01', 'boot_id': 'boot-1', 'machine_id': 'dbus-machine'}
    real = ni.host_identity()
    assert real['hostname'] == socket.gethostname() and real['boot_id']


@pytest.mark.parametrize('recorded, verdict', [
    ({'hostname': 'a', 'boot_id': 'b1', 'machine_id': 'm'}, 'same'),
    ({'hostname': 'a', 'boot_id': 'b0', 'machine_id': 'm'}, 'rebooted'),
    ({'hostname': 'z', 'boot_id': 'b1', 'machine_id': 'm'}, 'other'),
    ({'hostname': 'a', 'boot_id': 'b1', 'machine_id': 'n'}, 'other'),
    ({'hostname': 'a', 'boot_id': None, 'machine_id': None}, 'same'),  # what cannot be read is not compared
    (None, 'same'),  # records from before the host was recorded
])
def test_same_host(recorded, verdict):
    assert ni.same_host(recorded, {'hostname': 'a', 'boot_id': 'b1', 'machine_id': 'm'}) == verdict


def test_node_key_is_the_node_id_or_a_file_safe_host_name():
    assert ni.node_key('node0') == 'node0'
    assert ni.node_key(hostname='gpu-01.cluster') == 'gpu-01.cluster'
    assert ni.node_key(hostname='odd/name:1') == 'odd_name_1'
    assert ni.node_state_dir('/nfs/home/u/.trainops/state', hostname='gpu-07') == '/nfs/home/u/.trainops/state/gpu-07'
    for bad in ('../x', 'a/b', '.hidden', 'a b', 'node0\n'):
        with pytest.raises(ni.NodeIdentityError, match='not a plain name'):
            ni.node_key(bad)


def test_a_directory_token_is_created_once_and_read_back(tmp_path):
    target = tmp_path / 'home' / '.trainops' / 'state'
    assert ni.dir_token(str(target), create=False) is None and not target.exists()
    token = ni.dir_token(str(target))
    assert token and len(token) == 32
    assert stat.S_IMODE(os.stat(str(target)).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(str(target / ni.TOKEN_NAME)).st_mode) == 0o600
    assert ni.dir_token(str(target)) == token
    assert sorted(os.listdir(str(target))) == [ni.TOKEN_NAME]  # no temporary file left behind
    assert ni.dir_token(str(tmp_path / 'other')) != token


def _token_worker(path, queue):
    queue.put(ni.dir_token(path))


def test_nodes_racing_to_create_a_token_all_read_the_same_one(tmp_path):
    # as nodes on one NFS directory do at the first launch: each creates it, exactly one link wins
    path = str(tmp_path / 'shared')
    queue = multiprocessing.Queue()
    workers = [multiprocessing.Process(target=_token_worker, args=(path, queue)) for dummy in range(8)]
    for worker in workers:
        worker.start()
    tokens = [queue.get(timeout=30) for dummy in workers]
    for worker in workers:
        worker.join(30)
    assert len(set(tokens)) == 1
    assert sorted(os.listdir(path)) == [ni.TOKEN_NAME]
