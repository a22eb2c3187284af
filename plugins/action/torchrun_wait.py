# -*- coding: utf-8 -*-

# Copyright (c) 2025, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Wait for one node's torchrun job and fail fast when another node of the job failed.

Each host of the job runs this action (a normal task on all node hosts). Every ``poll_interval``
seconds it queries the host's job with the ``trainops.multinode.torchrun`` module (``state=query``),
writes the host's status to ``<sync_dir>/<inventory_hostname>.json`` on the controller and reads
the status files of the other hosts.
"""

from __future__ import annotations

import json
import os
import re
import time

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

MODULE = 'trainops.multinode.torchrun'

DEFAULT_PROGRESS_PATTERN = r'\[trainops\].*?\b((?:epoch|step)=.*?)\s*$'

MAX_QUERY_FAILURES = 3
"""Consecutive failed queries (module failure or unreachable host) before the wait fails."""

FAILED_STATES = frozenset(('failed', 'error'))

ARGUMENT_SPEC = dict(
    state_dir=dict(type='str', required=True),  # a path on the managed node: expanded there by the module
    run_id=dict(type='str'),
    node_id=dict(type='str'),
    node_rank=dict(type='int'),
    sync_dir=dict(type='path', required=True),
    poll_interval=dict(type='float', default=2.0),
    progress_interval=dict(type='float', default=10.0),
    timeout=dict(type='int', default=0),
    log_lines=dict(type='int', default=20),
    progress_pattern=dict(type='str', default=DEFAULT_PROGRESS_PATTERN),
    stop_timeout=dict(type='int', default=15),
)


def find_progress(lines, pattern):
    """Return the last progress match in ``lines``: group 1 if the pattern has a group, else the whole match."""
    for line in reversed(lines or []):
        match = pattern.search(line)
        if match:
            return (match.group(1) if pattern.groups else match.group(0)).strip()
    return None


def safe_host_name(host):
    """File name for a host's status file (path separators and leading dots replaced)."""
    name = re.sub(r'[^A-Za-z0-9_.@+=:-]', '_', host)
    return '_' + name if name.startswith('.') else name


