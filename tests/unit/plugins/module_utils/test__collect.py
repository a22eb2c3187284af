# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where a node's fetched files land (module_utils._collect): inside the experiment, in the node's own place, or refused."""

from __future__ import annotations

import os

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _collect as collect

BASE = '/home/u/.cache/trainops/node1/runs/r1/profiles'


def plan(experiment, paths, kind='profiles', node='node1', base=BASE, **kwargs):
    return collect.node_files(str(experiment), kind, node, base, paths, **kwargs)


def test_a_node_s_files_land_in_its_own_directory_with_their_paths_below_the_listed_one(experiment):
    result = plan(experiment, [BASE + '/node1_rank2.json', BASE + '/rocprof/node1_rank2/trace.csv'])
    assert result == {'refused': [], 'files': [
        {'src': BASE + '/node1_rank2.json', 'dest': str(experiment / 'profiles' / 'node1' / 'node1_rank2.json')},
        {'src': BASE + '/rocprof/node1_rank2/trace.csv',
         'dest': str(experiment / 'profiles' / 'node1' / 'rocprof' / 'node1_rank2' / 'trace.csv')}]}


def test_two_nodes_with_the_same_file_name_keep_both(experiment):
    out0 = plan(experiment, ['/n0/outputs/same.json'], kind='outputs', node='node0', base='/n0/outputs')
    out1 = plan(experiment, ['/n1/outputs/same.json'], kind='outputs', node='node1', base='/n1/outputs')
    assert out0['files'][0]['dest'] == str(experiment / 'outputs' / 'node0' / 'same.json')
    assert out1['files'][0]['dest'] == str(experiment / 'outputs' / 'node1' / 'same.json')


@pytest.mark.parametrize('path, why', [
    (BASE + '/../../x', 'a "", "." or ".." component'),
    (BASE + '/a/../../../../../etc/cron.d/x', 'a "", "." or ".." component'),
    (BASE + '/./x', 'a "", "." or ".." component'),
    (BASE + '//x', 'a "", "." or ".." component'),
    (BASE + '/', 'a "", "." or ".." component'),
    ('/etc/passwd', 'outside the directory listed (%s)' % BASE),
    (BASE + '-evil/x', 'outside the directory listed (%s)' % BASE),
    ('../../x', 'outside the directory listed (%s)' % BASE),
    (BASE + '/a\nb.json', 'a control character (newline, tab, ...) in its name'),
    (BASE + '/a\x00b', 'a control character (newline, tab, ...) in its name'),
    (BASE + '/tab\there', 'a control character (newline, tab, ...) in its name'),
    ('', 'not a path'),
])
def test_a_path_not_plainly_under_the_listed_directory_is_refused_naming_the_node(experiment, path, why):
    result = plan(experiment, [path, BASE + '/ok.json'])
    assert result['refused'] == ['node1: refused profile %r: %s' % (path, why)]
    assert [f['src'] for f in result['files']] == [BASE + '/ok.json']


def test_odd_but_plain_names_are_kept(experiment):
    names = ['with space.json', 'ünïcode.json', '-dash', '..hidden', 'a..b']
    result = plan(experiment, [BASE + '/' + name for name in names])
    assert result['refused'] == []
    assert [os.path.basename(f['dest']) for f in result['files']] == names


def test_a_symbolic_link_below_the_experiment_is_never_written_through(experiment, tmp_path):
    outside = tmp_path / 'outside'
    outside.mkdir()
    # planted where the node's directory goes (the local default: the job can write the controller's disk)
    (experiment / 'profiles').mkdir()
    os.symlink(str(outside), str(experiment / 'profiles' / 'node1'))
    result = plan(experiment, [BASE + '/node1_rank2.json'])
    assert result['files'] == []
    assert result['refused'] == ["node1: refused profile %r: %s is a symbolic link"
                                 % (BASE + '/node1_rank2.json', experiment / 'profiles' / 'node1')]


@pytest.mark.parametrize('link', ['outputs', 'outputs/node1/sub', 'outputs/node1/sub/f.json'])
def test_a_link_at_any_depth_or_at_the_file_itself_is_refused(experiment, tmp_path, link):
    (experiment / 'outputs' / 'node1').mkdir()
    if link != 'outputs/node1/sub':
        (experiment / 'outputs' / 'node1' / 'sub').mkdir()
    target = tmp_path / 'outside'
    target.mkdir()
    if link == 'outputs':
        os.rename(str(experiment / 'outputs'), str(tmp_path / 'moved'))
    os.symlink(str(target) if not link.endswith('.json') else str(target / 'f.json'), str(experiment / link))
    result = plan(experiment, ['/n/outputs/sub/f.json'], kind='outputs', base='/n/outputs')
    assert result['files'] == [] and '%s is a symbolic link' % (experiment / link) in result['refused'][0]


def test_a_file_where_a_directory_goes_is_refused(experiment):
    (experiment / 'outputs' / 'node1').write_text('')
    result = plan(experiment, ['/n/outputs/f.json'], kind='outputs', base='/n/outputs')
    assert result['refused'] == ["node1: refused output '/n/outputs/f.json': %s is not a directory"
                                 % (experiment / 'outputs' / 'node1')]


def test_an_existing_regular_file_is_overwritten_in_place(experiment):
    (experiment / 'logs' / 'node_1.txt').write_text('old')
    result = plan(experiment, ['/n/torchrun.log'], kind='logs', base='', name='node_1.txt')
    assert result == {'files': [{'src': '/n/torchrun.log', 'dest': str(experiment / 'logs' / 'node_1.txt')}], 'refused': []}


def test_the_experiment_directory_may_itself_be_reached_through_a_link(tmp_path, experiment):
    # the user's choice (a home on another disk): only what is below the experiment is the nodes' to shape
    os.symlink(str(experiment), str(tmp_path / 'via'))
    result = plan(tmp_path / 'via', ['/n/outputs/f.json'], kind='outputs', base='/n/outputs')
    assert result['files'][0]['dest'] == str(experiment / 'outputs' / 'node1' / 'f.json')


@pytest.mark.parametrize('node', ['', '.', '..', '../x', 'a/b', '-x', '.hidden', 'a\nb', 'a b', 'x' * 129, None, 3])
def test_a_node_name_that_is_not_one_safe_component_is_refused(experiment, node):
    with pytest.raises(collect.CollectRefused, match='cannot name its directory in the experiment'):
        plan(experiment, [BASE + '/x'], node=node)


@pytest.mark.parametrize('node', ['node0', 'gpu-a.example.com', 'n_1', '10.0.0.7', 'x' * 128])
def test_inventory_names_are_safe_directory_names(node):
    assert collect.node_dir_name(node) == node


def test_only_the_experiment_s_kinds_are_written(experiment):
    with pytest.raises(collect.CollectRefused, match='kind must be one of outputs, profiles, logs'):
        plan(experiment, [], kind='..')


def test_a_missing_experiment_directory_is_refused(tmp_path):
    result = plan(tmp_path / 'nope', [BASE + '/x'])
    assert result['files'] == [] and 'does not exist' in result['refused'][0]
