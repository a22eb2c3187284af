# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The task and connection an action plugin gets from Ansible, faked for the action plugins' unit tests."""

from __future__ import annotations

from unittest.mock import MagicMock


def make_action(cls, action, args, transport='ssh', check_mode=False):
    """``(cls instance, its connection)``: the action plugin ``cls`` for task ``action`` with ``args``."""
    task = MagicMock()
    task.args = dict(args)
    task.async_val = 0
    task.check_mode = check_mode
    task.diff = False
    task.action = action
    connection = MagicMock()
    connection.transport = transport
    connection._shell.tmpdir = None
    return cls(task, connection, MagicMock(), loader=None, templar=None, shared_loader_obj=None), connection
