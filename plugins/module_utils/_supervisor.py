# -*- coding: utf-8 -*-

# Copyright (c) 2025, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Supervisor for one torchrun, written by the trainops.multinode.torchrun module.
# Usage: python supervisor.py /path/to/runs/<run_id>/job.json
#
# - detaches (fork, the first process exits at once),
# - becomes a child subreaper so orphaned workers are re-parented to it,
# - starts torchrun in a new session with stdout+stderr appended to node.log,
# - records pids.json (its own and torchrun's pid, pgid, /proc start time) atomically,
# - waits for torchrun, then terminates and reaps whatever is left of the process tree,
# - writes exit.json {exit_code, signal, ended_at} and exits.
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
import traceback

PR_SET_CHILD_SUBREAPER = 36


def now():
    return time.time()


def iso(ts):
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(ts))


def log(msg):
    sys.stdout.write('%s supervisor[%d]: %s\n' % (iso(now()), os.getpid(), msg))
    sys.stdout.flush()


def write_json(path, data):
    tmp = '%s.tmp.%d' % (path, os.getpid())
    with open(tmp, 'w') as f:
        json.dump(data, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_stat(pid):
    try:
        with open('/proc/%d/stat' % pid, 'rb') as f:
            data = f.read().decode('utf-8', 'replace')
    except (IOError, OSError):
        return None
    fields = data[data.rfind(')') + 2:].split()
    try:
        return {'pid': pid, 'state': fields[0], 'ppid': int(fields[1]), 'pgid': int(fields[2]), 'start_time': int(fields[19])}
    except (IndexError, ValueError):
        return None


def descendants(root):
    children = {}
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        st = read_stat(int(name))
        if st is None or st['state'] in ('Z', 'X', 'x'):
            continue
        children.setdefault(st['ppid'], []).append(st)
    result = {}
    stack = [root]
    while stack:
        for st in children.get(stack.pop(), ()):
            if st['pid'] not in result and st['pid'] != root:
                result[st['pid']] = st
                stack.append(st['pid'])
    return result


def reap():
    """Reap every exited child without blocking."""
    reaped = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        reaped[pid] = status
    return reaped


def signal_tree(tree, sig):
    protected = set([0, 1, os.getpgrp()])
    groups = set()
    for st in tree.values():
        if st['pgid'] in protected:
            try:
                os.kill(st['pid'], sig)
            except OSError:
                pass
        else:
            groups.add(st['pgid'])
    for pgid in sorted(groups):
        try:
            os.killpg(pgid, sig)
        except OSError:
            pass


def cleanup(grace):
    me = os.getpid()
    tree = descendants(me)
    if tree:
        log('terminating leftover processes %s' % sorted(tree))
        signal_tree(tree, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            reap()
            tree = descendants(me)
            if not tree:
                break
            time.sleep(0.1)
        if tree:
            log('killing leftover processes %s' % sorted(tree))
            signal_tree(tree, signal.SIGKILL)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                reap()
                if not descendants(me):
                    break
                time.sleep(0.1)
    reap()


def decode_status(status):
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = 'SIG%d' % sig
        return 128 + sig, name
    return os.WEXITSTATUS(status), None


def main():
    job_path = os.path.abspath(sys.argv[1])
    run_dir = os.path.dirname(job_path)
    if os.fork() > 0:
        os._exit(0)
    with open(job_path) as f:
        job = json.load(f)
    pids_path = os.path.join(run_dir, 'pids.json')
    exit_path = os.path.join(run_dir, 'exit.json')
    log_path = os.path.join(run_dir, 'node.log')
    grace = float(job.get('cleanup_grace', 5))
    # the run's records and logs are the user's alone (0600); the ranks get the umask they came with
    job_umask = os.umask(0o077)

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            log('prctl(PR_SET_CHILD_SUBREAPER) failed: errno %d' % ctypes.get_errno())
    except Exception as exc:
        log('cannot become a child subreaper: %s' % exc)

    state = {'proc': None, 'signals': []}

    def on_signal(signum, frame):
        state['signals'].append(signum)
        proc = state['proc']
        if proc is not None:
            log('got signal %d, sending SIGTERM to torchrun process group %d' % (signum, proc.pid))
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except OSError:
                pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)

    env = dict(os.environ)
    env.update(job.get('env') or {})
    cwd = job.get('chdir') or run_dir
    stop_path = os.path.join(run_dir, 'stop.json')
    if os.path.exists(stop_path):
        # the start was given up (the module's start wait ran out, the launch was undone): never start late
        msg = 'not starting: the run was stopped before torchrun started (stop.json)'
        log(msg)
        write_json(exit_path, {'exit_code': 143, 'signal': None, 'ended_at': iso(now()), 'error': msg})
        return 0
    log('starting %r in %s' % (job['argv'], cwd))
    try:
        with open(os.devnull, 'rb') as devnull:
            with open(log_path, 'ab') as out:
                os.umask(job_umask)
                try:
                    proc = subprocess.Popen(job['argv'], cwd=cwd, env=env, stdin=devnull, stdout=out,
                                            stderr=subprocess.STDOUT, close_fds=True, start_new_session=True)
                finally:
                    os.umask(0o077)
    except Exception as exc:
        msg = 'cannot start %r: %s' % (job['argv'], exc)
        log(msg)
        write_json(exit_path, {'exit_code': 127, 'signal': None, 'ended_at': iso(now()), 'error': msg})
        return 127
    state['proc'] = proc
    started = now()
    mine = read_stat(os.getpid()) or {}
    child = read_stat(proc.pid) or {}
    write_json(pids_path, {
        'supervisor_pid': os.getpid(),
        'supervisor_start_time': mine.get('start_time'),
        'pid': proc.pid,
        'pgid': child.get('pgid', proc.pid),
        'start_time': child.get('start_time'),
        'started_at': iso(started),
        'started_at_epoch': started,
    })
    log('torchrun pid %d' % proc.pid)
    if state['signals'] or os.path.exists(stop_path):
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except OSError:
            pass

    status = None
    while status is None:
        try:
            pid, wstatus = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if pid == proc.pid:
            status = wstatus
    # torchrun is reaped: its pid may be reused from now on, never signal it again
    state['proc'] = None
    if status is None:
        exit_code, signame = 255, None
    else:
        exit_code, signame = decode_status(status)
    proc.returncode = exit_code
    log('torchrun ended: exit_code=%s signal=%s' % (exit_code, signame))
    cleanup(grace)
    ended = now()
    write_json(exit_path, {'exit_code': exit_code, 'signal': signame, 'ended_at': iso(ended), 'ended_at_epoch': ended})
    log('exit.json written')
    return 0


if __name__ == '__main__':
    try:
        code = main()
    except Exception:
        log(traceback.format_exc())
        code = 1
    sys.stdout.flush()
    os._exit(code)
