"""End to end on a real cluster: install the chart, check its RBAC with the API server's own
authorizer, create a table and watch the controller make it Ready, uninstall.

What this adds to the unit tests (which render, lint and validate everything offline): the API
server admits the objects (CEL rules, admission plugins), the RBAC is enough and no more at run
time, the controller image starts and passes its probes, and Kopf peering comes up.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "txntable-operator"
RELEASE = "txntable-e2e"


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=check, timeout=600)


def _image_args(prefix: str, image: str) -> list[str]:
    repo, _, tag = image.rpartition(":")
    return [
        "--set",
        f"{prefix}.registry=",
        "--set",
        f"{prefix}.repository={repo}",
        "--set",
        f"{prefix}.tag={tag}",
    ]


@pytest.fixture(scope="module")
def install() -> Iterator[tuple[str, str]]:
    suffix = uuid.uuid4().hex[:6]
    system, tables = f"txntable-sys-{suffix}", f"txntable-tables-{suffix}"
    sh("kubectl", "create", "namespace", tables)
    args = [
        "helm", "install", RELEASE, str(CHART), "--namespace", system, "--create-namespace",
        "--set", f"watch.namespaces={{{tables}}}", "--set", "config.defaultBackend=job",
        "--set", "crds.keep=false", "--wait", "--timeout", "5m",
    ]  # fmt: skip
    args += _image_args("image", os.environ["TXNTABLE_E2E_IMAGE"])
    args += _image_args("spark.image", os.environ["TXNTABLE_E2E_SPARK_IMAGE"])
    sh(*args)
    try:
        yield system, tables
    finally:
        sh("helm", "uninstall", RELEASE, "--namespace", system, check=False)
        sh("kubectl", "delete", "namespace", tables, system, "--wait=false", check=False)


def can(system: str, verb: str, resource: str, namespace: str) -> bool:
    sa = f"system:serviceaccount:{system}:{RELEASE}-txntable-operator"
    out = sh("kubectl", "auth", "can-i", verb, resource, "-n", namespace, "--as", sa, check=False)
    return out.stdout.strip() == "yes"


def test_rbac_as_the_api_server_sees_it(install: tuple[str, str]) -> None:
    system, tables = install
    assert can(system, "create", "jobs.batch", tables)
    assert can(system, "patch", "txntables.txntable.io/status", tables)
    assert can(system, "get", "secrets", tables)
    assert not can(system, "list", "secrets", tables)
    assert not can(system, "get", "secrets", "kube-system")
    assert not can(system, "create", "jobs.batch", "kube-system")
    assert not can(system, "delete", "txntables.txntable.io", tables)


def test_controller_makes_a_table_ready(install: tuple[str, str]) -> None:
    _, tables = install
    table = {
        "apiVersion": "txntable.io/v1alpha1",
        "kind": "TxnTable",
        "metadata": {"name": "e2e", "namespace": tables},
        "spec": {
            "location": "file:///tmp/e2e-table",
            "create": {"columns": [{"name": "id", "type": "long"}]},
        },
    }
    subprocess.run(["kubectl", "apply", "-f", "-"], input=json.dumps(table), text=True, check=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        out = sh("kubectl", "-n", tables, "get", "txntable", "e2e", "-o", "json")
        conditions = json.loads(out.stdout).get("status", {}).get("conditions", [])
        if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
            return
        time.sleep(5)
    pytest.fail(f"table never became Ready: {conditions}")


def test_examples_pass_server_side_validation(install: tuple[str, str]) -> None:
    out = sh("kubectl", "apply", "--dry-run=server", "-f", str(REPO / "examples"), check=False)
    # examples target namespace `analytics`; a missing namespace is the only accepted failure
    assert out.returncode == 0 or 'namespaces "analytics" not found' in out.stderr, out.stderr
