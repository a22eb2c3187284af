"""up --slurm: slurm.conf, gres.conf and the stand-in GPU devices, munged, the accounting database and
slurmdbd, slurmctld on the controller and a slurmd in every node's namespaces (docs/contributing/lab.md, Slurm)."""

import os
import re
import shlex
import shutil
import socket
import stat
import subprocess
import time

from .core import LAB, PREFIX, LabError, STATE_ROOT, apt_install, checkpoint, debug, ensure_dir, run, write_if_changed
from .plan import cgroup_mount_lines
from .network import lab_netns_names, netns_inode
from .processes import daemon_pid, read_pid, scan_processes, sees_planned_mounts, spawn, terminate, wait_for


SLURM_DIR = STATE_ROOT / "slurm"
SLURM_CONF = SLURM_DIR / "slurm.conf"
GRES_CONF = SLURM_DIR / "gres.conf"  # slurmd reads it next to slurm.conf
CGROUP_CONF = SLURM_DIR / "cgroup.conf"  # likewise (task/cgroup, where the machine has a v1 devices hierarchy)
DEVICES_CGROUP = "/sys/fs/cgroup/devices"  # a cgroup v1 devices hierarchy: each slurmd gets a subtree of its own
SLURM_CLUSTER = "trainops-lab"
SLURM_PARTITION = "lab"
SLURM_NODE_CPUS = 2  # every node, whatever the machine has: 2 tasks a node, as hosts.yml's trainops_nproc_per_node
SLURM_NODE_GPUS = 4  # GRES gpu per node (stand-in device files), but every fourth node has SLURM_SMALL_NODE_GPUS
SLURM_SMALL_NODE_GPUS = 2  # (lab-node04, 08, ...: a cluster whose nodes differ, as mixed clusters do)
SLURM_GPU_TYPE = "labgpu"  # typed GRES, as real clusters name theirs (gpu:h100:8): --gres=gpu:N still matches
SLURM_GPU_MAJOR = 195  # the NVIDIA driver's character-device major, as /dev/nvidia<N> has on a GPU node
PORT_OFFSET = 10 * (LAB - 1)  # slurmctld listens on every address, slurmdbd and MariaDB on loopback: a lab beside
SLURMCTLD_PORT = 6817 + PORT_OFFSET  # the first (TRAINOPS_LAB=N) takes ports of its own, 6817 + 10 * (N - 1) ...
SLURMD_PORT = 6818  # (in each node's own network namespace)


def _daemon_files(directory, daemon):
    """A lab daemon's pid file and log: side by side in ``directory``, named after it."""
    return directory / f"{daemon}.pid", directory / f"{daemon}.log"


