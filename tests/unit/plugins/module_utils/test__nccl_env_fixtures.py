# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The computed NCCL/RCCL environment of recorded nodes (tests/unit/fixtures/node_facts/<name>): node_facts reads the
tree (the interfaces from recorded ``ip -j`` output), nccl_env computes the environment, for an older and a newer
library version each. Every expectation names the NCCL/RCCL source or document it follows."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env import deciders, gpu, gpudirect, network
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.cluster import check_cluster
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.facts import _natural, nccl_gid_index
from ansible_collections.trainops.multinode.plugins.module_utils import _node_facts as nf

_TREE = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures', 'node_facts', 'fixture_tree.py')
_SPEC = importlib.util.spec_from_file_location('nccl_env_fixture_tree', _TREE)
fixture_tree = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(fixture_tree)


class IpRunner:
    """Answers ``ip -j addr show`` and ``ip -j route get <master>``; no vendor tool is installed."""

    def __init__(self, links, master, route):
        self.outputs = {('ip', '-j', 'addr', 'show'): json.dumps(links),
                        ('ip', '-j', 'route', 'get', master): json.dumps([route])}

    def which(self, name):
        return None

    def run(self, argv):
        return 0, self.outputs[tuple(argv)], ''


def link(name, *cidrs, mtu=9000):
    infos = []
    for cidr in cidrs:
        addr, plen = cidr.split('/')
        infos.append({'family': 'inet6' if ':' in addr else 'inet', 'local': addr, 'prefixlen': int(plen)})
    return {'ifname': name, 'mtu': mtu, 'operstate': 'UP', 'addr_info': infos}


LO = link('lo', '127.0.0.1/8', '::1/128', mtu=65536)


@pytest.fixture
def node(tmp_path):
    """node(name, links, master, route, version=None) -> (facts, root); version rewrites the library's file."""
    count = []

    def make(name, links, master, route, version=None):
        count.append(name)
        root = fixture_tree.materialize(name, tmp_path / ('%s-%d' % (name, len(count))))
        if version:
            _set_library_version(root, version)
        return nf.node_facts(IpRunner(links, master, route), master, root=root), root
    return make


def _set_library_version(root, version):
    major, minor, patch = version.split('.')
    for header in ('opt/rocm/include/rccl/rccl.h', 'usr/include/nccl.h'):
        path = os.path.join(root, header)
        if os.path.exists(path):
            with open(path) as handle:
                text = handle.read()
            for part, value in (('MAJOR', major), ('MINOR', minor), ('PATCH', patch)):
                text = '\n'.join('#define NCCL_%s %s' % (part, value) if line.startswith('#define NCCL_%s ' % part)
                                 else line for line in text.splitlines())
            with open(path, 'w') as handle:
                handle.write(text + '\n')
            return
    for lib_dir in ('usr/lib/x86_64-linux-gnu', 'usr/local/cuda/lib64'):
        directory = os.path.join(root, lib_dir)
        for entry in os.listdir(directory) if os.path.isdir(directory) else []:
            if entry.startswith('libnccl.so.'):
                os.rename(os.path.join(directory, entry), os.path.join(directory, 'libnccl.so.' + version))
                return
    raise AssertionError('no library file to rewrite under %s' % root)


def compute(facts, **settings):
    res = deciders.compute(facts, settings)
    assert all(isinstance(v, str) for v in res['env'].values()), res['env']
    return res


def has(messages, *parts):
    return [m for m in messages if all(p in m for p in parts)]


# ------------------------------------------------------------------------------------------------------------------
# MI300X + bnxt_re, RoCE v2 IPv4 GID at 3 on bnxt_re0..3 and at 5 on bnxt_re4..7
# ------------------------------------------------------------------------------------------------------------------

MI_RAILS = ['enp6s0np0', 'enp35s0np0', 'enp57s0np0', 'enp93s0np0', 'enp160s0np0', 'enp176s0np0', 'enp192s0np0',
            'enp224s0np0']
MI_LINKS = [LO, link('enp49s0f0np0', '10.0.0.12/24')] + [link(n, '10.200.%d.11/24' % i) for i, n in enumerate(MI_RAILS)]
MI_ROUTE = {'dst': '10.0.0.11', 'dev': 'enp49s0f0np0', 'prefsrc': '10.0.0.12'}
MI_HCA = '=' + ','.join('bnxt_re%d:1' % i for i in range(8))


def mi300x(node, version=None):
    return node('mi300x_8gpu_bnxt_gid_split', MI_LINKS, '10.0.0.11', MI_ROUTE, version)[0]


def test_mi300x_gid_split_rccl_2_21_selects_per_port(node):
    facts = mi300x(node)
    assert facts['library'] == dict(name='rccl', version='2.21.5', source='/opt/rocm/include/rccl/rccl.h',
                                    aws_ofi_nccl=None, read_in='host', rocm=None)
    assert facts['rdma']['gpudirect']['dmabuf_kernel'] == {'CONFIG_DMABUF_MOVE_NOTIFY': True, 'CONFIG_PCI_P2PDMA': True}
    res = compute(facts, nproc_per_node=8)
    # RCCL 2.21.5 src/transport/net_ib.cc: NCCL_PARAM(IbGidIndex, "IB_GID_INDEX", -1) and ncclIbGetGidIndex picks,
    # per port, the IPv4 (AF_INET default) RoCE v2 GID: 3 on bnxt_re0..3, 5 on bnxt_re4..7. Nothing to set.
    assert [nccl_gid_index(p) for d in facts['rdma']['devices'] for p in d['ports']] == [3] * 4 + [5] * 4
    # RCCL src/misc/rocmwrap.cc: NCCL_DMABUF_ENABLE defaults to 0, dma-buf needs CONFIG_DMABUF_MOVE_NOTIFY and
    # CONFIG_PCI_P2PDMA in /boot/config-<release> (both set in this tree)
    assert res['env'] == {
        'NCCL_SOCKET_IFNAME': '=enp49s0f0np0', 'GLOO_SOCKET_IFNAME': 'enp49s0f0np0', 'NCCL_IB_DISABLE': '0',
        'NCCL_IB_HCA': MI_HCA, 'NCCL_DMABUF_ENABLE': '1', 'NCCL_DEBUG': 'WARN', 'HSA_ENABLE_SDMA': '0'}
    assert res['errors'] == [] and res['warnings'] == []
    assert res['gpudirect'] is True and res['transport'] == 'rdma' and res['link_layer'] == 'roce'
    assert res['library'] == dict(name='rccl', version='2.21.5', source='/opt/rocm/include/rccl/rccl.h',
                                  read_in='host')


