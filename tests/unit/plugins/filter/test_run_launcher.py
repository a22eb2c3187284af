# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The run_launcher filter (stop.yml and status.yml take the Slurm step's path from the nodes' records): called
directly, and from a template over the nodes' registered query results, as roles/job/tasks/stop.yml calls it."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleError, AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.trainops.multinode.plugins.filter.run_launcher import FilterModule, run_launcher

SRUN = {'name': 'srun', 'job_id': '7', 'step_id': '2', 'step': '7.2'}


def test_the_step_from_the_nodes_records():
    jobs = [{'run_id': 'r1', 'launcher': SRUN, 'owner_uid': 1001}, {'run_id': 'r1', 'launcher': SRUN, 'owner_uid': 1001}]
    assert run_launcher(jobs) == {'name': 'srun', 'run_id': 'r1', 'job_id': '7', 'step_id': '2', 'step': '7.2',
                                  'step_name': 'trainops-r1', 'owner_uid': 1001, 'refused': None, 'own_tasks': True}
    assert FilterModule().filters()['run_launcher'] is run_launcher


def test_bad_input_is_a_filter_error_and_contradicting_records_are_refused():
    with pytest.raises(AnsibleFilterError, match='list of the nodes'):
        run_launcher({'run_id': 'r1'})
    # never an error: the play goes on to stop the nodes' own torchrun
    refused = run_launcher([{'run_id': 'r1', 'launcher': SRUN, 'owner_uid': 1001},
                            {'run_id': 'r1', 'launcher': dict(SRUN, step_id='3'), 'owner_uid': 1001}])
    assert refused['refused'] == ('The nodes of run r1 recorded different Slurm steps (7.2, 7.3): their records '
                                  'contradict each other.') and refused['job_id'] is None and refused['own_tasks']


def render(expression, variables):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expression))


def test_fqcn_filter_over_registered_results_as_stop_yml_uses_it(collection_finder):  # pylint: disable=unused-argument
    hostvars = {'n0': {'__trainops_queried': {'job': {'run_id': 'r1', 'launcher': SRUN, 'owner_uid': 1001}}},
                'n1': {'__trainops_queried': {'job': {'run_id': 'r1', 'launcher': SRUN, 'owner_uid': 1001}}},
                'n2': {}}  # a node that could not be queried
    expression = ("{{ nodes | map('extract', hostvars) | map(attribute='__trainops_queried', default={})"
                  " | map(attribute='job', default={}) | trainops.multinode.run_launcher }}")
    launcher = render(expression, {'nodes': ['n0', 'n1', 'n2'], 'hostvars': hostvars})
    assert launcher['step'] == '7.2' and launcher['run_id'] == 'r1'
    over_ssh = render(expression, {'nodes': ['n0'], 'hostvars': {'n0': {'__trainops_queried': {
        'job': {'run_id': 'r1', 'launcher': {'name': 'ssh'}}}}}})
    assert over_ssh['name'] == 'ssh' and over_ssh['step'] is None
    with pytest.raises(AnsibleError, match='list of the nodes'):
        render("{{ 'x' | trainops.multinode.run_launcher }}", {})
