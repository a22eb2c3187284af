"""``status``: a table (or JSON) of the nodes and their health."""

import ipaddress
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .core import BR_NS, CTL_LINK, CTL_MGMT_LINK, DEFAULT_SUBNET, STATE_FILE, read_json, require_root, say
from .plan import Node, Shape
from .network import lab_netns_names, link_ok, links_by_name, netns_inode, nics_ok, node_index, segments
from .processes import read_pid, scan_processes
from .sshd import ssh_true, sshd_running
from .slurm import SLURM_CONF, slurm_node_states, slurm_status, slurm_usable
from .engine import engine_running
from .inventory import _rel


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
