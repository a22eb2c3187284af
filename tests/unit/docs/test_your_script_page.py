# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""docs/your-script.md against the code: the TRAINOPS_* variables a rank gets, the variables torchrun sets, the
metrics fields the summary reads, the progress pattern, and the page's Python examples.

The TRAINOPS_* variables are read where the launch builds them: the role's variables that roles/job/vars/main.yml
combines into ``__trainops_env`` (followed from that expression into vars/main.yml and into the tasks that set them,
so a new piece of the environment is found too), and the Python that adds to it on the node (module_utils/_torchrun.py,
_supervisor.py, _launchers.py, _srun.py, _launch_dirs.py (the resumed run's), _launch_plan.py (the run's own, filter
launch_entry), roles/job/files/profile_rank.py).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re

import pytest
import yaml

from ansible_collections.trainops.multinode.plugins.action.torchrun_wait import DEFAULT_PROGRESS_PATTERN
from ansible_collections.trainops.multinode.plugins.module_utils._experiment import SUMMARY_FIELDS
from ansible_collections.trainops.multinode.plugins.module_utils._torchrun import SECRET_NAMES_VAR

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..')
PAGE = os.path.join(ROOT, 'docs', 'your-script.md')
ROLE = os.path.join(ROOT, 'roles', 'job')
NAME = re.compile(r'TRAINOPS_[A-Z0-9_]+')
ROLE_VAR = re.compile(r'\b(__trainops_[a-z0-9_]+)')
RANK_ENV_PYTHON = [os.path.join(ROOT, 'plugins', 'module_utils', name)
                   for name in ('_torchrun.py', '_supervisor.py', '_launchers.py', '_srun.py', '_launch_dirs.py',
                                '_resume_plan.py', '_launch_plan.py')]
RANK_ENV_PYTHON.append(os.path.join(ROLE, 'files', 'profile_rank.py'))
NCCL_ENV_PYTHON = [os.path.join(ROOT, 'plugins', 'action', 'nccl_env.py')] + sorted(
    glob.glob(os.path.join(ROOT, 'plugins', 'module_utils', '_nccl_env', '*.py')))
"""What ``__trainops_nccl.env`` (the nccl_env action's result) is built by."""


def read(path):
    with open(path, encoding='utf-8') as handle:
        return handle.read()


def section(heading):
    """The page's lines under ``heading`` (a whole heading line), up to the next heading of any level."""
    lines = read(PAGE).splitlines()
    assert heading in lines, 'docs/your-script.md has no heading %r' % heading
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith('#')), len(lines))
    return lines[start:end]


def first_column(heading):
    """The names in backticks of the first column of the table under ``heading`` (a cell may hold several)."""
    names = []
    for line in section(heading):
        cells = line.split('|')
        if len(cells) > 2 and not set(cells[1].strip()) <= set('-: '):
            names += re.findall(r'`([^`]+)`', cells[1])
    return names


def names_in(value):
    """TRAINOPS_* names in a role variable's value: a mapping's keys and values, a list's items, a string's text."""
    if isinstance(value, dict):
        return set().union(*(names_in(k) | names_in(v) for k, v in value.items())) if value else set()
    if isinstance(value, list):
        return set().union(*(names_in(v) for v in value)) if value else set()
    return set(NAME.findall(str(value)))


def set_facts():
    """Every role variable the job role's tasks set with set_fact: ``{name: [value, ...]}``."""
    found = {}

    def walk(tasks):
        for task in tasks or []:
            if not isinstance(task, dict):
                continue
            for key in ('block', 'rescue', 'always'):
                walk(task.get(key))
            for name, value in (task.get('ansible.builtin.set_fact') or {}).items():
                found.setdefault(name, []).append(value)

    for path in sorted(glob.glob(os.path.join(ROLE, 'tasks', '*.yml'))):
        walk(yaml.safe_load(read(path)))
    return found