def test_mi300x_gid_split_rccl_2_20_needs_one_index_and_has_none(node):
    facts = mi300x(node, '2.20.5')
    res = compute(facts, nproc_per_node=8)
    # RCCL 2.20.5 (ROCm 6.2) src/transport/net_ib.cc: NCCL_PARAM(IbGidIndex, "IB_GID_INDEX", 0), one index per
    # process; index 3 is IPv4 on bnxt_re0..3 but IPv6 on bnxt_re4..7, so no index serves every port
    assert len(res['errors']) == 1
    assert has(res['errors'], '3: bnxt_re0:1, bnxt_re1:1, bnxt_re2:1, bnxt_re3:1; 5: bnxt_re4:1', 'RCCL 2.20.5',
               'one NCCL_IB_GID_INDEX per process', '>= 2.21')
    assert 'NCCL_IB_GID_INDEX' not in res['env']
    # an explicit index that is empty or RoCE v1 on a chosen port is an error naming the port
    res = compute(facts, gid_index=4)
    assert has(res['errors'], 'gid_index 4 is empty on bnxt_re0:1 (netdev enp6s0np0)')
    assert has(res['errors'], 'gid_index 4 is a RoCE v1 GID on bnxt_re4:1', 'its RoCE v2 GID is at 5')
    res = compute(facts, gid_index=3)
    assert res['errors'] == [] and res['env']['NCCL_IB_GID_INDEX'] == '3'
    assert has(res['warnings'], 'gid_index 3 is an IPv4 GID on bnxt_re0:1', 'IPv6 one on bnxt_re4:1')
    # narrowing to the ports that share an index works with the old library
    res = compute(facts, ib_hca=['bnxt_re4', 'bnxt_re5', 'bnxt_re6', 'bnxt_re7'])
    assert res['errors'] == [] and res['env']['NCCL_IB_GID_INDEX'] == '5'


def test_mi300x_threads_and_channels_per_rccl_version(node):
    # RCCL 2.21 src/graph/tuning.cc: NCCL_NTHREADS from 4 * warpSize (64 on gfx942) to NCCL_MAX_NTHREADS (256)
    res = compute(mi300x(node), channels=112, threads=256)
    assert res['env']['NCCL_NTHREADS'] == '256' and res['env']['NCCL_MAX_NCHANNELS'] == '112'
    assert 'RCCL_THREADS_PER_BLOCK' not in res['env']
    assert has(compute(mi300x(node), threads=512)['errors'], 'threads 512 is not a value RCCL 2.21.5 takes (256)')
    # RCCL src/include/device.h MAXCHANNELS 128
    assert has(compute(mi300x(node), channels=160)['errors'], 'channels 160', '(128, MAXCHANNELS 128)')


def test_mi300x_two_nodes_128_channels_refused(node):
    # RCCL 2.21.5 src/graph/connect.cc ncclTopoPostset: maxChannels = std::min(64, maxChannels) when nNodes > 1
    facts = mi300x(node)
    assert facts['gpu']['gfx'] == ['gfx942'] * 8 and facts['gpu']['compute_units'] == [304] * 8
    res = compute(facts, channels=128, nnodes=2)
    assert res['errors'] == ['channels 128 is more than RCCL 2.21.5 allows (64, MAXCHANNELS 128, 64 when the job has '
                             'more than one node (2 nodes)): the library would silently use 64']
    assert compute(facts, channels=128, nnodes=1)['errors'] == []


ONE_GID = ['bnxt_re4', 'bnxt_re5', 'bnxt_re6', 'bnxt_re7']
"""Ports that share their RoCE v2 GID index (5): RCCL before 2.21 takes one index per process."""


def gfx90a(node, version):
    """The MI300X tree's node read as an MI250X node (gfx90a): what ncclTopoPostset keys its channel limits on."""
    facts = mi300x(node, version)
    facts['gpu']['gfx'] = ['gfx90a'] * 8
    return facts


def test_min_channels_48_across_gfx90a_nodes_by_rccl_version(node):
    # ncclMinNchannels clamps NCCL_MIN_NCHANNELS to MAXCHANNELS only (rocm-6.2.0 src/graph/connect.cc:524-533);
    # ncclTopoPostset then copies channels up to it (:694) although maxChannels is 2*CHANNEL_LIMIT = 32 on gfx90a
    # (:628), and caps it at 64 across nodes (:677). RCCL 2.20.5 runs 48 channels.
    res = compute(gfx90a(node, '2.20.5'), min_channels=48, nnodes=2, nproc_per_node=8, ib_hca=ONE_GID)
    assert res['errors'] == [] and res['env']['NCCL_MIN_NCHANNELS'] == '48'
    # RCCL 2.18.6 (rocm-6.1.0): MAXCHANNELS 64, no cap across nodes
    assert compute(gfx90a(node, '2.18.6'), min_channels=48, nnodes=2, ib_hca=ONE_GID)['errors'] == []
    assert compute(gfx90a(node, '2.18.6'), min_channels=80, ib_hca=ONE_GID)['errors'] == [
        'min_channels 80 is more than RCCL 2.18.6 allows (64, MAXCHANNELS 64): the library would silently use 64']
    # from rocm-6.3 (2.21.5, connect.cc:686-689) a minimum above maxChannels is ignored: RCCL uses 2
    assert compute(gfx90a(node, '2.21.5'), min_channels=48, nnodes=2, nproc_per_node=8)['errors'] == [
        'min_channels 48 is more than RCCL 2.21.5 allows (32, the 32 channels RCCL allows here (32 on gfx90a (all '
        'MAXCHANNELS only on gfx942/gfx950))): RCCL ignores it and uses 2 (ncclTopoPostset: "NCCL_MIN_NCHANNELS set '
        'by environment is ignored")']
    assert compute(gfx90a(node, '2.21.5'), min_channels=32, nnodes=2)['errors'] == []


