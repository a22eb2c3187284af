# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the layout promises (docs/contributing/architecture.md): outcomes are compared through
module_utils/_outcomes.py (its tests and filters), never as strings in the roles' and playbooks' Jinja; no Python file
of plugins/ or hack/ is longer than MAX_LINES (a file that grows past it is split by concern); the architecture
document names every module_utils file, and only files that exist; no task of the roles or playbooks runs
ansible-playbook (the health check runs in the play that asks for it). That generic code names no launcher is
tests/unit/plugins/module_utils/test__launchers.py's."""

from __future__ import annotations

import os
import re

import pytest
import yaml

from ansible_collections.trainops.multinode.plugins.module_utils import _outcomes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MAX_LINES = 900
"""The most lines a Python file of plugins/ or hack/ may have."""

VOCABULARY = frozenset(_outcomes.OUTCOMES) | frozenset(_outcomes.VERDICTS) | frozenset(_outcomes.STOP_REASONS) \
    | frozenset(_outcomes.RUN_STATUSES)
"""Every name of how a job ends: outcomes, verdicts, stop reasons and run statuses."""

_QUOTED = r"""(?:'[^']*'|"[^"]*")"""
_COMPARISONS = (
    re.compile(r'(?:==|!=)\s*(?P<names>%s)' % _QUOTED),                       # x == 'succeeded'
    re.compile(r'(?P<names>%s)\s*(?:==|!=|(?:not\s+)?in\b)' % _QUOTED),         # 'failed' == x, 'failed' in x
    re.compile(r'\bin\s*(?P<names>[\[(]\s*%s(?:\s*,\s*%s)*\s*,?\s*[\])])' % (_QUOTED, _QUOTED)),  # x in ['a', 'b']
    re.compile(r"""\b(?:select|reject|selectattr|rejectattr)\([^)]*['"](?:eq|equalto|==|ne|!=|in|sameas)['"]\s*,\s*"""
               r'(?P<names>%s|\[[^\]]*\])' % _QUOTED),                            # select('eq', 'running')
    re.compile(r'\bis\s+(?:not\s+)?(?:eq|equalto|ne|sameas|in)\b\s*\(?\s*(?P<names>%s|\[[^\]]*\])' % _QUOTED),
)


def outcome_comparisons(line):
    """The names of how a job ends that ``line`` compares as strings: a comparison whose quoted names are all names of
    the vocabulary (``state in ['absent', 'empty', 'repo']`` compares another record's states, not a run status)."""
    code = line.split('#', 1)[0] if line.lstrip().startswith('#') else line
    found = []
    for pattern in _COMPARISONS:
        for match in pattern.finditer(code):
            names = re.findall(r"""'([^']*)'|"([^"]*)\"""", match.group('names'))
            names = [a or b for a, b in names]
            if names and all(name in VOCABULARY for name in names):
                found.extend(names)
    return found


def yaml_files(*tops):
    for top in tops:
        for base, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(('.yml', '.yaml', '.j2')):
                    yield os.path.join(base, name)


@pytest.mark.parametrize('line, names', [
    ("  when: __trainops_report.outcome != 'succeeded'", ['succeeded']),
    ('  until: r.job.status != "running"', ['running']),
    ("  when: x.outcome in ['failed', 'stalled']", ['failed', 'stalled']),
    ("{{ 'stopped' == manifest.outcome }}", ['stopped']),
    ("{{ states | select('eq', 'running') | list }}", ['running']),
    ("{{ points | rejectattr('outcome', 'equalto', 'succeeded') | list }}", ['succeeded']),
    ("{{ v.state is eq 'gone' }}", ['gone']),
    ("  - __trainops_code_sync_node.state in ['absent', 'empty', 'repo']", []),
    ("  when: x.outcome is not trainops.multinode.outcome_succeeded", []),
    ("  state: absent", []),
    ("  # outcome != 'succeeded' in a comment", []),
])
def test_the_scan_finds_outcome_comparisons(line, names):
    assert outcome_comparisons(line) == names


