# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Experiment directories and their metrics summaries (logic behind ``trainops.multinode.experiment``)."""

from __future__ import annotations

import errno
import json
import os
import time

from ansible_collections.trainops.multinode.plugins.module_utils._files import FOLLOW_UMASK, write_text_atomic
from ansible_collections.trainops.multinode.plugins.module_utils._outcomes import INTERRUPTED, RUNNING
from ansible_collections.trainops.multinode.plugins.module_utils import (
    _heartbeat, _launchers, _node_failures, _node_files, _rank_logs, _retries, _retry_policy, _stacks, _stragglers)
from ansible_collections.trainops.multinode.plugins.module_utils._experiment_metrics import (
    LOG_DIR, MANIFEST_FILE, MAX_WORLD_SIZE, METRICS_GLOB, OUTPUT_DIR, SUMMARY_FIELDS, SUMMARY_FILE, ExperimentError,
    job_world_size, node_output_dirs, rank_zero_output, read_metrics, read_rank_zero_json)
from ansible_collections.trainops.multinode.plugins.module_utils._experiment_summary import (
    STEADY_STATE_WINDOW, format_flops, summarize, summary_table, torchrun_rows)
from ansible_collections.trainops.multinode.plugins.module_utils._judgment import (
    checkpoint_line, judge_results, launcher_stops, read_checkpoint, read_checkpoints, with_launcher_stops,
    with_time_limit_stops)

__all__ = ['ExperimentError', 'LOG_DIR', 'MANIFEST_FILE', 'MAX_WORLD_SIZE', 'METRICS_GLOB', 'OUTPUT_DIR',
           'STEADY_STATE_WINDOW', 'SUMMARY_FIELDS', 'SUMMARY_FILE', 'create_experiment_dir', 'format_flops',
           'job_world_size', 'judge_results', 'launcher_stops', 'link_next', 'mark_interrupted', 'rank_zero_output',
           'read_checkpoint', 'read_metrics', 'read_rank_zero_json', 'report_experiment', 'summarize',
           'summary_table', 'torchrun_rows']
"""The experiment's directory and manifest: created here (state=created) and reported here (state=reported). What
the ranks measured is read by _experiment_metrics, summed up by _experiment_summary and how the job ended judged by
_judgment; their public names are importable from here too."""

# Upper bound on ``name_2``, ``name_3``, ... attempts before giving up.
MAX_NAME_ATTEMPTS = 10000


# ---------------------------------------------------------------------------
# state=created
# ---------------------------------------------------------------------------

def _check_leaf_name(name):
    if not name or name in ('.', '..') or os.sep in name or (os.altsep and os.altsep in name) or '\0' in name:
        raise ExperimentError('name must be a single, non-empty path component, got {0!r}'.format(name))


def _candidates(name):
    yield name
    for index in range(2, MAX_NAME_ATTEMPTS + 1):
        yield '{0}_{1}'.format(name, index)


def create_experiment_dir(root, name, check_mode=False):
    """Create ``root/name`` exclusively (or ``name_2``, ``name_3``, ... when taken).

    An existing directory is never reused: the leaf is created with ``os.mkdir``, which fails
    atomically when anything already exists at that path, and the next suffix is tried.
    ``logs/`` and ``outputs/`` are created inside it.

    In check mode nothing is created; the first name that does not exist yet is returned.

    Returns a dict with ``path``, ``name``, ``logs_dir`` and ``outputs_dir``.
    """
    _check_leaf_name(name)
    root = os.path.abspath(root)
    if os.path.exists(root) and not os.path.isdir(root):
        raise ExperimentError('root {0} exists and is not a directory'.format(root))

    chosen = None
    if check_mode:
        for candidate in _candidates(name):
            if not os.path.lexists(os.path.join(root, candidate)):
                chosen = candidate
                break
    else:
        try:
            os.makedirs(root, exist_ok=True)
        except OSError as exc:
            raise ExperimentError('cannot create root {0}: {1}'.format(root, exc))
        for candidate in _candidates(name):
            try:
                os.mkdir(os.path.join(root, candidate))
            except OSError as exc:
                if exc.errno == errno.EEXIST:
                    continue
                raise ExperimentError('cannot create {0}: {1}'.format(os.path.join(root, candidate), exc))
            chosen = candidate
            break

    if chosen is None:
        raise ExperimentError('no free experiment name under {0} for {1} after {2} attempts'.format(root, name, MAX_NAME_ATTEMPTS))

    path = os.path.join(root, chosen)
    result = dict(
        path=path,
        name=chosen,
        logs_dir=os.path.join(path, LOG_DIR),
        outputs_dir=os.path.join(path, OUTPUT_DIR),
    )
    if not check_mode:
        for sub in (result['logs_dir'], result['outputs_dir']):
            try:
                os.mkdir(sub)
            except OSError as exc:
                raise ExperimentError('cannot create {0}: {1}'.format(sub, exc))
    return result


