"""The controller's liveness detail (a stuck reconcile fails the probe) and its JSON logs
(Kopf's formatter: a quote or a newline in a message never breaks a line's JSON)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from txntable.handlers.liveness import Liveness


def test_a_reconcile_running_past_the_limit_fails_liveness() -> None:
    live = Liveness(stuck_after=60)
    assert live.report(100.0) == (
        True,
        {"reconcilesInFlight": 0, "reconcilesFinished": 0, "oldestReconcileSeconds": 0.0},
    )
    live.begin("ns/a", 100.0)
    live.begin("ns/b", 130.0)
    live.end("ns/b", 131.0)
    alive, details = live.report(160.0)
    assert alive and details["reconcilesInFlight"] == 1 and details["reconcilesFinished"] == 1
    assert details["lastReconcileSecondsAgo"] == 29.0
    alive, details = live.report(161.0)
    assert not alive and "ns/a" in details["stuck"]
    live.end("ns/a", 162.0)
    assert live.report(10_000.0)[0]  # finished: no longer stuck, however long ago


SCRIPT = r"""
import logging
from txntable.config import Config
from txntable.handlers.logs import configure_logging

configure_logging(Config(log_format="json", log_level="INFO"))
log = logging.getLogger("txntable.test")
log.info('table "sales" said: it\'s {"broken": true}\nsecond line\ttab', extra={"table": "ns/t"})
log.debug("not shown at INFO")
try:
    raise ValueError('bad "value"\nhere')
except ValueError:
    log.exception("run %s failed", "opt-1")
"""


def test_json_logs_stay_valid_with_quotes_and_newlines() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, check=True
    )
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    records = [json.loads(ln) for ln in lines]  # every line is one JSON object
    assert len(records) == 2
    first, second = records
    assert first["message"] == 'table "sales" said: it\'s {"broken": true}\nsecond line\ttab'
    assert first["table"] == "ns/t" and first["severity"] == "info"
    assert second["message"] == "run opt-1 failed" and second["severity"] == "error"
    assert 'ValueError: bad "value"\nhere' in second["exc_info"]


def test_the_chart_probes_ask_the_path_the_controller_serves() -> None:
    from pathlib import Path

    from txntable.__main__ import HEALTH_PATH, liveness_endpoint

    chart = Path(__file__).resolve().parents[3] / "charts" / "txntable-operator"
    deployment = (chart / "templates" / "deployment.yaml").read_text()
    probes = deployment[deployment.index("livenessProbe:") : deployment.index("resources:")]
    liveness = probes[: probes.index("readinessProbe:")]
    readiness = probes[probes.index("readinessProbe:") :]
    assert f"path: {HEALTH_PATH}" in liveness and "port: health" in liveness
    # readiness: /readyz of the metrics server (observability.server, handlers.readiness)
    assert "path: /readyz" in readiness and "port: metrics" in readiness
    assert "Probe.path" not in deployment
    assert liveness_endpoint(8081) == f"http://0.0.0.0:8081{HEALTH_PATH}"


QUIET = r"""
import logging, sys
from txntable.config import Config
from txntable.handlers.logs import configure_logging

configure_logging(Config(log_format="json", log_level=sys.argv[1]))
kopf_log = logging.getLogger("kopf.objects")  # Kopf's per-object loggers log through it
kopf_log.info("Timer 'reconcile' succeeded.")
kopf_log.info("Handler 'spec-changes' succeeded.")
kopf_log.info("Indexer 'compaction_policies' succeeded.")
kopf_log.info("Handler 'stop-runs' succeeded.")
kopf_log.info("Adding the finalizer, thus preventing the actual deletion.")
kopf_log.error("Timer 'reconcile' failed with an exception. Will retry.")
kopf_log.warning("Daemon 'commit-events' is cancelled. Will escalate.")
kopf_log.warning("Timer 'reconcile' is cancelled. Will escalate.")
"""


def test_routine_handler_successes_are_not_logged_below_debug() -> None:
    """Kopf logs every handler success at INFO: with a timer per table, a line per table per
    interval (340 a second at 10,000 tables). Those of the routine handlers go; the deletion
    handler's success, Kopf's other messages and every error stay; so does a cancellation, but
    for the commit-events daemon's (Kopf's way of stopping an async daemon, at every table's
    deletion and every controller stop); DEBUG shows them all."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def messages(level: str) -> list[str]:
        proc = subprocess.run(
            [sys.executable, "-c", QUIET, level],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        return [json.loads(ln)["message"] for ln in proc.stderr.splitlines() if ln.strip()]

    assert messages("INFO") == [
        "Handler 'stop-runs' succeeded.",
        "Adding the finalizer, thus preventing the actual deletion.",
        "Timer 'reconcile' failed with an exception. Will retry.",
        "Timer 'reconcile' is cancelled. Will escalate.",  # a timer runs a thread: worth saying
    ]
    assert len(messages("DEBUG")) == 8
