# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The health check before an attempt as a command: the launch's own command line (parsed by ansible-playbook's own
parser, as ansible.context.CLIARGS holds it), playbooks/health.yml and the check's extra vars last."""

from __future__ import annotations

import json
import os

import pytest

from ansible import context
from ansible.cli.playbook import PlaybookCLI

from ansible_collections.trainops.multinode.plugins.plugin_utils import _health_command as hc


def cliargs(*argv):
    """CLIARGS as ansible-playbook's parser leaves them for ``ansible-playbook ARGV launch.yml``."""
    saved = context.CLIARGS
    try:
        PlaybookCLI(['ansible-playbook'] + list(argv) + ['launch.yml']).parse()
        return dict(context.CLIARGS)
    finally:
        context._init_global_context({}) if saved is None else setattr(context, 'CLIARGS', saved)  # pylint: disable=protected-access


def test_the_launchs_command_line_then_the_checks_own_extra_vars(tmp_path):
    args = cliargs('-i', 'inv.yml', '-i', 'more.yml', '-e', 'channels=42', '-e', '@vars.yml', '-e', 'script=mine.py',
                   '-u', 'trainer', '--private-key', 'id_ed25519', '-b', '--become-user', 'svc', '-f', '32', '-vv',
                   '--limit', 'node1')
    found = hc.health_command(['node0', 'node2'], 'r1_health', '/pb/health.yml', cliargs=args,
                              argv0=str(tmp_path / 'nowhere'))
    argv = found['argv']
    assert os.path.basename(argv[0]) == 'ansible-playbook' and argv[1] == '/pb/health.yml'
    cwd = os.getcwd()
    assert argv[2:-2] == [
        '--inventory', os.path.join(cwd, 'inv.yml'), '--inventory', os.path.join(cwd, 'more.yml'),
        '--user', 'trainer', '--private-key', os.path.join(cwd, 'id_ed25519'), '--connection', 'ssh',
        '--forks', '32', '--become', '--become-method', 'sudo',
        '--become-user', 'svc', '--extra-vars', 'channels=42', '--extra-vars', '@' + os.path.join(cwd, 'vars.yml'),
        '--extra-vars', 'script=mine.py', '-vv']
    # the check's own, last (the launch's script=mine.py is passed on: health.yml sets its own script after mapping
    # the knobs); the launch's --limit is not passed on
    assert argv[-2] == '--extra-vars' and json.loads(argv[-1]) == {
        'trainops_health_nodes': ['node0', 'node2'], 'run_name': 'r1_health'}
    assert '--limit' not in argv and found['chdir'] == cwd and found['problems'] == []


@pytest.mark.parametrize('key, option, instead', [('ask_pass', '--ask-pass', '--connection-password-file'),
                                                  ('become_ask_pass', '--ask-become-pass', '--become-password-file'),
                                                  ('ask_vault_pass', '--ask-vault-password', '--vault-password-file')])
def test_a_password_prompt_cannot_be_passed_on_and_says_what_to_use(key, option, instead):
    found = hc.health_command(['node0'], 'r', 'pb', cliargs={'inventory': ('inv.yml', ), key: True})
    assert found['problems'] == ["trainops_health_check: the launch asks for a password (%s), which the health "
                                 "check's own ansible-playbook cannot; give it by file (%s)" % (option, instead)]


def test_the_ansible_playbook_the_launch_runs_in(tmp_path):
    script = tmp_path / 'ansible-playbook'
    script.write_text('#!/bin/sh\n')
    assert hc.ansible_playbook(str(script)) == str(script)
    assert os.path.basename(hc.ansible_playbook('/usr/lib/python3/ansible-runner')) == 'ansible-playbook'