def test_min_channels_above_64_with_fewer_than_8_ranks_is_ignored(node):
    # rocm-6.3 connect.cc:682-685: nRanks < 8 and NCCL_MIN_NCHANNELS > 64 -> 2
    facts = mi300x(node)
    assert compute(facts, min_channels=96, nproc_per_node=8)['errors'] == []
    assert has(compute(facts, min_channels=96, nproc_per_node=4)['errors'],
               'min_channels 96 is more than RCCL 2.21.5 allows (64, 64 with fewer than 8 ranks (4))',
               'RCCL ignores it and uses 2')
    # RCCL 2.20.5 has no such rule: 96 channels on one node
    assert compute(mi300x(node, '2.20.5'), min_channels=96, nproc_per_node=4, ib_hca=ONE_GID)['errors'] == []


def test_rccl_2_31_tree_lifts_the_64_channel_cap_across_nodes(node):
    # rocm-systems projects/rccl src/graph/connect.cc ncclTopoPostset (RCCL 2.31 development): the 64 cap across
    # nodes is skipped when NCCL_MAX_NCHANNELS > 64, and the minimum across nodes is capped at MAXCHANNELS, not 64
    new = mi300x(node, '2.31.2')
    assert new['library']['version'] == '2.31.2'
    res = compute(new, channels=128, nnodes=2, nproc_per_node=8)
    assert res['errors'] == [] and res['env']['NCCL_MAX_NCHANNELS'] == '128'
    assert compute(new, channels=128, min_channels=96, nnodes=2, nproc_per_node=8)['errors'] == []
    # without channels above 64 maxChannels stays 64, and a minimum above it is reset to 2
    assert has(compute(new, min_channels=96, nnodes=2, nproc_per_node=8)['errors'],
               'min_channels 96 is more than RCCL 2.31.2 allows (64', 'unless channels is above 64',
               'RCCL ignores it and uses 2')
    assert compute(new, channels=60, nnodes=2)['env']['NCCL_MAX_NCHANNELS'] == '60'
    # RCCL 2.30.4 (ROCm 7.14) keeps the cap: 64
    assert compute(mi300x(node, '2.30.4'), channels=128, nnodes=2)['errors'] == [
        'channels 128 is more than RCCL 2.30.4 allows (64, MAXCHANNELS 128, 64 when the job has more than one node '
        '(2 nodes)): the library would silently use 64']


def test_mi300x_rccl_2_18_6_96_channels_refused(node):
    # RCCL rocm-6.1.0 (2.18.6) src/include/devcomm.h: #define MAXCHANNELS 64
    # (bnxt_re4..7 only: RCCL 2.18.6 takes one GID index per process, 5 on these ports)
    res = compute(mi300x(node, '2.18.6'), channels=96, ib_hca=['bnxt_re4', 'bnxt_re5', 'bnxt_re6', 'bnxt_re7'])
    assert res['errors'] == ['channels 96 is more than RCCL 2.18.6 allows (64, MAXCHANNELS 64): the library would '
                             'silently use 64']
    assert 'NCCL_MAX_NCHANNELS' in res['env']  # the action fails the task: nothing is written or started


def test_mi300x_rccl_2_28_512_threads_refused(node):
    # RCCL >= 2.28 rcclOptThreadBlockSize: RCCL_THREADS_PER_BLOCK clamped to RCCL_DEFAULT_MAX_NTHREADS (256)
    res = compute(mi300x(node, '2.28.3'), threads=512)
    assert res['errors'] == ['threads 512 is not a value RCCL 2.28.3 takes (192, 256): RCCL 2.28.3 rounds '
                             'RCCL_THREADS_PER_BLOCK up to a multiple of the warp size 64 and clamps it to [192, 256] '
                             '(rcclOptThreadBlockSize); it would run 256 threads']
    assert not [k for k in res['env'] if 'THREADS' in k]


# HSA_NO_SCRATCH_RECLAIM. RCCL src/rccl_wrap.cc validHsaScratchEnvSetting: "1" always passes; on gfx942 (gfx950)
# an unset value passes only with hipRuntimeVersion >= 60443484 (HIP 6.4.43484 = ROCm 6.4.2) and MEC firmware >= 177
# (24). src/init.cc checkHsaEnvSetting: RCCL 2.27/2.28 ERROR + ncclSystemError (ncclInit fails), 2.30 WARN only.
# facts['library']['rocm'] is the ROCm runtime the ranks use (node_facts), set here by hand.

MI_BASE_ENV = {'NCCL_SOCKET_IFNAME': '=enp49s0f0np0', 'GLOO_SOCKET_IFNAME': 'enp49s0f0np0', 'NCCL_IB_DISABLE': '0',
               'NCCL_IB_HCA': MI_HCA, 'NCCL_DMABUF_ENABLE': '1', 'NCCL_DEBUG': 'WARN', 'HSA_ENABLE_SDMA': '0'}


def mi300x_rocm(node, version, rocm):
    facts = mi300x(node, version)
    if rocm is not None:
        facts['library']['rocm'] = rocm
    return facts


def test_mi300x_rccl_2_27_on_rocm_6_3_sets_no_scratch_reclaim(node):
    facts = mi300x_rocm(node, '2.27.7', '6.3.1')
    assert facts['gpu']['gfx'] == ['gfx942'] * 8 and facts['library']['version'] == '2.27.7'
    res = compute(facts)
    assert res['env'] == dict(MI_BASE_ENV, HSA_NO_SCRATCH_RECLAIM='1')
    assert res['errors'] == [] and res['warnings'] == []
    assert res['sources']['HSA_NO_SCRATCH_RECLAIM'] == 'detected'
    reason = res['reasons']['HSA_NO_SCRATCH_RECLAIM']
    assert 'gfx942 with ROCm 6.3.1' in reason and 'RCCL 2.27.7 refuses to initialize without it' in reason
    assert 'validHsaScratchEnvSetting' in reason and 'checkHsaEnvSetting' in reason
    # ROCm 6.4.0/6.4.1 ship HIP 6.4.43482/6.4.43483, below RCCL's 60443484
    assert compute(mi300x_rocm(node, '2.27.7', '6.4.1'))['env']['HSA_NO_SCRATCH_RECLAIM'] == '1'
    # RCCL 2.26 (ROCm 7.0) and 2.30 warn instead of refusing: still set
    for version in ('2.26.6', '2.30.4'):
        res = compute(mi300x_rocm(node, version, '6.2'))
        assert res['env']['HSA_NO_SCRATCH_RECLAIM'] == '1' and res['errors'] == []
        assert 'RCCL %s warns without it' % version in res['reasons']['HSA_NO_SCRATCH_RECLAIM']


