#!/usr/bin/python
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
module: node_log
short_description: Read one rank's lines of a run's node log on the node, a bounded chunk at a time
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - Reads the node log (C(<state_dir>/<node>/runs/<run_id>/node.log)) of a run that
    M(trainops.multinode.torchrun) started, from byte O(offset) on, at most O(max_bytes) at a time, and returns the
    lines of rank O(rank) without their C([rank N]) prefix (torchrun prefixes each rank's lines, see
    C(roles/job/README.md)).
  - Only whole lines are returned while the run goes on; once it has ended (its C(exit.json) exists) the last line is
    returned too. Ask again from RV(offset) for what comes next.
  - The log is opened without following a symbolic link; a line longer than 64 KiB comes in pieces.
  - P(trainops.multinode.rank_log#module) uses it to follow a rank's log live (C(playbooks/logs.yml -e follow=true)).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - trainops.multinode._attributes
attributes:
  check_mode:
    support: full
    details:
      - It only reads.
options:
  state_dir:
    description:
      - The state root on the node, as given to M(trainops.multinode.torchrun); C(~) is expanded on the node.
    type: str
    required: true
  node_id:
    description:
      - The node's key below O(state_dir), as given to M(trainops.multinode.torchrun) (empty for the host name).
    type: str
  run_id:
    description:
      - The run whose log is read.
    type: str
    required: true
  rank:
    description:
      - The global rank whose lines are returned.
    type: int
    required: true
  offset:
    description:
      - The byte of the log where reading starts (RV(offset) of the previous read). When the log is shorter, reading
        starts again from its beginning.
    type: int
    default: 0
  max_bytes:
    description:
      - The most bytes read (1 to 16 MiB).
    type: int
    default: 1048576
seealso:
  - module: trainops.multinode.rank_log
  - module: trainops.multinode.torchrun
"""

EXAMPLES = r"""
- name: Read rank 3's lines of run multinode_42ch_256th_20260101-120000
  trainops.multinode.node_log:
    state_dir: ~/.cache/trainops/state
    run_id: multinode_42ch_256th_20260101-120000
    rank: 3
  register: rank_3
"""

RETURN = r"""
lines:
  description: The rank's lines read, without their prefix.
  returned: always
  type: list
  elements: str
  sample: ["epoch=0 step=12/40 loss=2.3456"]
offset:
  description: Where the next read starts.
  returned: always
  type: int
  sample: 40960
size:
  description: The log's size in bytes when it was read; V(null) when there is no log.
  returned: always
  type: int
  sample: 40960
ended:
  description: Whether the run has ended on the node (its C(exit.json) exists) and everything up to RV(size) was read.
  returned: always
  type: bool
  sample: false
missing:
  description: Whether the run has no log on the node (not started here, or another run id).
  returned: always
  type: bool
  sample: false
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainops.multinode.plugins.module_utils._node_identity import NodeIdentityError, node_state_dir
from ansible_collections.trainops.multinode.plugins.module_utils._rank_logs import RankLogError, read_rank_lines
from ansible_collections.trainops.multinode.plugins.module_utils._torchrun import RUN_ID_RE

MAX_BYTES = 16 * 1024 * 1024


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state_dir=dict(type='str', required=True),
            node_id=dict(type='str'),
            run_id=dict(type='str', required=True),
            rank=dict(type='int', required=True),
            offset=dict(type='int', default=0),
            max_bytes=dict(type='int', default=1024 * 1024),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if not RUN_ID_RE.fullmatch(params['run_id']):
        module.fail_json(msg='run_id %r is not a run id' % (params['run_id'],))
    if params['rank'] < 0 or params['offset'] < 0 or not 0 < params['max_bytes'] <= MAX_BYTES:
        module.fail_json(msg='rank and offset must be >= 0 and max_bytes from 1 to %d' % MAX_BYTES)
    try:
        run_dir = os.path.join(node_state_dir(params['state_dir'], params['node_id'] or None), 'runs', params['run_id'])
        ended = os.path.exists(os.path.join(run_dir, 'exit.json'))
        read = read_rank_lines(os.path.join(run_dir, 'node.log'), params['rank'], params['offset'], params['max_bytes'],
                               final=ended)
    except (NodeIdentityError, RankLogError, OSError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, ended=ended and read['offset'] >= (read['size'] or 0), **read)


if __name__ == '__main__':
    main()
