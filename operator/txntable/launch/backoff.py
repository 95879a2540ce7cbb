"""When to retry a failed maintenance run: capped exponential backoff with jitter.

Pure and deterministic: the jitter is drawn from a generator seeded by a key (the table and
policy), so a controller that restarts computes the same retry time, while different tables
that failed together do not all retry in the same second.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from txntable.launch.names import short_hash


@dataclass(frozen=True, kw_only=True)
class Backoff:
    """Retry settings: ``base * factor**(failures-1)`` seconds, at most ``cap``, minus jitter."""

    base: float = 30.0
    factor: float = 2.0
    cap: float = 3600.0
    #: Fraction of the delay that is random: the delay lies in [(1 - jitter) * d, d].
    jitter: float = 0.2
    #: Retries after the first failure; ``failures > max_retries`` means give up.
    max_retries: int = 5

    def __post_init__(self) -> None:
        if self.base <= 0 or self.factor < 1 or self.cap < self.base:
            raise ValueError("backoff needs base > 0, factor >= 1 and cap >= base")
        if not 0 <= self.jitter < 1 or self.max_retries < 0:
            raise ValueError("backoff needs 0 <= jitter < 1 and max_retries >= 0")

    def exhausted(self, failures: int) -> bool:
        """Whether ``failures`` consecutive failures used up every retry."""
        return failures > self.max_retries

    def delay(self, failures: int, key: str = "") -> float:
        """Seconds to wait after the ``failures``-th consecutive failure (0 when none)."""
        if failures <= 0:
            return 0.0
        exponent = min(failures - 1, 64)  # beyond this the cap applies anyway
        full = min(self.cap, self.base * self.factor**exponent)
        rng = random.Random(f"{short_hash(key)}:{failures}")
        return full * (1.0 - self.jitter * rng.random())

    def next_retry(self, last_failure: datetime, failures: int, key: str = "") -> datetime | None:
        """When to try again, or None when the retries are exhausted."""
        if self.exhausted(failures):
            return None
        return last_failure + timedelta(seconds=self.delay(failures, key))
