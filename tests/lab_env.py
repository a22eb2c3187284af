# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Whether this machine can build the namespace lab of hack/lab.py, and the names of the lab the tests
drive (shared by tests/lab)."""

import importlib
import os
import shutil
import subprocess
import sys


def lab_skip_reason():
    """Why the lab cannot be built here, or None."""
    if os.geteuid() != 0:
        return "the lab needs root (network namespaces, veths, bind mounts)"
    if not shutil.which("ip"):
        return "`ip` (iproute2) is not installed"
    if subprocess.run(["ip", "netns", "list"], capture_output=True, check=False).returncode != 0:
        return "`ip netns` does not work here"
    return None


def lab_names():
    """The names of the lab this test session drives (TRAINOPS_LAB picks one of two side by side), as
    hack/lab.py's package defines them: PREFIX, STATE_ROOT, DEFAULT_INVENTORY_DIR, SESSION_LOCK, ..."""
    hack = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hack")
    if hack not in sys.path:
        sys.path.insert(0, hack)
    return importlib.import_module("trainops_lab.core")  # (stdlib only)
