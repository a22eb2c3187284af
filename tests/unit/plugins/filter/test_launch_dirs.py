# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The launch's filters of its directories across nodes (roles/job/tasks/shares.yml) and the plan of a resume
(resume.yml, the action trainops.multinode.resume: module_utils/_resume_plan.py): their rules, their argument checks,
and the same results as the Jinja they replaced (kept below as the task files had it, rendered with ansible's
Templar), as the task files now call them."""

from __future__ import annotations

import os
import random

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.trainops.multinode.plugins.module_utils import _launch_plan
from ansible_collections.trainops.multinode.plugins.module_utils._launch_dirs import dir_shares
from ansible_collections.trainops.multinode.plugins.module_utils._launch_dirs import share_lines as dir_share_lines
from ansible_collections.trainops.multinode.plugins.filter.launch_state import (
    resume_checkpoint,
)
from ansible_collections.trainops.multinode.plugins.filter.shared_dirs import shared_dirs
from ansible_collections.trainops.multinode.plugins.module_utils import _resume_plan
from ansible_collections.trainops.multinode.plugins.module_utils._launch_dirs import resume_nodes, resumed_env

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))

# The Jinja the task files had (shares.yml and resume.yml before these filters), as YAML, folded as they were.
OLD = yaml.safe_load(r"""
# (what a node's first launch marks: still Jinja in shares.yml, here to make __trainops_marked)
unmarked: >-
  {{ ([__trainops_paths.state_root] if not __trainops_paths.state_root_token else [])
     + ([__trainops_paths.workspace_dir] if trainops_sync_workspace | bool and not __trainops_paths.workspace_token else []) }}
tokens: >-
  {%- set out = [] -%}
  {%- for h in __trainops_nodes -%}
  {%- set paths = hostvars[h].__trainops_preflight.paths -%}
  {%- set made = hostvars[h].__trainops_marked.results | default([]) | selectattr('token', 'defined')
                 | items2dict(key_name='item', value_name='token') -%}
  {%- set root = paths.state_root_token or made.get(paths.state_root) -%}
  {%- set _ = out.append({'state_root': root, 'workspace': paths.workspace_token or made.get(paths.workspace_dir),
                          'state_dir': (root or h) ~ ':' ~ paths.state_dir}) -%}
  {%- endfor -%}
  {{ out }}
lines: >-
  {%- set lines = [] -%}
  {%- for group in __trainops_root_shares.groups -%}
  {%- set _ = lines.append('shared node root (trainops_node_root): %s see the same directory; each node keeps its state '
                           'in its own directory below it' | format(group | join(', '))) -%}
  {%- endfor -%}
  {%- for group in __trainops_workspace_shares.groups -%}
  {%- set _ = lines.append('shared workspace (trainops_workspace_dir): %s see the same directory; synced once, through %s'
                           | format(group | join(', '), group[0])) -%}
  {%- endfor -%}
  {{ lines }}
with_run: >-
  {{ ansible_play_hosts | map('extract', hostvars) | selectattr('__trainops_resume_has_run')
     | map(attribute='inventory_hostname') | list }}
with_checkpoint: >-
  {{ ansible_play_hosts | map('extract', hostvars) | selectattr('__trainops_resume_has_checkpoint')
     | map(attribute='inventory_hostname') | list }}
without_run: >-
  {{ ansible_play_hosts | map('extract', hostvars) | rejectattr('__trainops_resume_has_run')
     | map(attribute='inventory_hostname') | list }}
resume_msg: >-
  Resuming run {{ trainops_resume_from }}: its checkpoint is on {{ __trainops_with_checkpoint | join(', ')
  if __trainops_with_checkpoint else 'no node (the script starts from scratch)' }}{{ '; not on '
  ~ (__trainops_without_run | join(', ')) ~ ', which did not take part in it' if __trainops_without_run else '' }}.
