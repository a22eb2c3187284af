# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Copy a directory from the controller to the host with rsync, run by the action itself (see
plugins/modules/rsync.py for the documentation).

Unlike ansible.posix.synchronize, no module runs: synchronize ships a Python module to the controller itself
for every host, which costs about 0.4 s of controller CPU per node and launch (docs/contributing/benchmarks.md). Here the
worker that runs the task starts rsync directly, over the host's own ssh settings as Ansible's ssh connection
plugin resolved them, and through the ControlMaster socket Ansible opened to the host when there is one.

A host on a local connection is the controller itself: the worker copies the directory in Python
(module_utils/_local_copy.py, rsync's semantics and items) and needs no rsync, unless the copy asks for
something only rsync does (an option it does not implement, a .rsync-filter file); then rsync runs locally.
"""

from __future__ import annotations

import os
import shlex
import subprocess

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible.utils.path import unfrackpath

from ansible_collections.trainops.multinode.plugins.module_utils._local_copy import (
    Unsupported,
    copy_options,
    is_local,
    local_copy,
)
from ansible_collections.trainops.multinode.plugins.module_utils._rsync import (
    MAX_MARKER_BYTES,
    SOURCE_MARKER,
    RsyncError,
    code_only_opts,
    marker_text,
    read_marker,
    source_problem,
    remote_path,
    rsync_argv,
    run_rsync,
    ssh_command,
)

ARGUMENT_SPEC = dict(
    src=dict(type='path', required=True),
    dest=dict(type='str', required=True),
    create_dest=dict(type='bool', default=False),
    archive=dict(type='bool', default=True),
    compress=dict(type='bool', default=False),
    rsync_opts=dict(type='list', elements='str', default=[]),
    code_only=dict(type='bool', default=False),
    source_marker=dict(type='bool', default=False),
    replace_source=dict(type='bool', default=False),
)

SSH = ('ssh', 'ansible.builtin.ssh')


def ssh_settings(conn, remote_addr):
    """``(rsh, host, user)`` of a host on Ansible's ssh connection ``conn``: the ssh command line with the host's own
    settings, through the ControlMaster socket Ansible opened to it when there is one (also the job's watch hub's,
    torchrun_wait)."""
    host = conn.get_option('host') or remote_addr
    port = conn.get_option('port')
    user = conn.get_option('remote_user')
    ssh_args = [conn.get_option('ssh_args'), conn.get_option('ssh_common_args'), conn.get_option('ssh_extra_args')]
    timeout = conn.get_option('timeout')
    if timeout:
        ssh_args.append('-o ConnectTimeout=%d' % int(timeout))
    rsh = ssh_command(conn.get_option('ssh_executable'), port=port, private_key=conn.get_option('private_key_file'),
                      ssh_args=ssh_args, control_path=ActionModule._control_path(conn, host, port, user, ssh_args))
    return rsh, host, user


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _runner = None   # tests put a fake subprocess.run here

    def _ssh_target(self, dest):
        """``(rsh, [user@]host:dest)`` from the host's ssh connection settings."""
        rsh, host, user = ssh_settings(self._connection, self._play_context.remote_addr)
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
        if args['code_only']:
            args['rsync_opts'] = code_only_opts(args['src']) + list(args['rsync_opts'])
        if args['source_marker']:
            # the marker is the node's: never copied from src, never deleted
            args['rsync_opts'] = ['--exclude=/%s' % SOURCE_MARKER] + list(args['rsync_opts'])
        transport = self._connection.transport
        check_mode = bool(self._task.check_mode)
        without_rsync = None
        host = (task_vars or {}).get('inventory_hostname', '')
        marker = _Marker(self, args, transport, check_mode, host) if args['source_marker'] else None
        if marker:
            problem = marker.problem()
            if problem:
                result.update(failed=True, msg=problem)
                return result
        if is_local(transport):
            rsh, dest = None, args['dest']
            try:
                result = self._copy_locally(result, args, check_mode)
                if marker and not result.get('failed'):
                    marker.write()
                return result
            except Unsupported as exc:
                without_rsync = to_text(exc)
            if args['create_dest'] and not check_mode:
                self._make_dest(dest)
        elif transport in SSH:
            rsh, dest = self._ssh_target(args['dest'])
        else:
            raise AnsibleActionFail('trainops.multinode.rsync copies over the ssh or local connection, not %s: use '
                                    'ansible.posix.synchronize for that host' % transport)
        argv = rsync_argv(args['src'], dest, rsh=rsh, create_dest=args['create_dest'], opts=args['rsync_opts'],
                          archive=args['archive'], compress=args['compress'], check_mode=check_mode)
        result.update(cmd=argv, method='rsync')
        try:
            outcome = run_rsync(argv, runner=self._runner)
        except RsyncError as exc:
            result.update(exc.result, failed=True, msg=exc.msg)
            return result
        except OSError as exc:
            why = ' (the local copy does without it, but not with %s)' % without_rsync if without_rsync else ''
            raise AnsibleActionFail('cannot run rsync on the controller: %s. Install rsync there%s.'
                                    % (to_text(exc), why))
        result.update(changed=outcome['changed'], rc=outcome['rc'], stdout_lines=outcome['items'])
        if marker:
            marker.write()
        return result

    def _ssh_login(self):
        """``(ssh argv, [user@]host)`` of the host, as its rsync's --rsh reaches it."""
        rsh, host, user = ssh_settings(self._connection, self._play_context.remote_addr)
        return shlex.split(rsh), '%s%s' % ('%s@' % user if user else '', host)

    @staticmethod
    def _make_dest(dest):
        try:
            os.makedirs(os.path.expanduser(dest), exist_ok=True)
        except OSError as exc:
            raise AnsibleActionFail('cannot create %s: %s' % (dest, to_text(exc)))

    def _copy_locally(self, result, args, check_mode):
        """The host is the controller: the copy in Python, as rsync would make it (Unsupported when it cannot)."""
        options = copy_options(args['rsync_opts'], archive=args['archive'])
        if args['create_dest'] and not check_mode:
            self._make_dest(args['dest'])
        try:
            outcome = local_copy(args['src'], args['dest'], options, check_mode=check_mode)
        except OSError as exc:
            result.update(failed=True, rc=1, msg='the local copy from %s to %s failed: %s'
                          % (args['src'], args['dest'], to_text(exc)))
            return result
        result.update(changed=outcome['changed'], rc=outcome['rc'], stdout_lines=outcome['items'], method='local')
        return result


class _Marker(object):
    """The directory's SOURCE_MARKER: read before the copy (a directory that holds another source is refused, unless
    ``replace_source``), written after it. On the controller itself in Python; on an ssh host with cat, over the
    host's own ssh settings (the ControlMaster Ansible opened)."""

    def __init__(self, action, args, transport, check_mode, host):
        self.action, self.check_mode = action, check_mode
        self.source = os.path.realpath(args['src'].rstrip('/') or '/')
        self.dest = args['dest'].rstrip('/') or '/'
        self.replace = args['replace_source']
        self.local = is_local(transport)
        self.where = 'the directory %s on %s' % (self.dest, host)

    def _ssh(self, command, data=None):
        argv, login = self.action._ssh_login()
        run = self.action._runner or subprocess.run
        return run(argv + [login, command], input=data, capture_output=True, timeout=60, check=False)

    def _path(self):
        return os.path.join(os.path.expanduser(self.dest), SOURCE_MARKER)

    def recorded(self):
        if self.local:
            return read_marker(os.path.expanduser(self.dest))
        # the node's file: at most MAX_MARKER_BYTES of it reach the controller
        proc = self._ssh('head -c %d -- %s 2>/dev/null; true' % (MAX_MARKER_BYTES, shlex.quote(self.dest + '/' + SOURCE_MARKER)))
        return marker_text(proc.stdout or b'')

    def problem(self):
        return None if self.replace else source_problem(self.recorded(), self.source, self.where)

    def write(self):
        if self.check_mode:
            return
        text = (self.source + '\n').encode('utf-8')
        if self.local:
            path = self._path()
            tmp = path + '.tmp'
            if os.path.lexists(tmp):
                os.unlink(tmp)  # a link planted there is removed, never written through
            with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644), 'wb') as handle:
                handle.write(text)
            os.replace(tmp, path)
            return
        # a new file renamed over the marker: a link planted at either name is replaced, never written through
        marker = shlex.quote(self.dest + '/' + SOURCE_MARKER)
        proc = self._ssh('rm -f -- %s.tmp && (set -C; cat > %s.tmp) && mv -f -- %s.tmp %s' % (marker, marker, marker, marker),
                         data=text)
        if proc.returncode != 0:
            raise AnsibleActionFail('cannot record the source in %s: %s' % (self.where, to_text(proc.stderr)[-500:]))
