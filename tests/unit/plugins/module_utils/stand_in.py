# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A real process that stands in for a run's supervisor: ``<python> <run_dir>/supervisor.py [--foreground]
<run_dir>/job.json`` in a session of its own, so its records verify (plugins/module_utils/_run_records.py)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

from ansible_collections.trainops.multinode.plugins.module_utils._proc import System

SLEEPER = 'import time\ntime.sleep(120)\n'


@contextlib.contextmanager
def stand_in_supervisor(run_dir, foreground=False):
    """Yield ``(pid, start_time)`` of a sleeping process with the supervisor's command line; the run's
    supervisor.py is replaced by the sleeper. The process is killed (by its pid) at the end."""
    run_dir = str(run_dir)
    supervisor = os.path.join(run_dir, 'supervisor.py')
    with open(supervisor, 'w') as handle:
        handle.write(SLEEPER)
    argv = [sys.executable, supervisor] + (['--foreground'] if foreground else []) + [os.path.join(run_dir, 'job.json')]
    proc = subprocess.Popen(argv, start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while System().read_proc_cmdline(proc.pid) != argv and time.monotonic() < deadline:
            time.sleep(0.01)
        yield proc.pid, System().read_proc_stat(proc.pid).start_time
    finally:
        proc.kill()
        proc.wait(timeout=10)
