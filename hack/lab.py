"""A real multi-host lab on one machine: N "nodes", each with its own network namespace, NIC,
hostname, directories and SSH daemon, all on one bridge that the controller reaches directly.

    python3 hack/lab.py up --nodes 4      # create / repair / grow / shrink to exactly 4 nodes
    python3 hack/lab.py status [--json]   # table: node, ns, ifname, address, sshd pid, ssh
    python3 hack/lab.py down              # remove everything the lab made

The entry point only: the code is the package hack/trainops_lab/ (one module per concern, see its
__init__.py); docs/contributing/lab.md says what is built and why.
"""

import os
import sys

_HACK = os.path.dirname(os.path.abspath(__file__))
if _HACK not in sys.path:
    sys.path.insert(0, _HACK)  # (run as a script it is there already; loaded from a file it may not be)

from trainops_lab.cli import main  # noqa: E402  pylint: disable=wrong-import-position

if __name__ == "__main__":
    sys.exit(main())
