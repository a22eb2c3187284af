#!/usr/bin/python
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
module: srun_step
short_description: Run a job's prepared node supervisors as one Slurm step, query it, cancel it
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - The C(srun) launcher of the C(trainops.multinode.job) role. Every node's run directory is written first by
    M(trainops.multinode.torchrun) with C(state=prepared).
  - With O(state=started), starts C(srun --jobid=JOB --ntasks-per-node=1 --kill-on-bad-exit=1 --wait=N) in a session of
    its own on the controller, one task per node in allocation order. Each task finds its node's command by
    C($SLURMD_NODENAME) inside the step, checks C($SLURM_NODEID) against the node rank, and runs the node's
    C(supervisor.py --foreground job.json), which exits with torchrun's exit code, so one failed node ends the step.
    The step id is looked up by the step name C(trainops-<run_id>) in C(squeue), then C(sacct).
  - With O(state=started) and O(checkpoint_signal) and O(checkpoint_seconds) > 0, also starts a timer on the controller,
    in a session of its own, that sends the step O(checkpoint_signal) with C(scancel --signal=SIG JOB.STEP)
    O(checkpoint_seconds) before Slurm ends the step for a time limit (the earlier of the step's own, C(srun --time),
    and the job's, read from C(squeue) once the step runs). Slurm signals every process of the step on every node.
    C(srun --signal) would not do this - Slurm keeps a warning signal for job allocations (C(salloc)/C(sbatch
    --signal)) only.
  - With O(state=query), reports the step's state (C(squeue), then C(sacct)) and the job's (C(sacct)); a step or job
    that Slurm ended at its time limit is C(TIMEOUT).
  - With O(state=signalled), sends the step's tasks C(SIGTERM) with C(scancel --signal=TERM JOB.STEP); a node's supervisor
    then stops torchrun and writes C(exit.json), and when the run was stopped on request (C(stop.json)) waits for the
    cancel.
  - With O(state=cancelled), cancels the step with C(scancel JOB.STEP) (Slurm sends the tasks C(SIGKILL) and accounts the
    step C(CANCELLED)). Nothing is signalled by pid or name.
  - A step that Slurm does not name C(trainops-<run_id>) is neither signalled nor cancelled (the module fails saying so).
  - "Meant to run on the controller (C(delegate_to: localhost), C(run_once: true)), where the Slurm client commands are."
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details:
      - With O(state=started) returns the srun command line and starts nothing; with O(state=signalled) and
        O(state=cancelled) signals and cancels nothing.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  state:
    description:
      - V(started), V(query), V(signalled) or V(cancelled).
    type: str
    choices: [started, query, signalled, cancelled]
    default: started
  job_id:
    description:
      - The Slurm job (allocation) the step belongs to, C($SLURM_JOB_ID) of the allocation's shell.
    type: str
    required: true
  run_id:
    description:
      - The run, which names the step C(trainops-<run_id>). Required with O(state=started), O(state=signalled) and
        O(state=cancelled).
      - With O(state=signalled) and O(state=cancelled) the step is signalled or cancelled only when Slurm (C(squeue),
        then C(sacct)) names it C(trainops-<run_id>), since O(step_id) comes from the nodes' records, which the job
        itself can rewrite.
    type: str
  step_id:
    description:
      - The step, as O(state=started) returned it. Required with O(state=query), O(state=signalled) and
        O(state=cancelled).
    type: str
  nodes:
    description:
      - The nodes in allocation order, each with C(name) (the Slurm node name), C(rank) (its position),
        C(python), C(path), C(supervisor) and C(job), as M(trainops.multinode.torchrun) returned them in
        RV(trainops.multinode.torchrun#module:step_command). Required with O(state=started).
    type: list
    elements: dict
    default: []
  wait_seconds:
    description:
      - C(srun --wait), seconds the step waits for the other tasks once the first one ended with exit code 0
        (a failed task ends the step at once). V(0) waits forever.
    type: int
    default: 300
  output:
    description:
      - File on the controller that gets the srun client's output (created 0600). Required with O(state=started).
    type: path
  srun:
    description:
      - The srun command.
    type: str
    default: srun
  srun_args:
    description:
      - More srun options, put before the command, for example C(--gpus-per-task=8).
    type: list
    elements: str
    default: []
  end_wait:
    description:
      - With O(state=query), seconds to wait for a step that C(squeue) still lists (running, or ending) to leave it, so
        that the answer is C(sacct)'s final state; V(0) answers at once.
    type: int
    default: 0
  checkpoint_signal:
    description:
      - The run's checkpoint signal, sent to the step O(checkpoint_seconds) before its time limit. Only with
        O(state=started).
    type: str
    choices: [USR1, USR2]
  checkpoint_seconds:
    description:
      - Seconds before the step's time limit at which O(checkpoint_signal) is sent; V(0) sends nothing.
    type: int
    default: 0
  secret_env:
    description:
      - Secret variables for every rank; they go into the srun client's environment and the step exports them
        by name (C(--export=NAME,...)). Nothing else of the controller's environment goes with the step.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Start the step
  trainops.multinode.srun_step:
    job_id: "{{ lookup('ansible.builtin.env', 'SLURM_JOB_ID') }}"
    run_id: run-20260101
    output: /work/experiments/run-20260101/srun.log
    nodes:
      - {name: node01, rank: 0, python: /usr/bin/python3, path: /usr/bin:/bin,
         supervisor: /srv/trainops/state/node01/runs/run-20260101/supervisor.py,
         job: /srv/trainops/state/node01/runs/run-20260101/job.json}
  delegate_to: localhost
  run_once: true
  register: step

- name: Cancel it
  trainops.multinode.srun_step:
    state: cancelled
    job_id: "{{ step.job_id }}"
    step_id: "{{ step.step_id }}"
    run_id: run-20260101
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
job_id:
  description: The Slurm job.
  returned: always
  type: str
  sample: "42"
step_id:
  description: The step of the job that runs the nodes.
  returned: when known
  type: str
  sample: "0"
step_name:
  description: The step's name.
  returned: when O(state=started)
  type: str
  sample: trainops-run-20260101
pid:
  description: Pid of the srun client on the controller.
  returned: when O(state=started) and not in check mode
  type: int
  sample: 4242
argv:
  description: The srun command line, with the task script shown as C(<task script>).
  returned: when O(state=started)
  type: list
  elements: str
task_script:
  description: The shell program each task runs.
  returned: when O(state=started)
  type: str
output:
  description: The srun client's output file.
  returned: when O(state=started)
  type: str
started_at:
  description: When the step was started (UTC).
  returned: when O(state=started) and not in check mode
  type: str
step:
  description:
    - The step's state, C(state) (C(RUNNING), C(COMPLETED), C(FAILED), C(CANCELLED), C(TIMEOUT), ...), C(exit_code),
      C(name) (the step's name as Slurm shows it) and C(source).
  returned: when O(state) is V(query), V(signalled) or V(cancelled)
  type: dict
job:
  description:
    - The job's own state in C(sacct) (C(RUNNING), C(TIMEOUT), ...), C(exit_code) and C(source); C(state) C(UNKNOWN)
      with C(error) when C(sacct) does not say.
  returned: when O(state=query)
  type: dict
checkpoint_timer:
  description:
    - The timer that sends the checkpoint signal - C(signal), C(seconds_before_end), C(limit) (which time limit applies,
      or why there is none), C(time_left), C(fires_in), C(fires_at) (UTC) and C(pid) (V(null) without a time limit).
      V(null) when no checkpoint signal was asked for.
  returned: when O(state=started) and not in check mode
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainops.multinode.plugins.module_utils._srun import (
    Slurm,
    SrunError,
    build_argv,
    check_step_of_run,
    start_step,
    step_name,
)


def run(module):
    params = module.params
    slurm = Slurm()
    if params['state'] == 'started':
        if module.check_mode:
            argv = build_argv(params['job_id'], params['run_id'], params['nodes'], params['wait_seconds'],
                              srun=params['srun'], secret_names=sorted(params['secret_env']),
                              extra_args=params['srun_args'])
            return dict(changed=True, job_id=params['job_id'], step_name=step_name(params['run_id']),
                        argv=argv[:-2] + ['<task script>', argv[-1]], task_script=argv[-2], output=params['output'])
        return dict(start_step(params, slurm=slurm), changed=True)
    step = slurm.step_state(params['job_id'], params['step_id'])
    if params['state'] == 'query' and params['end_wait'] > 0:
        step = slurm.step_end(params['job_id'], params['step_id'], params['end_wait'], step)
    if params['state'] == 'query':
        return dict(changed=False, job_id=params['job_id'], step_id=params['step_id'], step=step,
                    job=slurm.job_state(params['job_id']))
    if step['state'] not in ('RUNNING', 'PENDING', 'UNKNOWN'):
        return dict(changed=False, job_id=params['job_id'], step_id=params['step_id'], step=step)
    check_step_of_run(params['job_id'], params['step_id'], params['run_id'], step)
    if not module.check_mode:
        slurm.cancel(params['job_id'], params['step_id'],
                     signal_name='TERM' if params['state'] == 'signalled' else None)
    return dict(changed=True, job_id=params['job_id'], step_id=params['step_id'], step=step)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', default='started', choices=['started', 'query', 'signalled', 'cancelled']),
            job_id=dict(type='str', required=True),
            run_id=dict(type='str'),
            step_id=dict(type='str'),
            nodes=dict(type='list', elements='dict', default=[]),
            wait_seconds=dict(type='int', default=300),
            output=dict(type='path'),
            srun=dict(type='str', default='srun'),
            srun_args=dict(type='list', elements='str', default=[]),
            secret_env=dict(type='dict', default={}, no_log=True),
            end_wait=dict(type='int', default=0),
            checkpoint_signal=dict(type='str', choices=['USR1', 'USR2']),
            checkpoint_seconds=dict(type='int', default=0),
        ),
        required_if=[('state', 'started', ('run_id', 'output')),
                     ('state', 'query', ('step_id', )),
                     ('state', 'signalled', ('step_id', 'run_id')),
                     ('state', 'cancelled', ('step_id', 'run_id'))],
        supports_check_mode=True,
    )
    try:
        result = run(module)
    except SrunError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
