"""The processes of the lab's nodes, seen from the controller (root): a node's processes are those in its network
namespace (``ip netns pids``), so this sees ranks started over SSH, by Slurm or inside a node's containers alike."""
import os
import signal
import subprocess
import time

import pytest

# what a job leaves on a node: the supervisor, torchrun's agent, the ranks
JOB_MARKERS = ('torch.distributed.run', 'train.py', 'supervisor.py')


def node_processes(lab, node):  # pylint: disable=unused-argument
    """(pid, cmdline) of the processes running inside a node's network namespace (the job's), its sshd left out."""
    proc = subprocess.run(['ip', 'netns', 'pids', node['namespace']], capture_output=True, text=True, check=False)
    pids = [int(p) for p in proc.stdout.split()]
    sshd = node.get('sshd_pid')
    result = []
    for pid in pids:
        try:
            with open('/proc/%d/cmdline' % pid, 'rb') as handle:
                cmdline = handle.read().replace(b'\0', b' ').decode(errors='replace')
        except OSError:
            continue
        if pid == sshd or cmdline.startswith('sshd') or '/sshd' in cmdline.split(' ')[0]:
            continue
        result.append((pid, cmdline))
    return result


def job_processes(lab):
    """{node name: [(pid, cmdline), ...]} of every supervisor, torchrun and training process on the lab's nodes."""
    found = {}
    for node in lab.nodes:
        procs = [(pid, cmd) for pid, cmd in node_processes(lab, node) if any(m in cmd for m in JOB_MARKERS)]
        if procs:
            found[node['name']] = procs
    return found


def end_leftover_jobs(lab, grace=20.0):
    """A test's jobs must be over when it ends: a job still running would make every later launch on these nodes
    refuse to start ("job ... is still running here"), so one test's fault would fail all the tests after it.
    Waits up to ``grace`` seconds for the job processes to end on their own, then kills those left (SIGKILL, by
    pid). Returns what was left, {node: [(pid, cmdline), ...]}, empty when the test ended its jobs."""
    deadline = time.monotonic() + grace
    left = job_processes(lab)
    while left and time.monotonic() < deadline:
        time.sleep(1)
        left = job_processes(lab)
    for procs in left.values():
        for pid, _cmdline in procs:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass  # ended meanwhile
    return left


def no_job_left(lab, grace=20.0):
    """Fails, after killing them, when job processes are still running on the lab's nodes ``grace`` seconds after a
    test (end_leftover_jobs): reported as that test's error, so that the tests after it start on idle nodes."""
    left = end_leftover_jobs(lab, grace)
    if left:
        pytest.fail("job processes were still running %.0f s after the test, killed now: %s" % (grace, {
            node: [pid for pid, _cmdline in procs] for node, procs in left.items()}), pytrace=False)
