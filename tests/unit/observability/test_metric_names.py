"""Every metric the alert rules and the Grafana dashboard use is exported by the code, every
exported metric is documented, and names follow the project's rules."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry

from txntable.observability.controller_metrics import ControllerMetrics
from txntable.observability.metrics import EngineMetrics

REPO = Path(__file__).resolve().parents[3]
FILES = REPO / "charts" / "txntable-operator" / "files"
RULES = FILES / "prometheus-rules.yaml"
DASHBOARD = FILES / "grafana-dashboard.json"
DOCS = REPO / "docs" / "metrics.md"
RUNBOOK_PAGE = "https://github.com/txntable/txntable/blob/main/docs/operations.md"
# identifiers in PromQL: metric names, recorded series (with colons), functions, label names
IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
# names that start with txntable_ but live inside label matchers of __name__=~"a|b"
NAME_REGEX = re.compile(r'__name__\s*=~\s*"([^"]*)"')


def families() -> list[Any]:
    registry = CollectorRegistry()
    EngineMetrics(registry)
    ControllerMetrics(registry)
    return list(registry.collect())


def exported() -> set[str]:
    """Sample names Prometheus sees: counters as _total, histograms as _bucket/_count/_sum."""
    names: set[str] = set()
    for family in families():
        if family.type == "counter":
            names.update({f"{family.name}_total", f"{family.name}_created"})
        elif family.type == "histogram":
            names.update(f"{family.name}{s}" for s in ("_bucket", "_count", "_sum", "_created"))
        else:
            names.add(family.name)
    return names


def used_names(expr: str) -> Iterator[str]:
    """Metric and recorded-series names in a PromQL expression."""
    for pattern in NAME_REGEX.findall(expr):
        yield from pattern.split("|")
    for ident in IDENT.findall(STRING.sub('""', expr)):
        if ident.startswith("txntable_") or ident.startswith("txntable:"):
            yield ident


def rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def dashboard_exprs() -> list[str]:
    def walk(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "expr" and isinstance(value, str):
                    yield value
                elif key == "query" and isinstance(value, dict) and "query" in value:
                    yield value["query"]
                else:
                    yield from walk(value)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)

    return list(walk(json.loads(DASHBOARD.read_text())))


def test_name_extraction_sees_regex_selectors_and_skips_label_values() -> None:
    expr = 'sum(rate({__name__=~"txntable_a_total|txntable_b_total"}[5m])) + x{kind="txntable_no"}'
    assert sorted(used_names(expr)) == ["txntable_a_total", "txntable_b_total"]


def test_rules_use_only_exported_metrics() -> None:
    names = exported()
    recorded = {r["record"] for r in rules() if "record" in r}
    assert recorded
    used = {n for r in rules() for n in used_names(r["expr"])}
    assert used, "no metric found in the rules"
    missing = sorted(n for n in used if n not in names and n not in recorded)
    assert not missing, f"rules use metrics the code does not export: {missing}"
    for name in recorded:  # recorded series follow level:metric:operations
        assert name.count(":") == 2 and name.startswith("txntable_"), name


def test_dashboard_uses_only_exported_metrics_and_recorded_series() -> None:
    names = exported() | {r["record"] for r in rules() if "record" in r}
    exprs = dashboard_exprs()
    assert len(exprs) >= 20
    used = {n for e in exprs for n in used_names(e)}
    missing = sorted(used - names)
    assert not missing, f"dashboard uses metrics the code does not export: {missing}"
    # every controller-side family appears on the dashboard
    shown = {n.removesuffix("_total").removesuffix("_bucket") for n in used}
    controller = {f.name for f in families()} - {f.name for f in EngineMetrics().registry.collect()}
    assert controller <= shown | {"txntable_controller_start_time_seconds"}, controller - shown


def test_dashboard_panels_are_unique_and_have_datasource() -> None:
    dash = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dash["panels"]:
        if panel["type"] != "row":
            assert panel["targets"] and panel["datasource"]["uid"] == "${datasource}"


def test_names_follow_conventions_and_are_documented() -> None:
    docs = DOCS.read_text()
    for family in families():
        name = family.name
        assert name.startswith("txntable_"), name
        if family.type == "counter":
            assert f"`{name}_total`" in docs, f"{name}_total is not in docs/metrics.md"
        else:
            assert f"`{name}`" in docs, f"{name} is not in docs/metrics.md"
        if family.type == "histogram" and "duration" in name:
            assert name.endswith("_seconds"), name
    for name in (r["record"] for r in rules() if "record" in r):
        assert f"`{name}" in docs, f"recorded series {name} is not in docs/metrics.md"


def test_every_alert_has_a_runbook_entry() -> None:
    headings = {
        re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in (REPO / "docs" / "operations.md").read_text().splitlines()
        if line.startswith("#")
    }
    alerts = [r for r in rules() if "alert" in r]
    assert {r["alert"] for r in alerts} >= {
        "TxntableHighCommitConflictRate",
        "TxntableMaintenanceFailing",
        "TxntableCheckpointLag",
        "TxntableSmallFileBacklogGrowing",
        "TxntableControllerDown",
        "TxntableControllerNotReconciling",
        "TxntableVacuumReclaimableBytesHigh",
    }
    for rule in alerts:
        # the chart rewrites the page part from prometheusRule.runbookBaseUrl (test_chart_extras)
        page, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert page == RUNBOOK_PAGE and anchor in headings, rule["alert"]
        assert anchor == rule["alert"].lower()
