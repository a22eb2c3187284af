# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The thin trainops.multinode.srun_step module: arguments, documentation, and what each state calls."""

from __future__ import annotations

from unittest.mock import patch

from ansible.module_utils.testing import patch_module_args

from module_harness import ExitJson, FailJson, assert_documentation_matches_argument_spec

from ansible_collections.trainops.multinode.plugins.modules import srun_step as module
from ansible_collections.trainops.multinode.plugins.module_utils._srun import SrunError


class FakeSlurm(object):
    def __init__(self, state='RUNNING', name='trainops-r1', squeue_step=None, owner=(1001, 'alice')):
        self.system = object()
        self.calls = []
        self.state, self.name, self.squeue = state, name, squeue_step
        self.owner = {'uid': owner[0], 'name': owner[1], 'source': 'squeue'}

    def step_state(self, job_id, step_id):
        self.calls.append(('step_state', job_id, step_id))
        return {'state': self.state, 'exit_code': None, 'name': self.name, 'source': 'squeue',
                'uid': self.owner['uid'], 'user': self.owner['name']}

    def job_owner(self, job_id):
        self.calls.append(('job_owner', job_id))
        return self.owner

    def job_state(self, job_id):
        return {'state': 'RUNNING', 'exit_code': None, 'source': 'sacct'}

    def cancel(self, job_id, step_id, signal_name=None, owner_uid=None):
        self.calls.append(('cancel', job_id, step_id, signal_name, owner_uid))

    def squeue_step(self, job_id, name):
        self.calls.append(('squeue_step', job_id, name))
        return self.squeue, None


def run(args, slurm=None, check_mode=False, **patches):
    if check_mode:
        args = dict(args, _ansible_check_mode=True)
    slurm = slurm or FakeSlurm()
    with patch_module_args(args), patch.object(module, 'Slurm', lambda: slurm):
        with patch.multiple(module, **patches) if patches else patch.object(module, 'SrunError', SrunError):
            try:
                module.main()
            except ExitJson as e:
                return 'exit', e.args[0], slurm
            except FailJson as e:
                return 'fail', e.args[0], slurm
    raise AssertionError('module did not exit')


def test_documentation_matches_argument_spec():
    assert_documentation_matches_argument_spec(module)


def test_started_passes_the_start_timeout():
    seen = []

    def start_step(params, slurm=None):
        seen.append(params)
        return {'job_id': '42', 'step_id': '3', 'start_timeout': params['start_timeout']}

    kind, res, _slurm = run({'job_id': '42', 'run_id': 'r1', 'output': '/tmp/srun.log', 'start_timeout': 90},
                            start_step=start_step)
    assert kind == 'exit' and res['changed'] is True and seen[0]['start_timeout'] == 90


def test_started_check_mode_shows_the_argv():
    nodes = [{'name': 'n1', 'rank': 0, 'python': '/usr/bin/python3', 'supervisor': '/s/supervisor.py', 'job': '/s/job.json'}]
    kind, res, _slurm = run({'job_id': '42', 'run_id': 'r1', 'output': '/tmp/srun.log', 'nodes': nodes}, check_mode=True)
    assert kind == 'exit' and '--cpu-bind=none' in res['argv'] and '--immediate=30' in res['argv']


def test_a_step_that_did_not_start_fails_with_what_was_undone():
    def start_step(params, slurm=None):
        raise SrunError('Slurm step trainops-r1 of job 42 did not start: ...', abandoned={'cancelled': False})

    kind, res, _slurm = run({'job_id': '42', 'run_id': 'r1', 'output': '/tmp/srun.log'}, start_step=start_step)
    assert kind == 'fail' and res['msg'].startswith('Slurm step trainops-r1') and res['abandoned'] == {'cancelled': False}


def test_cancelled_without_a_step_id_ends_the_client_and_cancels_by_name():
    seen = []

    def abandon_step(slurm, job_id, name, pid=None):
        seen.append((job_id, name, pid))
        return {'client': {'pid': pid, 'found': True, 'signals': ['SIGINT', 'SIGINT']}, 'step_id': '3',
                'step_state': 'RUNNING', 'cancelled': True}

    kind, res, _slurm = run({'state': 'cancelled', 'job_id': '42', 'run_id': 'r1', 'srun_pid': 777},
                            abandon_step=abandon_step)
    assert kind == 'exit' and res['changed'] is True and res['step_id'] == '3'
    assert seen == [('42', 'trainops-r1', 777)]
    # check mode only looks
    kind, res, slurm = run({'state': 'cancelled', 'job_id': '42', 'run_id': 'r1'}, check_mode=True,
                           slurm=FakeSlurm(squeue_step=None), abandon_step=abandon_step)
    assert kind == 'exit' and res['changed'] is False and len(seen) == 1


def test_cancelled_with_a_step_id_and_the_client_pid_cancels_then_ends_the_client():
    seen = []

    def end_client(system, pid, job_id, name):
        seen.append((pid, job_id, name))
        return {'pid': pid, 'found': False, 'signals': []}

    kind, res, slurm = run({'state': 'cancelled', 'job_id': '42', 'run_id': 'r1', 'step_id': '3', 'srun_pid': 777,
                            'owner_uid': 1001}, end_client=end_client)
    assert kind == 'exit' and res['changed'] is True
    assert ('cancel', '42', '3', None, 1001) in slurm.calls and seen == [(777, '42', 'trainops-r1')]


def test_signalled_still_needs_the_step_id():
    kind, res, _slurm = run({'state': 'signalled', 'job_id': '42', 'run_id': 'r1'})
    assert kind == 'fail' and 'step_id' in res['msg']


def test_a_step_id_needs_the_runs_owner():
    kind, res, _slurm = run({'state': 'signalled', 'job_id': '42', 'run_id': 'r1', 'step_id': '3'})
    assert kind == 'fail' and 'owner_uid' in res['msg']


def test_signalled_and_cancelled_refuse_another_users_step_and_signal_nothing():
    for state in ('signalled', 'cancelled'):
        kind, res, slurm = run({'state': state, 'job_id': '42', 'run_id': 'r1', 'step_id': '3', 'owner_uid': 1001},
                               slurm=FakeSlurm(owner=(1002, 'bob')))
        assert kind == 'fail' and not [call for call in slurm.calls if call[0] == 'cancel']
        assert res['msg'].startswith("Step 42.3 is not run r1's: Slurm job 42 belongs to uid 1002 (bob), but run r1 "
                                     "belongs to uid 1001"), res['msg']
    kind, res, slurm = run({'state': 'signalled', 'job_id': '42', 'run_id': 'r1', 'step_id': '3', 'owner_uid': 1001})
    assert kind == 'exit' and ('cancel', '42', '3', 'TERM', 1001) in slurm.calls


def test_query_of_another_users_step_answers_unknown_with_the_refusal_and_does_not_fail():
    kind, res, _slurm = run({'state': 'query', 'job_id': '42', 'run_id': 'r1', 'step_id': '3', 'owner_uid': 1001},
                            slurm=FakeSlurm(state='RUNNING', owner=(1002, 'bob')))
    assert kind == 'exit' and res['step']['state'] == 'UNKNOWN' and res['job']['state'] == 'UNKNOWN'
    assert 'belongs to uid 1002 (bob)' in res['refused'] and res['step']['error'] == res['refused']
    kind, res, _slurm = run({'state': 'query', 'job_id': '42', 'run_id': 'r1', 'step_id': '3', 'owner_uid': 1001})
    assert kind == 'exit' and res['refused'] is None and res['step']['state'] == 'RUNNING'
