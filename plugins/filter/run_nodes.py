# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: run_nodes
short_description: The run C(playbooks/status.yml) and C(playbooks/stop.yml) act on, and its nodes
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - The one rule by which roles/job's C(status) and C(stop) choose the run and its nodes, from every host's answer of
    M(trainops.multinode.torchrun) (C(state=query)) and the controller's own manifest of the run.
  - The run is the one given (C(run_id)), else the latest started of the hosts' answers. A node left out of the last
    attempt of a launch with retries answers an older run than the spare node that took its place.
  - Its nodes are those of its manifest (C(<experiments_dir>/<run>/manifest.json)), in rank order, where the controller
    has it; else the hosts that answered with the run, by the node rank they answered. A run id that is not a plain
    directory name is refused (the nodes' answers are not trusted).
  - The rules are plugins/module_utils/_launch_records.py (C(chosen_run), C(run_nodes)).
positional: selected, experiments_dir, play_hosts
options:
  _input:
    description:
      - Every host's C(job) (the torchrun module's RV(trainops.multinode.torchrun#module:job)) by host, in play order;
        an empty dict where a host has none.
    type: dict
    required: true
  selected:
    description: The run asked for (C(-e run_id=...)); empty for the latest.
    type: str
    default: ''
  experiments_dir:
    description: The controller's experiments directory (C(trainops_experiments_dir)).
    type: path
    required: true
  play_hosts:
    description: The play's hosts (C(ansible_play_hosts_all)).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: The run and its nodes
  ansible.builtin.set_fact:
    __run: >-
      {{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars, ['queried', 'job'],
                                                                        default={})))
         | trainops.multinode.run_nodes(run_id | default(''), trainops_experiments_dir, ansible_play_hosts_all) }}
  run_once: true
  # {run_id: r1_a3, nodes: [node2, node1], ranks: {node2: 0, node1: 1}, missing: [], recorded: true}
"""

RETURN = r"""
_value:
  description: The run and its nodes.
  type: dict
  contains:
    run_id:
      description: The run, V(null) when no host has one.
      type: str
    nodes:
      description: The run's nodes, in rank order.
      type: list
      elements: str
    ranks:
      description: Each node's node rank.
      type: dict
    missing:
      description: The run's nodes that are not hosts of the play (a spare node whose group was not given).
      type: list
      elements: str
    recorded:
      description: Whether the run's manifest named its nodes.
      type: bool
"""

import json
import os
from collections.abc import Mapping

from ansible_collections.trainops.multinode.plugins.module_utils._launch_records import chosen_run, run_nodes as _run_nodes
from ansible_collections.trainops.multinode.plugins.plugin_utils import _filter_input


def _manifest(experiments_dir, run_id):
    """The controller's manifest of the run, or None where it has none (or none it can read)."""
    try:
        with open(os.path.join(experiments_dir, run_id, 'manifest.json')) as handle:
            manifest = json.load(handle)
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, Mapping) else None


def run_nodes(jobs, selected='', experiments_dir='', play_hosts=()):
    """The run and its nodes (see DOCUMENTATION)."""
    jobs = _filter_input.mapping('run_nodes', jobs, kind="every host's job record by host")
    jobs = dict((host, job if isinstance(job, Mapping) else {}) for host, job in jobs.items())
    run_id = chosen_run(jobs, selected)
    manifest = _manifest(experiments_dir, run_id) if run_id and experiments_dir else None
    return _run_nodes(jobs, list(play_hosts), run_id, manifest)


class FilterModule(object):
    """trainops.multinode.run_nodes."""

    def filters(self):
        return {'run_nodes': run_nodes}
