# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The run-id rule (plugins/module_utils/_torchrun.py) and its bash form for the sbatch role's batch script
(run_id_shell_function): both say the same of every value."""

from __future__ import annotations

import random
import subprocess

import pytest

from ansible_collections.trainops.multinode.plugins.filter.run_id_shell_function import run_id_shell_function as shell_filter
from ansible_collections.trainops.multinode.plugins.module_utils import _torchrun as tr
from ansible.errors import AnsibleFilterError

EDGES = [
    'run1', 'multinode_autoch_autoth_20261123_101500', 'a', '0', 'a' * 200, 'a' * 201, '', '.', '-a', '_a', 'a..b',
    'a.b', 'a-b_c.d@e+f=g', 'a b', 'a\nb', 'run1\n', '\nrun1', 'a\tb', 'a/b', '../x', 'a"b', "a'b", 'a$b', 'a`id`',
    'a;b', 'a*', 'a?', 'a[b]', 'ä', 'aé', 'a\u00a0', 'a\\b', 'a,b', 'a:b', 'a%b', 'a~', 'a!', 'a#', 'a{b}', 'a|b',
    'a&b', 'a(b)', 'a<b>', '-e', 'x=1 y=2', 'a' * 199 + '..', 'a' * 198 + '..', '1.', 'a.', '.a',
]


def _random_values(count, seed=37):
    rng = random.Random(seed)
    alphabet = tr.RUN_ID_REST + ' \t\n/\\"\'$`;*?[]{}()<>|&!#~%,:^éß\u00a0'
    values = []
    for _value in range(count):
        length = rng.choice([1, 2, 3, 5, 8, 40, 199, 200, 201])
        values.append(''.join(rng.choice(alphabet) for _char in range(length)))
    return values


def bash_says(function, values):
    """Whether the bash function accepts each value (one bash for all; values go in as NUL-separated input)."""
    script = function + 'while IFS= read -r -d "" value; do if valid_run_id "$value"; then echo 1; else echo 0; fi; done\n'
    data = ''.join(value + '\0' for value in values)
    for locale in ('C', 'C.UTF-8'):
        proc = subprocess.run(['bash', '-c', script], input=data.encode(), capture_output=True, check=True,
                              env={'LC_ALL': locale, 'PATH': '/usr/bin:/bin'}, timeout=60)
        yield locale, [line == b'1' for line in proc.stdout.splitlines()]


def test_the_shell_test_and_the_python_rule_agree():
    values = EDGES + _random_values(3000)
    values = [value for value in values if '\0' not in value]
    python = [tr.is_run_id(value) for value in values]
    assert sum(python) > 100 and sum(python) < len(values) - 100  # both kinds are well represented
    for locale, shell in bash_says(tr.run_id_shell_function('valid_run_id'), values):
        differ = [value for value, said, expected in zip(values, shell, python) if said != expected]
        assert not differ, (locale, differ[:5])


def test_the_rule_itself():
    assert tr.is_run_id('a' * 200) and not tr.is_run_id('a' * 201)
    assert not tr.is_run_id('a..b') and not tr.is_run_id('run1\n') and not tr.is_run_id(None)
    with pytest.raises(tr.TorchrunError, match="Invalid run_id 'a b'"):
        tr.validate_run_id('a b')


@pytest.mark.parametrize('name', ['', 'f x', '1f', 'f;rm', None])
def test_the_function_name_must_be_a_shell_identifier(name):
    with pytest.raises(AnsibleFilterError, match='run_id_shell_function: Invalid shell function name'):
        shell_filter(name)
