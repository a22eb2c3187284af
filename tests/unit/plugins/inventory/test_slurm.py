# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trainops.multinode.slurm through Ansible's InventoryManager/DataLoader with Slurm allocation environments."""

from __future__ import annotations

import os
import re

import pytest

from ansible.errors import AnsibleError, AnsibleParserError
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader

from ansible_collections.trainops.multinode.plugins.inventory import slurm as slurm_plugin
from ansible_collections.trainops.multinode.plugins.module_utils._hostlist import HostlistError

pytestmark = pytest.mark.usefixtures('no_slurm_env')

SOURCE = 'plugin: trainops.multinode.slurm\n'


def own_vars(inventory, name):
    host = inventory.get_host(name)
    assert host is not None, name
    return {key: value for key, value in host.vars.items() if not key.startswith('inventory_')}


def members(inventory, group):
    return inventory.get_groups_dict().get(group)


def source(tmp_path, text=SOURCE, name='allocation.slurm.yml'):
    path = tmp_path / name
    path.write_text(text)
    return path


def setenv(monkeypatch, **values):
    for key, value in values.items():
        monkeypatch.setenv(key, value)


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures', 'slurm')
with open(os.path.join(FIXTURES, 'job1-gres-gpu4.scontrol.txt')) as _handle:
    JOB1 = _handle.read()
"""``scontrol --details show job 1`` of ``salloc -N2 --gres=gpu:4`` on the lab's real Slurm 22.05."""


def job_record(job_id, nodelist, details, state='RUNNING', tres=None):
    """Job 1's record with another id, node list, ``Nodes=... GRES=...`` detail lines ((expression, gres), ...) and
    ``TresPerNode=`` (``tres``; None: no such line, as for --gpus=N)."""
    text = JOB1.replace('JobId=1 ', 'JobId=%s ' % job_id).replace('JobState=RUNNING', 'JobState=%s' % state)
    text = text.replace('   TresPerNode=gres:gpu:4\n', '   TresPerNode=%s\n' % tres if tres else '')
    text = text.replace('   NodeList=lab-node[01-02]', '   NodeList=%s' % nodelist)
    lines = ''.join('     Nodes=%s CPU_IDs=0 Mem=0 GRES=%s\n' % detail for detail in details)
    return re.sub(r'(   JOB_GRES=.*\n)(     Nodes=.*\n)+', lambda m: m.group(1) + lines, text)


def fake_scontrol(tmp_path, output, rc=0):
    """An scontrol that records its arguments in ``scontrol.argv`` and prints ``output`` (to stderr when rc != 0)."""
    (tmp_path / 'scontrol.out').write_text(output)
    script = tmp_path / 'fake-scontrol'
    script.write_text('#!/bin/sh\nprintf "%%s\\n" "$*" >> %s\ncat %s %s\nexit %d\n' % (
        tmp_path / 'scontrol.argv', tmp_path / 'scontrol.out', '>&2' if rc else '', rc))
    script.chmod(0o755)
    return 'scontrol: %s\n' % script


def scontrol_calls(tmp_path):
    path = tmp_path / 'scontrol.argv'
    return path.read_text().splitlines() if path.exists() else []


def ranks(inventory, group='trainops_nodes'):
    return [own_vars(inventory, n).get('trainops_nproc_per_node') for n in members(inventory, group)]


def gpu_ids(inventory, group='trainops_nodes'):
    return [own_vars(inventory, n).get('trainops_slurm_gpu_ids') for n in members(inventory, group)]


