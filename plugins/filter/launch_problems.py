# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: launch_problems
short_description: The launch parameters of the job role that do not fit, one line each
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - Used by the role C(trainops.multinode.job) on the controller, before any node is touched; its input may change
    with the role.
  - 'Returns one line per value that is wrong, naming the value, what it must be and an example, such as
    C(nproc=0: ranks per node ... must be an integer from 1 to 256 ... -e nproc=8); a value that fits is not
    mentioned, so an empty list means every value fits.'
  - With C(sync_workspace), the script (and with C(pass_config_args) the config) must exist under C(workspace_src) on
    the controller.
  - With O(what=config_args), whether the entrypoint gets the config arguments (C(--config ... --override ...)) - a
    boolean, not the problems - C(pass_config_args) true or false as given, V(auto) only for the script C(train.py)
    (not a module) whose workspace holds the config file.
  - What depends on the node (the channels and threads each NCCL/RCCL library takes, interfaces, the training
    network's addresses) is checked on the nodes later.
options:
  _input:
    description:
      - The knobs without their C(trainops_) prefix (C(channels), C(min_channels), C(threads), C(nproc_per_node),
        C(master_port), C(max_restarts), C(rdzv_timeout), C(collective_timeout), C(rdzv_backend), C(runtime),
        C(git_check), C(git_reference), C(allow_dirty), C(gpu_vendor), C(run_name), C(wait), C(replace), C(script),
        C(config), C(overrides), C(env), C(secret_env), C(node_id), C(script_args), C(command_prefix),
        C(training_network)), and C(workspace_src), C(sync_workspace), C(pass_config_args).
      - C(node), the node's inventory name, must be one safe path component (it names the node's directories in the
        experiment, C(outputs/<node>/), C(profiles/<node>/); filter trainops.multinode.collect_plan).
      - The values of C(secret_env) never appear in the result, only its names.
    type: dict
    required: true
  what:
    description:
      - V(problems), the lines; V(config_args), whether the entrypoint gets the config arguments.
    type: str
    default: problems
    choices: [problems, config_args]
seealso:
  - plugin: trainops.multinode.merge_problems
    plugin_type: filter
"""

EXAMPLES = r"""
- name: List the values that do not fit
  ansible.builtin.set_fact:
    problems: "{{ {'nproc_per_node': 0, 'master_port': 80} | trainops.multinode.launch_problems }}"
"""

RETURN = r"""
_value:
  description: One line per value that does not fit, in a fixed order; empty when all fit.
  type: list
  elements: str
  sample:
    - 'nproc=0: ranks per node (trainops_nproc_per_node) must be an integer from 1 to 256 (e.g. -e nproc=8)'
"""

from ansible import context

from ansible_collections.trainops.multinode.plugins.module_utils._launch_params import config_args_passed
from ansible_collections.trainops.multinode.plugins.module_utils._launch_params import launch_problems as _problems
from ansible_collections.trainops.multinode.plugins.plugin_utils._secret_args import literal_secret_problems
from ansible_collections.trainops.multinode.plugins.plugin_utils import _filter_input


def launch_problems(params, what='problems'):
    params = _filter_input.mapping('launch_problems', params, kind='a mapping of knob to value')
    if what == 'config_args':
        return config_args_passed(params)
    return _problems(params) + literal_secret_problems(context.CLIARGS.get('extra_vars', ()))


class FilterModule(object):
    def filters(self):
        return {'launch_problems': launch_problems}
