# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests of the cross-node check (module_utils/_nccl_env/cluster.py: check_cluster) on the results of compute
for the nodes of test__nccl_env.py."""

from __future__ import annotations

from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.cluster import check_cluster
from ansible_collections.trainops.multinode.tests.unit.plugins.module_utils.test__nccl_env import (
    cpu_only,
    h100_ib,
    h100_sriov,
    has,
    lab_bond,
    mi300x,
    ports_down,
    run,
    with_library,
)


def test_check_cluster_agreeing_nodes():
    check = check_cluster({'gpu2': run(h100_ib()), 'gpu1': run(h100_ib())})
    assert check['errors'] == [] and check['warnings'] == []
    assert check['transports'] == {'gpu1': 'rdma', 'gpu2': 'rdma'}
    lines = check['table'].splitlines()
    assert lines[0].split() == ['host', 'vendor', 'library', 'transport', 'NCCL_SOCKET_IFNAME', 'ports', 'status']
    assert lines[2].startswith('gpu1') and lines[3].startswith('gpu2')
    assert 'rdma (infiniband)' in lines[2] and '=mlx5_0:1,' in lines[2] and '=eno1' in lines[2]
    assert 'NCCL ?' in lines[2]  # the builder's facts carry no library version


def test_check_cluster_transport_mismatch():
    check = check_cluster({'gpu1': run(h100_ib()), 'gpu2': run(ports_down()), 'gpu3': run(h100_ib())})
    assert has(check['errors'], 'different transports', 'rdma on gpu1, gpu3', 'tcp on gpu2', 'hang')
    row = [line for line in check['table'].splitlines() if line.startswith('gpu2')][0]
    assert row.split()[1:5] == ['nvidia', 'NCCL', '?', 'tcp']


def test_check_cluster_link_layer_vendor_and_missing_results():
    check = check_cluster({'a': run(h100_ib()), 'b': run(h100_sriov(), gid_index=3)})
    assert has(check['errors'], 'different link layers', 'infiniband on a', 'roce on b')
    assert has(check['warnings'], 'different numbers of HCA ports', '4 on b', '8 on a')
    check = check_cluster({'a': run(h100_ib()), 'b': run(mi300x()), 'c': None, 'd': {}})
    assert has(check['errors'], 'different GPU vendors', 'amd on b', 'nvidia on a')
    assert has(check['errors'], 'c: no NCCL environment was computed')
    assert has(check['errors'], 'd: no NCCL environment was computed')
    assert has(check['errors'], 'different link layers')  # a is InfiniBand, b RoCE
    check = check_cluster({'a': run(lab_bond()), 'b': run(cpu_only())})
    assert check['errors'] == []


def test_check_cluster_warns_about_different_library_versions():
    check = check_cluster({'a': run(with_library(h100_ib(), 'nccl', '2.21.5')),
                           'b': run(with_library(h100_ib(), 'nccl', '2.23.4'))})
    assert check['errors'] == []
    assert has(check['warnings'], 'different library versions', 'NCCL 2.21.5 on a', 'NCCL 2.23.4 on b')
