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
  - With O(state=started), starts C(srun --jobid=JOB --ntasks-per-node=1 --kill-on-bad-exit=1 --wait=N --cpu-bind=none
    --immediate=T) in a session of its own on the controller, one task per node in allocation order. The step gets every
    CPU and GPU the job holds on its nodes (no C(-c), no C(--gres)), unbound (C(--cpu-bind=none)), so that torchrun and
    its ranks, which inherit the task's CPU mask, may use them all. The srun client gets no C(SLURM_*) or C(SRUN_*) variable of the controller's
    environment (srun would read C(SLURM_CPUS_PER_TASK) as C(-c), which implies C(--exact)) except C(SLURM_CONF). Each task finds its node's command by
    C($SLURMD_NODENAME) inside the step, checks C($SLURM_NODEID) against the node rank, and runs the node's
    C(supervisor.py --foreground job.json), which exits with torchrun's exit code, so one failed node ends the step.
    The step id is looked up by the step name C(trainops-<run_id>) in C(squeue), then C(sacct).
  - With O(state=started) and O(checkpoint_signal) and O(checkpoint_seconds) > 0, also starts a timer on the controller,
    in a session of its own, that sends the step O(checkpoint_signal) with C(scancel --signal=SIG JOB.STEP)
    O(checkpoint_seconds) before Slurm ends the step for a time limit (the earlier of the step's own, C(srun --time),
    and the job's, read from C(squeue) once the step runs). Slurm signals every process of the step on every node.
    C(srun --signal) would not do this - Slurm keeps a warning signal for job allocations (C(salloc)/C(sbatch
    --signal)) only.
  - A step that Slurm does not create within O(start_timeout) seconds (its nodes busy with another step of the job) is
    given up and the module fails saying what srun said (C(Requested nodes are busy)). Its srun client is ended (C(SIGINT)
    twice, then C(SIGKILL), only when its C(/proc) command line is that step's) and a step of that name that appeared
    meanwhile is cancelled, so nothing starts later.
  - With O(state=query), reports the step's state (C(squeue), then C(sacct)) and the job's (C(sacct)); a step or job
    that Slurm ended at its time limit is C(TIMEOUT).
  - With O(state=signalled), sends the step's tasks C(SIGTERM) with C(scancel --signal=TERM JOB.STEP); a node's supervisor
    then stops torchrun and writes C(exit.json), and when the run was stopped on request (C(stop.json)) waits for the
    cancel.
  - With O(state=cancelled), cancels the step with C(scancel JOB.STEP) (Slurm sends the tasks C(SIGKILL) and accounts the
    step C(CANCELLED)). Nothing is signalled by pid or name, except the srun client O(srun_pid) when given (a launch
    undone after the step started), and only when its C(/proc) command line is the client of step C(trainops-<run_id>).
    Without O(step_id), the step is looked up by its name C(trainops-<run_id>) (C(squeue), then C(sacct)), and nothing
    is done when Slurm has none.
  - With O(step_id) the step comes from the nodes' records (C(pids.json)), which the job itself can rewrite. It is the
    run's only when Slurm's job (C(squeue), or C(sacct) once it ended) and the step itself belong to O(owner_uid),
    the owner of the run's directory on the nodes, and Slurm names the step C(trainops-<run_id>). Another step is
    neither signalled nor cancelled (the module fails naming the step's and the run's users), and a query reports
    its state C(UNKNOWN) with RV(refused) instead of the other step's.
  - Root (the controller's user) runs C(scancel) as O(owner_uid), so Slurm lets it cancel only what the run's owner may.
  - "Meant to run on the controller (C(delegate_to: localhost), C(run_once: true)), where the Slurm client commands are."
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - trainops.multinode._attributes
attributes:
  check_mode:
    support: full
    details:
      - With O(state=started) returns the srun command line and starts nothing; with O(state=signalled) and
        O(state=cancelled) signals and cancels nothing.
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
      - The run, which names the step C(trainops-<run_id>). Required with every O(state).
      - With O(step_id) the step is queried, signalled or cancelled only when Slurm (C(squeue), then C(sacct)) names it
        C(trainops-<run_id>) and it belongs to O(owner_uid).
    type: str
  owner_uid:
    description:
      - The uid that owns the run's directory on the nodes (the C(trainops.multinode.run_launcher) filter's
        C(owner_uid)). Required with O(step_id).
    type: int
  step_id:
    description:
      - The step, as O(state=started) returned it. Required with O(state=query) and O(state=signalled).
    type: str
  srun_pid:
    description:
      - With O(state=cancelled), the pid of the step's srun client on the controller (RV(pid) of O(state=started)), to
        end as well.
    type: int
  start_timeout:
    description:
      - With O(state=started), seconds Slurm has to create the step (C(srun --immediate)); a step not created by then
        is given up (see above). At least V(1).
    type: int
    default: 30
  nodes:
    description:
      - The nodes in allocation order, each with C(name) (the Slurm node name), C(rank) (its position),
        C(python) (an absolute path, since the task's shell has Slurm's environment only), C(supervisor) and C(job), as
        M(trainops.multinode.torchrun) returned them in RV(trainops.multinode.torchrun#module:step_command). Required
        with O(state=started).
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
      - {name: node01, rank: 0, python: /usr/bin/python3,
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
    owner_uid: 1001
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
start_timeout:
  description: The seconds Slurm had to create the step.
  returned: when O(state=started) and not in check mode
  type: int
  sample: 30
abandoned:
  description:
    - With O(state=cancelled) without O(step_id), what was done so that nothing of the step runs or starts later,
      C(client) (the srun client, C(pid), C(found), C(signals)), C(step_id) and C(step_state) (a step of that name
      Slurm showed, else null) and C(cancelled). A failed O(state=started) returns it too.
  returned: when O(state=cancelled) without O(step_id) and not in check mode
  type: dict
client:
  description: With O(state=cancelled) and O(srun_pid), the srun client C(pid), C(found) and the C(signals) it got.
  returned: when O(state=cancelled) with O(step_id) and O(srun_pid), not in check mode
  type: dict
step:
  description:
    - The step's state, C(state) (C(RUNNING), C(COMPLETED), C(FAILED), C(CANCELLED), C(TIMEOUT), ...), C(exit_code),
      C(name) (the step's name as Slurm shows it) and C(source); while C(squeue) lists it, C(uid) and C(user) (whom
      Slurm runs it as).
  returned: when O(state) is V(query), V(signalled) or V(cancelled)
  type: dict
refused:
  description: With O(state=query), why the step is not the run's (then RV(step) and RV(job) are C(UNKNOWN)), else V(null).
  returned: when O(state=query)
  type: str
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
    CHECKPOINT_SIGNALS,
    Slurm,
    SrunError,
    abandon_step,
    build_argv,
    end_client,
    start_step,
    step_name,
    step_refusal,
)


def run(module):
    params = module.params
    slurm = Slurm()
    if params['state'] == 'started':
        if module.check_mode:
            argv = build_argv(params['job_id'], params['run_id'], params['nodes'], params['wait_seconds'],
                              srun=params['srun'], secret_names=sorted(params['secret_env']),
                              extra_args=params['srun_args'], start_timeout=params['start_timeout'])
            return dict(changed=True, job_id=params['job_id'], step_name=step_name(params['run_id']),
                        argv=argv[:-2] + ['<task script>', argv[-1]], task_script=argv[-2], output=params['output'])
        return dict(start_step(params, slurm=slurm), changed=True)
    if params['state'] == 'cancelled' and not params['step_id']:
        return cancel_by_name(module, slurm)
    step = slurm.step_state(params['job_id'], params['step_id'])
    refusal = step_refusal(params['job_id'], params['step_id'], params['run_id'], params['owner_uid'], step,
                           slurm.job_owner(params['job_id']))
    if params['state'] == 'query':
        if refusal:
            # not the run's step: its state must not judge the run, and the query does not fail (a stop goes on)
            unknown = {'state': 'UNKNOWN', 'exit_code': None, 'name': None, 'source': None, 'error': refusal}
            return dict(changed=False, job_id=params['job_id'], step_id=params['step_id'], step=unknown,
                        job=dict(unknown), refused=refusal)
        if params['end_wait'] > 0:
            step = slurm.step_end(params['job_id'], params['step_id'], params['end_wait'], step)
        return dict(changed=False, job_id=params['job_id'], step_id=params['step_id'], step=step,
                    job=slurm.job_state(params['job_id']), refused=None)
    if refusal:
        raise SrunError(refusal, job_id=str(params['job_id']), step_id=str(params['step_id']), step=step)
    changed = False
    if step['state'] in ('RUNNING', 'PENDING'):
        if not module.check_mode:
            slurm.cancel(params['job_id'], params['step_id'],
                         signal_name='TERM' if params['state'] == 'signalled' else None, owner_uid=params['owner_uid'])
        changed = True
    result = dict(changed=changed, job_id=params['job_id'], step_id=params['step_id'], step=step)
    if params['state'] == 'cancelled' and params['srun_pid'] and not module.check_mode:
        result['client'] = end_client(slurm.system, params['srun_pid'], params['job_id'], step_name(params['run_id']))
        result['changed'] = changed or result['client']['found']
    return result


def cancel_by_name(module, slurm):
    """state=cancelled without step_id (a launch undone): end the srun client, cancel a step of the run's name."""
    params = module.params
    name = step_name(params['run_id'])
    if module.check_mode:
        step_id, _err = slurm.squeue_step(params['job_id'], name)
        return dict(changed=step_id is not None or bool(params['srun_pid']), job_id=params['job_id'], step_id=step_id)
    abandoned = abandon_step(slurm, params['job_id'], name, pid=params['srun_pid'])
    changed = abandoned['cancelled'] or bool(abandoned['client'] and abandoned['client']['found'])
    return dict(changed=changed, job_id=params['job_id'], step_id=abandoned['step_id'], abandoned=abandoned)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', default='started', choices=['started', 'query', 'signalled', 'cancelled']),
            job_id=dict(type='str', required=True),
            run_id=dict(type='str'),
            step_id=dict(type='str'),
            owner_uid=dict(type='int'),
            nodes=dict(type='list', elements='dict', default=[]),
            wait_seconds=dict(type='int', default=300),
            output=dict(type='path'),
            srun=dict(type='str', default='srun'),
            srun_args=dict(type='list', elements='str', default=[]),
            srun_pid=dict(type='int'),
            start_timeout=dict(type='int', default=30),
            secret_env=dict(type='dict', default={}, no_log=True),
            end_wait=dict(type='int', default=0),
            checkpoint_signal=dict(type='str', choices=list(CHECKPOINT_SIGNALS)),
            checkpoint_seconds=dict(type='int', default=0),
        ),
        required_if=[('state', 'started', ('run_id', 'output')),
                     ('state', 'query', ('step_id', 'run_id')),
                     ('state', 'signalled', ('step_id', 'run_id')),
                     ('state', 'cancelled', ('run_id', ))],
        required_by={'step_id': ('owner_uid', )},
        supports_check_mode=True,
    )
    try:
        result = run(module)
    except SrunError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
