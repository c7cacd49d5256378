"""A fake clock for tests: time moves only when a test (or a `sleep`) moves it.

`clock()` reads it, `sleep(s)` advances it (and records the request), `advance(s)` moves it from the
test. Hooks let a test make an engine operation "take" a number of seconds.
"""

from __future__ import annotations


class FakeClock:
    def __init__(self, start: float = 1_796_000_000.0):
        self.now = float(start)
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(max(0.0, seconds))
