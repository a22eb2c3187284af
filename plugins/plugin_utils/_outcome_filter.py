# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""A mapping of the vocabulary of how a job ends (module_utils/_outcomes.py) as a filter for the job role: a name the
vocabulary does not have fails the filter, naming the filter and the name."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.module_utils._outcomes import OutcomeError


def outcome_filter(name, mapping):
    """``mapping`` (a function of ``_outcomes``) as the filter ``name``."""
    def run(value):
        try:
            return mapping(value)
        except OutcomeError as exc:
            raise AnsibleFilterError('%s: %s' % (name, exc))
    run.__name__ = name
    return run
