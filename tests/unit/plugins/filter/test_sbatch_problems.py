# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sbatch_problems filter: the rules of _sbatch, for a mapping only."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.filter.sbatch_problems import FilterModule, sbatch_problems
from ansible_collections.trainops.multinode.plugins.module_utils._sbatch import sbatch_problems as rules


def test_the_filter_returns_the_rules_lines():
    params = {'trainops_sbatch_job_name': 'a\nb', 'trainops_sbatch_nodes': 2}
    assert sbatch_problems(params) == rules(params) and len(rules(params)) == 1
    assert FilterModule().filters() == {'sbatch_problems': sbatch_problems}


def test_the_input_must_be_a_mapping():
    with pytest.raises(AnsibleFilterError, match='must be a mapping of variable to value, not list'):
        sbatch_problems(['trainops_sbatch_job_name'])
