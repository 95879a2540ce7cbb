"""The chart's extension points for real clusters (issue 13 item 9, issue 11 item 7).

Rendered by Helm's own engine: `env`, `envFrom`, `volumes`/`volumeMounts` and `podAnnotations`
reach the controller pod (an egress proxy, a corporate CA bundle, AWS_REGION), `commonLabels`
land on every rendered object, bad combinations fail the render with a message naming the value,
one pod is never scraped by both a ServiceMonitor and a PodMonitor, and every alert's
`runbook_url` points at its runbook section under `prometheusRule.runbookBaseUrl`.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import helm_python
import pytest
import yaml

from tests.chart_docs import CHART
from tests.unit.chart_support import NAMESPACE, Rendered, cases, chart_copy, render

CASES = cases()
RULES = CHART / "files" / "prometheus-rules.yaml"
OPERATIONS = CHART.parents[1] / "docs" / "operations.md"


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory) -> helm_python.Chart:
    return helm_python.Chart.load(chart_copy(tmp_path_factory.mktemp("chart")))


@pytest.fixture(scope="module")
def corporate(chart: helm_python.Chart) -> Rendered:
    return render(chart, CASES["corporate-network"])


def _pod(r: Rendered) -> dict[str, Any]:
    return dict(r.one("Deployment")["spec"]["template"])


def _container(r: Rendered) -> dict[str, Any]:
    return dict(_pod(r)["spec"]["containers"][0])


# -- env, envFrom, volumes, annotations ---------------------------------------------------


def test_env_is_appended_after_the_chart_variables(corporate: Rendered) -> None:
    env = _container(corporate)["env"]

    def chart(name: str) -> bool:  # the chart's own: its settings and Kopf's peering id
        return name.startswith("TXNTABLE_") or name == "POD_ID"

    ours = [e for e in env if not chart(e["name"])]
    assert ours == CASES["corporate-network"]["env"]  # as given, valueFrom included
    names = [e["name"] for e in env]
    assert names.index("HTTPS_PROXY") > max(i for i, n in enumerate(names) if chart(n))
    assert len(names) == len(set(names))


def test_env_from_volumes_and_mounts_reach_the_controller(corporate: Rendered) -> None:
    values = CASES["corporate-network"]
    container = _container(corporate)
    assert container["envFrom"] == values["envFrom"]
    volumes = _pod(corporate)["spec"]["volumes"]
    assert volumes[0]["name"] == "tmp" and volumes[1:] == values["volumes"]
    mounts = container["volumeMounts"]
    assert mounts[0] == {"name": "tmp", "mountPath": "/tmp"}
    assert mounts[1:] == values["volumeMounts"]
    # the CA bundle the env points at is a file under a mounted volume
    bundle = next(e["value"] for e in container["env"] if e["name"] == "AWS_CA_BUNDLE")
    assert any(bundle.startswith(m["mountPath"] + "/") for m in mounts[1:])


def test_pod_annotations(corporate: Rendered) -> None:
    assert (
        _pod(corporate)["metadata"]["annotations"] == CASES["corporate-network"]["podAnnotations"]
    )


def test_defaults_add_nothing(chart: helm_python.Chart) -> None:
    r = render(chart, {})
    container = _container(r)
    assert "envFrom" not in container
    assert all(e["name"].startswith("TXNTABLE_") or e["name"] == "POD_ID" for e in container["env"])
    assert [v["name"] for v in _pod(r)["spec"]["volumes"]] == ["tmp"]
    assert [m["name"] for m in container["volumeMounts"]] == ["tmp"]
    assert "annotations" not in _pod(r)["metadata"]


# -- commonLabels ---------------------------------------------------------------------------


def test_common_labels_are_on_every_object_and_the_pod(corporate: Rendered) -> None:
    common = CASES["corporate-network"]["commonLabels"]
    assert len(corporate.objects) > 10
    for obj in corporate.objects:
        labels = obj["metadata"].get("labels", {})
        assert labels.items() >= common.items(), (obj["kind"], obj["metadata"]["name"])
    assert _pod(corporate)["metadata"]["labels"].items() >= common.items()


def test_common_labels_stay_out_of_the_selector(
    chart: helm_python.Chart, corporate: Rendered
) -> None:
    """A Deployment's selector is immutable: adding a common label must not change it."""
    plain = render(chart, {})
    selector = corporate.one("Deployment")["spec"]["selector"]
    assert selector == plain.one("Deployment")["spec"]["selector"]
    assert corporate.one("Service")["spec"]["selector"] == plain.one("Service")["spec"]["selector"]


