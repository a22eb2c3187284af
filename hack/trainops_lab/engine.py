"""up --engine docker: a Docker daemon per node, in the node's namespaces with its own /run and
/var/lib/docker (docs/contributing/containers-lab.md)."""

import os
import shutil
import socket
import time
from pathlib import Path

from .core import DOCKERD, LabError, checkpoint, ensure_dir, write_if_changed
from .network import netns_inode
from .processes import alive, mnt_ns, read_pid, same_inode, scan_processes, spawn, terminate
from .users import group_gid


def has_private_run(pid, node):
    """The process's mount namespace shows the node's own /run and the cgroup hierarchies (looked at
    through /proc/PID/root): the mounts of a node with an engine."""
    try:
        cgroups = os.listdir("/proc/%d/root/sys/fs/cgroup" % pid)
    except OSError:
        cgroups = []
    return same_inode("/proc/%d/root/run" % pid, node.run_dir) and bool(cgroups)


def cgroup_dirs(name):
    """The cgroups named ``name`` at the top of every hierarchy (v1 controllers, or v2)."""
    base = Path("/sys/fs/cgroup")
    tops = [base / name] + [d / name for d in (base.iterdir() if base.is_dir() else []) if d.is_dir()]
    return [top for top in tops if top.is_dir()]


def cgroup_members(names, procs):
    """The processes in a cgroup (any hierarchy) under one named in ``names``: the nodes' containers.
    Nothing to read when no such cgroup exists (a lab that never ran an engine)."""
    names = [name for name in names if cgroup_dirs(name)]
    if not names:
        return set()
    members = set()
    for pid in procs:
        try:
            with open("/proc/%d/cgroup" % pid) as handle:
                lines = [line.rstrip() for line in handle]
        except OSError:
            continue
        if any(("/%s/" % name) in line or line.endswith("/" + name) for line in lines for name in names):
            members.add(pid)
    return members


def docker_ping(sock, timeout=2.0):
    """GET /_ping on a Docker API unix socket answers 200 OK."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout)
            conn.connect(str(sock))
            conn.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            data = b""
            while len(data) < 65536:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return False
    return data.split(b"\r\n", 1)[0].split(b" ")[1:2] == [b"200"]


def engine_running(node, procs):
    """PID of the node's dockerd if it runs in the node's current network and mount namespaces
    (those of its sshd) and answers on the node's socket, else None."""
    pid = read_pid(node.docker_pidfile)
    inode = netns_inode(node.ns)
    if pid is None or pid not in procs or not alive(pid) or node.pid is None:
        return None
    ns_inode, cmdline = procs[pid]
    if inode is None or ns_inode != inode or str(node.docker_config) not in cmdline:
        return None
    if mnt_ns(pid) != mnt_ns(node.pid) or not docker_ping(node.docker_sock):
        return None
    if not socket_group_ok(node):
        return None  # (group docker made after the daemon started: it gives its socket to it on a restart)
    return pid


def socket_group_ok(node):
    """The node's daemon socket belongs to group docker when that group exists (dockerd's default)."""
    gid = group_gid("docker")
    try:
        return gid is None or os.stat(node.docker_sock).st_gid == gid
    except OSError:
        return False


def engine_pids(node, procs):
    """Every process of the node's engine: its dockerd (by config file), the containerd and shims in
    the node's network namespace, and the processes of its containers (by cgroup)."""
    inode = netns_inode(node.ns)
    pids = set()
    for pid, (ns_inode, cmdline) in procs.items():
        if str(node.docker_config) in cmdline:
            pids.add(pid)
        elif inode is not None and ns_inode == inode and cmdline.split(" ")[0].split("/")[-1].startswith("containerd"):
            pids.add(pid)
    return pids | cgroup_members([node.cgroup_parent], procs)


