# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The plan of a resume (``trainops_resume_from``, a retry; roles/job/tasks/resume.yml, the action
``trainops.multinode.resume``): which node's checkpoint is the source, which nodes get a copy and how, and what each
node's ranks are told. The rules of the source and the message are in module_utils/_launch_dirs.py; this module
puts them together with what the controller keeps of the resumed run (its manifest, read within bounds).

* :func:`resumed_record`: what the resumed run's manifest on the controller records (its checkpoints, world size);
* :func:`plan`: the source, the nodes with and without the run and its checkpoint, the nodes that get a copy
  (``receivers``) and those that try it node to node first (``pull``, with ``trainops_ssh_mesh``);
* :func:`for_node`: what one node does (carry its checkpoint, read it for a sha256) and is told (environment,
  arguments);
* :func:`via_controller`: the nodes the copy reaches through the controller, and a line for the ones the copy over
  SSH missed.
"""

from __future__ import annotations

import os

from ansible_collections.trainops.multinode.plugins.module_utils import _launch_dirs, _node_files
from ansible_collections.trainops.multinode.plugins.module_utils._launch_records import dig, host_vars

MANIFEST = 'manifest.json'
MANIFEST_MAX_BYTES = 16 * 1024 * 1024
"""The most of the resumed run's manifest read (a manifest of many nodes and attempts stays far below)."""
RESUME_ARGS = ['--override', 'training.resume=true']
"""What the script is told with the config arguments (trainops_pass_config_args): resume from the output directory."""


def manifest_path(experiment_dir, run_id):
    """The resumed run's manifest on the controller: a sibling of this run's experiment directory; None for a run id
    that is no plain directory name (validate.yml refuses one before anything is touched)."""
    run_id = '' if run_id is None else str(run_id)
    if not run_id or '/' in run_id or run_id in ('.', '..') or not experiment_dir:
        return None
    return os.path.join(os.path.dirname(str(experiment_dir).rstrip('/')), run_id, MANIFEST)


def resumed_record(experiment_dir, run_id):
    """``({'checkpoint', 'checkpoints', 'world_size'}, refused)``: what the resumed run's manifest records (rank 0's
    checkpoint.json, every node's, the world size), ``{}`` without a manifest (a run of another controller), read as
    module_utils/_node_files.py reads a JSON file (no link followed, at most MANIFEST_MAX_BYTES, bounded values);
    ``refused``: the line that says why a manifest there was not read."""
    path = manifest_path(experiment_dir, run_id)
    if path is None:
        return {}, []
    manifest, refused = _node_files.read_json_object(path, name=path, max_bytes=MANIFEST_MAX_BYTES)
    if manifest is None:
        return {}, refused
    return dict((key, manifest.get(key)) for key in ('checkpoint', 'checkpoints', 'world_size')), refused


def no_run_message(run_id, nodes, run_dir):
    """Why a resume stops when no node has the run."""
    return ('trainops_resume_from=%s: no node has that run (looked on %s in <state dir>/runs/%s, e.g. %s). Give the run '
            'id of an earlier launch on these nodes (its experiment directory\'s name), or leave trainops_resume_from '
            'out to start from scratch.' % (run_id, ', '.join(nodes), run_id, run_dir))


def plan(nodes, hostvars, run_id, recorded=None, pass_config=True, ssh_mesh=False):
    """The resume of ``run_id`` on ``nodes`` (rank order) from what each node found (``__trainops_resume_found`` in
    ``hostvars``) and ``recorded`` (:func:`resumed_record`): :func:`_launch_dirs.resume_nodes`' lists and ``msg``;
    ``source``, ``by``, ``why`` (:func:`_launch_dirs.resume_source`: the newest checkpoint); ``receivers``, the nodes
    that get a copy of the source's (only where the config arguments are passed, which tell the script to resume
    from its output directory, and some node has the checkpoint); ``pull``, those that try it over the nodes' SSH
    first (``ssh_mesh``); ``recorded`` (``checkpoint``, ``checkpoints``) for the manifest's ``resumed_from``; and
    ``previous_env``, what every rank is told of the resumed run (:func:`_launch_dirs.resumed_env`)."""
    nodes, recorded = list(nodes), dict(recorded or {})
    source = _launch_dirs.resume_source(nodes, hostvars, recorded.get('checkpoint'), recorded.get('checkpoints'))
    found = _launch_dirs.resume_nodes(nodes, hostvars, run_id, source)
    receivers = list(found['without_checkpoint']) if pass_config and found['with_checkpoint'] else []
    return dict(found, run_id=run_id, source=source['node'], by=source['by'], why=source['why'], receivers=receivers,
                pull=list(receivers) if ssh_mesh else [],
                recorded=dict(checkpoint=recorded.get('checkpoint'), checkpoints=recorded.get('checkpoints')),
                previous_env=_launch_dirs.resumed_env(recorded))


def for_node(resume, node, found, run_dir, output_dir, pass_config=True):
    """What ``node`` does and is told in the resume ``resume`` (:func:`plan`), from what it ``found`` (module
    checkpoint_carry): ``carry`` (its checkpoint into ``output_dir``, with the config arguments only), ``digest`` (the
    source reads its copy for a sha256 when it goes on to other nodes), ``env`` (TRAINOPS_RESUME_FROM: where the
    node has the run, ``run_dir``/outputs, or ``output_dir`` where a copy arrives; the resumed run's world size) and
    ``args`` (``--override training.resume=true`` with the config arguments)."""
    carry = bool(pass_config and dig(found, 'checkpoint', 'isreg'))
    env = {}
    if dig(found, 'run'):
        env['TRAINOPS_RESUME_FROM'] = '%s/outputs' % run_dir
    if node in resume['receivers']:
        env['TRAINOPS_RESUME_FROM'] = output_dir
    env.update(resume.get('previous_env') or {})
    return dict(carry=carry, digest=carry and node == resume['source'] and bool(resume['receivers']), env=env,
                args=list(RESUME_ARGS) if pass_config else [])


def via_controller(resume, hostvars):
    """``(nodes, line)``: the receivers the copy reaches through the controller, in order (every one without
    trainops_ssh_mesh; with it, those whose copy over SSH failed: ``__trainops_resume_pulled``), and a line naming
    those and why (``''`` when none)."""
    if not resume.get('pull'):
        return list(resume.get('receivers') or []), ''
    copies = _launch_dirs.resume_copies(list(resume['pull']), hostvars)
    return copies['not_pulled'], copies['msg']


def sent(resume, hostvars):
    """What the source node carried and sends on (``__trainops_resume.carried`` there: ``dest``, ``checksum``,
    ``size``), ``{}`` when it carried nothing."""
    return dict(dig(host_vars(hostvars, resume.get('source')), '__trainops_resume', 'carried') or {})


def controller_copy(experiment_dir, source):
    """Where the checkpoint waits on the controller on its way to the nodes without it: the new run's experiment,
    ``resumed/<source node>/checkpoint.pt``."""
    return os.path.join(str(experiment_dir), 'resumed', str(source), 'checkpoint.pt')
