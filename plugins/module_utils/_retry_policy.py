# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""What a failed attempt's evidence says about retrying it (docs/failures.md "Retries"): the end of each failed
node's log (``tails``: the last lines of the collected ``logs/node_<node rank>.txt``), each node's run record and the
user's stated policy (``trainops_retry_policy``).

- :func:`stated`: the user's policy says a failure is ``fatal`` or ``retryable`` (exit codes, log patterns);
- :func:`early_failure`: a job whose every node failed before its first step is retried when the failure looks like
  infrastructure (a signal, a collective timeout, NCCL/gloo errors), not when it is a script error (the same Python
  exception line at the end of every failed node's log);
- :func:`unclean_exit`: every failed node finished its work and then died on the way out (SIGABRT, ``terminate
  called without an active exception``): the job is reported as finished with an unclean exit and not retried;
- :func:`without_progress`: the attempts in a row whose end step did not move past the attempt before.

What a node wrote is not trusted: only :data:`MAX_TAIL_LINES` lines of at most :data:`MAX_LINE_CHARS` characters are
looked at, and the user's patterns are compiled once, before any node is touched (:func:`problems`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from ansible_collections.trainops.multinode.plugins.module_utils import _rank_logs

MAX_TAIL_LINES = 200
"""The last lines of a node's log the rules read."""
MAX_TAIL_BYTES = 256 * 1024
"""What is read of the end of a node's log for them."""
MAX_LINE_CHARS = 4096
"""A longer line is cut to this before a pattern sees it."""
MAX_PATTERNS = 64
"""Log patterns one list of the policy may hold."""

_EXAMPLE = 'trainops_retry_policy: {fatal_patterns: ["CUDA out of memory"], retry_exit_codes: [-9]}'
DEFAULT_POLICY = {'retry_exit_codes': [], 'fatal_exit_codes': [], 'retry_patterns': [], 'fatal_patterns': []}
"""trainops_retry_policy's keys and their defaults."""

_RANK_PREFIX = re.compile(r'^\[rank \d{1,7}\] ')
_TORCHRUN_EXIT = re.compile(r'^\s*exitcode\s*:\s*(-?\d{1,4}) \(pid: \d+\)')
"""torchrun's failure report (torch/distributed/elastic/multiprocessing/errors: ``exitcode  : -6 (pid: 123)``)."""
_EXCEPTION = re.compile(r'^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit))(?::\s.*)?$')
"""A Python exception line (``ValueError: bad value``, ``torch.distributed.DistBackendError: ...``)."""

TORCHRUN_EXCEPTIONS = ('ChildFailedError', 'SignalException')
"""torchrun's own exceptions at the end of every failed node's log (torch/distributed/elastic): they say that a rank
failed, not how."""

INFRASTRUCTURE = (
    ('a collective timeout', re.compile(r'Watchdog caught collective operation timeout|Timed out waiting \d+ms for '
                                        r'(?:recv|send)|collective operation timeout')),
    ('a NCCL error', re.compile(r'NCCL error|ncclRemoteError|ncclSystemError|ncclInternalError|DistBackendError')),
    ('a gloo error', re.compile(r'gloo/transport/[\w/]+\.cc:\d+\]|Connection closed by peer|Connection reset by peer')),
    ('a lost rendezvous', re.compile(r'DistNetworkError|DistStoreError|RendezvousConnectionError|RendezvousTimeoutError')),
    ('a rank killed by a signal', re.compile(r'Signal \d+ \((?:SIGKILL|SIGBUS|SIGSEGV|SIGTERM|SIGHUP)\) received by PID')),
    ('a GPU fault', re.compile(r'CUDA error: (?:an illegal memory access|unspecified launch failure|uncorrectable ECC)|'
                               r'Xid \d+|HIP error: ')),
)
"""Log lines that say a failure came from outside the script (what names it, the pattern), as torch 2.13, NCCL and
gloo write them."""

ABORT = re.compile(r'terminate called without an active exception|Signal 6 \(SIGABRT\) received by PID')
"""The process dying on its way out: a thread or a process group left running at interpreter exit."""
FINISHED = re.compile(r"\[trainops\] done node=|'train_runtime': ")
"""A rank's end of training: files/workspace/train.py's done line, the Hugging Face Trainer's final metrics."""
UNCLEAN_CAUSE = ('the process group was never destroyed (call torch.distributed.destroy_process_group() at the end '
                 'of the script) or a thread was still running at exit')


def _clean(line):
    text = str(line)[:MAX_LINE_CHARS].rstrip('\r\n')
    return _RANK_PREFIX.sub('', text, count=1)


def tail_lines(tail):
    """The last :data:`MAX_TAIL_LINES` lines of a tail (a list of lines), each cut and without its rank prefix."""
    if not isinstance(tail, (list, tuple)):
        return []
    return [_clean(line) for line in tail[-MAX_TAIL_LINES:]]


def read_tails(experiment_dir, manifest, nodes):
    """The end of each of ``nodes``' collected logs (``logs/node_<node rank>.txt``, the node rank as the manifest's
    ``nodes`` list them): ``{node: [lines]}``, a node without a collected log left out."""
    order = [host for host, _ranks in _rank_logs.node_ranks(manifest)]
    tails = {}
    for node in nodes or ():
        if node not in order:
            continue
        path = os.path.join(experiment_dir, _rank_logs.LOG_DIR, _rank_logs.node_log_name(order.index(node)))
        try:
            found = _rank_logs.tail_file(path, MAX_TAIL_LINES, MAX_TAIL_BYTES)
        except _rank_logs.RankLogError:
            found = None
        if found:
            tails[node] = found['lines']
    return tails


def problems(policy):
    """One line per value of ``trainops_retry_policy`` that does not fit (checked before any node is touched)."""
    if policy in (None, ''):
        return []
    if not isinstance(policy, Mapping):
        return ['trainops_retry_policy=%r: give a mapping with %s (e.g. %s)'
                % (policy, ', '.join(sorted(DEFAULT_POLICY)), _EXAMPLE)]
    out = ['trainops_retry_policy: %s is not a key (use %s; e.g. %s)' % (key, ', '.join(sorted(DEFAULT_POLICY)), _EXAMPLE)
           for key in sorted(policy, key=str) if key not in DEFAULT_POLICY]
    for key in ('retry_exit_codes', 'fatal_exit_codes'):
        codes = policy.get(key) or []
        if not isinstance(codes, list) or any(isinstance(c, bool) or not isinstance(c, int) or not -255 <= c <= 255
                                              for c in codes):
            out.append('trainops_retry_policy.%s=%r: give a list of exit codes (e.g. [-9, 3]: whole numbers from -255 '
                       'to 255, a negative one the signal that ended a rank, as torchrun reports it)' % (key, codes))
    for key in ('retry_patterns', 'fatal_patterns'):
        patterns = policy.get(key) or []
        if not isinstance(patterns, list) or len(patterns) > MAX_PATTERNS or not all(isinstance(p, str) and p
                                                                                     for p in patterns):
            out.append('trainops_retry_policy.%s=%r: give a list of at most %d regular expressions (e.g. ["CUDA out '
                       'of memory"]: Python re, searched in each line)' % (key, patterns, MAX_PATTERNS))
            continue
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                out.append('trainops_retry_policy.%s: %r is not a regular expression: %s (e.g. "NCCL error")'
                           % (key, pattern, exc))
    return out


def exit_codes(job, lines):
    """The exit codes a node's failure shows: its torchrun's (the run record) and each rank's in torchrun's report."""
    codes = []
    code = (job or {}).get('exit_code')
    if isinstance(code, int) and not isinstance(code, bool):
        codes.append(code)
    for line in lines:
        match = _TORCHRUN_EXIT.match(line)
        if match and int(match.group(1)) not in codes:
            codes.append(int(match.group(1)))
    return codes


def _policy_match(policy, which, job, lines):
    """Why ``policy`` (checked by :func:`problems`) lists this node's failure as ``which`` (retry, fatal); None."""
    codes = [c for c in exit_codes(job, lines) if c in ((policy or {}).get('%s_exit_codes' % which) or [])]
    if codes:
        return 'exit code %d' % codes[0]
    for pattern in (policy or {}).get('%s_patterns' % which) or []:
        found = re.compile(pattern)
        if any(found.search(line) for line in lines):
            return 'the log matches %r' % pattern
    return None


def stated(policy, nodes, results, tails):
    """What the user's policy says of the failed ``nodes``: ``('fatal' | 'retry', 'node0: exit code 3 is fatal
    (trainops_retry_policy)')``, or None. A fatal match on any node wins over a retryable one."""
    for which, word in (('fatal', 'fatal'), ('retry', 'retryable')):
        for node in nodes:
            why = _policy_match(policy, which, (results or {}).get(node), tail_lines((tails or {}).get(node)))
            if why:
                return which, '%s: %s is %s (trainops_retry_policy)' % (node, why, word)
    return None


def last_exception(lines):
    """The last Python exception line of a rank in a log tail (``ValueError: bad value``; torchrun's own report of
    a failed rank, :data:`TORCHRUN_EXCEPTIONS`, is none), None when it has none."""
    for line in reversed(lines):
        match = _EXCEPTION.match(line.strip())
        if match and not line.startswith((' ', '\t')) and match.group(1).rsplit('.', 1)[-1] not in TORCHRUN_EXCEPTIONS:
            return line.strip()
    return None


def infrastructure(job, lines):
    """Why a node's failure looks like infrastructure (``killed by SIGKILL``, ``a NCCL error``), None when nothing
    says so."""
    if (job or {}).get('signal'):
        return 'killed by %s' % job['signal']
    for words, pattern in INFRASTRUCTURE:
        if any(pattern.search(line) for line in lines):
            return words
    return None


CASCADE = frozenset(['a collective timeout', 'a NCCL error', 'a gloo error', 'a lost rendezvous'])
"""The :data:`INFRASTRUCTURE` kinds a rank dies of when a peer went away first (its collective, connection or store
failed): a node whose ranks died only so follows the node that failed on its own."""


_INNER_RANK = re.compile(r'^\[rank\d{1,7}\]:\s*')
_OWN_SIGNAL = re.compile(r'Signal \d+ \((?!SIGABRT)SIG[A-Z]+\) received by PID|^\s*exitcode\s*:\s*-(?!6\b)\d{1,3} ')


def _cascade_words(line):
    for words, pattern in INFRASTRUCTURE:
        if words in CASCADE and pattern.search(line):
            return words
    return None


def peer_cascade(lines):
    """Why a node's log tail says its ranks died of a lost peer (``a gloo error``: a collective, connection or store
    failure, or the NCCL watchdog's abort), None when it also shows a failure of the node's own (a rank killed by a
    signal other than the watchdog's SIGABRT, an exception that is none of :data:`CASCADE`) or says nothing."""
    found = None
    for line in lines:
        if _OWN_SIGNAL.search(line):
            return None
        text = _INNER_RANK.sub('', line.strip())
        match = _EXCEPTION.match(text)
        words = _cascade_words(line)
        if match and not words and match.group(1).rsplit('.', 1)[-1] not in TORCHRUN_EXCEPTIONS:
            return None
        found = found or words
    return found


def script_error(nodes, tails):
    """The exception line at the end of every one of the failed ``nodes``' log ``tails``, when it is the same on
    each and none of the infrastructure errors (a NCCL failure cascade ends every node's log with the same
    DistBackendError: that one is no script error); else None."""
    exceptions = set(last_exception(tail_lines((tails or {}).get(node))) for node in nodes)
    seen = exceptions.pop() if len(exceptions) == 1 else None
    return seen if seen is not None and not infrastructure(None, [seen]) else None


def early_failure(nodes, results, tails):
    """Whether a job whose every node failed before its first step is retried, from the failed ``nodes``' run records
    (``results``) and log ``tails``: ``{'retry': bool, 'reason'}``. A script error - the same exception line at the
    end of every failed node's log - is not retried; else a failure that looks like infrastructure on any node is;
    else not (a retry would fail the same way)."""
    lines = dict((node, tail_lines((tails or {}).get(node))) for node in nodes)
    seen = script_error(nodes, tails)
    if seen is not None:
        return dict(retry=False, reason='a script error (the same on every failed node: %s)' % seen[:300])
    found = [(node, infrastructure((results or {}).get(node), lines[node])) for node in nodes]
    found = [(node, why) for node, why in found if why]
    if found:
        return dict(retry=True, reason='it looks like infrastructure (%s)'
                    % ', '.join('%s: %s' % (node, why) for node, why in found))
    return dict(retry=False, reason='nothing in the logs looks like infrastructure')


def unclean_exit(failed, results, tails):
    """Whether the nodes that failed (``failed``: those whose torchrun exited non-zero) finished their work and died
    on the way out: a failed node's log shows the end of training (:data:`FINISHED`; the Hugging Face Trainer prints
    it on the first node only), and every failed node's log shows the abort (:data:`ABORT`) with no Python exception
    line of a rank after the end of training (where its log shows it) or at all. ``{'nodes', 'detail'}`` or None."""
    if not failed:
        return None
    finished = False
    for node in failed:
        lines = tail_lines((tails or {}).get(node))
        ends = [i for i, line in enumerate(lines) if FINISHED.search(line)]
        after = lines[ends[-1] + 1:] if ends else lines
        finished = finished or bool(ends)
        if not any(ABORT.search(line) for line in after) or last_exception(after):
            return None
    if not finished:
        return None
    return dict(nodes=list(failed), detail='finished its work, then exited uncleanly on %s (SIGABRT: terminate '
                'called without an active exception); likely cause: %s' % (', '.join(failed), UNCLEAN_CAUSE))


def without_progress(rows):
    """How many attempts in a row, the last of ``rows`` included, ended at a step no later than the attempt before
    (an attempt without an end step, or after one without, breaks the row)."""
    count = 0
    for before, after in reversed(list(zip(rows, rows[1:]))):
        end, previous = after.get('end_step'), before.get('end_step')
        if end is None or previous is None or end > previous:
            break
        count += 1
    return count
