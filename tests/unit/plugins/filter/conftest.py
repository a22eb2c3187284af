# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible's collection finder for the filter tests that resolve ``trainops.multinode.hostfile`` from a template.

The other unit tests import the collection with plain ``sys.path`` imports (tests/conftest.py), and the two do
not mix, so the finder is installed only while these tests run: the plain ``ansible_collections`` modules are set
aside, the finder imports its own (as ``init_plugin_loader`` does in the CLIs), and everything is put back.
"""

from __future__ import annotations

import os
import sys

import pytest

from ansible.utils.collection_loader import AnsibleCollectionConfig
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def _collection_modules():
    return {name: module for name, module in sys.modules.items()
            if name == 'ansible_collections' or name.startswith('ansible_collections.')}


@pytest.fixture(scope='module')
def collection_finder():
    if AnsibleCollectionConfig.collection_finder:     # already there (e.g. run under ansible-test): use it
        yield
        return
    plain = _collection_modules()
    for name in plain:
        del sys.modules[name]
    _AnsibleCollectionFinder(paths=[os.path.join(REPO, '.collections')], scan_sys_paths=True)._install()
    try:
        yield
    finally:
        _AnsibleCollectionFinder._remove()
        AnsibleCollectionConfig._collection_finder = None
        for name in _collection_modules():
            del sys.modules[name]
        sys.modules.update(plain)
