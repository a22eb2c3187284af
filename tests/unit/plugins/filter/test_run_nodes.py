# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The run_nodes filter (status.yml and stop.yml: which run, on which nodes; a spare node that took a node's place
included): called directly over a real experiments directory, and from a template over the hosts' registered query
results as roles/job/tasks/run_nodes.yml calls it."""

from __future__ import annotations

import json

import pytest

from ansible.errors import AnsibleError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.trainops.multinode.plugins.filter.run_nodes import FilterModule, run_nodes

# the master node0 was left out of attempt 3 (r_a3), and the spare node2 took its node rank 0
JOBS = {'node0': {'run_id': 'r_a2', 'node_rank': 0, 'started_at': '2026-11-27T09:00:05Z', 'status': 'failed'},
        'node1': {'run_id': 'r_a3', 'node_rank': 1, 'started_at': '2026-11-27T09:01:00Z', 'status': 'running'},
        'node2': {'run_id': 'r_a3', 'node_rank': 0, 'started_at': '2026-11-27T09:01:01Z', 'status': 'running'}}
PLAY = ['node0', 'node1', 'node2']


def manifest(tmp_path, run_id, hosts):
    (tmp_path / run_id).mkdir()
    (tmp_path / run_id / 'manifest.json').write_text(json.dumps({'nodes': [{'host': h} for h in hosts]}))


def test_the_latest_started_run_on_the_nodes_its_manifest_names(tmp_path):
    manifest(tmp_path, 'r_a3', ['node2', 'node1'])
    assert run_nodes(JOBS, '', str(tmp_path), PLAY) == {
        'run_id': 'r_a3', 'nodes': ['node2', 'node1'], 'ranks': {'node2': 0, 'node1': 1}, 'missing': [],
        'recorded': True}
    # the older run when asked for
    manifest(tmp_path, 'r_a2', ['node0', 'node1'])
    assert run_nodes(JOBS, 'r_a2', str(tmp_path), PLAY)['nodes'] == ['node0', 'node1']
    assert FilterModule().filters()['run_nodes'] is run_nodes


def test_a_spare_node_left_out_of_the_play_is_missing(tmp_path):
    manifest(tmp_path, 'r_a3', ['node2', 'node1'])
    jobs = dict((host, JOBS[host]) for host in ('node0', 'node1'))
    found = run_nodes(jobs, '', str(tmp_path), ['node0', 'node1'])
    assert found['run_id'] == 'r_a3' and found['missing'] == ['node2']


def test_without_a_manifest_the_nodes_that_answered_with_the_run_by_node_rank(tmp_path):
    found = run_nodes(JOBS, '', str(tmp_path / 'elsewhere'), PLAY)
    assert found == {'run_id': 'r_a3', 'nodes': ['node2', 'node1'], 'ranks': {'node2': 0, 'node1': 1},
                     'missing': [], 'recorded': False}
    # a manifest that is not JSON is no record
    (tmp_path / 'r_a3').mkdir()
    (tmp_path / 'r_a3' / 'manifest.json').write_text('{')
    assert run_nodes(JOBS, '', str(tmp_path), PLAY)['recorded'] is False


@pytest.mark.parametrize('jobs, selected', [
    ({'node0': {}, 'node1': {'run_id': None}}, ''),  # no node has a run
    ({'node0': {'run_id': '../../etc', 'started_at': 'z'}}, ''),  # a node's answer is not trusted as a path
    (JOBS, '../r_a3'),  # nor a run asked for that is no directory name
])
def test_no_run_or_no_valid_run_means_no_nodes(tmp_path, jobs, selected):
    manifest(tmp_path, 'r_a3', ['node2', 'node1'])
    assert run_nodes(jobs, selected, str(tmp_path), PLAY) == {
        'run_id': None, 'nodes': [], 'ranks': {}, 'missing': [], 'recorded': False}


def render(expression, variables):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expression))


def test_fqcn_filter_over_registered_results_as_run_nodes_yml_uses_it(collection_finder, tmp_path):  # pylint: disable=unused-argument
    manifest(tmp_path, 'r_a3', ['node2', 'node1'])
    hostvars = dict((host, {'__trainops_status': {'job': job}}) for host, job in JOBS.items())
    hostvars['node3'] = {}  # a host that could not be queried
    expression = ("{{ dict(play | zip(play | map('extract', hostvars) | map(attribute=result, default={})"
                  " | map(attribute='job', default={}))) | trainops.multinode.run_nodes('', dir, play) }}")
    found = render(expression, {'play': PLAY + ['node3'], 'hostvars': hostvars, 'result': '__trainops_status',
                                'dir': str(tmp_path)})
    assert found['nodes'] == ['node2', 'node1'] and found['missing'] == []
    with pytest.raises(AnsibleError, match="every host's job record"):
        render("{{ ['x'] | trainops.multinode.run_nodes('', '/', []) }}", {})
