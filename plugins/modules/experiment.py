#!/usr/bin/python
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
module: experiment
short_description: Create a training experiment directory, or summarize its metrics into a manifest
version_added: 0.1.0
author:
  - trainops maintainers (@trainops)
description:
  - With O(state=created), creates a new, uniquely named experiment directory on the controller, with C(logs/) and
    C(outputs/) subdirectories. An existing directory is never reused or overwritten.
  - With O(state=reported), reads the per-rank metrics files C(outputs/<node>/rank_*_metrics.jsonl) of an experiment directory
    (one directory per logical node, as the job role's collect fetches them),
    computes a run summary and writes it, merged into O(manifest), to C(manifest.json), plus a human-readable table to
    C(summary.txt).
  - With O(state=reported), also splits the collected node logs C(logs/node_<n>.txt) by their C([rank N]) prefix into
    C(logs/rank_<rank>.txt), one per rank, and writes the rank map (rank, node, local rank, log) to the manifest's
    C(rank_logs) and the end of C(summary.txt). The nodes and their ranks come from O(manifest)'s C(nodes).
  - "Meant to run on the controller, for example with C(delegate_to: localhost) and C(run_once: true)."
  - With O(state=launched), O(state=failed) and O(state=collected), the action on the controller builds the manifest of
    the role M(trainops.multinode.job)'s launch from the run's variables itself, and writes it; these states read the
    play's variables and the nodes' registered results, and fail anywhere else. Only this module writes C(manifest.json).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - trainops.multinode._attributes
attributes:
  check_mode:
    support: full
    details:
      - With O(state=created), returns the path that would be created and creates nothing.
      - With O(state=reported), computes and returns the summary and writes nothing.
options:
  state:
    description:
      - V(created) creates a new experiment directory O(root)/O(name).
      - V(reported) summarizes the metrics of the experiment directory O(path).
      - V(linked) records in the manifest (C(next)) and C(summary.txt) of the experiment O(path), an attempt of a
        launch with retries, the run id O(next) of the attempt after it.
      - V(launched) fails naming the nodes where the launch's launcher does not run the job (C(trainops_launcher),
        as the action M(trainops.multinode.launcher) registered its start); else writes the manifest of a launch whose
        job started (outcome V(running)) - the run, its parameters, master, code, every node's record, shared
        directories, launcher and attempt - and shows the lines to follow the job in RV(msg).
      - V(failed) records why a launch did not start (outcome V(failed), C(launch_errors) - each node's
        C(__trainops_launch_error), merged over what an earlier batch recorded).
      - V(collected) reads the manifest the launch wrote (within bounds), asks the run's launcher how it ended the job
        (launcher=srun - M(trainops.multinode.srun_step) on the controller, Slurm's accounting of its step; given as
        O(slurm) would give it), judges how the job ended from what the collect registered on every node (as
        O(results), O(verdicts), O(missing_nodes), O(refused) and O(attempt) would give it), writes it and returns why
        the play fails in RV(failure).
      - V(failed) and V(collected) publish the experiment with set_stats (C(trainops_experiment)), unless the variable
        C(__trainops_publish) is false.
      - With V(created), O(root) and O(name) default to the run's (C(trainops_experiments_dir), and
        C(<trainops_run_name>_<channels>ch_<threads>th_<time>)) through the action.
    type: str
    choices: [created, reported, linked, launched, failed, collected]
    default: created
  root:
    description:
      - Directory under which the experiment directory is created. It is created (with parents) if missing.
      - Required when O(state=created), except through the action on the controller (C(trainops_experiments_dir)).
    type: path
  name:
    description:
      - Name of the experiment directory, a single path component, for example V(multinode_42ch_256th_20261122_083000).
      - The directory is created exclusively. When something named O(name) already exists under O(root), V(<name>_2),
        V(<name>_3), ... are tried in turn and the first free one is used; see RV(name).
      - Required when O(state=created), except through the action on the controller (the run's name).
    type: str
  path:
    description:
      - The experiment directory to summarize, as returned in RV(path) by O(state=created).
      - Required when O(state=reported).
    type: path
  manifest:
    description:
      - Data to store in C(manifest.json) next to the computed summary, for example the launch parameters.
      - A top-level C(summary) key is replaced by the computed RV(summary).
      - Only used when O(state=reported).
    type: dict
    default: {}
  results:
    description:
      - The final state of the job on each node, as a mapping of node name to the C(job) value returned by
        M(trainops.multinode.torchrun) (C(exit_code), C(ended_at_epoch), C(status), ...).
      - When given, the module decides the job's outcome (see RV(outcome), RV(failed_nodes)) and adds it and
        O(results) to the manifest. Only used when O(state=reported).
    type: dict
  verdicts:
    description:
      - What the wait (M(trainops.multinode.torchrun_wait), its RV(trainops.multinode.torchrun_wait#module:verdict))
        judged on each node, as a mapping of node name to a dict with C(state) and C(detail).
      - C(state=stalled) (no new output for too long) and C(state=gone) (unreachable past the grace) name the outcome
        when no node failed on its own first. Only used with O(results).
    type: dict
    default: {}
  missing_nodes:
    description:
      - Nodes that could not be reached at the end of the job; they count as failed.
      - Only used with O(results).
    type: list
    elements: str
    default: []
  slurm:
    description:
      - For a job launched as one Slurm step (launcher=srun), how Slurm ended it, as the controller asked Slurm after the
        end - C(job_id), C(step_id), C(step) and C(job) (each with C(state) and C(source)), as
        M(trainops.multinode.srun_step) with O(trainops.multinode.srun_step#module:state=query) returns them.
      - A step whose C(sacct) state is C(TIMEOUT), or a job whose C(sacct) state is C(TIMEOUT) while no node's run failed on
        its own, makes the outcome V(timed_out); without an answer from C(sacct) it is not (C(srun.log) carries what the
        ranks print, so slurmstepd's C(DUE TO TIME LIMIT) line there is not taken). Recorded in the manifest's
        C(slurm_end). Only used with O(results).
    type: dict
    version_added: 0.2.0
  refused:
    description:
      - Lines naming a node and a path whose file the collect refused to write (it would have left the node's place in
        the experiment); recorded in the manifest's C(collect_refused) and counted in the table.
    type: list
    elements: str
    default: []
    version_added: 0.2.0
  straggler_threshold:
    description:
      - How far (a fraction, V(0.15) is 15 %) a node's step time may lie above the median of the other nodes' before
        the node is named a straggler in RV(summary.stragglers) (docs/failures.md, Stragglers). Above 0, at most 10.
      - Unset, the manifest's C(parameters.straggler_threshold), else V(0.15).
    type: float
    version_added: 0.2.0
  attempt:
    description:
      - For an attempt of a launch with retries (C(trainops_retries), docs/failures.md "Retries"), what the launch knows
        of it - C(number) (1-based), C(first) and C(previous) (run ids; V(null) for the first attempt), C(retries)
        (the retries the launch allows), C(rows) (the rows of the attempts before it, as RV(attempts) returned them)
        and C(resumed_from) (the checkpoint it resumed from - C(global_step), C(path), C(sha256), ...; V(null) from
        scratch).
      - With spare nodes (C(trainops_spare_nodes)) or C(trainops_min_nodes), also C(nodes) (the attempt's nodes in rank
        order), C(replaced) (the nodes it runs without), C(spares) (the spare nodes not used yet), C(spare_group) and
        C(min_nodes); a retry that leaves a node out then returns the next attempt's C(nodes), C(spares),
        C(replaced) and C(excluded) in RV(retry).
      - Adds C(attempt), C(first), C(previous), C(attempts) (every attempt's run id, outcome, start step, end step,
        steps lost and decision) and C(retry) to the manifest, and the attempts to the table when C(retries) is above
        0 or this is a later attempt. Only used with O(results).
    type: dict
    version_added: 0.2.0
  next:
    description:
      - With O(state=linked), the run id of the next attempt.
    type: str
    version_added: 0.2.0
notes:
  - "Metrics files are JSON lines, one object per training step with the keys C(rank), C(world_size), C(local_rank), C(node),
    C(epoch), C(step), C(global_step), C(loss), C(grad_norm), C(lr), C(step_time_s), C(samples_per_s) and C(tflops)
    (which may be V(null)), and optionally C(compute_time_s) (the rank's own time per step, without waiting for other
    ranks; it names a straggler node)."
  - A last line that does not parse (a record being written while the file is read) is skipped; see RV(summary.truncated_files).
  - What the job wrote (its metrics and C(checkpoint.json)) is read within bounds - at most 64 MiB and 200000 records
    of at most 64 KiB per metrics file, 1 MiB per JSON file, nesting at most 32 levels deep, numbers finite and at most
    2**53 either way. A record whose C(world_size) is not the job's own (the manifest's C(world_size)) or whose
    C(rank) is not one of its ranks is refused too. A record or file that breaks a bound is left out and named, with
    its node, in RV(read_refused); the summary, the manifest and the outcome are written from the rest.
  - When no metrics exist the module does not fail; RV(summary.metrics_found) is V(false) and the playbook decides.
  - C(manifest.json) is written atomically (temporary file and rename) with sorted keys and an indent of 2.
seealso:
  - module: ansible.builtin.file
"""

EXAMPLES = r"""
---
- name: Create the experiment directory on the controller
  trainops.multinode.experiment:
    state: created
    root: "{{ playbook_dir }}/../experiments"
    name: "multinode_{{ groups['gpu_nodes'] | length }}n_{{ ansible_date_time.date }}"
  delegate_to: localhost
  run_once: true
  register: trainops_experiment_dir

- name: Summarize the metrics once training has finished
  trainops.multinode.experiment:
    state: reported
    path: "{{ trainops_experiment_dir.path }}"
    manifest:
      nodes: "{{ groups['gpu_nodes'] }}"
      nproc_per_node: 8
  delegate_to: localhost
  run_once: true
  register: trainops_report

- name: Show the summary table
  ansible.builtin.debug:
    msg: "{{ trainops_report.table }}"
  run_once: true

- name: Fail when training did not make progress
  ansible.builtin.assert:
    that:
      - trainops_report.summary.metrics_found
      - trainops_report.summary.missing_ranks | length == 0
      - trainops_report.summary.loss_decreased
  run_once: true
"""

RETURN = r"""
path:
  description:
    - The experiment directory (absolute). With O(state=created) the directory that was created, or in check mode
      the one that would be.
  returned: success
  type: str
  sample: /srv/experiments/multinode_42ch_256th_20261122_083000_2
name:
  description: The name actually used, O(name) or O(name) with a V(_N) suffix when O(name) was taken.
  returned: success and O(state=created)
  type: str
  sample: multinode_42ch_256th_20261122_083000_2
logs_dir:
  description: The C(logs/) subdirectory of RV(path).
  returned: success and O(state=created)
  type: str
  sample: /srv/experiments/multinode_42ch_256th_20261122_083000_2/logs
outputs_dir:
  description: The C(outputs/) subdirectory of RV(path); the collect fetches each node's outputs into C(outputs/<node>/).
  returned: success and O(state=created)
  type: str
  sample: /srv/experiments/multinode_42ch_256th_20261122_083000_2/outputs
run_id:
  description: The run id of the launch the manifest records.
  returned: success and O(state=launched)
  type: str
  version_added: 0.3.0
msg:
  description: What the launch shows once its job runs (as a debug task would) - before it waits, the job, how the wait
    judges it, and the commands that come back to it (status, stop, logs); with C(trainops_wait) false, where the job
    runs and the commands that follow it.
  returned: success and O(state=launched)
  type: list
  elements: str
  version_added: 0.3.0
failure:
  description: Why the play fails, or an empty string - the files the collect refused to write, else the job's failed
    nodes, why each ended and the last lines of its log (not when C(trainops_collect_fail) is false or the job is retried).
  returned: success and O(state=collected)
  type: str
  version_added: 0.2.0
shown:
  description: The summary the collect shows, RV(table) after the experiment's path.
  returned: success and O(state=collected)
  type: list
  elements: str
  version_added: 0.2.0
launch_errors:
  description: Why the launch did not start, per node (also the manifest's C(launch_errors)).
  returned: success and O(state=failed)
  type: dict
  version_added: 0.2.0
manifest_path:
  description: Path of C(manifest.json) (written unless in check mode).
  returned: success and O(state=reported)
  type: str
  sample: /srv/experiments/multinode_42ch_256th_20261122_083000/manifest.json
summary_path:
  description: Path of C(summary.txt), which holds RV(table) (written unless in check mode).
  returned: success and O(state=reported)
  type: str
  sample: /srv/experiments/multinode_42ch_256th_20261122_083000/summary.txt
outcome:
  description:
    - V(succeeded) when every node's job exited 0.
    - V(failed) when a node's job failed on its own before anyone stopped the job (or ended with another non-zero exit).
    - V(stalled) when the wait stopped the job because a node showed no new output for too long (O(verdicts)).
    - V(unreachable) when a node could not be reached past the wait's grace, or at the end.
    - V(stopped) when the user stopped it (C(playbooks/stop.yml)); V(timed_out) when the wait's time limit did, or when
      Slurm ended the step at a time limit (O(slurm)); the line then names the last checkpoint rank 0 reported
      (C(checkpoint.json) in its outputs, also the manifest's C(checkpoint)).
  returned: success, O(state=reported) and O(results) given
  type: str
  sample: failed
outcome_detail:
  description: The outcome as one line that names the node, its node rank and how it ended (also in C(summary.txt)).
  returned: success, O(state=reported) and O(results) given
  type: str
  sample: "failed on node1 (node rank 1: exit code 1); stopped: node0"
stop:
  description: The first stop record of any node (C(reason), C(detail), C(requested_at)), V(null) when nothing was stopped.
  returned: success, O(state=reported) and O(results) given
  type: dict
  sample: {reason: user, detail: playbooks/stop.yml, requested_at: '2026-11-22T08:40:00Z'}
failed_nodes:
  description:
    - The cause of a failure. For a stall whose stack dumps name a rank outside torch while the others wait in it, that
      rank's node. Else, of the nodes that failed on their own and those that could not be reached, the node(s) that
      ended first on the controller's clock (the wait's times), a node that vanished (unreachable, or its job lost)
      before one that ended by itself, and the nodes' own clocks where the controller cannot tell (RV(blame)).
  returned: success, O(state=reported) and O(results) given
  type: list
  elements: str
  sample: [node0]
blame:
  description:
    - How RV(failed_nodes) was found, V(null) when the job succeeded. C(by) is V(stacks) (the stack dumps name the
      hung rank), V(heartbeat) (the ranks' heartbeats show the rank that stopped progressing while its peers waited),
      V(controller_clock) (it ended while the others were still seen running), V(vanished) (it could not
      be reached or its job was lost), V(node_clocks) (it ended first by the nodes' clocks; the controller saw the
      ends too close together, or saw none), V(only) (the only node that failed on its own), V(wait) (the node whose
      wait saw the stall or lost it) or V(stop) (a stop, nothing failed). C(detail) says it in a line, shown in the
      table as C(blamed).
  returned: success, O(state=reported) and O(results) given
  type: dict
  sample: {by: controller_clock, detail: "node1 ended first on the controller's clock (the controller saw node0 still running after)"}
  version_added: 0.2.0
also_failed:
  description:
    - Nodes whose job failed on its own, after the first failure (typically a collective error caused by it).
  returned: success, O(state=reported) and O(results) given
  type: list
  elements: str
  sample: [node1]
unclean_exit:
  description:
    - Every failed node finished its work and then died on the way out (SIGABRT, C(terminate called without an active
      exception)) - C(nodes) and C(detail) (also the RV(outcome_detail), naming the likely cause). The outcome stays
      V(failed); such a job is not retried (docs/failures.md, "Retries").
  returned: success, O(state=reported) and O(results) given, when so
  type: dict
  sample: {nodes: [node0, node1], detail: "finished its work, then exited uncleanly on node0, node1 (SIGABRT: ...)"}
collect_refused:
  description: O(refused), as recorded in the manifest's C(collect_refused) (empty when nothing was refused).
  returned: success and O(state=reported)
  type: list
  elements: str
  sample: ["node1: refused profile '/r/profiles/../../x': a \"\", \".\" or \"..\" component"]
  version_added: 0.2.0
read_refused:
  description:
    - What was not read of the files the job wrote (see the notes), one line each naming the node, the file and, for a
      record, its line; recorded in the manifest's C(read_refused) and shown in the table (the first 20).
  returned: success and O(state=reported)
  type: list
  elements: str
  sample: ["node1: rank_01_metrics.jsonl line 7 refused: nesting deeper than 32 levels"]
  version_added: 0.2.0
attempts:
  description:
    - With O(attempt), every attempt's row, this one last - C(attempt), C(run_id), C(experiment_dir), C(outcome),
      C(outcome_detail), C(start_step) (the checkpoint's global step it resumed from, 0 from scratch), C(end_step)
      (the last global step its metrics reached), C(steps_lost) (the previous attempt's end step minus this start
      step), C(failure) (its failed nodes and how each ended), C(decision) and C(reason) (see RV(retry)).
  returned: success, O(state=reported), O(results) and O(attempt) given
  type: list
  elements: dict
  version_added: 0.2.0
retry:
  description:
    - With O(attempt), whether the launch relaunches the job - C(decision) V(retry), V(stop) (retries end; C(reason)
      says why, for example V(the same node failing twice the same way (node0 exit code 1 in attempts 1 and 2))) or
      V(null) (it succeeded) - and C(reason).
  returned: success, O(state=reported), O(results) and O(attempt) given
  type: dict
  sample: {decision: retry, reason: failed is retried (1 of 1 retries left)}
  version_added: 0.2.0
stopped_nodes:
  description:
    - Nodes whose job was stopped (or ended after the first stop) because of the cause.
  returned: success, O(state=reported) and O(results) given
  type: list
  elements: str
  sample: [node2, node3]
table:
  description: The summary as a small aligned table, one line per list element (also written to C(summary.txt)).
  returned: success and O(state=reported)
  type: list
  elements: str
  sample:
    - "world size : 16"
    - "ranks      : 16/16"
    - "nodes      : 2"
    - "steps      : 200"
    - "loss       : 6.9100 -> 2.3050 (decreased)"
    - "throughput : 5120.0 samples/s"
    - "step time  : 0.1000 s"
    - "compute    : 1520 TFLOP/s total"
summary:
  description: The run summary computed from the metrics files (also stored under C(summary) in C(manifest.json)).
  returned: success and O(state=reported)
  type: dict
  contains:
    metrics_found:
      description:
        - Whether at least one metrics record was found.
        - When V(false), RV(summary.world_size), RV(summary.steps) and the loss and performance values are V(null)
          and the lists are empty (except for RV(summary.metrics_files) and RV(summary.truncated_files)).
      type: bool
      sample: true
    metrics_files:
      description: The metrics files read, C(<node>/<file name>) under C(outputs/).
      type: list
      elements: str
      sample: [node0/rank_00_metrics.jsonl, node1/rank_01_metrics.jsonl]
    bad_lines:
      description: Number of lines (other than a truncated last line) that were skipped because they did not parse.
      type: int
      sample: 0
    truncated_files:
      description: Metrics files whose last line did not parse and was skipped.
      type: list
      elements: str
      sample: []
    world_size:
      description:
        - The largest C(world_size) reported by any record (the number of ranks seen when no record reports it).
        - V(null) when no metrics were found.
      type: int
      sample: 16
    ranks_seen:
      description: Sorted list of the ranks that logged at least one record.
      type: list
      elements: int
      sample: [0, 1, 2, 3]
    missing_ranks:
      description: Sorted list of the ranks below RV(summary.world_size) that logged nothing.
      type: list
      elements: int
      sample: []
    records_per_rank:
      description: Number of records per rank, keyed by the rank as a string.
      type: dict
      sample: {"0": 200, "1": 200}
    nodes:
      description:
        - Sorted list of the logical nodes whose C(outputs/<node>/) held metrics (their inventory names; two nodes on
          one host count two). The table's C(nodes) line counts them.
      type: list
      elements: str
      sample: [node0, node1]
    hosts:
      description: Sorted list of the distinct host names the ranks report, each rank's first C(node) of at most 255
        characters.
      type: list
      elements: str
      sample: [gpu-a, gpu-b]
      version_added: 0.2.0
    duplicate_ranks:
      description:
        - Ranks that more than one node reported, keyed by the rank as a string, with those nodes in order; only the
          first node's records count, the others' are not merged into them (the table's C(ranks) line names them).
      type: dict
      sample: {"1": [node0, node1]}
      version_added: 0.2.0
    steps:
      description: The largest C(global_step) found, V(null) when none.
      type: int
      sample: 200
    first_step:
      description: The smallest C(global_step) found, V(null) when none.
      type: int
      sample: 1
    first_loss:
      description:
        - Mean C(loss) over all ranks that logged a record at the smallest C(global_step) (RV(summary.first_step)).
        - Null, NaN and infinite losses are left out; V(null) when none remains.
      type: float
      sample: 6.91
    final_loss:
      description:
        - Mean C(loss) over all ranks that logged a record at the largest C(global_step) (RV(summary.steps)).
        - Null, NaN and infinite losses are left out; V(null) when none remains.
      type: float
      sample: 2.305
    loss_decreased:
      description:
        - Whether RV(summary.final_loss) is lower than RV(summary.first_loss), with more than one distinct step.
        - V(false) when either is V(null).
      type: bool
      sample: true
    throughput_samples_per_s:
      description: Sum over the ranks of each rank's mean C(samples_per_s) over its last (up to) 5 records.
      type: float
      sample: 5120.0
    mean_step_time_s:
      description: Mean over the ranks of each rank's mean C(step_time_s) over its last (up to) 5 records.
      type: float
      sample: 0.1
    node_step_times:
      description:
        - Per node (the experiment's C(outputs/<node>/)), over its ranks' last (up to) 5 records each, pooled -
          C(ranks), C(records), C(step_time_s) and C(compute_time_s), each V(null) when no record has it, else
          C(median) and C(p90) (seconds).
      type: dict
      sample: {node0: {ranks: 2, records: 10, step_time_s: {median: 0.0251, p90: 0.0262},
                       compute_time_s: {median: 0.0041, p90: 0.0044}}}
      version_added: 0.2.0
    stragglers:
      description:
        - The nodes whose median is more than O(straggler_threshold) above the median of the other nodes' medians.
        - C(basis) is the field compared - C(compute_time_s) when every node has it, else C(step_time_s) (about the
          same on every node of a synchronous job), V(null) without either. C(threshold), C(compared) (the nodes
          with a figure), and C(nodes), one C(node), C(median_s), C(others_median_s), C(above) (a fraction) each.
      type: dict
      sample: {basis: compute_time_s, threshold: 0.15, compared: [node0, node1],
               nodes: [{node: node1, median_s: 0.031, others_median_s: 0.0129, above: 1.403}]}
      version_added: 0.2.0
    rank_step_times:
      description:
        - Per rank (its number as a string), over its own last (up to) 5 records - C(rank), C(node) (whose outputs
          gave its records), C(records), and the medians C(step_time_s) and C(compute_time_s) (seconds; V(null) when
          no record has it). Ranks without either are left out.
      type: dict
      sample: {'13': {rank: 13, node: node1, records: 5, step_time_s: 0.5, compute_time_s: 0.3}}
      version_added: 0.2.0
    rank_stragglers:
      description:
        - The ranks whose median is more than O(straggler_threshold) above the median of the other ranks' medians
          (C(ranks)), and the slowest rank (C(slowest), V(null) with fewer than two ranks), each with C(rank),
          C(node), C(median_s), C(others_median_s), C(above) (a fraction) and C(basis).
        - C(basis) is C(compute_time_s) when every rank has it, else C(step_time_s); C(compared) the number of ranks
          with a figure.
      type: dict
      sample: {basis: compute_time_s, threshold: 0.15, compared: 16,
               slowest: {rank: 13, node: node1, median_s: 0.3, others_median_s: 0.101, above: 1.97,
                         basis: compute_time_s},
               ranks: [{rank: 13, node: node1, median_s: 0.3, others_median_s: 0.101, above: 1.97,
                        basis: compute_time_s}]}
      version_added: 0.2.0
    world_change:
      description:
        - What changed when the run resumed on another world size, from the metrics of the shipped workload
          (C(previous_world_size), C(world_size), C(accumulation_steps), C(global_batch), C(global_batch_kept));
          V(null) when nothing changed or the script writes no such fields.
      type: dict
      sample: {previous_world_size: 4, world_size: 2, accumulation_steps: 2, global_batch: 256, global_batch_kept: true}
      version_added: 0.2.0
    tflops_total:
      description:
        - Sum over the ranks of each rank's most recent non-null C(tflops), to 6 significant digits; V(null) when no
          rank reports any.
        - The table shows it with 3 significant digits in TFLOP/s, GFLOP/s or MFLOP/s, the largest unit in which it
          is at least 1 (a CPU run's C(0.00042) reads C(420 MFLOP/s total)).
      type: float
      sample: 1520.0
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainops.multinode.plugins.module_utils._experiment import ExperimentError
from ansible_collections.trainops.multinode.plugins.module_utils._experiment_task import (
    ARGUMENT_SPEC,
    REQUIRED_IF,
    run,
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, required_if=REQUIRED_IF, supports_check_mode=True)
    try:
        result = run(module.params, check_mode=module.check_mode)
    except ExperimentError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
