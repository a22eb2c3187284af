# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The shared_dirs filter: which nodes share a directory, and which node acts for each group."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.filter.shared_dirs import FilterModule, shared_dirs


def test_nodes_with_the_same_token_share_and_the_first_acts_for_them():
    result = shared_dirs({'n1': 'nfs', 'n2': 'local-2', 'n3': 'nfs', 'n4': 'nfs', 'n5': 'local-5'})
    assert result == {'primary': {'n1': 'n1', 'n2': 'n2', 'n3': 'n1', 'n4': 'n1', 'n5': 'n5'},
                      'groups': [['n1', 'n3', 'n4']], 'shared': True}


def test_private_directories_and_missing_tokens_share_nothing():
    result = shared_dirs({'n1': 'a', 'n2': None, 'n3': '', 'n4': 'b'})
    assert result == {'primary': {'n1': 'n1', 'n2': 'n2', 'n3': 'n3', 'n4': 'n4'}, 'groups': [], 'shared': False}


def test_the_input_must_be_a_mapping():
    with pytest.raises(AnsibleFilterError, match='mapping of node name to directory token'):
        shared_dirs(['n1', 'a'])
    assert FilterModule().filters()['shared_dirs'] is shared_dirs
