# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: outcome_collected
short_description: Whether an experiment with this outcome was collected
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - False for V(running) (launched, not collected yet) and V(interrupted) (the controller went away during the wait),
    the outcomes of a job that C(playbooks/status.yml) (the role C(trainops.multinode.job), its C(status) tasks)
    collects once it has ended everywhere; true for the outcomes the collect judged (V(succeeded), V(failed), ...).
  - The vocabulary lives in C(plugins/module_utils/_outcomes.py) (docs/failures.md). A name that is not an outcome
    fails the filter, naming it.
options:
  _input:
    description: The experiment's outcome (its C(manifest.json)'s C(outcome)).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Collect a job that has not been collected yet
  ansible.builtin.debug:
    msg: still to collect
  when: not (report.outcome | trainops.multinode.outcome_collected)
"""

RETURN = r"""
_value:
  description: Whether the outcome is one the collect judged.
  type: bool
"""

from ansible_collections.trainops.multinode.plugins.module_utils import _outcomes
from ansible_collections.trainops.multinode.plugins.plugin_utils._outcome_filter import outcome_filter

outcome_collected = outcome_filter('outcome_collected', _outcomes.outcome_collected)


class FilterModule(object):
    def filters(self):
        return {'outcome_collected': outcome_collected}
