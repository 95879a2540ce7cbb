"""Prometheus (Debian's) scrapes the controller pod's /metrics the way the chart tells it to.

The chart's scrape settings are its ServiceMonitor: which Service (labels), which port, path,
interval and timeout. No Prometheus Operator runs here, so this test does what the operator
does with a ServiceMonitor: it renders the chart's ServiceMonitor with ``helm template`` and
turns it into a scrape job. Debian's Prometheus is built without Kubernetes service discovery
(`kubernetes_sd_configs` is unknown to its config parser), so the discovery it would do (the
ready endpoints, on the named port, of the Services the selector picks) is read here from the
Services' EndpointSlices into a file_sd file. Prometheus on the host then reaches the
controller pod by its pod IP over the node's bridge, as a Prometheus pod would.
"""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.plane import free_port, stop_process
from tests.e2e import lake
from tests.e2e.lake import CHART, Install
from tests.e2e.support import Kube, wait_until

pytestmark = pytest.mark.e2e


def _service_monitor(kube: Kube, inst: Install) -> dict[str, Any]:
    out = kube.helm(
        "template", inst.release, str(CHART), "--namespace", inst.namespace,
        "--set", f"watch.namespaces={{{inst.tables}}}",
        "--set", "metrics.serviceMonitor.enabled=true",
        "--set", "metrics.serviceMonitor.interval=5s",
        "--set", "metrics.serviceMonitor.scrapeTimeout=4s",
        "--show-only", "templates/servicemonitor.yaml",
    ).stdout  # fmt: skip
    found: dict[str, Any] = yaml.safe_load(out)
    return found


def targets(kube: Kube, monitor: dict[str, Any]) -> list[dict[str, Any]]:
    """What Prometheus' Kubernetes service discovery finds for the ServiceMonitor: the ready
    endpoints, on the named port, of the Services its selector picks in its namespaces (read
    from their EndpointSlices), as a file_sd document."""
    spec = monitor["spec"]
    (endpoint,) = spec["endpoints"]
    selector = ",".join(f"{k}={v}" for k, v in sorted(spec["selector"]["matchLabels"].items()))
    found = []
    for ns in spec["namespaceSelector"]["matchNames"]:
        for svc in kube.get("-n", ns, "services", "-l", selector)["items"]:
            name = svc["metadata"]["name"]
            slices = kube.get("-n", ns, "endpointslices", "-l",
                              f"kubernetes.io/service-name={name}")["items"]  # fmt: skip
            for piece in slices:
                ports = [
                    p["port"] for p in piece.get("ports") or () if p.get("name") == endpoint["port"]
                ]
                for ep in piece.get("endpoints") or ():
                    if not (ep.get("conditions") or {}).get("ready"):
                        continue
                    pod = (ep.get("targetRef") or {}).get("name", "")
                    found += [
                        {"targets": [f"{address}:{port}"],
                         "labels": {"namespace": ns, "service": name, "pod": pod}}
                        for address in ep["addresses"] for port in ports
                    ]  # fmt: skip
    return found


def scrape_config(monitor: dict[str, Any], sd_file: Path) -> dict[str, Any]:
    """The scrape job the Prometheus Operator makes of a ServiceMonitor (one endpoint), with
    its targets from ``sd_file`` (``targets``)."""
    (endpoint,) = monitor["spec"]["endpoints"]
    meta = monitor["metadata"]
    return {
        "job_name": f"serviceMonitor/{meta['namespace']}/{meta['name']}/0",
        "scrape_interval": endpoint["interval"],
        "scrape_timeout": endpoint["scrapeTimeout"],
        "metrics_path": endpoint["path"],
        "file_sd_configs": [{"files": [str(sd_file)], "refresh_interval": "5s"}],
    }


@pytest.fixture
def prometheus(
    kube: Kube, operator: Install, tmp_path: Path
) -> Iterator[tuple[str, dict[str, Any]]]:
    monitor = _service_monitor(kube, operator)
    sd_file = tmp_path / "targets.json"
    sd_file.write_text(json.dumps(wait_until("the metrics Service's endpoints",
                                             lambda: targets(kube, monitor), 120)))  # fmt: skip
    job = scrape_config(monitor, sd_file)
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({"scrape_configs": [job]}))
    port = free_port()
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=(tmp_path / "prometheus.log").open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        yield f"http://127.0.0.1:{port}", job
    finally:
        stop_process(proc)


def query(url: str, promql: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(
        f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}", timeout=10
    ) as resp:
        body = json.load(resp)
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def test_prometheus_scrapes_the_controller_by_the_charts_service_monitor(
    kube: Kube, operator: Install, prometheus: tuple[str, dict[str, Any]]
) -> None:
    url, job = prometheus
    up = wait_until(
        "the controller's target up",
        lambda: [r for r in query(url, f'up{{job="{job["job_name"]}"}}') if r["value"][1] == "1"],
        120,
        every=2.0,
    )
    (target,) = up
    pod_ip = lake.pods_of(kube, operator.namespace, "app.kubernetes.io/component=controller")[0][
        "status"
    ]["podIP"]
    assert target["metric"]["instance"] == f"{pod_ip}:8080", target
    # the controller's own series, scraped from the pod
    assert query(url, f'count({{job="{job["job_name"]}",__name__=~"txntable_.+"}})'), job
