"""The controller's lifecycle endpoints and marks, in-process against kmock (issue 13.6).

One controller run checks: ``/healthz`` is Kopf's liveness endpoint (served on the Kopf loop,
with our probe handler's report of the reconciles), ``/metrics`` is prometheus_client's server
with the process collectors, and the finalizer Kopf needs for the timers carries the
project's name (``txntable.io/finalizer``); Kopf's default marker, left by an earlier
release, is removed (else the object would hang in Terminating).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from kopf.testing import KopfRunner

from tests.support.kmock_controller import (
    TABLES,
    _free_port,
    _get,
    apply,
    fragmented_table,
    manifests,
    metrics_text,
    register_resources,
    status,
    use_kmock,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

LEGACY = "kopf.zalando.org/KopfFinalizerMarker"


async def test_liveness_metrics_and_finalizer(kmock: Any, tmp_path: Path) -> None:
    location = tmp_path / "events"
    fragmented_table(location)
    register_resources(kmock)
    docs = manifests(str(location), small_files=10_000)  # nothing to launch
    # an object from a release that used Kopf's default finalizer: it must not keep it
    docs["table"]["metadata"]["finalizers"] = [LEGACY]
    apply(kmock, docs)
    use_kmock(kmock)
    health = f"http://127.0.0.1:{_free_port()}/healthz"
    seen: dict[str, Any] = {}

    def run() -> bool:
        args = ["run", "-A", "--standalone", f"--liveness={health}"]
        with KopfRunner([*args, "-m", "txntable.handlers.kopf_handlers"], timeout=60):
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                code, body = _get(health)
                report = json.loads(body).get("reconciles", {}) if code == 200 else {}
                meta = kmock.objects[TABLES, "default", "events"]["metadata"]
                migrated = LEGACY not in (meta.get("finalizers") or [])
                if migrated and report.get("reconcilesFinished", 0) >= 1:
                    seen["report"] = report
                    seen["metrics"] = metrics_text()
                    return True
                time.sleep(0.5)
        return False

    assert await asyncio.get_running_loop().run_in_executor(None, run), status(kmock)
    assert seen["report"]["reconcilesInFlight"] in (0, 1)
    assert "stuck" not in seen["report"]
    assert "\nprocess_cpu_seconds_total" in seen["metrics"]
    assert "txntable_reconciles_total" in seen["metrics"]
    finalizers = kmock.objects[TABLES, "default", "events"]["metadata"].get("finalizers")
    assert finalizers == ["txntable.io/finalizer"]
    assert _get(health)[0] == 0  # the operator stopped: nothing answers any more