def write_json_atomic(path, data):
    tmp = '%s.tmp.%d' % (path, os.getpid())
    with open(tmp, 'w') as f:
        json.dump(data, f, sort_keys=True, indent=1)
    os.replace(tmp, path)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _supports_check_mode = True
    _supports_async = False

    # --- seams for unit tests ---------------------------------------------------------------
    def _clock(self):
        return time.monotonic()

    def _sleep(self, seconds):
        time.sleep(seconds)

    # --- helpers ------------------------------------------------------------------------------
    def _query(self, args, task_vars):
        module_args = {'state': 'query', 'state_dir': args['state_dir'], 'log_lines': args['log_lines']}
        for name in ('run_id', 'node_id'):
            if args.get(name):
                module_args[name] = args[name]
        return self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars)

    def _stop(self, args, run_id, task_vars):
        module_args = {'state': 'stopped', 'state_dir': args['state_dir'], 'stop_timeout': args['stop_timeout'],
                       'log_lines': args['log_lines']}
        if run_id:
            module_args['run_id'] = run_id
        if args.get('node_id'):
            module_args['node_id'] = args['node_id']
        return self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars)

    @staticmethod
    def _read_peers(sync_dir, own_file, run_id):
        """Return the status records of the other hosts (files of another run_id are ignored)."""
        peers = []
        try:
            names = sorted(os.listdir(sync_dir))
        except OSError:
            return peers
        for name in names:
            if not name.endswith('.json') or name == own_file:
                continue
            try:
                with open(os.path.join(sync_dir, name), 'r') as f:
                    data = json.load(f)
            except (IOError, OSError, ValueError):
                continue
            if not isinstance(data, dict):
                continue
            if run_id and data.get('run_id') and data.get('run_id') != run_id:
                continue
            data.setdefault('host', name[:-len('.json')])
            peers.append(data)
        return peers

    def run(self, tmp=None, task_vars=None):
        if task_vars is None:
            task_vars = {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp

        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            pattern = re.compile(args['progress_pattern'])
        except re.error as exc:
            raise AnsibleActionFail('progress_pattern is not a valid regular expression: %s' % to_text(exc))
        if args['poll_interval'] <= 0:
            raise AnsibleActionFail('poll_interval must be > 0')
        if args['progress_interval'] <= 0:
            raise AnsibleActionFail('progress_interval must be > 0')
        if args['timeout'] < 0:
            raise AnsibleActionFail('timeout must be >= 0')

        host = to_text(task_vars.get('inventory_hostname') or 'localhost')
        check_mode = bool(self._task.check_mode)
        sync_dir = args['sync_dir']
        own_file = safe_host_name(host) + '.json'
        own_path = os.path.join(sync_dir, own_file)
        if not check_mode:
            try:
                os.makedirs(sync_dir, exist_ok=True)
            except OSError as exc:
                raise AnsibleActionFail('Cannot create sync_dir %s: %s' % (sync_dir, to_text(exc)))

        node_rank = args.get('node_rank')
        started = self._clock()
        next_progress = started + args['progress_interval']
        progress = None
        job = {}
        log_tail = []
        query_failures = 0

        def label():
            return '%s rank %s' % (host, '?' if node_rank is None else node_rank)

        def publish(state):
            if check_mode:
                return
            write_json_atomic(own_path, {
                'host': host,
                'node_rank': node_rank,
                'state': state,
                'status': job.get('status'),
                'exit_code': job.get('exit_code'),
                'signal': job.get('signal'),
                'run_id': job.get('run_id') or args.get('run_id'),
                'progress': progress,
                'updated_at': time.time(),
            })

        def finish(failed, msg, **extra):
            result.update(
                changed=False, failed=failed, msg=msg, job=job, log_tail=log_tail, progress=progress,
                waited_s=round(self._clock() - started, 3))
            result.setdefault('peer_failures', [])
            result.setdefault('timed_out', False)
            result.update(extra)
            return result

        while True:
            res = self._query(args, task_vars)
            if res.get('failed') or res.get('unreachable'):
                query_failures += 1
                if query_failures >= MAX_QUERY_FAILURES or check_mode:
                    publish('error')
                    return finish(True, '%s: cannot query the torchrun job: %s' % (label(), to_text(res.get('msg', 'unknown error'))))
                self._sleep(args['poll_interval'])
                continue
            query_failures = 0
            job = res.get('job') or {}
            log_tail = res.get('log_tail') or []
            progress = find_progress(log_tail, pattern) or progress
            if node_rank is None and job.get('node_rank') is not None:
                node_rank = job.get('node_rank')
            status = job.get('status')
            run_id = job.get('run_id') or args.get('run_id')

            if status == 'exited' and job.get('exit_code') == 0 and not job.get('signal'):
                publish('succeeded')
                return finish(False, '%s: run %s finished successfully' % (label(), run_id))

            if status in ('exited', 'lost', 'absent'):
                publish('failed')
                if status == 'exited':
                    what = 'exited with code %s%s' % (job.get('exit_code'), ' (%s)' % job['signal'] if job.get('signal') else '')
                elif status == 'lost':
                    what = 'is lost (its supervisor is gone without writing exit.json)'
                else:
                    what = 'does not exist in %s' % args['state_dir']
                msg = '%s: torchrun run %s %s; log %s' % (label(), run_id, what, job.get('log_path'))
                if log_tail:
                    msg += '; last %d log lines:\n%s' % (len(log_tail), '\n'.join(log_tail))
                return finish(True, msg)

            # still running
            publish('running')
            if check_mode:
                return finish(False, '%s: run %s is %s (check mode: not waiting)' % (label(), run_id, status))

            peer_failures = [dict(host=p.get('host'), node_rank=p.get('node_rank'), state=p.get('state'), status=p.get('status'),
                                  exit_code=p.get('exit_code'), signal=p.get('signal'), progress=p.get('progress'))
                             for p in self._read_peers(sync_dir, own_file, run_id) if p.get('state') in FAILED_STATES]
            if peer_failures:
                names = ', '.join('%s%s' % (p['host'], '' if p['node_rank'] is None else ' (rank %s)' % p['node_rank']) for p in peer_failures)
                stop_res = self._stop(args, run_id, task_vars)
                if stop_res.get('job'):
                    job = stop_res['job']
                    log_tail = stop_res.get('log_tail') or log_tail
                publish('stopped')
                msg = '%s: stopped because %s failed' % (label(), names)
                if stop_res.get('failed') or stop_res.get('unreachable'):
                    msg += '; stopping the local run failed too: %s' % to_text(stop_res.get('msg', 'unknown error'))
                return finish(True, msg, peer_failures=peer_failures, stopped_pids=stop_res.get('stopped_pids') or [])

            now = self._clock()
            if args['timeout'] and now - started >= args['timeout']:
                return finish(True, '%s: timed out after %d seconds waiting for run %s (still %s; last progress: %s)' % (
                    label(), args['timeout'], run_id, status, progress or 'none'), timed_out=True)

            if now >= next_progress:
                self._display.display('%s: running  %s' % (label(), progress or '(no progress line yet)'))
                next_progress = now + args['progress_interval']

            delay = args['poll_interval']
            if args['timeout']:
                delay = max(0.0, min(delay, started + args['timeout'] - now))
            self._sleep(delay)
