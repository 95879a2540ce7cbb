"""A tick whose body lags behind this process's last status write starts from that write.

At 10,000 tables on the real API server a third of the status writes said what the previous
one had said, only with new condition transition times: Kopf had not yet processed the watch
event of the previous write, the tick parsed a body without it, every condition looked new, and
the status was written again. The status writer knew the newer status; the tick did not ask it.

At 300 tables under load, a tick that had read its body and then waited for the table's lock
while the tick before it wrote did the same (six idle tables written twice): the newest status
has to be asked for under the lock.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import kopf
import pyarrow as pa
import pytest

from tests.support.manifests import table_manifest
from txntable.config import Config
from txntable.controller.tick import Operator
from txntable.engine.table import Table
from txntable.handlers import kopf_handlers
from txntable.handlers.driver import Driven, Driver
from txntable.handlers.status_writer import MemoryStatus, StatusWriter, Stored

T0 = datetime(2026, 12, 4, 19, 5, tzinfo=UTC)


def _setup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transport: MemoryStatus
) -> tuple[kopf_handlers.State, dict[str, Any], list[datetime]]:
    monkeypatch.setattr(kopf, "event", lambda *_a, **_k: None)
    schema = pa.schema([("id", pa.int64())])
    Table.create(str(tmp_path / "t"), schema).append(pa.table({"id": [1, 2]}, schema=schema))
    clock = [T0]
    operator = Operator(config=Config(), launchers=lambda _b: None, clock=lambda: clock[0])  # type: ignore[arg-type,return-value]
    state = kopf_handlers.State(
        Config(), Driver(operator, StatusWriter(operator.memories, transport))
    )
    body = table_manifest(
        "t",
        tmp_path / "t",
        namespace="lake",
        metadata={"uid": "u1", "generation": 1, "resourceVersion": "100"},
        observeInterval="30s",
    )
    return state, body, clock


class Counted(MemoryStatus):
    def __init__(self) -> None:
        super().__init__()
        self.patches: list[dict[str, Any]] = []

    def patch(self, key: str, namespace: str, name: str, patch: dict[str, Any]) -> Stored:
        self.patches.append(patch)
        return super().patch(key, namespace, name, patch)


def test_a_tick_on_a_lagging_body_does_not_write_the_same_status_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    transport = Counted()
    state, body, clock = _setup(tmp_path, monkeypatch, transport)
    indexes: dict[str, Any] = {"compaction_policies": {}, "checkpoint_policies": {}}
    kopf_handlers._tick(state, kopf.Body(body), indexes, woken=True)  # type: ignore[arg-type]
    assert len(transport.patches) == 1
    for later in (31, 95):  # the body still shows resourceVersion 100, without the status
        clock[0] = T0 + timedelta(seconds=later)
        kopf_handlers._tick(state, kopf.Body(body), indexes, woken=True)  # type: ignore[arg-type]
    assert len(transport.patches) == 1, transport.patches[1:]
    # once the body shows the write, ticks read it from the body as ever
    caught_up = {**body, "status": transport.statuses["u1"],
                 "metadata": {**body["metadata"], "resourceVersion": "1"}}  # fmt: skip
    kopf_handlers._tick(state, kopf.Body(caught_up), indexes, woken=True)  # type: ignore[arg-type]
    assert len(transport.patches) == 1


class WritesWhileAnotherWaits(Counted):
    """The first write lets a second tick of the table read the same body and wait for the
    lock (the daemon woken by a commit while the timer's tick writes)."""

    def __init__(self, second: threading.Thread, waiting: threading.Event) -> None:
        super().__init__()
        self.second, self.waiting = second, waiting

    def patch(self, key: str, namespace: str, name: str, patch: dict[str, Any]) -> Stored:
        if not self.patches:
            self.second.start()
            assert self.waiting.wait(10), "the second tick never came to the lock"
        return super().patch(key, namespace, name, patch)


class Announcing:
    """The table's lock, saying when the second tick has come to it."""

    def __init__(self, second: threading.Thread, waiting: threading.Event) -> None:
        self.lock = threading.Lock()
        self.second, self.waiting = second, waiting

    def __enter__(self) -> None:
        if threading.current_thread() is self.second:
            self.waiting.set()  # it read its body before the first tick's write
        self.lock.acquire()

    def __exit__(self, *_: object) -> None:
        self.lock.release()


def test_a_tick_that_waited_for_the_lock_starts_from_the_write_it_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    indexes: dict[str, Any] = {"compaction_policies": {}, "checkpoint_policies": {}}
    waiting = threading.Event()
    late: dict[str, Any] = {}

    def second_tick() -> None:
        late["clock"][0] = T0 + timedelta(seconds=5)  # new conditions would say 19:05:05
        kopf_handlers._tick(late["state"], kopf.Body(late["body"]), indexes, woken=True)  # type: ignore[arg-type]

    second = threading.Thread(target=second_tick)
    transport = WritesWhileAnotherWaits(second, waiting)
    state, body, clock = _setup(tmp_path, monkeypatch, transport)
    late.update(state=state, body=body, clock=clock)
    driven = state.driver.operator.memories.of("u1", Driven)
    driven.lock = Announcing(second, waiting)  # type: ignore[assignment]
    kopf_handlers._tick(state, kopf.Body(body), indexes, woken=True)  # type: ignore[arg-type]
    second.join(10)
    assert not second.is_alive()
    assert len(transport.patches) == 1, transport.patches[1:]