def test_salloc_gres_gpu4_gives_4_ranks_per_node(tmp_path, manager, monkeypatch):
    # the environment and scontrol output of `salloc -N2 --gres=gpu:4` on the lab: no SLURM_GPUS_* at all, and
    # SLURM_TASKS_PER_NODE=1(x2), which used to become 1 rank per node
    setenv(monkeypatch, SLURM_JOB_ID='1', SLURM_JOB_NODELIST='lab-node[01-02]', SLURM_JOB_CPUS_PER_NODE='1(x2)',
           SLURM_TASKS_PER_NODE='1(x2)')
    inventory = manager(source(tmp_path, SOURCE + fake_scontrol(tmp_path, JOB1)))
    assert scontrol_calls(tmp_path) == ['--details show job 1']
    assert members(inventory, 'trainops_nodes') == ['lab-node01', 'lab-node02']
    assert own_vars(inventory, 'lab-node01') == {'trainops_master': True, 'trainops_node_rank': 0,
                                                 'trainops_nproc_per_node': 4, 'trainops_slurm_gpu_ids': [0, 1, 2, 3],
                                                 'trainops_slurm_cpus': 1}
    assert own_vars(inventory, 'lab-node02') == {'trainops_node_rank': 1, 'trainops_nproc_per_node': 4,
                                                 'trainops_slurm_gpu_ids': [0, 1, 2, 3], 'trainops_slurm_cpus': 1}
    assert inventory.groups['trainops_nodes'].get_vars() == {
        'trainops_slurm_nodelist': 'lab-node[01-02]', 'trainops_slurm_job_id': '1'}


@pytest.mark.parametrize('details, nproc, ids', [
    # --gpus-per-node=labgpu:2, and --gres=gpu:2 --ntasks-per-node=2 (lab)
    ([('lab-node[01-02]', 'gpu:labgpu:2(IDX:0-1)')], 2, [[0, 1], [0, 1]]),
    # -c2 --gres=gpu:1 (lab): SLURM_TASKS_PER_NODE says 1, SLURM_JOB_CPUS_PER_NODE 2
    ([('lab-node[01-02]', 'gpu:labgpu:1(IDX:0)')], 1, [[0], [0]]),
    # a node shared with another job: this one holds GPUs 4-7 of each
    ([('lab-node[01-02]', 'gpu:h100:4(IDX:4-7)')], 4, [[4, 5, 6, 7], [4, 5, 6, 7]]),
    # two types on a node are summed
    ([('lab-node[01-02]', 'gpu:a:2(IDX:0-1),gpu:b:2(IDX:2-3)')], 4, [[0, 1, 2, 3], [0, 1, 2, 3]]),
    # no File= in gres.conf: a count without indexes
    ([('lab-node[01-02]', 'gpu:8')], 8, [None, None]),
])
def test_ranks_and_gpu_ids_from_the_jobs_gres(tmp_path, manager, monkeypatch, details, nproc, ids):
    setenv(monkeypatch, SLURM_JOB_ID='42', SLURM_JOB_NODELIST='lab-node[01-02]', SLURM_TASKS_PER_NODE='128(x2)')
    inventory = manager(source(tmp_path, SOURCE + fake_scontrol(tmp_path, job_record(42, 'lab-node[01-02]', details))))
    assert ranks(inventory) == [nproc, nproc]
    assert gpu_ids(inventory) == ids


def test_an_exclusive_job_gets_the_gpus_it_asked_for(tmp_path, manager, monkeypatch):
    # salloc -N2 --exclusive --gres=gpu:2 (lab): the job holds IDX:0-3 of each node, its steps get 0,1
    setenv(monkeypatch, SLURM_JOB_ID='2', SLURM_JOB_NODELIST='lab-node[01-02]', SLURM_TASKS_PER_NODE='2(x2)')
    output = job_record(2, 'lab-node[01-02]', [('lab-node[01-02]', 'gpu:labgpu:4(IDX:0-3)')], tres='gres:gpu:2')
    inventory = manager(source(tmp_path, SOURCE + fake_scontrol(tmp_path, output)))
    assert ranks(inventory) == [2, 2] and gpu_ids(inventory) == [[0, 1], [0, 1]]


def test_gpus_per_node_option_wins_and_keeps_the_gpu_ids(tmp_path, manager, monkeypatch):
    setenv(monkeypatch, SLURM_JOB_ID='5', SLURM_JOB_NODELIST='lab-node[01-02]')
    output = job_record(5, 'lab-node[01-02]', [('lab-node01', 'gpu:labgpu:4(IDX:0-3)'),
                                               ('lab-node02', 'gpu:labgpu:2(IDX:0-1)')])
    inventory = manager(source(tmp_path, SOURCE + 'gpus_per_node: 2\n' + fake_scontrol(tmp_path, output)))
    assert ranks(inventory) == [2, 2]
    assert gpu_ids(inventory) == [[0, 1, 2, 3], [0, 1]]


