# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Copy a directory from the controller to the host with rsync, run by the action itself (see
plugins/modules/rsync.py for the documentation).

Unlike ansible.posix.synchronize, no module runs: synchronize ships a Python module to the controller itself
for every host, which costs about 0.4 s of controller CPU per node and launch (docs/benchmarks.md). Here the
worker that runs the task starts rsync directly, over the host's own ssh settings as Ansible's ssh connection
plugin resolved them, and through the ControlMaster socket Ansible opened to the host when there is one.
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible.utils.path import unfrackpath

from ansible_collections.trainops.multinode.plugins.module_utils._rsync import (
    RsyncError,
    remote_path,
    rsync_argv,
    run_rsync,
    ssh_command,
)
from ansible_collections.trainops.multinode.plugins.plugin_utils._in_worker import LOCAL

ARGUMENT_SPEC = dict(
    src=dict(type='path', required=True),
    dest=dict(type='str', required=True),
    create_dest=dict(type='bool', default=False),
    archive=dict(type='bool', default=True),
    compress=dict(type='bool', default=False),
    rsync_opts=dict(type='list', elements='str', default=[]),
)

SSH = ('ssh', 'ansible.builtin.ssh')


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _runner = None   # tests put a fake subprocess.run here

    def _ssh_target(self, dest):
        """``(rsh, [user@]host:dest)`` from the host's ssh connection settings."""
        conn = self._connection
        host = conn.get_option('host') or self._play_context.remote_addr
        port = conn.get_option('port')
        user = conn.get_option('remote_user')
        ssh_args = [conn.get_option('ssh_args'), conn.get_option('ssh_common_args'), conn.get_option('ssh_extra_args')]
        timeout = conn.get_option('timeout')
        if timeout:
            ssh_args.append('-o ConnectTimeout=%d' % int(timeout))
        rsh = ssh_command(conn.get_option('ssh_executable'), port=port, private_key=conn.get_option('private_key_file'),
                          ssh_args=ssh_args, control_path=self._control_path(conn, host, port, user, ssh_args))
        return rsh, remote_path(host, user, dest)

    @staticmethod
    def _control_path(conn, host, port, user, ssh_args):
        """The socket of the ControlMaster Ansible's own connection uses for this host, when it persists one and the
        ssh arguments do not name a ControlPath themselves (as the ssh connection plugin decides it)."""
        words = ' '.join(a for a in ssh_args if a)
        if 'ControlPersist' not in words or 'ControlPath' in words:
            return None
        template = conn.get_option('control_path')
        if not template:
            make = getattr(conn, '_create_control_path', None)
            if make is None:
                return None
            template = make(host, port, user)
        return template % dict(directory=unfrackpath(conn.get_option('control_path_dir')))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars or {})
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        transport = self._connection.transport
        check_mode = bool(self._task.check_mode)
        if transport in LOCAL:
            rsh, dest = None, args['dest']
            if args['create_dest'] and not check_mode:
                try:
                    os.makedirs(dest, exist_ok=True)
                except OSError as exc:
                    raise AnsibleActionFail('cannot create %s: %s' % (dest, to_text(exc)))
        elif transport in SSH:
            rsh, dest = self._ssh_target(args['dest'])
        else:
            raise AnsibleActionFail('trainops.multinode.rsync copies over the ssh or local connection, not %s: use '
                                    'ansible.posix.synchronize for that host' % transport)
        argv = rsync_argv(args['src'], dest, rsh=rsh, create_dest=args['create_dest'], opts=args['rsync_opts'],
                          archive=args['archive'], compress=args['compress'], check_mode=check_mode)
        result['cmd'] = argv
        try:
            outcome = run_rsync(argv, runner=self._runner)
        except RsyncError as exc:
            result.update(exc.result, failed=True, msg=exc.msg)
            return result
        except OSError as exc:
            raise AnsibleActionFail('cannot run rsync on the controller: %s. Install rsync there.' % to_text(exc))
        result.update(changed=outcome['changed'], rc=outcome['rc'], stdout_lines=outcome['items'])
        return result
