"""Make ``ansible_collections.trainops.multinode`` importable from a plain clone.

The repository root *is* the collection; ``.collections/ansible_collections/trainops/multinode``
is a symlink back to it, the same path ``ansible.cfg`` gives Ansible.
"""
import os
import sys

_COLLECTIONS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".collections")
if os.path.isdir(_COLLECTIONS) and _COLLECTIONS not in sys.path:
    sys.path.insert(0, _COLLECTIONS)

# tests/playbook_runner.py is shared by the e2e and lab tests
_TESTS = os.path.dirname(os.path.abspath(__file__))
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

# Every rank a test starts shares this machine's few CPUs with the other nodes' ranks (the local default's two
# nodes, the lab's nodes): one intra-op thread a rank, as torchrun gives ranks when it starts more than one on a
# node. With one rank a node torchrun leaves the thread count to torch (a thread a core), and on CI's 2 cores two
# such ranks spin-waiting on each other's cores made a tiny launch take 2.3 times the wall time and 1.6 times the
# CPU time (measured: 35.7 s and 42.9 CPU-s, against 15.7 s and 26.6 CPU-s). The local connection passes the
# controller's environment on to the ranks; the lab's sshd sets the same for its sessions (hack/trainops_lab).
os.environ.setdefault("OMP_NUM_THREADS", "1")

# --cpu-report=N: the tests that used the most CPU time (tests/cpu_report.py)
pytest_plugins = ['cpu_report']
