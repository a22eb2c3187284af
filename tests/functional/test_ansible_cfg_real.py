# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The repository's ansible.cfg, as Ansible reads it: pipelining reaches every connection, the local default's
too, so no module (and none of its arguments, a secret among them) is written to a file in the remote temporary
directory (``~/.ansible/tmp``). A module run with ``ansible`` on the local inventory lists the AnsiballZ files
there while it runs: its own would be one of them if it had been written to disk.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.real]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSIBLE = os.path.join(os.path.dirname(sys.executable), 'ansible')


def module_files_while_running(tmp_path, **env):
    """Run a module on node0 of the local default (inventories/local) with a fresh HOME and remote_tmp; return the
    AnsiballZ files it finds under that remote_tmp while it runs."""
    remote_tmp = tmp_path / 'remote_tmp'
    remote_tmp.mkdir()
    home = tmp_path / 'home'
    home.mkdir()
    run_env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_REMOTE_TMP=str(remote_tmp),
                   HOME=str(home), ANSIBLE_NOCOLOR='1', **env)
    for name in ('ANSIBLE_PIPELINING', 'ANSIBLE_KEEP_REMOTE_FILES'):
        if name not in env:
            run_env.pop(name, None)
    proc = subprocess.run([ANSIBLE, 'node0', '-o', '-m', 'ansible.builtin.command', '-a',
                           'find %s -name AnsiballZ_*' % remote_tmp], cwd=REPO, env=run_env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0 and 'node0 | CHANGED' in proc.stdout, proc.stdout + proc.stderr
    return [word for word in proc.stdout.replace('\\n', ' ').split() if 'AnsiballZ_' in word]


def test_the_local_default_runs_modules_without_writing_them_to_disk(tmp_path):
    assert module_files_while_running(tmp_path) == []


def test_without_pipelining_the_module_would_be_written_there(tmp_path):
    """The control: the same run with pipelining off finds its own module file (so the test above can fail)."""
    found = module_files_while_running(tmp_path, ANSIBLE_PIPELINING='false')
    assert [os.path.basename(path) for path in found] == ['AnsiballZ_command.py'], found