MUNGE_DIR = SLURM_DIR / "munge"
MUNGE_KEY = MUNGE_DIR / "munge.key"
MUNGE_SOCKET = MUNGE_DIR / "munge.socket"
MUNGE_PIDFILE, MUNGE_LOG = _daemon_files(MUNGE_DIR, "munged")
CTLD_STATE = SLURM_DIR / "ctld"
CTLD_PIDFILE, CTLD_LOG = _daemon_files(SLURM_DIR, "slurmctld")
# Accounting (sacct): slurmdbd on a MariaDB of the lab's own (its files under the state, TCP on loopback only)
SLURMDBD_CONF = SLURM_DIR / "slurmdbd.conf"   # slurmdbd reads it next to SLURM_CONF
SLURMDBD_PORT = 6819 + PORT_OFFSET
SLURMDBD_PIDFILE, SLURMDBD_LOG = _daemon_files(SLURM_DIR, "slurmdbd")
DB_DIR = SLURM_DIR / "mariadb"
DB_DATA = DB_DIR / "data"
DB_SOCKET = DB_DIR / "mariadb.sock"
DB_PIDFILE, DB_LOG = _daemon_files(DB_DIR, "mariadb")
DB_PORT = 6820 + PORT_OFFSET
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
    number as minor, as /dev/nvidia<N> on a GPU node (nothing can open them: there is no driver).

    (No node has count-only GPUs, gres.conf without File=: Debian's slurmd 22.05.8 drops every file-less GPU record,
    src/common/gres.c:2380-2382 "Removing file-less GPU", and slurmctld then sets the node INVAL, "gres/gpu count
    reported lower than configured (0 < 2)"; 23.11 likewise, src/interfaces/gres.c:922-935.)"""
    return [SLURM_DEV_DIR / name / ("nvidia%d" % index) for index in range(slurm_node_gpus(name))]


def devices_cgroup():
    """The machine's cgroup v1 devices hierarchy when it has one (then each slurmd gets a subtree of it, and
    task/cgroup with ConstrainDevices=yes runs as on a production cluster), else None (cgroup v2 only: Slurm 22.05's
    cgroup/v2 wants a systemd-delegated scope per slurmd, which namespaces cannot give)."""
    try:
        with open("/proc/self/mounts") as handle:
            mounts = [line.split() for line in handle]
    except OSError:
        return None
    for fields in mounts:
        if len(fields) >= 4 and fields[1] == DEVICES_CGROUP and fields[2] == "cgroup" \
                and "devices" in fields[3].split(","):
            return DEVICES_CGROUP if os.access(DEVICES_CGROUP, os.W_OK) else None
    return None


def node_devices_cgroup(name):
    """The node's own subtree of the devices hierarchy (its slurmd sees it as the hierarchy's root)."""
    return "%s/%s/%s" % (DEVICES_CGROUP, PREFIX, name)


def render_cgroup_conf():
    """cgroup.conf: only the devices are constrained (the cores and memory are the machine's, shared by the nodes)."""
    return "\n".join([
        "# Generated by hack/lab.py up --slurm; do not edit (docs/contributing/lab.md, Slurm).",
        "CgroupPlugin=cgroup/v1",
        "CgroupAutomount=no",
        "ConstrainDevices=yes",
        "ConstrainCores=no",
        "ConstrainRAMSpace=no",
        "ConstrainSwapSpace=no",
    ]) + "\n"


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
    lines = ["# Generated by hack/lab.py up --slurm; do not edit (docs/contributing/lab.md, Slurm).", "AutoDetect=off"]
    for node in nodes:
        files = slurm_gpu_files(node.name)
        lines.append("NodeName=%s Name=gpu Type=%s File=%s/nvidia[0-%d]" % (
            node.name, SLURM_GPU_TYPE, SLURM_DEV_DIR / node.name, len(files) - 1))
    return "\n".join(lines) + "\n"


def slurm_node_dir(name):
    """A slurmd's spool directory (its pid file and log are in it): SlurmdSpoolDir with %n."""
    return SLURM_DIR / name


def slurmd_files(name):
    """A slurmd's pid file and log, in its spool directory."""
    return _daemon_files(slurm_node_dir(name), "slurmd")


def slurm_env():
    """The environment Slurm's clients (sinfo, salloc, sbatch, scontrol) need to find the lab's cluster."""
    return dict(os.environ, SLURM_CONF=str(SLURM_CONF))


def slurm_controller_name():
    """SlurmctldHost's name: slurmctld only starts on a host whose name it is (the machine's short name)."""
    return socket.gethostname().split(".")[0]


def render_slurm_conf(nodes, ctl_address, devices=None):
    """slurm.conf of the lab: every node with its name (its hostname) and SSH-network address, one
    partition; process tracking that needs no cgroups, tasks bound to CPUs, and with ``devices`` (a cgroup v1
    devices hierarchy, devices_cgroup()) task/cgroup confining each step to its GPUs (docs/contributing/lab.md, Slurm)."""
    names = ",".join(node.name for node in nodes)
    lines = [
        "# Generated by hack/lab.py up --slurm; do not edit (docs/contributing/lab.md, Slurm).",
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
        "SlurmdPidFile=%s" % slurmd_files("%n")[0],
        "SlurmdLogFile=%s" % slurmd_files("%n")[1],
        # all slurmds share one kernel and one cgroup tree: no cgroup process tracking (docs/contributing/lab.md says why); tasks
        # are bound to CPUs as on a production cluster (task/affinity: sched_setaffinity, no cgroups), and where the
        # machine has a cgroup v1 devices hierarchy each slurmd gets a subtree of it, in which task/cgroup confines a
        # step to its job's GPUs (cgroup.conf ConstrainDevices=yes)
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/affinity,task/cgroup" if devices else "TaskPlugin=task/affinity",
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
        "# Generated by hack/lab.py up --slurm; do not edit (docs/contributing/slurm-lab.md).",
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
    pid = daemon_pid(slurmd_files(node.name)[0], str(SLURM_CONF), procs, netns_inode(node.ns))
    if pid is None or node.pid is None or not sees_planned_mounts(pid, node):
        return None
    return pid


def start_slurmd(node):
    """slurmd in the namespaces of the node's sshd: it has the node's hostname (= its NodeName), address,
    /tmp, /srv/trainops and /etc/hosts, as do the jobs it starts."""
    ensure_dir(slurm_node_dir(node.name), 0o755)
    pidfile = slurmd_files(node.name)[0]
    if pidfile.exists():
        pidfile.unlink()
    checkpoint("%s:slurmd" % node.name)
    # (a mount namespace of its own below the node's: slurmd's cgroup plugin, which it loads whatever
    # the task and proctrack plugins, wants the machine's cgroup hierarchies that `ip netns exec` hides)
    own = []
    if devices_cgroup():
        # the node's own subtree as the devices hierarchy's root: its jobs' cgroups (slurm/uid_0/job_N) are its own
        subtree = shlex.quote(node_devices_cgroup(node.name))
        own = ["mkdir -p %s" % subtree, "mount --bind %s %s" % (subtree, DEVICES_CGROUP)]
    script = "\n".join(["set -e"] + cgroup_mount_lines() + own
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
        pidfile, log = slurmd_files(node.name)
        wait_for("%s: slurmd" % node.name, proc, lambda: read_pid(pidfile) == proc.pid, log, deadline)


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
    devices = devices_cgroup()
    conf_changed = write_if_changed(SLURM_CONF, render_slurm_conf(nodes, ctl_address, devices), 0o644)
    changes = ["slurm.conf"] if conf_changed else []
    if devices and write_if_changed(CGROUP_CONF, render_cgroup_conf(), 0o644):
        conf_changed = True
        changes.append("cgroup.conf")
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
    remove_devices_cgroups()
    return True


def remove_devices_cgroups():
    """rmdir the lab's subtree of the devices hierarchy, deepest first (a cgroup without processes goes with rmdir)."""
    top = "%s/%s" % (DEVICES_CGROUP, PREFIX)
    if not os.path.isdir(top):
        return
    for path, _dirs, _files in sorted(os.walk(top), key=lambda entry: -entry[0].count("/")):
        try:
            os.rmdir(path)
        except OSError as exc:
            debug("cannot remove %s: %s" % (path, exc))
