# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The SSH mesh's filters once the mesh is written (plugins/filter/ssh_mesh_plan.py; roles/ssh_mesh/tasks/
known_hosts.yml, verify.yml): their rules, their argument checks, and the same results as the Jinja loops they
replaced (kept below as the task files had them, rendered with ansible's Templar over many meshes), as the task
files now call them."""

from __future__ import annotations

import os
import random

import pytest
import yaml

from ansible.errors import AnsibleError, AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.trainops.multinode.plugins.filter import ssh_mesh_plan
from ansible_collections.trainops.multinode.plugins.module_utils._ssh_mesh import NOT_CHECKED

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
FILTERS = ssh_mesh_plan.FilterModule().filters()
ssh_mesh_known_hosts = FILTERS['ssh_mesh_known_hosts']
ssh_mesh_targets = FILTERS['ssh_mesh_targets']
ssh_mesh_results = FILTERS['ssh_mesh_results']
ssh_mesh_report = FILTERS['ssh_mesh_report']
ssh_mesh_pairs = FILTERS['ssh_mesh_pairs']

# The Jinja the task files had (known_hosts.yml and verify.yml before these filters), as YAML, folded as they were.
OLD = yaml.safe_load(r"""
known_hosts: >-
  {%- set lines = [] -%}
  {%- for node in groups[trainops_nodes_group] -%}
  {%-   for hostkey in hostvars[node]['__trainops_ssh_mesh_host_keys'] -%}
  {%-     set _ = lines.append({'node': node, 'name': hostvars[node]['__trainops_ssh_mesh_known_names'][0],
                                'key': hostvars[node]['__trainops_ssh_mesh_known_names'] | join(',') ~ ' ' ~ hostkey}) -%}
  {%-   endfor -%}
  {%- endfor -%}
  {{ lines }}
targets: >-
  {%- set nodes = groups[trainops_nodes_group] -%}
  {%- set here = nodes.index(inventory_hostname) -%}
  {%- set targets = [] -%}
  {%- for node in nodes[here + 1:] + nodes[:here + 1] -%}
  {%-   set names = [] -%}
  {%-   for kind in trainops_ssh_mesh_verify_targets -%}
  {%-     set name = {'address': hostvars[node]['__trainops_ssh_mesh_address'],
                      'hostname': hostvars[node]['__trainops_ssh_mesh_hostname'],
                      'inventory_hostname': node}[kind] -%}
  {%-     if name not in names -%}
  {%-       set _ = names.append(name) -%}
  {%-       set _ = targets.append({'node': node, 'target': name}) -%}
  {%-     endif -%}
  {%-   endfor -%}
  {%- endfor -%}
  {{ targets }}
results: >-
  {%- set rows = [] -%}
  {%- for node in groups[trainops_nodes_group] -%}
  {%-   set check = hostvars[node]['__trainops_ssh_mesh_check'] | default({}) -%}
  {%-   if node in ansible_play_hosts and check.stdout_lines is defined -%}
  {%-     set lines = check.stdout_lines | select('search', '\t') | list -%}
  {%-     for want in hostvars[node]['__trainops_ssh_mesh_targets'] -%}
  {%-       set fields = (lines[loop.index0] | default('')).split('\t') -%}
  {%-       set ok = fields | length >= 2 and fields[0] == want.target and fields[1] == '0' -%}
  {%-       set _ = rows.append({'from': node, 'to': want.node, 'target': want.target, 'ok': ok,
                                 'error': '' if ok else (fields[2] if fields | length > 2 and fields[2]
                                          else ('exit status ' ~ fields[1] if fields | length > 1 else 'no result'))}) -%}
  {%-     endfor -%}
  {%-   else -%}
  {%-     set _ = rows.append({'from': node, 'to': '*', 'target': '*', 'ok': false,
                               'error': 'not checked: the node failed or was unreachable earlier in the play'}) -%}
  {%-   endif -%}
  {%- endfor -%}
  {{ rows }}
report: >-
  {{ ['ssh mesh of ' ~ groups[trainops_nodes_group] | length ~ ' nodes: '
      ~ (__trainops_ssh_mesh_results | selectattr('ok') | list | length) ~ '/'
      ~ (__trainops_ssh_mesh_results | length) ~ ' connections work (BatchMode, StrictHostKeyChecking=yes, by '
      ~ trainops_ssh_mesh_verify_targets | join(', ') ~ ')']
     + (['FROM -> TO (NAME): ERROR'] if __trainops_ssh_mesh_broken | length > 0 else [])
     + __trainops_ssh_mesh_broken | map(attribute='line') | list }}
broken: >-
  {%- set lines = [] -%}
  {%- for row in __trainops_ssh_mesh_results | rejectattr('ok') -%}
  {%-   set _ = lines.append({'line': row.from ~ ' -> ' ~ row.to ~ ' (' ~ row.target ~ '): ' ~ row.error}) -%}
  {%- endfor -%}
  {{ lines }}
pairs: >-
  {%- set pairs = [] -%}
  {%- set broken = __trainops_ssh_mesh_results | rejectattr('ok') | list -%}
  {%- for row in broken -%}
  {%-   set pair = row.from ~ ' -> ' ~ row.to -%}
  {%-   if (pairs | select('match', '^' ~ (pair | regex_escape) ~ ' [(]') | list | length) == 0 -%}
  {%-     set errors = [] -%}
  {%-     for other in broken | selectattr('from', 'eq', row.from) | selectattr('to', 'eq', row.to) -%}
  {%-       set _ = errors.append('by ' ~ other.target ~ ': ' ~ other.error) -%}
  {%-     endfor -%}
  {%-     set _ = pairs.append(pair ~ ' (' ~ errors | join(', ') ~ ')') -%}
  {%-   endif -%}
  {%- endfor -%}
  {{ pairs }}
""")


def old(name, **variables):
    """The old Jinja ``name`` rendered over ``variables`` (with the broken lines the report read from a task var)."""
    if name == 'report':
        variables['__trainops_ssh_mesh_broken'] = old('broken', **variables)
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(OLD[name]))


KINDS = [['address', 'hostname'], ['address'], ['hostname'], ['inventory_hostname'],
         ['address', 'hostname', 'inventory_hostname'], ['hostname', 'address']]
ERRORS = ['Permission denied (publickey).', 'Host key verification failed.', '', 'ssh: connect to host x port 22: '
          'Connection refused']


def mesh(rng, count):
    """``(nodes, hostvars)``: a random mesh (names that repeat across kinds, keys of several types), no check yet."""
    nodes = ['node%d' % i for i in range(count)]
    hostvars = {}
    for i, node in enumerate(nodes):
        address = rng.choice(['10.0.0.%d' % i, node])
        hostname = rng.choice([node, address, 'gpu-%02d' % i])
        names = [node] + [n for n in (address, hostname) if n != node]
        hostvars[node] = {'__trainops_ssh_mesh_address': address, '__trainops_ssh_mesh_hostname': hostname,
                          '__trainops_ssh_mesh_known_names': list(dict.fromkeys(names)),
                          '__trainops_ssh_mesh_host_keys': rng.sample(
                              ['ssh-ed25519 AAAAC3%d' % i, 'ecdsa-sha2-nistp256 AAAAE2%d' % i, 'ssh-rsa AAAAB3%d' % i],
                              rng.randint(0, 3))}
    return nodes, hostvars


def check_lines(rng, targets):
    """What ssh_mesh_check.sh could print for ``targets``: mostly a line per target, some broken, missing or noise."""
    lines = []
    for want in targets:
        roll = rng.random()
        if roll < 0.5:
            lines.append('%s\t0\t' % want['target'])
        elif roll < 0.75:
            lines.append('%s\t255\t%s' % (want['target'], rng.choice(ERRORS)))
        elif roll < 0.8:
            lines.append('other-name\t0\t')
        elif roll < 0.85:
            lines.append('%s\t1' % want['target'])
        elif roll < 0.9:
            lines.append('Warning: no tab on this line')
            lines.append('%s\t0\t' % want['target'])
        # else: no line for it
    return lines


@pytest.mark.parametrize('seed', range(60))
def test_the_filters_give_what_the_old_jinja_gave(seed):
    rng = random.Random(seed)
    nodes, hostvars = mesh(rng, rng.randint(1, 5))
    kinds = rng.choice(KINDS)
    base = dict(groups={'trainops_nodes': nodes}, trainops_nodes_group='trainops_nodes',
                trainops_ssh_mesh_verify_targets=kinds, hostvars=hostvars)

    assert ssh_mesh_known_hosts(nodes, hostvars) == old('known_hosts', **base)
    play_hosts = [node for node in nodes if rng.random() > 0.15]
    for node in nodes:
        targets = ssh_mesh_targets(nodes, node, hostvars, kinds)
        assert targets == old('targets', inventory_hostname=node, **base)
        hostvars[node]['__trainops_ssh_mesh_targets'] = targets
        if node in play_hosts and rng.random() > 0.1:
            hostvars[node]['__trainops_ssh_mesh_check'] = {'rc': 0, 'stdout_lines': check_lines(rng, targets)}
    results = ssh_mesh_results(nodes, hostvars, play_hosts)
    assert results == old('results', ansible_play_hosts=play_hosts, **base)
    with_results = dict(base, __trainops_ssh_mesh_results=results)
    assert ssh_mesh_report(results, nodes, kinds) == old('report', **with_results)
    assert ssh_mesh_pairs(results) == old('pairs', **with_results)


def test_targets_start_after_the_node_and_name_each_node_once_per_name():
    hostvars = {'a': {'__trainops_ssh_mesh_address': '10.0.0.1', '__trainops_ssh_mesh_hostname': 'a'},
                'b': {'__trainops_ssh_mesh_address': '10.0.0.2', '__trainops_ssh_mesh_hostname': 'gpu-b'},
                'c': {'__trainops_ssh_mesh_address': 'c', '__trainops_ssh_mesh_hostname': 'c'}}
    assert ssh_mesh_targets(['a', 'b', 'c'], 'b', hostvars, ['address', 'hostname', 'inventory_hostname']) == [
        {'node': 'c', 'target': 'c'},
        {'node': 'a', 'target': '10.0.0.1'}, {'node': 'a', 'target': 'a'},
        {'node': 'b', 'target': '10.0.0.2'}, {'node': 'b', 'target': 'gpu-b'}, {'node': 'b', 'target': 'b'}]


def test_results_pair_lines_with_targets_and_say_why_a_connection_fails():
    targets = [{'node': 'b', 'target': 'gpu-b'}, {'node': 'b', 'target': '10.0.0.2'}, {'node': 'a', 'target': 'a'},
               {'node': 'a', 'target': '10.0.0.1'}]
    hostvars = {'a': {'__trainops_ssh_mesh_targets': targets, '__trainops_ssh_mesh_check': {'stdout_lines': [
        'gpu-b\t0\t', 'stray line', '10.0.0.2\t255\tHost key verification failed.', 'a\t255\t']}},
        'b': {'__trainops_ssh_mesh_targets': []}}
    results = ssh_mesh_results(['a', 'b'], hostvars, ['a', 'b'])
    assert [(r['to'], r['target'], r['ok'], r['error']) for r in results] == [
        ('b', 'gpu-b', True, ''), ('b', '10.0.0.2', False, 'Host key verification failed.'),
        ('a', 'a', False, 'exit status 255'), ('a', '10.0.0.1', False, 'no result'),
        ('*', '*', False, NOT_CHECKED)]
    assert ssh_mesh_pairs(results) == [
        'a -> b (by 10.0.0.2: Host key verification failed.)',
        'a -> a (by a: exit status 255, by 10.0.0.1: no result)',
        'b -> * (by *: %s)' % NOT_CHECKED]
    assert ssh_mesh_report(results, ['a', 'b'], ['address', 'hostname'])[:3] == [
        'ssh mesh of 2 nodes: 1/5 connections work (BatchMode, StrictHostKeyChecking=yes, by address, hostname)',
        'FROM -> TO (NAME): ERROR', 'a -> b (10.0.0.2): Host key verification failed.']
    # a node that left the play is not read, whatever it registered
    assert ssh_mesh_results(['a'], hostvars, ['b']) == [
        {'from': 'a', 'to': '*', 'target': '*', 'ok': False, 'error': NOT_CHECKED}]


def test_a_mesh_that_works_is_one_line_and_no_pair():
    results = [{'from': 'a', 'to': 'a', 'target': 'a', 'ok': True, 'error': ''}]
    assert ssh_mesh_report(results, ['a'], ['hostname']) == [
        'ssh mesh of 1 nodes: 1/1 connections work (BatchMode, StrictHostKeyChecking=yes, by hostname)']
    assert ssh_mesh_pairs(results) == []


def test_known_hosts_lines_name_the_node_first():
    hostvars = {'a': {'__trainops_ssh_mesh_known_names': ['a', '10.0.0.1'],
                      '__trainops_ssh_mesh_host_keys': ['ssh-ed25519 AAAA', 'ssh-rsa BBBB']}}
    assert ssh_mesh_known_hosts(['a'], hostvars) == [
        {'node': 'a', 'name': 'a', 'key': 'a,10.0.0.1 ssh-ed25519 AAAA'},
        {'node': 'a', 'name': 'a', 'key': 'a,10.0.0.1 ssh-rsa BBBB'}]


@pytest.mark.parametrize('call, match', [
    (lambda: ssh_mesh_targets(['a'], 'z', {'a': {}}, ['address']), 'ssh_mesh_targets: z is not one of the nodes'),
    (lambda: ssh_mesh_targets(['a'], 'a', {'a': {}}, ['fqdn']), 'unknown kind.* fqdn'),
    (lambda: ssh_mesh_targets(['a'], 'a', {'a': {}}, ['address']), 'node a has no __trainops_ssh_mesh_address'),
    (lambda: ssh_mesh_targets('a', 'a', {}, ['address']), 'the input \\(the nodes\\) must be a list, not str'),
    (lambda: ssh_mesh_targets(['a'], 'a', {}, 'address'), 'kinds must be a list'),
    (lambda: ssh_mesh_known_hosts(['a'], {}), 'node a has no __trainops_ssh_mesh_known_names'),
    (lambda: ssh_mesh_known_hosts({'a': 1}, {}), 'must be a list, not dict'),
    (lambda: ssh_mesh_results(['a'], {'a': {'__trainops_ssh_mesh_check': {'stdout_lines': []}}}, ['a']),
     'node a has no __trainops_ssh_mesh_targets'),
    (lambda: ssh_mesh_results(['a'], {}, 'a'), 'play_hosts must be a list'),
    (lambda: ssh_mesh_report([{'from': 'a'}], ['a'], ['address']), 'must be the results of'),
    (lambda: ssh_mesh_pairs('broken'), 'must be a list, not str'),
])
def test_argument_checks(call, match):
    with pytest.raises(AnsibleFilterError, match=match):
        call()


def test_registered():
    assert sorted(FILTERS) == ['ssh_mesh_known_hosts', 'ssh_mesh_pairs', 'ssh_mesh_plan', 'ssh_mesh_report',
                               'ssh_mesh_results', 'ssh_mesh_targets']


# --- the task files call them by FQCN: their expressions rendered as they are, against the old Jinja -----------

def task_arg(file_name, task_name, *keys):
    """An argument of a task of roles/ssh_mesh/tasks/<file_name> (keys: the path below the task)."""
    with open(os.path.join(ROOT, 'roles', 'ssh_mesh', 'tasks', file_name)) as handle:
        tasks = yaml.safe_load(handle)
    value = next(task for task in tasks if task['name'] == task_name)
    for key in keys:
        value = value[key]
    return value


def render(expression, **variables):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expression))


def test_the_task_files_give_what_the_old_jinja_gave(collection_finder):
    rng = random.Random(7)
    nodes, hostvars = mesh(rng, 4)
    kinds = ['address', 'hostname', 'inventory_hostname']
    base = dict(groups={'mesh': nodes}, trainops_nodes_group='mesh', trainops_ssh_mesh_verify_targets=kinds,
                hostvars=hostvars)
    assert render(task_arg('known_hosts.yml', 'Put the host keys of every node into known_hosts', 'loop'),
                  **base) == old('known_hosts', **base)
    for node in nodes:
        targets = render(task_arg('verify.yml', 'List the names this node connects to', 'ansible.builtin.set_fact',
                                  '__trainops_ssh_mesh_targets'), inventory_hostname=node, **base)
        assert targets == old('targets', inventory_hostname=node, **base)
        hostvars[node].update(__trainops_ssh_mesh_targets=targets,
                              __trainops_ssh_mesh_check={'stdout_lines': check_lines(rng, targets)})
    play_hosts = nodes[:3]
    results = render(task_arg('verify.yml', 'Collect the results of all nodes', 'ansible.builtin.set_fact',
                              '__trainops_ssh_mesh_results'), ansible_play_hosts=play_hosts, **base)
    assert results == old('results', ansible_play_hosts=play_hosts, **base)
    assert not all(row['ok'] for row in results)
    with_results = dict(base, __trainops_ssh_mesh_results=results)
    assert render(task_arg('verify.yml', 'Show the SSH mesh', 'ansible.builtin.debug', 'msg'),
                  **with_results) == old('report', **with_results)
    assert render(task_arg('verify.yml', 'Fail when a node cannot reach another one', 'vars',
                           '__trainops_ssh_mesh_pairs'), **with_results) == old('pairs', **with_results)
    with pytest.raises(AnsibleError, match='is not one of the nodes'):
        render(task_arg('verify.yml', 'List the names this node connects to', 'ansible.builtin.set_fact',
                        '__trainops_ssh_mesh_targets'), inventory_hostname='elsewhere', **base)
