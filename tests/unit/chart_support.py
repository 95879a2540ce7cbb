"""Rendering the Helm chart with Helm's own engine (helm-python-sdk) for the chart tests.

The chart is rendered from a scratch copy so the tests can add placeholders for the
monitoring files another part of the project writes (files/prometheus-rules.yaml,
files/grafana-dashboard.json) when they are not there yet, without touching the chart.
Cases are the default values plus every values file in the chart's ci/ folder.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python
import yaml

from tests.chart_docs import CHART

RELEASE = "txntable-operator"
NAMESPACE = "txntable-system"
K8S_VERSION = "1.33"
CI_DIR = CHART / "ci"

PLACEHOLDER_RULES = """groups:
  - name: placeholder
    rules:
      - alert: TxntablePlaceholder
        expr: vector(0) > 1
        labels: {severity: info}
        annotations: {summary: "placeholder until files/prometheus-rules.yaml exists"}
"""
PLACEHOLDER_DASHBOARD = '{"title": "txntable (placeholder)", "panels": []}\n'


def cases() -> dict[str, dict[str, Any]]:
    """Values of each rendered case: ``default`` and one per ``ci/*.yaml``."""
    out: dict[str, dict[str, Any]] = {"default": {}}
    for path in sorted(CI_DIR.glob("*.yaml")):
        out[path.stem] = yaml.safe_load(path.read_text()) or {}
    return out


def chart_copy(dest: Path) -> Path:
    """A copy of the chart with placeholders for monitoring files that do not exist yet."""
    target = dest / CHART.name
    shutil.copytree(CHART, target)
    files = target / "files"
    if not (files / "prometheus-rules.yaml").exists():
        (files / "prometheus-rules.yaml").write_text(PLACEHOLDER_RULES)
    if not (files / "grafana-dashboard.json").exists():
        (files / "grafana-dashboard.json").write_text(PLACEHOLDER_DASHBOARD)
    return target


@dataclass
class Rendered:
    """One rendering: the merged values and every object, with the template it came from."""

    values: dict[str, Any]
    objects: list[dict[str, Any]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    notes: str = ""

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def one(self, kind: str) -> dict[str, Any]:
        found = self.of_kind(kind)
        assert len(found) == 1, f"expected one {kind}, found {len(found)}"
        return found[0]


def render(chart: helm_python.Chart, values: dict[str, Any]) -> Rendered:
    out = chart.render(values, name=RELEASE, namespace=NAMESPACE)
    result = Rendered(values=chart.merge_values(values))
    for source, text in sorted(out.items()):
        if source.endswith("NOTES.txt"):
            result.notes = text
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                result.objects.append(doc)
                result.sources.append(source)
    return result


def watched(values: dict[str, Any]) -> list[str]:
    """The namespaces a rendering watches (empty = all), as the chart computes them."""
    if values["watch"]["clusterWide"]:
        return []
    return list(values["watch"]["namespaces"]) or [NAMESPACE]


def controller_sa(r: Rendered) -> str:
    return str(r.one("Deployment")["spec"]["template"]["spec"]["serviceAccountName"])


def pod_specs(r: Rendered) -> list[tuple[str, dict[str, Any]]]:
    """Every pod spec the chart renders (name of the workload, spec)."""
    pods = []
    for obj in r.objects:
        if obj["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            pods.append((obj["metadata"]["name"], obj["spec"]["template"]["spec"]))
        elif obj["kind"] == "Pod":
            pods.append((obj["metadata"]["name"], obj["spec"]))
    return pods


def deployment_env(r: Rendered) -> dict[str, str]:
    """The controller's TXNTABLE_* variables (the chart's configuration; `env` adds others)."""
    container = r.one("Deployment")["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e["value"] for e in container["env"] if e["name"].startswith("TXNTABLE_")}
