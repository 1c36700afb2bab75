"""One retry value (kazoo's ``KazooRetry`` shape): tries, backoff, deadline, injectable sleep.

Every loop that retries a call against a server — ZooKeeper, a file copy, a Kafka apply,
fencing — uses a :class:`Retry` instead of its own loop, so the policy is a value the caller
can pass, print and test (a fake ``sleep`` and ``clock`` make a test instant and exact)::

    Retry(tries=5, backoff_s=0.2, deadline_s=30, retry_on=(UnreachableError,))(fn, arg)

    for attempt in Retry(tries=3).attempts():      # when the body is not one call
        with attempt:
            do_something()
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Retry:
    """``tries`` attempts at most (``None``: until the deadline), sleeping ``backoff_s``
    doubled each time up to ``max_backoff_s`` (with ±``jitter`` of it), all within
    ``deadline_s`` seconds of the first attempt (``None``: no deadline). Only exceptions in
    ``retry_on`` are retried; the last one is re-raised unchanged when the budget is spent."""

    tries: int | None = 3
    backoff_s: float = 0.2
    max_backoff_s: float = 5.0
    deadline_s: float | None = None
    jitter: float = 0.2
    retry_on: tuple[type[BaseException], ...] = (Exception,)
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)

    def with_(self, **changes: Any) -> Retry:
        return replace(self, **changes)

    def delays(self) -> Iterator[float]:
        d = self.backoff_s
        while True:
            j = 1.0 + self.jitter * (2 * random.random() - 1) if self.jitter else 1.0
            yield min(d, self.max_backoff_s) * j
            d *= 2

    def __call__(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        for attempt in self.attempts():
            with attempt:
                return fn(*args, **kwargs)
        raise AssertionError("unreachable: attempts() re-raises the last error")  # pragma: no cover

    def attempts(self) -> Iterator[Attempt]:
        """Yield one :class:`Attempt` per try; leave the loop (``break``/``return``) on success.
        A retryable error inside an attempt is swallowed until the budget is spent, then re-raised."""
        start = self.clock()
        delays = self.delays()
        n = 0
        while True:
            n += 1
            last = self.tries is not None and n >= self.tries
            if self.deadline_s is not None:
                last = last or self.clock() - start >= self.deadline_s
            attempt = Attempt(n, self.retry_on, final=last)
            yield attempt
            if attempt.error is None:
                return
            delay = next(delays)
            if self.deadline_s is not None:
                left = self.deadline_s - (self.clock() - start)
                if left <= 0:
                    raise attempt.error
                delay = min(delay, left)
            self.sleep(delay)


class Attempt:
    """One try: a context manager that records a retryable error (or lets it out on the last try)."""

    def __init__(self, number: int, retry_on: tuple[type[BaseException], ...], *, final: bool) -> None:
        self.number = number
        self.final = final
        self.retry_on = retry_on
        self.error: BaseException | None = None

    def __enter__(self) -> Attempt:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        if exc is None or self.final or not isinstance(exc, self.retry_on):
            return False
        self.error = exc
        return True
