# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The inventory plugins as users run them: ``ansible-inventory`` / ``ansible-playbook`` as real processes.

Every command runs outside the checkout with ``ANSIBLE_CONFIG`` pointing at the repository's ``ansible.cfg``,
so its ``[inventory] enable_plugins`` (node_list before ini) is what is tested, on temporary node lists, YAML
sources and Slurm allocation environments. No node is contacted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from playbook_runner import free_port

pytestmark = [pytest.mark.real, pytest.mark.slow]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
CONFIG = os.path.join(REPO, 'ansible.cfg')

NODE_LIST = """\
# written by setup_multi_node.sh -- master first
10.0.0.11 slots=8   # master
10.0.0.12 slots=8

gpu-03.cluster.local slots=4
"""


def env(**extra):
    environ = {key: value for key, value in os.environ.items()
               if not key.startswith(('SLURM_', 'ANSIBLE_'))}
    environ.update(ANSIBLE_CONFIG=CONFIG, ANSIBLE_NOCOLOR='1', ANSIBLE_FORCE_COLOR='0')
    environ.update(extra)
    return environ


def run(tool, *args, cwd, extra_env=None, timeout=120):
    proc = subprocess.run([os.path.join(BIN, tool)] + [str(arg) for arg in args], cwd=str(cwd), env=env(**(extra_env or {})),
                          capture_output=True, text=True, timeout=timeout, check=False)
    return proc


def plain(value):
    """ansible-inventory --list marks values not trusted as templates {"__ansible_unsafe": ...}: unwrap them."""
    if isinstance(value, dict):
        if set(value) == {'__ansible_unsafe'}:
            return value['__ansible_unsafe']
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def inventory_list(source, cwd, extra_env=None):
    proc = run('ansible-inventory', '-i', source, '--list', cwd=cwd, extra_env=extra_env)
    assert proc.returncode == 0, proc.stderr
    assert 'WARNING' not in proc.stderr, proc.stderr
    return plain(json.loads(proc.stdout)), proc


@pytest.fixture
def node_list(tmp_path):
    path = tmp_path / 'cluster' / 'node_ip_list.txt'
    path.parent.mkdir()
    path.write_text(NODE_LIST)
    return path