def test_mi300x_rocm_6_4_2_and_later_sets_no_scratch_reclaim_too(node):
    # rocm-systems projects/rccl src/rccl_wrap.cc validHsaScratchEnvSetting: from HIP 60443484 (ROCm 6.4.2) an unset
    # value passes only with MEC firmware >= 177 (gfx942) / >= 24 (gfx950), not in the facts; "1" always passes
    for rocm in ('6.4.2', '6.4.3', '7.0.1', '7.2'):
        res = compute(mi300x_rocm(node, '2.27.7', rocm))
        assert res['env'] == dict(MI_BASE_ENV, HSA_NO_SCRATCH_RECLAIM='1'), rocm
        assert res['errors'] == [] and res['warnings'] == [], rocm
        assert 'the MEC firmware RCCL also checks is not in the facts, so it is set anyway' in res['reasons'][
            'HSA_NO_SCRATCH_RECLAIM'], rocm


def test_mi300x_rccl_before_2_26_needs_no_scratch_reclaim(node):
    # RCCL 2.22.3 (ROCm 6.4) and older never read HSA_NO_SCRATCH_RECLAIM
    for version in ('2.21.5', '2.22.3'):
        res = compute(mi300x_rocm(node, version, '6.3.1'))
        assert res['env'] == MI_BASE_ENV and res['errors'] == [] and res['warnings'] == [], version


def test_scratch_reclaim_only_on_gfx942_and_gfx950(node):
    facts = mi300x_rocm(node, '2.27.7', '6.3.1')
    facts['gpu']['gfx'] = ['gfx90a'] * 8
    assert 'HSA_NO_SCRATCH_RECLAIM' not in compute(facts)['env']
    facts['gpu']['gfx'] = ['gfx950'] * 8
    res = compute(facts)
    assert res['env']['HSA_NO_SCRATCH_RECLAIM'] == '1' and 'gfx950 with ROCm 6.3.1' in res['reasons'][
        'HSA_NO_SCRATCH_RECLAIM']
    # an NVIDIA or GPU-less vendor setting never gets it
    assert 'HSA_NO_SCRATCH_RECLAIM' not in compute(mi300x_rocm(node, '2.27.7', '6.3.1'), vendor='none')['env']


def test_scratch_reclaim_unknown_rocm_or_rccl_version_sets_it(node):
    # ROCR (hsa-runtime amd_gpu_agent.cpp): HSA_NO_SCRATCH_RECLAIM=1 only keeps scratch bound to the queue, so
    # setting it where ROCm may already be 6.4.2 is harmless; RCCL accepts "1" whatever the firmware
    res = compute(mi300x_rocm(node, '2.27.7', None))
    assert mi300x_rocm(node, '2.27.7', None)['library']['rocm'] is None
    assert res['env']['HSA_NO_SCRATCH_RECLAIM'] == '1' and res['errors'] == [] and res['warnings'] == []
    assert 'the ROCm version is unknown (facts.library.rocm), so it is set anyway' in res['reasons'][
        'HSA_NO_SCRATCH_RECLAIM']
    facts = mi300x_rocm(node, None, '6.3.1')
    facts['library']['version'] = None
    res = compute(facts)
    assert res['env']['HSA_NO_SCRATCH_RECLAIM'] == '1' and res['errors'] == []
    assert 'the RCCL version is unknown' in res['reasons']['HSA_NO_SCRATCH_RECLAIM']


def test_scratch_reclaim_user_override(node):
    facts = mi300x_rocm(node, '2.27.7', '6.3.1')
    # env_overrides 0 where RCCL 2.27.7 refuses to initialize: an error naming the library and the value
    res = compute(facts, env_overrides={'HSA_NO_SCRATCH_RECLAIM': '0'})
    assert res['env']['HSA_NO_SCRATCH_RECLAIM'] == '0' and res['sources']['HSA_NO_SCRATCH_RECLAIM'] == 'override'
    assert len(res['errors']) == 1
    assert has(res['errors'], 'env_overrides HSA_NO_SCRATCH_RECLAIM=0', 'RCCL 2.27.7 refuses to initialize',
               'set it to 1 in env_overrides')
    # removing it is the same for RCCL (only "1" passes)
    res = compute(facts, env_overrides={'HSA_NO_SCRATCH_RECLAIM': None})
    assert 'HSA_NO_SCRATCH_RECLAIM' not in res['env'] and res['unset'] == ['HSA_NO_SCRATCH_RECLAIM']
    assert has(res['errors'], 'env_overrides HSA_NO_SCRATCH_RECLAIM null', 'RCCL 2.27.7 refuses')
    # rocm_defaults decides it as well
    res = compute(facts, rocm_defaults={'HSA_NO_SCRATCH_RECLAIM': 0})
    assert has(res['errors'], 'rocm_defaults HSA_NO_SCRATCH_RECLAIM=0', 'set it to 1 in rocm_defaults')
    res = compute(facts, rocm_defaults={'HSA_NO_SCRATCH_RECLAIM': 1})
    assert res['errors'] == [] and res['env'] == {k: v for k, v in dict(
        MI_BASE_ENV, HSA_NO_SCRATCH_RECLAIM='1').items() if k != 'HSA_ENABLE_SDMA'}
    assert res['sources']['HSA_NO_SCRATCH_RECLAIM'] == 'knob'
    # rocm_defaults {} drops the collection's defaults, not what RCCL needs
    res = compute(facts, rocm_defaults={})
    assert res['env']['HSA_NO_SCRATCH_RECLAIM'] == '1' and 'HSA_ENABLE_SDMA' not in res['env']
    assert compute(facts, env_overrides={'HSA_NO_SCRATCH_RECLAIM': 1})['errors'] == []
    # RCCL 2.30 only warns, and an unknown ROCm may not need it: warnings, not errors
    res = compute(mi300x_rocm(node, '2.30.4', '6.3.1'), env_overrides={'HSA_NO_SCRATCH_RECLAIM': '0'})
    assert res['errors'] == [] and has(res['warnings'], 'HSA_NO_SCRATCH_RECLAIM=0', 'RCCL 2.30.4 warns')
    res = compute(mi300x_rocm(node, '2.27.7', None), env_overrides={'HSA_NO_SCRATCH_RECLAIM': '0'})
    assert res['errors'] == [] and has(res['warnings'], 'a ROCm runtime of unknown version')
    # from ROCm 6.4.2 RCCL refuses a missing value only with old MEC firmware: a warning, the user's value kept
    res = compute(mi300x_rocm(node, '2.27.7', '6.4.2'), env_overrides={'HSA_NO_SCRATCH_RECLAIM': '0'})
    assert res['errors'] == [] and res['env']['HSA_NO_SCRATCH_RECLAIM'] == '0'
    assert has(res['warnings'], 'env_overrides HSA_NO_SCRATCH_RECLAIM=0', 'gfx942 with ROCm 6.4.2')
    # before 2.26 RCCL never reads it: a user value is left alone
    res = compute(mi300x_rocm(node, '2.22.3', '6.3.1'), env_overrides={'HSA_NO_SCRATCH_RECLAIM': '0'})
    assert res['errors'] == [] and res['warnings'] == [] and res['env']['HSA_NO_SCRATCH_RECLAIM'] == '0'


