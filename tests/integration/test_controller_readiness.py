"""After a crash the new controller is not ready while Kopf waits out its predecessor's peering
entry (issue 23.11).

Kopf's own peering code (``kopf._core.engines.peering.process_peering_event``, not a copy) decides
to pause and to resume; ``PeeringWatch`` follows its decisions, and ``/readyz`` on the metrics port
answers 503 while paused, 200 once resumed. Before, the only probe was Kopf's liveness endpoint,
which answered 200 all along (failing it would have made the kubelet restart the pod instead).
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kopf._cogs.aiokits.aiotoggles import Toggle
from kopf._cogs.configs.configuration import OperatorSettings
from kopf._cogs.structs import references
from kopf._core.engines.peering import Identity, process_peering_event
from prometheus_client import CollectorRegistry, Counter

from tests.support.kmock_controller import _free_port, _get
from txntable.handlers.readiness import PeeringWatch, Readiness
from txntable.observability.server import MetricsServer

pytestmark = pytest.mark.integration

ME = Identity("txntable-new-pod")


def _peering(lastseen: datetime) -> dict[str, Any]:
    """The ClusterKopfPeering as the API serves it: our entry and the crashed predecessor's."""
    now = datetime.now(UTC).isoformat()
    return {
        "type": "MODIFIED",
        "object": {
            "apiVersion": "kopf.dev/v1",
            "kind": "ClusterKopfPeering",
            "metadata": {"name": "txntable"},
            "status": {
                ME: {"priority": 0, "lifetime": 60, "lastseen": now},
                "txntable-old-pod": {
                    "priority": 0,
                    "lifetime": 60,
                    "lastseen": lastseen.isoformat(),
                },
            },
        },
    }


async def _see(raw: dict[str, Any], conflicts: Toggle) -> None:
    settings = OperatorSettings()
    settings.peering.name = "txntable"
    woken = asyncio.Event()
    woken.set()  # Kopf would sleep until the old entry expires: wake at once
    await process_peering_event(
        raw_event=raw,  # type: ignore[arg-type]
        namespace=None,  # type: ignore[arg-type]
        resource=references.CLUSTER_PEERINGS_K,  # type: ignore[arg-type]
        identity=ME,
        settings=settings,
        autoclean=False,
        stream_pressure=woken,
        conflicts_found=conflicts,
    )


def test_not_ready_while_kopf_waits_out_a_predecessors_peering_entry() -> None:
    readiness = Readiness(PeeringWatch().install())
    registry = CollectorRegistry()
    Counter("txntable_probe_test", "a metric", registry=registry).inc()
    server = MetricsServer(registry, _free_port(), "127.0.0.1", ready=readiness.report).start()
    url = f"http://127.0.0.1:{server.port}"
    try:
        code, body = _get(url + "/readyz")
        assert code == 503 and "startup handler" in json.loads(body)["reason"]
        readiness.started()
        assert _get(url + "/readyz")[0] == 200

        async def scenario() -> list[tuple[int, str]]:
            conflicts = Toggle()
            seen = []
            # the controller restarts 10 s after its predecessor's last keepalive
            await _see(_peering(datetime.now(UTC) - timedelta(seconds=10)), conflicts)
            assert conflicts.is_on()  # Kopf paused itself
            seen.append(await asyncio.to_thread(_get, url + "/readyz"))
            # the entry expires: Kopf resumes
            await _see(_peering(datetime.now(UTC) - timedelta(seconds=61)), conflicts)
            assert conflicts.is_off()
            seen.append(await asyncio.to_thread(_get, url + "/readyz"))
            return seen

        (paused, resumed) = asyncio.run(scenario())
        assert paused[0] == 503 and "paused by peering" in json.loads(paused[1])["reason"]
        assert resumed == (200, '{"ready": true}')
        code, text = _get(url + "/metrics")
        assert code == 200 and "txntable_probe_test_total 1.0" in text
    finally:
        server.stop()
        readiness.peering.uninstall()
