"""Processes: a snapshot of /proc (network namespace and command line of each), liveness, stopping,
pid files, starting and waiting for daemons, what mounts a process sees."""

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

from .core import LabError, debug


def scan_processes():
    """{pid: (net ns inode or None, cmdline)} of every process (a snapshot)."""
    procs = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            link = os.readlink("/proc/%s/ns/net" % entry)
            inode = int(link[link.index("[") + 1:-1])
        except (OSError, ValueError):
            inode = None
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        procs[int(entry)] = (inode, cmdline)
    return procs


def alive(pid):
    """Running (not a zombie, not gone)."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            stat = handle.read()
    except (OSError, TypeError):
        return False
    return stat[stat.rindex(")") + 2:][:1] not in ("Z", "X")


def terminate(pids, grace=5.0):
    pids = {p for p in pids if p != os.getpid() and alive(p)}
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            pids = {p for p in pids if alive(p)}
            if not pids:
                return
            time.sleep(0.05)
    if pids:
        raise LabError("processes would not die: %s" % sorted(pids))


def read_pid(path):
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def daemon_pid(pidfile, marker, procs, netns=None):
    """The PID in ``pidfile`` when that process runs (not a zombie) with ``marker`` in its command line
    and, when given, in network namespace ``netns`` (its inode), else None."""
    pid = read_pid(pidfile)
    if pid is None or pid not in procs or not alive(pid):
        return None
    ns_inode, cmdline = procs[pid]
    if marker not in cmdline or (netns is not None and ns_inode != netns):
        return None
    return pid


def spawn(argv, log, env=None):
    """Start a daemon detached (own session, stdin closed, output appended to ``log``)."""
    debug(" ".join(shlex.quote(a) for a in argv))
    with open(log, "ab") as handle:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=handle, stderr=handle, env=env,  # pylint: disable=consider-using-with
                                start_new_session=True, close_fds=True, cwd="/")


def wait_for(what, proc, ready, log, deadline):
    """Until ``ready()``; a LabError naming ``log`` when ``proc`` exits first or time runs out."""
    while time.monotonic() < deadline:
        if ready():
            return
        if proc is not None and proc.poll() is not None:
            raise LabError("%s exited with %s (log %s):\n%s" % (
                what, proc.returncode, log, Path(log).read_text(errors="replace")[-2000:].strip()))
        time.sleep(0.1)
    raise LabError("%s did not come up in time (log %s)" % (what, log))


def same_inode(path_a, path_b):
    try:
        a, b = os.stat(path_a), os.stat(path_b)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def sees_planned_mounts(pid, node):
    """The process's mount namespace shows the node's homes, private directories and /etc/hosts from
    the machine directories the node's shape says (a shared or private /home, root's home)."""
    return all(same_inode("/proc/%d/root%s" % (pid, inner), outer) for inner, outer in node.views())


def mnt_ns(pid):
    try:
        return os.readlink("/proc/%d/ns/mnt" % pid)
    except (OSError, TypeError):
        return None
