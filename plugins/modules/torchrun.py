#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) 2025, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
---
module: torchrun
short_description: Start, query and stop the ranked torchrun of one node
version_added: 0.1.0
description:
  - Starts C(torchrun) (C(python -m torch.distributed.run)) for one node of a multi-node PyTorch job, detached from the
    Ansible connection under a small supervisor process, and queries or stops it later.
  - The supervisor becomes a child subreaper, starts torchrun in its own session with stdout and stderr appended to
    C(node.log), records the pids and C(/proc) start times, and writes C(exit.json) once torchrun and every process
    left in its tree have ended.
  - Stopping covers the whole process tree under the supervisor, because torch's elastic agent starts every worker in
    a session of its own. Processes are never looked up by name or command line.
  - The run's records (C(pids.json), C(job.json)) are written where the job's own code could rewrite them, so O(state=stopped)
    and O(state=query) verify them against C(/proc) first. The recorded supervisor must be alive with the recorded start time,
    have the command line that runs this run's C(supervisor.py) and C(job.json), and run as the owner of the run directory,
    which must be the uid C(job.json) records. Torchrun (signalled only when its supervisor is gone) must lead its own
    process group and run as that owner. A pid that is not a number above 1, a missing start time or any mismatch fails
    the task with a message naming the run and the failed check (RV(refused)), and nothing is signalled. A pid whose
    process has another start time is gone (the run is lost). A run that wrote C(exit.json) is never checked or signalled.
  - Root stopping another user's run signals with that user's uid and gid (a forked child drops to them first), so it
    never signals what the owner could not. Any other user acting on another user's run, or on a state or run directory
    it cannot read, fails naming the owner instead of reporting the run as absent.
  - Starting is idempotent per O(run_id) through a fingerprint (sha256 of argv, environment and working directory).
