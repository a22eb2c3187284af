"""Fixtures for tests that need the real multi-host lab of ``hack/lab.py`` (root only).

    def test_something(lab):                 # the session's lab, 4 nodes (TRAINOPS_LAB_NODES)
        out = lab.ssh("lab-node02", "hostname").stdout
        lab.ansible("trainops_nodes", "-m", "ansible.builtin.ping")
        lab.inventory                          # .../inventories/lab/hosts.yml

    @pytest.mark.parametrize("lab", [2], indirect=True)
    def test_two(lab): ...                   # the lab converged to exactly 2 nodes

    def test_fresh(lab_nodes):
        lab = lab_nodes(3)                    # factory: checks health now, (re)builds if needed
        lab = lab_nodes(3, shared_home=True, user="trainer", mgmt_net=True)   # a lab shape (docs/contributing/lab.md)
        lab.ssh(1, "whoami", user="trainer")  # on the node's SSH address (management with mgmt_net)

A lab already running with the right number of healthy nodes and the asked shape (``make lab N=4``:
the plain one) is reused and left running at the end; a lab this session built or changed is torn down (``hack/lab.py down``)
when the session ends, unless TRAINOPS_LAB_KEEP=1.  Without root, or without ``ip netns``, every
test using these fixtures is skipped.
"""
import fcntl
import importlib
import json
import os
import stat
import subprocess
import sys
import threading

import pytest

from lab_env import lab_names, lab_skip_reason
import lab_processes

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HACK = os.path.join(REPO, "hack")
LAB_PY = os.path.join(HACK, "lab.py")
NAMES = lab_names()  # the lab of this session: TRAINOPS_LAB picks one of two side by side
INVENTORY_DIR = str(NAMES.DEFAULT_INVENTORY_DIR)
VENV_BIN = os.path.join(REPO, ".venv", "bin")
DEFAULT_NODES = int(os.environ.get("TRAINOPS_LAB_NODES", "4"))


def pytest_configure(config):
    config.addinivalue_line("markers", "lab: needs root; builds the multi-host lab of hack/lab.py")


