"""docs/install.md's ``# needs a cluster`` blocks, run as written on the real node.

The guide's first block (``docker build`` and ``docker push`` to ``registry.example.com``) needs
a Docker engine and a registry, neither of which exists here; what it produces is played by the
images ``make images`` built from the same Dockerfile, tagged in the node's containerd under the
names the guide pushes. Every other command runs verbatim with ``bash``, in a scratch directory
that holds the repository's ``charts/``, ``crds/`` and ``examples/``, in the guide's order for
each of its two routes:

* Helm: install (section 3), declare the examples (section 4), remove everything (the
  uninstall section's last route: its plain ``helm uninstall`` block is the same command
  without the rest, and after it the controller is gone, so the CRs' finalizers could not go);
* plain manifests: render (offline), apply with ``kubectl --server-side``; the test removes it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.docblocks import NEEDS_CLUSTER, sections
from tests.e2e.lake import REPO
from tests.e2e.support import Kube
from tests.node.images import CONTROLLER_IMAGE, SPARK_IMAGE

pytestmark = pytest.mark.e2e

DOC = REPO / "docs" / "install.md"
#: what the guide's `docker push` puts in the user's registry
PUSHED = {
    CONTROLLER_IMAGE: "registry.example.com/lake/txntable:0.1.0",
    SPARK_IMAGE: "registry.example.com/lake/txntable-spark:0.1.0",
}
HELM_ROUTE = ("3. Install with Helm", "4. Declare a table and its policies", "Uninstall")
PLAIN_ROUTE = ("Plain manifests (without Helm in the cluster)",)


def _blocks(headings: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(h, b) for h, b in sections(DOC.read_text()) if h in headings]


@pytest.fixture
def scratch(tmp_path: Path, real_cluster: Any, kube: Kube) -> Path:
    # the guide is for a cluster without the chart (conftest.FIRST runs this module first)
    leftover = kube.kubectl("get", "crd", "txntables.txntable.io", check=False)
    assert leftover.returncode != 0, "the chart's CRDs are already installed: run this module first"
    for name in ("charts", "crds", "examples"):
        (tmp_path / name).symlink_to(REPO / name)
    for built, pushed in PUSHED.items():
        real_cluster.node.ctr("images", "tag", "--force", built, pushed)
    return tmp_path


def _bash(kube: Kube, cwd: Path, block: str) -> subprocess.CompletedProcess[str]:
    venv = str(Path(sys.executable).parent)  # kubernetes-validate, as the guide installs it
    env = dict(os.environ, KUBECONFIG=str(kube.kubeconfig), PATH=f"{venv}:{kube.bin_path}")
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip


def test_the_helm_route_runs_as_written(kube: Kube, scratch: Path) -> None:
    ran = []
    route = [
        (heading, block)
        for heading, block in _blocks(HELM_ROUTE)
        if block.startswith(NEEDS_CLUSTER)
        and "<name>" not in block  # a template for the reader to fill in, not a command
        and not (heading == "Uninstall" and "kubectl delete" not in block)
    ]
    for heading, block in route:
        out = _bash(kube, scratch, block)
        assert out.returncode == 0, f"{heading}:\n{block}\n{out.stdout}\n{out.stderr}"
        ran.append(heading)
        if heading == HELM_ROUTE[0]:
            pods = kube.get("-n", "txntable-system", "pods", "-l",
                            "app.kubernetes.io/instance=txntable-operator")["items"]  # fmt: skip
            ready = [c for p in pods for c in p["status"]["conditions"] if c["type"] == "Ready"]
            assert ready and all(c["status"] == "True" for c in ready), pods
            images = {c["image"] for p in pods for c in p["spec"]["containers"]}
            assert images == {PUSHED[CONTROLLER_IMAGE]}, images
    assert ran == list(HELM_ROUTE), ran
    # everything removed: no CRD, no release
    assert kube.kubectl("get", "crd", "txntables.txntable.io", check=False).returncode != 0
    assert "txntable-operator" not in kube.helm("list", "-A").stdout


def test_the_plain_manifest_route_runs_as_written(kube: Kube, scratch: Path) -> None:
    blocks = _blocks(PLAIN_ROUTE)
    # a cluster the guide has not touched yet (the Helm route leaves its namespace)
    kube.kubectl("delete", "namespace", "txntable-system", "--ignore-not-found", "--wait=true",
                 "--timeout=300s")  # fmt: skip
    try:
        for heading, block in blocks:
            out = _bash(kube, scratch, block)  # the render too, with the real helm this time
            assert out.returncode == 0, f"{heading}:\n{block}\n{out.stdout}\n{out.stderr}"
        deployment = kube.get("-n", "txntable-system", "deployment", "txntable-operator")
        assert deployment["status"].get("readyReplicas") == 1, deployment["status"]
    finally:
        _bash(kube, scratch, "kubectl delete --wait=true -f txntable-install.yaml || true")
