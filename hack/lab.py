"""A real multi-host lab on one machine: N "nodes", each with its own network namespace, NIC,
hostname, directories and SSH daemon, all on one bridge that the controller reaches directly.

    python3 hack/lab.py up --nodes 4      # create / repair / grow / shrink to exactly 4 nodes
    python3 hack/lab.py status [--json]   # table: node, ns, ifname, address, sshd pid, ssh
    python3 hack/lab.py down              # remove everything the lab made

Needs root (network namespaces, veths, bind mounts).  Python 3 standard library only; the
system programs it drives (ip, sshd, ssh, ssh-keygen, unshare) are installed with apt-get
when missing.  See docs/lab.md for what is built and why.

Layout (node i = 1..N, NN = two digits):

* namespace ``trainops-lab-br`` holds bridge ``br0``; every node's veth peer ``vnodeNN`` and
  the controller's peer ``vctl`` are its ports (a bridge of its own namespace is outside the
  host's iptables, so Docker's ``FORWARD DROP`` policy cannot drop bridged frames);
* the controller (root namespace) has veth ``trainops-lab0`` = <subnet>.1;
* node i: namespace ``trainops-lab-nodeNN``, ``lo`` up, NIC ``ens5``/``enp1s0f0``/``eth1``/
  ``bond0.2093`` (cycling) = <subnet>.(10+i), no default route; sshd runs in it under
  ``unshare --mount --uts`` with hostname ``lab-nodeNN`` and private bind mounts of
  /var/lib/trainops-lab/nodeNN/{home,srv,tmp,ansible,hosts} onto /home, /srv/trainops, /tmp,
  /root/.ansible and /etc/hosts;
* inventories/lab/: hosts.yml, id_ed25519(.pub), known_hosts (the nodes' real host keys),
  lab.json.

Opt-in ``up --engine docker`` (an ``up`` without it takes the engines away again): every node also
runs a Docker daemon of its own, in its namespaces, with a private /run (so /var/run/docker.sock,
/var/run/docker and /var/run/docker.pid are the node's) and a private /var/lib/docker, both bind
mounts of /var/lib/trainops-lab/nodeNN/{run,docker}; see docs/containers.md.

Shapes (docs/lab.md), each opt-in the same way: ``--shared-home`` (/var/lib/trainops-lab/home on
every node's /home, and root's home in it when root trains), ``--user NAME`` (a non-root training
user Ansible logs in as), ``--mgmt-net`` (sshd on a second NIC ``eno1`` of a management network,
default 10.78.0.0/24, next to the training network), ``--slurm`` (a real Slurm cluster of the nodes: munged,
slurmdbd and slurmctld on the controller, a slurmd in every node; docs/slurm.md).
"""

import argparse
import fcntl
import grp
import ipaddress
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_INVENTORY_DIR = REPO / "inventories" / "lab"
DEFAULT_SUBNET = "10.77.0.0/24"
DEFAULT_MGMT_SUBNET = "10.78.0.0/24"
DEFAULT_NODES = 2

PREFIX = "trainops-lab"
BR_NS = PREFIX + "-br"
BRIDGE = "br0"
CTL_LINK = PREFIX + "0"
CTL_PEER = "vctl"
NODE_IFNAMES = ("ens5", "enp1s0f0", "eth1", "bond0.2093")
NODE_ROOT = "/srv/trainops"
MAC_PREFIX = "02:74:6c:00"  # locally administered; controller ...:00:00, node i ...:(i)
CTL_MAC = MAC_PREFIX + ":00:00"
# --mgmt-net: the management network (SSH), a second bridge next to the training one.
MGMT_BRIDGE = "brmgmt"
CTL_MGMT_LINK = PREFIX + "1"
CTL_MGMT_PEER = "vctlmgmt"
MGMT_IFNAME = "eno1"
MGMT_MAC_PREFIX = "02:74:6c:01"

STATE_ROOT = Path("/var/lib/trainops-lab")
STATE_FILE = STATE_ROOT / "state.json"
AUTHORIZED_KEYS = STATE_ROOT / "authorized_keys"  # root's
USER_KEYS_DIR = STATE_ROOT / "authorized_keys.d"   # any other user's: <dir>/<user>, owned by the user
SHARED_HOME = STATE_ROOT / "home"                  # --shared-home: every node's /home
LOCK_FILE = Path("/run/lock/trainops-lab.lock")
NETNS_DIR = Path("/run/netns")

SSHD = "/usr/sbin/sshd"
# (path checked, apt package)
PROGRAMS = (
    (SSHD, "openssh-server"),
    ("ssh", "openssh-client"),
    ("ssh-keygen", "openssh-client"),
    ("ip", "iproute2"),
    ("unshare", "util-linux"),
    ("mount", "mount"),
    ("rsync", "rsync"),
)
SLURM_SOURCE = "allocation.slurm.yml"  # up --slurm: the slurm inventory source of the lab's allocations
GENERATED = ("hosts.yml", "id_ed25519", "id_ed25519.pub", "known_hosts", "lab.json", SLURM_SOURCE)
# Directories a node sees as its own: state subdirectory -> mount point, mode (after its /home and,
# with a shared root home, its /root: /root/.ansible stays the node's own).
NODE_MOUNTS = (("srv", NODE_ROOT, 0o755), ("tmp", "/tmp", 0o1777), ("ansible", "/root/.ansible", 0o700))
HOME_MODE = 0o700

# --engine docker: the daemon each node runs (see ensure_engines).
ENGINES = ("none", "docker")
DOCKERD = "dockerd"
DOCKER_DATA_ROOT = "/var/lib/docker"

VERBOSE = False


class LabError(Exception):
    """A failure with a message meant for the user (printed without a traceback)."""


def say(msg):
    print(msg, flush=True)


def debug(msg):
    if VERBOSE:
        print("  . " + msg, file=sys.stderr, flush=True)


