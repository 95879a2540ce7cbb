"""A RunRequest for the local launcher and a wait for its run to end, for local-launcher tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from txntable.launch import LocalLauncher, RunKind, RunRequest
from txntable.launch.run import Backend, Resources

T = TypeVar("T")


def eventually(fn: Callable[[], T], ok: Callable[[T], bool], timeout: float = 20.0) -> T:
    """Poll ``fn`` until ``ok`` holds (a deadline against hangs, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if ok(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def request(*args: str, hour: int = 2, **changes: Any) -> RunRequest:
    base: dict[str, Any] = {
        "kind": RunKind.OPTIMIZE,
        "backend": Backend.LOCAL,
        "namespace": "lake",
        "table": "sales",
        "table_uid": "uid-1",
        "policy": "nightly",
        "table_uri": "file:///data/sales",
        "scheduled_time": datetime(2026, 11, 22, hour, tzinfo=UTC),
        "args": ("file:///data/sales", *args),
        "storage_options": {"region": "eu-west-1"},
        "executor": Resources(cores=2),
        "executor_instances": 3,
    }
    base.update(changes)
    return RunRequest(**base)


def finished(launcher: LocalLauncher, req: RunRequest) -> Any:
    return eventually(lambda: launcher.status(req.namespace, req.name), lambda s: s.state.finished)