def test_no_outcome_is_compared_as_a_string_in_yaml():
    found = []
    for path in yaml_files('roles', 'playbooks'):
        with open(path, encoding='utf-8') as handle:
            for number, line in enumerate(handle, 1):
                names = outcome_comparisons(line)
                if names:
                    found.append('%s:%d: %s' % (os.path.relpath(path, ROOT), number, ', '.join(names)))
    assert not found, ('outcomes compared as strings (use the tests and filters of module_utils/_outcomes.py, '
                       'plugins/test/outcome.py):\n' + '\n'.join(found))


def python_files(*tops):
    for top in tops:
        for base, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = sorted(d for d in dirs if d != '__pycache__')
            for name in sorted(files):
                if name.endswith('.py'):
                    yield os.path.join(base, name)


def test_no_python_file_of_plugins_or_hack_is_longer_than_the_limit():
    too_long = []
    for path in python_files('plugins', 'hack'):
        with open(path, encoding='utf-8') as handle:
            count = sum(1 for _line in handle)
        if count > MAX_LINES:
            too_long.append('%s: %d lines' % (os.path.relpath(path, ROOT), count))
    assert not too_long, 'longer than %d lines (split it by concern):\n%s' % (MAX_LINES, '\n'.join(too_long))


ARCHITECTURE = os.path.join(ROOT, 'docs', 'contributing', 'architecture.md')


def test_the_architecture_names_every_module_utils_file_and_only_those():
    with open(ARCHITECTURE, encoding='utf-8') as handle:
        text = handle.read()
    rules = text[text.index('## Where each rule lives'):]
    files = set()
    for path in python_files(os.path.join('plugins', 'module_utils')):
        if os.path.basename(path) != '__init__.py':
            files.add(os.path.basename(path))
    unnamed = sorted(name for name in files if '`%s`' % name not in rules and '/%s`' % name not in rules)
    assert not unnamed, 'docs/contributing/architecture.md, "Where each rule lives", names no row for: %s' % unnamed
    named = set(re.findall(r'`(?:_nccl_env/)?(_?[a-z_]+\.py)`', rules))
    missing = sorted(name for name in named if name not in files)
    assert not missing, 'docs/contributing/architecture.md names module_utils files that do not exist: %s' % missing


# --- no nested ansible-playbook -----------------------------------------------------------------------------------

RUNNERS = frozenset(('command', 'shell', 'raw', 'script', 'expect'))
"""The modules that run a program given as text or argv (bare, ansible.builtin., ansible.legacy.)."""

ANSIBLE_PROGRAMS = re.compile(r'^ansible(-playbook|-runner|-navigator|-pull)?$')
"""A program that runs Ansible again: a playbook in a play of its own, with a command line rebuilt from the
launch's (privileges and secrets passed again)."""

TASK_KEYWORDS = frozenset((
    'name', 'when', 'vars', 'register', 'loop', 'loop_control', 'with_items', 'become', 'become_user', 'become_method',
    'delegate_to', 'delegate_facts', 'run_once', 'changed_when', 'failed_when', 'ignore_errors', 'ignore_unreachable',
    'environment', 'tags', 'no_log', 'until', 'retries', 'delay', 'args', 'notify', 'check_mode', 'diff', 'async',
    'poll', 'throttle', 'timeout', 'listen', 'any_errors_fatal', 'collections', 'connection', 'debugger', 'module_defaults',
    'block', 'rescue', 'always'))


def tasks_of(node):
    """Every task in a tasks file, a play or a block, blocks' own tasks included."""
    if isinstance(node, list):
        for item in node:
            yield from tasks_of(item)
    elif isinstance(node, dict):
        if 'hosts' in node or 'import_playbook' in node or 'ansible.builtin.import_playbook' in node:
            for key in ('pre_tasks', 'tasks', 'post_tasks', 'handlers'):
                yield from tasks_of(node.get(key) or [])
            return
        yield node
        for key in ('block', 'rescue', 'always'):
            yield from tasks_of(node.get(key) or [])


