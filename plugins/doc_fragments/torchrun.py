# -*- coding: utf-8 -*-

# Copyright (c) 2025, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment(object):

    # Options shared by trainops.multinode.torchrun and trainops.multinode.torchrun_wait
    DOCUMENTATION = r"""
options:
  state_dir:
    description:
      - This node's trainops state directory on the managed host.
      - It holds C(current.json) (the last started run) and C(runs/<run_id>/) with C(job.json), C(pids.json),
        C(node.log) (torchrun stdout and stderr), C(exit.json), C(supervisor.py) and C(supervisor.log).
      - Several logical nodes can share one machine by using different state directories.
    type: path
    required: true
  log_lines:
    description:
      - How many lines from the end of C(node.log) to return in RV(log_tail).
    type: int
    default: 20
  stop_timeout:
    description:
      - Seconds between sending C(SIGTERM) to the job's process tree and sending C(SIGKILL) to whatever is left of it.
    type: int
    default: 15
"""