def test_mi300x_without_dmabuf_kernel_support_stages_through_host(node):
    facts, root = node('mi300x_8gpu_bnxt_gid_split', MI_LINKS, '10.0.0.11', MI_ROUTE)
    with open(os.path.join(root, 'boot/config-6.8.0-45-generic'), 'w') as handle:
        handle.write('CONFIG_PCI_P2PDMA=y\n# CONFIG_DMABUF_MOVE_NOTIFY is not set\n')
    facts = nf.node_facts(IpRunner(MI_LINKS, '10.0.0.11', MI_ROUTE), '10.0.0.11', root=root)
    assert facts['rdma']['gpudirect']['path'] is None and facts['rdma']['gpudirect']['available'] is False
    res = compute(facts)
    assert 'NCCL_DMABUF_ENABLE' not in res['env'] and res['gpudirect'] is False
    assert has(res['warnings'], 'RCCL will stage network traffic through host memory',
               'CONFIG_DMABUF_MOVE_NOTIFY=y in /boot/config-<release> (not set there)')


# RCCL 2.28 and later (rocm-systems projects/rccl src/misc/rocmwrap.cc initOnceFunc): the kernel config is the first
# of /proc/config.gz (when zcat is found), /boot/config-<release>, /usr/src/linux-<release>/.config, ...,
# /usr/lib/modules/<release>/config, ... that opens; none: /proc/kallsyms (dma_buf_move_notify, pci_p2pdma).
# NCCL_DMABUF_ENABLE defaults to 1 from RCCL 2.28.3 for ROCm 7.12 (CHANGELOG), 0 before.

def mi300x_tree(node, version, rocm, edit):
    """The MI300X gid_split node with RCCL ``version`` and ROCm ``rocm``, its tree changed by ``edit(root)``."""
    dummy, root = node('mi300x_8gpu_bnxt_gid_split', MI_LINKS, '10.0.0.11', MI_ROUTE, version)
    edit(root)
    facts = nf.node_facts(IpRunner(MI_LINKS, '10.0.0.11', MI_ROUTE), '10.0.0.11', root=root)
    facts['library']['rocm'] = rocm
    return facts


def no_boot(root):
    os.remove(os.path.join(root, 'boot/config-6.8.0-45-generic'))  # as in a container without /boot


def test_rccl_2_28_reads_the_kernel_symbols_where_boot_is_missing(node):
    new = mi300x_tree(node, '2.28.3', '7.12.0', no_boot)
    assert new['rdma']['gpudirect']['dmabuf_kernel'] is None
    assert new['rdma']['gpudirect']['dmabuf_kernel_search'] == dict(
        file='/proc/kallsyms', options={'CONFIG_DMABUF_MOVE_NOTIFY': True, 'CONFIG_PCI_P2PDMA': True})
    res = compute(new)
    assert res['env']['NCCL_DMABUF_ENABLE'] == '1' and res['gpudirect'] is True and res['warnings'] == []
    assert res['reasons']['NCCL_DMABUF_ENABLE'] == (
        'GPUDirect RDMA through dma-buf: RCCL 2.28.3 defaults NCCL_DMABUF_ENABLE to 1 (since RCCL 2.28.3 for ROCm '
        '7.12); set all the same; /proc/kallsyms has CONFIG_DMABUF_MOVE_NOTIFY and CONFIG_PCI_P2PDMA (the symbols '
        'dma_buf_move_notify, pci_p2pdma): the first place RCCL 2.28 and later read, read where RCCL reads it (host)')
    # the ROCm 7.11 build of the same 2.28.3 leaves it at 0; an unknown ROCm cannot tell
    assert 'RCCL 2.28.3 leaves NCCL_DMABUF_ENABLE at 0 by default' in compute(mi300x_tree(
        node, '2.28.3', '7.11.0', no_boot))['reasons']['NCCL_DMABUF_ENABLE']
    assert 'only in the ROCm 7.12 build of 2.28.3 and later' in compute(mi300x_tree(
        node, '2.28.3', None, no_boot))['reasons']['NCCL_DMABUF_ENABLE']
    # RCCL 2.27 reads /boot/config-<release> only: it stages through host memory
    old = compute(mi300x_tree(node, '2.27.7', '7.1.0', no_boot))
    assert 'NCCL_DMABUF_ENABLE' not in old['env'] and old['gpudirect'] is False
    assert has(old['warnings'], 'RCCL will stage network traffic through host memory', '/boot/config-<release> '
               '(that file could not be read)')


