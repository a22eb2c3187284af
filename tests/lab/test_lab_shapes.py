"""The lab shapes of hack/lab.py (docs/contributing/lab.md): --shared-home, --user NAME, --mgmt-net, alone and together.

Root only (skipped otherwise).  The module rebuilds the lab a few times (each `up` 1-2 s) and gives the
session back the lab the `lab` fixture promised (the plain one) at the end.

A non-root user must be able to reach the checkout's .venv/bin/python, and `up --user` refuses otherwise:
the tests with a user take conftest's ``user_reaches_python`` fixture.
"""
import json
import os
import re
import shlex
import shutil
import socket
import subprocess

import pytest

from lab_env import lab_skip_reason

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAB_PY = os.path.join(REPO, "hack", "lab.py")
STATE_ROOT = "/var/lib/trainops-lab"
SHARED_HOME = os.path.join(STATE_ROOT, "home")
USER = "trainer"
PYTHON = os.path.join(REPO, ".venv", "bin", "python")
TRAIN_NET = "10.77.0.0/24"

pytestmark = [pytest.mark.lab, pytest.mark.skipif(lab_skip_reason() is not None, reason=str(lab_skip_reason())),
              pytest.mark.usefixtures('lab_session_lock', 'restore_lab')]


@pytest.fixture(scope="module")
def fresh_user():
    """USER is not an account of the machine, or the lab made it (so the lab may remove it)."""
    state_file = os.path.join(STATE_ROOT, "state.json")
    made_by_lab = os.path.exists(state_file) and json.load(open(state_file)).get("created_user") == USER
    if user_exists(USER) and not made_by_lab:
        pytest.skip("the machine has a user %s of its own" % USER)
    return USER


@pytest.fixture(scope="module")
def full(lab_manager, user_reaches_python, fresh_user):
    """3 nodes: shared home, non-root training user, management network (the module's first tests)."""
    return lab_manager.ensure(3, shared_home=True, user=fresh_user, mgmt_net=True)


def user_exists(name):
    return subprocess.run(["getent", "passwd", name], capture_output=True, check=False).returncode == 0


def hostvars(lab):
    out = subprocess.run([os.path.join(REPO, ".venv", "bin", "ansible-inventory"), "-i", lab.inventory, "--list"],
                         capture_output=True, text=True, env=lab.ansible_env(), check=True).stdout
    return json.loads(out)["_meta"]["hostvars"]


def answers_ssh(address):
    try:
        with socket.create_connection((address, 22), timeout=2) as sock:
            sock.settimeout(2)
            return sock.recv(4) == b"SSH-"
    except OSError:
        return False


def status_json():
    proc = subprocess.run(["python3", LAB_PY, "status", "--json"], capture_output=True, text=True, check=False)
    return json.loads(proc.stdout)


# ---------------------------------------------------------------------------------------------
# shared home + user + management network, together

def test_lab_json_hosts_yml_and_status_say_the_shape(full):
    assert full.shape == {"shared_home": True, "user": USER, "mgmt_net": True, "engine": "none", "slurm": False}
    assert full.data["user"] == USER and full.data["shared_home_dir"] == SHARED_HOME
    assert full.data["mgmt_subnet"] == "10.78.0.0/24"
    assert full.data["authorized_keys"] == os.path.join(STATE_ROOT, "authorized_keys.d", USER)
    for i, node in enumerate(full.nodes, start=1):
        assert node["ssh_address"] == node["mgmt_address"] == "10.78.0.%d" % (10 + i)
        assert node["address"] == "10.77.0.%d" % (10 + i) and node["mgmt_ifname"] == "eno1"
        assert node["home"] == "/home/" + USER and node["home_on_host"] == os.path.join(SHARED_HOME, USER)
        assert node["node_root"] == "/home/%s/.trainops" % USER
    hv = hostvars(full)
    for node in full.nodes:
        host = hv[node["name"]]
        assert host["ansible_host"] == node["mgmt_address"] and host["ansible_user"] == USER
        assert "trainops_node_root" not in host  # the collection's ~/.trainops, on the shared home
        assert host["trainops_master_addr"] == full.nodes[0]["address"]
        assert host["trainops_training_network"] == TRAIN_NET
        assert host["trainops_lab_shape"] == {"shared_home": True, "user": USER, "mgmt_net": True}
    with open(full.inventory) as handle:
        text = handle.read()
    assert re.search(r"^    # .*\n    trainops_master_addr: ", text, re.M)
    assert re.search(r"^    # .*\n    trainops_training_network: \"10.77.0.0/24\"", text, re.M)
    with open(full.known_hosts) as handle:
        known = [line.split()[0] for line in handle]
    assert known == ["%s,%s,%s" % (n["name"], n["mgmt_address"], n["address"]) for n in full.nodes]
    status = status_json()
    assert status["healthy"] and status["shape"] == full.shape and status["mgmt_subnet"] == "10.78.0.0/24"
    assert [row["ssh_address"] for row in status["nodes"]] == [n["mgmt_address"] for n in full.nodes]


