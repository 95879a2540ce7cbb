"""The chart's RBAC and pod security, rendered for the default values and every ci/ file.

RBAC: no wildcard anywhere, and what is bound to the controller's ServiceAccount is exactly
``txntable.handlers.permissions.controller_permissions()`` placed by scope (table rules in
the watched namespaces, or cluster-wide with CRD and ClusterKopfPeering access; Secrets only
where and as narrowly as the values say): no verb more, none missing.
Spark drivers' ServiceAccount gets exactly ``launch.permissions.SPARK_DRIVER``, in every
namespace where runs execute. Every container has a read-only root filesystem and a memory
limit; the restricted Pod Security Standard is judged by the real API server
(tests/controlplane/test_pod_security.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml

from tests.unit.chart_support import (
    NAMESPACE,
    Rendered,
    cases,
    chart_copy,
    controller_sa,
    pod_specs,
    render,
    watched,
)
from txntable.handlers.permissions import Scope, controller_permissions
from txntable.launch.permissions import SPARK_DRIVER, Permission
from txntable.launch.run import Backend

CASES = cases()
ALL = "*"  # "cluster scope" in the grant sets below

Grant = tuple[str, str, str, str, tuple[str, ...]]  # namespace, group, resource, verb, names


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Rendered]:
    chart = helm_python.Chart.load(chart_copy(Path(tmp_path_factory.mktemp("chart"))))
    return {name: render(chart, values) for name, values in CASES.items()}


def _rules_by_role(r: Rendered) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    roles = {}
    for obj in r.of_kind("Role") + r.of_kind("ClusterRole"):
        ns = obj["metadata"].get("namespace", ALL)
        roles[(obj["kind"], ns, obj["metadata"]["name"])] = obj.get("rules", [])
    return roles


def granted(r: Rendered, subject: tuple[str, str]) -> set[Grant]:
    """(namespace, group, resource, verb, resourceNames) bound to ServiceAccount ``subject``."""
    roles = _rules_by_role(r)
    out: set[Grant] = set()
    for binding in r.of_kind("RoleBinding") + r.of_kind("ClusterRoleBinding"):
        subjects = {(s["namespace"], s["name"]) for s in binding["subjects"]}
        if subject not in subjects:
            continue
        ns = binding["metadata"].get("namespace", ALL)
        ref = binding["roleRef"]
        role_ns = ALL if ref["kind"] == "ClusterRole" else ns
        rules = roles[(ref["kind"], role_ns, ref["name"])]
        for rule in rules:
            names = tuple(rule.get("resourceNames", ()))
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        out.add((ns, group, resource, verb, names))
    return out


def _expand(ns: str, perms: list[Permission], names: tuple[str, ...] = ()) -> set[Grant]:
    return {(ns, p.group, p.resource, v, names) for p in perms for v in p.verbs}


def expected_controller(values: dict[str, Any]) -> set[Grant]:
    """Where the chart must grant each scope of controller_permissions(), and nothing else."""
    backends = [Backend(b) for b in values["rbac"]["backends"]]
    perms = controller_permissions(backends)

    def of(scope: Scope) -> list[Permission]:
        return [p for s, p in perms if s == scope]

    secrets = values["rbac"]["secrets"]
    names = tuple(secrets["names"])
    sharded = bool(values["config"]["shards"])
    out: set[Grant] = set()
    if sharded:  # Leases in the release namespace, and none of Kopf's peering
        out |= _expand(NAMESPACE, of(Scope.LEASES))
    if values["watch"]["clusterWide"]:
        peering = [] if sharded else of(Scope.CLUSTER_PEERING)
        out |= _expand(ALL, of(Scope.TABLES) + of(Scope.CLUSTER_WIDE) + peering)
        secret_ns = list(secrets["namespaces"]) or [ALL]
    else:
        for ns in watched(values):
            out |= _expand(ns, of(Scope.TABLES) + ([] if sharded else of(Scope.PEERING)))
        secret_ns = watched(values)
    if secrets["enabled"]:
        for ns in secret_ns:
            out |= _expand(ns, of(Scope.SECRETS), names)
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_wildcards(rendered: dict[str, Rendered], case: str) -> None:
    for rules in _rules_by_role(rendered[case]).values():
        for rule in rules:
            for key in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert not any("*" in item for item in rule.get(key, [])), rule
            assert "nonResourceURLs" not in rule


@pytest.mark.parametrize("case", sorted(CASES))
def test_controller_gets_exactly_its_permissions(rendered: dict[str, Rendered], case: str) -> None:
    r = rendered[case]
    actual = granted(r, (NAMESPACE, controller_sa(r)))
    expected = expected_controller(r.values)
    assert actual - expected == set(), "granted beyond handlers/permissions.py"
    assert expected - actual == set(), "missing from the chart"


@pytest.mark.parametrize("case", sorted(CASES))
def test_spark_service_account_per_run_namespace(rendered: dict[str, Rendered], case: str) -> None:
    r = rendered[case]
    name = r.values["spark"]["serviceAccount"]["name"]
    run_namespaces = list(r.values["spark"]["namespaces"]) or watched(r.values)
    accounts = {
        (sa["metadata"]["namespace"], sa["metadata"]["name"]) for sa in r.of_kind("ServiceAccount")
    }
    for ns in run_namespaces:
        assert (ns, name) in accounts
        assert granted(r, (ns, name)) == _expand(ns, list(SPARK_DRIVER))
    assert name != controller_sa(r)


def test_backends_narrow_the_launch_rules(rendered: dict[str, Rendered]) -> None:
    r = rendered["job-backend"]
    resources = {g[2] for g in granted(r, (NAMESPACE, controller_sa(r)))}
    assert "jobs" in resources and "sparkapplications" not in resources
    assert "secrets" not in resources


def test_secret_names_restrict_the_rule(rendered: dict[str, Rendered]) -> None:
    r = rendered["cluster-wide"]
    secrets = {g for g in granted(r, (NAMESPACE, controller_sa(r))) if g[2] == "secrets"}
    assert {g[0] for g in secrets} == {"analytics", "finance"}
    assert {g[4] for g in secrets} == {("lake-s3-credentials", "lake-gcs-credentials")}


def test_bindings_name_existing_service_accounts(rendered: dict[str, Rendered]) -> None:
    for r in rendered.values():
        accounts = {
            (sa["metadata"]["namespace"], sa["metadata"]["name"])
            for sa in r.of_kind("ServiceAccount")
        }
        for binding in r.of_kind("RoleBinding") + r.of_kind("ClusterRoleBinding"):
            for s in binding["subjects"]:
                assert (s["namespace"], s["name"]) in accounts


# -- beyond the restricted Pod Security Standard --------------------------------------------


def beyond_restricted(pod: dict[str, Any]) -> list[str]:
    """What a pod spec lacks of the chart's own rules beyond the restricted Pod Security
    Standard: every container's root filesystem read-only (nothing writes to the image; the
    chart mounts an emptyDir on /tmp) and a memory limit.

    The standard itself is judged by the real API server's PodSecurity admission, for the
    default values and every ci/ file (tests/controlplane/test_pod_security.py), not here: a
    hand re-implementation of it (it lived here) can only drift from the real one. These two
    rules are not part of the standard, so no server checks them; that is why this stays."""
    bad = []
    for c in pod.get("containers", []) + pod.get("initContainers", []):
        name = c["name"]
        if c.get("securityContext", {}).get("readOnlyRootFilesystem") is not True:
            bad.append(f"{name}: readOnlyRootFilesystem")
        if not c.get("resources", {}).get("limits", {}).get("memory"):
            bad.append(f"{name}: no memory limit")
    return bad


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_container_has_a_read_only_root_and_a_memory_limit(
    rendered: dict[str, Rendered], case: str
) -> None:
    pods = pod_specs(rendered[case])
    assert pods
    for name, pod in pods:
        assert beyond_restricted(pod) == [], name


def test_the_checker_catches_violations() -> None:
    pod = {
        "containers": [
            {"name": "c", "securityContext": {"readOnlyRootFilesystem": False}},
            {"name": "d", "resources": {"limits": {"memory": "1Gi"}}},
        ],
        "initContainers": [
            {
                "name": "i",
                "securityContext": {"readOnlyRootFilesystem": True},
                "resources": {"limits": {"memory": "1Gi"}},
            }
        ],
    }
    assert beyond_restricted(pod) == [
        "c: readOnlyRootFilesystem",
        "c: no memory limit",
        "d: readOnlyRootFilesystem",
    ]


def test_cluster_wide_install_of_a_renamed_release(tmp_path: Path) -> None:
    chart = helm_python.Chart.load(chart_copy(tmp_path))
    r = render(chart, {"watch": {"clusterWide": True}, "serviceAccount": {"name": "ctl"}})
    assert controller_sa(r) == "ctl"
    assert granted(r, (NAMESPACE, "ctl")) == expected_controller(r.values)


def test_namespaced_installs_side_by_side_do_not_collide(tmp_path: Path) -> None:
    """Two teams install the same release name in their own namespaces: the second install
    leaves the shared CRDs to the first (crds.create=false) and has nothing cluster-scoped
    (a namespaced controller needs no cluster-wide permission)."""
    chart = helm_python.Chart.load(chart_copy(tmp_path))

    def cluster_scoped(namespace: str, values: dict[str, Any]) -> set[tuple[str, str]]:
        out = chart.render(values, name="txntable-operator", namespace=namespace)
        docs = [d for k, t in out.items() if not k.endswith("NOTES.txt") for d in _load(t)]
        return {
            (d["kind"], d["metadata"]["name"]) for d in docs if "namespace" not in d["metadata"]
        }

    first = cluster_scoped("team-a", {})
    second = cluster_scoped("team-b", {"crds": {"create": False}})
    assert first & second == set()
    assert {kind for kind, _ in first} == {"CustomResourceDefinition"}
    assert second == set()


def _load(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]
