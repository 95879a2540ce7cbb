"""Storage Secrets read once per ``max_age``, not at every tick of every table.

A TxnTable names the Secret holding its storage credentials (``spec.storage.secretRef``). Reading
it at every tick made one ``get secrets`` per table per observe interval although Secrets rarely
change, and many tables usually share one Secret. ``SecretCache`` keeps each Secret (by
namespace/name) with its ``resourceVersion`` and reads it again once it is older than
``max_age`` seconds. So a changed Secret is used at most ``max_age`` after the change; sooner
when the table's storage fails (the controller then calls ``invalidate``, and the next tick reads
the Secret again). A Secret that cannot be read (``SecretUnavailable``) is asked for again
after a back-off that doubles from ``FAILURE_DELAY`` up to ``max_age``: every table naming a
missing Secret reports it at each tick, from one read per back-off, not one per table per tick.

Kopf-free and client-free: the caller passes ``read(namespace, name) -> SecretData``.
Thread-safe (Kopf runs handlers on a pool of threads): one thread reads a given Secret while the
others asking for the same one wait for its result.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

#: Default age after which a cached Secret is read again (seconds).
DEFAULT_MAX_AGE = 300.0
#: Seconds before a Secret that could not be read is asked for again (doubling per failure).
FAILURE_DELAY = 30.0


class SecretUnavailable(Exception):  # noqa: N818 - a state, as Kubernetes says it
    """A Secret that could not be read: ``missing`` when it does not exist (404), else it
    could not be read (e.g. 403: the controller may not read it)."""

    def __init__(self, message: str, *, missing: bool) -> None:
        super().__init__(message)
        self.missing = missing


@dataclass(frozen=True, slots=True)
class SecretData:
    """A Secret's decoded data and the ``resourceVersion`` it was read at."""

    data: Mapping[str, str]
    resource_version: str | None = None


@dataclass
class _Entry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    secret: SecretData | None = None
    read_at: float = 0.0
    failure: SecretUnavailable | None = None
    failures: int = 0
    retry_at: float = 0.0


class SecretCache:
    """Secrets by (namespace, name), each read again after ``max_age`` seconds."""

    def __init__(
        self,
        read: Callable[[str, str], SecretData],
        *,
        max_age: float = DEFAULT_MAX_AGE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_age < 0:
            raise ValueError("max_age must be >= 0 seconds")
        self._read = read
        self.max_age = max_age
        self.clock = clock
        #: Secret reads made (API requests), for tests and metrics
        self.reads = 0
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], _Entry] = {}

    def get(self, namespace: str, name: str) -> SecretData:
        """The Secret, from the cache while younger than ``max_age``. A read that failed with
        ``SecretUnavailable`` raises it again, unread, until its back-off is over."""
        with self._lock:
            entry = self._entries.setdefault((namespace, name), _Entry())
        if (cached := self._usable(entry)) is not None:
            return cached
        with entry.lock:
            if (cached := self._usable(entry)) is not None:
                return cached
            self.reads += 1
            try:
                secret = self._read(namespace, name)
            except SecretUnavailable as exc:
                with self._lock:
                    entry.failures += 1
                    delay = min(FAILURE_DELAY * 2 ** (entry.failures - 1), self.max_age)
                    entry.failure, entry.retry_at = exc, self.clock() + delay
                raise
            with self._lock:
                entry.secret, entry.read_at = secret, self.clock()
                entry.failure, entry.failures = None, 0
            return secret

    def invalidate(self, namespace: str, name: str) -> None:
        """Forget the Secret: the next ``get`` reads it again (e.g. after a storage failure)."""
        with self._lock:
            self._entries.pop((namespace, name), None)

    def _usable(self, entry: _Entry) -> SecretData | None:
        with self._lock:
            if entry.failure is not None and self.clock() < entry.retry_at:
                raise entry.failure
            if entry.secret is not None and self.clock() - entry.read_at < self.max_age:
                return entry.secret
        return None