def run_lab(*args, env=None, timeout=600, check=True):
    """``python3 hack/lab.py ARGS`` (stdlib only, so this interpreter will do)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, LAB_PY] + list(args), capture_output=True, text=True,
                          env=full_env, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError("hack/lab.py %s failed (rc %d):\n%s\n%s" % (
            " ".join(args), proc.returncode, proc.stdout, proc.stderr))
    return proc


class Lab:
    """The parsed ``lab.json`` of a running lab, with helpers to reach its nodes."""

    def __init__(self, data):
        self.data = data
        self.nodes = data["nodes"]
        self.inventory = data["inventory"]
        self.inventory_dir = os.path.dirname(self.inventory)
        self.private_key = data["private_key"]
        self.known_hosts = data["known_hosts"]

    @classmethod
    def load(cls, inventory_dir=INVENTORY_DIR):
        with open(os.path.join(inventory_dir, "lab.json")) as handle:
            return cls(json.load(handle))

    @property
    def names(self):
        return [node["name"] for node in self.nodes]

    def node(self, which):
        """A node's entry by name ("lab-node02"), 1-based index, or the entry itself."""
        if isinstance(which, dict):
            return which
        if isinstance(which, int):
            return self.nodes[which - 1]
        return next(node for node in self.nodes if node["name"] == which)

    @property
    def shape(self):
        """{"shared_home": bool, "user": NAME or "root", "mgmt_net": bool, "engine": ..., "slurm": bool}"""
        return self.data.get("shape") or {"shared_home": False, "user": "root", "mgmt_net": False, "engine": "none", "slurm": False}

    def ssh_argv(self, which, command, user=None):
        node = self.node(which)
        return ["ssh", "-i", self.private_key, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + self.known_hosts,
                "-o", "ConnectTimeout=10", "-o", "ControlMaster=no", "-o", "ControlPath=none",
                "-o", "LogLevel=ERROR", "%s@%s" % (user or "root", node.get("ssh_address", node["address"])), command]

    def ssh(self, which, command, timeout=120, check=True, user=None):
        """Run a shell command on a node over ssh (its SSH address; as root, or ``user``: the lab's key
        is authorized for both), host key checked against known_hosts."""
        proc = subprocess.run(self.ssh_argv(which, command, user), capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise AssertionError("ssh %s%s %r failed (rc %d): %s" % (
                user + "@" if user else "", self.node(which)["name"], command, proc.returncode, proc.stderr))
        return proc

    def netns_exec(self, which, argv, timeout=60, check=True):
        """Run argv in a node's network namespace directly (no ssh, no private mounts)."""
        return subprocess.run(["ip", "netns", "exec", self.node(which)["namespace"]] + list(argv),
                              capture_output=True, text=True, timeout=timeout, check=check)

    def slowed(self, which, cpu_percent):
        """Context manager: every process of a node (its sshd, the sessions and ControlPersist masters it has, and
        so whatever they start later) in a cgroup limited to ``cpu_percent`` of one CPU; put back on exit."""
        return SlowNode(self.node(which), cpu_percent, NAMES.PREFIX)

    def ansible_env(self):
        env = dict(os.environ)
        env["ANSIBLE_CONFIG"] = os.path.join(REPO, "ansible.cfg")
        env["PATH"] = VENV_BIN + os.pathsep + env.get("PATH", "")
        return env

    def ansible(self, pattern, *args, timeout=300):
        """``.venv/bin/ansible -i <lab inventory> PATTERN ARGS`` with the repo's ansible.cfg."""
        return subprocess.run([os.path.join(VENV_BIN, "ansible"), "-i", self.inventory, pattern] + list(args),
                              capture_output=True, text=True, env=self.ansible_env(), timeout=timeout,
                              check=False)


class SlowNode:
    """A node whose training is slowed on purpose (a thermally throttled GPU, a noisy neighbour on the workload's
    CPUs): while the context is open, a watcher puts every process of the node that runs torch (torchrun, the
    health check's and the job's ranks, anything they start) in a CPU cgroup with a quota, cgroup v2 (cpu.max) or
    v1 (cpu.cfs_quota_us), whichever the machine has.

    Only the workload: the node's sshd and Ansible's modules keep their speed, so that a launch's ~100 tasks on the
    node do not each take seconds (they made the one test that uses this take four minutes). The period is short
    (10 ms): a training step of ~15 ms cannot fit in one period's quota and always meets the cap (with 100 ms
    periods a step under the quota ran at full speed and a CI run named no straggler)."""

    PERIOD_US = 10000
    POLL_S = 0.2

    def __init__(self, node, cpu_percent, prefix):
        self.node = node
        self.quota = int(self.PERIOD_US * cpu_percent / 100)
        v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
        self.root = "/sys/fs/cgroup" if v2 else "/sys/fs/cgroup/cpu"
        self.path = os.path.join(self.root, "%s-slow-%s" % (prefix, node["name"]))
        self.v2 = v2
        self.stopping = threading.Event()
        self.watcher = None

    def members(self):
        """{pid: (ppid, cmdline)} of the processes in the node's network namespace."""
        inode = os.stat(os.path.join("/run/netns", self.node["namespace"])).st_ino
        found = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if os.stat("/proc/%s/ns/net" % entry).st_ino != inode:
                    continue
                with open("/proc/%s/stat" % entry) as handle:
                    ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
                with open("/proc/%s/cmdline" % entry, "rb") as handle:
                    cmdline = handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
            found[int(entry)] = (ppid, cmdline)
        return found

    @staticmethod
    def workload(members):
        """The pids that run torch, and every process under one of them (not Ansible's torchrun module)."""
        chosen = {pid for pid, (_ppid, cmdline) in members.items() if "torch" in cmdline and "AnsiballZ" not in cmdline}
        grew = True
        while grew:
            below = {pid for pid, (ppid, _cmdline) in members.items() if ppid in chosen} - chosen
            chosen |= below
            grew = bool(below)
        return chosen

    def _move(self, group, pids):
        for pid in pids:
            try:
                with open(os.path.join(group, "cgroup.procs"), "w") as handle:
                    handle.write(str(pid))
            except OSError:
                pass  # gone meanwhile

    def _inside(self):
        with open(os.path.join(self.path, "cgroup.procs")) as handle:
            return {int(line) for line in handle if line.strip()}

    def _watch(self):
        while not self.stopping.is_set():
            self._move(self.path, self.workload(self.members()) - self._inside())
            self.stopping.wait(self.POLL_S)

    def __enter__(self):
        os.makedirs(self.path, exist_ok=True)
        if self.v2:
            with open(os.path.join(self.path, "cpu.max"), "w") as handle:
                handle.write("%d %d" % (self.quota, self.PERIOD_US))
        else:
            with open(os.path.join(self.path, "cpu.cfs_period_us"), "w") as handle:
                handle.write(str(self.PERIOD_US))
            with open(os.path.join(self.path, "cpu.cfs_quota_us"), "w") as handle:
                handle.write(str(self.quota))
        self.watcher = threading.Thread(target=self._watch, name="slow-%s" % self.node["name"], daemon=True)
        self.watcher.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.watcher.join()
        for _attempt in range(3):
            pids = self._inside()
            if not pids:
                break
            self._move(self.root, pids)
        os.rmdir(self.path)


class LabManager:
    """Brings the lab to N nodes when asked, and remembers whether this session changed it."""

    def __init__(self, inventory_dir=INVENTORY_DIR):
        self.inventory_dir = inventory_dir
        self.touched = False
        self.promised = None  # node count the session-scoped `lab` fixture handed out
        self.owner_checked = False

    def status(self):
        proc = run_lab("status", "--json", check=False)
        try:
            return json.loads(proc.stdout)
        except ValueError:
            return {"healthy": False, "nodes": []}

    def healthy(self, nodes, shape=None):
        """The running lab is healthy, has ``nodes`` nodes and (when given) these shape keys."""
        status = self.status()
        have = status.get("shape") or {"shared_home": False, "user": "root", "mgmt_net": False}
        return (status.get("healthy") and len(status.get("nodes", [])) == nodes
                and all(have.get(key) == value for key, value in (shape or {}).items())
                and status.get("inventory") == os.path.join(self.inventory_dir, "hosts.yml")
                and os.path.exists(os.path.join(self.inventory_dir, "lab.json")))

    def up(self, nodes, env=None, check=True, shared_home=False, user=None, mgmt_net=False, engine=None, slurm=False):
        """``hack/lab.py up --nodes N`` with the shape's options (left out: that shape goes)."""
        self.touched = True
        return run_lab("up", "--nodes", str(nodes), "--inventory-dir", self.inventory_dir,
                       *shape_args(shared_home, user, mgmt_net, engine, slurm), env=env, check=check)

    def down(self, check=True):
        self.touched = True
        return run_lab("down", "--inventory-dir", self.inventory_dir, check=check)

    def take_over(self):
        """Once a session: a lab that another checkout brought up (its inventory is not this one's) goes down first.
        Its nodes keep their node roots across ``up``, as real nodes do, and so the other checkout's workspace
        marker: this checkout's syncs would be refused ("holds another source", as a launch must be) on every node."""
        if self.owner_checked:
            return
        self.owner_checked = True
        status = self.status()
        theirs = status.get("inventory")
        if status.get("nodes") and theirs and theirs != os.path.join(self.inventory_dir, "hosts.yml"):
            self.down()

    def ensure(self, nodes=DEFAULT_NODES, shared_home=False, user=None, mgmt_net=False):
        """A healthy lab of exactly ``nodes`` nodes of this shape (default: the plain one): the running
        one if it is, else ``up`` (which rebuilds what the shape changes). The engine is left as it is
        when the lab is kept (container tests turn it on), and taken away by a rebuild."""
        self.take_over()
        shape = {"shared_home": shared_home, "user": user or "root", "mgmt_net": mgmt_net}
        # a lab left with Slurm (a --slurm run kept) is not this shape: up without --slurm takes Slurm away
        if not self.healthy(nodes, dict(shape, slurm=False)):
            self.up(nodes, shared_home=shared_home, user=user, mgmt_net=mgmt_net)
        lab = Lab.load(self.inventory_dir)
        assert len(lab.nodes) == nodes, lab.names
        assert {key: lab.shape.get(key) for key in shape} == shape, lab.shape
        return lab

    def restore(self):
        """Rebuild what the session-scoped `lab` fixture promised (after tests that broke it)."""
        if self.promised is not None:
            self.ensure(self.promised)


def shape_args(shared_home=False, user=None, mgmt_net=False, engine=None, slurm=False):
    """The ``hack/lab.py up`` options of a lab shape."""
    return ((["--shared-home"] if shared_home else []) + (["--user", user] if user and user != "root" else [])
            + (["--mgmt-net"] if mgmt_net else []) + (["--engine", engine] if engine else [])
            + (["--slurm"] if slurm else []))


SESSION_LOCK = str(NAMES.SESSION_LOCK)


@pytest.fixture(scope="module")
def lab_session_lock():
    """One user of the machine-wide lab at a time (benchmarks, Molecule and test modules take this lock). A module
    must end the jobs it started: what it left running is killed before the next module gets the lab, and reported
    as this module's error (no_job_left)."""
    with open(SESSION_LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
            no_job_left()
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def no_job_left():
    """lab_processes.no_job_left on the lab that is up, if one is."""
    if os.path.exists(os.path.join(INVENTORY_DIR, "lab.json")):
        lab_processes.no_job_left(Lab.load())


@pytest.fixture(scope="module")
def restore_lab(lab_manager):
    """For modules that break, rebuild or reshape the lab (after lab_session_lock in usefixtures): when
    the module is done, give the session back the lab the `lab` fixture promised (the plain shape)."""
    yield
    lab_manager.restore()


@pytest.fixture(scope="module")
def user_reaches_python():
    """For labs with ``user=``: `up --user` refuses when the user could not reach the checkout's
    .venv/bin/python (a pyenv Python under a 0700 /root, say). Directories on the way that others cannot
    search get o+x (search, no listing) for the module; their modes are put back after it. Yields them."""
    if HACK not in sys.path:
        sys.path.insert(0, HACK)
    lab_users = importlib.import_module("trainops_lab.users")  # (hack/lab.py's package; stdlib only)
    changed = {}
    for directory in lab_users.path_dirs(os.path.join(VENV_BIN, "python")) + lab_users.path_dirs(REPO):
        mode = stat.S_IMODE(os.stat(directory).st_mode)
        if not mode & stat.S_IXOTH and str(directory) not in changed:
            changed[str(directory)] = mode
            os.chmod(directory, mode | stat.S_IXOTH)
    try:
        yield sorted(changed)
    finally:
        for directory, mode in changed.items():
            os.chmod(directory, mode)


@pytest.fixture(scope="session")
def lab_manager():
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)
    manager = LabManager()
    yield manager
    if manager.touched and os.environ.get("TRAINOPS_LAB_KEEP") != "1":
        manager.down(check=False)


@pytest.fixture(scope="session")
def lab_nodes(lab_manager):
    """Factory: ``lab_nodes(n, shared_home=False, user=None, mgmt_net=False)`` -> Lab with exactly n
    healthy nodes of that shape (health and shape checked on each call)."""
    return lab_manager.ensure


@pytest.fixture(scope="session")
def lab(request, lab_manager):
    """The session's lab: DEFAULT_NODES nodes (4), or ``request.param`` via indirect parametrize."""
    nodes = getattr(request, "param", DEFAULT_NODES)
    lab_manager.promised = nodes
    return lab_manager.ensure(nodes)
