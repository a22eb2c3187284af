# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Whether this machine can build the namespace lab of hack/lab.py (shared by tests/lab)."""

import os
import shutil
import subprocess


def lab_skip_reason():
    """Why the lab cannot be built here, or None."""
    if os.geteuid() != 0:
        return "the lab needs root (network namespaces, veths, bind mounts)"
    if not shutil.which("ip"):
        return "`ip` (iproute2) is not installed"
    if subprocess.run(["ip", "netns", "list"], capture_output=True, check=False).returncode != 0:
        return "`ip netns` does not work here"
    return None