def yaml_names():
    """The TRAINOPS_* names of the pieces ``__trainops_env`` combines (roles/job/vars/main.yml)."""
    variables = yaml.safe_load(read(os.path.join(ROLE, 'vars', 'main.yml')))
    facts = set_facts()
    pieces = set(ROLE_VAR.findall(variables['__trainops_env']))
    assert pieces, '__trainops_env names no role variable: %r' % variables['__trainops_env']
    names = set()
    for piece in sorted(pieces):
        if piece == '__trainops_nccl':
            # registered from the nccl_env action: the node's NCCL/RCCL part
            names |= set().union(*(set(NAME.findall(read(path))) for path in NCCL_ENV_PYTHON))
        elif piece in variables:
            names |= names_in(variables[piece])
        else:
            assert piece in facts, ('%s (in __trainops_env) is set neither in roles/job/vars/main.yml nor by a set_fact '
                                    'of roles/job/tasks: the test cannot tell what it adds' % piece)
            names |= set().union(*(names_in(value) for value in facts[piece]))
    return names


def code_names():
    names = yaml_names() | {SECRET_NAMES_VAR}
    for path in RANK_ENV_PYTHON:
        names |= set(NAME.findall(read(path)))
    return names


def test_every_trainops_variable_of_a_rank_is_on_the_page_and_no_other():
    page = first_column('### From the launch')
    assert len(page) == len(set(page)), 'a variable is listed twice: %s' % sorted(n for n in page if page.count(n) > 1)
    code = code_names()
    # the sources really were read: the variables every launch sets are among them
    assert {'TRAINOPS_RUN_ID', 'TRAINOPS_OUTPUT_DIR', 'TRAINOPS_RESUME_FROM', SECRET_NAMES_VAR} <= code
    assert not set(page) - code, 'docs/your-script.md lists variables the code does not set: %s' % sorted(set(page) - code)
    assert not code - set(page), 'the code sets variables docs/your-script.md does not list: %s' % sorted(code - set(page))


def torch_sets():
    """The variables torchrun (torch.distributed.run and its local agent) sets for a rank, read from torch's source
    without importing torch, with PYTHONUNBUFFERED, which the supervisor gives torchrun (_supervisor.py)."""
    spec = importlib.util.find_spec('torch')
    if spec is None or not spec.origin:
        pytest.skip('torch is not installed')
    base = os.path.join(os.path.dirname(spec.origin), 'distributed')
    agent = read(os.path.join(base, 'elastic', 'agent', 'server', 'local_elastic_agent.py'))
    names = set(re.findall(r'"([A-Z][A-Z0-9_]+)":', agent)) | set(re.findall(r'worker_env\["([A-Z0-9_]+)"\]', agent))
    if 'os.environ["OMP_NUM_THREADS"]' in read(os.path.join(base, 'run.py')):
        names.add('OMP_NUM_THREADS')
    if "'PYTHONUNBUFFERED'" in read(os.path.join(ROOT, 'plugins', 'module_utils', '_supervisor.py')):
        names.add('PYTHONUNBUFFERED')
    return names


def test_every_torchrun_variable_on_the_page_is_one_torchrun_sets():
    page = set(first_column('### From torchrun'))
    assert {'RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT'} <= page
    missing = page - torch_sets()
    assert not missing, 'docs/your-script.md says torchrun sets %s; the installed torch does not' % sorted(missing)


def test_the_metrics_table_lists_exactly_the_fields_the_summary_reads():
    page = first_column('## Metrics: throughput, step time, stragglers')
    assert not set(page) - set(SUMMARY_FIELDS), 'fields the summary does not read: %s' % sorted(set(page) - set(SUMMARY_FIELDS))
    assert not set(SUMMARY_FIELDS) - set(page), 'fields the summary reads, not on the page: %s' % sorted(
        set(SUMMARY_FIELDS) - set(page))


def test_the_progress_pattern_is_the_waits_and_the_example_line_matches_it():
    lines = [line.strip() for line in section('## Progress lines') if line.startswith('    ')]
    assert DEFAULT_PROGRESS_PATTERN in lines, 'the page does not show the wait\'s pattern %s' % DEFAULT_PROGRESS_PATTERN
    example = next(line for line in lines if line.startswith('[trainops]'))
    match = re.search(DEFAULT_PROGRESS_PATTERN, '[rank 0] ' + example)
    assert match and match.group(1).startswith('epoch=')


def test_the_python_examples_compile():
    blocks = re.findall(r'```python\n(.*?)```', read(PAGE), re.S)
    assert blocks
    for number, block in enumerate(blocks):
        compile(block, 'docs/your-script.md python block %d' % number, 'exec')
