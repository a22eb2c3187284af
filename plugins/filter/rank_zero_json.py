# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: rank_zero_json
short_description: A JSON file the job's rank 0 wrote, read from the experiment within bounds
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - Reads C(outputs/<node>/<name>) of the experiment directory, where C(<node>) is the node that ran global rank 0
    (the manifest's C(nodes) say which), for example the all-reduce benchmark's C(allreduce.json).
  - The job wrote that file, so it is read within bounds (C(plugins/module_utils/_node_files.py)) instead of with a
    C(file) lookup and C(from_json) - at most 1 MiB, nested at most 32 levels, finite numbers up to 2**53, a JSON
    object. A file that breaks them is not read; the refusal names the node and the file.
positional: name
options:
  _input:
    description: The experiment directory.
    type: str
    required: true
  name:
    description: The file's name in the node's outputs.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Read the all-reduce results
  ansible.builtin.set_fact:
    results: "{{ experiment_dir | trainops.multinode.rank_zero_json('allreduce.json') }}"
"""

RETURN = r"""
_value:
  description: C(value) (the JSON object, V(null) when there is none or it was refused) and C(refused) (lines naming
    the node and the file of what was not read).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.module_utils._experiment import read_rank_zero_json


def rank_zero_json(experiment_dir, name):
    if not isinstance(experiment_dir, str) or not isinstance(name, str) or '/' in name or name in ('', '.', '..'):
        raise AnsibleFilterError('rank_zero_json: the input must be an experiment directory and the name a file name')
    value, refused = read_rank_zero_json(experiment_dir, name)
    return {'value': value, 'refused': refused}


class FilterModule(object):
    def filters(self):
        return {'rank_zero_json': rank_zero_json}