author:
  - trainops maintainers (@trainops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - trainops.multinode._attributes
  - trainops.multinode._torchrun
attributes:
  check_mode:
    support: full
    details:
      - With O(state=started) and O(state=stopped) the module reports what it would do and changes nothing.
  platform:
    details:
      - Needs Linux C(/proc) and C(prctl(PR_SET_CHILD_SUBREAPER)).
options:
  state:
    description:
      - V(started) starts the run unless a run with the same O(run_id) and fingerprint exists already (running or exited).
      - V(stopped) sends C(SIGTERM) to torchrun's process group and to the process groups of every live descendant of
        the supervisor, waits up to O(stop_timeout) seconds, sends C(SIGKILL) to what is left, then waits for C(exit.json).
      - V(query) only reports the run's status.
      - V(prepared) writes the run directory (C(job.json), C(env.sh), C(supervisor.py)) as V(started) does but starts
        nothing; a Slurm step then runs C(supervisor.py --foreground job.json) on the node (the C(srun) launcher, see
        M(trainops.multinode.srun_step)). Until the step has started it, the run's status is V(prepared).
        C(job.json) also records the module's environment on the node as C(login_env), the SSH session's, which the
        preflight checked, less session and Slurm-step variables and less any variable whose name looks like a
        secret's (those are named in C(login_env_omitted)). The supervisor gives torchrun that environment, with what
        Slurm set for the step (C(SLURM_*), C(CUDA_VISIBLE_DEVICES), ...), the secrets the step exported by name and
        O(env) on top.
      - V(stopped) of a V(prepared) run only records the stop (O(stop_reason)), so that a supervisor that a step
        still starts does not start torchrun.
    type: str
    choices: [started, stopped, query, prepared]
    default: started
  launcher:
    description:
      - With O(state=started) or O(state=prepared), the launcher the run is written for (the role's
        C(trainops_launcher)); C(job.json) records what it needs (C(plugins/module_utils/_launchers.py)).
      - A launcher that starts the node's supervisor itself (a Slurm step, V(srun)) takes O(state=prepared); one the
        module starts it for (V(ssh)) takes O(state=started). Any other pair fails before anything is written.
      - Left out, V(ssh) for O(state=started) and V(srun) for O(state=prepared).
    type: str
    choices: [ssh, srun]
    version_added: 0.2.0
  stop_reason:
    description:
      - With O(state=stopped), why the run is stopped, recorded in C(stop.json) in the run directory before any signal
        is sent and returned as RV(job.stop) by every later query. The first stop's reason is kept.
      - V(user) (the user asked, C(playbooks/stop.yml)), V(peer) (another node of the job failed), V(stalled) (no new
        output for too long), V(unreachable) (a node could not be reached for too long), V(timeout) (the wait gave up),
        V(undo) (a partial launch is undone). A run replaced by O(replace=true) records V(replaced).
      - Without it nothing is recorded.
      - What each reason means, and the outcome it stands for, is defined in C(plugins/module_utils/_outcomes.py)
        (docs/failures.md).
    type: str
    choices: [user, peer, stalled, unreachable, timeout, undo]
  signal:
    description:
      - With O(state=stopped), whether the module signals the run's processes. V(false) only writes the stop record
        (O(stop_reason)) of a run that a Slurm step runs, before the step is cancelled with C(scancel).
    type: bool
    default: true
  stop_detail:
    description:
      - With O(stop_reason), a line saying more (for example which node failed), recorded with it.
    type: str
  checkpoint_seconds:
    description:
      - With O(state=stopped) and O(signal=true), first send the run's checkpoint signal (C(TRAINOPS_CHECKPOINT_SIGNAL)
        of its environment) to its supervisor, which records it in C(exit.json), and to every process group of its
        tree (torchrun ignores it, the ranks checkpoint), as Slurm does before a time limit; then wait up to this many
        seconds for a C(checkpoint.json) newer than the signal in the run's output directory before the stop.
      - V(0) sends nothing. A run without a checkpoint signal is stopped at once.
    type: int
    default: 0
  dump_stacks:
    description:
      - With O(state=stopped) and O(signal=true), or O(state=query) of a running run, first write every rank's Python
        stack (C(py-spy dump), looked for next to the ranks' Python, then on the PATH) to
        C(trainops_stacks_rank_<rank>.txt) in the run's output directory, which the collect brings into the
        experiment. Without py-spy the file says so. The wait asks for it when a job stalled (docs/failures.md).
      - A stop with O(stop_reason=peer) dumps the stacks whatever this says (a peer failed; its collective may have
        timed out waiting for a rank here).
    type: bool
    default: false
  run_id:
    description:
      - Identifier of the run; it names the directory C(runs/<run_id>) below O(state_dir).
      - Letters, digits and C(_ . @ + = -), starting with a letter or digit.
      - Required when O(state=started). For O(state=stopped) and O(state=query) it defaults to the run recorded in
        C(current.json), the last one started.
    type: str
  nnodes:
    description:
      - Number of nodes of the job (C(--nnodes)). Must be at least 1.
      - Required when O(state=started).
    type: int
  nproc_per_node:
    description:
      - Number of worker processes on this node (C(--nproc-per-node)). Must be at least 1.
      - Required when O(state=started).
    type: int
  node_rank:
    description:
      - Rank of this node, from V(0) to O(nnodes) - 1.
      - Passed as C(--node-rank) with O(rdzv_backend=static); recorded only with O(rdzv_backend=c10d), where torch
        assigns ranks itself.
      - Required when O(state=started).
    type: int
  master_addr:
    description:
      - Address of the rank 0 node (C(--master-addr), or the host part of C(--rdzv-endpoint) with O(rdzv_backend=c10d)).
      - Required when O(state=started).
    type: str
  master_port:
    description:
      - Port on the rank 0 node, from 1 to 65535 (C(--master-port), or the port of C(--rdzv-endpoint)).
      - Required when O(state=started).
    type: int
  rdzv_backend:
    description:
      - V(static) makes the rank to host mapping deterministic; torchrun gets C(--rdzv-backend static --node-rank
        --master-addr --master-port).
      - V(c10d) uses the dynamic rendezvous; torchrun gets C(--rdzv-backend c10d --rdzv-endpoint addr:port --rdzv-id).
    type: str
    choices: [static, c10d]
    default: static
  rdzv_id:
    description:
      - Rendezvous id for O(rdzv_backend=c10d). Defaults to O(run_id).
    type: str
  rdzv_timeout:
    description:
      - Seconds to wait for the other nodes to join.
      - Passed as C(--rdzv-conf timeout=N) with O(rdzv_backend=static) (read by torch's static TCP rendezvous) and as
        C(--rdzv-conf join_timeout=N) with O(rdzv_backend=c10d) (read by the dynamic rendezvous handler).
      - When not set, torch's defaults apply.
    type: int
  max_restarts:
    description:
      - C(--max-restarts) for the elastic agent.
    type: int
    default: 0
  entrypoint:
    description:
      - Training script run by every worker; a path relative to O(chdir) is allowed.
      - Required when O(state=started).
    type: str
  module:
    description:
      - Run O(entrypoint) as a Python module, as C(python -m) runs it (torchrun C(--module)), for example
        V(torchtitan.train); O(chdir) is on its import path.
    type: bool
    default: false
  entrypoint_args:
    description:
      - Arguments for O(entrypoint).
    type: list
    elements: str
    default: []
  python:
    description:
      - Interpreter used as C([python, -m, torch.distributed.run, ...]) when O(torchrun) is not set.
    type: str
    default: python3
  torchrun:
    description:
      - Path of a C(torchrun) executable to use instead of C(python -m torch.distributed.run).
    type: path
  command_prefix:
    description:
      - Words put in front of the whole command, for example a profiler wrapper. To run in a container use
        O(container), not C(docker exec) here (C(docker exec) passes no environment and cannot be stopped from the
        node).
    type: list
    elements: str
    default: []
  container:
    description:
      - Run the run's supervisor, and so torchrun and its workers, inside this running container (started with
        C(docker exec -d)); everything else (records, status, stop) stays the same.
      - The container must share the host's PID namespace (C(--pid=host)), so that the pids recorded inside are the
        node's, and must see O(state_dir) (and O(chdir)) at the same paths; the module checks both before starting.
        M(trainops.multinode.torchrun) passes O(env) to the workers explicitly, so the environment reaches them.
      - The supervisor runs in it as the uid and gid of the user the module runs as (C(docker exec -u uid:gid)), so the
        ranks and their files belong to the node's user, not to the image's default user.
      - The role C(trainops.multinode.container) starts such containers.
    type: str
  container_engine:
    description:
      - The container engine CLI for O(container), V(docker) or V(podman) (or a path to one).
    type: str
    default: docker
  container_python:
    description:
      - The Python inside the container that runs the supervisor.
    type: str
    default: python3
  chdir:
    description:
      - Working directory of torchrun and its workers.
      - When not set, the run directory C(<state_dir>/runs/<run_id>) is used.
    type: path
  env:
    description:
      - Environment variables added on top of the module's own environment for the job.
      - Values are converted to strings (booleans to V(true) and V(false)).
      - It is recorded in C(job.json) and C(env.sh) and returned in RV(job.env), so put tokens in O(secret_env) instead.
    type: dict
    default: {}
  secret_env:
    description:
      - Secret environment variables (tokens such as C(HF_TOKEN), C(WANDB_API_KEY)) for every rank.
      - Their values reach the supervisor, and through it every rank, only in the environment of the process that
        starts it (with O(container), as C(docker exec -e NAME), which takes the value from there); they are never
        written to a file, returned, or shown in Ansible's output (the option is C(no_log)).
      - C(job.json) records their names, and the ranks get C(TRAINOPS_SECRET_ENV_NAMES) with those names (comma
        separated) so a workload can leave them out of what it records.
      - A name may not also be in O(env).
    type: dict
    default: {}
  replace:
    description:
      - When another run is still running on this node (this O(state_dir)), stop it first and then start this one.
      - When V(false), starting fails with a message naming the other run.
    type: bool
    default: false
  metrics_records:
    description:
      - With O(state=query), read the last this many records of every C(rank_*_metrics.jsonl) in the run's output
        directory on the node (C(TRAINOPS_OUTPUT_DIR) of its environment, else C(outputs/) of its run directory; at
        most the last 16 KiB of each) and return the node's step time in RV(step_times). V(0) reads none.
      - A script that writes no such files, or records without C(step_time_s) and C(compute_time_s), gives V(null).
    type: int
    default: 0
    version_added: 0.2.0
  wait_for_change:
    description:
      - With O(state=query), when the run is running, watch it on the node for up to this many seconds (its state
        read again every half second) and answer as soon as it is no longer running, or when the time is up.
      - M(trainops.multinode.torchrun_wait) asks this way, so that a node is asked every few seconds rather than every
        poll, and still hears of a run's end at once. V(0) answers at once.
    type: float
    default: 0
    version_added: 0.2.0
notes:
  - The module returns as soon as the supervisor has recorded torchrun's pid (it waits at most 10 seconds for that).
    Use M(trainops.multinode.torchrun_wait) to wait for the job.
  - The supervisor runs with the same Python interpreter as the module.
seealso:
  - module: trainops.multinode.torchrun_wait
"""

EXAMPLES = r"""
- name: Start this node's share of a 4-node job
  trainops.multinode.torchrun:
    state_dir: /var/lib/trainops/node0
    run_id: llama-ft-20250101
    nnodes: 4
    nproc_per_node: 8
    node_rank: "{{ node_rank }}"
    master_addr: "{{ hostvars[groups['nodes'][0]].ansible_host }}"
    master_port: 29500
    rdzv_timeout: 600
    python: /opt/venv/bin/python
    chdir: /opt/train
    entrypoint: train.py
    entrypoint_args: [--epochs, "3"]
    env:
      NCCL_DEBUG: INFO
      NCCL_SOCKET_IFNAME: eth0
  register: start

- name: Use the c10d rendezvous and a torchrun executable, wrapped by a profiler
  trainops.multinode.torchrun:
    state_dir: /var/lib/trainops/node0
    run_id: profile-1
    rdzv_backend: c10d
    nnodes: 2
    nproc_per_node: 4
    node_rank: 0
    master_addr: 10.0.0.1
    master_port: 29400
    torchrun: /opt/venv/bin/torchrun
    command_prefix: [nsys, profile, -o, /tmp/profile]
    entrypoint: /opt/train/train.py

- name: Replace whatever run is still going on this node
  trainops.multinode.torchrun:
    state_dir: /var/lib/trainops/node0
    run_id: llama-ft-20250102
    replace: true
    nnodes: 1
    nproc_per_node: 8
    node_rank: 0
    master_addr: 127.0.0.1
    master_port: 29500
    entrypoint: /opt/train/train.py

- name: Query the last run started on this node
  trainops.multinode.torchrun:
    state_dir: /var/lib/trainops/node0
    state: query
    log_lines: 50
  register: q

- name: Stop it (SIGTERM, SIGKILL after 30 seconds)
  trainops.multinode.torchrun:
    state_dir: /var/lib/trainops/node0
    state: stopped
    stop_timeout: 30
"""

RETURN = r"""
job:
  description: The run as recorded on the node.
  returned: always
  type: dict
  contains:
    run_id:
      description: Run id, V(null) when there is no run.
      type: str
      sample: llama-ft-20250101
    status:
      description:
        - V(running) while the supervisor is alive, V(exited) once C(exit.json) was written, V(lost) when the supervisor
          is gone without writing C(exit.json), V(absent) when there is no such run, V(prepared) when O(state=prepared)
          wrote it and no Slurm step has started its supervisor yet.
      type: str
      sample: running
    pid:
      description: Pid of torchrun.
      type: int
      sample: 12345
    pgid:
      description: Process group of torchrun (its workers run in sessions of their own).
      type: int
      sample: 12345
    supervisor_pid:
      description: Pid of the supervisor.
      type: int
      sample: 12340
    node_rank:
      description: Node rank given at start.
      type: int
      sample: 0
    argv:
      description: The command started, as a list.
      type: list
      elements: str
      sample: [python3, -m, torch.distributed.run, --nnodes, "2", --nproc-per-node, "8", --rdzv-backend, static,
               --node-rank, "0", --master-addr, 10.0.0.1, --master-port, "29500", --max-restarts, "0", train.py]
    env:
      description: The environment variables given with O(env).
      type: dict
      sample: {NCCL_DEBUG: INFO}
    chdir:
      description: The O(chdir) given at start, V(null) when the run directory is used.
      type: str
      sample: /opt/train
    started_at:
      description: When torchrun was started (ISO 8601, UTC).
      type: str
      sample: "2025-01-01T12:00:00Z"
    ended_at:
      description: When the supervisor wrote C(exit.json) (ISO 8601, UTC); V(null) while running.
      type: str
      sample: "2025-01-01T13:00:00Z"
    ended_at_epoch:
      description: The same moment in seconds since the epoch, with sub-second precision; V(null) while running.
      type: float
      sample: 1735736400.25
    exit_code:
      description:
        - Exit code of torchrun; 128 + signal number when it was killed by a signal; V(null) while running.
        - When torchrun ended badly after a rank had died (RV(job.rank_failure)), the dead rank's exit code instead (128 +
          signal number for a rank killed by a signal), whether torchrun ended by itself or the node's watcher ended it.
      type: int
      sample: 0
    signal:
      description:
        - Name of the signal that ended torchrun, V(null) if it exited normally; the dead rank's signal (or V(null))
          when torchrun ended badly after a rank had died.
      type: str
      sample: SIGTERM
    rank_failure:
      description:
        - The rank's death that torchrun logged before it ended badly (C(exitcode) negative for a signal, C(local_rank),
          C(pid); C(seen_at_epoch) when the node's watcher saw it and ended torchrun); V(null) when there was none, or
          while running.
      type: dict
      sample: {exitcode: -9, local_rank: 0, pid: 16770, seen_at_epoch: 1764318834.9}
    torchrun_end:
      description:
        - How torchrun itself ended (C(exit_code), C(signal)) when RV(job.exit_code) and RV(job.signal) are the dead
          rank's (RV(job.rank_failure)); else V(null).
      type: dict
      sample: {exit_code: 143, signal: null}
    supervisor_signals:
      description:
        - The signals the supervisor itself received (C(exit.json)), for example V(SIGTERM) from a stop or from
          C(slurmstepd); empty when none, or while running.
      type: list
      elements: str
      sample: [SIGTERM]
    launcher:
      description:
        - What started the run, from the node's own records. C(name) is V(ssh) (the supervisor was started over SSH), or
          V(srun) for a run of a Slurm step (launcher=srun), with C(job_id), C(step_id) and C(step) (C(JOB.STEP)) as the
          supervisor recorded them inside the step (V(null) until the step has started it).
      type: dict
      sample: {name: srun, job_id: '42', step_id: '0', step: '42.0'}
    owner_uid:
      description:
        - The uid that owns the run directory itself (C(lstat)), which the job cannot forge; V(null) when the run directory
          is not a directory (a symlink). A Slurm step is stopped or queried for the run only when Slurm's job and step
          belong to it (M(trainops.multinode.srun_step)).
      type: int
      sample: 1001
    lost_reason:
      description: Why a V(lost) run is lost (its supervisor vanished, or the node rebooted since it started); else V(null).
      type: str
      sample: the node rebooted after the run started
    host:
      description: The host that started the run, as recorded then (C(hostname), C(boot_id), C(machine_id)).
      type: dict
    secret_env_names:
      description: The names (never the values) of the run's O(secret_env) variables.
      type: list
      elements: str
      sample: [HF_TOKEN]
    run_dir:
      description: Directory of the run on the node.
      type: str
      sample: /var/lib/trainops/node0/runs/llama-ft-20250101
    log_path:
      description: Path of C(node.log) on the node.
      type: str
      sample: /var/lib/trainops/node0/runs/llama-ft-20250101/node.log
    env_file:
      description:
        - Path of C(env.sh) in the run directory (mode 0600) with the O(env) every rank got, as C(export KEY=value) lines a
          shell can source to reproduce a rank by hand. C(null) before the run started.
      type: str
      sample: /var/lib/trainops/node0/runs/llama-ft-20250101/env.sh
    fingerprint:
      description: sha256 of argv, env, chdir and the names of the secret variables.
      type: str
      sample: 4f0b1c3e0d5e7a8c9b2a1d0e3f4c5b6a7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a
    stop:
      description:
        - The stop record (C(stop.json)) when the run was stopped with a O(stop_reason), else V(null).
        - Keys C(reason), C(detail), C(requested_at) (ISO 8601, UTC), C(requested_at_epoch) and C(uid).
      type: dict
      sample: {reason: user, detail: playbooks/stop.yml, requested_at: '2025-01-01T12:00:00Z', requested_at_epoch: 1735732800.0, uid: 1000}
    log_bytes:
      description: Size of C(node.log) in bytes (V(null) when it does not exist); a size that stops growing shows a stalled job.
      type: int
      sample: 20480