def test_a_cpu_only_job_with_gpus_per_node(tmp_path, manager, monkeypatch):
    setenv(monkeypatch, SLURM_JOB_ID='6', SLURM_JOB_NODELIST='lab-node[01-02]', SLURM_TASKS_PER_NODE='2(x2)')
    output = job_record(6, 'lab-node[01-02]', [('lab-node[01-02]', '')])
    inventory = manager(source(tmp_path, SOURCE + 'gpus_per_node: 3\n' + fake_scontrol(tmp_path, output)))
    assert ranks(inventory) == [3, 3]
    assert gpu_ids(inventory) == [None, None]


def test_a_failing_scontrol_is_a_warning_with_gpus_per_node(tmp_path, manager, monkeypatch, capsys):
    setenv(monkeypatch, SLURM_JOB_ID='7', SLURM_JOB_NODELIST='node[6-7]')
    text = SOURCE + 'gpus_per_node: 2\n' + fake_scontrol(tmp_path, 'slurm_load_jobs error: Invalid job id\n', rc=1)
    inventory = manager(source(tmp_path, text))
    assert ranks(inventory) == [2, 2] and gpu_ids(inventory) == [None, None]
    assert 'cannot read the GPUs of job 7' in capsys.readouterr().err


def test_nested_brackets_and_vars_group_and_compose(tmp_path, manager, monkeypatch):
    setenv(monkeypatch, SLURM_JOB_ID='9', SLURM_JOB_NODELIST='rack[1-2]-n[01-02]')
    output = job_record(9, 'rack[1-2]-n[01-02]', [('rack[1-2]-n[01-02]', 'gpu:4(IDX:0-3)')])
    text = SOURCE + fake_scontrol(tmp_path, output) + (
        'group: allocation\nvars:\n  ansible_user: train\n'
        'compose:\n  ansible_host: inventory_hostname ~ \'-ib\'\n')
    inventory = manager(source(tmp_path, text))
    assert members(inventory, 'allocation') == ['rack1-n01', 'rack1-n02', 'rack2-n01', 'rack2-n02']
    assert 'trainops_nodes' not in inventory.groups
    assert own_vars(inventory, 'rack2-n01') == {'trainops_node_rank': 2, 'trainops_nproc_per_node': 4,
                                                'trainops_slurm_gpu_ids': [0, 1, 2, 3], 'ansible_host': 'rack2-n01-ib',
                                                'trainops_slurm_cpus': 1}
    assert inventory.groups['allocation'].get_vars()['ansible_user'] == 'train'


def test_nodelist_option_picks_part_of_the_job(tmp_path, manager, monkeypatch):
    # the option picks part of the allocation: the job's node count does not apply to it, its GPUs do
    setenv(monkeypatch, SLURM_JOB_ID='11', SLURM_JOB_NODELIST='gpu-[01-04]', SLURM_JOB_NUM_NODES='4',
           SLURM_TASKS_PER_NODE='8(x4)')
    output = job_record(11, 'gpu-[01-04]', [('gpu-[01-04]', 'gpu:h100:8(IDX:0-7)')])
    inventory = manager(source(tmp_path, SOURCE + 'nodelist: gpu-[03-04]\n' + fake_scontrol(tmp_path, output)))
    assert members(inventory, 'trainops_nodes') == ['gpu-03', 'gpu-04']
    assert own_vars(inventory, 'gpu-03') == {'trainops_master': True, 'trainops_node_rank': 0,
                                             'trainops_nproc_per_node': 8, 'trainops_slurm_gpu_ids': list(range(8)),
                                             'trainops_slurm_cpus': 1}


def test_outside_an_allocation_works_with_a_nodelist_and_gpus_per_node(tmp_path, manager):
    inventory = manager(source(tmp_path, SOURCE + 'nodelist: n[1-2]\ngpus_per_node: 1\n'))
    assert members(inventory, 'trainops_nodes') == ['n1', 'n2']
    assert ranks(inventory) == [1, 1] and gpu_ids(inventory) == [None, None]
    assert 'trainops_slurm_job_id' not in inventory.groups['trainops_nodes'].get_vars()


