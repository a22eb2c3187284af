# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ranks' OMP_NUM_THREADS from the CPUs a Slurm allocation holds on the node (filter slurm_rank_env)."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.filter.slurm_rank_env import slurm_rank_env


@pytest.mark.parametrize('cpus, ranks, overrides, env', [
    (1, 2, {}, {'OMP_NUM_THREADS': '1'}),         # salloc --gres=gpu:2 --cpus-per-task=1
    (64, 8, {}, {'OMP_NUM_THREADS': '8'}),
    ('16', '8', None, {'OMP_NUM_THREADS': '2'}),  # (host variables may come as text)
    (None, 8, {}, {}),                            # no allocation: torchrun's own rule (1 with several ranks)
    (64, 8, {'OMP_NUM_THREADS': '4'}, {}),        # trainops_env wins
    (64, 8, {'OMP_NUM_THREADS': None}, {}),       # and a null there removes it
])
def test_threads_per_rank(cpus, ranks, overrides, env):
    assert slurm_rank_env(cpus, ranks, overrides) == env


@pytest.mark.parametrize('cpus, overrides', [('many', {}), (0, {}), (4, ['OMP_NUM_THREADS'])])
def test_bad_input_is_refused(cpus, overrides):
    with pytest.raises(AnsibleFilterError):
        slurm_rank_env(cpus, 2, overrides)
