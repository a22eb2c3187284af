"""The lab's model: its shape (Shape), the nodes with their names, NICs, addresses, MACs, state files and
mounts (Node), the sshd_config and launcher each node gets, and ``plan``, which checks the subnets and
the node count and computes every node (no system changes)."""

import ipaddress
import json
import os
import shlex
from pathlib import Path

from .core import (
    AUTHORIZED_KEYS, BRIDGE, DOCKER_DATA_ROOT, LabError, MAC_PREFIX, MGMT_BRIDGE, MGMT_IFNAME, MGMT_MAC_PREFIX,
    NODE_IFNAMES, NODE_ROOT, PREFIX, REPO, SHARED_HOME, SSHD, STATE_ROOT, USER_KEYS_DIR)


# Directories a node sees as its own: state subdirectory -> mount point, mode (after its /home and,
# with a shared root home, its /root: /root/.ansible stays the node's own).
NODE_MOUNTS = (("srv", NODE_ROOT, 0o755), ("tmp", "/tmp", 0o1777), ("ansible", "/root/.ansible", 0o700))


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
            # the lab's nodes share this machine's CPUs: a rank gets one intra-op thread (torchrun's choice for more
            # than one rank a node), not a thread a core of the machine, whose spin-waits on the same cores as the
            # other nodes' ranks cost more than they compute (tests/conftest.py sets the same for local nodes)
            "SetEnv OMP_NUM_THREADS=1",
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
