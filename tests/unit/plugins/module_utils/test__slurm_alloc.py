# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPUs a Slurm job holds per node, from ``scontrol --details show job`` as the lab's real Slurm 22.05 prints it.

The record of job 1 (``salloc -N2 --gres=gpu:4``) is the lab's, unchanged (tests/unit/fixtures/slurm); the other
requests put into it the lines the lab printed for them (see that directory's README).
"""

from __future__ import annotations

import os
import re

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _slurm_alloc as sa

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures', 'slurm')


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


JOB1 = fixture('job1-gres-gpu4.scontrol.txt')


def variant(job_id, nodelist, gres_lines, tres_line=None, state='RUNNING'):
    """Job 1's record with another id, node list, JOB_GRES/detail lines and TresPer* line (None: none)."""
    text = JOB1.replace('JobId=1 ', 'JobId=%s ' % job_id).replace('JobState=RUNNING', 'JobState=%s' % state)
    text = text.replace('   NodeList=lab-node[01-02]', '   NodeList=%s' % nodelist)
    text = re.sub(r'   JOB_GRES=.*\n(     Nodes=.*\n)+', lambda _m: ''.join(line + '\n' for line in gres_lines), text)
    return text.replace('   TresPerNode=gres:gpu:4\n', tres_line + '\n' if tres_line else '')


# Lines the lab printed (/work/shared-samples/salloc-*.txt), one request each
VARIANTS = {
    'ntasks2_gres2': variant(3, 'lab-node[01-02]', [
        '   JOB_GRES=gpu:labgpu:4',
        '     Nodes=lab-node[01-02] CPU_IDs=0-1 Mem=0 GRES=gpu:labgpu:2(IDX:0-1)'], '   TresPerNode=gres:gpu:2'),
    'gpus_per_node_typed': variant(4, 'lab-node[01-02]', [
        '   JOB_GRES=gpu:labgpu:4',
        '     Nodes=lab-node[01-02] CPU_IDs=0 Mem=0 GRES=gpu:labgpu:2(IDX:0-1)'], '   TresPerNode=gres:gpu:labgpu:2'),
    'gpus6': variant(5, 'lab-node[01-02]', [
        '   JOB_GRES=gpu:labgpu:6',
        '     Nodes=lab-node01 CPU_IDs=0 Mem=0 GRES=gpu:labgpu:4(IDX:0-3)',
        '     Nodes=lab-node02 CPU_IDs=0 Mem=0 GRES=gpu:labgpu:2(IDX:0-1)'], '   TresPerJob=gres:gpu:6'),
    'c2_gres1': variant(6, 'lab-node[01-02]', [
        '   JOB_GRES=gpu:labgpu:2',
        '     Nodes=lab-node[01-02] CPU_IDs=0-1 Mem=0 GRES=gpu:labgpu:1(IDX:0)'], '   TresPerNode=gres:gpu:1'),
    'shared_node': variant(8, 'lab-node03', [
        '   JOB_GRES=gpu:labgpu:2',
        '     Nodes=lab-node03 CPU_IDs=1 Mem=0 GRES=gpu:labgpu:2(IDX:2-3)'], '   TresPerNode=gres:gpu:2'),
    # --exclusive --gres=gpu:2: the job holds every GPU of its nodes, its steps get the 2 asked for (0,1)
    'exclusive_gres2': variant(2, 'lab-node[01-02]', [
        '   JOB_GRES=gpu:labgpu:8',
        '     Nodes=lab-node[01-02] CPU_IDs=0-1 Mem=0 GRES=gpu:labgpu:4(IDX:0-3)'], '   TresPerNode=gres:gpu:2'),
}


def test_the_labs_gres_gpu4_record():
    job = sa.parse_job(JOB1, '1')
    assert (job['job_id'], job['state'], job['nodelist'], job['components']) == ('1', 'RUNNING', 'lab-node[01-02]', [])
    assert job['nodes'] == {
        'lab-node01': {'count': 4, 'ids': [0, 1, 2, 3], 'types': ['labgpu'], 'items': [('labgpu', 4, [0, 1, 2, 3])],
                       'cpus': 1, 'mem_mb': None},
        'lab-node02': {'count': 4, 'ids': [0, 1, 2, 3], 'types': ['labgpu'], 'items': [('labgpu', 4, [0, 1, 2, 3])],
                       'cpus': 1, 'mem_mb': None}}
    assert (job['job_gres'], job['tres_per_node']) == ('gpu:labgpu:8', 'gres:gpu:4')


@pytest.mark.parametrize('name, job_id, expected', [
    ('ntasks2_gres2', '3', {'lab-node01': (2, [0, 1]), 'lab-node02': (2, [0, 1])}),
    ('gpus_per_node_typed', '4', {'lab-node01': (2, [0, 1]), 'lab-node02': (2, [0, 1])}),
    ('gpus6', '5', {'lab-node01': (4, [0, 1, 2, 3]), 'lab-node02': (2, [0, 1])}),
    ('c2_gres1', '6', {'lab-node01': (1, [0]), 'lab-node02': (1, [0])}),
    ('shared_node', '8', {'lab-node03': (2, [2, 3])}),
    ('exclusive_gres2', '2', {'lab-node01': (2, [0, 1]), 'lab-node02': (2, [0, 1])}),
])
def test_every_request_shape_the_lab_printed(name, job_id, expected):
    job = sa.parse_job(VARIANTS[name], job_id)
    assert {host: (g['count'], g['ids']) for host, g in job['nodes'].items()} == expected


@pytest.mark.parametrize('gres, count, ids, types', [
    ('gpu:4(IDX:0-3)', 4, [0, 1, 2, 3], []),
    ('gpu:h100:4(IDX:4-7)', 4, [4, 5, 6, 7], ['h100']),
    ('gpu:a:2(IDX:0-1),gpu:b:2(IDX:2-3)', 4, [0, 1, 2, 3], ['a', 'b']),
    ('gpu:a100:1(IDX:6),gpu:a100:1(IDX:0)', 2, [0, 6], ['a100', 'a100']),
    ('gpu:3(IDX:0,2-3)', 3, [0, 2, 3], []),
    ('gpu:4(IDX:0-3),nic:1(IDX:0)', 4, [0, 1, 2, 3], []),
    ('nic:1(IDX:0),gpu:h100:2(IDX:1-2)', 2, [1, 2], ['h100']),
    ('gpu:4', 4, None, []),                       # a gres.conf without File=: a count, no index
    ('gpu:h100:2(IDX:N/A)', 2, None, ['h100']),
    ('', 0, [], []),                              # a job without GRES prints GRES= with nothing after it
    ('nic:1(IDX:0)', 0, [], []),
])
def test_gres_values(gres, count, ids, types):
    parsed = sa.parse_gres(gres)
    assert (parsed['count'], parsed['ids'], parsed['types']) == (count, ids, types)


@pytest.mark.parametrize('gres, fragment', [
    ('gpu:4(IDX:0-2)', 'counts 4 GPUs but lists 3 indexes'),
    ('gpu:2(IDX:1-0)', 'invalid GPU index range'),
    ('gpu:2(IDX:a-b)', 'invalid GPU index list'),
    ('gpu:a:2(IDX:0-1),gpu:b:2(IDX:1-2)', 'lists a GPU index twice'),
    ('gpu:h100', 'no GPU count'),
])
def test_bad_gres_values(gres, fragment):
    with pytest.raises(sa.SlurmJobError) as err:
        sa.parse_gres(gres)
    assert fragment in str(err.value)


def test_several_detail_lines_and_a_node_without_gpus():
    # written after Slurm's format: a job holding a GPU node and a CPU node
    text = variant(21, 'gpu[1-2],cpu1', [
        '   JOB_GRES=gpu:h100:16',
        '     Nodes=gpu[1-2] CPU_IDs=0-31 Mem=0 GRES=gpu:h100:8(IDX:0-7)',
        '     Nodes=cpu1 CPU_IDs=0-31 Mem=0 GRES='])
    job = sa.parse_job(text, 21)
    assert [(h, g['count']) for h, g in job['nodes'].items()] == [('gpu1', 8), ('gpu2', 8), ('cpu1', 0)]


def test_the_oneliner_form_reads_the_same():
    # scontrol --oneliner puts the record, detail entries included, on one line
    text = ' '.join(line.strip() for line in VARIANTS['gpus6'].splitlines() if line.strip()) + '\n'
    job = sa.parse_job(text, 5)
    assert {h: g['ids'] for h, g in job['nodes'].items()} == {'lab-node01': [0, 1, 2, 3], 'lab-node02': [0, 1]}


def test_a_heterogeneous_job_lists_its_components_in_order():
    # written after Slurm's format: `salloc -N1 --gres=gpu:4 : -N1 --gres=gpu:4` gives records 30 (offset 0) and 31
    first = variant(30, 'n1', ['   JOB_GRES=gpu:4', '     Nodes=n1 CPU_IDs=0 Mem=0 GRES=gpu:4(IDX:0-3)'])
    second = variant(31, 'n2', ['   JOB_GRES=gpu:4', '     Nodes=n2 CPU_IDs=0 Mem=0 GRES=gpu:4(IDX:4-7)'])
    first = first.replace('JobId=30 JobName', 'JobId=30 HetJobId=30 HetJobOffset=0 JobName')
    second = second.replace('JobId=31 JobName', 'JobId=31 HetJobId=30 HetJobOffset=1 JobName')
    job = sa.parse_job(second + first, '30')
    assert [c['job_id'] for c in job['components']] == ['30', '31']
    assert {h: g['ids'] for h, g in job['nodes'].items()} == {'n1': [0, 1, 2, 3], 'n2': [4, 5, 6, 7]}


@pytest.mark.parametrize('text, job_id, fragment', [
    (JOB1, '2', 'no record of job 2 in the output (JobId=1)'),
    ('slurm_load_jobs error: Invalid job id specified\n', '2', 'no JobId= at all'),
    (variant(7, 'lab-node01', ['   JOB_GRES=(null)'], state='PENDING'), '7',
     'job 7 is PENDING, not RUNNING'),
    (re.sub(r'   JOB_GRES=.*\n(     Nodes=.*\n)+', '', JOB1), '1', 'no per-node detail'),
    (variant(9, 'n[1-2]', ['     Nodes=n[1-2] CPU_IDs=0 Mem=0 GRES=gpu:1(IDX:0)',
                           '     Nodes=n2 CPU_IDs=0 Mem=0 GRES=gpu:1(IDX:0)']), '9', 'node n2 has two detail lines'),
    (variant(9, 'n[1-2]', ['     Nodes=n[1-2] CPU_IDs=0 Mem=0 GRES=gpu:2(IDX:0)']), '9',
     'job 9, Nodes=n[1-2]: \'gpu:2(IDX:0)\' counts 2 GPUs but lists 1 indexes'),
])
def test_unusable_output(text, job_id, fragment):
    with pytest.raises(sa.SlurmJobError) as err:
        sa.parse_job(text, job_id)
    assert fragment in str(err.value)


def test_helpers():
    assert sa.gpu_ids_text([4, 5, 6, 7]) == '4,5,6,7'
    assert sa.parse_ids('0,2-3') == [0, 2, 3]
    assert sa.het_groups({'SLURM_JOB_NODELIST_HET_GROUP_1': 'b[1-2]', 'SLURM_JOB_NODELIST_HET_GROUP_0': 'a1',
                          'SLURM_JOB_NODELIST': 'a1'}) == ['a1', 'b[1-2]']
    assert sa.SCONTROL_ARGS == ('--details', 'show', 'job')


@pytest.mark.parametrize('value, wanted', [
    ('gres:gpu:4', {None: 4}), ('gres:gpu:labgpu:2', {'labgpu': 2}), ('gres/gpu:8', {None: 8}),
    ('gres:gpu:a:1,gres:gpu:b:1', {'a': 1, 'b': 1}), ('gres:nic:1', None), (None, None), ('', None),
])
def test_tres_per_node(value, wanted):
    assert sa.parse_tres_per_node(value) == wanted


def test_a_step_gets_the_asked_share_of_each_type():
    gpus = sa.parse_gres('gpu:a:2(IDX:0-1),gpu:b:2(IDX:2-3)')
    share = sa.step_share(gpus, {'a': 1, 'b': 1})
    assert (share['count'], share['ids'], share['held']) == (2, [0, 2], 4)
    assert sa.step_share(gpus, {None: 4}) is gpus and sa.step_share(gpus, None) is gpus
    assert sa.step_share(sa.parse_gres('gpu:4'), {None: 2})['ids'] is None
    with pytest.raises(sa.SlurmJobError) as err:
        sa.step_share(gpus, {'c': 1})
    assert 'asks for 1 c GPU(s) per node but holds 0 there (GRES a:2,b:2)' in str(err.value)


SHARED = fixture('job2-shared-node-gres2-c1.scontrol.txt')
EXCLUSIVE = fixture('job3-exclusive-no-gres.scontrol.txt')
COUNT_ONLY = fixture('job41-count-only-gres.24x-form.scontrol.txt')


@pytest.mark.parametrize('gres, count, ids, types', [
    ('gpu(CNT:4)', 4, None, []),                  # gres_ctld.c:1744-1747: no device bitmap on the node
    ('gpu:h100(CNT:4)', 4, None, ['h100']),
    ('gpu:h100(CNT:2),nic(CNT:1)', 2, None, ['h100']),
    ('gpu:a100:2(IDX:0-1),nic:1', 2, [0, 1], ['a100']),
    ('gpu:a100:2(IDX:0-1),nic:1(IDX:0)', 2, [0, 1], ['a100']),
    ('shard:2(2/4,0/4),gpu:1(IDX:1)', 1, [1], []),  # 23.11+ shared GRES: per-device counts in parentheses
])
def test_every_gres_form_slurm_prints(gres, count, ids, types):
    parsed = sa.parse_gres(gres)
    assert (parsed['count'], parsed['ids'], parsed['types']) == (count, ids, types)


def test_a_count_only_node_gives_ranks_without_indexes_and_the_memory_it_holds():
    job = sa.parse_job(COUNT_ONLY, 41)
    assert {h: (g['count'], g['ids'], g['cpus'], g['mem_mb']) for h, g in job['nodes'].items()} == {
        'gpu-01': (2, None, 1, 16000), 'gpu-02': (2, [0, 1], 1, 16000)}
    assert job['gpus_implicit'] is False


def test_the_labs_shared_node_record_gives_its_cpu_and_gpus():
    job = sa.parse_job(SHARED, 2)
    assert {h: (g['count'], g['ids'], g['cpus'], g['mem_mb']) for h, g in job['nodes'].items()} == {
        'lab-node02': (2, [2, 3], 1, None)}
    assert job['gpus_implicit'] is False
    assert sa.few_cpus(1, 2) == '1 CPU for 2 ranks' and sa.few_cpus(2, 2) is None and sa.few_cpus(None, 2) is None


def test_an_exclusive_job_without_gpus_asked_for_holds_them_implicitly():
    job = sa.parse_job(EXCLUSIVE, 3)
    assert {h: (g['count'], g['cpus']) for h, g in job['nodes'].items()} == {'lab-node03': (4, 2), 'lab-node04': (2, 2)}
    assert job['gpus_implicit'] is True


@pytest.mark.parametrize('fields, wanted', [
    ('TresPerNode=gres:gpu:2', True), ('TresPerJob=gres/gpu:6', True), ('TresPerTask=cpu=2,gres/gpu:h100=1', True),
    ('TresPerTask=gres:gpu:1', True), ('TresPerSocket=gres/gpu:a100:1', True), ('TresPerNode=gres/gpu:0', False),
    ('TresPerNode=gres:nic:1', False), ('TresPerTask=cpu=2', False), ('', False),
])
def test_gpus_requested(fields, wanted):
    assert sa.gpus_requested('JobId=1 JobName=x\n   %s\n' % fields) is wanted


@pytest.mark.parametrize('value, mb', [
    ('64G', 65536), ('500000', 500000), (16000, 16000), ('512M', 512), ('1T', 1048576), ('2048K', 2),
    ('lots', None), (True, None), ('', None),
])
def test_mem_mb(value, mb):
    assert sa.mem_mb(value) == mb


def test_threads_per_rank():
    assert [sa.threads_per_rank(c, r) for c, r in ((1, 2), (16, 8), (64, 8), (None, 8), (4, 0))] == [1, 2, 8, None, None]
