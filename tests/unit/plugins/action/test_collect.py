# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collect action plugin (roles/job/tasks/collect.yml): the module runs it asks of the node (torchrun's stop and
query, find; faked here), the plan of the node's files and their fetch (the fetch action, faked), the answer unsafe."""

from __future__ import annotations

from unittest.mock import MagicMock

import pytest

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.template import is_trusted_as_template, trust_as_template

from ansible_collections.trainops.multinode.plugins.action.collect import ActionModule

from fake_task import make_action

RUN = '/n1/state/runs/r1'


def action(tmp_path, hostvars=None, answers=None, fetched=None, **more):
    plugin, dummy = make_action(ActionModule, 'trainops.multinode.collect', {})
    plugin._templar = MagicMock()
    plugin._templar.template.side_effect = lambda value: value
    answers = dict({'trainops.multinode.torchrun': {'job': {'run_dir': RUN, 'log_path': RUN + '/node.log', 'exit_code': 0},
                                                    'log_tail': ['done'], 'changed': False, 'invocation': {}},
                    'ansible.legacy.find': {'files': [{'path': RUN + '/outputs/rank_01_metrics.jsonl'}]}},
                   **(answers or {}))
    calls = []

    def module(module_name, module_args, task_vars):
        calls.append((module_name, dict(module_args)))
        answer = answers[module_name]
        if isinstance(answer, Exception):
            raise answer
        if module_name == 'trainops.multinode.torchrun' and module_args['state'] == 'stopped':
            return {'changed': True, 'stopped_pids': [7]}
        if module_name == 'ansible.legacy.find' and module_args.get('recurse'):
            return {'files': [{'path': RUN + '/profiles/node1_rank1.json'}, {'path': RUN + '/profiles/../x'}]}
        return answer
    plugin._execute_module = module
    fetches = []

    def fetch_action(name, task, **kwargs):
        fetches.append(task.args)
        fetch = MagicMock()
        fetch.run.return_value = (fetched or {}).get(task.args['src'], {'changed': True})
        return fetch
    plugin._shared_loader_obj = MagicMock()
    plugin._shared_loader_obj.action_loader.get.side_effect = fetch_action
    plugin._task.copy.side_effect = MagicMock
    task_vars = dict(inventory_hostname='node1', hostvars=hostvars or {}, ansible_play_hosts=['node0', 'node1'],
                     trainops_collect_state_dir='/n1/state', trainops_collect_run_id='r1', trainops_node_id='',
                     trainops_collect_experiment_dir=str(tmp_path), trainops_collect_nodes=['node0', 'node1'],
                     trainops_collect_patterns=['*.jsonl'], trainops_stop_timeout='30', trainops_log_lines='50',
                     trainops_profile='')
    task_vars.update(more)
    return plugin, task_vars, calls, fetches


def test_a_node_s_final_state_log_and_outputs_are_fetched_each_to_its_place(tmp_path):
    plugin, task_vars, calls, fetches = action(tmp_path)
    got = plugin.run(task_vars=task_vars)
    assert not got.get('failed') and got['changed'] and got['fetched'] == 2 and got['stopped'] is None
    assert got['job']['exit_code'] == 0 and got['log_tail'] == ['done'] and 'invocation' not in got
    assert calls == [('trainops.multinode.torchrun', {'state': 'query', 'log_lines': 50, 'state_dir': '/n1/state',
                                                      'node_id': '', 'run_id': 'r1'}),
                     ('ansible.legacy.find', {'paths': RUN + '/outputs', 'file_type': 'file', 'follow': False,
                                              'patterns': ['*.jsonl']})]
    assert fetches == [
        {'src': RUN + '/node.log', 'dest': str(tmp_path / 'logs' / 'node_1.txt'), 'flat': True, 'fail_on_missing': False},
        {'src': RUN + '/outputs/rank_01_metrics.jsonl', 'dest': str(tmp_path / 'outputs' / 'node1' / 'rank_01_metrics.jsonl'),
         'flat': True, 'fail_on_missing': False}]
    assert [plan['refused'] for plan in got['collected']] == [[], []]


def test_the_node_s_answers_are_never_templated_again(tmp_path):
    plugin, task_vars, calls, fetches = action(
        tmp_path, answers={'trainops.multinode.torchrun': {'job': {'run_dir': RUN}, 'log_tail': [trust_as_template('{{ x }}')]}})
    got = plugin.run(task_vars=task_vars)
    assert got['log_tail'] == ['{{ x }}'] and not is_trusted_as_template(got['log_tail'][0])


def test_with_profiles_a_path_that_leaves_the_node_s_place_is_refused_and_the_rest_fetched(tmp_path):
    plugin, task_vars, calls, fetches = action(tmp_path, trainops_profile='torch')
    got = plugin.run(task_vars=task_vars)
    assert calls[-1] == ('ansible.legacy.find', {'paths': RUN + '/profiles', 'file_type': 'file', 'follow': False,
                                                 'recurse': True})
    assert fetches[-1]['dest'] == str(tmp_path / 'profiles' / 'node1' / 'node1_rank1.json') and len(fetches) == 3
    assert got['collected'][2]['refused'] == [
        "node1: refused profile '%s/profiles/../x': a \"\", \".\" or \"..\" component" % RUN]
    assert not got.get('failed')


def test_when_a_node_failed_the_job_is_stopped_first_with_the_verdict_s_reason(tmp_path):
    hostvars = {'node0': {'__trainops_run_error': 'node0: exit code 1'}, 'node1': {'__trainops_run_error': ''}}
    plugin, task_vars, calls, fetches = action(tmp_path, hostvars)
    got = plugin.run(task_vars=task_vars)
    assert calls[0] == ('trainops.multinode.torchrun', {'state': 'stopped', 'stop_timeout': 30, 'stop_reason': 'peer',
                                                        'stop_detail': 'node0: exit code 1', 'state_dir': '/n1/state',
                                                        'node_id': '', 'run_id': 'r1'})
    assert got['stopped']['stopped_pids'] == [7] and got['changed']


def test_a_failed_fetch_fails_naming_the_file_and_the_others_are_fetched(tmp_path):
    plugin, task_vars, calls, fetches = action(tmp_path, fetched={RUN + '/node.log': {'failed': True, 'msg': 'denied'}})
    got = plugin.run(task_vars=task_vars)
    assert got['failed'] and got['msg'] == 'the fetch from node1 failed: %s/node.log: denied' % RUN
    assert len(fetches) == 2 and got['fetched'] == 1


def test_a_failed_query_is_the_task_s_failure_and_nothing_is_listed(tmp_path):
    plugin, task_vars, calls, fetches = action(
        tmp_path, answers={'trainops.multinode.torchrun': {'failed': True, 'msg': 'no such run r1'}})
    got = plugin.run(task_vars=task_vars)
    assert got['failed'] and got['msg'] == 'no such run r1' and len(calls) == 1 and not fetches


def test_a_node_that_does_not_answer_is_unreachable_and_a_bad_node_name_fails(tmp_path):
    plugin, task_vars, calls, fetches = action(
        tmp_path, answers={'trainops.multinode.torchrun': AnsibleConnectionFailure('gone')})
    with pytest.raises(AnsibleConnectionFailure):
        plugin.run(task_vars=task_vars)
    plugin, task_vars, calls, fetches = action(tmp_path, inventory_hostname='gpu 1', trainops_collect_nodes=['gpu 1'])
    with pytest.raises(AnsibleActionFail, match="collect_plan: node name 'gpu 1' cannot name its directory"):
        plugin.run(task_vars=task_vars)
    assert not fetches
