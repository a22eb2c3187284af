# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: collect_plan
short_description: Where a node's fetched files land in the experiment directory, checked to stay inside it
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - Takes the paths of the files a node listed under one of its directories (M(ansible.builtin.find)'s C(files),
    their C(path)) and returns, for each, the destination in the experiment directory on the controller,
    C(<kind>/<node>/<path below base>), or C(<kind>/<name>) with O(name).
  - The node's paths are not trusted. A path that is not plainly under O(base) (a C(..), C(.) or empty component),
    that holds a control character (a newline, a tab), or whose destination would pass through a symbolic link below
    the experiment directory or resolve outside it is refused, left out of C(files) and named with the node in
    C(refused). The node name itself must be one safe path component (letters, digits, C(.), C(_), C(-)), else the
    filter fails.
options:
  _input:
    description: The node's paths of the files to fetch.
    type: list
    elements: str
    required: true
  experiment_dir:
    description: The experiment directory on the controller.
    type: path
    required: true
  kind:
    description: The experiment's subdirectory the files land in.
    type: str
    choices: [outputs, profiles, logs]
    required: true
  node:
    description: The node (its inventory name), the name of its directory under O(kind).
    type: str
    required: true
  base:
    description: The node's directory that was listed; the paths below it are kept.
    type: str
    required: true
  name:
    description: A destination name the controller chose (a log's C(node_<rank>.txt)); the one path lands in C(<kind>/<name>).
    type: str
seealso:
  - module: ansible.builtin.fetch
"""

EXAMPLES = r"""
- name: Fetch the node's outputs into outputs/<node>/
  ansible.builtin.fetch:
    src: "{{ item.src }}"
    dest: "{{ item.dest }}"
    flat: true
  loop: "{{ (found.files | map(attribute='path') | trainops.multinode.collect_plan(experiment, 'outputs', inventory_hostname, run_dir ~ '/outputs')).files }}"
"""

RETURN = r"""
_value:
  description: C(files), the files to fetch (C(src) on the node, C(dest) on the controller); C(refused), one line per path refused, naming the node.
  type: dict
  sample:
    files: [{src: /home/u/.cache/trainops/node1/runs/r1/outputs/rank_02_metrics.jsonl, dest: /srv/exp/outputs/node1/rank_02_metrics.jsonl}]
    refused: ["node1: refused profile '/home/u/.cache/trainops/node1/runs/r1/profiles/../../x': a \"\", \".\" or \"..\" component"]
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.module_utils._collect import CollectRefused, node_files


def collect_plan(paths, experiment_dir, kind, node, base, name=None):
    if isinstance(paths, str) or not isinstance(paths, (list, tuple)):
        raise AnsibleFilterError('collect_plan: the input must be a list of paths, not %s' % type(paths).__name__)
    try:
        return node_files(experiment_dir, kind, node, base, [str(path) for path in paths], name=name)
    except CollectRefused as exc:
        raise AnsibleFilterError('collect_plan: %s' % exc)


class FilterModule(object):
    def filters(self):
        return {'collect_plan': collect_plan}
