# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
---
module: rank_log
short_description: One rank's log lines, from its experiment or followed live on its node
version_added: 0.2.0
description:
  - Runs on the controller (an action plugin). Finds the experiment O(run_id) under O(experiments_dir), or the latest
    launched one (its C(manifest.json)'s C(launched_at)), and the node the launch put rank O(rank) on (the manifest's
    C(nodes)).
  - Without O(follow), prints and returns the last O(lines) lines of the rank's log in the experiment,
    C(logs/rank_<rank>.txt), which the collect writes when the job has ended, after a line that names the rank's node
    and the log. It reads at most the last 4 MiB of it.
  - With O(follow=true), on the host that runs the rank only (the others are skipped), prints the rank's lines as
    the node's log grows, asking the node (M(trainops.multinode.node_log)) for at most 1 MiB at a time, and ends when
    the run has ended on that node, after O(follow_timeout) seconds, or on Ctrl-C.
  - C(playbooks/logs.yml) runs it (C(-e rank=5), C(-e follow=true)).
author:
  - trainops maintainers (@trainops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - trainops.multinode._attributes
  - ansible.builtin.action_common_attributes.flow
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details:
      - It only reads.
options:
  experiments_dir:
    description:
      - The controller's directory of experiments (C(trainops_experiments_dir)).
    type: path
    required: true
  run_id:
    description:
      - The experiment's name (its directory's). Defaults to the latest launched.
    type: str
  rank:
    description:
      - The global rank. A value that is not digits fails, saying what to give (C(-e rank=N)).
    type: int
    required: true
  lines:
    description:
      - The most lines returned from the experiment's log (its last ones).
    type: int
    default: 1000
  follow:
    description:
      - Print the rank's lines live from its node until the run ends there.
    type: bool
    default: false
  state_dir:
    description:
      - The state root on the node, as given to M(trainops.multinode.torchrun). Required with O(follow=true).
    type: str
  node_id:
    description:
      - The node's key below O(state_dir), as given to M(trainops.multinode.torchrun) (empty for the host name).
    type: str
    default: ''
  poll_interval:
    description:
      - Seconds between two questions to the node while nothing new was read (O(follow=true)).
    type: float
    default: 2.0
  follow_timeout:
    description:
      - Stop following after this many seconds; V(0) follows until the run ends on the node.
    type: int
    default: 0
seealso:
  - module: trainops.multinode.node_log
"""

EXAMPLES = r"""
- name: Rank 5's lines of the latest experiment
  trainops.multinode.rank_log:
    experiments_dir: "{{ trainops_experiments_dir }}"
    rank: 5
  run_once: true
  register: rank_5
"""

RETURN = r"""
experiment:
  description: The experiment directory on the controller.
  returned: always
  type: str
  sample: /home/u/experiments/multinode_42ch_256th_20260101-120000
run_id:
  description: The experiment's (and its run's) name.
  returned: always
  type: str
  sample: multinode_42ch_256th_20260101-120000
node:
  description: The node the launch put the rank on.
  returned: always
  type: str
  sample: gpu2
node_rank:
  description: That node's rank.
  returned: always
  type: int
  sample: 1
world_size:
  description: The job's ranks, by its manifest.
  returned: always
  type: int
  sample: 8
log:
  description: The rank's log in the experiment.
  returned: without O(follow)
  type: str
  sample: /home/u/experiments/multinode_42ch_256th_20260101-120000/logs/rank_5.txt
lines:
  description: The last O(lines) lines of the rank's log.
  returned: without O(follow)
  type: list
  elements: str
  sample: ["epoch=0 step=12/40 loss=2.3456"]
truncated:
  description: Whether earlier lines of the log were left out.
  returned: without O(follow)
  type: bool
  sample: false
printed:
  description: How many lines were printed while following.
  returned: with O(follow=true)
  type: int
  sample: 120
ended:
  description: Whether the run had ended on the node when following stopped.
  returned: with O(follow=true)
  type: bool
  sample: true
"""
