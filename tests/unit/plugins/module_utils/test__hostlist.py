# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests of the host list parsers: node list files and Slurm hostlists/counts as real allocations write them.

The expansion is also compared with ``scontrol show hostnames`` when Slurm's client is installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _hostlist as hl


# ---- Slurm hostlist expressions ----------------------------------------------------------------

EXPANSIONS = [
    # the brief's examples
    ('gpu-[01-04,07],cpu9', ['gpu-01', 'gpu-02', 'gpu-03', 'gpu-04', 'gpu-07', 'cpu9']),
    ('node[001-003]-ib', ['node001-ib', 'node002-ib', 'node003-ib']),
    ('rack[1-2]-n[01-02]', ['rack1-n01', 'rack1-n02', 'rack2-n01', 'rack2-n02']),
    # seeds/field notes: the DDP example's allocation and an `env | grep SLURM` dump
    ('node[6-7]', ['node6', 'node7']),
    ('gnode[10,20,25,37]', ['gnode10', 'gnode20', 'gnode25', 'gnode37']),
    # Cray/HPE node ids, 5-digit padding
    ('nid[00008-00011]', ['nid00008', 'nid00009', 'nid00010', 'nid00011']),
    # width is the lower bound's: no padding grows, padding stays
    ('compute-[8-10]', ['compute-8', 'compute-9', 'compute-10']),
    ('compute-[08-10]', ['compute-08', 'compute-09', 'compute-10']),
    ('x[01-3]', ['x01', 'x02', 'x03']),
    # several brackets: the leftmost varies slowest
    ('c[1-2]-[1-2]', ['c1-1', 'c1-2', 'c2-1', 'c2-2']),
    ('r[1-2]n[3,5]-ib0', ['r1n3-ib0', 'r1n5-ib0', 'r2n3-ib0', 'r2n5-ib0']),
    ('gpu[1-2].cluster.local', ['gpu1.cluster.local', 'gpu2.cluster.local']),
    # order and duplicates are kept, like scontrol; separators: comma, space, tab, newline
    ('b,a,b', ['b', 'a', 'b']),
    ('p[1-2],p1', ['p1', 'p2', 'p1']),
    ('n1 n2\tn3\nn4', ['n1', 'n2', 'n3', 'n4']),
    ('x[1-2],,y', ['x1', 'x2', 'y']),
    ('moirai-h200', ['moirai-h200']),
    ('a[1,1]', ['a1', 'a1']),
]


@pytest.mark.parametrize('expression, hosts', EXPANSIONS)
def test_expand_hostlist_like_scontrol(expression, hosts):
    assert hl.expand_hostlist(expression) == hosts


def test_large_allocation_keeps_padding_and_count():
    hosts = hl.expand_hostlist('gpu-[0001-1024],login[1-2]')
    assert len(hosts) == 1026
    assert hosts[0] == 'gpu-0001' and hosts[999] == 'gpu-1000' and hosts[1023] == 'gpu-1024'
    assert hosts[-2:] == ['login1', 'login2']


@pytest.mark.parametrize('expression, fragment', [
    ('a[]', "invalid range ''"),
    ('a[3-1]', 'goes down'),
    ('a[1-', '"[" without "]"'),
    ('a]', '"]" without "["'),
    ('a[1-2]]', '"]" without "["'),
    ('a[1-[2]]', 'nested'),
    ('a[x]', "invalid range 'x'"),
    ('a[-1]', "invalid range '-1'"),
    ('a[1--2]', "invalid range '1--2'"),
    ('a[ 1-2]', "invalid range ' 1-2'"),
    ('a[0-99999]', 'more than 65536 hosts'),
    ('a[0-999]b[0-999]', 'more than 65536 hosts'),
])
def test_invalid_expressions_are_errors(expression, fragment):
    with pytest.raises(hl.HostlistError) as err:
        hl.expand_hostlist(expression)
    assert fragment in str(err.value)


def _scontrol(tmp_path):
    scontrol = shutil.which('scontrol')
    if not scontrol:
        pytest.skip('scontrol (Slurm client) is not installed')
    conf = tmp_path / 'slurm.conf'
    conf.write_text('ClusterName=t\nSlurmctldHost=localhost\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n')
    env = dict(os.environ, SLURM_CONF=str(conf))

    def run(expression):
        proc = subprocess.run([scontrol, 'show', 'hostnames', expression], env=env, capture_output=True, text=True,
                              timeout=30, check=False)
        if proc.returncode != 0 or 'Invalid hostlist' in proc.stdout + proc.stderr or 'fatal' in proc.stderr:
            return None
        return proc.stdout.split()
    if run('a[1-2]') != ['a1', 'a2']:
        pytest.skip('scontrol cannot expand hostlists here')
    return run


