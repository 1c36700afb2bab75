"""The one retry value: tries, backoff, deadline and which errors are retried — on a fake
clock, so every sleep is exact and nothing waits."""

from __future__ import annotations

import random

import pytest

from dr_toolkit.errors import ConfigError, UnreachableError
from dr_toolkit.retry import Retry


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        assert s >= 0
        self.sleeps.append(s)
        self.now += s


def flaky(fails: int, exc: type[BaseException] = UnreachableError, clock: FakeClock | None = None,
          cost_s: float = 0.0) -> tuple[list[int], object]:
    calls: list[int] = []

    def fn(x: int) -> int:
        calls.append(x)
        if clock is not None:
            clock.now += cost_s
        if len(calls) <= fails:
            raise exc("down")
        return x * 2

    return calls, fn


def test_succeeds_after_failures_with_doubling_capped_backoff() -> None:
    c = FakeClock()
    calls, fn = flaky(4)
    r = Retry(tries=5, backoff_s=1.0, max_backoff_s=3.0, jitter=0, sleep=c.sleep, clock=c.clock)
    assert r(fn, 21) == 42
    assert len(calls) == 5
    assert c.sleeps == [1.0, 2.0, 3.0, 3.0]


def test_last_error_reraised_when_tries_are_spent() -> None:
    c = FakeClock()
    calls, fn = flaky(10)
    r = Retry(tries=3, backoff_s=0.5, jitter=0, sleep=c.sleep, clock=c.clock)
    with pytest.raises(UnreachableError, match="down"):
        r(fn, 1)
    assert len(calls) == 3 and c.sleeps == [0.5, 1.0]  # no sleep after the last try


def test_only_retry_on_is_retried() -> None:
    c = FakeClock()
    calls, fn = flaky(1, exc=ConfigError)
    r = Retry(tries=5, retry_on=(UnreachableError,), sleep=c.sleep, clock=c.clock)
    with pytest.raises(ConfigError):
        r(fn, 1)
    assert len(calls) == 1 and c.sleeps == []


def test_keyboard_interrupt_is_never_retried() -> None:
    c = FakeClock()
    calls, fn = flaky(1, exc=KeyboardInterrupt)
    with pytest.raises(KeyboardInterrupt):
        Retry(tries=5, sleep=c.sleep, clock=c.clock)(fn, 1)
    assert len(calls) == 1


@pytest.mark.parametrize("cost_s", [0.0, 0.7, 4.0])
def test_deadline_bounds_the_total_time(cost_s: float) -> None:
    """Unlimited tries, 10 s deadline: sleeps never run past the deadline, and the clock when
    the error leaves is at most the deadline plus one call's cost."""
    c = FakeClock()
    calls, fn = flaky(10_000, clock=c, cost_s=cost_s)
    r = Retry(tries=None, backoff_s=0.3, max_backoff_s=2.0, deadline_s=10.0, jitter=0, sleep=c.sleep,
              clock=c.clock)
    with pytest.raises(UnreachableError):
        r(fn, 1)
    assert sum(c.sleeps) <= 10.0 + 1e-9
    assert c.now <= 10.0 + cost_s + 1e-9
    assert len(calls) >= 2


def test_zero_deadline_means_one_attempt() -> None:
    c = FakeClock()
    calls, fn = flaky(5)
    with pytest.raises(UnreachableError):
        Retry(tries=None, deadline_s=0, sleep=c.sleep, clock=c.clock)(fn, 1)
    assert len(calls) == 1 and c.sleeps == []


def test_attempts_form_for_a_body_that_is_not_one_call() -> None:
    c = FakeClock()
    seen = []
    for attempt in Retry(tries=4, jitter=0, sleep=c.sleep, clock=c.clock).attempts():
        with attempt:
            seen.append(attempt.number)
            if attempt.number < 3:
                raise UnreachableError("not yet")
    assert seen == [1, 2, 3]
    assert len(c.sleeps) == 2


def test_attempts_form_reraises_on_the_last_try() -> None:
    c = FakeClock()
    n = 0
    with pytest.raises(UnreachableError):
        for attempt in Retry(tries=2, sleep=c.sleep, clock=c.clock).attempts():
            with attempt:
                n += 1
                raise UnreachableError("always")
    assert n == 2


def test_jitter_stays_within_its_band() -> None:
    random.seed(7)
    r = Retry(backoff_s=1.0, max_backoff_s=100.0, jitter=0.2)
    gen = r.delays()
    for i in range(10):  # doubling, capped at max_backoff_s, then ±20 % around it
        d, base = next(gen), min(2.0 ** i, 100.0)
        assert 0.8 * base - 1e-9 <= d <= 1.2 * base + 1e-9


def test_with_changes_one_field_and_keeps_the_rest() -> None:
    r = Retry(tries=3, backoff_s=0.5, deadline_s=9)
    r2 = r.with_(tries=7)
    assert (r2.tries, r2.backoff_s, r2.deadline_s) == (7, 0.5, 9)
    assert r.tries == 3  # a value: the original is unchanged


def test_random_failure_sequences_respect_the_budget() -> None:
    """Random fail counts, tries and deadlines: the call succeeds exactly when the budget
    allows enough attempts, and the number of calls never exceeds the tries."""
    rng = random.Random(1234)
    for _ in range(300):
        c = FakeClock()
        fails = rng.randint(0, 6)
        tries = rng.choice([None, 1, 2, 3, 5, 8])
        deadline = rng.choice([None, 0.5, 2.0, 30.0])
        calls, fn = flaky(fails, clock=c, cost_s=rng.choice([0.0, 0.1]))
        r = Retry(tries=tries, backoff_s=0.2, max_backoff_s=1.0, deadline_s=deadline, jitter=0.2,
                  sleep=c.sleep, clock=c.clock)
        if tries is None and deadline is None:
            assert r(fn, 1) == 2 and len(calls) == fails + 1
            continue
        try:
            ok = r(fn, 1) == 2
        except UnreachableError:
            ok = False
        if tries is not None:
            assert len(calls) <= tries
        if ok:
            assert len(calls) == fails + 1
        else:
            assert len(calls) <= fails
            assert (tries is not None and len(calls) == tries) or deadline is not None
        if deadline is not None:
            assert sum(c.sleeps) <= deadline + 1e-9