def run(argv, check=True, input_text=None, timeout=60):
    debug(" ".join(shlex.quote(a) for a in argv))
    try:
        proc = subprocess.run(argv, input=input_text, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except FileNotFoundError as exc:
        raise LabError("%s: not found" % argv[0]) from exc
    except subprocess.TimeoutExpired as exc:
        raise LabError("timed out after %ss: %s" % (timeout, " ".join(argv))) from exc
    if check and proc.returncode != 0:
        raise LabError("command failed (rc %d): %s\n%s" % (
            proc.returncode, " ".join(shlex.quote(a) for a in argv), (proc.stderr or proc.stdout).strip()))
    return proc


def checkpoint(where):
    """Test hook: TRAINOPS_LAB_FAIL_AT=<where> makes `up` fail there (to test half-failed ups)."""
    if os.environ.get("TRAINOPS_LAB_FAIL_AT") == where:
        raise LabError("injected failure at %s (TRAINOPS_LAB_FAIL_AT)" % where)


# ---------------------------------------------------------------------------------------------
# Prerequisites

def require_root():
    if os.geteuid() != 0:
        raise LabError("must run as root: the lab creates network namespaces, veths, a bridge and "
                       "bind mounts (try: sudo make lab N=4)")


def ensure_packages():
    missing = []
    for prog, pkg in PROGRAMS:
        found = os.access(prog, os.X_OK) if prog.startswith("/") else shutil.which(prog)
        if not found and pkg not in missing:
            missing.append(pkg)
    if missing:
        apt_install(missing)


def apt_install(missing):
    """Install Debian packages (apt-get update, then install), or fail saying which and why."""
    if not shutil.which("apt-get"):
        raise LabError("missing packages %s and no apt-get to install them" % " ".join(missing))
    say("lab: installing %s (apt-get)" % " ".join(missing))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "update", "-qq"],
                 ["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + missing):
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise LabError("%s failed:\n%s" % (" ".join(argv), (proc.stderr or proc.stdout)[-2000:]))


def require_netns():
    if run(["ip", "netns", "list"], check=False).returncode != 0:
        raise LabError("`ip netns` does not work here (no network namespace support?)")


class Lock:
    """Serialises up/down of the (machine-global) lab between concurrent callers."""

    def __init__(self):
        self.handle = None

    def __enter__(self):
        LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
        self.handle = open(LOCK_FILE, "a")  # pylint: disable=consider-using-with
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say("lab: waiting for another hack/lab.py (lock %s)" % LOCK_FILE)
            fcntl.flock(self.handle, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


# ---------------------------------------------------------------------------------------------
# Model

class Shape:
    """What kind of cluster the lab imitates: shared (NFS-like) homes, the training user, a management
    network for SSH next to the training network, a container engine per node, a Slurm cluster."""

    def __init__(self, shared_home=False, user="root", mgmt_net=False, engine="none", slurm=False):
        self.shared_home = bool(shared_home)
        self.user = user or "root"
        self.mgmt_net = bool(mgmt_net)
        self.engine = engine or "none"
        self.slurm = bool(slurm)

    @classmethod
    def saved(cls, state):
        """The shape recorded in the lab's state (a lab from before shapes: the plain one)."""
        shape = state.get("shape") or {}
        return cls(shape.get("shared_home"), shape.get("user"), shape.get("mgmt_net"), state.get("engine"),
                   state.get("slurm"))

    def as_dict(self):
        return {"shared_home": self.shared_home, "user": self.user, "mgmt_net": self.mgmt_net, "engine": self.engine,
                "slurm": self.slurm}

    def node_layout(self):
        """What a node's processes see (mounts, login user, addresses): a change restarts them."""
        return (self.shared_home, self.user, self.mgmt_net)

    @property
    def shared_root_home(self):
        return self.shared_home and self.user == "root"

    def options(self):
        """The `up` options that build this shape."""
        return ((["--shared-home"] if self.shared_home else []) + (["--user", self.user] if self.user != "root" else [])
                + (["--mgmt-net"] if self.mgmt_net else []) + (["--engine", self.engine] if self.engine != "none" else [])
                + (["--slurm"] if self.slurm else []))

    def describe(self):
        parts = ["shared home"] if self.shared_home else []
        parts += ["user %s" % self.user] if self.user != "root" else []
        parts += ["mgmt net"] if self.mgmt_net else []
        parts += ["engine %s" % self.engine] if self.engine != "none" else []
        parts += ["slurm"] if self.slurm else []
        return ", ".join(parts) or "plain"


class Nic:
    """One of a node's NICs: its end of a veth whose other end is a port of ``bridge``."""

    def __init__(self, ifname, peer, mac, address, prefixlen, bridge):
        self.ifname, self.peer, self.mac = ifname, peer, mac
        self.address, self.prefixlen, self.bridge = address, prefixlen, bridge


def node_mac(prefix, index):
    """A fixed MAC per node and network: a re-created NIC keeps it, so neighbour caches stay right."""
    return "%s:%02x:%02x" % (prefix, index >> 8, index & 0xFF)


class Node:
    def __init__(self, index, net, mgmt=None, shape=None):
        self.index = index
        self.nn = "%02d" % index
        self.name = "lab-node" + self.nn
        self.ns = "%s-node%s" % (PREFIX, self.nn)
        self.ifname = NODE_IFNAMES[(index - 1) % len(NODE_IFNAMES)]
        self.peer = "vnode" + self.nn
        self.mac = node_mac(MAC_PREFIX, index)
        self.address = str(net.network_address + 10 + index)
        self.prefixlen = net.prefixlen
        self.nics = [Nic(self.ifname, self.peer, self.mac, self.address, self.prefixlen, BRIDGE)]
        # --mgmt-net: a second NIC, eno1, on the management bridge; sshd listens only there.
        self.mgmt_address = str(mgmt.network_address + 10 + index) if mgmt else None
        self.mgmt_ifname = MGMT_IFNAME if mgmt else None
        self.mgmt_peer = "vmgmt" + self.nn
        if mgmt:
            self.nics.append(Nic(MGMT_IFNAME, self.mgmt_peer, node_mac(MGMT_MAC_PREFIX, index), self.mgmt_address,
                                 mgmt.prefixlen, MGMT_BRIDGE))
        self.ssh_address = self.mgmt_address or self.address
        self.shape = shape or Shape()
        self.state = STATE_ROOT / ("node" + self.nn)
        self.config = self.state / "sshd_config"
        self.host_key = self.state / "ssh_host_ed25519_key"
        self.pidfile = self.state / "sshd.pid"
        self.log = self.state / "sshd.log"
        self.hosts = self.state / "hosts"
        self.changes = []
        self.pid = None
        # --engine docker: a private /run and /var/lib/docker, and the daemon's files as the
        # controller sees them (the node sees them at their default paths).
        self.engine = None
        self.run_dir = self.state / "run"
        self.docker_root = self.state / "docker"
        self.docker_config = self.state / "daemon.json"
        self.docker_sock = self.run_dir / "docker.sock"
        self.docker_pidfile = self.run_dir / "docker.pid"
        self.docker_log = self.state / "dockerd.log"
        self.cgroup_parent = "%s-node%s" % (PREFIX, self.nn)
        self.engine_pid = None
        self.engine_restart = False

    @property
    def home_dir(self):
        """What the node sees as /home: the one shared directory, or its own."""
        return SHARED_HOME if self.shape.shared_home else self.state / "home"

    @property
    def home(self):
        """The training user's home as the node sees it."""
        return "/root" if self.shape.user == "root" else "/home/" + self.shape.user

    @property
    def home_on_host(self):
        """The machine's directory behind the training user's home."""
        if self.shape.user != "root":
            return self.home_dir / self.shape.user
        return SHARED_HOME / "root" if self.shape.shared_root_home else Path("/root")

    @property
    def node_root(self):
        """trainops_node_root as the node resolves it: the collection's ~/.trainops on a shared home."""
        return self.home + "/.trainops" if self.shape.shared_home else NODE_ROOT

    def mounts(self):
        """(machine directory, mount point) of the node's private mounts, in mount order."""
        mounts = [(self.home_dir, "/home")]
        if self.shape.shared_root_home:
            mounts.append((SHARED_HOME / "root", "/root"))
        return mounts + [(self.state / sub, target) for sub, target, _mode in NODE_MOUNTS]

    def views(self):
        """(path in the node, machine path it must be): what a running sshd of this node must see."""
        views = [(target, source) for source, target in self.mounts()] + [("/etc/hosts", self.hosts)]
        if not self.shape.shared_root_home:
            views.append(("/root", Path("/root")))
        return views + [(str(path), path) for path in needed_paths()]

    def sshd_config(self):
        return "\n".join([
            "# Generated by hack/lab.py for %s; do not edit." % self.name,
            "ListenAddress %s" % self.ssh_address,
            "Port 22",
            "AddressFamily inet",
            "HostKey %s" % self.host_key,
            "PidFile %s" % self.pidfile,
            # sshd reads a user's keys with the user's privileges: a file per user, owned by it (the lab's
            # key), and, as sshd does by default, the user's own ~/.ssh/authorized_keys (ssh_mesh's key)
            "AuthorizedKeysFile %s/%%u .ssh/authorized_keys" % USER_KEYS_DIR,
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "UseDNS no",
            "MaxStartups 64:30:128",
            "MaxSessions 64",
            "PrintMotd no",
            "X11Forwarding no",
            "Subsystem sftp internal-sftp",
            "Match User root",
            "    AuthorizedKeysFile %s" % AUTHORIZED_KEYS,
            "",
        ])

    def launcher(self):
        """The shell run inside the node's namespaces: hostname, private binds, then sshd."""
        lines = ["set -e",
                 "hostname %s" % self.name,
                 # The copies of the lab's /run/netns/* mounts would keep every namespace alive
                 # as long as this one lives; a node has no business with them anyway.
                 "for m in /run/netns/*; do umount -l \"$m\" 2>/dev/null || true; done",
                 "umount -l /run/netns 2>/dev/null || true"]
        for source, target in self.mounts():
            lines += mount_lines(source, target)
        lines.append("mount --bind %s /etc/hosts" % self.hosts)
        if self.engine:
            # The node's own /run (its docker.sock, docker.pid, exec root; no containerd socket of
            # the machine's) and /var/lib/docker (its own image store); and the machine's cgroup
            # hierarchies, which the fresh sysfs of `ip netns exec` hides from the node.
            lines.append("mount --bind %s /run" % self.run_dir)
            lines.append("mount --bind %s %s" % (self.docker_root, DOCKER_DATA_ROOT))
            lines += cgroup_mount_lines()
        lines.append("exec %s -D -f %s -E %s" % (SSHD, self.config, self.log))
        return "\n".join(lines)

    def daemon_json(self):
        """dockerd's settings for this node: the default paths as the node sees them, no iptables,
        no bridge (containers use the node's network), containers under a cgroup named after it."""
        return json.dumps({
            "data-root": DOCKER_DATA_ROOT,
            "exec-root": "/var/run/docker",
            "pidfile": "/var/run/docker.pid",
            "hosts": ["unix:///var/run/docker.sock"],
            "iptables": False,
            "ip-masq": False,
            "bridge": "none",
            "userland-proxy": False,
            "cgroup-parent": self.cgroup_parent,
            "shutdown-timeout": 3,
            "log-level": "warn",
            # (the daemon's ID comes from the machine's shared /etc/docker/key.json: not per node)
            "labels": ["org.trainops.lab.node=%s" % self.name],
        }, indent=2) + "\n"


def needed_paths():
    """Machine directories every node must see at their own path: the checkout, where its .venv
    really is, and the prefix of that venv's interpreter (pyvenv.cfg ``home``, e.g. under /root)."""
    paths = [REPO]
    venv = REPO / ".venv"
    if venv.is_dir():
        paths.append(venv.resolve())
        try:
            cfg = dict((key.strip(), value.strip()) for key, _eq, value in
                       (line.partition("=") for line in (venv / "pyvenv.cfg").read_text().splitlines()))
            paths.append(Path(cfg["home"]).resolve().parent)
        except (OSError, KeyError):
            pass
    paths = sorted(set(paths))
    return [p for p in paths if not any(q in p.parents for q in paths)]


def mount_lines(source, target):
    """Shell lines that mount ``source`` on ``target``; a needed path (needed_paths) under ``target``
    is bound first at the same place inside ``source``, so it stays where it is once ``source`` covers
    it (a clone in /tmp, a checkout or a pyenv Python under a shared /root)."""
    target = Path(target)
    inside = [p for p in needed_paths() if p == target or target in p.parents]
    lines = []
    for path in inside:
        inner = Path(source) / path.relative_to(target)
        lines.append("mkdir -p %s" % shlex.quote(str(inner)))
        lines.append("mount --bind %s %s" % (shlex.quote(str(path)), shlex.quote(str(inner))))
    lines.append("mount %s %s %s" % ("--rbind" if inside else "--bind", shlex.quote(str(source)), target))
    return lines


def cgroup_mount_lines():
    """Shell lines that mount, under the node's /sys, the same cgroup hierarchies as the machine's
    (v1 controllers each again, which attaches the same hierarchy, or the v2 tree): `ip netns exec`
    gives the node a new sysfs without them, and dockerd needs them."""
    base = "/sys/fs/cgroup"
    mounts = []
    with open("/proc/self/mounts") as handle:
        for line in handle:
            fields = line.split()
            if len(fields) >= 4 and (fields[1] == base or fields[1].startswith(base + "/")):
                mounts.append((fields[1], fields[2], fields[3]))
    lines = []
    for target, fstype, options in mounts:
        if fstype not in ("cgroup", "cgroup2", "tmpfs"):
            continue
        lines.append("mkdir -p %s" % shlex.quote(target))
        lines.append("mount -t %s -o %s %s %s" % (fstype, shlex.quote(options), fstype, shlex.quote(target)))
        if target == base and fstype == "tmpfs":
            # the machine's symlinks (cpu -> cpu,cpuacct, ...) on the tmpfs
            for name in sorted(os.listdir(base)):
                path = os.path.join(base, name)
                if os.path.islink(path):
                    lines.append("ln -sfn %s %s" % (shlex.quote(os.readlink(path)), shlex.quote(path)))
    return lines


def lab_network(subnet, option, count):
    net = ipaddress.ip_network(subnet, strict=True)
    if net.version != 4:
        raise LabError("%s must be IPv4" % option)
    if 10 + count >= net.num_addresses - 1:
        raise LabError("%s %s is too small for %d nodes (node i gets .10+i)" % (option, subnet, count))
    return net


def plan(count, subnet, mgmt_subnet=None, shape=None):
    if count < 1:
        raise LabError("--nodes must be at least 1")
    if count > 99:
        raise LabError("at most 99 nodes")
    net = lab_network(subnet, "--subnet", count)
    mgmt = lab_network(mgmt_subnet, "--mgmt-subnet", count) if mgmt_subnet else None
    if mgmt and mgmt.overlaps(net):
        raise LabError("--mgmt-subnet %s overlaps the training subnet %s" % (mgmt, net))
    return net, mgmt, [Node(i, net, mgmt, shape) for i in range(1, count + 1)]


def hosts_file(net, nodes, own):
    """/etc/hosts of a node: every node's name; with a management network the name resolves to the
    management address (as on real clusters) and NAME-train to the training address."""
    lines = ["# Generated by hack/lab.py for %s" % own.name,
             "127.0.0.1\tlocalhost",
             "::1\tlocalhost ip6-localhost ip6-loopback",
             "%s\ttrainops-lab-controller" % (net.network_address + 1)]
    for node in nodes:
        if node.mgmt_address:
            lines += ["%s\t%s" % (node.mgmt_address, node.name), "%s\t%s-train" % (node.address, node.name)]
        else:
            lines.append("%s\t%s" % (node.address, node.name))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Files

def write_if_changed(path, content, mode=0o644, in_place=False):
    """Write ``content`` unless it is already there; True when written.  ``in_place`` keeps the
    inode (a file bind-mounted into a node must be rewritten, not replaced)."""
    path = Path(path)
    try:
        if path.read_text() == content:
            if (path.stat().st_mode & 0o7777) != mode:
                path.chmod(mode)
            return False
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    if in_place and path.exists():
        with open(path, "w") as handle:
            handle.write(content)
        path.chmod(mode)
        return True
    tmp = path.with_name(path.name + ".tmp")
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w") as handle:
        handle.write(content)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    return True


def ensure_dir(path, mode, fix_mode=True):
    """True when created.  ``fix_mode=False``: leave the mode of an existing directory alone."""
    path = Path(path)
    created = not path.is_dir()
    path.mkdir(parents=True, exist_ok=True)
    if (created or fix_mode) and (path.stat().st_mode & 0o7777) != mode:
        path.chmod(mode)
    return created


def read_json(path, default=None):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return default


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


# ---------------------------------------------------------------------------------------------
# Namespaces, links

def netns_names():
    out = run(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def lab_netns_names():
    return [name for name in netns_names() if name.startswith(PREFIX + "-")]


def node_index(ns):
    suffix = ns[len(PREFIX + "-node"):]
    return int(suffix) if ns.startswith(PREFIX + "-node") and suffix.isdigit() else None


def _nsfs_dev():
    return os.stat("/proc/self/ns/net").st_dev


def netns_inode(ns):
    """Inode of a *mounted* namespace file /run/netns/<ns>, or None (missing or stale file)."""
    try:
        st = os.stat(NETNS_DIR / ns)
    except OSError:
        return None
    return st.st_ino if st.st_dev == _nsfs_dev() else None


def ensure_netns(ns):
    """True when created.  A stale /run/netns/<ns> (left by a half-failed `ip netns add`) goes."""
    if netns_inode(ns) is not None:
        return False
    path = NETNS_DIR / ns
    if path.exists():
        run(["umount", "-l", str(path)], check=False)
        path.unlink()
    run(["ip", "netns", "add", ns])
    return True


def delete_netns(ns):
    path = NETNS_DIR / ns
    if netns_inode(ns) is not None:
        run(["ip", "netns", "del", ns], check=False)
    if path.exists():
        run(["umount", "-l", str(path)], check=False)
        try:
            path.unlink()
        except OSError:
            pass


def ip_json(ns, *args):
    argv = ["ip"] + (["-n", ns] if ns else []) + ["-j"] + list(args)
    proc = run(argv, check=False)
    if proc.returncode != 0:
        return []
    try:
        return json.loads(proc.stdout or "[]")
    except ValueError:
        return []


def links_by_name(ns, what="addr"):
    return {link["ifname"]: link for link in ip_json(ns, what, "show")}


def link_ok(link, address, prefixlen, mac=None):
    """UP, with exactly ``address/prefixlen`` as its IPv4 address (and ``mac``)."""
    if link is None or "UP" not in link.get("flags", []):
        return False
    if mac and link.get("address") != mac:
        return False
    inet = [(a.get("local"), a.get("prefixlen")) for a in link.get("addr_info", []) if a.get("family") == "inet"]
    return inet == [(address, prefixlen)]


def ip_batch(ns, commands):
    if commands:
        run(["ip"] + (["-n", ns] if ns else []) + ["-batch", "-"], input_text="\n".join(commands) + "\n")


def set_address(ns, ifname, link, address, prefixlen, mac):
    """Make ``address/prefixlen`` the link's only IPv4 address, ``mac`` its MAC, and the link up."""
    cmds = [] if (link or {}).get("address") == mac else ["link set dev %s address %s" % (ifname, mac)]
    for a in (link or {}).get("addr_info", []):
        if a.get("family") == "inet" and (a.get("local"), a.get("prefixlen")) != (address, prefixlen):
            cmds.append("addr del %s/%s dev %s" % (a["local"], a["prefixlen"], ifname))
    have = [(a.get("local"), a.get("prefixlen")) for a in (link or {}).get("addr_info", []) if a.get("family") == "inet"]
    if (address, prefixlen) not in have:
        cmds.append("addr add %s/%d dev %s" % (address, prefixlen, ifname))
    cmds.append("link set %s up" % ifname)
    ip_batch(ns, cmds)


class Segment:
    """One of the lab's networks: a bridge in the bridge namespace and the controller's veth into it
    (<subnet>.1): the training network (br0, trainops-lab0) or the management one (--mgmt-net)."""

    def __init__(self, net, bridge, ctl_link, ctl_peer, ctl_mac, label):
        self.net, self.bridge, self.ctl_link, self.ctl_peer, self.ctl_mac = net, bridge, ctl_link, ctl_peer, ctl_mac
        self.label = label

    @property
    def ctl_address(self):
        return str(self.net.network_address + 1) if self.net else None


def segments(net, mgmt):
    """The training network's segment and the management one (its ``net`` None without --mgmt-net)."""
    return (Segment(net, BRIDGE, CTL_LINK, CTL_PEER, CTL_MAC, ""),
            Segment(mgmt, MGMT_BRIDGE, CTL_MGMT_LINK, CTL_MGMT_PEER, MGMT_MAC_PREFIX + ":00:00", "mgmt-"))


def paired(a, b):
    """Two links that are the two ends of one veth."""
    return (a is not None and b is not None and a.get("link_index") == b.get("ifindex")
            and b.get("link_index") == a.get("ifindex"))


def ensure_bridge(seg):
    """Namespace trainops-lab-br with the segment's bridge up, and the controller's veth into it."""
    changes = []
    if ensure_netns(BR_NS):
        changes.append("br-ns")
    links = links_by_name(BR_NS, "link")
    br = links.get(seg.bridge)
    if br is not None and br.get("linkinfo", {}).get("info_kind", "bridge") != "bridge":
        run(["ip", "-n", BR_NS, "link", "del", seg.bridge])
        br = None
    if br is None:
        ip_batch(BR_NS, ["link add %s type bridge" % seg.bridge])
        changes.append(seg.label + "bridge")
    if br is None or "UP" not in br.get("flags", []) or "UP" not in links.get("lo", {}).get("flags", []):
        ip_batch(BR_NS, ["link set lo up", "link set %s up" % seg.bridge])
    # Controller side: trainops-lab0 / trainops-lab1 (root ns) <-> vctl / vctlmgmt (bridge port).
    address, prefixlen = seg.ctl_address, seg.net.prefixlen
    ctl = links_by_name(None).get(seg.ctl_link)
    peer = links.get(seg.ctl_peer)
    if not paired(ctl, peer):
        if ctl is not None:
            run(["ip", "link", "del", seg.ctl_link], check=False)
        if peer is not None:
            run(["ip", "-n", BR_NS, "link", "del", seg.ctl_peer], check=False)
        run(["ip", "link", "add", seg.ctl_link, "address", seg.ctl_mac, "type", "veth", "peer", "name", seg.ctl_peer,
             "netns", BR_NS])
        ctl, peer = None, None
        changes.append(seg.label + "controller-link")
    if peer is None or peer.get("master") != seg.bridge or "UP" not in peer.get("flags", []):
        ip_batch(BR_NS, ["link set %s master %s up" % (seg.ctl_peer, seg.bridge)])
    if not link_ok(ctl, address, prefixlen, seg.ctl_mac):
        set_address(None, seg.ctl_link, ctl, address, prefixlen, seg.ctl_mac)
        if ctl is not None:
            changes.append(seg.label + "controller-address")
    return changes


def remove_bridge(seg):
    """Without --mgmt-net: the management bridge and the controller's veth into it go."""
    changes = []
    if seg.ctl_link in links_by_name(None, "link"):
        run(["ip", "link", "del", seg.ctl_link], check=False)
        changes.append(seg.label + "controller-link removed")
    if netns_inode(BR_NS) is not None and seg.bridge in links_by_name(BR_NS, "link"):
        run(["ip", "-n", BR_NS, "link", "del", seg.bridge], check=False)
        changes.append(seg.label + "bridge removed")
    return changes


def ensure_node_link(node, br_links):
    """The node's NICs (in its ns) each paired with its port on its bridge, addressed, up; lo up."""
    changes = []
    links = links_by_name(node.ns)
    # Anything but lo and the node's NICs does not belong in a node.
    extra = [name for name in links if name not in ["lo"] + [nic.ifname for nic in node.nics]]
    for name in extra:
        run(["ip", "-n", node.ns, "link", "del", name], check=False)
        if name == MGMT_IFNAME:
            changes.append("%s removed" % name)
    for want in node.nics:
        nic, peer = links.get(want.ifname), br_links.get(want.peer)
        if not paired(nic, peer):
            if nic is not None:
                run(["ip", "-n", node.ns, "link", "del", want.ifname], check=False)
            if peer is not None:
                run(["ip", "-n", BR_NS, "link", "del", want.peer], check=False)
            checkpoint("%s:link" % node.name)
            run(["ip", "link", "add", "name", want.ifname, "address", want.mac, "netns", node.ns, "type", "veth",
                 "peer", "name", want.peer, "netns", BR_NS])
            nic, peer = None, None
            changes.append("link" if want.ifname == node.ifname else want.ifname)
        if peer is None or peer.get("master") != want.bridge or "UP" not in peer.get("flags", []):
            ip_batch(BR_NS, ["link set %s master %s up" % (want.peer, want.bridge)])
        if not link_ok(nic, want.address, want.prefixlen, want.mac):
            set_address(node.ns, want.ifname, nic, want.address, want.prefixlen, want.mac)
            if nic is not None:
                changes.append("address" if want.ifname == node.ifname else want.ifname + " address")
    cmds = [] if "UP" in links.get("lo", {}).get("flags", []) else ["link set lo up"]
    ip_batch(node.ns, cmds)
    return changes


def nics_ok(node, links, br_links):
    """Every NIC of the node up with its address and MAC, its peer a port of its bridge."""
    return all(link_ok(links.get(nic.ifname), nic.address, nic.prefixlen, nic.mac)
               and br_links.get(nic.peer, {}).get("master") == nic.bridge for nic in node.nics)


# ---------------------------------------------------------------------------------------------
# Processes

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
    debug(" ".join(shlex.quote(a) for a in argv))
    with open(node.state / "launch.log", "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,  # pylint: disable=consider-using-with
                                start_new_session=True, close_fds=True, cwd="/")
    return proc


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


# ---------------------------------------------------------------------------------------------
# Slurm (up --slurm): munged and slurmctld on the controller, a slurmd in every node's namespaces

SLURM_DIR = STATE_ROOT / "slurm"
SLURM_CONF = SLURM_DIR / "slurm.conf"
GRES_CONF = SLURM_DIR / "gres.conf"  # slurmd reads it next to slurm.conf
SLURM_CLUSTER = "trainops-lab"
SLURM_PARTITION = "lab"
SLURM_NODE_CPUS = 2  # every node, whatever the machine has: 2 tasks a node, as hosts.yml's trainops_nproc_per_node
SLURM_NODE_GPUS = 4  # GRES gpu per node (stand-in device files), but every fourth node has SLURM_SMALL_NODE_GPUS
SLURM_SMALL_NODE_GPUS = 2  # (lab-node04, 08, ...: a cluster whose nodes differ, as mixed clusters do)
SLURM_GPU_TYPE = "labgpu"  # typed GRES, as real clusters name theirs (gpu:h100:8): --gres=gpu:N still matches
SLURM_GPU_MAJOR = 195  # the NVIDIA driver's character-device major, as /dev/nvidia<N> has on a GPU node
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
MUNGE_DIR = SLURM_DIR / "munge"
MUNGE_KEY = MUNGE_DIR / "munge.key"
MUNGE_SOCKET = MUNGE_DIR / "munge.socket"
MUNGE_PIDFILE = MUNGE_DIR / "munged.pid"
MUNGE_LOG = MUNGE_DIR / "munged.log"
CTLD_STATE = SLURM_DIR / "ctld"
CTLD_PIDFILE = SLURM_DIR / "slurmctld.pid"
CTLD_LOG = SLURM_DIR / "slurmctld.log"
# Accounting (sacct): slurmdbd on a MariaDB of the lab's own (its files under the state, TCP on loopback only)
SLURMDBD_CONF = SLURM_DIR / "slurmdbd.conf"   # slurmdbd reads it next to SLURM_CONF
SLURMDBD_PORT = 6819
SLURMDBD_PIDFILE = SLURM_DIR / "slurmdbd.pid"
SLURMDBD_LOG = SLURM_DIR / "slurmdbd.log"
DB_DIR = SLURM_DIR / "mariadb"
DB_DATA = DB_DIR / "data"
DB_SOCKET = DB_DIR / "mariadb.sock"
DB_PIDFILE = DB_DIR / "mariadb.pid"
DB_LOG = DB_DIR / "mariadb.log"
DB_PORT = 6820
DB_NAME = "slurm_acct_db"
# (program, apt package) that --slurm needs on the machine
SLURM_PROGRAMS = (("munged", "munge"), ("slurmctld", "slurmctld"), ("slurmd", "slurmd"),
                  ("sbatch", "slurm-client"), ("scontrol", "slurm-client"), ("slurmdbd", "slurmdbd"),
                  ("mariadbd", "mariadb-server"))


SLURM_DEV_DIR = SLURM_DIR / "dev"


def slurm_node_gpus(name):
    """How many GPUs (GRES gpu) the node has: SLURM_NODE_GPUS, but SLURM_SMALL_NODE_GPUS on every fourth
    node (lab-node04, lab-node08, ...)."""
    number = int(re.sub(r"\D", "", name) or 0)
    return SLURM_SMALL_NODE_GPUS if number % 4 == 0 else SLURM_NODE_GPUS


def slurm_gpu_files(name):
    """The node's stand-in GPU device files: character devices with the NVIDIA driver's major and the GPU
    number as minor, as /dev/nvidia<N> on a GPU node (nothing can open them: there is no driver)."""
    return [SLURM_DEV_DIR / name / ("nvidia%d" % index) for index in range(slurm_node_gpus(name))]


def ensure_gpu_files(nodes):
    """mknod every node's stand-in GPU devices (gres.conf File=); the names of the nodes that got new ones."""
    changed = []
    for node in nodes:
        ensure_dir(SLURM_DEV_DIR / node.name, 0o755)
        wanted = {path.name for path in slurm_gpu_files(node.name)}
        for extra in (SLURM_DEV_DIR / node.name).iterdir():
            if extra.name not in wanted:
                extra.unlink()
        for index, path in enumerate(slurm_gpu_files(node.name)):
            if path.is_char_device() and os.major(path.stat().st_rdev) == SLURM_GPU_MAJOR \
                    and os.minor(path.stat().st_rdev) == index:
                continue
            if path.exists() or path.is_symlink():
                path.unlink()
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(SLURM_GPU_MAJOR, index))
            if node.name not in changed:
                changed.append(node.name)
    return changed


def render_gres_conf(nodes):
    """gres.conf: each node's GPUs are its stand-in device files (no AutoDetect: there is no NVML)."""
    lines = ["# Generated by hack/lab.py up --slurm; do not edit (docs/lab.md, Slurm).", "AutoDetect=off"]
    for node in nodes:
        files = slurm_gpu_files(node.name)
        lines.append("NodeName=%s Name=gpu Type=%s File=%s/nvidia[0-%d]" % (
            node.name, SLURM_GPU_TYPE, SLURM_DEV_DIR / node.name, len(files) - 1))
    return "\n".join(lines) + "\n"


def slurm_node_dir(name):
    """A slurmd's spool directory (its pid file and log are in it): SlurmdSpoolDir with %n."""
    return SLURM_DIR / name


def slurm_env():
    """The environment Slurm's clients (sinfo, salloc, sbatch, scontrol) need to find the lab's cluster."""
    return dict(os.environ, SLURM_CONF=str(SLURM_CONF))


def slurm_controller_name():
    """SlurmctldHost's name: slurmctld only starts on a host whose name it is (the machine's short name)."""
    return socket.gethostname().split(".")[0]


def render_slurm_conf(nodes, ctl_address):
    """slurm.conf of the lab: every node with its name (its hostname) and SSH-network address, one
    partition; process tracking and task plugins that need no cgroups (docs/lab.md, Slurm)."""
    names = ",".join(node.name for node in nodes)
    lines = [
        "# Generated by hack/lab.py up --slurm; do not edit (docs/lab.md, Slurm).",
        "ClusterName=%s" % SLURM_CLUSTER,
        "SlurmctldHost=%s(%s)" % (slurm_controller_name(), ctl_address),
        "SlurmctldPort=%d" % SLURMCTLD_PORT,
        "SlurmdPort=%d" % SLURMD_PORT,
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        # the lab's own munged: one key and socket for the controller and every node (shared filesystem)
        "AuthInfo=socket=%s" % MUNGE_SOCKET,
        "StateSaveLocation=%s" % CTLD_STATE,
        "SlurmctldPidFile=%s" % CTLD_PIDFILE,
        "SlurmctldLogFile=%s" % CTLD_LOG,
        # one slurmd per node on one filesystem: each its own spool, pid file and log (%n = its NodeName)
        "SlurmdSpoolDir=%s" % slurm_node_dir("%n"),
        "SlurmdPidFile=%s" % (slurm_node_dir("%n") / "slurmd.pid"),
        "SlurmdLogFile=%s" % (slurm_node_dir("%n") / "slurmd.log"),
        # all slurmds share one kernel and one cgroup tree: no cgroup plugins (docs/lab.md says why); tasks
        # are bound to CPUs as on a production cluster (task/affinity: sched_setaffinity, no cgroups)
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/affinity",
        "JobAcctGatherType=jobacct_gather/none",
        # jobs get CPUs and GPUs, not whole nodes, as on a shared GPU cluster (a job may hold part of a node)
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "GresTypes=gpu",
        "SchedulerType=sched/builtin",
        "MpiDefault=none",
        "SwitchType=switch/none",
        "ReturnToService=2",
        # the nodes are what this file says (CPUs), whatever the machine has
        "SlurmdParameters=config_overrides",
        # (Slurm's default: a cancelled batch script has this long to stop its ranks, roles/sbatch)
        "KillWait=30",
        "InactiveLimit=0",
        "MinJobAge=300",
        # every job is recorded (sacct) by the lab's slurmdbd
        "AccountingStorageType=accounting_storage/slurmdbd",
        "AccountingStorageHost=127.0.0.1",
        "AccountingStoragePort=%d" % SLURMDBD_PORT,
        # GPUs are a trackable resource (sacct AllocTRES gres/gpu=N), as GPU clusters account them
        "AccountingStorageTRES=gres/gpu",
        # (with slurmdbd this names the munge socket for talking to it: the lab's, not the default one)
        "AccountingStoragePass=%s" % MUNGE_SOCKET,
        "SlurmctldTimeout=30",
        "SlurmdTimeout=60",
    ]
    for node in nodes:
        lines.append("NodeName=%s NodeAddr=%s CPUs=%d RealMemory=1024 Gres=gpu:%s:%d State=UNKNOWN" % (
            node.name, node.ssh_address, SLURM_NODE_CPUS, SLURM_GPU_TYPE, slurm_node_gpus(node.name)))
    lines.append("PartitionName=%s Nodes=%s Default=YES MaxTime=INFINITE State=UP" % (SLURM_PARTITION, names))
    return "\n".join(lines) + "\n"


def require_slurm():
    """--slurm needs Debian's Slurm and MUNGE: installed with apt-get when missing."""
    missing = []
    for prog, pkg in SLURM_PROGRAMS:
        if not shutil.which(prog) and pkg not in missing:
            missing.append(pkg)
    if missing:
        apt_install(missing)


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


def ensure_munge(procs, deadline):
    """The lab's munged (its own key and socket under the lab's state): kept when healthy. The changes."""
    ensure_dir(MUNGE_DIR, 0o755)  # munged wants its socket's directory searchable by all (the key is 0600)
    changes = []
    if not MUNGE_KEY.exists():
        run(["mungekey", "--create", "--keyfile", str(MUNGE_KEY)])
        os.chmod(MUNGE_KEY, 0o600)
        changes.append("munge key")
    if daemon_pid(MUNGE_PIDFILE, str(MUNGE_SOCKET), procs) and not changes:
        return changes
    terminate({p for p, (_ns, cmd) in procs.items() if str(MUNGE_SOCKET) in cmd and "munged" in cmd})
    for stale in (MUNGE_PIDFILE, MUNGE_SOCKET):
        if stale.exists():
            stale.unlink()
    proc = spawn(["munged", "--foreground", "--socket", str(MUNGE_SOCKET), "--key-file", str(MUNGE_KEY),
                  "--pid-file", str(MUNGE_PIDFILE), "--seed-file", str(MUNGE_DIR / "munged.seed"),
                  "--log-file", str(MUNGE_LOG)], MUNGE_LOG)
    wait_for("munged", proc, lambda: MUNGE_SOCKET.exists() and read_pid(MUNGE_PIDFILE) == proc.pid, MUNGE_LOG,
             deadline)
    return changes + ["munged (pid %d)" % proc.pid]


def ensure_slurmctld(conf_changed, procs, deadline):
    """slurmctld on the controller (root namespace, listening on SlurmctldPort): kept when healthy and the
    configuration is the same, else (re)started. The changes."""
    ensure_dir(CTLD_STATE, 0o700)
    pid = daemon_pid(CTLD_PIDFILE, str(SLURM_CONF), procs)
    if pid and not conf_changed:
        return []
    terminate({p for p, (_ns, cmd) in procs.items() if "slurmctld" in cmd and str(SLURM_CONF) in cmd})
    if CTLD_PIDFILE.exists():
        CTLD_PIDFILE.unlink()
    proc = spawn(["slurmctld", "-D", "-f", str(SLURM_CONF)], SLURM_DIR / "slurmctld.out")
    wait_for("slurmctld", proc, slurm_answers, CTLD_LOG, deadline)
    return ["slurmctld %s(pid %d)" % ("restarted " if pid else "", proc.pid)]


def render_slurmdbd_conf(password):
    """slurmdbd.conf: the lab's munged, slurmdbd on loopback, the lab's MariaDB as its storage (0600: the
    database password is in it, as slurmdbd requires)."""
    return "\n".join([
        "# Generated by hack/lab.py up --slurm; do not edit (docs/slurm.md).",
        "AuthType=auth/munge",
        "AuthInfo=socket=%s" % MUNGE_SOCKET,
        "DbdHost=localhost",
        "DbdAddr=127.0.0.1",
        "DbdPort=%d" % SLURMDBD_PORT,
        "SlurmUser=root",
        "PidFile=%s" % SLURMDBD_PIDFILE,
        "LogFile=%s" % SLURMDBD_LOG,
        "StorageType=accounting_storage/mysql",
        "StorageHost=127.0.0.1",
        "StoragePort=%d" % DB_PORT,
        "StorageUser=slurm",
        "StoragePass=%s" % password,
        "StorageLoc=%s" % DB_NAME,
        ""])


def db_password():
    """The accounting database's password: the one slurmdbd.conf has, else a new random one."""
    try:
        for line in SLURMDBD_CONF.read_text().splitlines():
            if line.startswith("StoragePass="):
                return line.split("=", 1)[1]
    except OSError:
        pass
    return os.urandom(18).hex()


def db_sql(statements):
    """Run SQL as MariaDB's root over the lab database's socket (root logs in by unix socket, no password).
    The SQL goes on stdin: it may hold the password, which no command line (ps) or -v output may show."""
    return run(["mariadb", "--no-defaults", "--socket", str(DB_SOCKET), "--user", "root", "--batch"],
               input_text=statements)


def db_answers():
    return DB_SOCKET.exists() and run(["mariadb", "--no-defaults", "--socket", str(DB_SOCKET), "--user", "root",
                                       "--execute", "SELECT 1"], check=False).returncode == 0


def ensure_database(procs, deadline):
    """The lab's MariaDB (datadir, socket and log under the state; TCP on 127.0.0.1 only) with the slurm user
    that slurmdbd logs in as: kept when it answers. The changes."""
    changes = []
    ensure_dir(DB_DIR, 0o700)
    if not (DB_DATA / "mysql").is_dir():
        run(["mariadb-install-db", "--no-defaults", "--datadir=%s" % DB_DATA, "--user=root",
             "--auth-root-authentication-method=socket", "--skip-test-db"], timeout=180)
        changes.append("accounting database")
    if not (daemon_pid(DB_PIDFILE, str(DB_DATA), procs) and db_answers()):
        terminate({p for p, (_ns, cmd) in procs.items() if "mariadbd" in cmd and str(DB_DATA) in cmd})
        proc = spawn(["mariadbd", "--no-defaults", "--datadir=%s" % DB_DATA, "--socket=%s" % DB_SOCKET,
                      "--pid-file=%s" % DB_PIDFILE, "--log-error=%s" % DB_LOG, "--user=root",
                      "--bind-address=127.0.0.1", "--port=%d" % DB_PORT, "--skip-name-resolve",
                      "--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M"], DB_DIR / "mariadb.out")
        wait_for("mariadbd", proc, db_answers, DB_LOG, deadline)
        changes.append("mariadbd (pid %d)" % proc.pid)
    return changes


def ensure_slurmdbd(procs, deadline):
    """slurmdbd on loopback with the lab's database, and the lab's cluster registered in it. The changes."""
    changes = ensure_database(procs, deadline)
    password = db_password()
    db_sql("CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '{0}'; "
           "ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{0}'; "
           "GRANT ALL ON {1}.* TO 'slurm'@'127.0.0.1';".format(password, DB_NAME))
    conf_changed = write_if_changed(SLURMDBD_CONF, render_slurmdbd_conf(password), 0o600)
    pid = daemon_pid(SLURMDBD_PIDFILE, "slurmdbd", procs)
    if pid in slurmdbd_pids(procs) and not conf_changed and not changes:
        return changes
    terminate(slurmdbd_pids(procs))
    if SLURMDBD_PIDFILE.exists():
        SLURMDBD_PIDFILE.unlink()
    # (slurmdbd reads slurmdbd.conf next to SLURM_CONF: it has no option for it)
    proc = spawn(["slurmdbd", "-D"], SLURM_DIR / "slurmdbd.out", env=slurm_env())
    wait_for("slurmdbd", proc, lambda: port_open("127.0.0.1", SLURMDBD_PORT), SLURMDBD_LOG, deadline)
    changes.append("slurmdbd (pid %d)" % proc.pid)
    clusters = slurm_run(["sacctmgr", "--noheader", "--parsable2", "list", "cluster", "format=cluster"]).stdout
    if SLURM_CLUSTER not in clusters.split():
        slurm_run(["sacctmgr", "--immediate", "add", "cluster", SLURM_CLUSTER])
        changes.append("cluster %s registered" % SLURM_CLUSTER)
    return changes


def port_open(address, port):
    """Something accepts TCP connections on address:port."""
    try:
        with socket.create_connection((address, port), timeout=0.5):
            return True
    except OSError:
        return False


def slurmdbd_pids(procs):
    """The lab's slurmdbd: its command line does not name the lab (it has no option for its configuration
    file), its environment does (SLURM_CONF)."""
    return {p for p, (_ns, cmd) in procs.items() if cmd.split(" ")[0].endswith("slurmdbd")
            and slurm_env_of(p) == str(SLURM_CONF)}


def slurm_env_of(pid):
    """The SLURM_CONF a process was started with (slurmdbd has no option for its configuration file)."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as handle:
            for item in handle.read().split(b"\0"):
                if item.startswith(b"SLURM_CONF="):
                    return item.split(b"=", 1)[1].decode(errors="replace")
    except OSError:
        pass
    return None


def slurm_run(argv, timeout=30):
    """A Slurm client command on the lab's cluster; LabError with its output when it fails."""
    debug(" ".join(argv))
    proc = subprocess.run(argv, env=slurm_env(), capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise LabError("%s failed (rc %d): %s" % (" ".join(argv), proc.returncode, (proc.stderr or proc.stdout).strip()))
    return proc


def slurm_answers():
    """slurmctld answers `scontrol ping` as UP."""
    proc = subprocess.run(["scontrol", "ping"], env=slurm_env(), capture_output=True, text=True,
                          timeout=20, check=False)
    return proc.returncode == 0 and "UP" in proc.stdout


def slurmd_running(node, procs):
    """PID of the node's slurmd when it runs in the node's network namespace and sees the node's mounts
    (those of its sshd), else None."""
    pid = daemon_pid(slurm_node_dir(node.name) / "slurmd.pid", str(SLURM_CONF), procs, netns_inode(node.ns))
    if pid is None or node.pid is None or not sees_planned_mounts(pid, node):
        return None
    return pid


def start_slurmd(node):
    """slurmd in the namespaces of the node's sshd: it has the node's hostname (= its NodeName), address,
    /tmp, /srv/trainops and /etc/hosts, as do the jobs it starts."""
    ensure_dir(slurm_node_dir(node.name), 0o755)
    pidfile = slurm_node_dir(node.name) / "slurmd.pid"
    if pidfile.exists():
        pidfile.unlink()
    checkpoint("%s:slurmd" % node.name)
    # (a mount namespace of its own below the node's: slurmd's cgroup plugin, which it loads whatever
    # the task and proctrack plugins, wants the machine's cgroup hierarchies that `ip netns exec` hides)
    script = "\n".join(["set -e"] + cgroup_mount_lines()
                       + ["exec slurmd -D -N %s -f %s" % (shlex.quote(node.name), shlex.quote(str(SLURM_CONF)))])
    return spawn(["nsenter", "--target", str(node.pid), "--mount", "--uts", "--net", "--",
                  "unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script],
                 slurm_node_dir(node.name) / "slurmd.out")


def slurmd_pids(node, procs):
    """The node's slurmd processes (its own or stale ones, by NodeName) and its job steps' slurmstepd."""
    inode = netns_inode(node.ns)
    return {p for p, (ns, cmd) in procs.items()
            if ("slurmd" in cmd and "-N %s " % node.name in cmd + " " and str(SLURM_CONF) in cmd)
            or (inode is not None and ns == inode and cmd.startswith("slurmstepd"))}


def ensure_slurmds(nodes, conf_changed, procs, deadline):
    """A slurmd per node, in its namespaces; restarted with a new configuration or a new sshd."""
    starting = []
    for node in nodes:
        pid = slurmd_running(node, procs)
        if pid and not conf_changed:
            continue
        terminate(slurmd_pids(node, procs))
        starting.append((node, start_slurmd(node)))
        node.changes.append("slurmd restarted" if pid else "slurmd")
    for node, proc in starting:
        pidfile = slurm_node_dir(node.name) / "slurmd.pid"
        wait_for("%s: slurmd" % node.name, proc, lambda: read_pid(pidfile) == proc.pid,
                 slurm_node_dir(node.name) / "slurmd.log", deadline)


def slurm_node_states():
    """{node name: state} as `sinfo` reports it (idle, alloc, down*, ...)."""
    proc = subprocess.run(["sinfo", "--noheader", "--Node", "--format", "%N %T"], env=slurm_env(),
                          capture_output=True, text=True, timeout=20, check=False)
    return dict(line.split()[:2] for line in proc.stdout.splitlines() if len(line.split()) >= 2)


def slurm_usable(state):
    """A node state of `sinfo` in which the node takes jobs or runs one (not down, drained, unknown)."""
    return state.lower() in ("idle", "allocated", "mixed", "completing")


def slurm_status(procs):
    """The controller side of the lab's Slurm: the PIDs of munged and slurmctld (None when not running)."""
    return {"munged_pid": daemon_pid(MUNGE_PIDFILE, str(MUNGE_SOCKET), procs),
            "slurmctld_pid": daemon_pid(CTLD_PIDFILE, str(SLURM_CONF), procs),
            "conf": str(SLURM_CONF)}


def wait_slurm_nodes(nodes, deadline):
    """Until every node is known to slurmctld and usable (idle, or running a job)."""
    states = {}
    while time.monotonic() < deadline:
        states = slurm_node_states()
        if all(slurm_usable(states.get(node.name, "")) for node in nodes):
            return
        time.sleep(0.3)
    bad = ["%s %s" % (node.name, states.get(node.name, "(unknown)")) for node in nodes
           if not slurm_usable(states.get(node.name, ""))]
    raise LabError("Slurm nodes not usable: %s (logs %s/<node>/slurmd.log, %s)" % (", ".join(bad), SLURM_DIR, CTLD_LOG))


def ensure_slurm(nodes, ctl_address, deadline):
    """--slurm: munged, slurmctld and every node's slurmd running on the current configuration, and every
    node usable. The changes (the nodes' own go to the node)."""
    ensure_dir(SLURM_DIR, 0o755)
    conf_changed = write_if_changed(SLURM_CONF, render_slurm_conf(nodes, ctl_address), 0o644)
    changes = ["slurm.conf"] if conf_changed else []
    if write_if_changed(GRES_CONF, render_gres_conf(nodes), 0o644):
        conf_changed = True
        changes.append("gres.conf")
    new_devices = ensure_gpu_files(nodes)
    if new_devices:
        conf_changed = True
        changes.append("GPU device files of %s" % ", ".join(new_devices))
    procs = scan_processes()
    munge = ensure_munge(procs, deadline)
    changes += munge
    if munge:
        procs = scan_processes()
    dbd = ensure_slurmdbd(procs, deadline)
    changes += dbd
    checkpoint("slurmctld")
    changes += ensure_slurmctld(conf_changed or bool(munge) or bool(dbd), scan_processes(), deadline)
    ensure_slurmds(nodes, conf_changed or bool(munge), scan_processes(), deadline)
    wait_slurm_nodes(nodes, deadline)
    return changes


def stop_slurm():
    """Stop the lab's Slurm (slurmds and their job steps, slurmctld, munged) and remove its files.
    True when there was something to remove."""
    procs = scan_processes()
    marker = str(SLURM_DIR) + "/"
    pids = {p for p, (_ns, cmd) in procs.items() if marker in cmd} | slurmdbd_pids(procs)
    lab_inodes = {netns_inode(name) for name in lab_netns_names()} - {None}
    steps = {p for p, (ns, cmd) in procs.items() if cmd.startswith("slurmstepd") and ns in lab_inodes}
    if not pids and not steps and not SLURM_DIR.exists():
        return False
    terminate(pids | steps)
    if SLURM_DIR.exists():
        shutil.rmtree(SLURM_DIR)
    return True


# ---------------------------------------------------------------------------------------------
# Container engine per node (up --engine docker)

def same_inode(path_a, path_b):
    try:
        a, b = os.stat(path_a), os.stat(path_b)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def has_private_run(pid, node):
    """The process's mount namespace shows the node's own /run and the cgroup hierarchies (looked at
    through /proc/PID/root): the mounts of a node with an engine."""
    try:
        cgroups = os.listdir("/proc/%d/root/sys/fs/cgroup" % pid)
    except OSError:
        cgroups = []
    return same_inode("/proc/%d/root/run" % pid, node.run_dir) and bool(cgroups)


def sees_planned_mounts(pid, node):
    """The process's mount namespace shows the node's homes, private directories and /etc/hosts from
    the machine directories the node's shape says (a shared or private /home, root's home)."""
    return all(same_inode("/proc/%d/root%s" % (pid, inner), outer) for inner, outer in node.views())


def mnt_ns(pid):
    try:
        return os.readlink("/proc/%d/ns/mnt" % pid)
    except (OSError, TypeError):
        return None


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
    debug(" ".join(shlex.quote(a) for a in argv))
    with open(node.docker_log, "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,  # pylint: disable=consider-using-with
                                start_new_session=True, close_fds=True, cwd="/")
    return proc


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


# ---------------------------------------------------------------------------------------------
# The training user (up --user NAME) and the homes

def user_entry(name):
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def user_entry_by_uid(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def group_gid(name):
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        return None


def path_dirs(path):
    """Every directory a lookup of ``path`` walks through, the targets of symlinks on the way included."""
    dirs, current = [], Path("/")
    for part in Path(os.path.abspath(path)).parts[1:]:
        dirs.append(current)
        step = current / part
        if step.is_symlink():
            dirs += path_dirs(current / os.readlink(step))
            step = step.resolve()
        current = step
    return dirs


def permits(path, bits, uid, gids):
    """``bits`` (4 read, 1 search/execute) of ``path`` allow the user (uid None: a user not made yet,
    so the bits for others)."""
    st = os.stat(path)
    if uid is not None and st.st_uid == uid:
        shift = 6
    elif uid is not None and st.st_gid in gids:
        shift = 3
    else:
        shift = 0
    return (st.st_mode >> shift) & bits == bits


def unreachable_for(user):
    """Why ``user`` could not run the checkout's .venv/bin/python or read the repository on the nodes
    (they share the machine's files), or None: the first directory on the way it cannot search."""
    entry = user_entry(user)
    uid = entry.pw_uid if entry else None
    gids = set(os.getgrouplist(user, entry.pw_gid)) if entry else set()
    python = REPO / ".venv" / "bin" / "python"
    for target, bits in ((REPO, 5), (python, 1)):
        if not target.exists():
            return "%s does not exist" % target
        for directory in path_dirs(target) + [target.resolve()]:
            need = bits if directory == target.resolve() else 1
            if not permits(directory, need, uid, gids):
                st = os.stat(directory)
                owner = user_entry_by_uid(st.st_uid)
                return ("%s cannot %s %s%s: %s (mode %04o, owner %s) is not %s by others, and the nodes run the "
                        "repository's Ansible modules as %s with that interpreter. Fix: chmod o+%s %s (or use a "
                        "checkout and venv whose every directory is)" % (
                            user, "read" if need == 5 else "reach", target,
                            " (-> %s)" % target.resolve() if target.resolve() != target else "", directory,
                            st.st_mode & 0o7777, owner, "readable" if need == 5 else "searchable",
                            user, "rx" if need == 5 else "x", directory))
    return None


def login_shell():
    for shell in ("/bin/bash", "/bin/sh"):
        if os.access(shell, os.X_OK):
            return shell
    raise LabError("no /bin/bash or /bin/sh for the training user's login shell")


def existing_user_problem(entry):
    """Why an existing account cannot be the lab's training user (sshd must let it in), or None."""
    name = entry.pw_name
    if entry.pw_dir != "/home/" + name:
        return "its home is %s; the lab's training user has /home/%s (userdel it or pick another name)" % (
            entry.pw_dir, name)
    if entry.pw_shell.endswith(("nologin", "false")) or not os.access(entry.pw_shell, os.X_OK):
        return "its login shell is %s (usermod -s /bin/bash %s)" % (entry.pw_shell, name)
    try:
        shadow = {line.split(":")[0]: line.split(":")[1] for line in Path("/etc/shadow").read_text().splitlines()
                  if line.count(":") >= 2}
    except OSError:
        shadow = {}
    if shadow.get(name, "").startswith("!"):
        return "its password is locked (!), and sshd without PAM refuses locked accounts (usermod -p '*' %s)" % name
    return None


def ensure_user(name, state):
    """The training user exists (useradd when missing, recorded in ``state["created_user"]``); True
    when created."""
    entry = user_entry(name)
    if entry is not None:
        problem = existing_user_problem(entry)
        if problem:
            raise LabError("--user %s: the account exists, but %s" % (name, problem))
        return False
    # not locked ('*': no password works, keys do), home /home/NAME made by the lab on the nodes
    run(["useradd", "--no-create-home", "--home-dir", "/home/" + name, "--shell", login_shell(),
         "--user-group", "--password", "*", name])
    state["created_user"] = name
    return True


def ensure_docker_member(name, state):
    """--engine docker with a training user: it is in group docker (made if missing) and so may use its
    node's daemon socket. Returns the changes."""
    changes = []
    if group_gid("docker") is None:
        run(["groupadd", "--system", "docker"])
        state["created_group"] = "docker"
        changes.append("group docker")
    if name not in grp.getgrnam("docker").gr_mem:
        run(["gpasswd", "--add", name, "docker"])
        state["docker_member"] = name
        changes.append("%s in group docker" % name)
    return changes


def drop_docker_member(state):
    """Take back the docker membership (and group) the lab gave; the changes."""
    changes = []
    member = state.pop("docker_member", None)
    if member and user_entry(member) and member in grp.getgrnam("docker").gr_mem:
        run(["gpasswd", "--delete", member, "docker"], check=False)
        changes.append("%s out of group docker" % member)
    return changes


def remove_user(name):
    """userdel a user the lab created (its homes go with the lab's state)."""
    if user_entry(name) is not None:
        run(["userdel", name])
    for home in [SHARED_HOME / name] + list(STATE_ROOT.glob("node[0-9]*/home/" + name)):
        if home.is_dir() and not home.is_symlink():
            shutil.rmtree(home)


def ensure_owned_dir(path, mode, uid, gid):
    """A directory with this mode and owner; True when created or changed."""
    created = ensure_dir(path, mode)
    st = os.stat(path)
    if (st.st_uid, st.st_gid) != (uid, gid):
        os.chown(path, uid, gid)
        return True
    return created


def ensure_user_keys(user, public_key):
    """The training user's authorized keys (sshd_config: AuthorizedKeysFile <dir>/%u, Match User root:
    the lab's authorized_keys): <dir> root's 0755, the file the user's own, 0600. The changes."""
    changes = []
    if ensure_dir(USER_KEYS_DIR, 0o755):
        changes.append("authorized_keys.d")
    for path in USER_KEYS_DIR.iterdir():
        if path.name != user:
            path.unlink()
    if user == "root":
        return changes
    entry = user_entry(user)
    path = USER_KEYS_DIR / user
    if write_if_changed(path, public_key, 0o600):
        changes.append("authorized_keys.d/%s" % user)
    if (path.stat().st_uid, path.stat().st_gid) != (entry.pw_uid, entry.pw_gid):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return changes


def keys_file(user):
    return AUTHORIZED_KEYS if user == "root" else USER_KEYS_DIR / user


# ---------------------------------------------------------------------------------------------
# SSH

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


# ---------------------------------------------------------------------------------------------
# Inventory

def yq(value):
    """A YAML scalar (JSON strings are valid YAML double-quoted scalars)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value))


def connection_var_lines(inv, shape):
    """The variables every lab node needs (how Ansible logs in, the Python, the node root), as YAML lines:
    the same in hosts.yml and in the Slurm allocation's source."""
    python = REPO / ".venv" / "bin" / "python"
    common = "-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes" % shlex.quote(
        str(inv / "known_hosts"))
    lines = ["ansible_connection: ansible.builtin.ssh",
             "ansible_user: %s" % shape.user,
             "ansible_ssh_private_key_file: %s" % yq(inv / "id_ed25519"),
             "ansible_ssh_common_args: %s" % yq(common),
             "ansible_python_interpreter: %s" % yq(python),
             "trainops_python: %s" % yq(python)]
    if not shape.shared_home:
        # (with a shared home the collection's default ~/.trainops lands on it, which is the point)
        lines.append("trainops_node_root: %s" % yq(NODE_ROOT))
    return lines


def render_slurm_source(inv, net, nodes):
    """allocation.slurm.yml: the trainops.multinode.slurm inventory of the lab's nodes, for use inside an
    allocation (salloc, sbatch). The node names Slurm gives resolve on the nodes only (/etc/hosts), so the
    addresses come from a map; the master address is the first allocated node's training address."""
    shape = nodes[0].shape
    out = ["---",
           "# Generated by `python3 hack/lab.py up --slurm` (docs/slurm.md): the nodes of the current Slurm",
           "# allocation, in allocation order, with what Ansible needs to reach the lab's nodes. Inside",
           "# `salloc -N 4` or an sbatch script (SLURM_CONF=%s):" % SLURM_CONF,
           "#   ansible-playbook -i %s playbooks/launch.yml" % (inv / SLURM_SOURCE),
           "plugin: trainops.multinode.slurm",
           "vars:"]
    out += ["  " + line for line in connection_var_lines(inv, shape)]
    out += ["  trainops_training_network: %s" % yq(net),
            "  trainops_gpu_vendor: none",
            "  # where each node is reached (ssh) and its address on the training network",
            "  trainops_lab_ssh_addresses:"]
    out += ["    %s: %s" % (node.name, yq(node.ssh_address)) for node in nodes]
    out += ["  trainops_lab_addresses:"]
    out += ["    %s: %s" % (node.name, yq(node.address)) for node in nodes]
    out += ["compose:",
            "  ansible_host: trainops_lab_ssh_addresses[inventory_hostname]",
            "  # (read from the first node only: the rendezvous address)",
            "  trainops_master_addr: trainops_lab_addresses[inventory_hostname]",
            "strict: true",
            ""]
    return "\n".join(out)


def render_hosts_yml(inv, net, nodes, count):
    shape = nodes[0].shape
    out = ["---",
           "# Generated by `python3 hack/lab.py up --nodes %s` (make lab); `make lab-down` removes it." % " ".join(
               [str(count)] + shape.options()),
           "# %d lab nodes: network namespaces on this machine, each with its own sshd, NIC, hostname," % count,
           "# /srv/trainops and /tmp.  Host keys are checked against known_hosts next to this file.",
           "# Shape: %s (docs/lab.md)." % shape.describe(),
           "trainops_nodes:",
           "  hosts:"]
    for node in nodes:
        out.append("    %s:" % node.name)
        out.append("      ansible_host: %s" % yq(node.ssh_address))
        out.append("      trainops_lab_ifname: %s" % yq(node.ifname))
        if node.index == 1:
            out.append("      trainops_master: true")
    out += ["  vars:"] + ["    " + line for line in connection_var_lines(inv, shape)]
    if shape.mgmt_net:
        out += ["    # The master's address on the training network: SSH (ansible_host) goes over the management one.",
                "    trainops_master_addr: %s" % yq(nodes[0].address),
                "    # The training network (CIDR): every node's training interface and the master address are in it.",
                "    trainops_training_network: %s" % yq(net)]
    else:
        out += ["    trainops_master_addr: %s" % yq(nodes[0].address),
                "    trainops_training_network: %s" % yq(net)]
    out += ["    trainops_nproc_per_node: 2",
            "    trainops_gpu_vendor: none",
            "    trainops_lab_shape: {shared_home: %s, user: %s, mgmt_net: %s}" % (
                yq(shape.shared_home), yq(shape.user), yq(shape.mgmt_net))]
    if nodes[0].engine:
        out.append("    trainops_lab_engine: %s" % yq(nodes[0].engine))
    out.append("")
    return "\n".join(out)


def render_known_hosts(nodes):
    """Each node's real host key under its name and addresses (management first, then training)."""
    lines = []
    for node in nodes:
        keytype, key = Path(str(node.host_key) + ".pub").read_text().split()[:2]
        names = [node.name] + [a for a in (node.mgmt_address, node.address) if a]
        lines.append("%s %s %s" % (",".join(names), keytype, key))
    return "\n".join(lines) + "\n"


def render_lab_json(inv, net, mgmt, nodes):
    shape = nodes[0].shape
    train, mgmt_seg = segments(net, mgmt)
    data = {
        "version": 1,
        "shape": shape.as_dict(),
        "user": shape.user,
        "shared_home_dir": str(SHARED_HOME) if shape.shared_home else None,
        "subnet": str(net),
        "mgmt_subnet": str(mgmt) if mgmt else None,
        "controller": {"ifname": CTL_LINK, "address": train.ctl_address,
                       "mgmt_ifname": CTL_MGMT_LINK if mgmt else None, "mgmt_address": mgmt_seg.ctl_address},
        "bridge": {"namespace": BR_NS, "ifname": BRIDGE, "mgmt_ifname": MGMT_BRIDGE if mgmt else None},
        "inventory": str(inv / "hosts.yml"),
        "private_key": str(inv / "id_ed25519"),
        "known_hosts": str(inv / "known_hosts"),
        "authorized_keys": str(keys_file(shape.user)),
        "state_dir": str(STATE_ROOT),
        "nodes": [{
            "name": node.name,
            "hostname": node.name,
            "namespace": node.ns,
            "ssh_address": node.ssh_address,
            "address": node.address,
            "ifname": node.ifname,
            "mgmt_address": node.mgmt_address,
            "mgmt_ifname": node.mgmt_ifname,
            "bridge_port": node.peer,
            "mac": node.mac,
            "sshd_pid": node.pid,
            "sshd_config": str(node.config),
            "state_dir": str(node.state),
            "home": node.home,
            "home_on_host": str(node.home_on_host),
            "node_root": node.node_root,
            "master": node.index == 1,
        } for node in nodes],
    }
    if shape.slurm:
        data["slurm"] = {"conf": str(SLURM_CONF), "cluster": SLURM_CLUSTER, "partition": SLURM_PARTITION,
                         "controller": slurm_controller_name(), "source": str(inv / SLURM_SOURCE),
                         "state_dir": str(SLURM_DIR)}
    if nodes[0].engine:
        # the node's daemon as the controller reaches it (on the node: the default socket)
        data["engine"] = nodes[0].engine
        for entry, node in zip(data["nodes"], nodes):
            entry.update({"engine_pid": node.engine_pid, "docker_host": "unix://%s" % node.docker_sock,
                          "docker_data_root": str(node.docker_root), "docker_log": str(node.docker_log),
                          "docker_cgroup_parent": node.cgroup_parent})
    return json.dumps(data, indent=2) + "\n"


# ---------------------------------------------------------------------------------------------
# up / down / status

def remove_node(index, procs):
    node = Node(index, ipaddress.ip_network(DEFAULT_SUBNET))
    terminate(node_pids(node, procs) | engine_pids(node, procs))
    remove_cgroups(node.cgroup_parent)
    for peer in (node.peer, node.mgmt_peer):
        run(["ip", "-n", BR_NS, "link", "del", peer], check=False)
    delete_netns(node.ns)
    if node.state.exists():
        shutil.rmtree(node.state)


def require_engine(engine):
    if engine == "docker":
        for prog in (DOCKERD, "containerd", "nsenter"):
            if not shutil.which(prog):
                raise LabError("--engine docker needs %s on this machine: `bash hack/engine.sh` installs "
                               "docker.io from Debian's packages" % prog)


USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


def requested_shape(args, state):
    """The shape and management subnet an `up` asks for (an option left out takes its shape away)."""
    engine = getattr(args, "engine", None) or "none"
    require_engine(engine)
    user = getattr(args, "user", None) or "root"
    if not USER_NAME.match(user):
        raise LabError("--user %r: not a user name (lower case letters, digits, _ and -)" % user)
    shape = Shape(getattr(args, "shared_home", False), user, getattr(args, "mgmt_net", False), engine,
                  getattr(args, "slurm", False))
    if shape.slurm:
        require_slurm()
    mgmt_subnet = getattr(args, "mgmt_subnet", None)
    if mgmt_subnet and not shape.mgmt_net:
        raise LabError("--mgmt-subnet needs --mgmt-net")
    if shape.mgmt_net:
        mgmt_subnet = mgmt_subnet or state.get("mgmt_subnet") or DEFAULT_MGMT_SUBNET
    if user != "root":
        problem = unreachable_for(user)
        if problem:
            raise LabError("--user %s: %s" % (user, problem))
    return shape, mgmt_subnet


def existing_node_indexes():
    return sorted({node_index(ns) for ns in lab_netns_names() if node_index(ns)} |
                  {int(p.name[4:]) for p in STATE_ROOT.glob("node[0-9]*") if p.name[4:].isdigit()})


def restart_for_new_layout(old, shape, net):
    """A node whose layout (homes, login user, SSH network) changes is restarted: its sshd, the sessions
    and jobs in it and its engine stop now, before its links change (so the controller's ssh
    connections, ControlPersist masters included, see them close), and start again with the new one."""
    if old.node_layout() == shape.node_layout():
        return []
    procs = scan_processes()
    for index in existing_node_indexes():
        node = Node(index, net)
        if stop_engine(node, procs):
            procs = scan_processes()
        terminate(node_pids(node, procs))
    return ["shape %s -> %s" % (old.describe(), shape.describe())]


def converge_user(shape, state):
    """The training user and its docker membership as the shape says; a user or membership an earlier
    `up` made and the shape no longer has goes. The changes (``state`` records what the lab made)."""
    changes = []
    member = state.get("docker_member")
    if member and (shape.engine == "none" or member != shape.user):
        changes += drop_docker_member(state)
    created = state.get("created_user")
    if created and created != shape.user:
        remove_user(created)
        del state["created_user"]
        changes.append("user %s removed" % created)
    if shape.user != "root":
        if ensure_user(shape.user, state):
            changes.append("user %s" % shape.user)
        if shape.engine == "docker":
            changes += ensure_docker_member(shape.user, state)
    return changes


def ensure_homes(nodes, shape):
    """The homes: the shared /home (and root's home in it) or each node's own, and the training user's
    home in them, /home/NAME 0700 owned by the user. The changes (per node ones go to the node)."""
    changes = []
    if shape.shared_home:
        if ensure_dir(SHARED_HOME, 0o755):
            changes.append("shared home")
        if shape.shared_root_home:
            ensure_dir(SHARED_HOME / "root", HOME_MODE)
            ensure_dir(SHARED_HOME / "root" / ".ansible", 0o700)  # the mount point of the node's own
    if not shape.shared_root_home and (SHARED_HOME / "root").is_dir():
        shutil.rmtree(SHARED_HOME / "root")  # root's shared home goes with the shape
        changes.append("root's shared home removed")
    for node in nodes:
        if not shape.shared_home and ensure_dir(node.home_dir, 0o755):
            node.changes.append("home")
    if shape.user == "root":
        return changes
    entry = user_entry(shape.user)
    for home in sorted({node.home_on_host for node in nodes}):
        if ensure_owned_dir(home, HOME_MODE, entry.pw_uid, entry.pw_gid):
            changes.append("home %s" % home)
    return changes


def owner_of_node_root(shape):
    """The training user owns each node's /srv/trainops (the node's scratch, as an admin would give it)."""
    entry = user_entry(shape.user)
    return entry.pw_uid, entry.pw_gid


def up(args):
    started = time.monotonic()
    require_root()
    ensure_packages()
    require_netns()
    inv = Path(args.inventory_dir).resolve()
    with Lock():
        state = read_json(STATE_FILE, {})
        count = args.nodes or state.get("nodes") or DEFAULT_NODES
        subnet = args.subnet or state.get("subnet") or DEFAULT_SUBNET
        shape, mgmt_subnet = requested_shape(args, state)
        engine = shape.engine
        net, mgmt, nodes = plan(count, subnet, mgmt_subnet, shape)
        train_seg, mgmt_seg = segments(net, mgmt)
        for node in nodes:
            node.engine = engine if engine != "none" else None
        say("lab: %d node%s on %s, controller %s %s%s%s" % (
            count, "s" if count > 1 else "", net, CTL_LINK, net.network_address + 1,
            ", management %s, controller %s %s" % (mgmt, CTL_MGMT_LINK, mgmt_seg.ctl_address) if mgmt else "",
            "; %s" % shape.describe() if shape.describe() != "plain" else ""))
        changes = []

        # Host-side directories and the controller's key.
        ensure_dir(STATE_ROOT, 0o755)
        created_dirs = list(state.get("created_dirs", []))
        for path in (NODE_ROOT, "/root/.ansible") + ((DOCKER_DATA_ROOT,) if engine != "none" else ()):
            mode = 0o700 if path.endswith(".ansible") else 0o755
            if ensure_dir(path, mode, fix_mode=False) and path not in created_dirs:
                created_dirs.append(path)
        ensure_dir("/run/sshd", 0o755, fix_mode=False)
        ensure_dir(inv, 0o755, fix_mode=False)
        old_inv = state.get("inventory_dir")
        if state:
            changes += restart_for_new_layout(Shape.saved(state), shape, net)
        changes += converge_user(shape, state)
        saved = {"nodes": count, "subnet": str(net), "inventory_dir": str(inv), "created_dirs": created_dirs,
                 "shape": {k: v for k, v in shape.as_dict().items() if k not in ("engine", "slurm")}}
        if engine != "none":
            saved["engine"] = engine
        if shape.slurm:
            saved["slurm"] = True
        if mgmt:
            saved["mgmt_subnet"] = str(mgmt)
        saved.update({k: state[k] for k in ("created_user", "created_group", "docker_member") if k in state})
        write_if_changed(STATE_FILE, json.dumps(saved, indent=2) + "\n")
        if old_inv and old_inv != str(inv):
            remove_inventory(Path(old_inv))
        if ensure_keypair(inv / "id_ed25519", "trainops-lab-controller"):
            changes.append("controller key")
        public_key = (inv / "id_ed25519.pub").read_text()
        if write_if_changed(AUTHORIZED_KEYS, public_key, 0o600):
            changes.append("authorized_keys")
        changes += ensure_user_keys(shape.user, public_key)
        changes += ensure_homes(nodes, shape)
        srv_owner = owner_of_node_root(shape)

        # Shrink: nodes beyond N go, with their processes.
        procs = scan_processes()
        for index in [i for i in existing_node_indexes() if i > count]:
            remove_node(index, procs)
            say("  lab-node%02d  removed" % index)
            changes.append("removed lab-node%02d" % index)

        changes += ["bridge: " + c for c in ensure_bridge(train_seg)]
        changes += ["bridge: " + c for c in (ensure_bridge(mgmt_seg) if mgmt else remove_bridge(mgmt_seg))]
        checkpoint("bridge")
        br_links = links_by_name(BR_NS, "link")

        def prepare(node):
            restart = False
            for sub, _target, mode in NODE_MOUNTS:
                ensure_dir(node.state / sub, mode)
            if ensure_owned_dir(node.state / "srv", 0o755, *srv_owner) and node.shape.user != "root":
                node.changes.append("%s owns %s" % (node.shape.user, NODE_ROOT))
            if ensure_keypair(node.host_key, "root@" + node.name):
                node.changes.append("host key")
                restart = True
            if write_if_changed(node.config, node.sshd_config(), 0o600):
                node.changes.append("sshd_config")
                restart = True
            if write_if_changed(node.hosts, hosts_file(net, nodes, node), 0o644, in_place=True):
                node.changes.append("/etc/hosts")
            node.engine_restart = prepare_engine(node) if node.engine else False
            checkpoint("%s:netns" % node.name)
            if ensure_netns(node.ns):
                node.changes.append("netns")
            node.changes += ensure_node_link(node, br_links)
            return restart

        with ThreadPoolExecutor(max_workers=8) as pool:
            restarts = list(pool.map(prepare, nodes))

        # sshd: keep a healthy one (same config, current namespace, the planned mounts); else (re)start it.
        procs = scan_processes()
        launched = []
        for node, restart in zip(nodes, restarts):
            pid = sshd_running(node, procs)
            # with an engine, the node's mounts include its private /run (and without, they do not)
            right_view = pid is not None and has_private_run(pid, node) == bool(node.engine) and sees_planned_mounts(
                pid, node)
            if right_view and not restart:
                node.pid = pid
                continue
            # The old listener goes; its sessions too when its namespace is not the node's
            # current one (the namespace was re-created) or they see the wrong mounts (a ControlPersist
            # master would keep serving that view), else they keep running. (The engine is
            # ensure_engines' business.)
            current = netns_inode(node.ns)
            listeners = {p for p in node_pids(node, procs) if str(node.config) in procs[p][1]}
            orphaned = {procs[p][0] for p in listeners} - {current, None}
            stale = {p for p in node_pids(node, procs) if mnt_ns(p) == mnt_ns(pid)} - engine_pids(node, procs) \
                if pid is not None and not right_view else set()
            terminate(listeners | stale | {p for p, (inode, _c) in procs.items() if inode in orphaned})
            launched.append((node, start_sshd(node)))
            node.changes.append("sshd restarted" if pid is not None else "sshd")
        deadline = time.monotonic() + args.timeout
        for node, proc in launched:
            node.pid = wait_sshd(node, proc, deadline)
        ensure_engines(nodes, deadline)
        if shape.slurm:
            ctl_address = (mgmt_seg if mgmt else train_seg).ctl_address  # where the nodes reach slurmctld
            changes += ["slurm: " + c for c in ensure_slurm(nodes, ctl_address, deadline + 60)]
        elif stop_slurm():
            changes.append("slurm removed")

        for node in nodes:
            if node.changes:
                say("  %s  %-10s %-16s %s  %s (sshd pid %s)" % (
                    node.name, node.ifname, node.address, node.ns, ", ".join(node.changes), node.pid))
                changes += ["%s: %s" % (node.name, c) for c in node.changes]

        checkpoint("inventory")
        for name, text, mode in (("known_hosts", render_known_hosts(nodes), 0o644),
                                 ("hosts.yml", render_hosts_yml(inv, net, nodes, count), 0o644),
                                 ("lab.json", render_lab_json(inv, net, mgmt, nodes), 0o644)):
            if write_if_changed(inv / name, text, mode):
                changes.append(name)
        if shape.slurm:
            if write_if_changed(inv / SLURM_SOURCE, render_slurm_source(inv, net, nodes), 0o644):
                changes.append(SLURM_SOURCE)
        elif (inv / SLURM_SOURCE).exists():
            (inv / SLURM_SOURCE).unlink()
            changes.append(SLURM_SOURCE + " removed")

        wait_ssh(inv, nodes, args.timeout)
    say("lab: %d node%s answer ssh (strict host keys%s); inventory %s" % (
        count, "s" if count > 1 else "", ", as root and %s" % shape.user if shape.user != "root" else "",
        _rel(inv / "hosts.yml")))
    say("lab: up in %.1fs, %s" % (time.monotonic() - started,
                                  "%d change%s" % (len(changes), "s" if len(changes) > 1 else "")
                                  if changes else "no changes"))
    return 0


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


def _rel(path):
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def remove_inventory(inv):
    removed = []
    for name in GENERATED + tuple(n + ".tmp" for n in GENERATED):
        path = inv / name
        if path.exists() or path.is_symlink():
            path.unlink()
            removed.append(name)
    return removed


def down(args):
    started = time.monotonic()
    require_root()
    if not shutil.which("ip"):
        raise LabError("`ip` not found (apt-get install iproute2)")
    with Lock():
        state = read_json(STATE_FILE, {})
        namespaces = lab_netns_names()
        stale_files = [p.name for p in NETNS_DIR.glob(PREFIX + "-*")] if NETNS_DIR.is_dir() else []
        namespaces = sorted(set(namespaces) | set(stale_files), key=lambda n: (n == BR_NS, n))

        # 1. Every process of the lab: in its namespaces, or an sshd on a lab config.
        procs = scan_processes()
        inodes = {netns_inode(ns) for ns in namespaces} - {None}
        marker = str(STATE_ROOT) + "/"
        pids = {pid for pid, (inode, cmdline) in procs.items() if inode in inodes or marker in cmdline}
        pids |= slurmdbd_pids(procs)  # (up --slurm: the one daemon whose command line does not name the lab)
        # the containers of the nodes' engines (up --engine docker), also those with a network
        # namespace of their own: by the cgroup their node's dockerd put them in
        cgroups = {"%s-node%s" % (PREFIX, name[4:]) for name in os.listdir(STATE_ROOT)
                   if name.startswith("node") and name[4:].isdigit()} if STATE_ROOT.is_dir() else set()
        cgroups |= {ns for ns in namespaces if node_index(ns)}
        pids |= cgroup_members(sorted(cgroups), procs)
        terminate(pids)
        for name in cgroups:
            remove_cgroups(name)

        # 2. Links (explicitly: a namespace kept alive by some mount would keep its veths) and
        #    namespaces, bridge last.
        for ns in namespaces:
            if ns != BR_NS and netns_inode(ns) is not None:
                for name in links_by_name(ns, "link"):
                    if name != "lo":
                        run(["ip", "-n", ns, "link", "del", name], check=False)
            delete_netns(ns)
        ctl_links = links_by_name(None, "link")
        for link in (CTL_LINK, CTL_MGMT_LINK):
            if link in ctl_links:
                run(["ip", "link", "del", link], check=False)

        # 3. Mounts left in this mount namespace that name the lab.
        with open("/proc/self/mountinfo") as handle:
            mounts = [line.split()[4] for line in handle]
        for target in sorted((m for m in mounts if PREFIX in m), key=len, reverse=True):
            run(["umount", "-l", target], check=False)

        # 4. The training user the lab created (its processes are gone), or the docker membership it
        #    gave an existing one, and a docker group it made.
        undone = forget_accounts(state)

        # 5. Files: state (homes included), generated inventory, mount points it created (when empty).
        inventories = {Path(args.inventory_dir).resolve()}
        if state.get("inventory_dir"):
            inventories.add(Path(state["inventory_dir"]))
        removed = []
        for inv in inventories:
            removed += remove_inventory(inv)
        if STATE_ROOT.exists():
            shutil.rmtree(STATE_ROOT)
        for path in state.get("created_dirs", []):
            try:
                os.rmdir(path)
            except OSError:
                pass
    say("lab: down in %.1fs: %d process%s stopped, %d namespace%s, %s removed%s" % (
        time.monotonic() - started, len(pids), "" if len(pids) == 1 else "es",
        len(namespaces), "" if len(namespaces) == 1 else "s",
        "inventory files" if removed else "no inventory files", "".join("; " + u for u in undone)))
    return 0


def forget_accounts(state):
    """Undo what `up --user` did to the machine's accounts: userdel the user it created, take back
    the docker membership it gave, groupdel the docker group it made. What it undid."""
    undone = drop_docker_member(state)
    created = state.get("created_user")
    if created and user_entry(created) is not None:
        remove_user(created)
        undone.append("user %s removed" % created)
    group = state.get("created_group")
    if group and group_gid(group) is not None and not grp.getgrnam(group).gr_mem:
        run(["groupdel", group], check=False)
        undone.append("group %s removed" % group)
    return undone


def status(args):
    require_root()
    state = read_json(STATE_FILE, {})
    inv = Path(state.get("inventory_dir") or Path(args.inventory_dir).resolve())
    namespaces = lab_netns_names()
    indexes = sorted({node_index(ns) for ns in namespaces if node_index(ns)} |
                     set(range(1, int(state.get("nodes", 0)) + 1)))
    net = ipaddress.ip_network(state.get("subnet") or DEFAULT_SUBNET)
    mgmt = ipaddress.ip_network(state["mgmt_subnet"]) if state.get("mgmt_subnet") else None
    shape = Shape.saved(state)
    if not indexes and BR_NS not in namespaces:
        if args.json:
            print(json.dumps({"healthy": False, "nodes": []}))
        else:
            say("lab: not up (python3 hack/lab.py up --nodes N)")
        return 1
    procs = scan_processes()
    br_links = links_by_name(BR_NS, "link")
    slurm = slurm_status(procs) if shape.slurm else None
    slurm_states = slurm_node_states() if slurm and slurm["slurmctld_pid"] else {}
    rows = []
    for index in indexes:
        node = Node(index, net, mgmt, shape)
        links = links_by_name(node.ns) if netns_inode(node.ns) else {}
        pid = sshd_running(node, procs)
        node.pid = pid
        rows.append({
            "name": node.name, "namespace": node.ns, "ns": netns_inode(node.ns) is not None,
            "ifname": node.ifname, "address": node.address, "ssh_address": node.ssh_address,
            "mgmt_ifname": node.mgmt_ifname, "mgmt_address": node.mgmt_address,
            "link": nics_ok(node, links, br_links),
            "sshd_pid": pid or read_pid(node.pidfile), "sshd_alive": pid is not None,
            "expected": index <= int(state.get("nodes", 0)),
        })
        if shape.slurm:
            rows[-1]["slurmd"] = slurm_states.get(node.name, "(unknown)").lower()
        if state.get("engine"):
            engine_pid = engine_running(node, procs) if pid else None
            rows[-1].update({"engine": state["engine"], "engine_pid": engine_pid or read_pid(node.docker_pidfile),
                             "engine_alive": engine_pid is not None})
    have_key = (inv / "id_ed25519").exists() and (inv / "known_hosts").exists()
    users = ["root"] + ([shape.user] if shape.user != "root" else [])

    def probe(row):
        if not (have_key and row["sshd_alive"] and row["link"]):
            return False
        return all(ssh_true(inv, row["ssh_address"], timeout=3, user=user)[0] for user in users)

    with ThreadPoolExecutor(max_workers=min(16, len(rows) or 1)) as pool:
        for row, ok in zip(rows, pool.map(probe, rows)):
            row["ssh"] = ok
    controller = {}
    for seg in segments(net, mgmt):
        if seg.net:
            controller[seg.label + "ifname"] = seg.ctl_link
            controller[seg.label + "ok"] = link_ok(links_by_name(None).get(seg.ctl_link), seg.ctl_address,
                                                   seg.net.prefixlen, seg.ctl_mac)
    ctl_ok = all(v for k, v in controller.items() if k.endswith("ok"))
    healthy = ctl_ok and bool(rows) and all(r["ns"] and r["link"] and r["sshd_alive"] and r["ssh"] and r["expected"]
                                            and r.get("engine_alive", True)
                                            and slurm_usable(r.get("slurmd", "idle"))
                                            for r in rows)
    if slurm:
        healthy = healthy and bool(slurm["munged_pid"] and slurm["slurmctld_pid"])
    if args.json:
        report = {"healthy": healthy, "shape": shape.as_dict(), "user": shape.user, "subnet": str(net),
                  "mgmt_subnet": str(mgmt) if mgmt else None, "inventory": str(inv / "hosts.yml"),
                  "controller": controller, "nodes": rows}
        if state.get("engine"):
            report["engine"] = state["engine"]
        if slurm:
            report["slurm"] = slurm
        print(json.dumps(report, indent=2))
        return 0 if healthy else 1
    fmt = "%-11s %-22s %-11s %-15s %-14s %s"
    say(fmt % ("NODE", "NS", "IFNAME", "ADDRESS", "SSHD PID", "SSH"))
    for r in rows:
        say(fmt % (r["name"], r["namespace"] if r["ns"] else "(missing)",
                   r["ifname"] if r["link"] else r["ifname"] + " (down)", r["address"],
                   "%s %s" % (r["sshd_pid"] or "-", "alive" if r["sshd_alive"] else "dead"),
                   "ok" if r["ssh"] else "FAIL")
            + ("   ssh on %s %s" % (r["mgmt_ifname"], r["mgmt_address"]) if r["mgmt_address"] else "")
            + ("   %s %s %s" % (r["engine"], r["engine_pid"] or "-", "alive" if r["engine_alive"] else "dead")
               if "engine" in r else "")
            + ("   slurmd %s" % r["slurmd"] if "slurmd" in r else ""))
    if slurm:
        say("slurm: munged %s, slurmctld %s; SLURM_CONF=%s" % (
            slurm["munged_pid"] or "dead", slurm["slurmctld_pid"] or "dead", SLURM_CONF))
    say("controller %s %s%s: %s; shape: %s; inventory %s; %s" % (
        CTL_LINK, net.network_address + 1, ", %s %s" % (CTL_MGMT_LINK, mgmt.network_address + 1) if mgmt else "",
        "ok" if ctl_ok else "MISSING", shape.describe(), _rel(inv / "hosts.yml"),
        "healthy" if healthy else "NOT healthy"))
    return 0 if healthy else 1


def main(argv=None):
    global VERBOSE  # pylint: disable=global-statement
    parser = argparse.ArgumentParser(prog="hack/lab.py", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print every command")
    parser.add_argument("--inventory-dir", default=str(DEFAULT_INVENTORY_DIR),
                        help="where hosts.yml, the key, known_hosts and lab.json go (default inventories/lab)")
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="create, repair, grow or shrink the lab to exactly N nodes")
    p_up.add_argument("--nodes", "-n", type=int, help="number of nodes (default: the running lab's, else %d)"
                      % DEFAULT_NODES)
    p_up.add_argument("--subnet", help="IPv4 subnet (default: the running lab's, else %s)" % DEFAULT_SUBNET)
    p_up.add_argument("--timeout", type=float, default=60, help="seconds to wait for sshd/ssh (default 60)")
    p_up.add_argument("--engine", choices=ENGINES,
                      help="docker: every node also runs its own Docker daemon (private /run and "
                      "/var/lib/docker; docs/containers.md); none (default): no engine, and any running one is stopped")
    # shapes (docs/lab.md): like --engine, an `up` without one takes it away again
    p_up.add_argument("--shared-home", action="store_true",
                      help="one /home (%s) on every node, as an NFS home; with the root user also root's home" % SHARED_HOME)
    p_up.add_argument("--user", metavar="NAME",
                      help="a non-root training user (useradd when missing) that Ansible logs in as; home /home/NAME")
    p_up.add_argument("--mgmt-net", action="store_true",
                      help="a management network for SSH (NIC %s) next to the training network" % MGMT_IFNAME)
    p_up.add_argument("--slurm", action="store_true",
                      help="a Slurm cluster: munged and slurmctld on the controller, a slurmd in every node "
                      "(docs/slurm.md); clients need SLURM_CONF=%s" % SLURM_CONF)
    p_up.add_argument("--mgmt-subnet", help="with --mgmt-net: its IPv4 subnet (default: the running lab's, else %s)"
                      % DEFAULT_MGMT_SUBNET)
    sub.add_parser("down", help="remove every namespace, link, process, mount and file of the lab")
    p_status = sub.add_parser("status", help="table of nodes; exit 0 only when all are healthy")
    p_status.add_argument("--json", action="store_true", help="machine-readable")
    for p in (p_up, p_status, sub.choices["down"]):
        p.add_argument("--inventory-dir", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    VERBOSE = args.verbose
    try:
        return {"up": up, "down": down, "status": status}[args.command](args)
    except LabError as exc:
        print("hack/lab.py %s: error: %s" % (args.command, exc), file=sys.stderr, flush=True)
        return 2 if "must run as root" in str(exc) else 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