def test_a_heterogeneous_job_with_a_nodelist_reads_every_component(tmp_path, manager, monkeypatch):
    setenv(monkeypatch, SLURM_JOB_ID='30', SLURM_HET_SIZE='2', SLURM_JOB_NODELIST_HET_GROUP_0='n1',
           SLURM_JOB_NODELIST_HET_GROUP_1='n2')
    first = job_record(30, 'n1', [('n1', 'gpu:4(IDX:0-3)')]).replace('JobId=30 ', 'JobId=30 HetJobId=30 HetJobOffset=0 ')
    second = job_record(31, 'n2', [('n2', 'gpu:4(IDX:4-7)')]).replace('JobId=31 ', 'JobId=31 HetJobId=30 HetJobOffset=1 ')
    inventory = manager(source(tmp_path, SOURCE + 'nodelist: n[1-2]\n' + fake_scontrol(tmp_path, first + second)))
    assert ranks(inventory) == [4, 4] and gpu_ids(inventory) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def parse_error(plugin, path):
    with pytest.raises(AnsibleParserError) as err:
        plugin('trainops.multinode.slurm').parse(InventoryData(), DataLoader(), str(path))
    return str(err.value)


def test_not_inside_an_allocation(tmp_path, plugin):
    path = source(tmp_path)
    assert parse_error(plugin, path) == (
        '%s: not inside a Slurm allocation: neither SLURM_JOB_NODELIST nor SLURM_NODELIST is set, and the source '
        'sets no "nodelist"' % path)


HINT = 'set gpus_per_node: N in the source, or allocate the GPUs with --gpus-per-node=N (or --gres=gpu:N)'


@pytest.mark.parametrize('env, fragment', [
    ({'SLURM_JOB_NODELIST': 'gpu-[01-03]', 'SLURM_JOB_NUM_NODES': '4'},
     'SLURM_JOB_NODELIST=gpu-[01-03] expands to 3 nodes, but SLURM_JOB_NUM_NODES=4'),
    ({'SLURM_JOB_NODELIST': 'gpu-[01-02],gpu-01'}, 'names gpu-01 twice'),
    ({'SLURM_JOB_NODELIST': 'gpu-[02-01]'}, 'goes down'),
    ({'SLURM_JOB_NODELIST': 'gpu-[01-02]', 'SLURM_JOB_ID': '12a'}, 'SLURM_JOB_ID=12a is not a job id'),
    # no job to ask: the variables that describe tasks, CPUs or one node never become ranks
    ({'SLURM_JOB_NODELIST': 'gpu-[01-02]', 'SLURM_TASKS_PER_NODE': '2(x2)', 'SLURM_GPUS_ON_NODE': '4',
      'SLURM_GPUS_PER_NODE': 'h100:4'},
     'ranks per node unknown: there is no Slurm job to ask for its GPUs (SLURM_JOB_ID is not set); ' + HINT),
    ({'SLURM_HET_SIZE': '2', 'SLURM_JOB_NODELIST_HET_GROUP_0': 'a[1-2]', 'SLURM_JOB_NODELIST_HET_GROUP_1': 'b1'},
     'heterogeneous job with 2 components (SLURM_JOB_NODELIST_HET_GROUP_0=a[1-2], SLURM_JOB_NODELIST_HET_GROUP_1=b1): '
     'a launch needs one list of nodes with the same ranks on each; allocate one component'),
])
def test_inconsistent_allocations_are_errors(tmp_path, plugin, monkeypatch, env, fragment):
    setenv(monkeypatch, **env)
    assert fragment in parse_error(plugin, source(tmp_path))


@pytest.mark.parametrize('details, nodelist, fragment', [
    # salloc -N2 (lab, before GRES): SLURM_TASKS_PER_NODE=2(x2) gave 2 ranks per node
    ([('lab-node[01-02]', '')], 'lab-node[01-02]',
     'job 13 holds no GPUs on lab-node01, lab-node02 (scontrol: no gpu in the GRES of its nodes): ' + HINT
     + '; for training on CPUs set gpus_per_node: N to the ranks per node'),
    # salloc -N2 --gpus=6 (lab): 4 + 2
    ([('lab-node01', 'gpu:labgpu:4(IDX:0-3)'), ('lab-node02', 'gpu:labgpu:2(IDX:0-1)')], 'lab-node[01-02]',
     'job 13 holds different numbers of GPUs on its nodes (lab-node01: 4, lab-node02: 2), and a launch starts the '
     'same number of ranks on every node: allocate with --gpus-per-node=N (not --gpus=N), or set gpus_per_node: N in '
     'the source (at most 2)'),
    ([('lab-node01', 'gpu:1(IDX:0)'), ('lab-node02', '')], 'lab-node[01-02]', '(lab-node01: 1, lab-node02: 0)'),
    ([('lab-node01', 'gpu:1(IDX:0)')], 'lab-node01', 'lab-node02 is not a node of job 13 (its nodes: lab-node01)'),
])
def test_what_the_job_holds_must_give_the_ranks(tmp_path, plugin, monkeypatch, details, nodelist, fragment):
    setenv(monkeypatch, SLURM_JOB_ID='13', SLURM_JOB_NODELIST='lab-node[01-02]', SLURM_TASKS_PER_NODE='2(x2)')
    path = source(tmp_path, SOURCE + fake_scontrol(tmp_path, job_record(13, nodelist, details)))
    assert fragment in parse_error(plugin, path)