def test_home_is_shared_and_user_is_not_root(full):
    full.ssh(1, "echo from-node01 > ~/shape-probe", user=USER)
    try:
        for node in full.nodes:
            out = full.ssh(node, "set -e; id -un; id -u; echo ~; cat ~/shape-probe; stat -c '%a %U' ~; "
                                 "for f in /srv/probe /etc/probe /root/probe; do touch $f 2>/dev/null && echo wrote $f; done; "
                                 "cat /var/lib/trainops-lab/authorized_keys 2>/dev/null || echo no-read; "
                                 "touch /srv/trainops/probe && rm /srv/trainops/probe && echo own-node-root",
                           user=USER).stdout.split("\n")
            assert out[:7] == [USER, out[1], "/home/" + USER, "from-node01", "700 " + USER, "no-read", "own-node-root"]
            assert out[1] != "0"
        with open(os.path.join(SHARED_HOME, USER, "shape-probe")) as handle:
            assert handle.read() == "from-node01\n"
    finally:
        full.ssh(1, "rm -f ~/shape-probe", user=USER, check=False)


def test_ansible_runs_as_the_user(full):
    proc = full.ansible("trainops_nodes", "-m", "ansible.builtin.ping")
    assert proc.returncode == 0 and proc.stdout.count("SUCCESS") == 3, proc.stdout + proc.stderr
    proc = full.ansible("trainops_nodes", "-m", "ansible.builtin.command", "-a", "whoami")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in full.names:
        assert re.search(r"^%s \| CHANGED \| rc=0 >>\n%s$" % (name, USER), proc.stdout, re.M), proc.stdout
    # a module that writes: lands in the shared home, owned by the user
    proc = full.ansible("lab-node02", "-m", "ansible.builtin.copy", "-a", "dest=~/ansible-probe content=made")
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        st = os.stat(os.path.join(SHARED_HOME, USER, "ansible-probe"))
        assert st.st_uid == int(full.ssh(1, "id -u", user=USER).stdout)
        assert full.ssh(3, "cat ~/ansible-probe", user=USER).stdout == "made"
    finally:
        full.ssh(1, "rm -f ~/ansible-probe", user=USER, check=False)


def test_ssh_only_on_the_management_network(full):
    for node in full.nodes:
        assert answers_ssh(node["mgmt_address"]), node["name"]
        assert not answers_ssh(node["address"]), node["name"]
    other = full.nodes[1]
    probe = ("import socket, sys\n"
             "for a in sys.argv[1:]:\n"
             "    try:\n"
             "        socket.create_connection((a, 22), 2).close(); print(a, 'open')\n"
             "    except ConnectionRefusedError:\n"
             "        print(a, 'refused')\n")
    for node in full.nodes:
        out = full.ssh(node, "set -e; ip -4 -o addr show | awk '{print $2, $4}'; echo ---; "
                             "getent hosts %s %s-train; echo ---; %s -c %s %s %s" % (
                                 other["name"], other["name"], PYTHON, shlex.quote(probe), other["address"],
                                 other["mgmt_address"])).stdout
        addrs, hosts, reach = [part.split("\n") for part in out.strip().split("---")]
        assert sorted(a.strip() for a in addrs if a.strip()) == sorted([
            "lo 127.0.0.1/8", "eno1 %s/24" % node["mgmt_address"], "%s %s/24" % (node["ifname"], node["address"])])
        assert [h.split() for h in hosts if h.strip()] == [[other["mgmt_address"], other["name"]],
                                                           [other["address"], other["name"] + "-train"]]
        # the training network reaches the other node (its kernel answers: nothing listens there), the
        # management network reaches its sshd
        assert [r.split() for r in reach if r.strip()] == [[other["address"], "refused"],
                                                           [other["mgmt_address"], "open"]]


def test_up_again_changes_nothing(full, lab_manager):
    pids = [node["sshd_pid"] for node in full.nodes]
    proc = lab_manager.up(3, shared_home=True, user=USER, mgmt_net=True)
    assert proc.stdout.strip().endswith("no changes"), proc.stdout
    assert [node["sshd_pid"] for node in full.load(full.inventory_dir).nodes] == pids


# ---------------------------------------------------------------------------------------------
# one shape at a time, back to plain, down

