"""The Kopf timer and the commit-events daemon write a table's status through one writer.

Both handlers tick through ``kopf_handlers._tick`` (the driver), each with the body Kopf
handed it, which lags behind what the other has just written until its watch event arrives.
Here neither body ever catches up: the daemon's tick writes a plan (a compaction policy
applies), the policy goes away, and the timer's tick, on the body from before the plan, must
still leave a status without it. Main's two writers (Kopf's ``patch.status`` for the timer, a
direct call for the daemon) each patched against their own body, and the plan stayed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kopf
import pytest

from tests.support.controller import T0, MemoryLauncher, fragmented
from tests.support.manifests import compaction_policy_manifest, table_manifest
from tests.support.status_server import Server
from txntable.config import Config
from txntable.controller.tick import Operator
from txntable.handlers import kopf_handlers
from txntable.handlers.driver import Driver
from txntable.handlers.status_writer import StatusWriter

POLICY = compaction_policy_manifest(
    "compact",
    metadata={"uid": "p1", "resourceVersion": "1"},
    # never due: the tick shows the plan and launches nothing
    triggers={"smallFiles": 100000},
)


def _controller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[kopf_handlers.State, Server]:
    """The Kopf glue's state over a fragmented table at ``tmp_path/t``, its status writes going
    to an in-memory API server (``Server``), and no Kopf loop (Events are dropped)."""
    monkeypatch.setattr(kopf, "event", lambda *args, **kwargs: None)
    fragmented(tmp_path / "t")
    launcher = MemoryLauncher([T0])
    operator = Operator(
        config=Config(default_backend="local"),
        launchers=lambda _backend: launcher,
        clock=lambda: T0,
    )
    server = Server({})
    writer = StatusWriter(operator.memories, server)
    return kopf_handlers.State(operator.config, Driver(operator, writer)), server


def test_the_timer_on_a_stale_body_drops_the_plan_the_daemon_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state, server = _controller(tmp_path, monkeypatch)
    stale: dict[str, Any] = table_manifest(
        "events",
        tmp_path / "t",
        metadata={"uid": "uid-1", "resourceVersion": str(server.version)},
        compactionPolicyRef={"name": "compact"},
    )
    body = kopf.Body(stale)  # type: ignore[arg-type]
    kopf_handlers._tick(
        state,
        body,
        {"compaction_policies": {"default": [POLICY]}, "checkpoint_policies": {}},
        woken=True,
    )
    assert "plan" in server.status  # the daemon's write
    kopf_handlers._tick(
        state, body, {"compaction_policies": {}, "checkpoint_policies": {}}, woken=True
    )
    assert "plan" not in server.status, server.status["plan"]
    assert server.status["phase"] != "" and len(server.patches) == 2


def test_a_daemon_told_to_stop_writes_no_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tick the daemon started before Kopf told it to stop (its table is being deleted, or
    the controller is stopping) still ticks but writes nothing: the timer writes, and a write
    onto an object being deleted would only wake its watchers again."""
    state, server = _controller(tmp_path, monkeypatch)
    body = kopf.Body(  # type: ignore[arg-type]
        table_manifest(
            "events",
            tmp_path / "t",
            metadata={"uid": "uid-1"},
            compactionPolicyRef={"name": "compact"},
        )
    )
    indexes = {"compaction_policies": {"default": [POLICY]}, "checkpoint_policies": {}}
    kopf_handlers._tick(state, body, indexes, woken=True, wanted=lambda: False)
    assert server.patches == []
    kopf_handlers._tick(state, body, indexes, woken=True, wanted=lambda: True)
    assert len(server.patches) == 1 and "plan" in server.status
