# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Stragglers: per-node step times (median, p90), the flag against the OTHER nodes' median, missing data."""

from __future__ import annotations

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _stragglers as st


def rec(step=0.1, compute=None, **extra):
    record = dict(step_time_s=step, **extra)
    if compute is not None:
        record['compute_time_s'] = compute
    return record


def fig(step=None, compute=None):
    """A node figure whose medians are ``step`` / ``compute``."""
    return dict(ranks=1, records=5,
                step_time_s=None if step is None else dict(median=step, p90=step),
                compute_time_s=None if compute is None else dict(median=compute, p90=compute))


@pytest.mark.parametrize('values, q, expected', [
    ([], 50, None),
    ([3.0], 50, 3.0),
    ([3.0], 90, 3.0),
    ([1.0, 2.0], 50, 1.5),
    ([3.0, 1.0, 2.0], 50, 2.0),
    ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
    (list(range(1, 11)), 90, 9.1),   # numpy.percentile(range(1, 11), 90)
    ([1.0, 2.0], 90, 1.9),
    ([1.0, 2.0, 3.0], 100, 3.0),
    ([1.0, 2.0, 3.0], 0, 1.0),
])
def test_percentile_is_linear_between_the_closest_ranks(values, q, expected):
    assert st.percentile(values, q) == (None if expected is None else pytest.approx(expected))


def test_median_is_the_50th_percentile():
    assert st.median([5.0, 1.0, 3.0, 100.0]) == 4.0


@pytest.mark.parametrize('value', [None, 'x', True, float('nan'), float('inf'), -0.1, [], {}])
def test_what_is_no_number_of_seconds(value):
    assert st.seconds(value) is None


def test_a_node_figure_pools_each_ranks_last_window_records():
    by_rank = {
        0: [rec(9.0)] * 3 + [rec(0.1), rec(0.2), rec(0.3)],          # the warm-up's 9.0 falls out of the window of 3
        # rank 1's last 3: one number, a step_time_s that is no number, one that is null (the 5.0 and the junk are older)
        1: [rec(5.0), 'not a record', rec(0.4, compute=0.01), rec('x'), rec(None)],
    }
    figure = st.node_figure(by_rank, 3)
    # rank 0: 0.1, 0.2, 0.3; rank 1's window: one record with step_time_s 0.4 (the others carry no number)
    assert figure['ranks'] == 2 and figure['records'] == 4
    assert figure['step_time_s'] == {'median': pytest.approx(0.25), 'p90': pytest.approx(0.37)}
    assert figure['compute_time_s'] == {'median': 0.01, 'p90': 0.01}


def test_a_node_without_step_records_has_no_figure():
    assert st.node_figure({}, 5) is None
    assert st.node_figure({0: [{'loss': 1.0}], 1: []}, 5) is None
    assert st.node_figure({0: [rec(0.1)]}, 0) is None
    assert st.node_figures({'a': {0: [{'loss': 1.0}]}, 'b': {1: [rec(0.1)]}}, 5).keys() == {'b'}


def test_the_basis_is_compute_time_only_when_every_node_has_it():
    assert st.basis({'a': fig(1, 0.1), 'b': fig(1, 0.2)}) == 'compute_time_s'
    assert st.basis({'a': fig(1, 0.1), 'b': fig(1)}) == 'step_time_s'
    assert st.basis({'a': fig(), 'b': fig()}) is None
    assert st.basis({}) is None
    assert st.basis({'a': None, 'b': fig(1, 0.1)}) == 'compute_time_s'   # a node without figure is not compared


def test_one_node_is_never_a_straggler():
    found = st.stragglers({'a': fig(10.0, 10.0)})
    assert found['nodes'] == [] and found['compared'] == ['a'] and found['basis'] == 'compute_time_s'
    assert st.summary_line(found) == 'n/a (compute time of one node only)'


def test_of_two_nodes_only_the_slower_can_be_one():
    found = st.stragglers({'a': fig(1.0, 0.10), 'b': fig(1.0, 0.20)}, 0.15)
    assert found['nodes'] == [{'node': 'b', 'median_s': 0.2, 'others_median_s': 0.1, 'above': 1.0}]
    assert st.summary_line(found) == ("b: compute time 0.2 s, 100% above the other nodes' median 0.1 s "
                                      "(threshold 15%)")


