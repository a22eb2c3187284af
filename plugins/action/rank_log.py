# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trainops.multinode.rank_log: one rank's lines, from the experiment on the controller, or followed live on the node
that runs the rank (trainops.multinode.node_log, a bounded chunk per question). Documented in plugins/modules/rank_log.py."""

from __future__ import annotations

import os
import time

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.trainops.multinode.plugins.module_utils import _rank_logs

ARGUMENT_SPEC = dict(
    experiments_dir=dict(type='path', required=True),
    run_id=dict(type='str'),
    rank=dict(type='int', required=True),
    lines=dict(type='int', default=1000),
    follow=dict(type='bool', default=False),
    state_dir=dict(type='str'),  # a path on the node: expanded there by trainops.multinode.node_log
    node_id=dict(type='str', default=''),
    poll_interval=dict(type='float', default=2.0),
    follow_timeout=dict(type='int', default=0),
)
MODULE = 'trainops.multinode.node_log'


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

    def _read_node(self, module_args, task_vars):
        return self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars)

    def _show(self, line):
        self._display.display(line)

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        try:
            # checked before the options' types: the message says what to give
            self._task.args['rank'] = _rank_logs.given_rank(self._task.args.get('rank'))
        except _rank_logs.RankLogError as exc:
            raise AnsibleActionFail(to_text(exc))
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        if args['rank'] < 0 or args['lines'] < 0 or args['poll_interval'] <= 0 or args['follow_timeout'] < 0:
            raise AnsibleActionFail('rank, lines and follow_timeout must be >= 0 and poll_interval > 0')
        try:
            path, manifest = _rank_logs.experiment_dir(args['experiments_dir'], args.get('run_id'))
            node, node_rank, world = _rank_logs.rank_node(manifest, args['rank'])
        except _rank_logs.RankLogError as exc:
            raise AnsibleActionFail(to_text(exc))
        run_id = os.path.basename(path)
        result.update(experiment=path, run_id=run_id, node=node, node_rank=node_rank, world_size=world)
        if args['follow']:
            result.update(self._follow(args, task_vars, run_id, node, node_rank))
        else:
            result.update(self._collected(args, path, manifest, node, node_rank))
        return result

    def _collected(self, args, path, manifest, node, node_rank):
        """The end of the rank's log in the experiment (logs/rank_<r>.txt), printed after a line naming it."""
        log = os.path.join(path, _rank_logs.LOG_DIR, _rank_logs.rank_log_name(args['rank']))
        try:
            tail = _rank_logs.tail_file(log, args['lines'])
        except _rank_logs.RankLogError as exc:
            raise AnsibleActionFail(to_text(exc))
        if tail is None:
            why = ('the rank wrote no line' if manifest.get('outcome')
                   else 'the job has not been collected yet (it runs, or status.yml collects it once it has ended)')
            raise AnsibleActionFail('rank %d has no log in %s: %s. Follow it live on its node with -e follow=true.'
                                    % (args['rank'], path, why))
        shown = ' (its last %d lines)' % len(tail['lines']) if tail['truncated'] else ''
        self._show('rank %d on %s (node rank %d): %s%s' % (args['rank'], node, node_rank, log, shown))
        for line in tail['lines']:
            self._show(line)
        return dict(log=log, lines=tail['lines'], truncated=tail['truncated'], changed=False)

    def _follow(self, args, task_vars, run_id, node, node_rank):
        """Print the rank's lines as the node's log grows, until the run has ended there (or follow_timeout)."""
        host = to_text(task_vars.get('inventory_hostname'))
        if host != node:
            return dict(skipped=True, msg='rank %d runs on %s' % (args['rank'], node), changed=False)
        if not args.get('state_dir'):
            raise AnsibleActionFail('follow=true needs state_dir (the node\'s state root)')
        module_args = dict(state_dir=args['state_dir'], node_id=args['node_id'], run_id=run_id, rank=args['rank'],
                           offset=0, max_bytes=_rank_logs.MAX_CHUNK_BYTES)
        deadline = self._clock() + args['follow_timeout'] if args['follow_timeout'] else None
        self._show('Follow the rank %d on %s (node rank %d), run %s, until the job ends there:'
                   % (args['rank'], node, node_rank, run_id))
        printed = 0
        while True:
            read = self._read_node(module_args, task_vars)
            if read.get('failed') or read.get('unreachable'):
                raise AnsibleActionFail('cannot read the log of run %s on %s: %s' % (run_id, node, read.get('msg')))
            for line in read.get('lines') or []:
                self._show(line)
                printed += 1
            if read.get('missing'):
                raise AnsibleActionFail('run %s has no log on %s' % (run_id, node))
            if read.get('ended'):
                return dict(ended=True, printed=printed, changed=False)
            if deadline is not None and self._clock() >= deadline:
                return dict(ended=False, printed=printed, changed=False)
            if read['offset'] == module_args['offset'] or read['offset'] >= (read.get('size') or 0):
                self._sleep(args['poll_interval'])  # nothing more to read yet
            module_args['offset'] = read['offset']
