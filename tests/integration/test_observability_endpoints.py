"""The /metrics endpoint and the Pushgateway push, over real sockets on 127.0.0.1; and the log
classification against live delta-rs and txntable writers appending to one table at once."""

from __future__ import annotations

import base64
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry

from txntable.engine import CommitOptions, Table
from txntable.observability.controller_metrics import ControllerMetrics
from txntable.observability.metrics import EngineMetrics
from txntable.observability.pushgateway import push_run_metrics
from txntable.observability.server import MetricsServer, register_process_collectors

pytestmark = pytest.mark.integration


def fetch(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()


def test_metrics_are_served_by_prometheus_client_with_process_metrics() -> None:
    registry = register_process_collectors(CollectorRegistry())
    register_process_collectors(registry)  # twice is harmless
    metrics = ControllerMetrics(registry)
    metrics.reconcile_finished("table", 0.01, error=False)
    server = MetricsServer(registry, 0, "127.0.0.1").start()
    try:
        code, kind, body = fetch(f"http://127.0.0.1:{server.port}/metrics")
        assert code == 200 and kind.startswith("text/plain")
        assert 'txntable_reconciles_total{kind="table",outcome="ok"} 1.0' in body
        for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "python_info"):
            assert f"\n{name}" in body, name
    finally:
        server.stop()
    server.stop()  # stopping twice is a no-op


class _Gateway(BaseHTTPRequestHandler):
    received: list[tuple[str, str, str]] = []

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        self.received.append(("PUT", self.path, body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def gateway() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Gateway)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Gateway.received = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_push_run_metrics_only_when_configured(gateway: str) -> None:
    engine = EngineMetrics()
    options = CommitOptions(table_name="ns/t", observer=engine)
    uri = f"memory://push-{uuid.uuid4().hex}"
    table = Table.create(uri, pa.schema([("x", pa.int64())]), options=options)
    assert table.version() == 0
    assert not push_run_metrics(engine.registry, kind="optimize", table="ns/t", environ={})
    assert _Gateway.received == []
    env = {"TXNTABLE_PUSHGATEWAY_URL": gateway}
    assert push_run_metrics(engine.registry, kind="optimize", table="ns/t", environ=env)
    method, path, body = _Gateway.received[0]
    encoded = base64.urlsafe_b64encode(b"ns/t").decode()
    assert method == "PUT"
    assert path == f"/metrics/job/txntable-run/instance@base64/{encoded}/kind/optimize"
    assert 'operation="CREATE TABLE",outcome="committed"' in body
    assert "txntable_commit_attempts_total{" in body
    # an unreachable gateway is logged, never raised
    assert not push_run_metrics(
        engine.registry, kind="optimize", table="ns/t", url="http://127.0.0.1:9", timeout=1
    )


def test_log_commits_of_live_delta_rs_and_txntable_writers(tmp_path: Path) -> None:
    path = str(tmp_path / "mixed")
    schema = pa.schema([("id", pa.int64())])
    ours = Table.create(path, schema)
    metrics = ControllerMetrics()
    metrics.observe_table_log("ns", "mixed", ours, ours.version())
    per_writer = 8

    def rs(worker: int) -> None:
        for i in range(per_writer):
            deltalake.write_deltalake(path, pa.table({"id": [worker * 100 + i]}), mode="append")

    def mine(worker: int) -> None:
        table = Table.open(path)
        for i in range(per_writer):
            table.append(pa.table({"id": [worker * 100 + i]}))

    threads = [threading.Thread(target=f, args=(w,)) for w, f in enumerate((rs, rs, mine, mine))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert metrics.observe_table_log("ns", "mixed", ours, ours.version()) == 4 * per_writer
    history = [h for h in ours.history() if h["version"] > 0]
    rs_lost = [int(h["operationMetrics"]["num_retries"]) for h in history if "clientVersion" in h]
    ours_lost = [h["txntableAttempt"] - 1 for h in history if "txntableAttempt" in h]
    recorded = {"delta-rs": sum(rs_lost), "txntable": sum(ours_lost)}
    r = metrics.registry
    for engine, lost in recorded.items():
        labels = {"namespace": "ns", "table": "mixed", "engine": engine}
        assert r.get_sample_value("txntable_log_commit_retries_total", labels) == lost
        total = sum(
            r.get_sample_value(
                "txntable_log_commits_total", {**labels, "operation": "WRITE", "outcome": o}
            )
            or 0
            for o in ("first_attempt", "retried", "unknown")
        )
        assert total == 2 * per_writer, engine
    assert sum(recorded.values()) > 0  # four writers at once do collide
