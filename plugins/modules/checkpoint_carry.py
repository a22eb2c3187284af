#!/usr/bin/python
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
module: checkpoint_carry
short_description: Find an earlier run's checkpoint on a node and copy it into a new run, without following links
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - Used by the role C(trainops.multinode.job) to resume a run (roles/job/tasks/resume.yml); its interface may change
    with it.
  - O(state=inspected) says whether the node has the run's directory O(run_dir) and its C(outputs/checkpoint.pt),
    with the checkpoint's sha256, size and mtime.
  - O(state=carried) copies that checkpoint into O(output_dir) as C(checkpoint.pt) (mode C(0600)); a reflink where the
    file system has one, else C(copy_file_range), else a plain copy. It is never hard-linked.
  - Nothing below the run's directory (the run's directory itself included) is followed when it is a symbolic link;
    the module refuses, naming it. Each of the run's directory, its C(outputs) and the checkpoint must belong to the
    user the module runs as (the checkpoint is loaded with pickle, which runs code), else it refuses, naming the
    owner; so root never loads a checkpoint another user wrote.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - trainops.multinode._attributes
attributes:
  check_mode:
    support: full
    details:
      - In check mode O(state=carried) copies nothing and reports a change.
options:
  run_dir:
    description:
      - The earlier run's directory on the node, C(<state dir>/runs/<run id>).
    type: path
    required: true
  state:
    description:
      - V(inspected) looks, V(carried) copies the checkpoint.
    type: str
    choices: [inspected, carried]
    default: inspected
  output_dir:
    description:
      - The new run's output directory, created (C(0700)) when missing. Required with O(state=carried).
    type: path
  checksum:
    description:
      - The sha256 that O(state=inspected) reported; a copy that differs (the file changed since) is removed and the
        module fails. Required with O(state=carried).
    type: str
seealso:
  - module: trainops.multinode.torchrun
"""

EXAMPLES = r"""
- name: Look for the run and its checkpoint
  trainops.multinode.checkpoint_carry:
    run_dir: /home/train/.trainops/runs/multinode_20261123_101500
  register: found

- name: Copy the checkpoint into the new run's outputs
  trainops.multinode.checkpoint_carry:
    state: carried
    run_dir: /home/train/.trainops/runs/multinode_20261123_101500
    output_dir: /home/train/.trainops/runs/multinode_20261124_080000/outputs
    checksum: "{{ found.checkpoint.checksum }}"
  when: found.checkpoint.isreg
"""

RETURN = r"""
run:
  description: Whether the node has the run's directory.
  returned: state=inspected
  type: bool
checkpoint:
  description: The run's checkpoint; only C(path) and C(isreg) when it has none.
  returned: state=inspected
  type: dict
  contains:
    path:
      description: Its path.
      type: str
    isreg:
      description: Whether it is there (a regular file).
      type: bool
    checksum:
      description: Its sha256.
      type: str
    size:
      description: Its size in bytes.
      type: int
    mtime:
      description: Its modification time (seconds since the epoch).
      type: float
dest:
  description: The copy's path.
  returned: state=carried
  type: str
method:
  description: How it was copied, V(reflink), V(copy_file_range) or V(copy).
  returned: state=carried and not in check mode
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainops.multinode.plugins.module_utils._resume import ResumeError, carry, inspect


def main():
    module = AnsibleModule(
        argument_spec=dict(
            run_dir=dict(type='path', required=True),
            state=dict(type='str', choices=['inspected', 'carried'], default='inspected'),
            output_dir=dict(type='path'),
            checksum=dict(type='str'),
        ),
        required_if=[('state', 'carried', ('output_dir', 'checksum'))],
        supports_check_mode=True,
    )
    params = module.params
    try:
        if params['state'] == 'inspected':
            module.exit_json(changed=False, **inspect(params['run_dir']))
        if module.check_mode:
            module.exit_json(changed=True, dest='%s/checkpoint.pt' % params['output_dir'].rstrip('/'))
        module.exit_json(changed=True, **carry(params['run_dir'], params['output_dir'], params['checksum']))
    except (ResumeError, OSError) as exc:
        module.fail_json(msg='trainops_resume_from: %s' % exc)


if __name__ == '__main__':
    main()
