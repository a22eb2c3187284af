# -*- coding: utf-8 -*-

# Copyright (c) 2025, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
---
module: torchrun_wait
short_description: Wait for one node's torchrun job and fail fast when another node of the job failed
version_added: 0.1.0
description:
  - Runs on the controller once per host of the job, as a normal task on all node hosts.
  - With O(watch_start) (right after the start, on every host whatever the forks) it only registers the host with the
    job's watch hub and returns. The hub is one process per run on the controller, started by the first host, in its
    own session. It runs the node's watcher (C(watch.py) in the run directory) over one long-lived SSH exec per node
    (through the ControlMaster Ansible opened) or as a local process, and writes each node's latest status to
    C(<sync_dir>/hub/<host>.json). The watcher prints a line when the run changes and a heartbeat every 5 seconds.
    When a node's run ends badly on its own, or a host's status file says it failed, stalled or was gone, the hub
    stops the run on every other node at once (O(trainops.multinode.torchrun#module:stop_reason=peer), SIGKILL after
    1 second). A host on another connection is not registered.
  - The wait reads its host's status from the hub's file every O(poll_interval) seconds. Only when the hub has no
    live stream for the host (none registered, or no line for 17 seconds) does it ask with the module, as described
    below.
  - It runs M(trainops.multinode.torchrun) with O(trainops.multinode.torchrun#module:state=query) on the host, writes the
    host's status atomically to C(<sync_dir>/<inventory_hostname>.json), reads the status files of the other hosts,
    and asks again after O(poll_interval) seconds.
  - While the host's run is running, each question after the first watches it on the host for the rest of 10 seconds
    (or of a shorter O(progress_interval)) after the O(poll_interval) (O(trainops.multinode.torchrun#module:wait_for_change))
    and is answered as soon as the run ends. The host is asked every 10 seconds instead of every poll (a module run
    each), and a peer's failure reaches this host's wait within about 10 seconds.
  - When the host's run exited with code 0 the task is ok. When it exited with another code, was killed by a signal,
    is lost or does not exist, the task fails with a message naming the host (and its node rank) and the last log lines.
  - A host that cannot be reached is not failed. Its status file says V(unreachable), its peers keep running, and the
    progress line says C(unreachable 35s). Only when no query has reached it for O(unreachable_grace) seconds does the
    task fail (RV(verdict.state=gone)), which fails the job on every host.
  - With O(stall_timeout), a running job whose C(node.log) has not grown for that many seconds is stopped with
    O(trainops.multinode.torchrun#module:stop_reason=stalled) and the task fails (RV(verdict.state=stalled)), naming the
    last log line.
  - When another host's status file says it failed, stalled or was unreachable too long (states V(failed), V(error),
    V(stalled), V(gone)), this host's run is stopped with O(trainops.multinode.torchrun#module:stop_reason=peer) and the
    task fails with the message C(stopped because <host> failed).
  - A run of a Slurm step (launcher=srun) that Slurm ended (its supervisor killed, or signalled without a stop request)
    while another host failed was ended because of that host (C(srun --kill-on-bad-exit)). Its status file says
    V(stopped), not V(failed), and the task fails with RV(verdict.state=stopped) and the message
    C(ended by Slurm with step <job>.<step> (srun --kill-on-bad-exit) because <host> failed). The host that failed may
    publish its failure a little later, so such a host looks for it for up to 10 seconds before it counts as failed
    itself. For the same reason a run of a Slurm step whose peer failed is left to Slurm for up to 10 seconds before
    the wait stops it (a peer that stalled or is gone is acted on at once).
  - After O(timeout) seconds the task fails with RV(timed_out=true) without stopping anything (leave that to the
    playbook's C(rescue)).
  - "Every O(progress_interval) seconds one line C(<host> rank <node_rank>: running  <last progress>) is displayed."
  - With O(manifest), the first host starts a small watcher process in its own session. When the controller process
    goes away (Ctrl-C) while the manifest's C(outcome) is still V(running), it sets the outcome to V(interrupted); the
    job itself keeps running on the nodes.
  - This module is implemented as an action plugin; the module file only holds the documentation.
author:
  - trainops maintainers (@trainops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - trainops.multinode._attributes
  - ansible.builtin.action_common_attributes.flow
  - trainops.multinode._torchrun
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: partial
    details:
      - In check mode the run is queried once; nothing is waited for, written to O(sync_dir) or stopped.
options:
  watch_start:
    description:
      - Register the host with the job's watch hub (see above) and return at once, instead of waiting.
    type: bool
    default: false
    version_added: 0.2.0
  run_dir:
    description:
      - With O(watch_start), the run directory on the host (RV(trainops.multinode.torchrun#module:job.run_dir) of the
        start), which holds the node's watcher.
    type: str
    version_added: 0.2.0
  run_id:
    description:
      - The run to wait for. Defaults to the last run started in O(state_dir).
      - Status files of other hosts that name a different run id are ignored.
    type: str
  node_rank:
    description:
      - Node rank of this host, used in messages and the status file.
      - Defaults to the node rank recorded when the run was started.
    type: int
  sync_dir:
    description:
      - Directory on the controller shared by all hosts of the job; it is created if needed.
      - Use a fresh directory for every job (for example one that contains the run id).
    type: path
    required: true
  poll_interval:
    description:
      - Seconds between an answer from the host and the next question (a running run is also watched on the host
        between questions, see above).
    type: float
    default: 2.0
  progress_interval:
    description:
      - Seconds between two progress lines on the console.
    type: float
    default: 10.0
  timeout:
    description:
      - Seconds to wait at most; V(0) waits without limit.
    type: int
    default: 0
  unreachable_grace:
    description:
      - Seconds the host may go without answering a query before the job counts as failed (RV(verdict.state=gone)).
      - Until then its peers keep running and a query that answers again resumes the wait.
    type: int
    default: 300
  stall_timeout:
    description:
      - Seconds a running job may go without new output in its C(node.log) before it is stopped as stalled; V(0) turns
        the check off.
      - The time is measured on the controller, between queries that saw the log's size change, so clocks that differ
        across hosts do not matter.
    type: int
    default: 0
  manifest:
    description:
      - Path of the experiment's C(manifest.json) on the controller. When given, a watcher marks it V(interrupted) if the
        controller goes away before the job was collected (see the description).
    type: path
  progress_pattern:
    description:
      - Python regular expression searched in the log lines; the last match is the host's progress. When the pattern
        has a group, group 1 is used, otherwise the whole match.
      - The default matches progress lines of C(train.py) such as
        C([trainops] node=gpu1 rank=0/4 epoch=0 step=12/40 loss=2.3456 samples_per_s=1234.5) and captures from C(epoch=)
        (or C(step=)) to the end of the line.
      - Until a line matches, the progress line shows the log's last line after the word C(log), so a script of your
        own that prints no such lines still shows what it does.
    type: str
    default: '\[trainops\].*?\b((?:epoch|step)=.*?)\s*$'
  label:
    description:
      - Text put before the host's name in its progress lines and messages, for example the point of a sweep
        (C(point 3/8 channels=56 threads=256)).
    type: str
    default: ''
  straggler_threshold:
    description:
      - How far (a fraction; V(0.15) is 15 %) this host's step time may lie above the median of the other hosts' before
        its progress line names it a straggler (C(STRAGGLER compute time ...)). Above 0, at most 10.
      - A host's step time is the median over the last 5 records of each C(rank_*_metrics.jsonl) in its run's output
        directory (M(trainops.multinode.torchrun)'s O(trainops.multinode.torchrun#module:metrics_records)) - of
        C(compute_time_s) when every host's records have it, else of C(step_time_s). Without such records no
        host is named (docs/failures.md, Stragglers). Nothing else follows from it - the job goes on.
    type: float
    default: 0.15
    version_added: 0.2.0
notes:
  - O(log_lines) should be large enough to contain a progress line; only the returned log tail is searched.
seealso:
  - module: trainops.multinode.torchrun
"""

EXAMPLES = r"""
- name: Start the job on every node
  trainops.multinode.torchrun:
    state_dir: /var/lib/trainops/node
    run_id: "{{ run_id }}"
    nnodes: "{{ groups['nodes'] | length }}"
    nproc_per_node: 8
    node_rank: "{{ groups['nodes'].index(inventory_hostname) }}"
    master_addr: "{{ hostvars[groups['nodes'][0]].ansible_host }}"
    master_port: 29500
    entrypoint: /opt/train/train.py

- name: Wait for the job, stop everything as soon as one node fails
  block:
    - name: Wait
      trainops.multinode.torchrun_wait:
        state_dir: /var/lib/trainops/node
        run_id: "{{ run_id }}"
        node_rank: "{{ groups['nodes'].index(inventory_hostname) }}"
        sync_dir: "{{ playbook_dir }}/.sync/{{ run_id }}"
        timeout: 7200
        progress_interval: 30
      register: waited
  rescue:
    - name: Stop this node's run
      trainops.multinode.torchrun:
        state_dir: /var/lib/trainops/node
        run_id: "{{ run_id }}"
        state: stopped
    - name: Fail with the reason
      ansible.builtin.fail:
        msg: "{{ waited.msg | default('torchrun_wait failed') }}"
"""

RETURN = r"""
job:
  description: The run as last returned by M(trainops.multinode.torchrun) (see the RV(trainops.multinode.torchrun#module:job) return value there).
  returned: always
  type: dict
  sample:
    run_id: llama-ft-20250101
    status: exited
    exit_code: 0
    signal: null
    pid: 12345
    pgid: 12345
    supervisor_pid: 12340
    node_rank: 0
    log_path: /var/lib/trainops/node/runs/llama-ft-20250101/node.log
log_tail:
  description: The last O(log_lines) lines of the node's C(node.log).
  returned: always
  type: list
  elements: str
  sample: ["[trainops] node=gpu1 rank=0/4 epoch=2 step=40/40 loss=0.1234 samples_per_s=1250.0"]
progress:
  description: The last progress match (see O(progress_pattern)), V(null) if none was seen.
  returned: always
  type: str
  sample: epoch=2 step=40/40 loss=0.1234 samples_per_s=1250.0
peer_failures:
  description: The other hosts whose status file said they failed (only when this host's run was stopped because of them).
  returned: always
  type: list
  elements: dict
  contains:
    host:
      description: Inventory hostname of the failed host.
      type: str
    node_rank:
      description: Its node rank, when known.
      type: int
    state:
      description: V(failed), V(error) (its run could not be queried), V(stalled) or V(gone) (unreachable too long).
      type: str
    status:
      description: Its run's status (V(exited), V(lost), ...).
      type: str
    exit_code:
      description: Its run's exit code.
      type: int
    signal:
      description: The signal that ended its run.
      type: str
    progress:
      description: Its last progress.
      type: str
  sample: [{host: gpu2, node_rank: 1, state: failed, status: exited, exit_code: 1, signal: null, progress: epoch=0 step=3/40}]
stopped_pids:
  description: Pids stopped on this host because another host failed.
  returned: when this host's run was stopped because another host failed
  type: list
  elements: int
  sample: [12345, 12350]
verdict:
  description: What the wait judged on this host, for the experiment's outcome (M(trainops.multinode.experiment)).
  returned: always
  type: dict
  contains:
    state:
      description:
        - V(succeeded), V(failed) (the job ended badly here), V(stalled), V(gone) (unreachable past O(unreachable_grace)),
          V(stopped) (because of a peer, or ended by Slurm because of one), V(timed_out), V(error) (queries failed), or
          V(running) (check mode).
        - What each verdict means, and the experiment's outcome it stands for, is defined in
          C(plugins/module_utils/_outcomes.py) (docs/failures.md).
      type: str
    detail:
      description: One line saying more (how long without output, since when unreachable, which peer).
      type: str
    last_line:
      description: The last non-empty line of the host's log tail.
      type: str
    seen_running_at:
      description:
        - When the last query that found the job running was sent, in seconds since the epoch on the controller's
          clock (V(null) when none did). The experiment orders the nodes' ends by these times, not by the nodes'
          clocks.
      type: float
      version_added: 0.2.0
    seen_ended_at:
      description:
        - When the first answer that found the job ended came, on the controller's clock (V(null) when the wait did
          not see it end by itself).
      type: float
      version_added: 0.2.0
    unreachable_since:
      description: Since when the host has not answered, on the controller's clock (V(null) when it answered last).
      type: float
      version_added: 0.2.0
  sample: {state: stalled, detail: 'no new output for 900 s (trainops_stall_timeout=900); last line: ...', last_line: '...'}
timed_out:
  description: Whether the task failed because O(timeout) was reached.
  returned: always
  type: bool
  sample: false
waited_s:
  description: Seconds spent waiting.
  returned: always
  type: float
  sample: 3600.5
"""