""")


def old(name, **variables):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(OLD[name]))


def old_shares(nodes, hostvars):
    """The three shared_dirs of shares.yml's old set_fact."""
    tokens = old('tokens', __trainops_nodes=nodes, hostvars=hostvars)
    return dict((kind, shared_dirs(dict(zip(nodes, [t[key] for t in tokens]))))
                for kind, key in (('root', 'state_root'), ('workspace', 'workspace'), ('state', 'state_dir')))


def node_vars(rng, node, sync):
    """A node's hostvars for shares.yml: its preflight paths (some tokens read) and what dir_token made."""
    home = rng.choice(['/nfs/home', '/local/%s' % node])
    paths = {'state_root': home + '/.trainops/state', 'workspace_dir': rng.choice(['/nfs/ws', '/local/%s/ws' % node]),
             'state_dir': home + '/.trainops/state/' + rng.choice([node, 'same-host']),
             'state_root_token': rng.choice([None, '', 'tok-' + home]),
             'workspace_token': rng.choice([None, 'tok-ws'])}
    marked = [{'item': path, 'token': rng.choice(['tok-' + path, None]), 'changed': True}
              for path in old('unmarked', __trainops_paths=paths, trainops_sync_workspace=sync)]
    registered = rng.choice([{'results': marked}, {'results': [dict(r, token=None) for r in marked]},
                             {'results': [{'item': r['item'], 'skipped': True} for r in marked]}, None])
    hostvars = {'inventory_hostname': node, '__trainops_preflight': {'paths': paths}}
    if registered is not None:
        hostvars['__trainops_marked'] = registered
    return hostvars


@pytest.mark.parametrize('seed', range(60))
def test_the_filters_give_what_the_old_jinja_gave(seed):
    rng = random.Random(seed)
    sync = rng.choice([True, False])
    nodes = ['node%d' % i for i in range(rng.randint(1, 5))]
    hostvars = dict((node, node_vars(rng, node, sync)) for node in nodes)
    shares = dir_shares(nodes, hostvars)
    assert shares == old_shares(nodes, hostvars)
    assert dir_share_lines(shares['root'], shares['workspace']) == old(
        'lines', __trainops_root_shares=shares['root'], __trainops_workspace_shares=shares['workspace'])

    for node in nodes:
        # the facts the old Jinja read, and what the node found (module checkpoint_carry), which the plan reads
        hostvars[node].update(__trainops_resume_has_run=rng.random() > 0.3,
                              __trainops_resume_has_checkpoint=rng.random() > 0.6)
        hostvars[node]['__trainops_resume_found'] = found(hostvars[node])
    play_hosts = [node for node in nodes if rng.random() > 0.2]
    run_id = 'multinode_tiny_20260101_00000%d' % (seed % 10)
    resumed = resume_nodes(play_hosts, hostvars, run_id)
    lists = dict((name, old(name, ansible_play_hosts=play_hosts, hostvars=hostvars))
                 for name in ('with_run', 'with_checkpoint', 'without_run'))
    said = old('resume_msg', trainops_resume_from=run_id, __trainops_with_checkpoint=lists['with_checkpoint'],
               __trainops_without_run=lists['without_run'])
    # new since: the nodes without the checkpoint, which get a copy (resume.yml), and the message saying so
    lacking = [n for n in play_hosts if n not in lists['with_checkpoint']]
    if lists['with_checkpoint'] and lacking:
        said += ' %s get(s) a copy from %s.' % (', '.join(lacking), lists['with_checkpoint'][0])
    assert resumed == dict(lists, msg=said, without_checkpoint=lacking)


