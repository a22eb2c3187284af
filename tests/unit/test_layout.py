# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the layout promises (docs/contributing/architecture.md): outcomes are compared through
module_utils/_outcomes.py (its tests and filters), never as strings in the roles' and playbooks' Jinja; no Python file
of plugins/ or hack/ is longer than MAX_LINES (a file that grows past it is split by concern); the architecture
document names every module_utils file, and only files that exist. That generic code names no launcher is
tests/unit/plugins/module_utils/test__launchers.py's."""

from __future__ import annotations

import os
import re

import pytest

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
