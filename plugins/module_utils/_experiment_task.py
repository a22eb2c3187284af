# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The task of ``trainops.multinode.experiment``: its options, declared once, and what it does with them.

The module runs it on a node; the action plugin of the same name runs it in the task's worker when the task
targets the controller (how the job role uses it), without shipping a module there. The states that read the play's
variables (PLAY_STATES: the launch's manifest, built from them) exist in the action only.
"""

from __future__ import annotations

from ansible_collections.trainops.multinode.plugins.module_utils._stragglers import threshold_problem
from ansible_collections.trainops.multinode.plugins.module_utils._experiment import (
    ExperimentError,
    create_experiment_dir,
    link_next,
    report_experiment,
)

PLAY_STATES = ('launched', 'failed', 'collected')
"""The states that build the manifest from the run's variables (plugins/action/experiment.py)."""

ARGUMENT_SPEC = dict(
    state=dict(type='str', default='created', choices=['created', 'reported', 'linked'] + list(PLAY_STATES)),
    root=dict(type='path'),
    name=dict(type='str'),
    path=dict(type='path'),
    manifest=dict(type='dict', default={}),
    results=dict(type='dict'),
    verdicts=dict(type='dict', default={}),
    missing_nodes=dict(type='list', elements='str', default=[]),
    refused=dict(type='list', elements='str', default=[]),
    slurm=dict(type='dict'),
    straggler_threshold=dict(type='float'),
    attempt=dict(type='dict'),
    next=dict(type='str'),
)

ACTION_REQUIRED_IF = [
    ('state', 'reported', ['path']),
    ('state', 'linked', ['path', 'next']),
]
"""The action's: a new experiment's root and name default to the run's (trainops_experiments_dir, its name)."""

REQUIRED_IF = [('state', 'created', ['root', 'name'])] + ACTION_REQUIRED_IF


def run(params, check_mode=False):
    """The task's result; raises ExperimentError (module_utils._experiment) with the message to fail with."""
    if params.get('straggler_threshold') is not None and threshold_problem(params['straggler_threshold'], 'straggler_threshold'):
        raise ExperimentError(threshold_problem(params['straggler_threshold'], 'straggler_threshold'))
    if params['state'] in PLAY_STATES:
        raise ExperimentError("state={0} reads the play's variables: run it on the controller (delegate_to: localhost), "
                              "through the job role".format(params['state']))
    if params['state'] == 'created':
        result = create_experiment_dir(params['root'], params['name'], check_mode=check_mode)
        result['changed'] = True
        return result
    if params['state'] == 'linked':
        return dict(path=params['path'], changed=link_next(params['path'], params['next'], check_mode=check_mode))
    return report_experiment(params['path'], params['manifest'], check_mode=check_mode, results=params['results'],
                             verdicts=params['verdicts'], missing_nodes=params['missing_nodes'], refused=params['refused'],
                             launcher_end=params['slurm'], straggler_threshold=params['straggler_threshold'],
                             attempt=params['attempt'])
