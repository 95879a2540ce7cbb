"""Pods the e2e tests run to look inside the cluster: restricted, from our own images."""

from __future__ import annotations

from typing import Any

from tests.e2e.support import Kube
from tests.node.images import CONTROLLER_IMAGE

#: the restricted Pod Security level's container settings
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def python_pod(name: str, namespace: str, script: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": CONTROLLER_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["python", "-c", script],
                    "securityContext": RESTRICTED_CONTAINER,
                }
            ],
        },
    }


def finished(kube: Kube, namespace: str, pod: str) -> str:
    phase = kube.get("-n", namespace, "pod", pod)["status"].get("phase")
    return str(phase) if phase in ("Succeeded", "Failed") else ""
