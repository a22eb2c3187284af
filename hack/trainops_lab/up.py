"""``up``: build, repair, grow, shrink or reshape the lab to exactly what the options ask for."""

import ipaddress
import json
import re
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .core import (
    AUTHORIZED_KEYS, BR_NS, CTL_LINK, CTL_MGMT_LINK, DEFAULT_MGMT_SUBNET, DEFAULT_NODES, DEFAULT_SUBNET,
    DOCKER_DATA_ROOT, LabError, Lock, NODE_ROOT, STATE_FILE, STATE_ROOT, checkpoint, ensure_dir, ensure_packages,
    read_json, require_netns, require_root, run, say, write_if_changed)
from .plan import NODE_MOUNTS, Node, Shape, hosts_file, plan
from .network import (
    delete_netns, ensure_bridge, ensure_netns, ensure_node_link, lab_netns_names, links_by_name, netns_inode,
    node_index, remove_bridge, segments)
from .processes import mnt_ns, scan_processes, sees_planned_mounts, terminate
from .sshd import ensure_keypair, node_pids, sshd_running, start_sshd, wait_ssh, wait_sshd
from .users import converge_user, ensure_homes, ensure_owned_dir, ensure_user_keys, owner_of_node_root, unreachable_for
from .slurm import ensure_slurm, require_slurm, stop_slurm
from .engine import (
    engine_pids, ensure_engines, has_private_run, prepare_engine, remove_cgroups, require_engine, stop_engine)
from .inventory import (
    SLURM_SOURCE, _rel, remove_inventory, render_hosts_yml, render_known_hosts, render_lab_json, render_slurm_source)


def remove_node(index, procs):
    node = Node(index, ipaddress.ip_network(DEFAULT_SUBNET))
    terminate(node_pids(node, procs) | engine_pids(node, procs))
    remove_cgroups(node.cgroup_parent)
    for peer in (node.peer, node.mgmt_peer):
        run(["ip", "-n", BR_NS, "link", "del", peer], check=False)
    delete_netns(node.ns)
    if node.state.exists():
        shutil.rmtree(node.state)


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
