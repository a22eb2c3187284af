# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The experiment and git_state actions: in the task's worker on a local connection, the module elsewhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from unittest.mock import MagicMock

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.trainops.multinode.plugins.action.experiment import ActionModule as ExperimentAction
from ansible_collections.trainops.multinode.plugins.action.git_state import ActionModule as GitStateAction
from ansible_collections.trainops.multinode.plugins.action.sweep import ActionModule as SweepAction
from ansible_collections.trainops.multinode.tests.unit.plugins.action import fake_task


def make_action(cls, args, transport='local', check_mode=False, name='trainops.multinode.experiment'):
    action, dummy = fake_task.make_action(cls, name, args, transport=transport, check_mode=check_mode)
    action._execute_module = MagicMock(return_value={'changed': False, 'ran': 'module'})
    return action


def test_experiment_on_the_controller_runs_in_the_worker(tmp_path):
    action = make_action(ExperimentAction, {'root': str(tmp_path), 'name': 'run1'})
    first = action.run(task_vars={})
    second = make_action(ExperimentAction, {'root': str(tmp_path), 'name': 'run1'}).run(task_vars={})
    assert not action._execute_module.called
    assert first['changed'] and first['path'] == str(tmp_path / 'run1')
    assert second['path'] == str(tmp_path / 'run1_2'), 'an existing experiment directory is never reused'


def test_experiment_reported_writes_the_manifest_in_the_worker(tmp_path):
    path = make_action(ExperimentAction, {'root': str(tmp_path), 'name': 'run1'}).run(task_vars={})['path']
    result = make_action(ExperimentAction, {'state': 'reported', 'path': path,
                                            'manifest': {'run_id': 'run1', 'outcome': 'running'}}).run(task_vars={})
    assert not result.get('failed')
    with open(os.path.join(path, 'manifest.json')) as f:
        assert json.load(f)['run_id'] == 'run1'


def test_experiment_check_mode_creates_nothing(tmp_path):
    result = make_action(ExperimentAction, {'root': str(tmp_path), 'name': 'x'}, check_mode=True).run(task_vars={})
    assert result['changed'] and not (tmp_path / 'x').exists()


def test_experiment_error_fails_the_task_with_its_message(tmp_path):
    (tmp_path / 'file').write_text('')
    result = make_action(ExperimentAction, {'root': str(tmp_path / 'file'), 'name': 'x'}).run(task_vars={})
    assert result['failed'] and result['msg']


def test_experiment_options_are_checked_as_the_module_checks_them(tmp_path):
    with pytest.raises(AnsibleActionFail, match='state is reported but all of the following are missing: path'):
        make_action(ExperimentAction, {'state': 'reported'}).run(task_vars={})


def test_on_another_connection_the_module_runs_on_the_host(tmp_path):
    action = make_action(ExperimentAction, {'root': str(tmp_path), 'name': 'x'}, transport='ssh')
    action._remove_tmp_path = MagicMock()
    result = action.run(task_vars={})
    assert action._execute_module.called and result['ran'] == 'module'
    assert not (tmp_path / 'x').exists()


@pytest.mark.skipif(shutil.which('git') is None, reason='git is not installed')
def test_git_state_of_a_checkout_in_the_worker(tmp_path):
    env = dict(os.environ, GIT_AUTHOR_NAME='t', GIT_AUTHOR_EMAIL='t@x', GIT_COMMITTER_NAME='t', GIT_COMMITTER_EMAIL='t@x')
    subprocess.run(['git', 'init', '-q', '-b', 'main', str(tmp_path)], check=True, env=env)
    (tmp_path / 'a.py').write_text('x')
    subprocess.run(['git', '-C', str(tmp_path), 'add', 'a.py'], check=True, env=env)
    subprocess.run(['git', '-C', str(tmp_path), 'commit', '-q', '-m', 'one'], check=True, env=env)
    (tmp_path / 'a.py').write_text('y')
    action = make_action(GitStateAction, {'path': str(tmp_path)}, name='trainops.multinode.git_state')
    result = action.run(task_vars={})
    assert not action._execute_module.called and not result.get('failed')
    assert result['git']['branch'] == 'main' and result['git']['dirty'] is True and result['changed'] is False


def test_git_state_bad_option_fails_without_running_git(tmp_path):
    result = make_action(GitStateAction, {'path': str(tmp_path), 'max_files': -1},
                         name='trainops.multinode.git_state').run(task_vars={})
    assert result['failed'] and 'max_files' in result['msg'] and 'git' not in result


def test_sweep_on_the_controller_plans_and_records_in_the_worker(tmp_path):
    action = make_action(SweepAction, {'state': 'planned', 'root': str(tmp_path), 'name': 's',
                                       'sweep': {'channels': [16, 32]}}, name='trainops.multinode.sweep')
    planned = action.run(task_vars={})
    assert not action._execute_module.called and not planned.get('failed')
    assert len(planned['points']) == 2 and os.path.isdir(planned['path'])
    recorded = make_action(SweepAction, {'state': 'recorded', 'sweep_dir': planned['path'], 'index': 1,
                                         'update': {'status': 'running'}}, name='trainops.multinode.sweep').run(task_vars={})
    assert recorded['changed'] and recorded['point']['status'] == 'running'


def test_sweep_error_fails_the_task_with_its_message(tmp_path):
    result = make_action(SweepAction, {'state': 'planned', 'sweep': {'channels': [16]}},
                         name='trainops.multinode.sweep').run(task_vars={})
    assert result['failed'] and 'root or sweep_dir is required' in result['msg']
