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
  - Used by the role C(trainops.multinode.job) to resume a run (roles/job/tasks/resume.yml, through the action
    M(trainops.multinode.resume)); its interface may change with it.
  - O(state=inspected) says whether the node has the run's directory O(run_dir) and its C(outputs/checkpoint.pt),
    with the checkpoint's size, mtime, age and identity, and its sha256 with O(digest).
  - O(state=carried) copies that checkpoint into O(output_dir) as C(checkpoint.pt) (mode C(0600)); a reflink where the
    file system has one, else C(copy_file_range), else a plain copy. It is never hard-linked. The copy is refused
    when the file is not the one O(state=inspected) saw (O(expect)) or changed while it was copied.
  - O(state=pulled) gets the checkpoint from another node, O(source), over SSH as the user the module runs as (the
    keys and C(known_hosts) of the role C(trainops.multinode.ssh_mesh); host keys checked, no prompt) into
    O(output_dir) as C(checkpoint.pt) (mode C(0600), through a temporary file; O(output_dir) is created C(0700) and
    never followed when it is a link). What arrives must have the sha256 O(checksum). When SSH fails the module does
    not fail; it returns RV(pulled) false and RV(error), and the checkpoint can be carried another way.
  - O(state=received) moves a file the controller put on the node, O(src), into O(output_dir) as C(checkpoint.pt)
    (mode C(0600), through a temporary file, as O(state=pulled) does); what arrives must have the sha256 O(checksum).
    O(src) is removed.
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
      - The earlier run's directory on the node, C(<state dir>/runs/<run id>). Required with O(state=inspected) and
        O(state=carried).
    type: path
  state:
    description:
      - V(inspected) looks, V(carried) copies the checkpoint, V(pulled) gets it from another node, V(received) takes
        the copy the controller sent.
    type: str
    choices: [inspected, carried, pulled, received]
    default: inspected
  output_dir:
    description:
      - The new run's output directory, created (C(0700)) when missing. Required with O(state=carried),
        O(state=pulled) and O(state=received).
    type: path
  digest:
    description:
      - With O(state=inspected), report the checkpoint's sha256; with O(state=carried), report the copy's. Either
        reads the whole file.
    type: bool
    default: true
  expect:
    description:
      - The RV(checkpoint.identity) that O(state=inspected) reported; with O(state=carried), a file that is no longer
        that one is not copied and the module fails.
    type: str
  checksum:
    description:
      - With O(state=carried), the sha256 that O(state=inspected) reported; a copy that differs is removed and the
        module fails. Required with O(state=pulled) and O(state=received), where what arrives must have it.
    type: str
  source:
    description:
      - The node to get the checkpoint from, as the SSH mesh knows it (its address or name). Required with
        O(state=pulled).
    type: str
  source_path:
    description:
      - The checkpoint's path on O(source). Required with O(state=pulled).
    type: str
  size:
    description:
      - The checkpoint's size in bytes; with O(state=pulled) and O(state=received), what arrives must have it.
    type: int
  src:
    description:
      - With O(state=received), the file on the node that holds the copy the controller sent (in the task's temporary
        directory). Required with O(state=received).
    type: path
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

- name: Get the copy from node 10.0.0.11 over the nodes' SSH
  trainops.multinode.checkpoint_carry:
    state: pulled
    source: 10.0.0.11
    source_path: /home/train/.trainops/runs/multinode_20261124_080000/outputs/checkpoint.pt
    output_dir: /home/train/.trainops/runs/multinode_20261124_080000/outputs
    checksum: "{{ carried.checksum }}"
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
      description: Its sha256 (with O(digest) only).
      type: str
    size:
      description: Its size in bytes.
      type: int
    mtime:
      description: Its modification time (seconds since the epoch).
      type: float
    age:
      description: Seconds since its modification time, on the node's own clock when it was looked at.
      type: float
    identity:
      description: What names this version of the file (device, inode, size, modification and change times), for
        O(expect).
      type: str
dest:
  description: The copy's path.
  returned: state=carried, state=pulled or state=received
  type: str
checksum:
  description: The copy's sha256 (V(null) with O(state=carried) without O(digest) or O(checksum)).
  returned: state=carried, state=pulled or state=received, not in check mode
  type: str
method:
  description: How it was copied, V(reflink), V(copy_file_range) or V(copy).
  returned: state=carried and not in check mode
  type: str
pulled:
  description: Whether the checkpoint arrived from O(source).
  returned: state=pulled
  type: bool
error:
  description: Why the copy over SSH failed (V(pulled) false).
  returned: state=pulled and the SSH command failed
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainops.multinode.plugins.module_utils._resume import (
    PullError,
    ResumeError,
    carry,
    inspect,
    pull,
    receive,
    ssh_command,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            run_dir=dict(type='path'),
            state=dict(type='str', choices=['inspected', 'carried', 'pulled', 'received'], default='inspected'),
            output_dir=dict(type='path'),
            digest=dict(type='bool', default=True),
            expect=dict(type='str'),
            checksum=dict(type='str'),
            source=dict(type='str'),
            source_path=dict(type='str'),
            size=dict(type='int'),
            src=dict(type='path'),
        ),
        required_if=[('state', 'inspected', ('run_dir',)),
                     ('state', 'carried', ('run_dir', 'output_dir')),
                     ('state', 'carried', ('checksum', 'expect'), True),
                     ('state', 'pulled', ('output_dir', 'checksum', 'source', 'source_path')),
                     ('state', 'received', ('output_dir', 'checksum', 'src'))],
        supports_check_mode=True,
    )
    params = module.params
    try:
        if params['state'] == 'inspected':
            module.exit_json(changed=False, **inspect(params['run_dir'], digest=params['digest']))
        if module.check_mode:
            module.exit_json(changed=True, dest='%s/checkpoint.pt' % params['output_dir'].rstrip('/'))
        if params['state'] == 'pulled':
            try:
                got = pull(ssh_command(params['source'], params['source_path']), params['output_dir'],
                           params['checksum'], params['size'])
            except PullError as exc:
                module.exit_json(changed=False, pulled=False, error=str(exc))
            module.exit_json(changed=True, pulled=True, **got)
        if params['state'] == 'received':
            module.exit_json(changed=True, **receive(params['src'], params['output_dir'], params['checksum'], params['size']))
        module.exit_json(changed=True, **carry(params['run_dir'], params['output_dir'], params['checksum'],
                                               expect=params['expect'], digest=params['digest']))
    except (ResumeError, OSError) as exc:
        module.fail_json(msg='trainops_resume_from: %s' % exc)


if __name__ == '__main__':
    main()