def test_graph_of_a_node_ip_list(node_list, tmp_path):
    proc = run('ansible-inventory', '-i', node_list, '--graph', cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert 'WARNING' not in proc.stderr, proc.stderr
    lines = [line.strip(' |-') for line in proc.stdout.splitlines()]
    at = lines.index('@trainops_nodes:')
    assert lines[at + 1:at + 4] == ['10.0.0.11', '10.0.0.12', 'gpu-03.cluster.local']
    ungrouped = lines.index('@ungrouped:')
    assert lines[ungrouped + 1] != '10.0.0.11'


def test_list_of_a_node_ip_list(node_list, tmp_path):
    data, _proc = inventory_list(node_list, tmp_path)
    assert data['trainops_nodes']['hosts'] == ['10.0.0.11', '10.0.0.12', 'gpu-03.cluster.local']
    hostvars = data['_meta']['hostvars']
    assert hostvars['10.0.0.11'] == {'ansible_host': '10.0.0.11', 'trainops_master': True, 'trainops_node_rank': 0,
                                     'trainops_nproc_per_node': 8}
    assert hostvars['gpu-03.cluster.local'] == {'ansible_host': 'gpu-03.cluster.local', 'trainops_node_rank': 2,
                                                'trainops_nproc_per_node': 4}


def test_a_broken_node_list_names_the_line(tmp_path):
    path = tmp_path / 'node_ip_list.txt'
    path.write_text('10.0.0.11\n10.0.0.12\n10.0.0.11   # again\n')
    proc = run('ansible-inventory', '-i', path, '--list', cwd=tmp_path)
    assert 'line 3: 10.0.0.11 is listed twice (first on line 1)' in proc.stderr
    assert 'trainops_nodes' not in json.loads(proc.stdout)


def test_yaml_source_with_group_vars_and_constructed(node_list, tmp_path):
    source = node_list.parent / 'cluster.trainops_nodes.yml'
    source.write_text(
        'plugin: trainops.multinode.node_list\n'
        'path: node_ip_list.txt\n'
        'vars:\n'
        '  ansible_user: train\n'
        '  trainops_python: /opt/venv/bin/python\n'
        '  trainops_socket_ifname: ens5\n'
        'keyed_groups:\n'
        '  - key: trainops_nproc_per_node | string\n'
        '    prefix: gpus\n')
    data, _proc = inventory_list(source, tmp_path)
    assert data['trainops_nodes']['hosts'] == ['10.0.0.11', '10.0.0.12', 'gpu-03.cluster.local']
    assert data['gpus_8']['hosts'] == ['10.0.0.11', '10.0.0.12']
    assert data['gpus_4']['hosts'] == ['gpu-03.cluster.local']
    node = data['_meta']['hostvars']['10.0.0.12']
    assert (node['ansible_user'], node['trainops_python'], node['trainops_socket_ifname']) == (
        'train', '/opt/venv/bin/python', 'ens5')
    assert (node['ansible_host'], node['trainops_node_rank']) == ('10.0.0.12', 1)


SCONTROL_JOB = os.path.join(REPO, 'tests', 'unit', 'fixtures', 'slurm', 'job1-gres-gpu4.scontrol.txt')
"""``scontrol --details show job 1`` of ``salloc -N2 --gres=gpu:4`` on the lab's real Slurm 22.05."""


def fake_scontrol(tmp_path, job_id, nodelist, gres):
    """A directory with an ``scontrol`` that prints the lab's job 1 record as job ``job_id`` on ``nodelist``, every
    node holding ``gres``; put it first in PATH. Its arguments go to ``scontrol.argv``."""
    with open(SCONTROL_JOB) as handle:
        text = handle.read()
    text = text.replace('JobId=1 ', 'JobId=%s ' % job_id).replace('NodeList=lab-node[01-02]', 'NodeList=%s' % nodelist)
    text = text.replace('   TresPerNode=gres:gpu:4\n', '')   # what the job asks per node is what it holds
    # the lab's job held one CPU a node; a GPU job as clusters allocate it holds CPUs for its ranks (CPU_IDs=0-15)
    text = text.replace('Nodes=lab-node[01-02] CPU_IDs=0 Mem=0 GRES=gpu:labgpu:4(IDX:0-3)',
                        'Nodes=%s CPU_IDs=0-15 Mem=0 GRES=%s' % (nodelist, gres))
    bindir = tmp_path / 'slurm-bin'
    bindir.mkdir(exist_ok=True)
    (bindir / 'scontrol.txt').write_text(text)
    script = bindir / 'scontrol'
    script.write_text('#!/bin/sh\necho "$*" >> %s\ncat %s\n' % (bindir / 'scontrol.argv', bindir / 'scontrol.txt'))
    script.chmod(0o755)
    return {'PATH': '%s:%s' % (bindir, os.environ.get('PATH', '/usr/bin:/bin'))}


def test_slurm_allocation_from_the_environment(tmp_path):
    source = tmp_path / 'allocation.slurm.yml'
    source.write_text('plugin: trainops.multinode.slurm\nvars:\n  trainops_gpu_vendor: nvidia\n')
    extra = fake_scontrol(tmp_path, 777, 'gpu-[01-02,07],cpu9', 'gpu:h100:4(IDX:4-7)')
    extra.update({'SLURM_JOB_NODELIST': 'gpu-[01-02,07],cpu9', 'SLURM_JOB_NUM_NODES': '4', 'SLURM_JOB_ID': '777',
                  'SLURM_TASKS_PER_NODE': '1(x4)'})
    data, _proc = inventory_list(source, tmp_path, extra_env=extra)
    assert (tmp_path / 'slurm-bin' / 'scontrol.argv').read_text() == '--details show job 777\n'
    assert data['trainops_nodes']['hosts'] == ['gpu-01', 'gpu-02', 'gpu-07', 'cpu9']
    hostvars = data['_meta']['hostvars']
    assert [hostvars[h]['trainops_nproc_per_node'] for h in data['trainops_nodes']['hosts']] == [4, 4, 4, 4]
    assert [hostvars[h]['trainops_slurm_gpu_ids'] for h in data['trainops_nodes']['hosts']] == [[4, 5, 6, 7]] * 4
    assert hostvars['gpu-01']['trainops_master'] is True
    assert 'trainops_master' not in hostvars['gpu-02']
    assert hostvars['cpu9']['trainops_slurm_job_id'] == '777'
    assert hostvars['cpu9']['trainops_gpu_vendor'] == 'nvidia'


def test_slurm_tasks_per_node_never_gives_ranks(tmp_path):
    source = tmp_path / 'allocation.slurm.yml'
    source.write_text('plugin: trainops.multinode.slurm\n')
    extra = fake_scontrol(tmp_path, 778, 'rack[1-2]-n[01-02]', '')
    extra.update({'SLURM_JOB_NODELIST': 'rack[1-2]-n[01-02]', 'SLURM_JOB_ID': '778', 'SLURM_TASKS_PER_NODE': '128(x4)'})
    proc = run('ansible-inventory', '-i', source, '--list', cwd=tmp_path, extra_env=extra)
    assert proc.returncode != 0
    assert 'job 778 holds no GPUs' in proc.stderr and 'gpus_per_node: N' in proc.stderr
    assert '--gpus-per-node=N' in proc.stderr


def test_slurm_outside_an_allocation_fails_with_a_clear_message(tmp_path):
    source = tmp_path / 'allocation.slurm.yml'
    source.write_text('plugin: trainops.multinode.slurm\n')
    # ansible.cfg sets unparsed_is_failed: an inventory no plugin can read stops the command
    proc = run('ansible-inventory', '-i', source, '--list', cwd=tmp_path)
    assert proc.returncode != 0
    assert 'not inside a Slurm allocation: neither SLURM_JOB_NODELIST nor SLURM_NODELIST is set' in proc.stderr
    # without that switch Ansible only warns and goes on with an empty inventory
    lenient = run('ansible-inventory', '-i', source, '--list', cwd=tmp_path,
                  extra_env={'ANSIBLE_INVENTORY_UNPARSED_FAILED': 'false'})
    assert lenient.returncode == 0 and 'trainops_nodes' not in json.loads(lenient.stdout)
    assert 'not inside a Slurm allocation' in lenient.stderr


def test_the_default_inventory_still_works(tmp_path):
    proc = run('ansible-inventory', '--list', cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert 'WARNING' not in proc.stderr, proc.stderr
    assert json.loads(proc.stdout)['trainops_nodes']['hosts'] == ['node0', 'node1']


def test_example_inventories(tmp_path):
    examples = os.path.join(REPO, 'inventories', 'examples')
    data, _proc = inventory_list(os.path.join(examples, 'node_ip_list.txt'), tmp_path)
    assert data['trainops_nodes']['hosts'] == ['10.0.0.11', '10.0.0.12', '10.0.0.13', '10.0.0.14']
    data, _proc = inventory_list(os.path.join(examples, 'cluster.trainops_nodes.yml'), tmp_path)
    assert data['_meta']['hostvars']['10.0.0.14']['ansible_user'] == 'train'
    assert data['gpus_8']['hosts'] == ['10.0.0.11', '10.0.0.12', '10.0.0.13', '10.0.0.14']
    extra = fake_scontrol(tmp_path, 12, 'node[6-7]', 'gpu:1(IDX:0)')
    extra.update({'SLURM_JOB_NODELIST': 'node[6-7]', 'SLURM_JOB_ID': '12'})
    data, _proc = inventory_list(os.path.join(examples, 'allocation.slurm.yml'), tmp_path, extra_env=extra)
    assert data['trainops_nodes']['hosts'] == ['node6', 'node7']
    assert data['_meta']['hostvars']['node7']['trainops_nproc_per_node'] == 1


def test_hostfile_playbook_from_a_node_list(node_list, tmp_path):
    """The nodes are never contacted: the hostfile is rendered and written on the controller."""
    dest = tmp_path / 'out' / 'hostfile'
    proc = run('ansible-playbook', '-i', node_list, os.path.join(REPO, 'playbooks', 'hostfile.yml'),
               '-e', 'hostfile_dest=%s' % dest, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert dest.read_text() == '10.0.0.11 slots=8\n10.0.0.12 slots=8\ngpu-03.cluster.local slots=4\n'

    mpich = tmp_path / 'out' / 'hosts.mpich'
    proc = run('ansible-playbook', '-i', node_list, os.path.join(REPO, 'playbooks', 'hostfile.yml'),
               '-e', 'hostfile_dest=%s' % mpich, '-e', 'hostfile_format=mpich', '-e', 'nproc=2', cwd=tmp_path,
               timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert mpich.read_text() == '10.0.0.11:2\n10.0.0.12:2\ngpu-03.cluster.local:2\n'


def test_hostfile_playbook_master_first_and_copied_to_every_node(tmp_path):
    """On the embedded local inventory (two logical nodes on this machine), the master marked node1."""
    inventory = tmp_path / 'hosts.yml'
    inventory.write_text(
        'trainops_nodes:\n'
        '  hosts:\n'
        '    node0:\n'
        '    node1: {trainops_master: true, trainops_nproc_per_node: 4}\n'
        '  vars:\n'
        '    ansible_connection: ansible.builtin.local\n'
        '    ansible_python_interpreter: "{{ ansible_playbook_python }}"\n'
        '    trainops_node_root: "%s/nodes/{{ inventory_hostname }}"\n' % tmp_path)
    dest = tmp_path / 'hostfile'
    proc = run('ansible-playbook', '-i', inventory, os.path.join(REPO, 'playbooks', 'hostfile.yml'),
               '-e', 'hostfile_dest=%s' % dest, '-e', 'hostfile_copy=true', '-e', 'hostfile_slots=2', cwd=tmp_path,
               timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert dest.read_text() == 'node1 slots=4\nnode0 slots=2\n'
    for node in ('node0', 'node1'):
        assert (tmp_path / 'nodes' / node / 'hostfile').read_text() == 'node1 slots=4\nnode0 slots=2\n'


def test_launch_from_a_node_list(tmp_path):
    """An existing node_ip_list.txt moved over: a real 2-node x 2-rank launch on loopback addresses of this machine.

    127.0.0.1 (master, first line) and 127.0.0.2 are both this machine; each node gets its own directories and
    local connection from the YAML source's group variables, ranks per node from ``slots=2``.
    """
    (tmp_path / 'node_ip_list.txt').write_text('127.0.0.1 slots=2   # master\n127.0.0.2 slots=2\n')
    (tmp_path / 'run.trainops_nodes.yml').write_text(
        'plugin: trainops.multinode.node_list\n'
        'path: node_ip_list.txt\n'
        'vars:\n'
        '  ansible_connection: ansible.builtin.local\n'
        '  ansible_python_interpreter: "{{ ansible_playbook_python }}"\n'
        '  trainops_python: "{{ ansible_playbook_python }}"\n'
        '  trainops_node_root: "%s/nodes/{{ inventory_hostname }}"\n'
        '  trainops_gpu_vendor: none\n' % tmp_path)
    experiments = tmp_path / 'experiments'
    proc = run('ansible-playbook', '-i', tmp_path / 'run.trainops_nodes.yml', os.path.join(REPO, 'playbooks', 'launch.yml'),
               '-e', 'channels=42', '-e', 'trainops_experiments_dir=%s' % experiments,
               '-e', 'master_port=%d' % free_port(), cwd=tmp_path, timeout=480)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    (experiment,) = list(experiments.iterdir())
    manifest = json.loads((experiment / 'manifest.json').read_text())
    assert manifest['world_size'] == 4
    nodes = manifest['nodes']
    assert [(n['host'], n['node_rank'], n['ranks']) for n in nodes] == [('127.0.0.1', 0, [0, 1]), ('127.0.0.2', 1, [2, 3])]
    for node in nodes:
        argv = node['argv']
        assert argv[argv.index('--master-addr') + 1] == '127.0.0.1'
        assert argv[argv.index('--nproc-per-node') + 1] == '2'


def test_launch_from_inside_a_slurm_allocation(tmp_path):
    """Inside an allocation (the variables srun/salloc set): a real 2-node x 2-rank launch, the nodes of
    SLURM_JOB_NODELIST in order, ranks per node from the 2 GPUs scontrol says the job holds on each node (GPUs 2-3:
    the ranks get them as CUDA_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES, vendor none); both nodes are this machine."""
    (tmp_path / 'allocation.slurm.yml').write_text(
        'plugin: trainops.multinode.slurm\n'
        'vars:\n'
        '  ansible_connection: ansible.builtin.local\n'
        '  ansible_python_interpreter: "{{ ansible_playbook_python }}"\n'
        '  trainops_python: "{{ ansible_playbook_python }}"\n'
        '  trainops_master_addr: 127.0.0.1\n'
        '  trainops_node_root: "%s/nodes/{{ inventory_hostname }}"\n'
        '  trainops_gpu_vendor: none\n' % tmp_path)
    experiments = tmp_path / 'experiments'
    slurm = fake_scontrol(tmp_path, 4242, 'trn-[07-08]', 'gpu:labgpu:2(IDX:2-3)')
    slurm.update({'SLURM_JOB_ID': '4242', 'SLURM_JOB_NODELIST': 'trn-[07-08]', 'SLURM_JOB_NUM_NODES': '2',
                  'SLURM_TASKS_PER_NODE': '1(x2)'})
    proc = run('ansible-playbook', '-i', tmp_path / 'allocation.slurm.yml', os.path.join(REPO, 'playbooks', 'launch.yml'),
               '-e', 'config=config/tiny.yaml', '-e', 'trainops_experiments_dir=%s' % experiments,
               '-e', 'master_port=%d' % free_port(), cwd=tmp_path, timeout=480, extra_env=slurm)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    (experiment,) = list(experiments.iterdir())
    manifest = json.loads((experiment / 'manifest.json').read_text())
    assert manifest['world_size'] == 4 and manifest['outcome'] == 'succeeded'
    assert [(n['host'], n['node_rank'], n['ranks']) for n in manifest['nodes']] == [('trn-07', 0, [0, 1]), ('trn-08', 1, [2, 3])]
    for node in manifest['nodes']:
        assert (node['env']['CUDA_VISIBLE_DEVICES'], node['env']['ROCR_VISIBLE_DEVICES']) == ('2,3', '2,3'), node['env']
