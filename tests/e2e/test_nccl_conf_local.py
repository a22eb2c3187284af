# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""End-to-end: playbooks/nccl_env.yml on the embedded local default writes each node's env file (mode 0600) and a
managed block in the NCCL conf file, keeping the site's own lines (cloud images ship NCCL_TOPO_FILE there).

The conf file is redirected (trainops_nccl_conf_path) into a temporary directory, so no root is needed; the block
is the same as the one /etc/nccl.conf gets.
"""

from __future__ import annotations

import os
import stat

import pytest

from playbook_runner import run_playbook

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SITE = """# written by the cloud image
NCCL_TOPO_FILE=/opt/microsoft/ndv5-topo.xml
NCCL_IB_PCI_RELAXED_ORDERING=1
"""


def settings(text):
    """What NCCL's parser keeps (src/misc/param.cc: every line with '=' outside comments, split at the first '=')."""
    return dict(line.split('=', 1) for line in text.splitlines() if line and not line.startswith('#') and '=' in line)


def test_nccl_conf_keeps_the_sites_lines(tmp_path):
    nodes = tmp_path / 'nodes'
    conf = {}
    for node in ('node0', 'node1'):
        conf[node] = tmp_path / ('%s-nccl.conf' % node)
        conf[node].write_text(SITE)
    extravars = {'trainops_node_root': str(nodes) + '/{{ inventory_hostname }}', 'trainops_nccl_conf': True,
                 'trainops_nccl_conf_path': str(tmp_path) + '/{{ inventory_hostname }}-nccl.conf',
                 'trainops_env': {'NCCL_IB_PCI_RELAXED_ORDERING': None, 'NCCL_NCHANNELS_PER_NET_PEER': 4}}
    proc = run_playbook('playbooks/nccl_env.yml', str(tmp_path), extravars, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    for node in ('node0', 'node1'):
        text = conf[node].read_text()
        lines = text.splitlines()
        # the site's lines are still there, in their place, and the block follows them
        assert lines[:3] == SITE.splitlines()
        begin = lines.index('# BEGIN trainops.multinode NCCL/RCCL settings')
        end = lines.index('# END trainops.multinode NCCL/RCCL settings')
        assert 3 <= begin < end
        block = '\n'.join(lines[begin + 1:end])
        assert settings(block) == {'NCCL_SOCKET_IFNAME': '=lo', 'NCCL_IB_DISABLE': '1', 'NCCL_DEBUG': 'WARN',
                                   'NCCL_NCHANNELS_PER_NET_PEER': '4'}
        assert settings(text)['NCCL_TOPO_FILE'] == '/opt/microsoft/ndv5-topo.xml'
        # comment lines carry no '=' (older RCCL parses any line with one)
        assert all('=' not in line for line in lines if line.startswith('#'))
        env_file = nodes / node / 'nccl.env'
        assert stat.S_IMODE(os.stat(env_file).st_mode) == 0o600
        assert 'GLOO_SOCKET_IFNAME=lo' in env_file.read_text().splitlines()

    # a second run changes nothing
    before = dict((node, path.read_text()) for node, path in conf.items())
    again = run_playbook('playbooks/nccl_env.yml', str(tmp_path), extravars, timeout=300)
    assert again.returncode == 0, again.stdout[-3000:]
    assert dict((node, path.read_text()) for node, path in conf.items()) == before
    stats = again.summary.get('stats') or {}
    assert sorted(stats) == ['node0', 'node1'], again.summary
    for host in stats:
        assert stats[host].get('changed', 0) == 0, (host, stats[host])
