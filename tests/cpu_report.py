"""A pytest plugin: the CPU time each test costs, the processes it started included, and the most expensive ones
listed at the end of the run (``--cpu-report=N``; tests/conftest.py registers it).

CI is CPU-bound (docs/contributing/development.md, "CI time"): on its 2 cores the suites run side by side and a test's wall time
says more about what ran beside it than about the test. Its CPU time does not: that is what a cut saves.

As root on a machine with cgroup v1's cpuacct controller (CI), the pytest process moves into a cgroup of its own at
the start of the session: every process it starts stays in that cgroup, even one that daemonizes (a job's
supervisor, torchrun and its ranks, a lab node's sshd started by the session), so the cgroup's usage counts them all.
Elsewhere (not root, cgroup v2 only) the report counts pytest's own CPU time and its waited-for children's (a
daemonized process is then missed, and the report says so).
"""
from __future__ import annotations

import os
import time

CPUACCT = '/sys/fs/cgroup/cpuacct'


def pytest_addoption(parser):
    parser.addoption('--cpu-report', type=int, default=0, metavar='N',
                     help='list the N tests that used the most CPU time (processes they started included)')


class CpuClock:
    """CPU seconds used so far by the session and everything it started."""

    def __init__(self):
        self.group = None
        self.what = "pytest's own and its waited-for children's CPU time (no cgroup: daemons not counted)"
        if os.geteuid() == 0 and os.path.isdir(CPUACCT):
            group = os.path.join(CPUACCT, 'trainops-tests-%d' % os.getpid())
            try:
                os.makedirs(group, exist_ok=True)
                with open(os.path.join(group, 'cgroup.procs'), 'w') as handle:
                    handle.write(str(os.getpid()))
            except OSError:
                return
            self.group = group
            self.what = "the CPU time of the session's cgroup (every process a test started, daemons included)"

    def seconds(self):
        if self.group:
            with open(os.path.join(self.group, 'cpuacct.usage')) as handle:
                return int(handle.read()) / 1e9
        times = os.times()
        return times.user + times.system + times.children_user + times.children_system

    def close(self):
        """Leave the cgroup and remove it (processes still in it keep it; then it stays, empty later)."""
        if not self.group:
            return
        try:
            with open(os.path.join(os.path.dirname(self.group), 'cgroup.procs'), 'w') as handle:
                handle.write(str(os.getpid()))
            os.rmdir(self.group)
        except OSError:
            pass


class CpuReport:
    def __init__(self, count):
        self.count = count
        self.clock = CpuClock()
        self.started = {}
        self.costs = {}
        self.session_cpu = self.clock.seconds()
        self.session_wall = time.monotonic()

    def pytest_runtest_logstart(self, nodeid, location):
        self.started[nodeid] = (self.clock.seconds(), time.monotonic())

    def pytest_runtest_logfinish(self, nodeid, location):
        cpu, wall = self.started.pop(nodeid, (None, None))
        if cpu is not None:
            self.costs[nodeid] = (self.clock.seconds() - cpu, time.monotonic() - wall)

    def pytest_terminal_summary(self, terminalreporter):
        total_cpu = self.clock.seconds() - self.session_cpu
        total_wall = time.monotonic() - self.session_wall
        writer = terminalreporter
        writer.write_sep('=', 'most CPU time: %d of %d tests' % (min(self.count, len(self.costs)), len(self.costs)))
        writer.write_line('measured: %s' % self.clock.what)
        writer.write_line('session: %.0f CPU-s in %.0f s (%.2f cores on average)'
                          % (total_cpu, total_wall, total_cpu / total_wall if total_wall else 0))
        ranked = sorted(self.costs.items(), key=lambda item: -item[1][0])
        for nodeid, (cpu, wall) in ranked[:self.count]:
            writer.write_line('%8.1f CPU-s %7.1f s  %s' % (cpu, wall, nodeid))
        self.clock.close()


def pytest_configure(config):
    count = config.getoption('--cpu-report', 0)
    if count:
        config.pluginmanager.register(CpuReport(count), 'trainops-cpu-report')
