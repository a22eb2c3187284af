# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Secrets only by reference: the rule for a trainops_secret_env value in a command line's -e arguments."""

from __future__ import annotations

import json

import pytest

from ansible_collections.trainops.multinode.plugins.plugin_utils import _secret_args as sa

SECRET = 'hf_s3cretvalue'
REFERENCE = "{{ lookup('ansible.builtin.env', 'HF_TOKEN') }}"


@pytest.mark.parametrize('value', [REFERENCE, '{{ vault_hf_token }}', ' {{- lookup("env", "X") -}} ', '', None])
def test_a_template_or_nothing_is_a_reference(value):
    assert sa.is_reference(value)


@pytest.mark.parametrize('value', [SECRET, 'prefix-{{ lookup("env", "X") }}', "{{ 'hf_abc' }}", '{{ "hf_abc" }}', 1234,
                                   ['{{ x }}']])
def test_plain_text_text_around_a_template_a_quoted_string_or_another_type_is_literal(value):
    assert not sa.is_reference(value)


@pytest.mark.parametrize('args, names', [
    # JSON, YAML flow and key=value arguments, as ansible-playbook parses them
    (['{"trainops_secret_env": {"HF_TOKEN": "%s"}}' % SECRET], ['HF_TOKEN']),
    (['{trainops_secret_env: {HF_TOKEN: %s, WANDB_API_KEY: "%s"}}' % (SECRET, REFERENCE)], ['HF_TOKEN']),
    (['trainops_secret_env=%s' % SECRET], ['trainops_secret_env']),
    (['---\ntrainops_secret_env:\n  HF_TOKEN: %s\n' % SECRET], ['HF_TOKEN']),  # a YAML document (trainops_run.py)
    (['channels=4 trainops_secret_env=\'{"HF_TOKEN": "%s"}\'' % SECRET], ['trainops_secret_env']),
    # each name once, in order, over several arguments
    (['{"trainops_secret_env": {"B": "x1", "A": "x2"}}', '{"trainops_secret_env": {"B": "x3"}}'], ['B', 'A']),
    # references, vars files and other variables are fine
    (['{"trainops_secret_env": {"HF_TOKEN": "%s"}}' % REFERENCE], []),
    (["trainops_secret_env=\"{{ {'HF_TOKEN': lookup('ansible.builtin.env', 'HF_TOKEN')} }}\""], []),
    (['@secrets.yml', '@/abs/secrets.json'], []),
    (['{"hf_token": "%s"}' % SECRET, 'channels=4', '', '   '], []),
    # what ansible-playbook refuses itself is left to it
    (['{"trainops_secret_env": ', 'a="unbalanced'], []),
    ((), []),
    (None, []),
])
def test_literal_secrets_names_each_literal_once(args, names):
    assert sa.literal_secrets(args) == names


def test_the_problem_names_the_variable_and_the_reference_form_never_the_value():
    lines = sa.literal_secret_problems(['{"trainops_secret_env": {"HF_TOKEN": "%s"}}' % SECRET])
    assert lines == [
        'trainops_secret_env: HF_TOKEN is given literally on the command line (-e), where any user\'s ps and '
        'ansible-runner\'s records see it: export it in the controller\'s environment and pass it by reference, '
        '-e "{trainops_secret_env: {HF_TOKEN: \\"{{ lookup(\'ansible.builtin.env\', \'HF_TOKEN\') }}\\"}}" '
        '(or put it in a vars file: -e @secrets.yml)']
    whole = sa.literal_secret_problems(['trainops_secret_env=%s' % SECRET])
    assert len(whole) == 1 and whole[0].startswith('trainops_secret_env: trainops_secret_env itself is given literally')
    assert SECRET not in ''.join(lines + whole)
    assert sa.literal_secret_problems(['{"trainops_secret_env": {"HF_TOKEN": "%s"}}' % REFERENCE]) == []


def test_the_advised_form_is_a_reference_by_the_same_rule():
    advised = sa.reference_example('WANDB_API_KEY')
    assert advised.startswith('-e "') and advised.endswith('"')
    typed = advised[len('-e "'):-1].replace('\\"', '"')  # what the shell hands over
    assert sa.parse_extra_vars_arg(typed) == {'trainops_secret_env': {
        'WANDB_API_KEY': "{{ lookup('ansible.builtin.env', 'WANDB_API_KEY') }}"}}
    assert sa.literal_secrets([typed]) == []


def test_an_argument_keeps_everything_but_the_secret_values():
    text = '{"trainops_secret_env": {"HF_TOKEN": "%s", "B": "%s"}, "channels": 4}' % (SECRET, REFERENCE)
    assert json.loads(sa.redact_extra_vars_arg(text)) == {
        'trainops_secret_env': {'HF_TOKEN': '<redacted>', 'B': '<redacted>'}, 'channels': 4}
    assert json.loads(sa.redact_extra_vars_arg('trainops_secret_env=%s run_name=r1' % SECRET)) == {
        'trainops_secret_env': '<redacted>', 'run_name': 'r1'}
    for untouched in ('channels=4', '@secrets.yml', '{"overrides": ["a=1"]}', ''):
        assert sa.redact_extra_vars_arg(untouched) == untouched


def test_a_command_line_loses_its_secrets_in_every_form_of_extra_vars():
    literal = '{"trainops_secret_env": {"HF_TOKEN": "%s"}}' % SECRET
    argv = ['ansible-playbook', '-e', literal, '--extra-vars', literal, '--extra-vars=' + literal, '-e' + literal,
            '-e', '@vars.json', '-i', 'inv', '--token-in-another-flag=%s' % SECRET, 'play.yml', 7]
    redacted = sa.redact_argv(argv, [SECRET, 'abc', None])
    assert SECRET not in json.dumps(redacted)
    record = json.dumps({'trainops_secret_env': {'HF_TOKEN': '<redacted>'}}, sort_keys=True)
    assert redacted == ['ansible-playbook', '-e', record, '--extra-vars', record, '--extra-vars=' + record,
                        '-e' + record, '-e', '@vars.json', '-i', 'inv', '--token-in-another-flag=<redacted>',
                        'play.yml', 7]
    # short values are not searched for (they would blank out unrelated text)
    assert sa.redact_argv(['-i', 'inv'], ['in']) == ['-i', 'inv']
