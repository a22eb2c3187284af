# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: run_id_shell_function
short_description: A bash function that checks a run id with the collection's run-id rule
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - Used by the role C(trainops.multinode.sbatch) to write its batch script, which reads a run id from a file after a
    requeue; its output may change with the role.
  - 'Returns the definition of a bash function of that name. It succeeds when its one argument is a run id by the
    same rule the launch uses everywhere: a letter or digit, then letters, digits, C(_), C(.), C(@), C(+), C(=) and
    C(-), at most 200 characters, without C(..).'
options:
  _input:
    description: The function's name (a shell identifier).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Write a script that checks a run id
  ansible.builtin.copy:
    content: "{{ 'valid_run_id' | trainops.multinode.run_id_shell_function }}"
    dest: /tmp/check.sh
    mode: "0600"
"""

RETURN = r"""
_value:
  description: The function's definition, ending with a newline.
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.module_utils._torchrun import TorchrunError, run_id_shell_function as _function


def run_id_shell_function(name):
    try:
        return _function(name)
    except TorchrunError as exc:
        raise AnsibleFilterError('run_id_shell_function: %s' % exc) from None


class FilterModule(object):
    def filters(self):
        return {'run_id_shell_function': run_id_shell_function}
