"""The chart's life on a real API server: install, upgrade from the previous release, uninstall.

On a control plane of its own (an uninstall is judged by what is left in the whole cluster),
Helm's SDK installs the chart as released before issue 20 (``PREVIOUS``, from git history),
tables and policies are created under its CRDs, ``helm upgrade`` moves to the working tree's
chart, and the objects must still be there, unchanged and valid under the new CRDs (an update
of each passes admission). Then ``helm uninstall`` must leave nothing of the release but the
CRDs (``crds.keep``, and Kopf's peering CRDs, which Helm never deletes) and the custom objects
themselves; docs/install.md says so.

Every chart before issue 20 described the CRDs' ``metadata`` schema, which the API server
refuses: no earlier release could be installed at all (fixed with issue 20). The previous
chart is installed with only that description removed; nothing else of it changes.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.controlplane.conftest import started_plane
from tests.controlplane.controller import REPO, install_chart, uninstall_chart, upgrade_chart
from tests.controlplane.flows import GROUP, PLURALS, VERSION
from tests.controlplane.plane import ControlPlane
from tests.unit.crdtools import load_examples

#: the last commit of main before issue 20: the chart as it was released
PREVIOUS = "00049f3"
RELEASE, SYSTEM, TABLES = "txntable", "txntable-system", "analytics"
INSTANCE = "app.kubernetes.io/instance"


@pytest.fixture(scope="module")
def own_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with started_plane(tmp_path_factory.mktemp("lifecycle-logs")) as plane:
        yield plane


def previous_chart(dest: Path) -> Path:
    """The chart at ``PREVIOUS``, with its CRDs' refused ``metadata`` description removed."""
    found = subprocess.run(
        ["git", "-C", str(REPO), "cat-file", "-e", f"{PREVIOUS}^{{commit}}"], check=False
    )
    if found.returncode != 0:
        pytest.skip(f"needs the git history (commit {PREVIOUS}): a shallow clone has none")
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", PREVIOUS, "charts/txntable-operator"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    chart = dest / "charts" / "txntable-operator"
    for crd in (chart / "files" / "crds").glob("*.yaml"):
        text = crd.read_text()
        crd.write_text(text.replace("            description: Standard object metadata.\n", ""))
    return chart


def _custom_objects(api: Any) -> dict[tuple[str, str], dict[str, Any]]:
    custom = client.CustomObjectsApi(api)
    out = {}
    for kind, plural in PLURALS.items():
        for obj in custom.list_namespaced_custom_object(GROUP, VERSION, TABLES, plural)["items"]:
            out[kind, obj["metadata"]["name"]] = obj
    return out


def _left_of_release(api: Any) -> set[tuple[str, str]]:
    """(kind, name) of every object still labelled as the release's."""
    selector = f"{INSTANCE}={RELEASE}"
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    apps, ext = client.AppsV1Api(api), client.ApiextensionsV1Api(api)
    found: set[tuple[str, str]] = set()
    lists = [
        ("ServiceAccount", core.list_service_account_for_all_namespaces),
        ("Service", core.list_service_for_all_namespaces),
        ("ConfigMap", core.list_config_map_for_all_namespaces),
        ("Secret", core.list_secret_for_all_namespaces),
        ("Deployment", apps.list_deployment_for_all_namespaces),
        ("Role", rbac.list_role_for_all_namespaces),
        ("RoleBinding", rbac.list_role_binding_for_all_namespaces),
        ("ClusterRole", rbac.list_cluster_role),
        ("ClusterRoleBinding", rbac.list_cluster_role_binding),
        ("CustomResourceDefinition", ext.list_custom_resource_definition),
    ]
    for kind, list_ in lists:
        found |= {(kind, o.metadata.name) for o in list_(label_selector=selector).items}
    custom = client.CustomObjectsApi(api)
    for plural in ("kopfpeerings",):
        items = custom.list_cluster_custom_object("kopf.dev", "v1", plural, label_selector=selector)
        found |= {("KopfPeering", o["metadata"]["name"]) for o in items["items"]}
    return found


def test_install_upgrade_from_the_previous_release_and_uninstall(
    own_plane: ControlPlane, tmp_path: Path
) -> None:
    api = own_plane.client()
    values = {"watch": {"namespaces": [TABLES]}}
    install = install_chart(
        own_plane,
        tmp_path,
        release=RELEASE,
        namespace=SYSTEM,
        values=values,
        chart=previous_chart(tmp_path),
    )
    assert install.of_kind("Deployment")
    examples = [
        copy.deepcopy(d)
        for p, d in load_examples()
        if d["kind"] in PLURALS and p.parent.name != "local"
    ]
    custom = client.CustomObjectsApi(api)
    for doc in examples:
        doc["metadata"]["namespace"] = TABLES
        custom.create_namespaced_custom_object(GROUP, VERSION, TABLES, PLURALS[doc["kind"]], doc)
    before = _custom_objects(api)
    assert len(before) == len(examples)

    upgraded = upgrade_chart(own_plane, install, values)
    # the CRDs are the working tree's now (a rule added since the previous release is there)
    crd = client.ApiextensionsV1Api(api).read_custom_resource_definition(f"txntables.{GROUP}")
    assert "fieldPath: .partitionColumns" in yaml.safe_dump(crd.to_dict()["spec"]).replace(
        "field_path", "fieldPath"
    )
    # RBAC the previous release had and this one drops is gone (Helm deletes it on upgrade)
    roles = {
        r.metadata.name
        for r in client.RbacAuthorizationV1Api(api).list_namespaced_role(SYSTEM).items
    }
    assert not any(r.endswith("-own") for r in roles), roles
    after = _custom_objects(api)
    assert set(after) == set(before)
    for key, obj in after.items():
        assert obj["spec"] == before[key]["spec"], key
        # still valid under the new CRDs: an update of the object passes admission
        custom.replace_namespaced_custom_object(
            GROUP, VERSION, TABLES, PLURALS[key[0]], key[1], obj, field_validation="Strict"
        )

    assert ("ServiceAccount", upgraded.service_account) in _left_of_release(api)  # it sees
    uninstall_chart(own_plane, upgraded)
    # nothing labelled as the release's is left (the chart's CRDs carry no release label)
    assert _left_of_release(api) == set()
    names = {
        c.metadata.name
        for c in client.ApiextensionsV1Api(api).list_custom_resource_definition().items
    }
    assert {f"{p}.{GROUP}" for p in PLURALS.values()} <= names  # crds.keep
    assert {"kopfpeerings.kopf.dev", "clusterkopfpeerings.kopf.dev"} <= names  # Helm keeps crds/
    assert set(_custom_objects(api)) == set(before)  # the tables and policies stay
    helm_records = client.CoreV1Api(api).list_namespaced_secret(SYSTEM, label_selector="owner=helm")
    assert helm_records.items == []
    shutil.rmtree(tmp_path / "charts", ignore_errors=True)
