# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Fixtures for the inventory plugin tests: a real InventoryManager/DataLoader on temporary files.

``trainops.multinode.*`` must resolve the way the ``ansible`` CLIs resolve it, through Ansible's collection
finder. The other unit tests import the collection with plain ``sys.path`` imports (tests/conftest.py), and the
two do not mix, so the finder is installed only while these tests run: the plain ``ansible_collections``
modules are set aside, the finder imports its own, and everything is put back afterwards.

The enabled inventory plugins are set here, independent of the working directory's ``ansible.cfg`` (the
end-to-end tests check the repository's ``ansible.cfg`` itself).
"""

from __future__ import annotations

import os

import pytest

from ansible import constants as C
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import inventory_loader
from collection_finder import collection_finder_installed

ENABLED = ['host_list', 'script', 'auto', 'trainops.multinode.node_list', 'trainops.multinode.slurm', 'yaml', 'ini',
           'toml']


@pytest.fixture(scope='module', autouse=True)
def collection_finder():
    """Ansible's collection finder for this test module, as ``init_plugin_loader`` installs it in the CLIs."""
    with collection_finder_installed():
        yield


@pytest.fixture
def enabled_plugins(monkeypatch):
    """The inventory plugins ansible.cfg enables, in its order (ours before ini)."""
    monkeypatch.setattr(C, 'INVENTORY_ENABLED', list(ENABLED))
    return ENABLED


@pytest.fixture
def manager(enabled_plugins):
    """``manager(*sources)`` -> a parsed InventoryManager."""
    def build(*sources):
        return InventoryManager(loader=DataLoader(), sources=[str(source) for source in sources])
    return build


@pytest.fixture
def plugin():
    """``plugin(name)`` -> the inventory plugin loaded the way Ansible loads it."""
    def get(name):
        loaded = inventory_loader.get(name)
        assert loaded is not None, name
        return loaded
    return get


@pytest.fixture
def no_slurm_env(monkeypatch):
    """Tests must not see the environment of a Slurm job they might run in."""
    for name in list(os.environ):
        if name.startswith('SLURM_'):
            monkeypatch.delenv(name)
