# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.plugin_utils import _filter_input


def test_a_mapping_passes_as_it_is():
    value = {'node0': 1}
    assert _filter_input.mapping('f', value) is value


def test_null_passes_only_where_optional():
    assert _filter_input.mapping('f', None, 'given', optional=True) is None
    with pytest.raises(AnsibleFilterError, match=r'^f: given must be a mapping, not NoneType$'):
        _filter_input.mapping('f', None, 'given')


@pytest.mark.parametrize('value, kind', [([1], 'list'), ('a=b', 'str'), (3, 'int')])
def test_a_wrong_type_names_the_filter_the_value_and_its_type_not_its_content(value, kind):
    with pytest.raises(AnsibleFilterError) as err:
        _filter_input.mapping('health_gate', value, kind="the health check's report", optional=True)
    assert str(err.value) == "health_gate: the input must be the health check's report or null, not %s" % kind


def test_a_sequence_becomes_a_list():
    assert _filter_input.sequence('f', ('node0', 'node1')) == ['node0', 'node1']


@pytest.mark.parametrize('value, kind', [('node0', 'str'), (b'node0', 'bytes'), ({'node0': 1}, 'dict'), (None, 'NoneType')])
def test_a_string_or_a_mapping_is_not_a_list(value, kind):
    with pytest.raises(AnsibleFilterError, match=r'^f: spares must be the list of node names, not %s$' % kind):
        _filter_input.sequence('f', value, 'spares', kind='the list of node names')


def test_the_message_never_holds_the_value():
    with pytest.raises(AnsibleFilterError) as err:
        _filter_input.mapping('launch_problems', 'HF_TOKEN=hf_secret')
    assert 'hf_secret' not in str(err.value)
