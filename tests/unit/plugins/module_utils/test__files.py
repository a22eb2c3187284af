# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's one atomic write (plugins/module_utils/_files.py)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _files


def test_write_json_atomic_replaces_and_is_private(tmp_path):
    path = str(tmp_path / 'a.json')
    _files.write_json_atomic(path, {'b': 1, 'a': object.__name__})
    _files.write_json_atomic(path, {'b': 2, 'a': 'x'})
    with open(path) as f:
        text = f.read()
    assert json.loads(text) == {'a': 'x', 'b': 2} and text.endswith('\n') and text.index('"a"') < text.index('"b"')
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert os.listdir(str(tmp_path)) == ['a.json']


def test_follow_umask(tmp_path):
    old = os.umask(0o027)
    try:
        _files.write_text_atomic(str(tmp_path / 't'), 'x', mode=_files.FOLLOW_UMASK)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(str(tmp_path / 't')).st_mode) == 0o640


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = str(tmp_path / 'a.json')
    _files.write_json_atomic(path, {'a': 1})
    with pytest.raises(UnicodeEncodeError):
        _files.write_text_atomic(path, '\ud800')  # a lone surrogate cannot be written: fails after the temporary exists
    assert json.loads(open(path).read()) == {'a': 1}
    assert os.listdir(str(tmp_path)) == ['a.json']


def test_module_source_is_the_file():
    with open(_files.__file__) as f:
        assert _files.module_source(_files) == f.read()
