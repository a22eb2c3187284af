# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: verdict_stop_reason
short_description: The stop reason the collect records on a node, from the wait's verdict there
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - When a node failed or the wait gave up, the role C(trainops.multinode.job) stops what is left of the job on every
    node before it collects (its C(collect) tasks). This filter gives the O(trainops.multinode.torchrun#module:stop_reason)
    recorded on a node from what M(trainops.multinode.torchrun_wait) judged there
    (RV(trainops.multinode.torchrun_wait#module:verdict.state)).
  - V(gone) (unreachable past the grace) gives V(unreachable), V(timed_out) gives V(timeout), every other verdict, and
    no verdict (an empty string or V(null)), gives V(peer). The first stop's reason is kept on a node, so a node the
    wait stopped already (V(stalled), V(peer)) keeps that reason.
  - The vocabulary, and this mapping, live in C(plugins/module_utils/_outcomes.py) (docs/failures.md). A name that is
    not a verdict fails the filter, naming it.
options:
  _input:
    description: The wait's verdict on the node (its C(verdict.state)), empty or V(null) for none.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Stop the job on the node, recording why
  trainops.multinode.torchrun:
    state: stopped
    state_dir: /srv/trainops/state
    stop_reason: "{{ waited.verdict.state | default('') | trainops.multinode.verdict_stop_reason }}"
"""

RETURN = r"""
_value:
  description: The stop reason, V(peer), V(unreachable) or V(timeout).
  type: str
"""

from ansible_collections.trainops.multinode.plugins.module_utils import _outcomes
from ansible_collections.trainops.multinode.plugins.plugin_utils._outcome_filter import outcome_filter

verdict_stop_reason = outcome_filter('verdict_stop_reason', _outcomes.collect_stop_reason)


class FilterModule(object):
    def filters(self):
        return {'verdict_stop_reason': verdict_stop_reason}
