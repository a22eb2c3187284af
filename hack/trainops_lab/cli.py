"""A real multi-host lab on one machine: N "nodes", each with its own network namespace, NIC,
hostname, directories and SSH daemon, all on one bridge that the controller reaches directly.

    python3 hack/lab.py up --nodes 4      # create / repair / grow / shrink to exactly 4 nodes
    python3 hack/lab.py status [--json]   # table: node, ns, ifname, address, sshd pid, ssh
    python3 hack/lab.py down              # remove everything the lab made

Needs root (network namespaces, veths, bind mounts).  Python 3 standard library only; the
system programs it drives (ip, sshd, ssh, ssh-keygen, unshare) are installed with apt-get
when missing.  See docs/contributing/lab.md for what is built and why.

Layout (node i = 1..N, NN = two digits):

* namespace ``trainops-lab-br`` holds bridge ``br0``; every node's veth peer ``vnodeNN`` and
  the controller's peer ``vctl`` are its ports (a bridge of its own namespace is outside the
  host's iptables, so Docker's ``FORWARD DROP`` policy cannot drop bridged frames);
* the controller (root namespace) has veth ``trainops-lab0`` = <subnet>.1;
* node i: namespace ``trainops-lab-nodeNN``, ``lo`` up, NIC ``ens5``/``enp1s0f0``/``eth1``/
  ``bond0.2093`` (cycling) = <subnet>.(10+i), no default route; sshd runs in it under
  ``unshare --mount --uts`` with hostname ``lab-nodeNN`` and private bind mounts of
  /var/lib/trainops-lab/nodeNN/{home,srv,tmp,ansible,hosts} onto /home, /srv/trainops, /tmp,
  /root/.ansible and /etc/hosts;
* inventories/lab/: hosts.yml, id_ed25519(.pub), known_hosts (the nodes' real host keys),
  lab.json.

Opt-in ``up --engine docker`` (an ``up`` without it takes the engines away again): every node also
runs a Docker daemon of its own, in its namespaces, with a private /run (so /var/run/docker.sock,
/var/run/docker and /var/run/docker.pid are the node's) and a private /var/lib/docker, both bind
mounts of /var/lib/trainops-lab/nodeNN/{run,docker}; see docs/contributing/containers-lab.md.

Shapes (docs/contributing/lab.md), each opt-in the same way: ``--shared-home`` (/var/lib/trainops-lab/home on
every node's /home, and root's home in it when root trains), ``--user NAME`` (a non-root training
user Ansible logs in as), ``--mgmt-net`` (sshd on a second NIC ``eno1`` of a management network,
default 10.78.0.0/24, next to the training network), ``--slurm`` (a real Slurm cluster of the nodes: munged,
slurmdbd and slurmctld on the controller, a slurmd in every node; docs/contributing/slurm-lab.md)."""

import argparse
import sys

from . import core
from .core import (
    DEFAULT_INVENTORY_DIR, DEFAULT_MGMT_SUBNET, DEFAULT_NODES, DEFAULT_SUBNET, ENGINES, LabError, MGMT_IFNAME,
    SHARED_HOME)
from .slurm import SLURM_CONF
from .up import up
from .down import down
from .status import status


def main(argv=None):
    parser = argparse.ArgumentParser(prog="hack/lab.py", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print every command")
    parser.add_argument("--inventory-dir", default=str(DEFAULT_INVENTORY_DIR),
                        help="where hosts.yml, the key, known_hosts and lab.json go (default inventories/lab)")
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="create, repair, grow or shrink the lab to exactly N nodes")
    p_up.add_argument("--nodes", "-n", type=int, help="number of nodes (default: the running lab's, else %d)"
                      % DEFAULT_NODES)
    p_up.add_argument("--subnet", help="IPv4 subnet (default: the running lab's, else %s)" % DEFAULT_SUBNET)
    p_up.add_argument("--timeout", type=float, default=60, help="seconds to wait for sshd/ssh (default 60)")
    p_up.add_argument("--engine", choices=ENGINES,
                      help="docker: every node also runs its own Docker daemon (private /run and "
                      "/var/lib/docker; docs/contributing/containers-lab.md); none (default): no engine, and any running one is stopped")
    # shapes (docs/contributing/lab.md): like --engine, an `up` without one takes it away again
    p_up.add_argument("--shared-home", action="store_true",
                      help="one /home (%s) on every node, as an NFS home; with the root user also root's home" % SHARED_HOME)
    p_up.add_argument("--user", metavar="NAME",
                      help="a non-root training user (useradd when missing) that Ansible logs in as; home /home/NAME")
    p_up.add_argument("--mgmt-net", action="store_true",
                      help="a management network for SSH (NIC %s) next to the training network" % MGMT_IFNAME)
    p_up.add_argument("--slurm", action="store_true",
                      help="a Slurm cluster: munged and slurmctld on the controller, a slurmd in every node "
                      "(docs/contributing/slurm-lab.md); clients need SLURM_CONF=%s" % SLURM_CONF)
    p_up.add_argument("--mgmt-subnet", help="with --mgmt-net: its IPv4 subnet (default: the running lab's, else %s)"
                      % DEFAULT_MGMT_SUBNET)
    sub.add_parser("down", help="remove every namespace, link, process, mount and file of the lab")
    p_status = sub.add_parser("status", help="table of nodes; exit 0 only when all are healthy")
    p_status.add_argument("--json", action="store_true", help="machine-readable")
    for p in (p_up, p_status, sub.choices["down"]):
        p.add_argument("--inventory-dir", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    core.VERBOSE = args.verbose  # (debug() reads it)
    try:
        return {"up": up, "down": down, "status": status}[args.command](args)
    except LabError as exc:
        print("hack/lab.py %s: error: %s" % (args.command, exc), file=sys.stderr, flush=True)
        return 2 if "must run as root" in str(exc) else 1
    except KeyboardInterrupt:
        return 130