def test_expansion_matches_the_installed_scontrol(tmp_path):
    """Each expression this Slurm version accepts expands to exactly what scontrol prints.

    Older Slurm releases reject a suffix after the last bracket (``node[001-003]-ib``), which newer
    ones accept; those are compared only where the installed scontrol knows them.
    """
    scontrol = _scontrol(tmp_path)
    compared = 0
    for expression, _hosts in EXPANSIONS + [('gpu-[0001-0100],login[1-2]', None)]:
        theirs = scontrol(expression)
        if theirs is None:
            continue
        assert hl.expand_hostlist(expression) == theirs, expression
        compared += 1
    assert compared >= 12


# ---- Slurm count lists -------------------------------------------------------------------------

@pytest.mark.parametrize('value, counts', [
    ('2(x3),1', [2, 2, 2, 1]),
    ('8', [8]),
    ('1(x4)', [1, 1, 1, 1]),
    ('4(x2),2(x2)', [4, 4, 2, 2]),
    ('8(x2), 4', [8, 8, 4]),
])
def test_expand_counts(value, counts):
    assert hl.expand_counts(value) == counts


@pytest.mark.parametrize('value', ['x', '2(x0)', '2(x3', '2(3)', '', '2,,1', '-1'])
def test_bad_count_lists_are_errors(value):
    with pytest.raises(hl.HostlistError):
        hl.expand_counts(value)


@pytest.mark.parametrize('value, count', [
    ('8', 8), ('h100:8', 8), ('gpu:h100:8', 8), ('a100:2,v100:2', 4), ('gpu:8(IDX:0-7)', 8),
    ('mi300x:8', 8), (' 4 ', 4), ('', None), (None, None), ('0', 0),
])
def test_parse_gpu_count(value, count):
    assert hl.parse_gpu_count(value) == count


@pytest.mark.parametrize('value', ['h100:x', 'h100:', 'eight', '8.5'])
def test_bad_gpu_counts_are_errors(value):
    with pytest.raises(hl.HostlistError):
        hl.parse_gpu_count(value)


@pytest.mark.parametrize('value, count', [
    ('0,1,2,3', 4), ('0-3,6', 5), ('2', 1), ('0-7', 8), ('', None), (None, None),
])
def test_count_ids(value, count):
    assert hl.count_ids(value) == count


@pytest.mark.parametrize('value', ['3-1', 'a', '0,,1'])
def test_bad_id_lists_are_errors(value):
    with pytest.raises(hl.HostlistError):
        hl.count_ids(value)


# ---- node list files ---------------------------------------------------------------------------

AORTA_STYLE = """\
# written by setup_multi_node.sh; master first
10.227.23.11
10.227.23.12   # worker 1

10.227.23.13 slots=4
  gpu-04.dcgpu\tslots=8   # trailing comment
fd00::14 slots=2
"""


def test_node_list_keeps_order_lines_and_slots():
    entries = hl.parse_node_list(AORTA_STYLE)
    assert [(e.name, e.slots, e.lineno) for e in entries] == [
        ('10.227.23.11', None, 2),
        ('10.227.23.12', None, 3),
        ('10.227.23.13', 4, 5),
        ('gpu-04.dcgpu', 8, 6),
        ('fd00::14', 2, 7),
    ]


def test_deepspeed_hostfile_is_a_node_list():
    entries = hl.parse_node_list('worker-1 slots=4\nworker-2 slots=4\n')
    assert [(e.name, e.slots) for e in entries] == [('worker-1', 4), ('worker-2', 4)]


def test_duplicate_node_names_both_lines():
    with pytest.raises(hl.HostlistError) as err:
        hl.parse_node_list('# master\n10.0.0.1\n10.0.0.2\n\n10.0.0.1 slots=8\n')
    assert str(err.value) == 'line 5: 10.0.0.1 is listed twice (first on line 2); each node must appear once'