def programs(task):
    """The programs a task of RUNNERS runs, as written: the first word of its text or argv; None where the task takes
    the whole command from a variable (which could be anything, ansible-playbook included)."""
    action = next((key for key in task if key not in TASK_KEYWORDS), None)
    if action is None or action.rsplit('.', 1)[-1] not in RUNNERS:
        return []
    args = task[action]
    argv = args.get('argv') if isinstance(args, dict) else None
    text = (args.get('cmd') or args.get('_raw_params')) if isinstance(args, dict) else args
    if isinstance(argv, list):
        return [str(argv[0])]
    text = argv if argv is not None else text
    if not isinstance(text, str) or not text.strip():
        return [None]
    text = text.strip()
    if re.fullmatch(r'\{\{\s*item\s*\}\}', text) and isinstance(task.get('loop'), list):
        return [str(item[0]) if isinstance(item, list) and item else str(item).split()[0] for item in task['loop']]
    if text.startswith('{{'):
        # a list built in Jinja: its first literal names the program ({{ ['sbatch', '--parsable'] + ... }})
        first = re.match(r"""\{\{\s*\[\s*(?:'([^'{}]+)'|"([^"{}]+)")""", text)
        return [(first.group(1) or first.group(2)) if first else None]
    return [text.split()[0]]


def nested_ansible(task):
    """Why ``task`` (may) run Ansible again, or ''."""
    for program in programs(task):
        if program is None:
            return 'runs a command taken whole from a variable'
        if ANSIBLE_PROGRAMS.match(os.path.basename(program)):
            return 'runs %s' % program
    return ''


@pytest.mark.parametrize('task, why', [
    # the health check before an attempt, as it was: playbooks/health.yml as a nested ansible-playbook
    ({'name': 'run it', 'ansible.builtin.command': {'argv': '{{ __trainops_health_command.argv }}'}},
     'runs a command taken whole from a variable'),
    ({'ansible.builtin.command': {'argv': ['/usr/bin/ansible-playbook', 'playbooks/health.yml']}}, 'runs /usr/bin/ansible-playbook'),
    ({'ansible.builtin.shell': 'ansible-playbook playbooks/health.yml -e x=1'}, 'runs ansible-playbook'),
    ({'command': {'cmd': 'ansible-runner run /tmp/x'}}, 'runs ansible-runner'),
    ({'ansible.builtin.command': {'argv': '{{ item }}'}, 'loop': [['docker', 'ps'], ['ansible', 'all', '-m', 'ping']]},
     'runs ansible'),
    ({'ansible.builtin.command': {'argv': "{{ ['sbatch', '--parsable'] + extra }}"}}, ''),
    ({'ansible.builtin.command': {'argv': ['ssh-keyscan', '-T', '5']}}, ''),
    ({'ansible.builtin.script': {'cmd': 'ssh_mesh_check.sh {{ timeout }}'}}, ''),
    ({'ansible.builtin.debug': {'msg': 'Status: ansible-playbook playbooks/status.yml -e run_id=x'}}, ''),
])
def test_the_scan_finds_a_nested_ansible(task, why):
    assert nested_ansible(task) == why


def test_no_task_runs_ansible_playbook():
    found, runners = [], 0
    for path in yaml_files('roles', 'playbooks'):
        if not path.endswith(('.yml', '.yaml')) or os.sep + 'meta' + os.sep in path:
            continue
        with open(path, encoding='utf-8') as handle:
            document = yaml.safe_load(handle)
        for task in tasks_of(document or []):
            runners += bool(programs(task))
            why = nested_ansible(task)
            if why:
                found.append('%s: %s (%s)' % (os.path.relpath(path, ROOT), task.get('name'), why))
    assert runners > 0, 'the scan found no command task at all: it reads the task files wrongly'
    assert not found, ('a task that runs Ansible again (run the steps in the play: include their tasks with the '
                       'settings as variables):\n' + '\n'.join(found))
