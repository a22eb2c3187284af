#!/usr/bin/env python
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Per-rank profiler wrapper: torchrun runs this file as every rank's entrypoint (-e profile=nsys|rocprof|torch).

The job role installs it on each node (``<state dir>/bin/profile_rank.py``) and starts torchrun with::

    profile_rank.py --profiler nsys --ranks 0,2 --out-dir <run dir>/profiles --host gpu1 [--stats]
                    [--profiler-arg=ARG ...] -- train.py --config ...

Each rank reads its global rank from ``RANK`` (set by torchrun). A rank that is not selected replaces itself
with ``python train.py ...``; a selected rank replaces itself with the profiler wrapping that same command,
its output named after the node and the global rank (``<out-dir>/<node>_rank<RANK>``):

- nsys: ``nsys profile -o <out>/<node>_rank<R> --force-overwrite true [--stats=true] ARGS python train.py ...``
- rocprof: ``rocprofv3 ARGS(default --runtime-trace) [--stats] -d <out> -o <node>_rank<R> -- python train.py ...``
- torch: ``python train.py ...`` with ``TRAINOPS_PROFILE_TRACE=<out>/<node>_rank<R>.json``: the workload's
  torch.profiler writes a Chrome trace there (files/workspace/train.py).

Nothing but the standard library: it runs before the workload, with the interpreter torchrun uses.
"""

import argparse
import os
import sys

PROFILERS = ('nsys', 'rocprof', 'torch')
EXECUTABLES = {'nsys': 'nsys', 'rocprof': 'rocprofv3'}
TRACE_ENV = 'TRAINOPS_PROFILE_TRACE'


def parse_args(argv):
    parser = argparse.ArgumentParser(prog='profile_rank.py', description=__doc__.splitlines()[0])
    parser.add_argument('--profiler', choices=PROFILERS, required=True)
    parser.add_argument('--ranks', required=True, help='comma-separated global ranks, "first" (local rank 0 of '
                        'every node) or "all"')
    parser.add_argument('--out-dir', required=True)
    parser.add_argument('--host', required=True, help='the node\'s inventory name (not --node: torchrun\'s own parser '
                        'would take it for an abbreviation of --node-rank)')
    parser.add_argument('--stats', action='store_true')
    parser.add_argument('--profiler-arg', action='append', default=[], dest='profiler_args')
    parser.add_argument('command', nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command[:1] == ['--']:
        args.command = args.command[1:]
    if not args.command:
        parser.error('the workload to run is missing after --')
    return args


def selected(ranks, environ):
    """Whether this rank (RANK, LOCAL_RANK from torchrun) is profiled."""
    rank = int(environ.get('RANK', '0'))
    if ranks == 'all':
        return True
    if ranks == 'first':
        return int(environ.get('LOCAL_RANK', '0')) == 0
    return rank in [int(r) for r in ranks.split(',') if r.strip()]


def output_name(node, environ):
    return '%s_rank%s' % (node, environ.get('RANK', '0'))


def profiled_argv(args, command, environ):
    """The argv that runs ``command`` under the profiler, and the environment additions."""
    out = os.path.join(args.out_dir, output_name(args.host, environ))
    if args.profiler == 'nsys':
        argv = ([EXECUTABLES['nsys'], 'profile', '-o', out, '--force-overwrite', 'true']
                + (['--stats=true'] if args.stats else []) + args.profiler_args + command)
        return argv, {}
    if args.profiler == 'rocprof':
        argv = ([EXECUTABLES['rocprof']] + (args.profiler_args or ['--runtime-trace']) + (['--stats'] if args.stats else [])
                + ['-d', args.out_dir, '-o', output_name(args.host, environ), '--'] + command)
        return argv, {}
    return command, {TRACE_ENV: out + '.json'}


def main(argv=None, environ=None, execvpe=os.execvpe):
    environ = dict(os.environ if environ is None else environ)
    args = parse_args(sys.argv[1:] if argv is None else argv)
    command = [sys.executable, '-u'] + args.command  # -u as torchrun runs its entrypoint
    if not selected(args.ranks, environ):
        return execvpe(command[0], command, environ)
    os.makedirs(args.out_dir, exist_ok=True)
    argv, extra = profiled_argv(args, command, environ)
    environ.update(extra)
    sys.stdout.write('[trainops] profile rank=%s node=%s: %s\n' % (environ.get('RANK', '0'), args.host, ' '.join(argv)))
    sys.stdout.flush()
    return execvpe(argv[0], argv, environ)


if __name__ == '__main__':
    main()
