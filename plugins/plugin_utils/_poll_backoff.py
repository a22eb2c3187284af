# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""How long the controller's main process sleeps between two looks for its workers (callback preload installs it).

Ansible's strategies look every ``internal_poll_interval`` (0.001 s by default) for as long as a task runs. A task that
waits for a training job runs for hours, and those looks are the controller's CPU while nothing happens. Here the
sleep grows with the time nothing has happened: a look finds a result at most ``SHARE`` of the time waited later than
a fixed interval would (a result after 5 s is seen within 0.1 s, one after a minute within CEILING)."""

from __future__ import annotations

SHARE = 0.02
"""The sleep as a share of the time waited since the last result came or the wait began."""

CEILING = 0.25
"""The longest sleep, in seconds: what a result may wait at most to be seen, however long the task ran."""


def poll_delay(waited, floor, ceiling=CEILING, share=SHARE):
    """Seconds to sleep before the next look, after ``waited`` seconds without a result: ``share`` of it, not less
    than ``floor`` (internal_poll_interval) nor more than ``ceiling`` (nor less than floor where floor is larger)."""
    return max(floor, min(ceiling, share * max(0.0, waited)))


class Backoff:
    """The sleeps of one wait: ``delay()`` after a look that found nothing, ``reset()`` when one found something."""

    def __init__(self, floor, clock, ceiling=CEILING, share=SHARE):
        self.floor, self.ceiling, self.share, self.clock = floor, ceiling, share, clock
        self.since = clock()

    def reset(self):
        self.since = self.clock()

    def delay(self):
        return poll_delay(self.clock() - self.since, self.floor, self.ceiling, self.share)


def _waiting_on_results(clock, sleep):
    """StrategyBase._wait_on_pending_results of ansible-core, with the backoff's sleep instead of the fixed one."""
    from ansible import constants as C
    from ansible.errors import AnsibleError

    def wait_on_pending_results(self, iterator):
        ret_results = []
        backoff = Backoff(C.DEFAULT_INTERNAL_POLL_INTERVAL, clock)
        while self._pending_results > 0 and not self._tqm._terminated:
            if self._tqm.has_dead_workers():
                raise AnsibleError("A worker was found in a dead state")
            results = self._process_pending_results(iterator)
            ret_results.extend(results)
            if results:
                backoff.reset()
            if self._pending_results > 0:
                sleep(backoff.delay())
        return ret_results
    return wait_on_pending_results


def _queueing_on_a_free_worker(queue_task, clock, sleep):
    """StrategyBase._queue_task that, while every fork is busy, waits for a free one with the backoff before it calls
    ansible-core's (whose own loop over the workers sleeps 0.1 ms a turn; a task throttled below the forks may still
    wait there)."""
    from ansible import constants as C

    def queue(self, host, task, task_vars, play_context):
        backoff = Backoff(C.DEFAULT_INTERNAL_POLL_INTERVAL, clock)
        while self._workers and not self._tqm._terminated and \
                all(worker is not None and worker.is_alive() for worker in self._workers):
            sleep(backoff.delay())
        return queue_task(self, host, task, task_vars, play_context)
    return queue


def install(strategy_base=None, clock=None, sleep=None):
    """Give ansible-core's strategies (StrategyBase, in the controller's main process) the backoff in their two waits:
    for the workers' results and for a free worker. Once; a StrategyBase without those methods (another ansible-core)
    is left as it is. Returns whether the waits back off now."""
    if strategy_base is None:
        from ansible.plugins.strategy import StrategyBase as strategy_base
    import time
    clock, sleep = clock or time.monotonic, sleep or time.sleep
    if getattr(strategy_base, '_trainops_poll_backoff', False):
        return True
    if not all(callable(getattr(strategy_base, name, None)) for name in ('_wait_on_pending_results', '_queue_task',
                                                                         '_process_pending_results')):
        return False
    strategy_base._wait_on_pending_results = _waiting_on_results(clock, sleep)
    strategy_base._queue_task = _queueing_on_a_free_worker(strategy_base._queue_task, clock, sleep)
    strategy_base._trainops_poll_backoff = True
    return True
