"""Both images of the Dockerfile, as built by BuildKit and run by the real node.

What is checked is what the manifests and the chart rely on: the users the pods run as, that
no pip is left to install with, the entrypoints, the job programs at the paths
``launch/manifests.py`` names, and the Spark the runs use. Their sizes are recorded in the
report (``-ra`` prints them) and in docs/testing-real-node.md.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

from tests.e2e.pods import RESTRICTED_CONTAINER, finished
from tests.e2e.support import Kube, wait_until
from tests.node.images import CONTROLLER_IMAGE, SPARK_IMAGE
from txntable.api.common import RunKind
from txntable.launch import manifests

pytestmark = pytest.mark.e2e

#: what a pod of an image reports about itself
INSPECT = textwrap.dedent(
    """
    import importlib.util, json, os, shutil, subprocess, sys
    out = {
        "uid": os.getuid(), "gid": os.getgid(), "cwd": os.getcwd(),
        "python": sys.version.split()[0], "executable": sys.executable,
        "pip_module": importlib.util.find_spec("pip") is not None,
        "pip_command": shutil.which("pip") or shutil.which("pip3"),
        "txntable": importlib.util.find_spec("txntable") is not None,
        "pyspark": importlib.util.find_spec("pyspark") is not None,
        "java": shutil.which("java"),
        "files": {p: os.path.isfile(p) for p in sys.argv[1:]},
        "memory_pool": os.environ.get("ARROW_DEFAULT_MEMORY_POOL"),
    }
    print(json.dumps(out))
    """
)


def run_pod(
    kube: Kube, namespace: str, name: str, image: str, container: dict[str, Any]
) -> tuple[str, str]:
    """Run one container to the end; (phase, log)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "securityContext": {**RESTRICTED_CONTAINER, "readOnlyRootFilesystem": True},
                    "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                    **container,
                }
            ],
            "volumes": [{"name": "tmp", "emptyDir": {}}],
        },
    }
    kube.apply(pod)
    phase = wait_until(f"pod {name} to finish", lambda: finished(kube, namespace, name), 300)
    return phase, kube.kubectl("-n", namespace, "logs", name).stdout


@pytest.fixture(scope="module")
def ns(kube: Kube) -> str:
    return kube.namespace("e2e-images")


def _inspect(kube: Kube, ns: str, name: str, image: str, *files: str) -> dict[str, Any]:
    phase, log = run_pod(kube, ns, name, image, {"command": ["python", "-c", INSPECT, *files]})
    assert phase == "Succeeded", log
    out: dict[str, Any] = json.loads(log.strip().splitlines()[-1])
    return out


def test_the_controller_image(kube: Kube, ns: str) -> None:
    seen = _inspect(kube, ns, "controller-inspect", CONTROLLER_IMAGE)
    assert (seen["uid"], seen["gid"], seen["cwd"]) == (10001, 10001, "/tmp")
    assert seen["python"].startswith("3.11.")
    assert seen["executable"] == "/opt/venv/bin/python"
    assert not seen["pip_module"] and seen["pip_command"] is None
    assert seen["txntable"] and not seen["pyspark"] and seen["java"] is None
    assert seen["memory_pool"] == "system"
    # the entrypoint is the controller: `python -m txntable --help` says what it is, exit 0
    phase, log = run_pod(kube, ns, "controller-help", CONTROLLER_IMAGE, {"args": ["--help"]})
    assert phase == "Succeeded", log
    assert "txntable" in log


def test_the_spark_image(kube: Kube, ns: str) -> None:
    programs = [f"{manifests.JOBS_DIR}/{kind.value}.py" for kind in RunKind]
    seen = _inspect(kube, ns, "spark-inspect", SPARK_IMAGE, *programs, manifests.SPARK_SUBMIT)
    assert (seen["uid"], seen["gid"], seen["cwd"]) == (manifests.SPARK_UID, 185, "/tmp")
    assert seen["executable"] == "/opt/venv/bin/python"
    assert not seen["pip_module"] and seen["pip_command"] is None
    assert seen["txntable"] and seen["pyspark"] and seen["java"]
    assert seen["files"] == dict.fromkeys([*programs, manifests.SPARK_SUBMIT], True)
    # no arguments: the entrypoint (tini, then the role switch) prints Spark's version
    phase, log = run_pod(kube, ns, "spark-version", SPARK_IMAGE, {})
    assert phase == "Succeeded", log
    assert f"version {manifests.spark_version()}" in log
