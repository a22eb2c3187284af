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

# --cpu-report=N: the tests that used the most CPU time (tests/cpu_report.py)
pytest_plugins = ['cpu_report']
