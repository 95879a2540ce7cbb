"""The chart's RBAC and pod security, rendered for the default values and every ci/ file.

RBAC: no wildcard anywhere, and what is bound to the controller's ServiceAccount is exactly
``txntable.handlers.permissions.controller_permissions()`` placed by scope (table rules in
the watched namespaces, or cluster-wide with CRD and ClusterKopfPeering access; Secrets only
where and as narrowly as the values say): no verb more, none missing.
Spark drivers' ServiceAccount gets exactly ``launch.permissions.SPARK_DRIVER``, in every
namespace where runs execute. Every container meets the restricted Pod Security Standard.
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
    out: set[Grant] = set()
    if values["watch"]["clusterWide"]:
        out |= _expand(ALL, of(Scope.TABLES) + of(Scope.CLUSTER_WIDE))
        secret_ns = list(secrets["namespaces"]) or [ALL]
    else:
        for ns in watched(values):
            out |= _expand(ns, of(Scope.TABLES) + of(Scope.PEERING))
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


# -- restricted Pod Security Standard --------------------------------------------------------


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    """What breaks the restricted Pod Security Standard (v1.33) in a pod spec."""
    bad = []
    psc = pod.get("securityContext", {})
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(flag):
            bad.append(flag)
    for volume in pod.get("volumes", []):
        if set(volume) - {"name"} - {
            "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
            "persistentVolumeClaim", "projected", "secret",
        }:  # fmt: skip
            bad.append(f"volume {volume['name']} type")
    if psc.get("runAsUser") == 0:
        bad.append("pod runAsUser 0")
    for c in pod.get("containers", []) + pod.get("initContainers", []):
        sc = c.get("securityContext", {})
        name = c["name"]
        if sc.get("privileged"):
            bad.append(f"{name}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            bad.append(f"{name}: allowPrivilegeEscalation")
        if "ALL" not in sc.get("capabilities", {}).get("drop", []):
            bad.append(f"{name}: capabilities not dropped")
        if set(sc.get("capabilities", {}).get("add", [])) - {"NET_BIND_SERVICE"}:
            bad.append(f"{name}: capabilities added")
        if sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is not True:
            bad.append(f"{name}: runAsNonRoot")
        if sc.get("runAsUser", psc.get("runAsUser")) == 0:
            bad.append(f"{name}: runAsUser 0")
        seccomp = sc.get("seccompProfile", psc.get("seccompProfile", {}))
        if seccomp.get("type") not in ("RuntimeDefault", "Localhost"):
            bad.append(f"{name}: seccompProfile")
        # beyond the standard, as the issue asks: nothing writes to the image
        if sc.get("readOnlyRootFilesystem") is not True:
            bad.append(f"{name}: readOnlyRootFilesystem")
        if any(p.get("hostPort") for p in c.get("ports", [])):
            bad.append(f"{name}: hostPort")
    return bad


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_container_is_restricted(rendered: dict[str, Rendered], case: str) -> None:
    pods = pod_specs(rendered[case])
    assert pods
    for name, pod in pods:
        assert restricted_violations(pod) == [], name
        assert all(
            c.get("resources", {}).get("limits", {}).get("memory") for c in pod["containers"]
        )


def test_the_checker_catches_violations() -> None:
    pod = {
        "hostNetwork": True,
        "securityContext": {},
        "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
        "containers": [{"name": "c", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}],
    }
    found = restricted_violations(pod)
    for expected in (
        "hostNetwork",
        "volume h type",
        "c: allowPrivilegeEscalation",
        "c: capabilities not dropped",
        "c: capabilities added",
        "c: runAsNonRoot",
        "c: seccompProfile",
        "c: readOnlyRootFilesystem",
    ):
        assert expected in found


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