# ---------------------------------------------------------------------------
# state=reported: writing
# ---------------------------------------------------------------------------

def _read_text(filename):
    try:
        with open(filename, 'rb') as fd:
            return fd.read().decode('utf-8')
    except (IOError, OSError, UnicodeDecodeError):
        return None


def _write_atomic(filename, text):
    """The experiment's files are the user's to share: their mode follows the umask, as ``open()``'s would."""
    write_text_atomic(filename, text, mode=FOLLOW_UMASK)


def render_manifest(manifest, summary):
    """Return the manifest file text: ``manifest`` plus ``summary``, sorted keys, indent 2."""
    content = dict(manifest or {})
    content['summary'] = summary
    return json.dumps(content, sort_keys=True, indent=2, default=str) + '\n'


def _manifest_at(path):
    """The manifest of the experiment at ``path`` as a dict, or None (missing, unreadable, not a JSON object)."""
    text = _read_text(os.path.join(path, MANIFEST_FILE))
    try:
        manifest = json.loads(text) if text else None
    except ValueError:
        return None
    return manifest if isinstance(manifest, dict) else None


def _rewrite(path, manifest, key, line, first=False):
    """Write the experiment's changed ``manifest``, and ``line`` as summary.txt's ``key`` row (first or last)."""
    _write_atomic(os.path.join(path, MANIFEST_FILE), json.dumps(manifest, sort_keys=True, indent=2, default=str) + '\n')
    summary_path = os.path.join(path, SUMMARY_FILE)
    rows = [row for row in (_read_text(summary_path) or '').splitlines() if not row.startswith(key + ' ')]
    row = '{0:<10} : {1}'.format(key, line)
    _write_atomic(summary_path, '\n'.join([row] + rows if first else rows + [row]) + '\n')


def link_next(path, next_run_id, check_mode=False):
    """Record in the experiment at ``path`` (an attempt of a launch with retries) the run id of the attempt after it:
    the manifest's ``next`` and a ``next`` line in ``summary.txt``. Returns True when it changed."""
    manifest = _manifest_at(path)
    if manifest is None:
        raise ExperimentError('{0} holds no manifest to link the next attempt {1} into'.format(
            os.path.join(path, MANIFEST_FILE), next_run_id))
    if manifest.get('next') == next_run_id:
        return False
    if not check_mode:
        manifest['next'] = next_run_id
        _rewrite(path, manifest, 'next', next_run_id)
    return True


def mark_interrupted(path, when, pid):
    """Record in the experiment at ``path`` that the controller went away while the job was waited for.

    Only a manifest whose outcome is still ``running`` is changed (``interrupted``, ``interrupted_at``); the job may
    still run on the nodes, and ``playbooks/status.yml`` records its real end later. Returns True when it changed.
    """
    manifest = _manifest_at(path)
    if manifest is None or manifest.get('outcome') != RUNNING:
        return False
    stamp = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(when))
    line = ('interrupted: the controller (pid %d) went away at %s while waiting; the job may still run. '
            'playbooks/status.yml collects it and records its real end' % (pid, stamp))
    manifest.update(outcome=INTERRUPTED, outcome_detail=line, interrupted_at=stamp)
    _rewrite(path, manifest, 'outcome', line, first=True)
    return True


MAX_REFUSED_SHOWN = 20
"""Lines of what was not read shown in summary.txt; the manifest keeps up to MAX_REFUSED_KEPT."""
MAX_REFUSED_KEPT = 1000


def read_heartbeats(path, refused):
    """``{node: trainops_heartbeat.json}`` of the experiment's node output directories, within the bounds of
    module_utils/_node_files.py (what was refused is added to ``refused``)."""
    found = {}
    for node, node_dir in node_output_dirs(path):
        record, why = _node_files.read_json_object(os.path.join(node_dir, _heartbeat.HEARTBEAT_FILE), node,
                                                   _heartbeat.HEARTBEAT_FILE)
        refused += why
        if record is not None:
            found[node] = record
    return found


