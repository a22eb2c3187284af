# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The thin trainops.multinode.checkpoint_carry module (the rules: tests/unit/plugins/module_utils/test__resume.py)."""

from __future__ import annotations

import hashlib
import os

from module_harness import assert_documentation_matches_argument_spec, run_module

from ansible_collections.trainops.multinode.plugins.modules import checkpoint_carry as module


def run(args):
    return run_module(module, args)


def test_documentation_matches_argument_spec():
    assert_documentation_matches_argument_spec(module)


def test_inspect_then_carry_and_a_link_fails_the_task(tmp_path):
    outputs = tmp_path / 'runs' / 'r1' / 'outputs'
    outputs.mkdir(parents=True)
    (outputs / 'checkpoint.pt').write_bytes(b'state')
    found = run({'run_dir': str(tmp_path / 'runs' / 'r1')})
    assert found['changed'] is False and found['run'] is True and found['checkpoint']['isreg'] is True
    new = tmp_path / 'runs' / 'r2' / 'outputs'
    carried = run({'run_dir': str(tmp_path / 'runs' / 'r1'), 'state': 'carried', 'output_dir': str(new),
                   'checksum': found['checkpoint']['checksum']})
    assert carried['changed'] is True and (new / 'checkpoint.pt').read_bytes() == b'state'
    missing = run({'run_dir': str(tmp_path / 'runs' / 'r1'), 'state': 'carried'})
    assert missing['failed'] is True and 'output_dir' in missing['msg']
    os.unlink(str(outputs / 'checkpoint.pt'))
    os.symlink('/etc/shadow', str(outputs / 'checkpoint.pt'))
    refused = run({'run_dir': str(tmp_path / 'runs' / 'r1')})
    assert refused['failed'] is True
    assert refused['msg'] == 'trainops_resume_from: %s is a symbolic link: nothing below a run\'s directory is followed' % (
        outputs / 'checkpoint.pt')


def test_pulled_reports_a_failed_ssh_without_failing_and_a_wrong_checksum_fails(tmp_path, monkeypatch):
    source = tmp_path / 'sent.pt'
    source.write_bytes(b'state')
    out = tmp_path / 'runs' / 'r2' / 'outputs'
    monkeypatch.setattr(module, 'ssh_command', lambda host, path: ['sh', '-c', 'cat -- "$1"', 'ssh', path])
    args = {'state': 'pulled', 'source': 'node0', 'source_path': str(source), 'output_dir': str(out),
            'checksum': hashlib.sha256(b'state').hexdigest(), 'size': 5}
    got = run(args)
    assert got['changed'] is True and got['pulled'] is True and (out / 'checkpoint.pt').read_bytes() == b'state'
    wrong = run(dict(args, checksum='0' * 64))
    assert wrong['failed'] is True and 'is not the one sent' in wrong['msg']
    monkeypatch.setattr(module, 'ssh_command', lambda host, path: ['sh', '-c', 'echo "Permission denied" >&2; exit 255'])
    failed = run(args)
    assert failed.get('failed') is not True and failed['pulled'] is False
    assert failed['error'] == 'sh exited 255: Permission denied'
