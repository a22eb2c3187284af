# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which node's checkpoint a resume takes (module_utils/_launch_dirs.newest_checkpoint, resume_source,
resume_checkpoint, resume_copies): the newest by the global step the run recorded, else by the file's age on each
node's own clock, ties to rank order; the manifest's resumed_from says which node and why, and how copies went."""

from __future__ import annotations

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils._launch_dirs import (
    newest_checkpoint,
    resume_checkpoint,
    resume_copies,
    resume_nodes,
    resume_source,
)


def ckpt(node, age=None, mtime=1000.0, run='r1'):
    found = {'isreg': True, 'path': '/%s/state/runs/%s/outputs/checkpoint.pt' % (node, run), 'size': 10, 'mtime': mtime,
             'identity': '1:2:10:3:4'}
    if age is not None:
        found['age'] = age
    return found


NODES = ['node0', 'node1', 'node2']


def test_the_highest_recorded_global_step_wins_over_rank_order_and_over_the_clocks():
    found = {'node0': ckpt('node0', age=1.0), 'node1': ckpt('node1', age=300.0), 'node2': ckpt('node2', age=0.5)}
    per_node = {'node0': {'global_step': 8, 'path': '/node0/state/runs/r1/outputs/checkpoint.pt'},
                'node1': {'global_step': 12, 'path': '/node1/state/runs/r1/outputs/checkpoint.pt'},
                'node2': {'global_step': 8}}
    got = newest_checkpoint(NODES, found, per_node)
    assert got == {'node': 'node1', 'by': 'global_step',
                   'why': 'global step 12, the highest its checkpoint.json records (node0: global step 8; node2: '
                          'global step 8)'}


def test_equal_steps_go_to_rank_order_and_a_node_without_a_record_is_not_taken_before_one_with_it():
    found = {'node0': ckpt('node0', age=50.0), 'node1': ckpt('node1', age=60.0), 'node2': ckpt('node2', age=0.1)}
    per_node = {'node1': {'global_step': 8}, 'node0': {'global_step': 8}}
    got = newest_checkpoint(NODES, found, per_node)
    assert got['node'] == 'node0' and got['by'] == 'global_step'
    assert got['why'].endswith('(node1: global step 8; node2: no checkpoint.json record)'), got
    # rank 0's record (the manifest's checkpoint) counts for its own node only
    got = newest_checkpoint(NODES, found, None, {'node': 'node2', 'global_step': 4, 'path': None})
    assert (got['node'], got['by']) == ('node2', 'global_step')


def test_a_record_that_names_another_file_or_is_no_whole_number_is_no_evidence():
    found = {'node0': ckpt('node0', age=10.0), 'node1': ckpt('node1', age=1.0)}
    for record in ({'global_step': 99, 'path': '/node0/state/runs/OTHER/outputs/checkpoint.pt'},
                   {'global_step': True}, {'global_step': -3}, {'global_step': '99'}, {'global_step': 9.5}, 'x'):
        got = newest_checkpoint(['node0', 'node1'], found, {'node0': record})
        assert (got['node'], got['by']) == ('node1', 'mtime'), (record, got)


def test_without_records_the_youngest_file_on_its_own_node_s_clock_wins():
    # node0's clock is an hour ahead: its mtime is the largest, but its file is older on its own clock
    found = {'node0': ckpt('node0', age=40.0, mtime=5000.0), 'node1': ckpt('node1', age=3.0, mtime=1400.0),
             'node2': ckpt('node2', age=90.0, mtime=1300.0)}
    got = newest_checkpoint(NODES, found)
    assert got == {'node': 'node1', 'by': 'mtime', 'why':
                   'no checkpoint.json records its step; its checkpoint.pt is the newest by its modification time, '
                   '3.0s old each on its own node\'s clock (node0 40.0s old, node2 90.0s old); times less than 2.0s '
                   'apart count as the same, the first in rank order taken'}


def test_ages_within_the_tie_go_to_rank_order():
    found = {'node0': ckpt('node0', age=4.5), 'node1': ckpt('node1', age=2.5), 'node2': ckpt('node2', age=1.0)}
    assert newest_checkpoint(NODES, found)['node'] == 'node1'      # 2.5 - 1.0 < 2
    assert newest_checkpoint(NODES, found, tie_s=0.5)['node'] == 'node2'
    found['node1']['age'] = -0.5                                   # written "in the future" on its own clock
    got = newest_checkpoint(NODES, found)
    assert got['node'] == 'node1' and '0.5s ahead' in got['why']


def test_a_node_without_an_age_falls_back_to_the_mtimes():
    found = {'node0': ckpt('node0', mtime=100.0), 'node1': ckpt('node1', age=1.0, mtime=200.0)}
    got = newest_checkpoint(['node0', 'node1'], found)
    assert got['node'] == 'node1' and 'by the nodes\' clocks (a node gave no age)' in got['why'], got
    found['node0']['age'] = float('nan')   # no number is no age either
    assert newest_checkpoint(['node0', 'node1'], found)['why'] == got['why']


@pytest.mark.parametrize('found, expected', [
    ({}, None),
    ({'node0': {'isreg': False, 'path': '/x'}, 'node1': None}, None),
    ({'node0': {'isreg': False}, 'node1': ckpt('node1', age=9.0), 'node2': ckpt('node2', age=1.0)}, 'node2'),
])
def test_only_nodes_with_the_checkpoint_count(found, expected):
    got = newest_checkpoint(NODES, found)
    assert (got or {}).get('node') == expected
    only = newest_checkpoint(NODES, {'node2': ckpt('node2')})
    assert only == {'node': 'node2', 'by': 'only', 'why': 'the only node with the checkpoint'}


def hostvars_of(found, **more):
    hostvars = dict((node, {'__trainops_resume_found': {'run': True, 'checkpoint': stat}}) for node, stat in found.items())
    for node, facts in more.items():
        hostvars.setdefault(node, {}).update(facts)
    return hostvars


def test_the_manifest_says_which_node_why_and_how_the_copies_went():
    found = {'node0': ckpt('node0', age=30.0), 'node1': ckpt('node1', age=2.0),
             'spare': {'isreg': False, 'path': '/spare/state/runs/r1/outputs/checkpoint.pt'},
             'late': {'isreg': False, 'path': '/late/state/runs/r1/outputs/checkpoint.pt'}}
    hostvars = hostvars_of(found, node1={'__trainops_resume': {'carried': {'checksum': 'ef' * 32}}},
                           spare={'__trainops_resume_pulled': {'pulled': True}},
                           late={'__trainops_resume_pulled': {'pulled': False, 'error': 'ssh exited 255: Permission denied'},
                                 '__trainops_resume_copied': {'checksum': 'ef' * 32}})
    nodes = ['node0', 'node1', 'spare', 'late']
    got = resume_checkpoint(nodes, hostvars, 'r1', None, {'node1': {'global_step': 16, 'epoch': 1}})
    assert (got['node'], got['by'], got['sha256'], got['global_step'], got['epoch']) == ('node1', 'global_step',
                                                                                         'ef' * 32, 16, 1)
    assert got['copied_to'] == ['spare', 'late'] and got['copied_via'] == {'spare': 'node', 'late': 'controller'}
    assert got['path'] == '/node1/state/runs/r1/outputs/checkpoint.pt'
    copies = resume_copies(nodes, hostvars)
    assert copies['not_pulled'] == ['late'] and copies['msg'] == (
        'The checkpoint goes through the controller to late: the copy from node to node failed (late: ssh exited 255: '
        'Permission denied).')
    # without a copy nothing was read for a checksum
    alone = hostvars_of({'node0': ckpt('node0', age=1.0), 'node1': ckpt('node1', age=1.0)})
    assert resume_checkpoint(['node0', 'node1'], alone, 'r1')['sha256'] is None


def test_the_launch_names_the_newest_node_as_the_source_of_the_copies():
    found = {'node0': ckpt('node0', age=30.0), 'node1': ckpt('node1', age=2.0),
             'spare': {'isreg': False, 'path': '/x'}}
    hostvars = hostvars_of(found)
    source = resume_source(['node0', 'node1', 'spare'], hostvars)
    assert source['node'] == 'node1'
    msg = resume_nodes(['node0', 'node1', 'spare'], hostvars, 'r1', source)['msg']
    assert msg.startswith('Resuming run r1: its checkpoint is on node0, node1. The newest is node1\'s: no checkpoint.json')
    assert msg.endswith(' spare get(s) a copy from node1.'), msg
    assert resume_source(['spare'], hostvars) == {'node': None, 'by': None, 'why': None}
