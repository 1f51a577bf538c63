"""The one "every N seconds until stopped" thread behind heartbeats and watchers."""

from __future__ import annotations

import threading
import time

import pytest

from bisector.infra.ticker import Ticker

pytestmark = pytest.mark.unit


def _wait_for(cond: threading.Event, seconds: float = 5.0) -> None:
    assert cond.wait(seconds), "the ticker never got there"


def test_it_calls_until_the_function_says_it_is_done() -> None:
    calls: list[float] = []
    done = threading.Event()

    def fn() -> bool:
        calls.append(time.monotonic())
        if len(calls) == 3:
            done.set()
            return False
        return True

    t = Ticker(0.01, fn, "test-ticker").start()
    _wait_for(done)
    time.sleep(0.05)
    assert len(calls) == 3  # nothing after False
    t.stop()


def test_a_failing_call_is_tried_again_at_the_next_tick() -> None:
    calls = [0]
    twice = threading.Event()

    def fn() -> bool:
        calls[0] += 1
        if calls[0] == 1:
            raise RuntimeError("a database hiccup")
        twice.set()
        return True

    with Ticker(0.01, fn, "test-ticker"):
        _wait_for(twice)
    assert calls[0] >= 2


def test_stop_ends_it_and_waits_for_the_call_in_progress() -> None:
    inside, release, finished = threading.Event(), threading.Event(), threading.Event()

    def fn() -> bool:
        inside.set()
        release.wait(5)
        finished.set()
        return True

    t = Ticker(0.01, fn, "test-ticker").start()
    _wait_for(inside)
    threading.Timer(0.05, release.set).start()
    t.stop()
    assert finished.is_set()  # stop joined the call that was running
    n = [0]
    t2 = Ticker(0.01, lambda: bool(n.__setitem__(0, n[0] + 1)) or True, "test-ticker")
    with t2:
        pass
    time.sleep(0.05)
    assert n[0] <= 1  # stopped on exit: no tick after the block
