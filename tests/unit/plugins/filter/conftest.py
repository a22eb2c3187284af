# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible's collection finder for the filter tests that resolve ``trainops.multinode.hostfile`` from a template.

The other unit tests import the collection with plain ``sys.path`` imports (tests/conftest.py), and the two do
not mix, so the finder is installed only while these tests run: the plain ``ansible_collections`` modules are set
aside, the finder imports its own (as ``init_plugin_loader`` does in the CLIs), and everything is put back.
"""

from __future__ import annotations

import pytest

from collection_finder import collection_finder_installed


@pytest.fixture(scope='module')
def collection_finder():
    with collection_finder_installed():
        yield
