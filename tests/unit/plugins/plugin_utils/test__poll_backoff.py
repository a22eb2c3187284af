"""plugin_utils/_poll_backoff.py: the main process's sleeps between its looks for results and for a free worker."""
import pytest

from ansible import constants as C
from ansible.plugins.strategy import StrategyBase

from ansible_collections.trainops.multinode.plugins.plugin_utils import _poll_backoff as backoff


@pytest.mark.parametrize('waited, floor, expected', [
    (0.0, 0.02, 0.02),       # at first: internal_poll_interval
    (0.5, 0.02, 0.02),       # 2 % of 0.5 s is less than the floor
    (5.0, 0.02, 0.1),        # a result after 5 s is seen within 0.1 s
    (10.0, 0.001, 0.2),
    (60.0, 0.001, 0.25),     # never more than the ceiling
    (3600.0, 0.02, 0.25),
    (-5.0, 0.001, 0.001),    # a clock that went back: the floor
    (60.0, 0.5, 0.5),        # a floor above the ceiling (internal_poll_interval = 0.5) stays the floor
])
def test_the_sleep_is_a_share_of_the_time_waited_between_the_floor_and_the_ceiling(waited, floor, expected):
    assert backoff.poll_delay(waited, floor) == pytest.approx(expected)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(round(seconds, 6))
        self.now += seconds


class Workers:
    def __init__(self, alive):
        self.alive = alive

    def is_alive(self):
        return self.alive


class Tqm:
    _terminated = False

    def has_dead_workers(self):
        return False


def strategy_class(results_at, clock):
    """A StrategyBase stand-in: _process_pending_results hands out one result at each time of results_at."""

    class Strategy:
        def __init__(self):
            self._tqm = Tqm()
            self._pending_results = len(results_at)
            self._workers = []
            self.queued = []

        def _process_pending_results(self, iterator):
            due = [at for at in results_at if at <= clock.now]
            for at in due:
                results_at.remove(at)
            self._pending_results -= len(due)
            return ['result at %s' % at for at in due]

        def _wait_on_pending_results(self, iterator):
            raise AssertionError('replaced by install()')

        def _queue_task(self, host, task, task_vars, play_context):
            self.queued.append((host, clock.now))

    return Strategy


def test_the_wait_for_results_backs_off_and_starts_over_at_each_result():
    clock = Clock()
    clock.sleeps = []
    cls = strategy_class([105.0, 135.0], clock)
    assert backoff.install(cls, clock=clock, sleep=clock.sleep)
    strategy = cls()
    assert strategy._wait_on_pending_results(None) == ['result at 105.0', 'result at 135.0']
    assert strategy._pending_results == 0
    # the first result: polled at the floor, then growing; after it, from the floor again; never above the ceiling
    first = clock.sleeps[:clock.sleeps.index(max(clock.sleeps[:100]))]
    assert clock.sleeps[0] == pytest.approx(C.DEFAULT_INTERNAL_POLL_INTERVAL) and max(clock.sleeps) == pytest.approx(backoff.CEILING)
    assert all(b >= a for a, b in zip(first, first[1:]))
    after = [i for i, s in enumerate(clock.sleeps) if i and s < clock.sleeps[i - 1]]
    assert len(after) == 1 and clock.sleeps[after[0]] == pytest.approx(C.DEFAULT_INTERNAL_POLL_INTERVAL)
    # 35 s waited cost about 380 looks (a fixed 0.02 s: 1,750; 0.001 s: 35,000), the result seen within the ceiling
    assert len(clock.sleeps) < 500
    assert clock.now - 135.0 <= backoff.CEILING


def test_queueing_waits_for_a_free_worker_with_the_backoff_then_queues():
    clock = Clock()
    clock.sleeps = []
    busy = [Workers(True), Workers(True)]

    def sleep(seconds):           # the second worker ends 10 s after the wait began
        clock.sleep(seconds)
        if clock.now >= 110.0:
            busy[1].alive = False
    cls = strategy_class([], clock)
    assert backoff.install(cls, clock=clock, sleep=sleep)
    assert backoff.install(cls) is True                      # installed once: a second call changes nothing
    strategy = cls()
    strategy._workers = busy
    strategy._queue_task('n3', 'task', {}, None)
    assert strategy.queued == [('n3', clock.now)] and 110.0 <= clock.now <= 110.0 + 0.5
    assert len(clock.sleeps) < 300                           # not 100,000 turns of 0.1 ms


def test_a_free_worker_or_none_yet_queues_at_once():
    clock = Clock()
    clock.sleeps = []
    cls = strategy_class([], clock)
    backoff.install(cls, clock=clock, sleep=clock.sleep)
    strategy = cls()
    strategy._workers = [Workers(True), None]
    strategy._queue_task('n1', 'task', {}, None)
    strategy._workers = []
    strategy._queue_task('n2', 'task', {}, None)
    assert [host for host, _at in strategy.queued] == ['n1', 'n2'] and clock.sleeps == []


def test_another_ansible_core_without_the_methods_is_left_alone():
    class Other:
        def _queue_task(self):
            pass
    assert backoff.install(Other) is False and not hasattr(Other, '_trainops_poll_backoff')


def test_ansible_cores_strategy_base_has_what_is_wrapped():
    """The installed ansible-core still has the methods install() replaces, with the arguments it passes."""
    import inspect
    assert list(inspect.signature(StrategyBase._queue_task).parameters) == ['self', 'host', 'task', 'task_vars', 'play_context']
    assert callable(StrategyBase._wait_on_pending_results) and callable(StrategyBase._process_pending_results)