def test_rccl_2_28_takes_the_first_kernel_config_that_opens(node):
    def modules_config(root):
        no_boot(root)
        os.makedirs(os.path.join(root, 'usr/lib/modules/6.8.0-45-generic'))
        with open(os.path.join(root, 'usr/lib/modules/6.8.0-45-generic/config'), 'w') as handle:
            handle.write('CONFIG_DMABUF_MOVE_NOTIFY=y\n# CONFIG_PCI_P2PDMA is not set\n')
    res = compute(mi300x_tree(node, '2.30.4', '7.14.0', modules_config))
    # the module directory's config decides, /proc/kallsyms (which has both symbols) is not read
    assert 'NCCL_DMABUF_ENABLE' not in res['env'] and res['gpudirect'] is False
    assert has(res['warnings'], 'RCCL only uses it with CONFIG_PCI_P2PDMA=y, not set in '
               '/usr/lib/modules/6.8.0-45-generic/config, the first place RCCL 2.28 and later read in host')

    def config_gz(root, zcat=True):
        no_boot(root)
        with gzip.open(os.path.join(root, 'proc/config.gz'), 'wt') as handle:
            handle.write('CONFIG_DMABUF_MOVE_NOTIFY=y\nCONFIG_PCI_P2PDMA=y\n')
        os.makedirs(os.path.join(root, 'usr/bin'), exist_ok=True)
        if zcat:
            with open(os.path.join(root, 'usr/bin/zcat'), 'w') as handle:
                handle.write('#!/bin/sh\n')
            os.chmod(os.path.join(root, 'usr/bin/zcat'), 0o755)
    facts = mi300x_tree(node, '2.30.4', '7.14.0', config_gz)
    assert facts['rdma']['gpudirect']['dmabuf_kernel_search']['file'] == '/proc/config.gz'
    assert compute(facts)['env']['NCCL_DMABUF_ENABLE'] == '1'
    # RCCL reads /proc/config.gz through zcat: without it, the next place (here /proc/kallsyms)
    facts = mi300x_tree(node, '2.30.4', '7.14.0', lambda root: config_gz(root, zcat=False))
    assert facts['rdma']['gpudirect']['dmabuf_kernel_search']['file'] == '/proc/kallsyms'


# ------------------------------------------------------------------------------------------------------------------
# AWS p5.48xlarge: 8 H100, 32 EFA devices, aws-ofi-nccl
# ------------------------------------------------------------------------------------------------------------------

EFA_LINKS = [LO, link('ens32', '172.31.10.5/20', mtu=9001)]
EFA_ROUTE = {'dst': '172.31.10.4', 'dev': 'ens32', 'prefsrc': '172.31.10.5'}


def p5(node, version=None):
    return node('h100_8gpu_efa_p5', EFA_LINKS, '172.31.10.4', EFA_ROUTE, version)[0]


def test_p5_efa_goes_through_aws_ofi_nccl(node):
    facts = p5(node)
    assert facts['rdma']['transport'] == 'efa' and len(facts['rdma']['devices']) == 32
    assert facts['library']['aws_ofi_nccl'] == '/opt/amazon/ofi-nccl/lib/libnccl-net.so'
    res = compute(facts, nproc_per_node=8, channels=64, require_transport=True)
    # aws-ofi-nccl doc/efa-env-var.md: FI_PROVIDER=efa; the plugin registers the net "Libfabric"
    # (src/nccl_ofi_interface_nvidia.cpp), which NCCL_NET must name; never NCCL_IB_HCA / NCCL_NET=IB for EFA
    # NCCL 2.26 src/include/device.h: MAXCHANNELS 64
    assert res['env'] == {'NCCL_SOCKET_IFNAME': '=ens32', 'GLOO_SOCKET_IFNAME': 'ens32', 'FI_PROVIDER': 'efa',
                          'NCCL_NET': 'Libfabric', 'NCCL_MAX_NCHANNELS': '64', 'NCCL_DEBUG': 'WARN'}
    assert res['transport'] == 'efa' and res['link_layer'] == 'efa' and len(res['hcas']) == 32
    assert res['gpudirect'] is True and res['errors'] == []
    assert res['warnings'] == ['the aws-ofi-nccl plugin is in /opt/amazon/ofi-nccl/lib: its directory must be on the '
                               'ranks\' LD_LIBRARY_PATH (the EFA installer sets it in /etc/profile.d; add it with '
                               'trainops_env otherwise)']


def test_p5_efa_older_nccl_and_missing_plugin(node):
    facts = p5(node, '2.23.4')
    # NCCL 2.23 src/include/device.h: MAXCHANNELS 32
    assert has(compute(facts, channels=64)['errors'], 'channels 64 is more than NCCL 2.23.4 allows (32')
    assert compute(facts, channels=32)['env']['NCCL_MAX_NCHANNELS'] == '32'
    facts['library']['aws_ofi_nccl'] = None
    res = compute(facts)
    assert res['transport'] == 'tcp' and res['env']['NCCL_IB_DISABLE'] == '1' and 'FI_PROVIDER' not in res['env']
    assert has(res['warnings'], 'need the aws-ofi-nccl plugin', 'NCCL will use TCP sockets')
    assert has(compute(facts, network_mode='rdma')['errors'], 'need the aws-ofi-nccl plugin', 'install it')
    facts['library']['aws_ofi_nccl'] = '/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so'
    # NCCL src/plugin/net.cc opens libnccl-net.so unless NCCL_NET_PLUGIN names libnccl-net-<name>.so
    assert compute(facts)['env']['NCCL_NET_PLUGIN'] == 'ofi'


# ------------------------------------------------------------------------------------------------------------------
# IPv6-only RoCE fabric, IPv6 master
# ------------------------------------------------------------------------------------------------------------------

V6_LINKS = [LO, link('eno1', '10.0.0.21/24', 'fd00:10::21/64', 'fe80::a288:c2ff:fe00:1/64')] + [
    link('ens%dnp0' % (10 + i), 'fd00:77:%x::21/64' % i, 'fe80::a288:c2ff:fe5c:%x10/64' % i) for i in range(8)]
V6_ROUTE = {'dst': 'fd00:10::11', 'dev': 'eno1', 'prefsrc': 'fd00:10::21'}
V6_HCA = '=' + ','.join('mlx5_%d:1' % i for i in range(8))


def ipv6(node, version=None):
    return node('h100_8gpu_ipv6_roce', V6_LINKS, 'fd00:10::11', V6_ROUTE, version)[0]


def test_ipv6_roce_nccl_2_21_needs_the_address_family(node):
    facts = ipv6(node)
    res = compute(facts, nproc_per_node=8)
    # NCCL 2.21 src/transport/net_ib.cc envIbAddrFamily: AF_INET by default, which leaves ncclIbGetGidIndex on the
    # link-local GID 0 of an IPv6-only port; NCCL_IB_ADDR_FAMILY=AF_INET6 makes it pick the global RoCE v2 GID 3.
    # src/misc/socket.cc ncclEnvSocketFamily: the master is IPv6 and eno1's first address is IPv4, so
    # NCCL_SOCKET_FAMILY=AF_INET6 (NCCL "Environment Variables": NCCL_SOCKET_FAMILY)
    assert [nccl_gid_index(p) for d in facts['rdma']['devices'] for p in d['ports']] == [0] * 8
    assert [nccl_gid_index(p, 'AF_INET6') for d in facts['rdma']['devices'] for p in d['ports']] == [3] * 8
    assert res['env'] == {
        'NCCL_SOCKET_IFNAME': '=eno1', 'GLOO_SOCKET_IFNAME': 'eno1', 'NCCL_SOCKET_FAMILY': 'AF_INET6',
        'NCCL_IB_DISABLE': '0', 'NCCL_IB_HCA': V6_HCA, 'NCCL_IB_ADDR_FAMILY': 'AF_INET6', 'NCCL_DEBUG': 'WARN'}
    assert res['errors'] == []
    assert res['warnings'] == ['gloo binds the first address of eno1 (10.0.0.21), not an IPv6 one, and has no family '
                               'setting: gloo peers must reach each other over that address']


