# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: code_excludes
short_description: The rsync options that copy only the code of a directory on the controller
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - Leaves out C(.git), virtual environments (C(.venv), C(venv) and every directory below that holds a C(pyvenv.cfg)),
    C(__pycache__), and what the C(.gitignore) files exclude (rsync's C(--filter=':- .gitignore'), when the directory
    has a C(.gitignore)). The same rules as the option C(code_only) of M(trainops.multinode.rsync).
  - Used by the role C(trainops.multinode.code_sync) (C(playbooks/sync.yml), C(playbooks/setup.yml)).
options:
  _input:
    description: The directory on the controller.
    type: path
    required: true
"""

EXAMPLES = r"""
- name: Copy the code only
  ansible.posix.synchronize:
    src: ~/src/myproject/
    dest: /srv/workspace/
    rsync_opts: "{{ '~/src/myproject' | expanduser | trainops.multinode.code_excludes }}"
"""

RETURN = r"""
_value:
  description: rsync options, C(--exclude=...) and C(--filter=...).
  type: list
  elements: str
"""

from ansible_collections.trainops.multinode.plugins.module_utils._rsync import code_only_opts, marker_text
from ansible_collections.trainops.multinode.plugins.module_utils._rsync import source_problem as _source_problem


def source_problem(recorded, source, where):
    """The filter source_problem (plugins/filter/source_problem.yml): the line, or ''."""
    return _source_problem(marker_text(str(recorded or '').encode('utf-8')), str(source), str(where)) or ''


class FilterModule(object):
    def filters(self):
        return {'code_excludes': code_only_opts, 'source_problem': source_problem}
