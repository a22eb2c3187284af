#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
---
module: git_state
short_description: Report the git state of a checkout on a node (branch, commit, dirty files, upstream, remote)
version_added: 0.1.0
description:
  - Reads, without changing anything, the git state of O(path) on the node, that is whether it is inside a git work tree (or
    missing, not a directory, not a repository, a bare repository), the branch or detached HEAD, the commit with its
    subject and date, the upstream with ahead/behind counts, the URL of O(remote) with credentials removed, and
    whether the tree is dirty, with the changed and untracked files.
  - Branch, commit, upstream, ahead/behind and the changes come from one C(git status --porcelain=v2 --branch -z);
    C(git rev-parse --show-toplevel), C(git log -1) and C(git remote get-url) add the top of the work tree, the
    subject and date, and the remote URL. At most four git commands run.
  - Git runs with C(LANG=C), C(GIT_OPTIONAL_LOCKS=0) (status never refreshes or writes the index), and
    C(-c safe.directory=<top of the work tree>), so a checkout owned by another user of the node (a training user's
    checkout read with C(become)) is read instead of being refused for I(dubious ownership).
  - Returns the state under RV(git); nothing is set as a fact. Register the result and read other nodes' states on
    the controller as C(hostvars[host].<registered>.git), for example to compare them with the controller's checkout
    before a launch.
  - A path that does not exist or is not a git work tree is a normal result (RV(git.state) says which); the task
    fails only when git is not installed or git itself fails, and then RV(git.state) is V(error).
