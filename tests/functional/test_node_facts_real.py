# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""node_facts on this machine for real: its own /proc and /sys, real commands, and once through ``ansible``.

The expectations are read from the machine independently (which GPU driver files and RDMA devices exist), so the
tests hold on a CPU-only box (vendor none, transport none) as on a GPU node.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _node_facts as nf

pytestmark = [pytest.mark.real]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(argv):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          env=dict(os.environ, LC_ALL='C'), timeout=120, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def _listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return []


def _expected_vendor():
    if _listdir('/proc/driver/nvidia/gpus'):
        return 'nvidia'
    nodes = '/sys/class/kfd/kfd/topology/nodes'
    gpu_nodes = []
    for node in _listdir(nodes):
        try:
            with open(os.path.join(nodes, node, 'gpu_id')) as handle:
                gpu_nodes.append(handle.read().strip() not in ('', '0'))
        except OSError:
            continue
    if any(gpu_nodes) and os.path.exists('/dev/kfd'):
        return 'amd'
    return None if shutil.which('nvidia-smi') else 'none'  # nvidia-smi alone may still find GPUs


def _natural(name):
    return [int(t) if t.isdigit() else t for t in re.split(r'(\d+)', name)]


def _check(facts):
    gpu, rdma = facts['gpu'], facts['rdma']
    expected = _expected_vendor()
    if expected is not None:
        assert gpu['vendor'] == expected
    if gpu['vendor'] == 'none':
        assert gpu == dict(vendor='none', count=0, models=[], pci_ids=[], driver_version=None,
                           interconnect=dict(type='none', source=None), sources=[])
    else:
        assert gpu['count'] >= 1 and len(gpu['models']) == gpu['count']
    names = sorted(_listdir('/sys/class/infiniband'), key=_natural)
    assert [d['name'] for d in rdma['devices']] == names
    active = [d['name'] for d in rdma['devices'] for p in d['ports'] if p['state'] == 'ACTIVE']
    if not active:
        assert rdma['transport'] == 'none' and rdma['active_ports'] == []
    if not names:
        assert rdma['gpudirect']['available'] is False
    assert facts['network']['ifname'] == 'lo' and facts['network']['address'] == '127.0.0.1'


def test_node_facts_on_this_machine():
    warnings = []
    facts = nf.node_facts(nf.Runner(_run, shutil.which), '127.0.0.1', warnings=warnings)
    _check(facts)
    json.dumps(facts)  # plain data, as Ansible needs it


@pytest.mark.slow
def test_node_facts_module_through_ansible(tmp_path):
    ansible = os.path.join(os.path.dirname(sys.executable), 'ansible')
    if not os.path.exists(ansible):
        ansible = shutil.which('ansible')
    if not ansible:
        pytest.skip('ansible is not installed')
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1')
    tree = str(tmp_path / 'tree')
    proc = subprocess.run([ansible, 'localhost', '-m', 'trainops.multinode.node_facts', '-a', 'master_addr=127.0.0.1',
                           '--tree', tree], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(os.path.join(tree, 'localhost')) as handle:
        result = json.load(handle)
    assert not result.get('failed') and result['changed'] is False
    _check(result['ansible_facts']['trainops_node'])