log_tail:
  description: The last O(log_lines) lines of C(node.log).
  returned: always
  type: list
  elements: str
  sample: ["[trainops] node=gpu1 rank=0/4 epoch=0 step=12/40 loss=2.3456 samples_per_s=1234.5"]
refused:
  description:
    - Why the run's records were refused (which check failed); the task fails and nothing is signalled.
  returned: when the records of a run that has not ended do not verify
  type: str
  sample: "supervisor_pid is 1, which is never a run's process"
step_times:
  description:
    - The node's step time from the tail of its ranks' metrics files (O(metrics_records)) - C(ranks), C(records),
      C(step_time_s) and C(compute_time_s), each V(null) or C(median) and C(p90) in seconds; V(null) when there are
      no such records (docs/failures.md, Stragglers).
  returned: when O(state=query) and O(metrics_records) is above 0
  type: dict
  sample: {ranks: 2, records: 10, step_time_s: {median: 0.0251, p90: 0.0262}, compute_time_s: {median: 0.0041, p90: 0.0044}}
  version_added: 0.2.0
stopped_pids:
  description:
    - Pids of the run's process tree that were stopped (would be stopped in check mode).
    - With O(state=started) and O(replace=true), the pids of the replaced runs.
  returned: when O(state) is V(stopped) or V(started)
  type: list
  elements: int
  sample: [12345, 12350, 12351]
