# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What changed when a run resumed on another world size, from the shipped workload's metrics records."""

from __future__ import annotations

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _world_change as wc


def rec(previous=4, world=2, accumulation=2, batch=256, kept=True):
    return dict(previous_world_size=previous, world_size=world, accumulation_steps=accumulation, global_batch=batch,
                global_batch_kept=kept)


def test_four_to_two_nodes_keeps_the_global_batch():
    change = wc.world_change({1: [rec()], 0: [dict(world_size=4), rec(batch=128), rec()]})
    assert change == dict(previous_world_size=4, world_size=2, accumulation_steps=2, global_batch=256, global_batch_kept=True)
    assert wc.summary_line(change) == 'world size 4 -> 2: gradient accumulation 2 keeps the global batch of 256 samples'


def test_a_world_size_that_does_not_divide_says_the_global_batch_changed():
    change = wc.world_change({0: [rec(world=3, accumulation=1, batch=192, kept=False)]})
    assert wc.summary_line(change) == ('world size 4 -> 3: the global batch CHANGED, now 192 samples (gradient '
                                       'accumulation 1); the schedule stays on the global step')


@pytest.mark.parametrize('by_rank', [
    {},
    {0: [{'world_size': 2, 'loss': 1.0}]},                               # a script without the fields, or from scratch
    {0: [rec(previous=None)]},
    {0: [rec(previous=2, accumulation=1, kept=True)]},                    # resumed on its own world size
    {0: [rec(previous='4')], 1: [rec(previous=True)], 2: ['x']},          # no counts
])
def test_no_change_gives_no_line(by_rank):
    assert wc.world_change(by_rank) is None and wc.summary_line(None) is None


def test_a_chain_of_resumes_on_fewer_nodes_still_says_the_accumulation():
    change = wc.world_change({0: [rec(previous=2, world=2, accumulation=2)]})
    assert wc.summary_line(change) == 'world size 2 -> 2: gradient accumulation 2 keeps the global batch of 256 samples'
    odd = wc.world_change({0: [rec(accumulation='2', batch=None, kept='yes')]})
    assert wc.summary_line(odd) == 'world size 4 -> 2 (gradient accumulation n/a, global batch n/a)'
