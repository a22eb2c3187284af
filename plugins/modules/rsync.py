# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
---
module: rsync
short_description: Copy a directory from the controller to the host with rsync, host keys checked
version_added: 0.2.0
description:
  - Runs C(rsync) on the controller, once per host, from O(src) to O(dest) on the host, over the host's own ssh
    settings as Ansible's ssh connection resolves them (address, port, user, key, C(ssh_args), C(ssh_common_args),
    C(ssh_extra_args), C(timeout)). When Ansible keeps a ControlMaster open to the host (C(ControlPersist) in the ssh
    arguments), rsync goes through that connection instead of opening a new one.
  - No option turns host-key checking off; the host keys are checked as Ansible's own connection checks them
    (for example C(StrictHostKeyChecking=yes) and C(UserKnownHostsFile) in C(ansible_ssh_common_args)).
  - With the C(local) connection (C(local) or C(ansible.builtin.local)) the host is the controller itself, and the
    action copies the directory in Python without rsync, with rsync's semantics and items (symlinks kept as links,
    permissions, times, group, C(--exclude)/C(--include) patterns, C(--delete) sparing excluded files,
    C(--checksum), check mode). Only what that copy does not implement makes it run rsync locally instead
    (another option of O(rsync_opts), O(archive=false), O(src) without its trailing C(/), a C(.rsync-filter)
    file in the tree, a file that is neither a regular file, a directory nor a symlink).
  - The job role syncs the workspace with it. Unlike M(ansible.posix.synchronize), which runs a Python module on the
    controller for every host, the action runs rsync itself, which saves about 0.4 s of controller CPU per host and
    launch (docs/contributing/benchmarks.md). Use M(ansible.posix.synchronize) for anything else (pulling, C(become), other
    connections, delegation).
  - This module is implemented as an action plugin; the module file only holds the documentation.
author:
  - trainops maintainers (@trainops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - trainops.multinode._attributes
  - ansible.builtin.action_common_attributes.flow
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details:
      - rsync runs with C(--dry-run) (the local copy only lists the items) and reports what it would change.
options:
  src:
    description:
      - The directory on the controller. With a trailing C(/) its contents are copied into O(dest), as with rsync.
    type: path
    required: true
  dest:
    description:
      - The directory on the host.
    type: str
    required: true
  create_dest:
    description:
      - Create O(dest) (C(mkdir -p)) on the host before the copy, through rsync's C(--rsync-path).
    type: bool
    default: false
  archive:
    description:
      - Copy with C(--archive) (recursive, links, permissions, times, group, owner, devices).
    type: bool
    default: true
  compress:
    description:
      - Compress the transfer (C(--compress)).
    type: bool
    default: false
  rsync_opts:
    description:
      - More rsync options, for example C(--delete) or C(--exclude=.git).
    type: list
    elements: str
    default: []
  code_only:
    description:
      - Copy only the code of O(src) - leave out C(.git), virtual environments (C(.venv), C(venv) and any directory
        that holds a C(pyvenv.cfg)) and C(__pycache__) at every depth, and what the C(.gitignore) files exclude
        (rsync's C(--filter=':- .gitignore'), when O(src) has a C(.gitignore)). These rules come before O(rsync_opts).
    type: bool
    default: false
  source_marker:
    description:
      - Record the source in the directory (a file C(.trainops-source) there, which the copy neither overwrites nor
        deletes), and refuse to copy another source into a directory that holds one, naming both, unless
        O(replace_source).
    type: bool
    default: false
  replace_source:
    description:
      - With O(source_marker), copy even when the directory holds the code of another source.
    type: bool
    default: false
requirements:
  - rsync on the controller and on the host, except for the local copy
seealso:
  - module: ansible.posix.synchronize
"""

EXAMPLES = r"""
- name: Sync the workspace to every node, creating the directory there
  trainops.multinode.rsync:
    src: "{{ playbook_dir }}/../files/workspace/"
    dest: /srv/trainops/workspace/
    create_dest: true
    rsync_opts: [--delete, --exclude=.git]
"""

RETURN = r"""
method:
  description: How the copy was made, C(rsync) or C(local) (in Python, the host being the controller).
  returned: when the copy ran
  type: str
  sample: local
cmd:
  description: The rsync command that ran.
  returned: when rsync ran
  type: list
  elements: str
rc:
  description: rsync's exit code (0 for a local copy).
  returned: when the copy ran
  type: int
  sample: 0
stdout_lines:
  description: What rsync transferred or deleted (or the local copy did), one C(<itemized changes> <name>) line each.
  returned: success
  type: list
  elements: str
  sample: [">f+++++++++ train.py"]
"""
