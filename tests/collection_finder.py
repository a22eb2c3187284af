# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible's collection finder, for unit tests that resolve ``trainops.multinode.*`` the way the CLIs do.

The other unit tests import the collection with plain ``sys.path`` imports (tests/conftest.py), and the two do
not mix, so the finder is installed only while such tests run: the plain ``ansible_collections`` modules are set
aside, the finder imports its own (as ``init_plugin_loader`` does in the CLIs), and everything is put back.
"""

from __future__ import annotations

import contextlib
import os
import sys

from ansible.utils.collection_loader import AnsibleCollectionConfig
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(REPO, '.collections')


def _collection_modules():
    return {name: module for name, module in sys.modules.items()
            if name == 'ansible_collections' or name.startswith('ansible_collections.')}


@contextlib.contextmanager
def collection_finder_installed():
    """Install the finder for the duration of the block (or use the one already installed, e.g. by ansible-test)."""
    if AnsibleCollectionConfig.collection_finder:
        yield
        return
    plain = _collection_modules()
    for name in plain:
        del sys.modules[name]
    _AnsibleCollectionFinder(paths=[COLLECTIONS], scan_sys_paths=True)._install()
    try:
        yield
    finally:
        _AnsibleCollectionFinder._remove()
        AnsibleCollectionConfig._collection_finder = None
        for name in _collection_modules():
            del sys.modules[name]
        sys.modules.update(plain)
