# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller's process tree as a whole, for the benchmarks (not part of the collection).

A command the benchmark measures starts in a cgroup of its own (``preexec``), so everything it forks counts
whoever reaps it: ansible-playbook's workers, the ssh clients, the ssh ControlPersist masters (they detach from
the process that started them), a daemon a playbook starts on the controller. The CPU is the cgroup's
(``cpuacct.usage`` of cgroup v1, ``cpu.stat`` ``usage_usec`` of v2), so processes that ended count too.
``sample()`` describes the processes alive now: how many, the ssh masters and the other ssh clients (mux
clients when connections are shared), their file descriptors and their memory (PSS, so pages the forked workers
share count once).

Processes on the lab's nodes are not in it: they are started by the nodes' sshd, which the lab started.
Stdlib only; needs root (it writes to /sys/fs/cgroup).
"""

from __future__ import annotations

import os
import time

CGROUP_V1 = '/sys/fs/cgroup/cpuacct'
"""The cpuacct hierarchy of cgroup v1, when mounted."""

CGROUP_V2_CANDIDATES = ('/sys/fs/cgroup/unified', '/sys/fs/cgroup')
"""Where a cgroup v2 hierarchy may be mounted (hybrid, then unified layout)."""


def _read(path):
    with open(path, errors='replace') as handle:
        return handle.read()


def _v2_root():
    for root in CGROUP_V2_CANDIDATES:
        if os.path.exists(os.path.join(root, 'cgroup.controllers')):
            return root
    return None


def proc_kind(argv, comm):
    """What a process of the controller's tree is: ``ssh master`` (a ControlPersist master: OpenSSH names itself
    ``ssh: <control path> [mux]``), ``ssh`` (any other ssh client: a mux client when connections are shared),
    ``python`` (ansible-playbook, its workers, a helper), or its command name."""
    first = argv[0] if argv else ''
    if first.startswith('ssh: ') and first.rstrip().endswith('[mux]'):
        return 'ssh master'
    if comm == 'ssh' or os.path.basename(first) == 'ssh':
        return 'ssh'
    if comm.startswith('python') or comm == 'ansible-playboo' or os.path.basename(first).startswith('python'):
        return 'python'
    return comm or '?'


def proc_role(argv, comm, ppid_argv):
    """The part a process plays in the controller's tree, for the CPU breakdown: ``ansible-playbook`` (the main
    process: the strategy's loop, the callbacks), ``worker`` (a forked worker: same argv as its parent), ``watch hub``
    (module_utils/_watch_hub.py), ``ssh master``, ``ssh``, or its kind (proc_kind)."""
    kind = proc_kind(argv, comm)
    if kind != 'python':
        return kind
    if any(os.path.basename(word) == '_watch_hub.py' for word in argv):
        return 'watch hub'
    if any(os.path.basename(word) == 'ansible-playbook' for word in argv):
        return 'worker' if ppid_argv == argv else 'ansible-playbook'
    return 'python'


def _cpu_ticks(stat):
    """utime + stime of a /proc/<pid>/stat line, in clock ticks."""
    fields = stat.rsplit(')', 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _argv(pid):
    return [a.decode('utf-8', 'replace') for a in open('/proc/%d/cmdline' % pid, 'rb').read().split(b'\0') if a]


def cpu_by_role(first, last):
    """CPU seconds each role (proc_role) spent between two samples, from the processes alive at both (a process
    that started or ended in between is left out: the difference to the cgroup's total says how much that was)."""
    ticks = os.sysconf('SC_CLK_TCK')
    out = {}
    for pid, (role, end) in last.get('cpu_ticks', {}).items():
        if pid in first.get('cpu_ticks', {}) and first['cpu_ticks'][pid][0] == role:
            out[role] = out.get(role, 0.0) + (end - first['cpu_ticks'][pid][1]) / ticks
    return out


class ControllerTree:
    """One cgroup for one measured command (and what it leaves running)."""

    def __init__(self, name):
        self.version = 1 if os.path.exists(os.path.join(CGROUP_V1, 'cpuacct.usage')) else 2
        root = CGROUP_V1 if self.version == 1 else _v2_root()
        if root is None:
            raise OSError('no cgroup hierarchy to measure the controller in (cpuacct v1 or cgroup v2)')
        self.root = root
        self.path = os.path.join(root, name)
        os.makedirs(self.path, exist_ok=True)
        self._cpu0 = self.cpu_total()

    def preexec(self):
        """For subprocess's preexec_fn: the child joins the cgroup before it execs."""
        with open(os.path.join(self.path, 'cgroup.procs'), 'w') as handle:
            handle.write(str(os.getpid()))

    def cpu_total(self):
        """CPU seconds (user + system) of every process that has been in the cgroup."""
        if self.version == 1:
            return int(_read(os.path.join(self.path, 'cpuacct.usage')).strip()) / 1e9
        for line in _read(os.path.join(self.path, 'cpu.stat')).splitlines():
            key, _sep, value = line.partition(' ')
            if key == 'usage_usec':
                return int(value) / 1e6
        raise OSError('no usage_usec in %s/cpu.stat' % self.path)

    def cpu(self):
        """CPU seconds since this object was made."""
        return self.cpu_total() - self._cpu0

    def pids(self):
        try:
            return [int(p) for p in _read(os.path.join(self.path, 'cgroup.procs')).split()]
        except OSError:
            return []

    def sample(self):
        """The live processes now: {'time', 'procs', 'kinds': {kind: n}, 'fds', 'max_fds', 'max_fds_kind',
        'pss_kb'}; a process that ends while it is read is left out."""
        kinds, fds, max_fds, max_kind, pss, cpu_ticks = {}, 0, 0, None, 0, {}
        for pid in self.pids():
            try:
                argv = _argv(pid)
                comm = _read('/proc/%d/comm' % pid).strip()
                nfd = len(os.listdir('/proc/%d/fd' % pid))
                rollup = _read('/proc/%d/smaps_rollup' % pid)
                stat = _read('/proc/%d/stat' % pid)
                ppid = int(stat.rsplit(')', 1)[1].split()[1])
                ppid_argv = _argv(ppid) if ppid > 1 else []
            except (OSError, ValueError, IndexError):
                continue
            cpu_ticks[pid] = (proc_role(argv, comm, ppid_argv), _cpu_ticks(stat))
            kind = proc_kind(argv, comm)
            kinds[kind] = kinds.get(kind, 0) + 1
            fds += nfd
            if nfd > max_fds:
                max_fds, max_kind = nfd, kind
            for line in rollup.splitlines():
                if line.startswith('Pss:'):
                    pss += int(line.split()[1])
                    break
        return {'time': time.time(), 'procs': sum(kinds.values()), 'kinds': kinds, 'fds': fds, 'max_fds': max_fds,
                'max_fds_kind': max_kind, 'pss_kb': pss, 'cpu_ticks': cpu_ticks}

    def close(self):
        """Give what still runs back to the root cgroup and remove this one."""
        for pid in self.pids():
            try:
                with open(os.path.join(self.root, 'cgroup.procs'), 'w') as handle:
                    handle.write(str(pid))
            except OSError:
                pass
        for _attempt in range(20):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.05)


def summarize(samples):
    """The mean and the largest of each figure over samples (empty: {}); kinds by their largest count."""
    if not samples:
        return {}
    out = {}
    for key in ('procs', 'fds', 'max_fds', 'pss_kb'):
        values = [s[key] for s in samples]
        out[key] = {'mean': sum(values) / len(values), 'max': max(values)}
    kinds = {}
    for s in samples:
        for kind, count in s['kinds'].items():
            kinds[kind] = max(kinds.get(kind, 0), count)
    out['kinds_max'] = kinds
    out['samples'] = len(samples)
    return out