def test_ipv6_roce_nccl_2_20_pins_the_index(node):
    res = compute(ipv6(node, '2.20.5'))
    # NCCL 2.20.5: NCCL_IB_GID_INDEX defaults to 0 (a link-local GID here) and there is no NCCL_IB_ADDR_FAMILY:
    # the index of the global RoCE v2 GID, the same on every port, is pinned
    assert res['env']['NCCL_IB_GID_INDEX'] == '3' and 'NCCL_IB_ADDR_FAMILY' not in res['env']
    assert res['errors'] == []


def test_ipv6_master_without_a_global_address_is_an_error(node):
    links = [LO, link('eno1', '10.0.0.21/24', 'fe80::a288:c2ff:fe00:1/64')] + V6_LINKS[2:]
    facts = node('h100_8gpu_ipv6_roce', links, 'fd00:10::11', dict(V6_ROUTE, prefsrc=None))[0]
    assert has(compute(facts)['errors'], "the master fd00:10::11 is IPv6 but interface 'eno1' has no global IPv6")


# ------------------------------------------------------------------------------------------------------------------
# RoCE rails plus a RoCE-capable front-end NIC of the same speed that carries the default route
# ------------------------------------------------------------------------------------------------------------------

FE_LINKS = [LO, link('eno8np0', '10.0.0.21/24')] + [
    link('ens%dnp0' % (10 + i), '10.100.%d.21/24' % i) for i in range(8)]
FE_ROUTE = {'dst': '10.0.0.11', 'dev': 'eno8np0', 'prefsrc': '10.0.0.21'}
FE_HCA = '=' + ','.join('mlx5_%d:1' % i for i in range(8))


def frontend(node, version=None, links=None, route=None):
    return node('h100_8gpu_roce_frontend', links or FE_LINKS, '10.0.0.11', route or FE_ROUTE, version)[0]


def test_frontend_nic_is_left_out_nccl_2_23(node):
    facts = frontend(node)
    assert facts['network']['default_ifnames'] == ['eno8np0']
    assert facts['library'] == dict(name='nccl', version='2.23.4', aws_ofi_nccl=None, read_in='host', rocm=None,
                                    source='/usr/lib/x86_64-linux-gnu/libnccl.so.2.23.4')
    res = compute(facts, nproc_per_node=8)
    # NCCL "Environment Variables" NCCL_IB_HCA: every listed port is used; mlx5_8 (eno8np0) carries the default
    # route, so it is a front-end / management NIC, not a training rail. NCCL >= 2.21: no GID index
    assert res['env'] == {'NCCL_SOCKET_IFNAME': '=eno8np0', 'GLOO_SOCKET_IFNAME': 'eno8np0', 'NCCL_IB_DISABLE': '0',
                          'NCCL_IB_HCA': FE_HCA, 'NCCL_DEBUG': 'WARN'}
    assert res['left_out'] == {'mlx5_8:1': 'front-end NIC: its netdev carries the default route'}
    assert has(res['warnings'], 'leaving out mlx5_8:1', 'eno8np0 carries', 'list it in ib_hca')
    table = check_cluster({'gpu-01': res})['table']
    assert 'gpu-01: left out mlx5_8:1 (front-end NIC' in table and 'NCCL 2.23.4' in table
    # listed explicitly, it is used
    res = compute(facts, ib_hca=['mlx5_%d' % i for i in range(9)])
    assert res['env']['NCCL_IB_HCA'] == FE_HCA + ',mlx5_8:1' and res['left_out'] == {}


def test_frontend_nccl_2_19_pins_gid_and_qos(node):
    facts = frontend(node, '2.19.3')
    res = compute(facts, ib_tc=106, ib_fifo_tc=192, ib_sl=3, ib_qps_per_connection=4, cross_nic=0)
    # NCCL 2.19: NCCL_IB_GID_INDEX defaults to 0, so the rails' common RoCE v2 index 3 is pinned
    assert res['env']['NCCL_IB_GID_INDEX'] == '3'
    # src/transport/net_ib.cc NCCL_IB_TC / NCCL_IB_SL / NCCL_IB_QPS_PER_CONNECTION, src/graph/search.cc NCCL_CROSS_NIC
    assert (res['env']['NCCL_IB_TC'], res['env']['NCCL_IB_SL'], res['env']['NCCL_IB_QPS_PER_CONNECTION'],
            res['env']['NCCL_CROSS_NIC']) == ('106', '3', '4', '0')
    # NCCL_IB_FIFO_TC first appears in NCCL 2.22: the value would be ignored, an error
    assert 'NCCL_IB_FIFO_TC' not in res['env']
    assert res['errors'] == ['ib_fifo_tc 192: NCCL 2.19.3 ignores it: NCCL_IB_FIFO_TC exists since 2.22 '
                             '(src/transport/net_ib.cc)']
    assert has(compute(facts, ib_tc=300)['errors'], 'ib_tc must be an integer from 0 to 255 (got 300)')
    assert has(compute(facts, ib_sl=16)['errors'], 'ib_sl must be an integer from 0 to 15')
    assert has(compute(facts, ib_qps_per_connection=129)['errors'], 'ib_qps_per_connection', 'from 1 to 128')
    assert has(compute(facts, cross_nic=3)['errors'], 'cross_nic must be an integer from 0 to 2')