author:
  - trainops maintainers (@trainops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - trainops.multinode._attributes
attributes:
  check_mode:
    support: full
    details:
      - The module only reads; it behaves the same in check mode.
options:
  path:
    description:
      - A directory in the work tree to report on, usually its top; a subdirectory reports the whole work tree.
    type: path
    required: true
  remote:
    description:
      - Name of the remote whose URL is returned as RV(git.remote_url).
    type: str
    default: origin
  max_files:
    description:
      - At most this many changed or untracked files are listed in RV(git.files); RV(git.files_total) always counts
        them all. V(0) lists none.
    type: int
    default: 50
  untracked:
    description:
      - Whether untracked files (not ignored by C(.gitignore)) are looked for and make the tree dirty.
      - An untracked directory counts as one entry (C(dir/)), as C(git status) shows it.
      - V(false) is faster on trees with very many untracked files.
    type: bool
    default: true
  scope:
    description:
      - Only changes under O(path) make the tree dirty, for code that is a subdirectory of a larger repository. The
        commit and branch are the whole repository's.
    type: bool
    default: false
requirements:
  - git 2.15 or newer on the node (C(--porcelain=v2), C(GIT_OPTIONAL_LOCKS)).
notes:
  - The repository configuration of a checkout owned by another user is honoured as git would for its owner, except
    C(core.fsmonitor), which is turned off; a clean filter that user configured can run while git status re-hashes a
    modified file. Read such checkouts only where that user is trusted with the account the module runs as.
  - Git before 2.35.3 does not know C(safe.directory=*), which the top of the work tree is looked up with; on
    2.35.2 a checkout owned by another user may fail with I(dubious ownership).
  - Submodules are reported when they have changes (another commit checked out than the one recorded, modified or
    untracked content); uninitialised and clean submodules are not listed.
seealso:
  - module: ansible.builtin.git
"""

EXAMPLES = r"""
- name: Read the state of the code checkout on every node
  trainops.multinode.git_state:
    path: /srv/trainops/code
  register: code_state

- name: Fail when a node is not on a branch
  ansible.builtin.assert:
    that: not code_state.git.detached
    fail_msg: "{{ inventory_hostname }} is on a detached HEAD at {{ code_state.git.short }}"

- name: Only tracked files, list at most 10 of them, URL of the upstream remote
  trainops.multinode.git_state:
    path: /home/train/project
    untracked: false
    max_files: 10
    remote: upstream
  register: project_state

- name: Show each node's branch and commit
  ansible.builtin.debug:
    msg: "{{ code_state.git.branch }} @ {{ code_state.git.short }}, dirty: {{ code_state.git.dirty }}"
"""

RETURN = r"""
git:
  description: The git state of O(path).
  returned: always
  type: dict
  contains:
    path:
      description: O(path) as given (user and variables expanded).
      type: str
      sample: /srv/trainops/code
    state:
      description:
        - V(repository) when O(path) is in a git work tree.
        - V(missing), V(not_a_directory), V(not_a_repository), V(bare) (a bare repository or a C(.git) directory)
          otherwise; every other key then has its empty value.
        - V(error) when git failed (only in a failed result).
      type: str
      sample: repository
    is_repo:
      description: V(true) when RV(git.state) is V(repository).
      type: bool
      sample: true
    message:
      description: Why O(path) is not a work tree, or the git error; V(null) for a work tree.
      type: str
      sample: /srv/trainops/code is not in a git work tree
    toplevel:
      description: Top directory of the work tree (symlinks resolved); V(null) when not a work tree.
      type: str
      sample: /srv/trainops/code
    branch:
      description: Checked out branch (also before its first commit); V(null) on a detached HEAD.
      type: str
      sample: main
    detached:
      description: V(true) when HEAD is detached.
      type: bool
      sample: false
    commit:
      description: Full sha of HEAD; V(null) before the first commit.
      type: str
      sample: 656ce8f5a3eb34b7041d3c53df3339339aaa7398
    short:
      description: Abbreviated sha (12 characters, more only where 12 are ambiguous); V(null) before the first commit.
      type: str
      sample: 656ce8f5a3eb
    initial:
      description: V(true) when the branch has no commit yet.
      type: bool
      sample: false
    subject:
      description: Subject line of HEAD's commit message.
      type: str
      sample: Fix the learning rate schedule
    date:
      description: Committer date of HEAD (ISO 8601 with offset).
      type: str
      sample: "2026-01-05T10:11:12+01:00"
    upstream:
      description: Upstream of the branch (C(remote/branch)); V(null) when none is configured.
      type: str
      sample: origin/main
    upstream_gone:
      description: V(true) when an upstream is configured but its remote-tracking branch no longer exists.
      type: bool
      sample: false
    ahead:
      description: Commits on the branch that are not on its upstream, as of the last fetch; V(null) without upstream.
      type: int
      sample: 0
    behind:
      description: Commits on the upstream that are not on the branch, as of the last fetch; V(null) without upstream.
      type: int
      sample: 2
    remote:
      description: O(remote).
      type: str
      sample: origin
    remote_url:
      description:
        - URL of O(remote) (C(insteadOf) applied); V(null) when there is no such remote.
        - Credentials are removed, C(https://user:token@host/x) becomes C(https://host/x); a user name alone is
          removed for http(s) and ftp(s), kept for ssh (C(git@host:org/repo.git)).
      type: str
      sample: https://github.com/org/repo.git
    dirty:
      description: V(true) when there are uncommitted changes (staged, unstaged, unmerged, or untracked files when
        O(untracked=true)).
      type: bool
      sample: true
    files:
      description:
        - The first O(max_files) changes in C(git status) order.
        - Each has C(path) (relative to RV(git.toplevel)), C(orig_path) (the source of a rename or copy, else V(null)),
          C(status) (git's two letters C(XY), index then work tree, C(.) for unchanged, C(??) for untracked),
          C(kind) (V(changed), V(renamed), V(copied), V(unmerged) or V(untracked)) and C(submodule) (bool).
      type: list
      elements: dict
      sample: [{path: train.py, orig_path: null, status: ".M", kind: changed, submodule: false},
               {path: notes/, orig_path: null, status: "??", kind: untracked, submodule: false}]
    files_total:
      description: Number of changes, also those not listed in RV(git.files).
      type: int
      sample: 2
    files_truncated:
      description: V(true) when RV(git.files) lists fewer than RV(git.files_total).
      type: bool
      sample: false
    counts:
      description: C(staged), C(unstaged), C(untracked) and C(unmerged) file counts (a file staged and changed again
        counts in both C(staged) and C(unstaged)).
      type: dict
      sample: {staged: 0, unstaged: 1, untracked: 1, unmerged: 0}
    untracked_checked:
      description: O(untracked).
      type: bool
      sample: true
    submodules:
      description: Submodules with changes, each with C(path), C(commit_changed) (another commit is checked out than
        the superproject records), C(modified) and C(untracked) (bools).
      type: list
      elements: dict
      sample: [{path: third_party/nccl-tests, commit_changed: true, modified: false, untracked: false}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainops.multinode.plugins.module_utils._git_state import GitStateError, Runner
from ansible_collections.trainops.multinode.plugins.module_utils._git_state_task import ARGUMENT_SPEC, run


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    git = module.get_bin_path('git')

    def run_command(argv, environ_update):
        # expand_user_and_vars=False: a path with "$" or "~" in it is passed to git as it is
        return module.run_command(argv, environ_update=environ_update, expand_user_and_vars=False, errors='replace')

    try:
        result = run(module.params, Runner(run_command, git=git) if git else None)
    except GitStateError as exc:
        module.fail_json(msg=exc.msg, **({'git': exc.state} if exc.state is not None else {}))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
