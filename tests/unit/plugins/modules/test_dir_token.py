# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The thin trainops.multinode.dir_token module: documentation, creation, check mode, errors."""

from __future__ import annotations

import os
import stat

from module_harness import assert_documentation_matches_argument_spec, run_module

from ansible_collections.trainops.multinode.plugins.modules import dir_token as module


def run(args):
    return run_module(module, args)


def test_documentation_matches_argument_spec():
    assert_documentation_matches_argument_spec(module)


def test_creates_the_directory_and_token_once(tmp_path):
    target = tmp_path / 'home' / 'src'
    first = run({'path': str(target), 'mode': '0750'})
    assert first['changed'] is True and len(first['token']) == 32 and first['path'] == str(target)
    assert stat.S_IMODE(os.stat(str(target)).st_mode) == 0o750
    again = run({'path': str(target)})
    assert again == {'changed': False, 'token': first['token'], 'path': str(target)}


def test_check_mode_creates_nothing(tmp_path):
    result = run({'path': str(tmp_path / 'new'), '_ansible_check_mode': True})
    assert result['changed'] is True and result['token'] is None
    assert not (tmp_path / 'new').exists()


def test_a_directory_that_cannot_be_made_is_named(tmp_path):
    (tmp_path / 'file').write_text('x')
    result = run({'path': str(tmp_path / 'file' / 'sub')})
    assert result['failed'] and result['msg'].startswith('cannot create or read the token of %s' % (tmp_path / 'file' / 'sub'))
    assert run({'path': str(tmp_path), 'mode': 'rwx'})['msg'] == "mode must be an octal mode such as 0700, got 'rwx'"