def test_nodes_under_one_root_share_it_and_one_host_name_shares_a_state_directory():
    def node(root_token, state_dir, workspace_token=None, made=None):
        return {'__trainops_preflight': {'paths': {
            'state_root': '/home/u/.trainops/state', 'state_root_token': root_token, 'state_dir': state_dir,
            'workspace_dir': '/home/u/ws', 'workspace_token': workspace_token}},
            '__trainops_marked': {'results': made or []}}
    hostvars = {'a': node('t1', '/s/h', 'w1'), 'b': node('t1', '/s/h', 'w1'),
                'c': node(None, '/s/h', made=[{'item': '/home/u/.trainops/state', 'token': 't1'},
                                              {'item': '/home/u/ws', 'token': 'w1'}]),
                'd': node(None, '/s/h')}
    shares = dir_shares(['a', 'b', 'c', 'd'], hostvars)
    assert shares['root'] == {'primary': {'a': 'a', 'b': 'a', 'c': 'a', 'd': 'd'}, 'groups': [['a', 'b', 'c']],
                              'shared': True}
    assert shares['workspace']['groups'] == [['a', 'b', 'c']]
    assert shares['state']['groups'] == [['a', 'b', 'c']]   # d: no token, its own name
    assert dir_share_lines(shares['root'], shares['workspace']) == [
        'shared node root (trainops_node_root): a, b, c see the same directory; each node keeps its state in its own '
        'directory below it',
        'shared workspace (trainops_workspace_dir): a, b, c see the same directory; synced once, through a']
    assert dir_share_lines({'groups': []}, {'groups': []}) == []


def found(facts):
    """What checkpoint_carry found on a node, from the facts resume.yml used to note (has_run, has_checkpoint)."""
    return {'run': bool(facts.get('__trainops_resume_has_run')),
            'checkpoint': {'isreg': bool(facts.get('__trainops_resume_has_checkpoint')), 'path': '/s/runs/r/outputs/checkpoint.pt'}}


def test_resume_says_where_the_checkpoint_is_and_which_nodes_lack_the_run():
    hostvars = dict((node, {'__trainops_resume_found': found(facts)}) for node, facts in (
        ('a', {'__trainops_resume_has_run': True, '__trainops_resume_has_checkpoint': True}),
        ('b', {'__trainops_resume_has_run': True}), ('c', {})))
    assert resume_nodes(['a', 'b', 'c'], hostvars, 'r1') == {
        'with_run': ['a', 'b'], 'with_checkpoint': ['a'], 'without_run': ['c'], 'without_checkpoint': ['b', 'c'],
        'msg': 'Resuming run r1: its checkpoint is on a; not on c, which did not take part in it. b, c get(s) a copy '
               'from a.'}
    assert resume_nodes(['b'], hostvars, 'r1')['msg'] == (
        'Resuming run r1: its checkpoint is on no node (the script starts from scratch).')
    assert resume_nodes(['c'], hostvars, 'r1')['with_run'] == []


# --- the task files call them by FQCN: their expressions rendered as they are, against the old Jinja -----------

def task(file_name, task_name):
    with open(os.path.join(ROOT, 'roles', 'job', 'tasks', file_name)) as handle:
        return next(t for t in yaml.safe_load(handle) if t['name'] == task_name)


def render(expression, **variables):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expression))


