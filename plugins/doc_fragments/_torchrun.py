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
      - The trainops state root on the managed host. The node keeps its runs in its own directory below it,
        C(<state_dir>/<node>) (O(node_id), by default the host name), so nodes whose state root is on a file system
        they all see (an NFS home) never share a record, a lock or a log.
      - That directory holds C(current.json) (the last started run) and C(runs/<run_id>/) with C(job.json), C(pids.json),
        C(node.log) (torchrun stdout and stderr), C(exit.json), C(env.sh), C(supervisor.py) (with the C(_proc.py) and
        C(_files.py) it imports) and C(supervisor.log);
        directories are mode 0700 and files 0600.
      - Records name the host and boot that wrote them; a node refuses to act on another host's records, and pids of
        an earlier boot are never checked or signalled (such a run is V(lost)).
    type: path
    required: true
  node_id:
    description:
      - The name of this node's directory below O(state_dir), instead of the host name.
      - Needed only when two nodes with the same host name share a state root, such as several logical nodes on one
        machine.
    type: str
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