@pytest.mark.parametrize('text, fragment', [
    ('10.0.0.1\n10.0.0.2 ansible_user=x\n', "line 2: unexpected 'ansible_user=x' after 10.0.0.2"),
    ('10.0.0.1 slots=0\n', 'line 1: slots=0 for 10.0.0.1: it must be at least 1'),
    ('10.0.0.1 slots=8 slots=4\n', 'line 1: slots= given twice'),
    ('10.0.0.1 slots=x\n', "line 1: unexpected 'slots=x'"),
    ('\n\n[gpu]\n10.0.0.1\n', "line 3: '[gpu]' is not an IP address or host name"),
    ('train@10.0.0.1\n', "line 1: 'train@10.0.0.1' is not an IP address or host name"),
    ('10.0.0.1:2222\n', "line 1: '10.0.0.1:2222' is not an IP address or host name"),
    ('-bad\n', "line 1: '-bad' is not an IP address or host name"),
])
def test_bad_lines_are_errors_naming_the_line(text, fragment):
    with pytest.raises(hl.HostlistError) as err:
        hl.parse_node_list(text)
    assert fragment in str(err.value)


@pytest.mark.parametrize('text, expected', [
    (AORTA_STYLE, True),
    ('10.0.0.1\n', True),
    ('# only comments\n\n', False),
    ('', False),
    ('[gpus]\nnode1 ansible_host=10.0.0.1\n', False),       # an INI inventory
    ('all:\n  hosts:\n    node1:\n', False),                  # a YAML inventory
    ('requests==2.31\nansible-core>=2.17\n', False),          # requirements.txt
    ('Just some notes about the cluster.\n', False),
])
def test_looks_like_node_list_is_conservative(text, expected):
    assert hl.looks_like_node_list(text) is expected


@pytest.mark.parametrize('value, expected', [
    ('10.0.0.1', True), ('fe80::1', True), ('gpu-01', True), ('gpu-01.cluster.local', True), ('node_7', True),
    ('', False), ('a..b', False), ('-a', False), ('a-', False), ('a b', False), ('{{ x }}', False), (None, False),
])
def test_is_address(value, expected):
    assert hl.is_address(value) is expected


@pytest.mark.parametrize('value, expected', [
    # a zone id is an interface name (at most 15 characters, as Linux's IFNAMSIZ allows) or an index
    ('fe80::1%eth0', True), ('fe80::1%2', True), ('fe80::1%bond0.2093', True), ('fe80::1%veth_a-1', True),
    ('fe80::1%enp1s0f0np0', True), ('fe80::1%abcdefghijklmno', True), ('fe80::1%abcdefghijklmnop', False),
    # anything a shell, ssh or a pattern would read is no zone, so no address
    ('fe80::1%eth0;reboot', False), ('fe80::1%$(id)', False), ('fe80::1%`id`', False), ('fe80::1%eth0 x', False),
    ('fe80::1%eth0\n', False), ('fe80::1%*', False), ('fe80::1%', False), ('fe80::1%.', False), ('fe80::1%..', False),
    ('fe80::1%a/b', False), ('10.0.0.1%eth0', False),
])
def test_is_address_takes_only_an_interface_name_as_zone_id(value, expected):
    assert hl.is_address(value) is expected


@pytest.mark.parametrize('value', ['gpu-01\n', '10.0.0.1\n', 'fe80::1\n', 'gpu-01\n\n', '\ngpu-01'])
def test_is_address_refuses_a_trailing_newline(value):
    assert hl.is_address(value) is False


def test_the_whole_field_must_match_not_its_start():
    assert hl.expand_counts('2(x3)') == [2, 2, 2]
    with pytest.raises(hl.HostlistError):
        hl.expand_counts('2(x3)\n')
    with pytest.raises(hl.HostlistError):
        hl.expand_hostlist('node[1-2\n]')


def test_node_layout_ranks_master_and_ranks_per_node():
    layout = hl.node_layout([('m', '10.0.0.1', 8), ('w1', None, None), ('w2', 'w2', '4')])
    assert layout == [
        ('m', {'trainops_node_rank': 0, 'trainops_master': True, 'ansible_host': '10.0.0.1',
               'trainops_nproc_per_node': 8}),
        ('w1', {'trainops_node_rank': 1}),
        ('w2', {'trainops_node_rank': 2, 'ansible_host': 'w2', 'trainops_nproc_per_node': 4}),
    ]