def test_shared_home_alone_shares_roots_home(lab_manager):
    lab = lab_manager.ensure(2, shared_home=True)
    assert not user_exists(USER)  # the user the lab made went with its shape
    assert lab.nodes[0]["home"] == "/root" and lab.nodes[0]["home_on_host"] == os.path.join(SHARED_HOME, "root")
    lab.ssh(1, "echo root-shared > /root/shape-probe")
    assert lab.ssh(2, "cat /root/shape-probe; stat -c %a /root").stdout.split() == ["root-shared", "700"]
    assert os.path.exists(os.path.join(SHARED_HOME, "root", "shape-probe"))
    assert not os.path.exists("/root/shape-probe")  # not the machine's /root
    # the node's own /root/.ansible (mounted after the home), and the venv's Python still reachable
    assert lab.ssh(1, "findmnt -n -o SOURCE /root/.ansible").stdout.strip().endswith("/node01/ansible]")
    proc = lab.ansible("trainops_nodes", "-m", "ansible.builtin.command", "-a", "cat /root/shape-probe")
    assert proc.returncode == 0 and proc.stdout.count("root-shared") == 2, proc.stdout + proc.stderr
    assert "trainops_node_root" not in hostvars(lab)["lab-node01"]


def test_private_homes_do_not_share(lab_manager, user_reaches_python, fresh_user):
    lab = lab_manager.ensure(2, user=fresh_user)
    homes = [node["home_on_host"] for node in lab.nodes]
    assert homes == [os.path.join(STATE_ROOT, "node%02d" % i, "home", USER) for i in (1, 2)]
    assert not os.path.exists(os.path.join(SHARED_HOME, "root"))  # root's shared home went with its shape
    lab.ssh(1, "echo private > ~/shape-probe", user=USER)
    assert lab.ssh(2, "test -e ~/shape-probe || echo absent; stat -c '%a %U' ~", user=USER).stdout.split("\n")[:2] == [
        "absent", "700 " + USER]
    # root's home is the machine's /root again
    assert int(lab.ssh(2, "stat -c %i /root").stdout) == os.stat("/root").st_ino
    hv = hostvars(lab)["lab-node01"]
    assert hv["ansible_user"] == USER and hv["trainops_node_root"] == "/srv/trainops"
    assert hv["ansible_host"] == lab.nodes[0]["address"] and hv["trainops_training_network"] == TRAIN_NET


@pytest.mark.skipif(not shutil.which("dockerd"), reason="no dockerd (bash hack/engine.sh installs docker.io)")
def test_user_with_engine_uses_its_nodes_daemon(lab_manager, user_reaches_python, fresh_user):
    lab_manager.up(2, user=fresh_user, engine="docker")
    lab = lab_manager.ensure(2, user=fresh_user)
    for node in lab.nodes:
        out = lab.ssh(node, "id -Gn; stat -c %G /var/run/docker.sock; docker info --format '{{.Labels}}'",
                      user=USER).stdout.split("\n")
        assert "docker" in out[0].split() and out[1] == "docker"
        assert "org.trainops.lab.node=%s" % node["name"] in out[2]


def test_plain_again_and_down(lab_manager, user_reaches_python):
    lab = lab_manager.ensure(2)
    assert lab.shape == {"shared_home": False, "user": "root", "mgmt_net": False, "engine": "none", "slurm": False}
    assert not user_exists(USER)
    assert not os.path.exists(os.path.join(STATE_ROOT, "node01", "home", USER))
    assert os.listdir(os.path.join(STATE_ROOT, "authorized_keys.d")) == []
    hv = hostvars(lab)["lab-node01"]
    assert (hv["ansible_user"], hv["ansible_host"], hv["trainops_node_root"]) == ("root", "10.77.0.11", "/srv/trainops")
    assert hv["trainops_lab_shape"] == {"shared_home": False, "user": "root", "mgmt_net": False}
    for node in lab.nodes:  # as the plain lab tests expect: sshd on the training address, a node's own /home
        assert node["ssh_address"] == node["address"] and node["mgmt_address"] is None
        host, nics, home = lab.ssh(node, "hostname; echo ---; ls /sys/class/net; echo ---; "
                                         "findmnt -n -o SOURCE /home").stdout.split("---")
        assert host.split() == [node["name"]] and sorted(nics.split()) == sorted(["lo", node["ifname"]])
        assert home.strip().endswith("%s/home]" % node["state_dir"]), home
    assert not re.search(r"^\d+: trainops-lab1[@:]", subprocess.run(
        ["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout, re.M)

    # down after a full shape: the user, the homes and the management links go too
    lab_manager.up(2, shared_home=True, user=USER, mgmt_net=True)
    assert user_exists(USER)
    lab_manager.down()
    assert not user_exists(USER)
    assert not os.path.exists(STATE_ROOT)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    assert not re.search(r"^\d+: trainops-lab[01][@:]", links, re.M)  # (trainops-lab2's may be up beside it)
