# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collect_plan filter: module_utils._collect's rule from a template, errors as filter errors."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.filter.collect_plan import FilterModule, collect_plan


def test_the_filter_plans_and_refuses(tmp_path):
    result = collect_plan(['/r/outputs/a.json', '/r/outputs/../../x'], str(tmp_path), 'outputs', 'node0', '/r/outputs')
    assert result['files'] == [{'src': '/r/outputs/a.json', 'dest': str(tmp_path / 'outputs' / 'node0' / 'a.json')}]
    assert result['refused'] == ["node0: refused output '/r/outputs/../../x': a \"\", \".\" or \"..\" component"]


@pytest.mark.parametrize('paths, node, match', [
    ('/r/outputs/a.json', 'node0', 'must be a list of paths, not str'),
    (['/r/outputs/a.json'], '../node0', "node name '../node0' cannot name its directory"),
])
def test_bad_input_fails_the_filter(tmp_path, paths, node, match):
    with pytest.raises(AnsibleFilterError, match=match):
        collect_plan(paths, str(tmp_path), 'outputs', node, '/r/outputs')


def test_registered():
    assert FilterModule().filters()['collect_plan'] is collect_plan