def test_pod_labels_win_over_common_labels_on_the_pod(chart: helm_python.Chart) -> None:
    r = render(chart, {"commonLabels": {"team": "a", "tier": "x"}, "podLabels": {"team": "b"}})
    labels = _pod(r)["metadata"]["labels"]
    assert labels["team"] == "b" and labels["tier"] == "x"
    assert r.one("Deployment")["metadata"]["labels"]["team"] == "a"


# -- refused values ------------------------------------------------------------------------

REFUSED_BY_TEMPLATE = [
    ({"env": [{"name": "TXNTABLE_LOG_LEVEL", "value": "DEBUG"}]}, "TXNTABLE_LOG_LEVEL is set from"),
    ({"volumes": [{"name": "tmp", "emptyDir": {}}]}, 'volumes: the name "tmp" is taken'),
    (
        {"volumes": [{"name": "ca", "emptyDir": {}}, {"name": "ca", "emptyDir": {}}]},
        'the name "ca" is taken',
    ),
    ({"volumeMounts": [{"name": "ca", "mountPath": "/etc/ca"}]}, '"ca" mounts a volume that is'),
    (
        {
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "volumeMounts": [{"name": "scratch", "mountPath": "/tmp/"}],
        },
        "/tmp is the chart's scratch volume",
    ),
    (
        {"commonLabels": {"app.kubernetes.io/name": "x"}},
        "commonLabels.app.kubernetes.io/name: the chart sets this label itself",
    ),
    (
        {"metrics": {"serviceMonitor": {"enabled": True}, "podMonitor": {"enabled": True}}},
        "are both true: enable one of them",
    ),
]


@pytest.mark.parametrize(("values", "message"), REFUSED_BY_TEMPLATE, ids=lambda v: str(v)[:60])
def test_bad_combinations_fail_the_render_with_a_clear_message(
    chart: helm_python.Chart, values: dict[str, Any], message: str
) -> None:
    with pytest.raises(helm_python.HelmError, match=re.escape(message)):
        chart.render(values, name="t", namespace=NAMESPACE)


REFUSED_BY_SCHEMA = [
    {"commonLabels": {"bad key!": "x"}},
    {"commonLabels": {"team": "has spaces"}},
    {"commonLabels": {"team": "x" * 64}},
    {"commonLabels": {"team": 3}},
    {"env": [{"value": "no name"}]},
    {"volumes": [{"configMap": {"name": "no-name"}}]},
    {"volumeMounts": [{"name": "ca", "mountPath": "relative/path"}]},
    {"prometheusRule": {"runbookBaseUrl": "docs/operations.md"}},
    {"prometheusRule": {"runbookBaseUrl": "https://x.example/ops.md#anchor"}},
]


@pytest.mark.parametrize("values", REFUSED_BY_SCHEMA, ids=lambda v: str(v)[:60])
def test_schema_refuses_bad_extension_values(
    chart: helm_python.Chart, values: dict[str, Any]
) -> None:
    with pytest.raises(helm_python.HelmValuesError):
        chart.render(values, name="t", namespace=NAMESPACE)


