"""The Helm chart, rendered by Helm's own engine for the default values and every ci/ file:
lint, strict schema validation of every object for Kubernetes 1.33, CRDs identical to crds/,
configuration mapped 1:1 onto the controller's TXNTABLE_* variables, the values schema
refusing bad values, and the monitoring objects wired to the Service and pods they scrape.

ServiceMonitor, PodMonitor, PrometheusRule and KopfPeering are not in kubernetes-validate's
schemas (they are CRD kinds of other projects), so their shape is checked field by field here.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate
import pytest
import yaml

from tests.chart_docs import CHART, CRDS, parse_values, stale_crds
from tests.unit.chart_support import (
    K8S_VERSION,
    NAMESPACE,
    Rendered,
    cases,
    chart_copy,
    deployment_env,
    render,
    watched,
)
from txntable.config import Config

CASES = cases()
FOREIGN_KINDS = {
    "ServiceMonitor",
    "PodMonitor",
    "PrometheusRule",
    "KopfPeering",
    "ClusterKopfPeering",
}


@pytest.fixture(scope="module")
def chart_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return chart_copy(tmp_path_factory.mktemp("chart"))


@pytest.fixture(scope="module")
def chart(chart_dir: Path) -> helm_python.Chart:
    return helm_python.Chart.load(chart_dir)


@pytest.fixture(scope="module")
def rendered(chart: helm_python.Chart) -> dict[str, Rendered]:
    return {name: render(chart, values) for name, values in CASES.items()}


def test_ci_cases_exist() -> None:
    assert {"cluster-wide", "monitoring", "job-backend", "corporate-network"} <= CASES.keys()


@pytest.mark.parametrize("case", sorted(CASES))
def test_lint_is_clean(chart_dir: Path, case: str) -> None:
    report = helm_python.lint(
        chart_dir, CASES[case], strict=True, namespace=NAMESPACE, kube_version="v1.33.0"
    )
    assert report["errors"] == []
    # severity 1 is informational ("icon is recommended"); warnings and errors fail
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_object_is_valid_for_kubernetes(rendered: dict[str, Rendered], case: str) -> None:
    r = rendered[case]
    assert r.objects, "nothing rendered"
    for obj in r.objects:
        if obj["kind"] in FOREIGN_KINDS:
            continue
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        namespaced = obj["kind"] not in {
            "ClusterRole",
            "ClusterRoleBinding",
            "CustomResourceDefinition",
        }
        assert ("namespace" in obj["metadata"]) == namespaced, obj["metadata"]["name"]
    names = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in r.objects]
    assert len(names) == len(set(names)), "two objects with the same kind, namespace and name"


def test_chart_crd_dir_holds_only_kopf_peering(chart: helm_python.Chart) -> None:
    """Helm's crds/ folder: Kopf's peering CRDs, valid, for the kinds the chart creates."""
    kinds = {}
    for entry in chart.crds:
        for crd in yaml.safe_load_all(entry["data"]):
            if crd:
                kubernetes_validate.validate(crd, K8S_VERSION, strict=True)
                kinds[crd["spec"]["names"]["kind"]] = crd
    assert set(kinds) == {"KopfPeering", "ClusterKopfPeering"}
    assert {c["spec"]["group"] for c in kinds.values()} == {"kopf.dev"}
    assert kinds["KopfPeering"]["spec"]["scope"] == "Namespaced"
    assert kinds["ClusterKopfPeering"]["spec"]["scope"] == "Cluster"


def _crd_files() -> dict[str, dict[str, Any]]:
    out = {}
    for path in CRDS.glob("*.yaml"):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        assert len(docs) == 1
        out[docs[0]["metadata"]["name"]] = docs[0]
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_chart_crds_equal_the_repository_crds(rendered: dict[str, Rendered], case: str) -> None:
    assert stale_crds() == [], "run: python -m tests.chart_docs --write"
    r = rendered[case]
    ours = {}
    for crd in r.of_kind("CustomResourceDefinition"):
        crd = json.loads(json.dumps(crd))
        annotations = crd["metadata"].pop("annotations", {})
        keep = r.values["crds"]["keep"]
        assert annotations == ({"helm.sh/resource-policy": "keep"} if keep else {})
        labels = crd["metadata"].get("labels", {})
        for key, value in r.values["commonLabels"].items():  # added to every object
            assert labels.pop(key) == value
        ours[crd["metadata"]["name"]] = crd
    assert ours == _crd_files()


def test_crds_create_false_renders_none(chart: helm_python.Chart) -> None:
    assert render(chart, {"crds": {"create": False}}).of_kind("CustomResourceDefinition") == []


# -- configuration -------------------------------------------------------------------------

#: values path -> (value to set, what TXNTABLE_* must then hold), one per Config variable.
MAPPING: dict[str, tuple[str, Any, str]] = {
    "TXNTABLE_WATCH_NAMESPACES": ("watch.namespaces", ["a", "b"], "a,b"),
    "TXNTABLE_OBSERVE_INTERVAL_SECONDS": ("config.observeIntervalSeconds", 7.5, "7.5"),
    "TXNTABLE_EVENT_PROBE_INTERVAL_SECONDS": ("config.eventProbeIntervalSeconds", 0.5, "0.5"),
    "TXNTABLE_EVENT_DEBOUNCE_SECONDS": ("config.eventDebounceSeconds", 2, "2"),
    "TXNTABLE_API_REQUESTS_IN_FLIGHT": ("config.apiRequestsInFlight", 5, "5"),
    "TXNTABLE_MAX_CONCURRENT_RUNS": ("config.maxConcurrentRuns", 9, "9"),
    "TXNTABLE_DEFAULT_BACKEND": ("config.defaultBackend", "job", "job"),
    "TXNTABLE_SPARK_IMAGE": ("spark.image.repository", "x/spark", "ghcr.io/x/spark:0.1.0"),
    "TXNTABLE_SPARK_SERVICE_ACCOUNT": ("spark.serviceAccount.name", "runner", "runner"),
    "TXNTABLE_INLINE_CHECKPOINT_MAX_FILES": ("config.inlineCheckpointMaxFiles", 12, "12"),
    "TXNTABLE_PERMISSION_RETRY_SECONDS": ("config.permissionRetrySeconds", 5, "5"),
    "TXNTABLE_RUN_TTL_SECONDS": ("config.runTtlSeconds", 120, "120"),
    "TXNTABLE_METRICS_PORT": ("metrics.port", 9090, "9090"),
    "TXNTABLE_HEALTH_PORT": ("health.port", 9091, "9091"),
    "TXNTABLE_PUSHGATEWAY_URL": ("config.pushgatewayUrl", "http://pg:9091", "http://pg:9091"),
    "TXNTABLE_LOG_FORMAT": ("config.logFormat", "text", "text"),
    "TXNTABLE_LOG_LEVEL": ("config.logLevel", "DEBUG", "DEBUG"),
    "TXNTABLE_PEERING_NAME": ("config.peeringName", "lake", "lake"),
    "TXNTABLE_SHARDS": ("config.shards", 12, "12"),
}


def _set(values: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    node = values
    *parents, last = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return values


def test_every_config_variable_has_one_value() -> None:
    variables = {name for name, _, _ in Config.variables()}
    assert set(MAPPING) == variables
    documented = {e.env: e.path for e in parse_values((CHART / "values.yaml").read_text()) if e.env}
    assert documented == {env: path for env, (path, _, _) in MAPPING.items()}


@pytest.mark.parametrize("variable", sorted(MAPPING))
def test_each_variable_is_set_from_its_value(chart: helm_python.Chart, variable: str) -> None:
    path, value, expected = MAPPING[variable]
    env = deployment_env(render(chart, _set({}, path, value)))
    assert env[variable] == expected


@pytest.mark.parametrize("case", sorted(CASES))
def test_deployment_env_is_exactly_a_valid_config(rendered: dict[str, Rendered], case: str) -> None:
    r = rendered[case]
    env = deployment_env(r)
    assert set(env) == {name for name, _, _ in Config.variables()}
    config = Config.from_env(env)  # the controller's own validation accepts every value
    assert config.namespaces == watched(r.values)


def test_chart_defaults_are_the_code_defaults(rendered: dict[str, Rendered]) -> None:
    config = Config.from_env(deployment_env(rendered["default"]))
    assert config == Config(watch_namespaces=NAMESPACE)


def test_app_version_is_the_package_version() -> None:
    chart_meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((CHART.parents[1] / "pyproject.toml").read_text())["project"]
    assert chart_meta["appVersion"] == project["version"]


def test_the_oldest_kubernetes_claimed_is_the_one_tested() -> None:
    """Chart.yaml's kubeVersion floor is the minor of the API server the admission cases run
    on besides the pinned one (tools/controlplane-oldest, issue 33.5): a claim moved without
    the test, or the test without the claim, fails here."""
    from tests.controlplane.binaries import KUBE_MODULE, OLDEST

    floor = yaml.safe_load((CHART / "Chart.yaml").read_text())["kubeVersion"]
    assert floor.startswith(">=")
    claimed = floor[2:].split("-")[0].split(".")[:2]
    tested = OLDEST.required(KUBE_MODULE).lstrip("v").split(".")[:2]
    assert claimed == tested, (floor, OLDEST.required(KUBE_MODULE))


BAD_VALUES = [
    {"replicaCount": 2},  # without shards: two Kopf peers would freeze each other
    {"replicaCount": 3, "config": {"shards": 0}},
    {"config": {"shards": -1}},
    {"config": {"shards": 257}},
    {"watch": {"clusterWide": True, "namespaces": ["a"]}},
    {"watch": {"namespaces": ["Not_A_Namespace"]}},
    {"rbac": {"secrets": {"namespaces": ["a"]}}},  # only for cluster-wide installs
    {"rbac": {"backends": ["local"]}},
    {"config": {"logLevel": "TRACE"}},
    {"config": {"defaultBackend": "yarn"}},
    {"config": {"defaultBackend": "local"}},  # no Java or Spark in the controller image
    {"config": {"maxConcurrentRuns": 0}},
    {"config": {"apiRequestsInFlight": 0}},
    {"config": {"observeIntervalSeconds": 0}},
    {"config": {"pushgatewayUrl": "pushgateway:9091"}},
    {"metrics": {"port": 70000}},
    {"image": {"digest": "latest"}},
    {"image": {"pullPolicy": "Sometimes"}},
    {"securityContext": {"allowPrivilegeEscalation": True}},
    {"securityContext": {"privileged": True}},
    {"securityContext": {"readOnlyRootFilesystem": False}},
    {"securityContext": {"capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN"]}}},
    {"podSecurityContext": {"runAsNonRoot": False}},
    {"podSecurityContext": {"runAsUser": 0}},
    {"imageTag": "0.1.0"},  # a typo of image.tag is refused, not ignored
]


@pytest.mark.parametrize("values", BAD_VALUES, ids=lambda v: json.dumps(v, sort_keys=True))
def test_schema_refuses_bad_values(chart: helm_python.Chart, values: dict[str, Any]) -> None:
    with pytest.raises(helm_python.HelmValuesError):
        chart.render(values, name="t", namespace=NAMESPACE)


# -- wiring: Service, monitors, rules, dashboard, peering ------------------------------------


def _pod_labels(r: Rendered) -> dict[str, str]:
    return dict(r.one("Deployment")["spec"]["template"]["metadata"]["labels"])


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


@pytest.mark.parametrize("case", sorted(CASES))
def test_service_and_probes_reach_the_container(rendered: dict[str, Rendered], case: str) -> None:
    r = rendered[case]
    container = r.one("Deployment")["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": r.values["metrics"]["port"], "health": r.values["health"]["port"]}
    assert container["livenessProbe"]["httpGet"]["port"] == "health"
    # ready: started and not paused by Kopf's peering (/readyz on the metrics port)
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    service = r.one("Service")
    assert _matches(service["spec"]["selector"], _pod_labels(r))
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["metrics"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_kopf_peers_as_the_pod(rendered: dict[str, Rendered], case: str) -> None:
    """Kopf's peering identity (``POD_ID``, read by Kopf) is the pod's name from the downward
    API: a container restarted in its pod takes its dead predecessor's peering entry for its
    own instead of pausing until the entry expires (a minute)."""
    container = rendered[case].one("Deployment")["spec"]["template"]["spec"]["containers"][0]
    (pod_id,) = [e for e in container["env"] if e["name"] == "POD_ID"]
    assert pod_id == {"name": "POD_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}


def test_metrics_and_health_ports_must_differ(chart: helm_python.Chart) -> None:
    with pytest.raises(helm_python.HelmError, match="must differ"):
        chart.render({"health": {"port": 8080}}, name="t", namespace=NAMESPACE)


def test_monitoring_objects(rendered: dict[str, Rendered]) -> None:
    r = rendered["monitoring"]
    service = r.one("Service")
    sm = r.one("ServiceMonitor")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert _matches(sm["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    assert sm["spec"]["namespaceSelector"]["matchNames"] == [NAMESPACE]
    assert [e["port"] for e in sm["spec"]["endpoints"]] == [service["spec"]["ports"][0]["name"]]
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert r.of_kind("PodMonitor") == []  # one monitor per pod (test_chart_extras)
    pod_monitored = rendered["corporate-network"]
    assert pod_monitored.of_kind("ServiceMonitor") == []
    pm = pod_monitored.one("PodMonitor")
    assert _matches(pm["spec"]["selector"]["matchLabels"], _pod_labels(pod_monitored))
    assert [e["port"] for e in pm["spec"]["podMetricsEndpoints"]] == ["metrics"]
    assert pm["spec"]["podMetricsEndpoints"][0]["interval"] == "15s"
    assert pm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    rule = r.one("PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    groups = rule["spec"]["groups"]
    assert groups and all(g["name"] and g["rules"] for g in groups)
    for item in (rule for g in groups for rule in g["rules"]):
        assert ("alert" in item) != ("record" in item) and isinstance(item["expr"], str | int)
    dashboard = r.one("ConfigMap")
    assert dashboard["metadata"]["namespace"] == "monitoring"
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["txntable.json"])["title"]


def test_rules_template_is_the_rules_file(chart_dir: Path, rendered: dict[str, Rendered]) -> None:
    source = yaml.safe_load((chart_dir / "files" / "prometheus-rules.yaml").read_text())
    assert rendered["monitoring"].one("PrometheusRule")["spec"]["groups"] == source["groups"]


def test_monitoring_is_off_by_default(rendered: dict[str, Rendered]) -> None:
    kinds = {o["kind"] for o in rendered["default"].objects}
    assert not kinds & {"ServiceMonitor", "PodMonitor", "PrometheusRule", "ConfigMap"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_kopf_peering_objects(rendered: dict[str, Rendered], case: str) -> None:
    r = rendered[case]
    name = r.values["config"]["peeringName"]
    if r.values["config"]["shards"]:  # Leases instead: Kopf's peering is off
        assert r.of_kind("KopfPeering") == r.of_kind("ClusterKopfPeering") == []
    elif r.values["watch"]["clusterWide"]:
        assert [p["metadata"]["name"] for p in r.of_kind("ClusterKopfPeering")] == [name]
        assert r.of_kind("KopfPeering") == []
    else:
        peerings = r.of_kind("KopfPeering")
        assert {p["metadata"]["name"] for p in peerings} == {name}
        assert sorted(p["metadata"]["namespace"] for p in peerings) == sorted(watched(r.values))
    for peering in r.of_kind("KopfPeering") + r.of_kind("ClusterKopfPeering"):
        assert peering["apiVersion"] == "kopf.dev/v1" and set(peering) == {
            "apiVersion",
            "kind",
            "metadata",
        }


def test_notes_name_the_watched_namespaces(rendered: dict[str, Rendered]) -> None:
    assert f"watches: {NAMESPACE}." in rendered["default"].notes
    assert "every namespace" in rendered["cluster-wide"].notes
    assert "analytics, finance" in rendered["job-backend"].notes


@pytest.mark.parametrize("case", sorted(CASES))
def test_replicas_and_disruptions_follow_the_shards(
    rendered: dict[str, Rendered], case: str
) -> None:
    """Without shards one pod at a time, never two (Recreate) and no PodDisruptionBudget (it
    would block every drain of the node); with shards a rolling update one pod at a time and,
    for more than one replica, a budget that keeps all but one."""
    r = rendered[case]
    strategy = r.one("Deployment")["spec"]["strategy"]
    budgets = r.of_kind("PodDisruptionBudget")
    if not r.values["config"]["shards"]:
        assert strategy == {"type": "Recreate"} and budgets == []
        return
    assert strategy == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
    }
    (budget,) = budgets
    assert budget["spec"]["maxUnavailable"] == 1
    selector = r.one("Deployment")["spec"]["selector"]["matchLabels"]
    assert budget["spec"]["selector"]["matchLabels"] == selector
