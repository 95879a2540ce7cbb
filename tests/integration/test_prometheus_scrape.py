"""A real Prometheus scrapes a process committing through our engine while writers conflict.

This process serves ``EngineMetrics`` and ``ControllerMetrics`` on one registry through
``observability.server``; a ``prometheus`` server (Debian's package, see test_alert_rules.py)
on 127.0.0.1 scrapes it every second with the chart's rules file loaded. Four writer threads
run rounds in lock step: three read partition ``a`` and replace its files (only one of them
can win a round, the others fail with a conflict), one blind-appends to partition ``b`` (it loses
its version and retries). Through Prometheus's HTTP API, the conflict-rate expressions the alert
uses become non-zero, and the commit counters equal the commits in the table's log.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from prometheus_client import CollectorRegistry

from txntable.engine import CommitOptions, Table, Transaction
from txntable.engine.errors import ConcurrentModificationException
from txntable.engine.write.writer import write_data_files
from txntable.observability.controller_metrics import ControllerMetrics
from txntable.observability.metrics import EngineMetrics
from txntable.observability.server import ObservabilityServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "charts" / "txntable-operator" / "files" / "prometheus-rules.yaml"
ROUNDS = 16
REPLACERS = 3
NAME = "ns/orders"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def recorded(name: str) -> str:
    """The expression of a recording rule in the shipped rules file."""
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            if rule.get("record") == name:
                return str(rule["expr"])
    raise AssertionError(f"{name} is not recorded in {RULES}")


class Prom:
    def __init__(self, url: str) -> None:
        self.url = url

    def get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=5) as response:
            return json.loads(response.read())

    def query(self, expr: str) -> list[tuple[dict[str, str], float]]:
        body = self.get("/api/v1/query", query=expr)
        assert body["status"] == "success", body
        return [(r["metric"], float(r["value"][1])) for r in body["data"]["result"]]

    def scalar(self, expr: str) -> float | None:
        rows = self.query(expr)
        return rows[0][1] if rows else None

    def until(self, what: str, check: Callable[[], Any], seconds: float = 25.0) -> Any:
        deadline = time.monotonic() + seconds
        last: Any = None
        while time.monotonic() < deadline:
            last = check()
            if last:
                return last
            time.sleep(0.5)
        raise AssertionError(f"{what}: not reached in {seconds}s (last: {last!r})")


@pytest.fixture
def exporter() -> Iterator[tuple[CollectorRegistry, ObservabilityServer]]:
    registry = CollectorRegistry()
    server = ObservabilityServer(registry, 0, "127.0.0.1").start()
    yield registry, server
    server.stop()


@pytest.fixture
def prometheus(tmp_path: Path, exporter: tuple[CollectorRegistry, ObservabilityServer]):
    binary = os.environ.get("PROMETHEUS") or shutil.which("prometheus")
    if not binary:
        pytest.fail(
            "prometheus not found: install Debian's prometheus package (`make sysdeps`, or "
            "apt-get install --no-install-recommends prometheus) or set PROMETHEUS"
        )
    port = free_port()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [
            {
                "job_name": "txntable",
                "static_configs": [{"targets": [f"127.0.0.1:{exporter[1].port}"]}],
            }
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        prom = Prom(f"http://127.0.0.1:{port}")

        def ready() -> bool:
            if proc.poll() is not None:
                raise AssertionError((tmp_path / "prometheus.log").read_text())
            try:
                return bool(prom.get("/api/v1/status/buildinfo")["status"] == "success")
            except OSError:
                return False

        prom.until("prometheus ready", ready, 20)
        yield prom
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


def writer(
    path: str,
    index: int,
    barrier: threading.Barrier,
    engine: EngineMetrics,
    outcomes: list[str],
) -> None:
    table = Table.open(path)
    options = CommitOptions(table_name=NAME, observer=engine, backoff_initial_s=0.001)
    for n in range(ROUNDS):
        barrier.wait()  # everybody reads the same version
        snapshot = table.snapshot()
        txn = Transaction(table, snapshot, options)
        part = "a" if index < REPLACERS else "b"
        data = pa.table({"p": [part], "v": [index * 1000 + n]})
        adds = write_data_files(table.storage, snapshot.metadata, data)
        if part == "a":
            read = set(txn.scan("p = 'a'").column("path").to_pylist())
            now = int(time.time() * 1000)
            txn.add(*(f.to_remove(now, True) for f in snapshot.add_actions() if f.path in read))
        txn.add(*adds)
        barrier.wait()  # ... and everybody commits at once
        try:
            txn.commit("WRITE", {"mode": "Overwrite" if part == "a" else "Append"})
            outcomes.append("committed")
        except ConcurrentModificationException as exc:
            outcomes.append(type(exc).__name__)
        time.sleep(0.25)  # spread the rounds over several scrapes


def test_conflict_rate_and_commit_counts_through_prometheus(
    tmp_path: Path,
    exporter: tuple[CollectorRegistry, ObservabilityServer],
    prometheus: Prom,
) -> None:
    registry, _ = exporter
    engine = EngineMetrics(registry)
    controller = ControllerMetrics(registry)
    path = str(tmp_path / "orders")
    schema = pa.schema([("p", pa.string()), ("v", pa.int64())])
    options = CommitOptions(table_name=NAME, observer=engine)
    table = Table.create(path, schema, ["p"], options=options)
    table.append(pa.table({"p": ["a"], "v": [0]}), options=options)
    baseline = table.version()
    controller.observe_table_log("ns", "orders", table, baseline)
    prometheus.until(
        "first scrape", lambda: prometheus.scalar('sum(txntable_commits_total{table="ns/orders"})')
    )

    barrier = threading.Barrier(REPLACERS + 1, timeout=30)
    outcomes: list[str] = []
    threads = [
        threading.Thread(target=writer, args=(path, i, barrier, engine, outcomes), daemon=True)
        for i in range(REPLACERS + 1)
    ]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):  # the controller observes the log meanwhile
        controller.observe_table_log("ns", "orders", table, table.version())
        time.sleep(0.3)
    for t in threads:
        t.join()
    controller.observe_table_log("ns", "orders", table, table.version())
    conflicts = sum(1 for o in outcomes if o != "committed")
    assert len(outcomes) == ROUNDS * (REPLACERS + 1)
    assert conflicts >= ROUNDS, outcomes  # each round: one replacer wins, the others conflict

    engine_ratio = recorded("txntable_table:commit_lost_attempt_ratio:rate10m")
    rows = prometheus.until("engine conflict rate > 0", lambda: prometheus.query(engine_ratio))
    assert rows[0][0] == {"table": NAME} and rows[0][1] > 0
    log_ratio = recorded("txntable_table:log_commit_lost_attempt_ratio:rate30m")
    rows = prometheus.until("log retry rate > 0", lambda: prometheus.query(log_ratio))
    assert rows[0][0] == {"namespace": "ns", "table": "orders"} and rows[0][1] > 0
    # the recording rules themselves, as Prometheus evaluates the shipped file
    prometheus.until(
        "recorded conflict rate",
        lambda: prometheus.scalar("txntable_table:commit_lost_attempt_ratio:rate10m > 0"),
    )

    log_commits = table.version() + 1  # versions 0..N, none expired
    assert len(table.history()) == log_commits
    committed = 'sum(txntable_commits_total{table="ns/orders", outcome="committed"})'
    prometheus.until(
        f"committed == {log_commits} commits in the log",
        lambda: prometheus.scalar(committed) == log_commits,
    )
    prometheus.until(
        f"log commits == {table.version() - baseline} commits after the baseline",
        lambda: prometheus.scalar("sum(txntable_log_commits_total)") == table.version() - baseline,
    )
    prometheus.until(
        f"conflicts == {conflicts}",
        lambda: prometheus.scalar("sum(txntable_commit_conflicts_total)") == conflicts,
    )
    # attempts lost by commits that landed, as the log records them (txntableAttempt - 1), and
    # as the engine counted them (commits that later failed retried too, so the total is higher)
    from_log = prometheus.scalar('sum(txntable_log_commit_retries_total{engine="txntable"})')
    landed = '{table="ns/orders", outcome="committed"}'
    from_engine = prometheus.scalar(
        f"sum(txntable_commit_attempts_per_commit_sum{landed})"
        f" - sum(txntable_commit_attempts_per_commit_count{landed})"
    )
    assert from_log and from_log == from_engine
    assert from_log <= (prometheus.scalar("sum(txntable_commit_retries_total)") or 0)
