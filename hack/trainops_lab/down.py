"""``down``: remove every process, namespace, link, mount, account and file the lab made."""

import os
import shutil
import time
from pathlib import Path

from .core import (
    BR_NS, CTL_LINK, CTL_MGMT_LINK, LabError, Lock, NETNS_DIR, PREFIX, STATE_FILE, STATE_ROOT, names_this_lab,
    read_json, require_root, run, say)
from .network import delete_netns, lab_netns_names, links_by_name, netns_inode, node_index
from .processes import scan_processes, terminate
from .users import forget_accounts
from .slurm import slurmdbd_pids
from .engine import cgroup_members, remove_cgroups
from .inventory import remove_inventory


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
        for target in sorted((m for m in mounts if names_this_lab(m)), key=len, reverse=True):
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