def test_within_the_threshold_no_node_is_named():
    found = st.stragglers({'a': fig(1.0, 0.100), 'b': fig(1.0, 0.114)}, 0.15)
    assert found['nodes'] == []
    assert st.summary_line(found) == "none (no node's compute time is more than 15% above the other nodes' median)"
    # exactly at the threshold is not above it
    assert st.stragglers({'a': fig(1.0), 'b': fig(1.25)}, 0.25)['nodes'] == []


def test_a_node_is_compared_with_the_others_median_not_one_including_itself():
    # four nodes: 1.0, 1.0, 1.1 and 2.0. Against the median of all four (1.05) the 1.1 node would be within 15 % either
    # way; against the others' median each slow node stands out on its own
    figures = {'a': fig(1.0), 'b': fig(1.0), 'c': fig(1.1), 'd': fig(2.0)}
    found = st.stragglers(figures, 0.15)
    assert [s['node'] for s in found['nodes']] == ['d']
    assert found['nodes'][0]['others_median_s'] == 1.0 and found['nodes'][0]['above'] == 1.0
    assert found['basis'] == 'step_time_s'
    # two slow nodes of three: each one's others are one fast and one slow node, median between them
    found = st.stragglers({'a': fig(1.0), 'b': fig(3.0), 'c': fig(3.0)}, 0.15)
    assert [s['node'] for s in found['nodes']] == ['b', 'c']
    assert found['nodes'][0]['others_median_s'] == 2.0


def test_missing_data_gives_no_flag_and_no_error():
    assert st.stragglers({})['nodes'] == []
    assert st.stragglers({'a': None, 'b': None})['basis'] is None
    assert st.summary_line(st.stragglers({})) == 'n/a (no step_time_s or compute_time_s in the metrics)'
    # a node whose records lack compute_time_s makes every node compare step_time_s
    found = st.stragglers({'a': fig(1.0, 0.1), 'b': fig(1.0), 'c': fig(2.0, 0.1)})
    assert found['basis'] == 'step_time_s' and [s['node'] for s in found['nodes']] == ['c']
    # a node without a figure at all is left out, a peer's record that is no mapping too
    assert st.stragglers({'a': fig(1.0), 'b': 'junk', 'c': fig(2.0)})['compared'] == ['a', 'c']
    # the others' median 0: nothing to be above
    assert st.stragglers({'a': fig(0.0), 'b': fig(0.5)})['nodes'] == []


@pytest.mark.parametrize('value', [0.15, '0.15', 1, 10, '10', 0.001])
def test_a_threshold_that_fits(value):
    assert st.threshold_problem(value) is None
    assert st.threshold(value) == float(value)


@pytest.mark.parametrize('value', [0, '0', -1, 10.5, 'abc', '15%', None, True, float('nan'), float('inf'), [0.1]])
def test_a_threshold_that_does_not_fit_names_the_variable_and_its_value(value):
    line = st.threshold_problem(value)
    assert line.startswith('trainops_straggler_threshold=%s: ' % (value,))
    assert 'e.g. -e trainops_straggler_threshold=0.15' in line
    assert st.threshold(value) == st.DEFAULT_THRESHOLD
    assert st.threshold_problem(value, 'straggler_threshold').startswith('straggler_threshold=')
    assert '(e.g. straggler_threshold: 0.15 for 15 %)' in st.threshold_problem(value, 'straggler_threshold')


def test_the_figures_line_names_each_node_with_its_median_and_p90():
    figures = {'b': fig(0.0312, 0.01), 'a': dict(fig(0.0123), step_time_s={'median': 0.0123, 'p90': 0.01304}),
               'c': fig(None, 0.02), 'd': fig(), 'e': None}
    assert st.figures_line(figures) == ('a 0.0123 s (p90 0.01304), b 0.0312 s (p90 0.0312; compute 0.01 s, p90 0.01), '
                                        'c n/a (no step time; compute 0.02 s, p90 0.02)')
    assert st.figures_line({}) is None