killed_pids:
  description: Pids that were still alive after O(stop_timeout) and got C(SIGKILL).
  returned: when O(state=stopped)
  type: list
  elements: int
  sample: []
checkpoint_signal:
  description:
    - With O(checkpoint_seconds), the checkpoint signal sent before the stop, when it was sent (C(sent_at), epoch
      seconds), whether a newer C(checkpoint.json) was C(written) and how long the module waited (C(waited_s)).
  returned: when O(state=stopped) signalled a running run with O(checkpoint_seconds) above 0 and a checkpoint signal
  type: dict
  sample: {"signal": "SIGUSR1", "sent_at": 1764291600.5, "written": true, "waited_s": 2.4}
stacks:
  description:
    - With O(dump_stacks), the ranks whose stack was written (C(ranks)) and why none could be (C(error), null when the
      dumps were made).
  returned: with O(dump_stacks), when O(state=stopped) stopped a running run or O(state=query) found one (null when
    the run does not run)
  type: dict
  sample: {"ranks": [0, 1], "error": null}
step_command:
  description: What a Slurm step runs on this node for the prepared run, C(python supervisor --foreground job).
  returned: when O(state=prepared)
  type: dict
  contains:
    python:
      description: The node's interpreter that ran the module.
      type: str
    supervisor:
      description: Path of the run's C(supervisor.py).
      type: str
    job:
      description: Path of the run's C(job.json).
      type: str
  sample: {python: /usr/bin/python3, path: /usr/bin:/bin, supervisor: /srv/trainops/state/n1/runs/r1/supervisor.py,
           job: /srv/trainops/state/n1/runs/r1/job.json}
