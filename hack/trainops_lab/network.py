"""Network namespaces, veths and bridges: the bridge namespace with the training bridge (and the
management one, --mgmt-net), the controller's veths into them, each node's NICs."""

import json
import os

from .core import (
    BRIDGE, BR_NS, CTL_LINK, CTL_MAC, CTL_MGMT_LINK, CTL_MGMT_PEER, CTL_PEER, MGMT_BRIDGE, MGMT_IFNAME,
    MGMT_MAC_PREFIX, NETNS_DIR, PREFIX, checkpoint, run)


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