def test_secondary_address_and_gloo_overrides(node):
    links = [LO, link('eno8np0', '10.9.0.21/24', '10.0.0.121/24')] + FE_LINKS[2:]
    facts = frontend(node, links=links, route=dict(FE_ROUTE, prefsrc='10.0.0.121'))
    # NCCL src/os/linux.cc (interface addresses in getifaddrs order, the first kept) and gloo bind 10.9.0.21,
    # not the route's source 10.0.0.121, and 10.9.0.21 is not on the master's network
    assert has(compute(facts)['warnings'], "interface 'eno8np0'", 'first address 10.9.0.21', 'from 10.0.0.121',
               'not on the master\'s network')
    # torch ProcessGroupGloo: GLOO_SOCKET_IFNAME is plain names separated by commas, no NCCL prefixes
    res = compute(facts, env_overrides={'GLOO_SOCKET_IFNAME': '=eno8np0'})
    assert has(res['errors'], 'GLOO_SOCKET_IFNAME==eno8np0', 'plain interface names', 'write eno8np0')
    one = compute(facts)
    two = compute(facts, env_overrides={'GLOO_SOCKET_IFNAME': 'eno8np0,ens10np0'})
    assert two['errors'] == []
    # PyTorch distributed docs: all processes must specify the same number of interfaces in GLOO_SOCKET_IFNAME
    check = check_cluster({'a': one, 'b': two})
    assert has(check['errors'], 'different numbers of interfaces in GLOO_SOCKET_IFNAME', '1 on a', '2 on b')


def test_every_decider_exists():
    """Each function DECIDERS names is defined in exactly one of the modules that hold deciders."""
    for var, name in deciders.DECIDERS.items():
        func = name.split()[0]
        homes = [module.__name__ for module in (network, gpudirect, gpu, deciders)
                 if callable(getattr(module, func, None)) and getattr(module, func).__module__ == module.__name__]
        assert len(homes) == 1, (var, name, homes)


# ------------------------------------------------------------------------------------------------------------------
# DGX H100: 8 compute HCAs mlx5_0,3,4,5,6,9,10,11 beside the GPUs, storage / in-band management ConnectX-7 in slots
# 1 and 2 (mlx5_1,2,7,8) on the CPUs' root ports (fixture README: DGX H100 User Guide, Network Modules table)
# ------------------------------------------------------------------------------------------------------------------

DGX_LINKS = [LO, link('enp41s0f1np1', '10.10.10.12/24'), link('enp170s0f1np1', '10.10.11.12/24')] + [
    link('ibp%ds0' % bus, '10.20.%d.12/24' % i) for i, bus in enumerate((24, 64, 79, 94, 154, 192, 206, 220))]
DGX_ROUTE = {'dst': '10.10.10.11', 'dev': 'enp41s0f1np1', 'prefsrc': '10.10.10.12'}
DGX_COMPUTE = ['mlx5_0', 'mlx5_3', 'mlx5_4', 'mlx5_5', 'mlx5_6', 'mlx5_9', 'mlx5_10', 'mlx5_11']
DGX_HCA = '=' + ','.join('%s:1' % d for d in DGX_COMPUTE)
DGX_FAR = 'no GPU under the same PCIe switch (nearest GPU path PHB)'
DGX_FRONT = '; front-end NIC: its netdev carries the default route'


def dgx(node):
    return node('dgx_h100_compute_storage', DGX_LINKS, '10.10.10.11', DGX_ROUTE)[0]


def test_dgx_h100_takes_the_eight_compute_hcas(node):
    facts = dgx(node)
    res = compute(facts, nproc_per_node=8)
    # NCCL src/graph/topo.h path types, src/graph/paths.cc ncclTopoSetPaths (a PCI-PCI hop is PXB, a hop through the
    # CPU is PHB), netGdrLevel PATH_PXB; src/graph/topo.cc ncclTopoGetLocal: each GPU's nearest NICs. Each compute
    # HCA shares its GPU's PCIe switch (PXB); the storage / management ConnectX-7s reach the GPUs only through a CPU.
    assert res['env']['NCCL_IB_HCA'] == DGX_HCA
    assert res['hcas'] == ['%s:1' % d for d in DGX_COMPUTE]
    assert res['left_out'] == {'mlx5_1:1': DGX_FAR, 'mlx5_2:1': DGX_FAR + DGX_FRONT, 'mlx5_7:1': DGX_FAR,
                               'mlx5_8:1': DGX_FAR}
    assert res['reasons']['NCCL_IB_HCA'] == 'the ACTIVE RDMA ports nearest the GPUs by PCIe topology, matched exactly'
    assert res['topology'].startswith('PCIe topology: one rail per GPU: GPU 0000:1b:00.0 -> mlx5_0 (PXB), ')
    assert res['errors'] == [] and res['transport'] == 'rdma' and res['link_layer'] == 'infiniband'
    assert has(res['warnings'], 'leaving out mlx5_1:1, mlx5_7:1, mlx5_8:1', 'list them in ib_hca')
    assert has(res['warnings'], 'leaving out mlx5_2:1', 'front-end NIC')
    table = check_cluster({'dgx-01': res})['table']
    print(table)
    for dev in ('mlx5_1', 'mlx5_2', 'mlx5_7', 'mlx5_8'):
        assert 'dgx-01: left out %s:1 (%s' % (dev, DGX_FAR) in table
    assert 'dgx-01: left out mlx5_2:1 (%s%s)' % (DGX_FAR, DGX_FRONT) in table
    assert 'dgx-01: PCIe topology: one rail per GPU: ' in table and 'GPU 0000:df:00.0 -> mlx5_11 (PXB)' in table


def test_dgx_h100_user_list_still_wins(node):
    facts = dgx(node)
    res = compute(facts, ib_hca=DGX_COMPUTE + ['mlx5_1'])
    assert res['env']['NCCL_IB_HCA'] == DGX_HCA + ',mlx5_1:1' and res['left_out'] == {} and res['topology'] is None


def test_dgx_h100_without_pci_links_keeps_every_port(node):
    facts = dgx(node)
    facts['pci']['gpus']['0000:1b:00.0'] = None  # a missing link: the topology is not read, nothing is dropped by it
    res = compute(facts)
    # the old rule alone: InfiniBand before RoCE leaves the Ethernet ports out, the IB storage ports stay
    assert res['env']['NCCL_IB_HCA'] == '=' + ','.join(
        '%s:1' % d for d in sorted(DGX_COMPUTE + ['mlx5_1', 'mlx5_7'], key=_natural))
    assert res['topology'] == 'PCIe topology not read (no sysfs PCI path for 0000:1b:00.0): every ACTIVE port kept'
    assert 'dgx-01: PCIe topology not read' in check_cluster({'dgx-01': res})['table']
