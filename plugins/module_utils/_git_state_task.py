# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The task of ``trainops.multinode.git_state``: its options, declared once, and what it does with them.

The module runs it on a node with ``AnsibleModule.run_command``; the action plugin of the same name runs it in
the task's worker when the task targets the controller (the job role reads the controller's checkout so).
"""

from __future__ import annotations

from ansible_collections.trainops.multinode.plugins.module_utils._git_state import (
    STATE_ERROR,
    GitStateError,
    collect,
    empty_state,
)

ARGUMENT_SPEC = dict(
    path=dict(type='path', required=True),
    remote=dict(type='str', default='origin'),
    max_files=dict(type='int', default=50),
    untracked=dict(type='bool', default=True),
    scope=dict(type='bool', default=False),
)


def run(params, runner):
    """``{'changed': False, 'git': state}``; raises GitStateError (its ``state`` when there is one) with the message to
    fail with. ``runner``: a ``Runner`` (module_utils._git_state), None when there is no git in ``PATH``."""
    if params['max_files'] < 0:
        raise GitStateError('max_files must be 0 or more, not {0}'.format(params['max_files']))
    if runner is None:
        msg = 'git is not installed on this node (no git in PATH)'
        state = empty_state(params['path'], params['remote'], params['untracked'])
        state.update(state=STATE_ERROR, message=msg)
        raise GitStateError(msg, state)
    state = collect(runner, params['path'], remote=params['remote'], max_files=params['max_files'],
                    untracked=params['untracked'], scope=params['scope'])
    return {'changed': False, 'git': state}
