#!/usr/bin/python
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
module: dir_token
short_description: Tell which nodes see the same directory (an NFS home, say)
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - Returns the token of a directory, a random value kept in the file C(.trainops-dir-id) in it, creating the directory
    and the token when they are missing. Nodes that return the same token see the same directory, which cannot be told
    from C(stat) alone (NFS clients have device numbers of their own, cloned images repeat inode numbers and times).
  - The filter P(trainops.multinode.shared_dirs#filter) groups the nodes by token, so that a role acts on a shared
    directory through one node only (N nodes that rsync or check out into one directory at once race each other).
  - The token is written to a temporary file and hard-linked into place, which is atomic on NFS too, so nodes racing
    to create it all read the same one.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - trainops.multinode._attributes
attributes:
  check_mode:
    support: full
    details:
      - In check mode nothing is created; a missing token is returned as V(null).
options:
  path:
    description:
      - The directory; C(~) is expanded on the node.
    type: path
    required: true
  mode:
    description:
      - The mode of the directory (and its missing parents) when the module creates it.
    type: raw
    default: '0700'
seealso:
  - module: trainops.multinode.preflight
"""

EXAMPLES = r"""
- name: Read the token of the directory above the code
  trainops.multinode.dir_token:
    path: ~/src
  register: src_dir

- name: Sync once per directory that nodes share
  ansible.builtin.debug:
    msg: "{{ inventory_hostname }} acts for {{ shares.groups }}"
  when: shares.primary[inventory_hostname] == inventory_hostname
  vars:
    shares: >-
      {{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, ['src_dir', 'token'])))
         | trainops.multinode.shared_dirs }}
"""

RETURN = r"""
token:
  description: The directory's token; V(null) in check mode when there is none yet.
  returned: always
  type: str
  sample: 3f0c9d1e6b2a4c8d9e0f1a2b3c4d5e6f
path:
  description: The directory's absolute path on the node.
  returned: always
  type: str
  sample: /home/train/src
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainops.multinode.plugins.module_utils._node_identity import NodeIdentityError, dir_token


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            mode=dict(type='raw', default='0700'),
        ),
        supports_check_mode=True,
    )
    path = os.path.abspath(module.params['path'])
    try:
        mode = int(str(module.params['mode']), 8)
    except ValueError:
        module.fail_json(msg='mode must be an octal mode such as 0700, got %r' % (module.params['mode'], ))
    existed = os.path.exists(os.path.join(path, '.trainops-dir-id'))
    try:
        token = dir_token(path, create=not module.check_mode, mode=mode)
    except (OSError, NodeIdentityError) as exc:
        module.fail_json(msg='cannot create or read the token of %s: %s' % (path, exc), path=path)
    module.exit_json(changed=not existed, token=token, path=path)


if __name__ == '__main__':
    main()