def remove_cgroups(name):
    """Remove the (empty, once its processes are gone) cgroups named ``name`` that a node's dockerd
    made as the parent of its containers, in every hierarchy."""
    for top in cgroup_dirs(name):
        for dirpath, _dirs, _files in sorted(os.walk(top), key=lambda item: -len(item[0])):
            try:
                os.rmdir(dirpath)
            except OSError:
                pass


def prepare_engine(node):
    """Directories and daemon.json of a node's engine; True when the daemon must restart."""
    ensure_dir(node.run_dir, 0o755)
    ensure_dir(node.run_dir / "sshd", 0o755)  # sshd's privilege separation directory
    ensure_dir(node.run_dir / "lock", 0o1777)
    shm = node.run_dir / "shm"
    if not shm.is_symlink():
        shm.symlink_to("/dev/shm")
    ensure_dir(node.docker_root, 0o710)
    return write_if_changed(node.docker_config, node.daemon_json(), 0o644)


def start_engine(node):
    """dockerd in the namespaces of the node's sshd (network, UTS and the mounts with its private /run
    and /var/lib/docker): to its clients it is the node's daemon at the default paths."""
    stale = node.docker_pidfile
    if stale.exists():
        stale.unlink()
    checkpoint("%s:engine" % node.name)
    argv = ["nsenter", "--target", str(node.pid), "--mount", "--uts", "--net", "--",
            DOCKERD, "--config-file", str(node.docker_config)]
    return spawn(argv, node.docker_log)


def wait_engine(node, proc, deadline):
    """Until the node's dockerd answers on its socket (nsenter execs it: same pid)."""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log = node.docker_log.read_text(errors="replace")[-2500:]
            raise LabError("%s: dockerd exited with %s (log %s):\n%s" % (
                node.name, proc.returncode, node.docker_log, log.strip()))
        if read_pid(node.docker_pidfile) == proc.pid and docker_ping(node.docker_sock):
            return proc.pid
        time.sleep(0.1)
    raise LabError("%s: dockerd did not answer on %s in time (see %s)" % (
        node.name, node.docker_sock, node.docker_log))


def stop_engine(node, procs):
    """Stop the node's engine: dockerd first (it stops its containers and containerd), then whatever
    is left of it; then its cgroups. True when there was something to stop."""
    if not node.docker_config.exists() and not cgroup_dirs(node.cgroup_parent):
        return False  # this node never ran an engine
    dockerd = {p for p in procs if str(node.docker_config) in procs[p][1]}
    pids = engine_pids(node, procs)
    if not pids:
        remove_cgroups(node.cgroup_parent)
        return False
    terminate(dockerd, grace=15.0)
    terminate({p for p in engine_pids(node, scan_processes()) if alive(p)})
    remove_cgroups(node.cgroup_parent)
    return True


def require_engine(engine):
    if engine == "docker":
        for prog in (DOCKERD, "containerd", "nsenter"):
            if not shutil.which(prog):
                raise LabError("--engine docker needs %s on this machine: `bash hack/engine.sh` installs "
                               "docker.io from Debian's packages" % prog)


def ensure_engines(nodes, deadline):
    """--engine docker: a healthy dockerd per node (kept as it is), else (re)started; without an
    engine, stop any that an earlier `up --engine docker` left."""
    procs = scan_processes()
    starting = []
    for node in nodes:
        if not node.engine:
            if stop_engine(node, procs):
                node.changes.append("dockerd stopped")
            continue
        pid = engine_running(node, procs)
        if pid is not None and not node.engine_restart:
            node.engine_pid = pid
            continue
        restarted = stop_engine(node, procs)
        starting.append((node, start_engine(node)))
        node.changes.append("dockerd restarted" if restarted else "dockerd")
    for node, proc in starting:
        node.engine_pid = wait_engine(node, proc, deadline + 60)
    for node in nodes:
        if node.engine and node.shape.user != "root" and (group_gid("docker") is None or not socket_group_ok(node)):
            raise LabError("%s: its dockerd socket %s is not group docker, so %s could not use it (see %s)" % (
                node.name, node.docker_sock, node.shape.user, node.docker_log))