@pytest.mark.parametrize('output, rc, fragment', [
    ('slurm_load_jobs error: Invalid job id specified\n', 1,
     'exited with 1: slurm_load_jobs error: Invalid job id specified; ' + HINT),
    ('JobId=14 JobName=x\n   JobState=RUNNING\n   NodeList=n[1-2]\n', 0, 'no per-node detail'),
])
def test_scontrol_that_does_not_answer_is_a_parse_error(tmp_path, plugin, monkeypatch, output, rc, fragment):
    setenv(monkeypatch, SLURM_JOB_ID='14', SLURM_JOB_NODELIST='n[1-2]')
    message = parse_error(plugin, source(tmp_path, SOURCE + fake_scontrol(tmp_path, output, rc)))
    assert 'cannot read the GPUs of job 14: ' in message and fragment in message


def test_a_missing_scontrol_names_the_option(tmp_path, plugin, monkeypatch):
    setenv(monkeypatch, SLURM_JOB_ID='15', SLURM_JOB_NODELIST='n[1-2]')
    message = parse_error(plugin, source(tmp_path, SOURCE + 'scontrol: %s\n' % (tmp_path / 'nowhere')))
    assert 'cannot run `%s --details show job 15`' % (tmp_path / 'nowhere') in message
    assert "set scontrol: to the path of Slurm's scontrol" in message


def test_a_heterogeneous_job_is_refused_from_scontrol_too(tmp_path, plugin, monkeypatch):
    # a shell that lost the _HET_GROUP_ variables: scontrol's records still say so
    setenv(monkeypatch, SLURM_JOB_ID='30', SLURM_JOB_NODELIST='n1')
    first = job_record(30, 'n1', [('n1', 'gpu:4(IDX:0-3)')]).replace('JobId=30 ', 'JobId=30 HetJobId=30 HetJobOffset=0 ')
    second = job_record(31, 'n2', [('n2', 'gpu:4(IDX:0-3)')]).replace('JobId=31 ', 'JobId=31 HetJobId=30 HetJobOffset=1 ')
    message = parse_error(plugin, source(tmp_path, SOURCE + fake_scontrol(tmp_path, first + second)))
    assert 'heterogeneous job 30 with 2 components (n1, n2)' in message


def test_a_slow_scontrol_times_out(tmp_path, plugin, monkeypatch):
    setenv(monkeypatch, SLURM_JOB_ID='16', SLURM_JOB_NODELIST='n[1-2]')
    script = tmp_path / 'slow-scontrol'
    script.write_text('#!/bin/sh\nexec sleep 30\n')
    script.chmod(0o755)
    message = parse_error(plugin, source(tmp_path, SOURCE + 'scontrol: %s\nscontrol_timeout: 1\n' % script))
    assert 'did not answer within 1 s (scontrol_timeout)' in message


@pytest.mark.parametrize('name, wanted', [
    ('allocation.slurm.yml', True), ('x.slurm.yaml', True), ('slurm.yml', False), ('x.trainops_nodes.yml', False),
    ('node_ip_list.txt', False),
])
def test_verify_file(tmp_path, plugin, name, wanted):
    assert plugin('trainops.multinode.slurm').verify_file(str(source(tmp_path, SOURCE, name))) is wanted


