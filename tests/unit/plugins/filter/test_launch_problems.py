# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The launch_problems filter: the rules of _launch_params, and a secret typed into ansible-playbook's -e refused."""

from __future__ import annotations

import pytest

from ansible import context
from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.collections import ImmutableDict

from ansible_collections.trainops.multinode.plugins.filter.launch_problems import FilterModule, launch_problems
from ansible_collections.trainops.multinode.plugins.module_utils._launch_params import launch_problems as rules

SECRET = 'hf_s3cretvalue'


def command_line(monkeypatch, *extra_vars):
    monkeypatch.setattr(context, 'CLIARGS', ImmutableDict(extra_vars=tuple(extra_vars)))


def test_a_literal_secret_in_the_command_line_is_a_problem_that_does_not_show_it(monkeypatch):
    command_line(monkeypatch, 'channels=4', '{"trainops_secret_env": {"HF_TOKEN": "%s"}}' % SECRET)
    params = {'secret_env': {'HF_TOKEN': SECRET}}  # what the role sees: already templated
    lines = launch_problems(params)
    assert lines[:-1] == rules(params)
    assert lines[-1].startswith('trainops_secret_env: HF_TOKEN is given literally on the command line (-e)')
    assert "lookup('ansible.builtin.env', 'HF_TOKEN')" in lines[-1]
    assert SECRET not in '\n'.join(lines)


def test_a_reference_or_a_vars_file_is_fine(monkeypatch):
    command_line(monkeypatch, '{"trainops_secret_env": {"HF_TOKEN": "{{ lookup(\'ansible.builtin.env\', \'HF_TOKEN\') }}"}}',
                 '@secrets.yml')
    params = {'secret_env': {'HF_TOKEN': SECRET}}
    assert launch_problems(params) == rules(params)
    monkeypatch.setattr(context, 'CLIARGS', ImmutableDict())  # no CLI (a test, an API caller)
    assert launch_problems(params) == rules(params)


def test_the_input_must_be_a_mapping():
    with pytest.raises(AnsibleFilterError, match='mapping of knob to value'):
        launch_problems(['channels'])
    assert FilterModule().filters()['launch_problems'] is launch_problems
