# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""A short-lived listener on the master port: a program the master's preflight starts detached.

Usage: ``python -c "$(source of this file)" PORT PEERS WINDOW READY_FD``. It listens on PORT (every
address, IPv6 and IPv4), writes ``R`` (listening) or ``E<error>`` to the file descriptor READY_FD, then
accepts connections until PEERS nodes have connected or WINDOW seconds have passed. Every node's
preflight connects to it from the interface it will use (``_preflight.reach_master``), which proves the
port is reachable before anything starts. The preflight module imports this file (so AnsiballZ packs it)
and passes its source with ``-c``. Standard library only.
"""

from __future__ import annotations

import os
import select
import socket
import sys
import time


def open_socket(port):
    """A listening socket on ``port`` on every address (dual-stack where the node has IPv6)."""
    try:
        srv = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        srv.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        addr = ('::', port)
    except OSError:
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        addr = ('0.0.0.0', port)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        srv.bind(addr)
        srv.listen(256)
    except OSError:
        srv.close()
        raise
    return srv


def accept_peers(srv, peers, window):
    """Accept (and close) connections until ``peers`` came or ``window`` seconds passed; return how many came."""
    deadline, seen = time.monotonic() + window, 0
    while seen < peers and time.monotonic() < deadline:
        if select.select([srv], [], [], max(0.0, deadline - time.monotonic()))[0]:
            conn, dummy = srv.accept()
            seen += 1
            conn.close()
    return seen


def main(argv):
    """Listen as ``argv[1:]`` (port, peers, window, ready fd) says; exit status 1 when the port cannot be opened."""
    port, peers, window, ready_fd = int(argv[1]), int(argv[2]), float(argv[3]), int(argv[4])
    try:
        srv = open_socket(port)
    except OSError as exc:
        os.write(ready_fd, ('E%s' % exc).encode())
        return 1
    os.write(ready_fd, b'R')
    os.close(ready_fd)
    try:
        accept_peers(srv, peers, window)
    finally:
        srv.close()
    return 0


if __name__ == '__main__':
    raise SystemExit(main(sys.argv))
