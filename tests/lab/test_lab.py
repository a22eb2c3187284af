"""The multi-host lab of hack/lab.py, for real: namespaces, veths, bridge, one sshd per node.

Root only (skipped otherwise).  The first tests share the session's 4-node lab; the later ones
break, shrink, grow and tear it down on purpose, and the module puts the 4-node lab back at the
end for whoever uses the `lab` fixture next.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from lab_env import lab_skip_reason

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAB_PY = os.path.join(REPO, "hack", "lab.py")
INVENTORY_DIR = os.path.join(REPO, "inventories", "lab")
STATE_ROOT = "/var/lib/trainops-lab"
IFNAMES = ["ens5", "enp1s0f0", "eth1", "bond0.2093"]
GENERATED = ["hosts.yml", "id_ed25519", "id_ed25519.pub", "known_hosts", "lab.json"]


pytestmark = [pytest.mark.lab, pytest.mark.skipif(lab_skip_reason() is not None, reason=str(lab_skip_reason())),
              pytest.mark.usefixtures('lab_session_lock', 'restore_lab')]


# ---------------------------------------------------------------------------------------------
# helpers

def lab_namespaces():
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return sorted(line.split()[0] for line in out.splitlines() if line.startswith("trainops-lab-"))


def lab_links(ip_link_output):
    """The controller's links of this lab (trainops-lab0, trainops-lab1) in `ip -o link` output."""
    return re.findall(r"^\d+: (trainops-lab[01])[@:]", ip_link_output, re.M)


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def lab_processes():
    """Live processes whose command line names the lab's state directory (its sshds)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if STATE_ROOT + "/" in cmdline and alive(int(entry)):
            found.append((int(entry), cmdline))
    return found


def sshd_pids(lab):
    return {node["name"]: node["sshd_pid"] for node in lab.nodes}


def snapshot_files():
    files = {}
    for name in GENERATED:
        path = os.path.join(INVENTORY_DIR, name)
        st = os.stat(path)
        with open(path, "rb") as handle:
            files[name] = (handle.read(), st.st_mtime_ns, st.st_ino, st.st_mode & 0o777)
    for root, _dirs, names in os.walk(STATE_ROOT):
        for name in names:
            if name.startswith("ssh_host_") or name in ("sshd_config", "hosts", "authorized_keys"):
                path = os.path.join(root, name)
                st = os.stat(path)
                with open(path, "rb") as handle:
                    files[path] = (handle.read(), st.st_mtime_ns, st.st_ino, st.st_mode & 0o777)
    return files


def assert_no_lab_left():
    assert lab_namespaces() == []
    if os.path.isdir("/run/netns"):
        assert [n for n in os.listdir("/run/netns") if n.startswith("trainops-lab-")] == []
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    assert lab_links(links) == []
    with open("/proc/self/mountinfo") as handle:
        mounts = handle.read()
    # (the second lab of make lab-test, trainops-lab2, may be up beside this one: exact names only)
    assert not re.search(r"/var/lib/trainops-lab[/ ]|/run/netns/trainops-lab-", mounts)
    assert lab_processes() == []
    assert not os.path.exists(STATE_ROOT)
    assert sorted(os.listdir(INVENTORY_DIR)) == [".gitignore"]


def ssh_ok_everywhere(lab):
    for node in lab.nodes:
        assert lab.ssh(node, "hostname").stdout.strip() == node["name"]


# ---------------------------------------------------------------------------------------------
# the shared 4-node lab

def test_nodes_are_distinct_hosts_over_strict_ssh(lab):
    assert lab.names == ["lab-node01", "lab-node02", "lab-node03", "lab-node04"]
    seen = {}
    try:
        for node in lab.nodes:
            out = lab.ssh(node, "set -e; hostname; echo ---; ls /sys/class/net; echo ---; ip -4 -o addr show; "
                                "echo ---; ip route show default; echo ---; "
                                "touch /tmp/lab-mark-$(hostname) /srv/trainops/lab-mark-$(hostname); "
                                "ls /tmp | grep lab-mark- || true; echo ---; ls /srv/trainops | grep lab-mark- || true; "
                                "echo ---; getent hosts lab-node01 $(hostname)").stdout
            host, nics, addrs, default, tmp, srv, hosts = [part.split() for part in out.split("---")]
            seen[node["name"]] = host[0]
            assert host == [node["name"]]
            assert sorted(nics) == sorted(["lo", node["ifname"]])
            assert re.search(r"%s\s+inet %s/24" % (re.escape(node["ifname"]), re.escape(node["address"])),
                             " ".join(addrs))
            assert default == []  # no default route on a node
            # Its own /tmp and /srv/trainops: only its own marker is there.
            assert tmp == ["lab-mark-" + node["name"]]
            assert srv == ["lab-mark-" + node["name"]]
            # Names resolve to lab addresses (gloo binds to the address of the hostname).
            assert hosts[:2] == [lab.nodes[0]["address"], "lab-node01"]
            assert hosts[-2:] == [node["address"], node["name"]]
            # The marker lies in the node's state directory on the controller.
            assert os.path.exists(os.path.join(node["state_dir"], "tmp", "lab-mark-" + node["name"]))
    finally:
        for node in lab.nodes:
            lab.ssh(node, "rm -f /tmp/lab-mark-* /srv/trainops/lab-mark-*", check=False)
    assert sorted(seen.values()) == sorted(lab.names)
    assert [node["ifname"] for node in lab.nodes] == IFNAMES


def test_inventory_variables(lab):
    out = subprocess.run([os.path.join(REPO, ".venv", "bin", "ansible-inventory"), "-i", lab.inventory, "--list"],
                         capture_output=True, text=True, env=lab.ansible_env(), check=True).stdout
    inventory = json.loads(out)
    assert inventory["trainops_nodes"]["hosts"] == lab.names
    hostvars = inventory["_meta"]["hostvars"]
    python = os.path.join(REPO, ".venv", "bin", "python")
    for node in lab.nodes:
        hv = hostvars[node["name"]]
        assert hv["ansible_host"] == node["address"]
        assert hv["trainops_lab_ifname"] == node["ifname"]
        assert hv["ansible_user"] == "root"
        assert hv["ansible_ssh_private_key_file"] == lab.private_key
        assert "-o UserKnownHostsFile=%s" % lab.known_hosts in hv["ansible_ssh_common_args"]
        assert "-o StrictHostKeyChecking=yes" in hv["ansible_ssh_common_args"]
        assert "-o IdentitiesOnly=yes" in hv["ansible_ssh_common_args"]
        assert hv["ansible_python_interpreter"] == hv["trainops_python"] == python
        assert hv["trainops_node_root"] == "/srv/trainops"
        assert hv["trainops_master_addr"] == "10.77.0.11"
        assert hv["trainops_nproc_per_node"] == 2
        assert hv["trainops_gpu_vendor"] == "none"
        assert hv.get("trainops_master", False) is (node["name"] == "lab-node01")
    assert oct(os.stat(lab.private_key).st_mode & 0o777) == "0o600"
    with open(lab.known_hosts) as handle:
        known = handle.read().split("\n")
    for node in lab.nodes:
        with open(os.path.join(node["state_dir"], "ssh_host_ed25519_key.pub")) as handle:
            real = handle.read().split()[:2]
        assert "%s,%s %s %s" % (node["name"], node["address"], real[0], real[1]) in known


def test_nodes_reach_each_other_through_the_bridge(lab):
    addresses = [node["address"] for node in lab.nodes]
    probe = ("import socket, sys\n"
             "for a in sys.argv[1:]:\n"
             "    s = socket.create_connection((a, 22), 3); print(a, s.recv(7).decode()); s.close()\n")
    for node in lab.nodes:
        others = [a for a in addresses if a != node["address"]]
        out = lab.netns_exec(node, ["python3", "-c", probe] + others).stdout.split("\n")
        assert sorted(line for line in out if line) == sorted("%s SSH-2.0" % a for a in others)
        # No way out of the lab: no default route in the node's namespace.
        assert lab.netns_exec(node, ["ip", "route", "show", "default"]).stdout.strip() == ""
    # And from inside an ssh session (the session runs in the node's namespace).
    out = lab.ssh(1, "python3 -c 'import socket; s = socket.create_connection((\"%s\", 22), 3); "
                     "print(s.recv(7).decode())'" % addresses[-1]).stdout
    assert out.strip() == "SSH-2.0"


def test_ansible_ping_over_ssh(lab):
    proc = lab.ansible("trainops_nodes", "-m", "ansible.builtin.ping")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in lab.names:
        assert re.search(r"^%s \| SUCCESS" % name, proc.stdout, re.M), proc.stdout
    proc = lab.ansible("trainops_nodes", "-m", "ansible.builtin.command", "-a", "hostname")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in lab.names:
        assert re.search(r"^%s \| CHANGED \| rc=0 >>\n%s$" % (name, name), proc.stdout, re.M), proc.stdout


def test_up_again_is_idempotent(lab, lab_manager):
    before_files, before_pids = snapshot_files(), sshd_pids(lab)
    proc = lab_manager.up(4)
    assert "no changes" in proc.stdout, proc.stdout
    assert snapshot_files() == before_files
    after = lab.load(lab.inventory_dir)
    assert sshd_pids(after) == before_pids
    assert all(alive(pid) for pid in before_pids.values())
    assert run_status()["healthy"]


def run_status():
    proc = subprocess.run(["python3", LAB_PY, "status", "--json"], capture_output=True, text=True, check=False)
    data = json.loads(proc.stdout)
    assert (proc.returncode == 0) == data["healthy"]
    return data


def test_status_table(lab):
    proc = subprocess.run(["python3", LAB_PY, "status"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["NODE", "NS", "IFNAME", "ADDRESS", "SSHD", "PID", "SSH"]
    for node, line in zip(lab.nodes, lines[1:]):
        assert line.split() == [node["name"], node["namespace"], node["ifname"], node["address"],
                                str(node["sshd_pid"]), "alive", "ok"]


# ---------------------------------------------------------------------------------------------
# repair, grow, shrink (they leave a healthy 4-node lab behind)

def test_up_repairs_a_broken_lab(lab_manager):
    lab = lab_manager.ensure(4)
    pids = sshd_pids(lab)
    os.kill(pids["lab-node02"], signal.SIGKILL)                                    # sshd gone
    subprocess.run(["ip", "-n", "trainops-lab-node03", "link", "del", "eth1"], check=True)  # NIC gone
    subprocess.run(["ip", "netns", "del", "trainops-lab-node04"], check=True)      # namespace gone
    status = run_status()
    assert not status["healthy"]
    broken = {row["name"]: row for row in status["nodes"]}
    assert not broken["lab-node02"]["sshd_alive"] and not broken["lab-node03"]["link"]
    assert not broken["lab-node04"]["ns"]

    proc = lab_manager.up(4)
    assert "lab-node01" not in proc.stdout  # untouched
    fixed = lab.load(lab.inventory_dir)
    new = sshd_pids(fixed)
    assert new["lab-node01"] == pids["lab-node01"]
    assert new["lab-node02"] != pids["lab-node02"] and new["lab-node04"] != pids["lab-node04"]
    assert not alive(pids["lab-node04"])  # the sshd of the lost namespace was stopped
    assert len(lab_processes()) == 4
    ssh_ok_everywhere(fixed)
    assert run_status()["healthy"]


def test_grow_from_two_to_four_and_shrink(lab_manager):
    lab = lab_manager.ensure(4)
    two = lab_manager.up(2)
    assert "lab-node03  removed" in two.stdout and "lab-node04  removed" in two.stdout
    lab2 = lab.load(lab.inventory_dir)
    assert lab2.names == ["lab-node01", "lab-node02"]
    assert lab_namespaces() == ["trainops-lab-br", "trainops-lab-node01", "trainops-lab-node02"]
    assert not os.path.exists(os.path.join(STATE_ROOT, "node03"))
    with open(lab2.inventory) as handle:
        assert "lab-node03" not in handle.read()
    assert sshd_pids(lab2) == {k: v for k, v in sshd_pids(lab).items() if k in lab2.names}

    lab_manager.up(4)
    lab4 = lab.load(lab.inventory_dir)
    assert lab4.names == ["lab-node01", "lab-node02", "lab-node03", "lab-node04"]
    assert sshd_pids(lab4)["lab-node01"] == sshd_pids(lab)["lab-node01"]  # kept across the resize
    ssh_ok_everywhere(lab4)
    # node01's /etc/hosts (bind-mounted, rewritten in place) now knows the new nodes.
    assert lab4.ssh(1, "getent hosts lab-node04").stdout.split() == ["10.77.0.14", "lab-node04"]
    assert lab4.ansible("trainops_nodes", "-m", "ansible.builtin.ping").returncode == 0


# ---------------------------------------------------------------------------------------------
# down, half-failed ups

def test_down_removes_everything(lab_manager):
    lab = lab_manager.ensure(4)
    pids = sshd_pids(lab)
    # A job-like process in a node: a detached sleeper started over ssh must go too.
    sleeper = int(lab.ssh(2, "setsid sleep 613 >/dev/null 2>&1 < /dev/null & echo $!").stdout)
    assert alive(sleeper)
    lab_manager.down()
    assert not any(alive(pid) for pid in pids.values())
    assert not alive(sleeper)
    assert_no_lab_left()
    lab_manager.down()  # down twice is fine
    assert_no_lab_left()


@pytest.mark.parametrize("stage", ["bridge", "lab-node02:netns", "lab-node03:link", "lab-node03:sshd", "inventory"])
def test_down_after_half_failed_up(lab_manager, stage):
    lab_manager.down()
    proc = lab_manager.up(4, env={"TRAINOPS_LAB_FAIL_AT": stage}, check=False)
    assert proc.returncode == 1 and "injected failure at %s" % stage in proc.stderr, proc.stdout + proc.stderr
    assert "trainops-lab-br" in lab_namespaces()
    if stage == "lab-node03:sshd":  # a namespace without its sshd
        assert "trainops-lab-node03" in lab_namespaces()
        assert not any("node03/sshd_config" in cmd for _pid, cmd in lab_processes())
    lab_manager.down()
    assert_no_lab_left()


def test_up_after_half_failed_up(lab_manager):
    lab_manager.down()
    proc = lab_manager.up(4, env={"TRAINOPS_LAB_FAIL_AT": "lab-node03:sshd"}, check=False)
    assert proc.returncode == 1
    lab_manager.up(4)
    lab = lab_manager.ensure(4)
    ssh_ok_everywhere(lab)


def test_down_cleans_hand_made_leftovers(lab_manager):
    lab_manager.down()
    subprocess.run(["ip", "netns", "add", "trainops-lab-node07"], check=True)
    os.makedirs("/run/netns", exist_ok=True)
    open("/run/netns/trainops-lab-node09", "w").close()  # stale file of a failed `ip netns add`
    os.makedirs(os.path.join(STATE_ROOT, "node07", "tmp"))
    for name in GENERATED:
        open(os.path.join(INVENTORY_DIR, name), "w").close()
    lab_manager.down()
    assert_no_lab_left()


def test_not_root_is_refused():
    if not shutil.which("runuser") or not os.path.exists("/usr/bin/python3"):
        pytest.skip("needs runuser and /usr/bin/python3")
    proc = subprocess.run(["runuser", "-u", "nobody", "--", "/usr/bin/python3", LAB_PY, "up", "--nodes", "1"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "must run as root" in proc.stderr


# ---------------------------------------------------------------------------------------------
# scale

@pytest.mark.slow
def test_sixteen_nodes(lab_manager, record_property):
    lab_manager.down()
    started = time.monotonic()
    lab_manager.up(16)
    up_s = time.monotonic() - started
    status = run_status()
    assert status["healthy"] and len(status["nodes"]) == 16
    lab = lab_manager.ensure(16)
    assert [n["ifname"] for n in lab.nodes] == IFNAMES * 4
    assert lab.nodes[-1]["address"] == "10.77.0.26"
    proc = lab.ansible("trainops_nodes", "-m", "ansible.builtin.ping")
    assert proc.returncode == 0 and proc.stdout.count("SUCCESS") == 16, proc.stdout
    started = time.monotonic()
    lab_manager.down()
    down_s = time.monotonic() - started
    assert_no_lab_left()
    record_property("up16_s", round(up_s, 2))
    record_property("down16_s", round(down_s, 2))
    print("\nlab: up 16 nodes %.1fs, down 16 nodes %.1fs" % (up_s, down_s))
    assert up_s < 120 and down_s < 60
