# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: preload
type: aggregate
short_description: Load the collection's plugins once before Ansible forks its workers, and let its waits back off
version_added: 0.2.0
description:
  - Ansible runs every task of every host in a worker process that it forks from the controller's main process. A
    worker that templates one of this collection's filters, or runs one of its action plugins, imports them first
    (ansible-core imports every filter file of a collection to find one filter by name), and that import is lost
    when the worker ends. With many nodes this is most of the controller's CPU time per node.
  - This callback imports the collection's filter and action plugins in the main process when a playbook starts, so
    every worker inherits them already imported. It changes no task, result or output.
  - It also makes the main process's looks for its workers back off while a task runs long. Ansible looks for
    results every C(internal_poll_interval) (0.001 s by default) for as long as a task runs, and, when every fork is
    busy, every 0.1 ms for a free worker; a launch that waits for its training job holds a task for hours, and those
    looks were most of what watching it cost the controller. With this callback the sleep between two looks is 2 % of
    the time waited since the last result, from C(internal_poll_interval) up to 0.25 s. A result is seen at most 2 %
    (and 0.25 s) later, a short task as soon as before (C(plugins/plugin_utils/_poll_backoff.py); ansible-core without
    the methods it wraps is left as it is).
  - The repository's C(ansible.cfg) enables it. With the collection installed, add C(trainops.multinode.preload) to
    C(callbacks_enabled) in C([defaults]) (or E(ANSIBLE_CALLBACKS_ENABLED)); without it the playbooks work the same,
    with more controller CPU per node.
requirements:
  - enabled in callbacks_enabled (or ANSIBLE_CALLBACKS_ENABLED)
"""

from ansible.plugins.callback import CallbackBase

from ansible_collections.trainops.multinode.plugins.plugin_utils._poll_backoff import install as install_poll_backoff
from ansible_collections.trainops.multinode.plugins.plugin_utils._preload import preload


class CallbackModule(CallbackBase):
    """Imports the collection's filter and action plugins in the main process (plugin_utils/_preload.py)."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'trainops.multinode.preload'
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        install_poll_backoff()
        failed = preload()
        for name, error in failed:
            # a plugin that cannot be imported fails the task that uses it, with Ansible's own message; here a
            # warning only, so that a broken plugin no playbook task uses never stops a playbook
            self._display.warning('trainops.multinode.preload: %s could not be imported: %s' % (name, error))