def report_experiment(path, manifest=None, check_mode=False, results=None, verdicts=None, missing_nodes=None,
                      refused=None, launcher_end=None, straggler_threshold=None, attempt=None):
    """Summarize the metrics of the experiment at ``path`` and write ``manifest.json`` / ``summary.txt``.

    Returns a dict with ``path`` (absolute), ``summary``, ``table``, ``manifest_path``, ``summary_path``, ``changed``
    (whether either file's content differs from what is on disk) and ``collect_refused`` (``refused``). Nothing is written in check mode.
    With ``results`` (node -> final job state), the outcome (see judge_results) is returned, added to the
    manifest together with ``results``, and shown in the table. ``refused`` (lines naming a node and a path the
    collect refused to write, module_utils._collect) lands in the manifest's ``collect_refused`` and the table.
    ``launcher_end`` (what the controller asked the job's launcher after the end: for launcher=srun the step's and the
    job's state, as the srun_step module's query returns them, with ``job_id`` and ``step_id``) says whether the
    launcher ended the job at a time limit (_launchers.Launcher.time_limit; kept in the manifest as the launcher's
    end_record says, e.g. ``slurm_end``). The job's last checkpoint (rank 0's ``checkpoint.json``) is the manifest's
    ``checkpoint`` and a line of the table. ``straggler_threshold`` (None: the manifest's ``parameters``' one, else
    _stragglers.DEFAULT_THRESHOLD) is the summary's (:func:`summarize`). The collected node logs are split by rank
    (module_utils/_rank_logs.py): the manifest's ``rank_logs`` and the table's rank map.
    ``attempt`` (with ``results``; a launch with retries, module_utils/_retries.py: ``number``, ``first``, ``previous``,
    ``retries``, ``rows``, ``resumed_from``) adds the attempt's links, every attempt's row and whether this one is
    retried (``retry``) to the manifest, the table (when retries are on) and the result.
    """
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise ExperimentError('experiment directory {0} does not exist'.format(path))

    if straggler_threshold is None:
        parameters = (manifest or {}).get('parameters')
        straggler_threshold = parameters.get('straggler_threshold') if isinstance(parameters, dict) else None
    # what the job wrote is read within bounds (module_utils/_node_files.py), checked against the job's own world size
    metrics = read_metrics(path, job_world_size(manifest))
    read_refused = list(metrics['refused'])
    summary = summarize(metrics, _stragglers.threshold(straggler_threshold))
    table = summary_table(summary)
    if not summary['metrics_found']:
        table = torchrun_rows(table, manifest, results)
    checkpoint = read_checkpoint(path)
    checkpoints = read_checkpoints(path, read_refused)
    if checkpoints:
        manifest = dict(manifest or {}, checkpoints=checkpoints)
    if checkpoint is not None:
        manifest = dict(manifest or {}, checkpoint=checkpoint)
        table.append('{0:<10} : {1}'.format('checkpoint', checkpoint_line(checkpoint)))
    # where every rank was when a stalled job was stopped (the nodes' py-spy dumps, module_utils/_stacks.py): a rank
    # outside torch while its peers wait in it is the stall's culprit (judge_results' hung)
    stacks = _stacks.judge(_stacks.read_experiment(path, dict(node_output_dirs(path)), read_refused,
                                                   job_world_size(manifest)))
    # each rank's heartbeat (the supervisor's samples, module_utils/_heartbeat.py): a rank stopped, or idle while its
    # peers worked, is the cause of the failure or stall it left behind (judge_results' frozen)
    heartbeat = _heartbeat.judge(read_heartbeats(path, read_refused), job_world_size(manifest))
    verdict = None
    if results is not None:
        time_limit = None
        launcher = _launchers.of_results(results)
        if launcher_end:
            time_limit = launcher.time_limit(launcher_end, results)
            manifest = dict(manifest or {}, **launcher.end_record(launcher_end, time_limit))
        # the records say which nodes the launcher ended because of another, or at a time limit: the manifest keeps that
        results = (with_time_limit_stops(results, time_limit, launcher.stop_by) if time_limit
                   else with_launcher_stops(results))
        # the end of the failed nodes' logs: who failed on its own, a job that finished and died on its way out, the
        # retry rules
        failed = sorted(node for node, job in results.items() if (job or {}).get('exit_code') != 0)
        tails = _retry_policy.read_tails(path, manifest, failed)
        verdict = judge_results(results, verdicts, missing_nodes, time_limit=time_limit, checkpoint=checkpoint,
                                hung=stacks['culprits'], tails=tails, frozen=heartbeat['culprits'])
        unclean = _retry_policy.unclean_exit(failed, results, tails) if verdict['outcome'] == 'failed' else None
        if unclean:
            verdict = dict(verdict, unclean_exit=unclean, outcome_detail=unclean['detail'])
        manifest = dict(manifest or {})
        manifest.update(verdict)
        manifest['results'] = results
        if verdicts:
            manifest['wait'] = verdicts
        table = ['{0:<10} : {1}'.format('outcome', verdict['outcome_detail'])] + table
        if verdict.get('blame') and verdict['blame']['by'] not in ('stop', 'only'):
            table.insert(1, '{0:<10} : {1}'.format('blamed', verdict['blame']['detail']))
        if attempt:
            attempt = dict(attempt, run_id=manifest.get('run_id'), experiment_dir=path)
            if int(attempt.get('exclude_after') or 0) > 0:
                # trainops_exclude_after: this attempt's failed nodes, added to what the experiments directory remembers
                counted = _node_failures.strikes(verdict, _retries.failure(verdict, results, missing_nodes), tails)
                attempt['remembered'] = _node_failures.record(os.path.dirname(path), attempt.get('inventory'), counted,
                                                              manifest.get('run_id'), check_mode)
            recorded = _retries.record(attempt, verdict, results, summary, missing_nodes, manifest.get('launch_errors'),
                                       tails)
            manifest.update(recorded)
            verdict = dict(verdict, attempts=recorded['attempts'], retry=recorded['retry'])
            if int(attempt.get('retries') or 0) > 0 or recorded['attempt'] > 1:
                table += _retries.lines(recorded['attempts'], attempt.get('retries') or 0)
    elif (manifest or {}).get('outcome_detail'):
        table = ['{0:<10} : {1}'.format('outcome', manifest['outcome_detail'])] + table
    # the collected node logs split by rank (logs/rank_<r>.txt) and the rank map (module_utils/_rank_logs.py)
    rank_logs = _rank_logs.split_node_logs(path, manifest, job_world_size(manifest), check_mode)
    read_refused += rank_logs['refused']
    if rank_logs['rows']:
        manifest = dict(manifest or {}, rank_logs=rank_logs['rows'])
        table += _rank_logs.map_lines(rank_logs['rows'])
    if heartbeat['culprits']:
        manifest = dict(manifest or {}, heartbeat=heartbeat)
        table += _heartbeat.lines(heartbeat, _stacks.where(stacks))
    if any(stacks[key] for key in ('outside', 'waiting', 'unknown')):
        manifest = dict(manifest or {}, stacks=_stacks.record(stacks))
        table += _stacks.lines(stacks, job_world_size(manifest))
    if refused:
        manifest = dict(manifest or {}, collect_refused=list(refused))
        table.append('{0:<10} : {1} file(s) not collected (manifest.json collect_refused)'.format('refused', len(refused)))
    if read_refused:
        manifest = dict(manifest or {}, read_refused=read_refused[:MAX_REFUSED_KEPT])
        table += ['{0:<10} : {1}'.format('not read', line) for line in read_refused[:MAX_REFUSED_SHOWN]]
        if len(read_refused) > MAX_REFUSED_SHOWN:
            table.append('{0:<10} : {1} more (manifest.json read_refused)'.format(
                'not read', len(read_refused) - MAX_REFUSED_SHOWN))

    manifest_path = os.path.join(path, MANIFEST_FILE)
    summary_path = os.path.join(path, SUMMARY_FILE)
    manifest_text = render_manifest(manifest, summary)
    summary_text = '\n'.join(table) + '\n'

    changed = False
    for filename, text, compare_json in ((manifest_path, manifest_text, True), (summary_path, summary_text, False)):
        current = _read_text(filename)
        same = current == text
        if not same and compare_json and current is not None:
            try:
                same = json.loads(current) == json.loads(text)
            except ValueError:
                same = False
        if same:
            continue
        changed = True
        if not check_mode:
            try:
                _write_atomic(filename, text)
            except (IOError, OSError) as exc:
                raise ExperimentError('cannot write {0}: {1}'.format(filename, exc))

    result = dict(
        path=path,
        summary=summary,
        table=table,
        manifest_path=manifest_path,
        summary_path=summary_path,
        changed=changed,
        collect_refused=list(refused or []),
        read_refused=read_refused,
    )
    if verdict is not None:
        result.update(verdict)
    return result
