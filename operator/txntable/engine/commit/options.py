"""Options and result of a commit: what callers pass to and get back from ``Transaction.commit``.

Kept apart from ``transaction`` so the options object (the agreed interface other components build
on) reads on one screen; ``transaction`` re-exports both names.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from txntable.engine.observer import CommitObserver

if TYPE_CHECKING:
    from txntable.engine.read.handle import TableHandle


@dataclass(frozen=True)
class CommitResult:
    """A landed commit."""

    version: int
    attempts: int
    isolation_level: str
    txn_id: str
    operation: str


PostCommitHook = Callable[["TableHandle", CommitResult], None]


@dataclass(frozen=True)
class CommitOptions:
    """How to commit: retry budget and backoff, provenance, metrics hook, post-commit hooks."""

    max_attempts: int = 1000
    backoff_initial_s: float = 0.005
    backoff_max_s: float = 1.0
    table_name: str | None = None  # metrics label given by the caller (never a path)
    run_id: str | None = None  # written into commitInfo as "txntableRunId"
    commit_info: Mapping[str, Any] = field(default_factory=dict)  # extra commitInfo members
    observer: CommitObserver | None = None
    post_commit_hooks: Sequence[PostCommitHook] = ()
    #: injectable for tests: wall clock in ms and the sleep between attempts
    clock_ms: Callable[[], int] = field(default=lambda: time.time_ns() // 1_000_000)
    sleep: Callable[[float], None] = field(default=time.sleep)
