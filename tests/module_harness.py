# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Running a module's main() in a unit test: exit_json/fail_json raise instead of exiting.

    from module_harness import ExitJson, FailJson       # tests/unit/plugins/modules/conftest.py patches them in
"""

from __future__ import annotations

from unittest.mock import patch


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


def exit_json(self, **kwargs):
    kwargs.setdefault('changed', False)
    raise ExitJson(kwargs)


def fail_json(self, msg, **kwargs):
    kwargs['msg'] = msg
    kwargs['failed'] = True
    raise FailJson(kwargs)


def patched_exits():
    """Context manager: AnsibleModule.exit_json/fail_json raise ExitJson/FailJson with the result."""
    return patch.multiple('ansible.module_utils.basic.AnsibleModule', exit_json=exit_json, fail_json=fail_json)