replaced:
  description: Run ids stopped because of O(replace=true).
  returned: when O(state=started)
  type: list
  elements: str
  sample: [llama-ft-20250101]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainops.multinode.plugins.module_utils._launchers import NAMES as LAUNCHER_NAMES
from ansible_collections.trainops.multinode.plugins.module_utils._outcomes import ASKED_STOP_REASONS
from ansible_collections.trainops.multinode.plugins.module_utils._torchrun import (
    TorchrunError,
    run_module,
)


def main():
    argument_spec = dict(
        state=dict(type='str', default='started', choices=['started', 'stopped', 'query', 'prepared']),
        # the launchers' names (module_utils/_launchers.py); DOCUMENTATION's choices are held to them by a unit test
        launcher=dict(type='str', choices=list(LAUNCHER_NAMES)),
        signal=dict(type='bool', default=True),
        state_dir=dict(type='path', required=True),
        run_id=dict(type='str'),
        nnodes=dict(type='int'),
        nproc_per_node=dict(type='int'),
        node_rank=dict(type='int'),
        master_addr=dict(type='str'),
        master_port=dict(type='int'),
        rdzv_backend=dict(type='str', default='static', choices=['static', 'c10d']),
        rdzv_id=dict(type='str'),
        rdzv_timeout=dict(type='int'),
        max_restarts=dict(type='int', default=0),
        entrypoint=dict(type='str'),
        module=dict(type='bool', default=False),
        entrypoint_args=dict(type='list', elements='str', default=[]),
        python=dict(type='str', default='python3'),
        torchrun=dict(type='path'),
        command_prefix=dict(type='list', elements='str', default=[]),
        container=dict(type='str'),
        container_engine=dict(type='str', default='docker'),
        container_python=dict(type='str', default='python3'),
        chdir=dict(type='path'),
        env=dict(type='dict', default={}),
        secret_env=dict(type='dict', default={}, no_log=True),
        node_id=dict(type='str'),
        replace=dict(type='bool', default=False),
        stop_timeout=dict(type='int', default=15),
        # the vocabulary's (module_utils/_outcomes.py); DOCUMENTATION's choices are held to it by a unit test
        stop_reason=dict(type='str', choices=list(ASKED_STOP_REASONS)),
        stop_detail=dict(type='str'),
        checkpoint_seconds=dict(type='int', default=0),
        dump_stacks=dict(type='bool', default=False),
        log_lines=dict(type='int', default=20),
        metrics_records=dict(type='int', default=0),
        wait_for_change=dict(type='float', default=0),
    )
    module = AnsibleModule(
        argument_spec=argument_spec,
        required_if=[
            ('state', 'started', ('run_id', 'nnodes', 'nproc_per_node', 'node_rank', 'master_addr', 'master_port', 'entrypoint')),
            ('state', 'prepared', ('run_id', 'nnodes', 'nproc_per_node', 'node_rank', 'master_addr', 'master_port', 'entrypoint')),
        ],
        supports_check_mode=True,
    )
    try:
        result = run_module(module.params, check_mode=module.check_mode)
    except TorchrunError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    for warning in result.pop('warnings', None) or []:
        module.warn(warning)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