def test_allocation_reports_its_sources():
    def scontrol(job_id):
        assert job_id == '3'
        return job_record(3, 'c[1-2]', [('c[1-2]', 'gpu:2(IDX:2-3)')], tres='gres:gpu:2')
    hosts, nproc, ids, origin = slurm_plugin.allocation(
        {'SLURM_NODELIST': 'c[1-2]', 'SLURM_NNODES': '2', 'SLURM_JOB_ID': '3'}, scontrol=scontrol)
    assert (hosts, nproc, ids) == (['c1', 'c2'], [2, 2], {'c1': [2, 3], 'c2': [2, 3]})
    assert origin == {'nodelist': 'SLURM_NODELIST', 'nproc': 'job 3 GRES (scontrol)', 'expression': 'c[1-2]',
                      'job_id': '3', 'gpus_implicit': False,
                      'held': {'c1': {'cpus': 1, 'mem_mb': None}, 'c2': {'cpus': 1, 'mem_mb': None}}}


def test_allocation_nodes_rejects_names_that_are_not_hosts():
    with pytest.raises(HostlistError) as err:
        slurm_plugin.allocation_nodes({}, nodelist='{{lookup("pipe","id")}}')
    assert 'not a host name' in str(err.value)


# The environment of `salloc -N 2` on the lab's real Slurm 22.05 with lab-node01 and lab-node03 busy
# (hack/lab.py up --slurm; `env | grep ^SLURM_` inside the allocation, unchanged), captured before the lab had GRES.
REAL_SALLOC_ENV = {
    'SLURM_CLUSTER_NAME': 'trainops-lab', 'SLURM_JOBID': '2', 'SLURM_JOB_ACCOUNT': 'root',
    'SLURM_JOB_CPUS_PER_NODE': '2(x2)', 'SLURM_JOB_ID': '2', 'SLURM_JOB_NAME': 'interactive',
    'SLURM_JOB_NODELIST': 'lab-node[02,04]', 'SLURM_JOB_NUM_NODES': '2', 'SLURM_JOB_PARTITION': 'lab',
    'SLURM_JOB_QOS': 'normal', 'SLURM_NNODES': '2', 'SLURM_NODELIST': 'lab-node[02,04]',
    'SLURM_NODE_ALIASES': '(null)', 'SLURM_SUBMIT_DIR': '/work/wtA', 'SLURM_SUBMIT_HOST': 'vm',
    'SLURM_TASKS_PER_NODE': '2(x2)',
}
# What scontrol says of such a job now that the lab's nodes have GRES (salloc -N2 --gres=gpu:2; the lines of the
# lab's job 3, on these nodes)
REAL_JOB2 = job_record(2, 'lab-node[02,04]', [('lab-node[02,04]', 'gpu:labgpu:2(IDX:0-1)')])

# The shape of the source `hack/lab.py up --slurm` writes: addresses from maps, by node name.
LAB_SOURCE = '''plugin: trainops.multinode.slurm
vars:
  trainops_lab_ssh_addresses: {lab-node01: 10.77.0.11, lab-node02: 10.77.0.12, lab-node03: 10.77.0.13, lab-node04: 10.77.0.14}
  trainops_lab_addresses: {lab-node01: 10.77.0.11, lab-node02: 10.77.0.12, lab-node03: 10.77.0.13, lab-node04: 10.77.0.14}
compose:
  ansible_host: trainops_lab_ssh_addresses[inventory_hostname]
  trainops_master_addr: trainops_lab_addresses[inventory_hostname]
strict: true
'''


def test_a_real_non_contiguous_allocation_in_allocation_order(tmp_path, manager, monkeypatch):
    setenv(monkeypatch, **REAL_SALLOC_ENV)
    inventory = manager(source(tmp_path, LAB_SOURCE + fake_scontrol(tmp_path, REAL_JOB2)))
    assert members(inventory, 'trainops_nodes') == ['lab-node02', 'lab-node04']
    first, second = own_vars(inventory, 'lab-node02'), own_vars(inventory, 'lab-node04')
    assert (first['trainops_node_rank'], first['trainops_master'], first['trainops_nproc_per_node']) == (0, True, 2)
    assert (second['trainops_node_rank'], second['trainops_nproc_per_node']) == (1, 2)
    assert first['trainops_slurm_gpu_ids'] == second['trainops_slurm_gpu_ids'] == [0, 1]
    assert 'trainops_master' not in second
    # the master is the allocation's first node, not lab-node01
    assert (first['ansible_host'], first['trainops_master_addr']) == ('10.77.0.12', '10.77.0.12')
    assert second['ansible_host'] == '10.77.0.14'
    assert inventory.groups['trainops_nodes'].get_vars()['trainops_slurm_job_id'] == '2'


