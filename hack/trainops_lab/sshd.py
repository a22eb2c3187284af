"""Each node's SSH daemon and host key, the controller's key, and reaching the nodes over ssh."""

import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .core import LabError, checkpoint, run, write_if_changed
from .network import netns_inode
from .processes import alive, read_pid, spawn


def ensure_keypair(key, comment):
    """An ed25519 key pair at ``key``/``key``.pub; True when (re)generated."""
    key, pub = Path(key), Path(str(key) + ".pub")
    if key.exists():
        derived = run(["ssh-keygen", "-y", "-f", str(key)], check=False)
        if derived.returncode == 0:
            text = derived.stdout.strip() + " " + comment + "\n"
            if not pub.exists() or pub.read_text().split()[:2] != text.split()[:2]:
                write_if_changed(pub, text, 0o644)
            if (key.stat().st_mode & 0o777) != 0o600:
                key.chmod(0o600)
            return False
    for path in (key, pub):
        if path.exists():
            path.unlink()
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(key)])
    key.chmod(0o600)
    return True


def sshd_running(node, procs):
    """PID of the node's sshd listener if it runs in the node's current namespace, else None."""
    pid = read_pid(node.pidfile)
    inode = netns_inode(node.ns)
    if pid is None or pid not in procs or not alive(pid):
        return None
    ns_inode, cmdline = procs[pid]
    if inode is None or ns_inode != inode or str(node.config) not in cmdline:
        return None
    return pid


def node_pids(node, procs):
    """Every process of this node: in its namespace, or an sshd on its config (stale ones)."""
    inode = netns_inode(node.ns)
    return {pid for pid, (ns_inode, cmdline) in procs.items()
            if (inode is not None and ns_inode == inode) or (str(node.config) + " ") in cmdline + " "}


def start_sshd(node):
    for stale in (node.pidfile,):
        if stale.exists():
            stale.unlink()
    checkpoint("%s:sshd" % node.name)
    argv = ["ip", "netns", "exec", node.ns,
            "unshare", "--mount", "--uts", "--propagation", "private", "--",
            "/bin/sh", "-c", node.launcher()]
    return spawn(argv, node.state / "launch.log")


def wait_sshd(node, proc, deadline):
    """Until sshd wrote its pid file (it does once its socket listens)."""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log = (node.state / "launch.log").read_text(errors="replace")[-1500:]
            try:
                log += node.log.read_text(errors="replace")[-1500:]
            except OSError:
                pass
            raise LabError("%s: sshd exited with %s:\n%s" % (node.name, proc.returncode, log.strip()))
        if read_pid(node.pidfile) == proc.pid:
            return proc.pid
        time.sleep(0.02)
    raise LabError("%s: sshd did not start in time (see %s)" % (node.name, node.log))


def ssh_argv(inv, address, *command, timeout=5, user="root"):
    return ["ssh", "-i", str(inv / "id_ed25519"), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=%s" % (inv / "known_hosts"),
            "-o", "ConnectTimeout=%d" % timeout, "-o", "ControlMaster=no", "-o", "ControlPath=none",
            "-o", "LogLevel=ERROR", "%s@%s" % (user, address)] + list(command)


def ssh_true(inv, address, timeout=5, user="root"):
    try:
        proc = subprocess.run(ssh_argv(inv, address, "true", timeout=timeout, user=user), capture_output=True,
                              text=True, timeout=timeout + 10, stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        return False, "timed out"
    return proc.returncode == 0, proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "rc %d" % proc.returncode


def tcp_open(address, port=22, timeout=0.5):
    try:
        with socket.create_connection((address, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            return sock.recv(4).startswith(b"SSH")
    except OSError:
        return False


def wait_ssh(inv, nodes, timeout):
    """Every node answers ssh on its SSH address, as root and as the training user."""
    deadline = time.monotonic() + timeout

    def one(node):
        last = "port 22 never answered"
        users = ["root"] + ([node.shape.user] if node.shape.user != "root" else [])
        while time.monotonic() < deadline:
            if tcp_open(node.ssh_address):
                while users:
                    ok, last = ssh_true(inv, node.ssh_address, user=users[0])
                    if not ok:
                        last = "%s@: %s" % (users[0], last)
                        break
                    users.pop(0)
                if not users:
                    return None
            time.sleep(0.2)
        return "%s (%s): %s; see %s" % (node.name, node.ssh_address, last, node.log)

    with ThreadPoolExecutor(max_workers=min(16, len(nodes))) as pool:
        failures = [f for f in pool.map(one, nodes) if f]
    if failures:
        raise LabError("ssh (BatchMode, StrictHostKeyChecking=yes) failed:\n  " + "\n  ".join(failures))
