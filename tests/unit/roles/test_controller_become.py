"""Work on the controller runs as the invoking user (the guide's trust rule, issue 37): every task of roles/ and
playbooks/ that runs on the controller - delegated to localhost, a local_action, connection local, or in a play of
hosts localhost - says ``become: false`` itself or inherits it from its block, role entry or play. Under
``ansible-playbook --become`` such a task would otherwise run as root on the controller: the user-writable venv, the
cwd's ansible.cfg and inventory plugins, root-owned files in the user's experiments directory."""
import glob
import os

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
LOCAL_NAMES = ('localhost', '127.0.0.1', '::1')
TASK_LISTS = ('tasks', 'pre_tasks', 'post_tasks', 'handlers', 'block', 'rescue', 'always')


def on_controller(entry):
    """Whether a task, block or play entry itself puts its work on the controller."""
    delegate = str(entry.get('delegate_to', '')).strip()
    return (delegate in LOCAL_NAMES or 'local_action' in entry or entry.get('connection') == 'local'
            or str(entry.get('hosts', '')).strip() in LOCAL_NAMES)


def controller_tasks_without_become_false(entries, where, local=False, become_false=False):
    """``(file:name)`` of every task in ``entries`` (a task list or a playbook) that runs on the controller without
    ``become: false`` of its own or from a block or play around it."""
    missing = []
    for entry in entries or []:
        if not isinstance(entry, dict):
            continue
        here_local = local or on_controller(entry)
        here_false = entry.get('become') is False if 'become' in entry else become_false
        lists = [key for key in TASK_LISTS if isinstance(entry.get(key), list)]
        if lists:
            for key in lists:
                missing += controller_tasks_without_become_false(entry[key], where, here_local, here_false)
            continue
        if here_local and not here_false and 'roles' not in entry:
            missing.append('%s: %s' % (where, entry.get('name', sorted(entry))))
        for role in entry.get('roles') or []:
            if here_local and isinstance(role, dict) and role.get('become') is not False and not here_false:
                missing.append('%s: role %s' % (where, role.get('role', role)))
    return missing


def yaml_files():
    files = sorted(glob.glob(os.path.join(REPO, 'roles', '*', 'tasks', '*.yml'))
                   + glob.glob(os.path.join(REPO, 'roles', '*', 'handlers', '*.yml'))
                   + glob.glob(os.path.join(REPO, 'playbooks', '*.yml')))
    assert len(files) > 40, files
    return files


@pytest.mark.parametrize('path', yaml_files(), ids=lambda p: os.path.relpath(p, REPO))
def test_every_task_on_the_controller_has_become_false(path):
    with open(path) as handle:
        entries = yaml.safe_load(handle)
    assert controller_tasks_without_become_false(entries, os.path.relpath(path, REPO)) == []


def test_the_rule_finds_what_it_must():
    entries = [
        {'name': 'delegated', 'ansible.builtin.command': 'x', 'delegate_to': 'localhost'},
        {'name': 'delegated, become false', 'ansible.builtin.command': 'x', 'delegate_to': 'localhost', 'become': False},
        {'name': 'delegated, become templated', 'ansible.builtin.command': 'x', 'delegate_to': 'localhost',
         'become': '{{ false }}'},
        {'name': 'on the node', 'ansible.builtin.command': 'x', 'delegate_to': '{{ item }}'},
        {'name': 'local action', 'local_action': {'module': 'ansible.builtin.command', 'cmd': 'x'}},
        {'name': 'a block on the controller', 'delegate_to': '127.0.0.1', 'become': False,
         'block': [{'name': 'inherits', 'ansible.builtin.debug': {}},
                   {'name': 'takes become back', 'ansible.builtin.debug': {}, 'become': True}]},
        {'name': 'a block on the controller without', 'run_once': True, 'delegate_to': 'localhost',
         'block': [{'name': 'in it', 'ansible.builtin.debug': {}}]},
    ]
    assert controller_tasks_without_become_false(entries, 'f.yml') == [
        'f.yml: delegated', 'f.yml: delegated, become templated', 'f.yml: local action', 'f.yml: takes become back',
        'f.yml: in it']
    plays = [{'name': 'p', 'hosts': 'localhost', 'tasks': [{'name': 't', 'ansible.builtin.debug': {}}]},
             {'name': 'q', 'hosts': 'localhost', 'roles': [{'role': 'r'}]},
             {'name': 'ok', 'hosts': 'localhost', 'become': False, 'roles': [{'role': 'r'}],
              'tasks': [{'name': 'u', 'ansible.builtin.debug': {}}]},
             {'name': 'nodes', 'hosts': 'trainops_nodes', 'tasks': [{'name': 'v', 'ansible.builtin.debug': {}}]}]
    assert controller_tasks_without_become_false(plays, 'p.yml') == ['p.yml: t', 'p.yml: role r']