def test_the_task_files_give_what_the_old_jinja_gave(collection_finder):
    rng = random.Random(3)
    nodes = ['node0', 'node1', 'node2']
    hostvars = dict((node, node_vars(rng, node, True)) for node in nodes)
    hostvars['node1'] = dict(hostvars['node0'], inventory_hostname='node1')   # one root, one host name

    # shares.yml's step of the launch plan (action launch_plan, module_utils/_launch_plan.py)
    variables = dict(__trainops_order={'nodes': nodes}, __trainops_spare_pool={'spares': []}, ansible_play_hosts=nodes)
    shares = _launch_plan.shares(variables.get, hostvars)
    expected = old_shares(nodes, hostvars)
    assert shares['fields'] == expected and expected['state']['shared']
    assert shares['problems'] == ['Not starting anything: node0 and node1 would keep their state in the same directory '
                                  '(they share the node root and have the same host name). Set trainops_node_id per '
                                  'node, e.g. trainops_node_id: "{{ inventory_hostname }}".']
    assert shares['lines'] == old('lines', __trainops_root_shares=expected['root'],
                                  __trainops_workspace_shares=expected['workspace'])
    with pytest.raises(ValueError, match='node node0 has no preflight result'):
        _launch_plan.shares(variables.get, {})

    for node in nodes:
        hostvars[node]['__trainops_resume_found'] = found({'__trainops_resume_has_run': node != 'node2',
                                                           '__trainops_resume_has_checkpoint': node == 'node0'})
    # the resume's plan (the action trainops.multinode.resume, step carry), as resume.yml runs it
    resume = _resume_plan.plan(nodes, hostvars, 'r1')
    assert len(resume['with_run']) > 0
    assert resume['msg'] == old(
        'resume_msg', trainops_resume_from='r1', __trainops_with_checkpoint=['node0'],
        __trainops_without_run=['node2']) + ' node1, node2 get(s) a copy from node0.'
    assert resume['without_checkpoint'] == ['node1', 'node2']
    assert _resume_plan.no_run_message('r1', nodes, '/s/runs/r1') == (
        'trainops_resume_from=r1: no node has that run (looked on node0, node1, node2 in <state dir>/runs/r1, e.g. '
        '/s/runs/r1). Give the run id of an earlier launch on these nodes (its experiment directory\'s name), or leave '
        'trainops_resume_from out to start from scratch.')


def test_the_checkpoint_a_launch_resumed_is_the_first_node_s_with_its_step_from_the_resumed_run():
    def found(path=None):
        stat = {'isreg': True, 'path': path, 'checksum': 'ab' * 32, 'size': 10, 'mtime': 1.5} if path \
            else {'isreg': False, 'path': '/s/runs/r1/outputs/checkpoint.pt'}
        return {'__trainops_resume_found': {'run': True, 'checkpoint': stat}}
    hostvars = {'node0': found(), 'node1': found('/s/runs/r1/outputs/checkpoint.pt'), 'node2': {}}
    recorded = {'global_step': 8, 'epoch': 0, 'node': 'node1', 'path': '/s/runs/r1/outputs/checkpoint.pt'}
    assert resume_checkpoint(['node0', 'node1', 'node2'], hostvars, 'r1', recorded) == {
        'run_id': 'r1', 'node': 'node1', 'path': '/s/runs/r1/outputs/checkpoint.pt', 'sha256': 'ab' * 32, 'size': 10,
        'mtime': 1.5, 'global_step': 8, 'epoch': 0, 'copied_to': [],
        # since: why that node (module_utils/_launch_dirs.newest_checkpoint) and how copies went (none here)
        'by': 'only', 'why': 'the only node with the checkpoint', 'copied_via': {}}
    # no record of its step (another controller's run), or no node with the checkpoint
    assert resume_checkpoint(['node1'], hostvars, 'r1', None)['global_step'] is None
    none = resume_checkpoint(['node0', 'node2'], hostvars, 'r1', recorded)
    assert none['path'] is None and none['node'] is None and none['global_step'] is None


def test_a_checkpoint_copied_to_a_spare_names_the_node_it_came_from_and_that_node_s_own_step():
    """Every node writes the checkpoint (files/workspace/train.py); a spare that replaced the master has none and gets
    a copy from the first node that has it (resume.yml registers __trainops_resume_copied: the module's received copy)."""
    def found(path=None):
        stat = {'isreg': True, 'path': path, 'checksum': 'cd' * 32, 'size': 10, 'mtime': 2.0} if path \
            else {'isreg': False, 'path': '/spare/runs/r1/outputs/checkpoint.pt'}
        return {'__trainops_resume_found': {'run': bool(path), 'checkpoint': stat}}
    hostvars = {'spare': dict(found(), __trainops_resume_copied={'dest': '/spare/o/checkpoint.pt', 'checksum': 'cd' * 32}),
                'node1': found('/n1/runs/r1/outputs/checkpoint.pt')}
    rank_zero = {'global_step': 12, 'epoch': 0, 'node': 'node0', 'path': '/n0/runs/r1/outputs/checkpoint.pt'}
    got = resume_checkpoint(['spare', 'node1'], hostvars, 'r1', rank_zero, {'node1': {'global_step': 8, 'epoch': 0}})
    assert (got['node'], got['path'], got['sha256'], got['global_step'], got['copied_to']) == (
        'node1', '/n1/runs/r1/outputs/checkpoint.pt', 'cd' * 32, 8, ['spare'])
    # without node1's own record: rank 0's, the same file below the run's directory
    assert resume_checkpoint(['spare', 'node1'], hostvars, 'r1', rank_zero)['global_step'] == 12
    assert resume_checkpoint(['spare', 'node1'], hostvars, 'r1', dict(rank_zero, path='/n0/other.pt'))[
        'global_step'] is None