def test_a_mount_of_a_listed_volume_elsewhere_renders(chart: helm_python.Chart) -> None:
    """The checks above refuse only what is wrong: a good volume and mount pass."""
    r = render(
        chart,
        {
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "volumeMounts": [{"name": "scratch", "mountPath": "/tmpdata"}],
        },
    )
    assert [m["mountPath"] for m in _container(r)["volumeMounts"]] == ["/tmp", "/tmpdata"]


# -- one monitor per pod -------------------------------------------------------------------


@pytest.mark.parametrize("monitor", ["serviceMonitor", "podMonitor"])
def test_each_monitor_alone_renders_exactly_one(chart: helm_python.Chart, monitor: str) -> None:
    r = render(chart, {"metrics": {monitor: {"enabled": True}}})
    kinds = [o["kind"] for o in r.objects if o["kind"] in ("ServiceMonitor", "PodMonitor")]
    assert kinds == [monitor[0].upper() + monitor[1:]]


# -- runbook links ---------------------------------------------------------------------------


def _alerts(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def _anchors() -> set[str]:
    """GitHub's anchors of docs/operations.md's headings."""
    return {
        "".join(c for c in line.lstrip("#").strip().lower() if c.isalnum() or c in " -").replace(
            " ", "-"
        )
        for line in OPERATIONS.read_text().splitlines()
        if line.startswith("#")
    }


def test_rules_file_links_match_the_chart_default(chart: helm_python.Chart) -> None:
    """A plain Prometheus loading the rules file gets the same links as the chart's default."""
    base = chart.merge_values({})["prometheusRule"]["runbookBaseUrl"]
    source = yaml.safe_load(RULES.read_text())["groups"]
    assert _alerts(source)
    for alert in _alerts(source):
        assert alert["annotations"]["runbook_url"] == f"{base}#{alert['alert'].lower()}"
        assert alert["alert"].lower() in _anchors(), f"no runbook section for {alert['alert']}"
    rendered = render(chart, {"prometheusRule": {"enabled": True}}).one("PrometheusRule")
    assert rendered["spec"]["groups"] == source


def test_runbook_base_url_sets_every_alert_link(corporate: Rendered) -> None:
    base = CASES["corporate-network"]["prometheusRule"]["runbookBaseUrl"]
    groups = corporate.one("PrometheusRule")["spec"]["groups"]
    source = yaml.safe_load(RULES.read_text())["groups"]
    expected = copy.deepcopy(source)
    for alert in _alerts(expected):
        alert["annotations"]["runbook_url"] = f"{base}#{alert['alert'].lower()}"
    assert groups == expected  # only the links differ from the rules file
    assert groups != source


def test_every_alert_has_runbook_sections_with_the_three_parts() -> None:
    """Each alert's section says what it means, how to check and what to do."""
    text = OPERATIONS.read_text()
    for name in {a["alert"] for a in _alerts(yaml.safe_load(RULES.read_text())["groups"])}:
        start = text.index(f"\n### {name}\n")
        end = text.find("\n## ", start + 1)
        following = text.find("\n### ", start + 1)
        section = text[start : min(x for x in (end, following, len(text)) if x != -1)]
        for part in ("**What it means.**", "**How to check.**", "**What to do.**"):
            assert part in section, f"{name}: {part} missing"


def test_rules_copy_is_not_modified_in_place(chart: helm_python.Chart) -> None:
    """Rendering with another base twice gives the same links (no state kept between renders)."""
    first = render(
        chart, {"prometheusRule": {"enabled": True, "runbookBaseUrl": "https://a.example/x"}}
    )
    second = render(chart, {"prometheusRule": {"enabled": True}})
    assert _alerts(first.one("PrometheusRule")["spec"]["groups"])[0]["annotations"][
        "runbook_url"
    ].startswith("https://a.example/x#")
    assert _alerts(second.one("PrometheusRule")["spec"]["groups"])[0]["annotations"][
        "runbook_url"
    ].startswith("https://github.com/")
