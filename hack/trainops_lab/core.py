"""The lab's names, paths and addresses, its error type, command runner and output, the prerequisites
(root, packages, ``ip netns``), the lock that serialises up/down, and file helpers."""

import fcntl
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent  # (hack/trainops_lab/core.py)


class LabError(Exception):
    """A failure with a message meant for the user (printed without a traceback)."""


def lab_number(value):
    """TRAINOPS_LAB: empty (or 1) is the lab; 2..9 is another lab beside it, with names, addresses and
    directories of its own (make lab-test runs its tests on two labs at once)."""
    if value in ("", "1"):
        return 1
    if len(value) == 1 and value in "23456789":
        return int(value)
    raise LabError("TRAINOPS_LAB=%s: want empty (the lab) or one digit 2..9 (another lab beside it)" % value)


LAB = lab_number(os.environ.get("TRAINOPS_LAB", ""))
SUFFIX = "" if LAB == 1 else str(LAB)  # in every machine-wide name the lab makes

DEFAULT_INVENTORY_DIR = REPO / "inventories" / ("lab" + SUFFIX)
DEFAULT_SUBNET = "10.%d.0.0/24" % (75 + 2 * LAB)       # lab 1: 10.77.0.0/24, lab 2: 10.79.0.0/24
DEFAULT_MGMT_SUBNET = "10.%d.0.0/24" % (76 + 2 * LAB)  # lab 1: 10.78.0.0/24, lab 2: 10.80.0.0/24
DEFAULT_NODES = 2

PREFIX = "trainops-lab" + SUFFIX
BR_NS = PREFIX + "-br"
BRIDGE = "br0"
CTL_LINK = PREFIX + "0"
CTL_PEER = "vctl"
NODE_IFNAMES = ("ens5", "enp1s0f0", "eth1", "bond0.2093")
NODE_ROOT = "/srv/trainops"
MAC_PREFIX = "02:74:6c:%02x" % (2 * LAB - 2)  # locally administered; controller ...:00:00, node i ...:(i)
CTL_MAC = MAC_PREFIX + ":00:00"
# --mgmt-net: the management network (SSH), a second bridge next to the training one.
MGMT_BRIDGE = "brmgmt"
CTL_MGMT_LINK = PREFIX + "1"
CTL_MGMT_PEER = "vctlmgmt"
MGMT_IFNAME = "eno1"
MGMT_MAC_PREFIX = "02:74:6c:%02x" % (2 * LAB - 1)

STATE_ROOT = Path("/var/lib/trainops-lab" + SUFFIX)
STATE_FILE = STATE_ROOT / "state.json"
AUTHORIZED_KEYS = STATE_ROOT / "authorized_keys"  # root's
USER_KEYS_DIR = STATE_ROOT / "authorized_keys.d"   # any other user's: <dir>/<user>, owned by the user
SHARED_HOME = STATE_ROOT / "home"                  # --shared-home: every node's /home
LOCK_FILE = Path("/run/lock/trainops-lab%s.lock" % SUFFIX)
# held by whoever uses the lab for a while (a test module, Molecule, the benchmarks): one user at a time
SESSION_LOCK = Path("/run/lock/trainops-lab%s-session.lock" % SUFFIX)
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

# --engine docker: the daemon each node runs (see ensure_engines).
ENGINES = ("none", "docker")
DOCKERD = "dockerd"
DOCKER_DATA_ROOT = "/var/lib/docker"

VERBOSE = False


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


def names_this_lab(path):
    """Whether a path (a mount point, say) is this lab's: under its state directory or one of its
    namespace files. (Another lab's names start the same way: trainops-lab2 next to trainops-lab.)"""
    path = str(path)
    return (path == str(STATE_ROOT) or path.startswith(str(STATE_ROOT) + "/")
            or path.startswith(str(NETNS_DIR / PREFIX) + "-"))


def checkpoint(where):
    """Test hook: TRAINOPS_LAB_FAIL_AT=<where> makes `up` fail there (to test half-failed ups)."""
    if os.environ.get("TRAINOPS_LAB_FAIL_AT") == where:
        raise LabError("injected failure at %s (TRAINOPS_LAB_FAIL_AT)" % where)


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
    # another apt-get (hack/engine.sh's, mmdebstrap's under make test) may hold dpkg's lock: wait for it
    apt = ["apt-get", "-o", "DPkg::Lock::Timeout=600"]
    for argv in (apt + ["update", "-qq"], apt + ["install", "-y", "-qq", "--no-install-recommends"] + missing):
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