def test_a_real_allocation_outside_the_lab_map_is_an_error(tmp_path, plugin, monkeypatch):
    # strict compose: a node the source has no address for fails parsing instead of guessing one
    environ = dict(REAL_SALLOC_ENV)
    environ.update({'SLURM_JOB_NODELIST': 'lab-node[02,05]', 'SLURM_NODELIST': 'lab-node[02,05]'})
    setenv(monkeypatch, **environ)
    output = job_record(2, 'lab-node[02,05]', [('lab-node[02,05]', 'gpu:labgpu:2(IDX:0-1)')])
    with pytest.raises(AnsibleError) as err:
        plugin('trainops.multinode.slurm').parse(InventoryData(), DataLoader(),
                                                 str(source(tmp_path, LAB_SOURCE + fake_scontrol(tmp_path, output))))
    assert 'lab-node05' in str(err.value), err.value


def test_an_ending_job_still_lists_its_nodes_for_stop_but_no_ranks(tmp_path, manager, monkeypatch):
    # a cancelled batch job whose script runs stop.yml (lab, scontrol during KillWait): COMPLETING, GRES= empty
    setenv(monkeypatch, SLURM_JOB_ID='16', SLURM_JOB_NODELIST='lab-node[01-02]')
    output = job_record(16, 'lab-node[01-02]', [('lab-node[01-02]', '')], state='COMPLETING')
    inventory = manager(source(tmp_path, SOURCE + fake_scontrol(tmp_path, output)))
    assert members(inventory, 'trainops_nodes') == ['lab-node01', 'lab-node02']
    assert ranks(inventory) == [None, None] and gpu_ids(inventory) == [None, None]
    problem = inventory.groups['trainops_nodes'].get_vars()['trainops_slurm_problem']
    assert problem.startswith('cannot read the GPUs of job 16: job 16 is COMPLETING, not RUNNING') and HINT in problem


def test_fewer_cpus_than_ranks_is_a_warning_naming_each_node_and_implicit_gpus_are_flagged():
    # salloc -N2 --gres=gpu:2 --cpus-per-task=1 (CPU_IDs=0 on each node), then the lab's salloc --exclusive record
    warnings = []
    hosts, nproc, _ids, origin = slurm_plugin.allocation(
        {'SLURM_NODELIST': 'c[1-2]', 'SLURM_JOB_ID': '5'}, warn=warnings.append,
        scontrol=lambda job_id: job_record(5, 'c[1-2]', [('c[1-2]', 'gpu:2(IDX:0-1)')], tres='gres:gpu:2'))
    assert (hosts, nproc, origin['gpus_implicit']) == (['c1', 'c2'], [2, 2], False)
    assert warnings == ['job 5 holds 1 CPU for 2 ranks on c1, 1 CPU for 2 ranks on c2: the ranks of a node and their '
                        'data loaders share those CPUs; allocate a CPU per rank or more (--cpus-per-gpu=N, or -c N with '
                        '--ntasks-per-node=<ranks>, or --exclusive). A launch refuses it unless '
                        'trainops_allow_few_cpus=true']
    with open(os.path.join(FIXTURES, 'job3-exclusive-no-gres.scontrol.txt')) as handle:
        exclusive = handle.read()
    warnings = []
    _hosts, nproc, _ids, origin = slurm_plugin.allocation(
        {'SLURM_NODELIST': 'lab-node03', 'SLURM_JOB_ID': '3'}, warn=warnings.append, scontrol=lambda job_id: exclusive,
        nodelist='lab-node03')
    assert (nproc, origin['gpus_implicit'], origin['held']) == ([4], True, {'lab-node03': {'cpus': 2, 'mem_mb': None}})
    assert warnings == ['job 3 holds 2 CPUs for 4 ranks on lab-node03: the ranks of a node and their data loaders share '
                        'those CPUs; allocate a CPU per rank or more (--cpus-per-gpu=N, or -c N with '
                        '--ntasks-per-node=<ranks>, or --exclusive). A launch refuses it unless '
                        'trainops_allow_few_cpus=true']