@pytest.mark.parametrize('manifest, expected', [
    ({'world_size': 4}, {'TRAINOPS_PREVIOUS_WORLD_SIZE': '4'}),
    ({'world_size': '16'}, {'TRAINOPS_PREVIOUS_WORLD_SIZE': '16'}),
    ({}, {}),
    (None, {}),
    ({'world_size': 0}, {}),
    ({'world_size': True}, {}),
    ({'world_size': 4.0}, {}),
    ({'world_size': '{{ lookup("pipe", "id") }}'}, {}),
    ({'world_size': 10 ** 9}, {}),
    ({'world_size': '9' * 40}, {}),
])
def test_resumed_env_tells_the_ranks_the_resumed_run_s_world_size_from_its_manifest(manifest, expected):
    assert resumed_env(manifest) == expected


def test_the_resume_sends_the_newest_checkpoint_by_ssh_or_the_controller_and_reads_only_the_source_s():
    """The resume's plan (resume.yml, module_utils/_resume_plan.py): the source is the newest node (resume_source),
    only its copy is read for a sha256 and only when a node lacks the checkpoint; with trainops_ssh_mesh only the nodes
    the SSH copy missed go through the controller."""
    stat = {'isreg': True, 'size': 5, 'mtime': 1.0, 'identity': '1:2:5:3:4'}
    hostvars = {
        'node0': {'__trainops_resume_found': {'run': True, 'checkpoint': dict(stat, path='/a/runs/r1/outputs/checkpoint.pt', age=40.0)}},
        'node1': {'__trainops_resume_found': {'run': True, 'checkpoint': dict(stat, path='/b/runs/r1/outputs/checkpoint.pt', age=1.0)}},
        'spare': {'__trainops_resume_found': {'run': False, 'checkpoint': {'isreg': False, 'path': '/s'}}}}
    nodes = ['node0', 'node1', 'spare']
    recorded = {'checkpoints': {'node0': {'global_step': 8}, 'node1': {'global_step': 4}}}
    resume = _resume_plan.plan(nodes, hostvars, 'r1', recorded)
    assert resume['source'] == 'node0'      # step 8 over node1's younger file at step 4
    assert resume['msg'].endswith(' spare get(s) a copy from node0.')

    def digest(node, plan):
        return _resume_plan.for_node(plan, node, hostvars[node]['__trainops_resume_found'], '/r', '/o')['digest']
    assert [digest(node, resume) for node in nodes] == [True, False, False]
    alone = dict(resume, receivers=[])
    assert digest('node0', alone) is False

    assert _resume_plan.via_controller(resume, hostvars)[0] == ['spare']
    meshed = _resume_plan.plan(nodes, hostvars, 'r1', recorded, ssh_mesh=True)
    hostvars['spare']['__trainops_resume_pulled'] = {'pulled': True}
    assert _resume_plan.via_controller(meshed, hostvars)[0] == []
    hostvars['spare']['__trainops_resume_pulled'] = {'pulled': False, 'error': 'ssh exited 255'}
    assert _resume_plan.via_controller(meshed, hostvars)[0] == ['spare']
