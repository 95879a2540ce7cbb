"""The test control plane is the real thing: pinned version, TLS, tokens, RBAC, audit, restart.

These pin what the other control-plane tests rely on, so a broken fixture fails here with a
plain message rather than somewhere inside a controller flow.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.controlplane import binaries
from tests.controlplane.kube import service_account_token
from tests.controlplane.plane import BUILTIN_NAMESPACES, ControlPlane


def test_serves_the_pinned_kubernetes_version(control_plane: ControlPlane) -> None:
    status, body = control_plane.get("/version")
    assert status == 200
    assert json.loads(body)["gitVersion"] == binaries.versions()[0]


def test_a_token_request_token_authenticates_and_rbac_authorizes(
    control_plane: ControlPlane, admin: Any, namespace: str
) -> None:
    core = client.CoreV1Api(admin)
    sa = client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="nobody"))
    core.create_namespaced_service_account(namespace, sa)
    token = service_account_token(admin, namespace, "nobody", 600)
    as_sa = control_plane.client(token)
    review = client.AuthenticationV1Api(as_sa).create_self_subject_review(
        client.V1SelfSubjectReview()
    )
    assert review.status.user_info.username == f"system:serviceaccount:{namespace}:nobody"
    try:
        client.CoreV1Api(as_sa).list_namespaced_secret(namespace)
        raise AssertionError("a ServiceAccount without a Role listed Secrets")
    except ApiException as exc:
        assert exc.status == 403
    denied = [
        e
        for e in control_plane.audit_events()
        if e["user"]["username"] == f"system:serviceaccount:{namespace}:nobody"
        and e["verb"] == "list"
        and e.get("objectRef", {}).get("resource") == "secrets"
    ]
    assert denied and denied[-1]["responseStatus"]["code"] == 403
    assert denied[-1]["annotations"]["authorization.k8s.io/decision"] == "forbid"


def test_restarted_api_server_keeps_its_data_and_port(
    control_plane: ControlPlane, admin: Any, namespace: str
) -> None:
    core = client.CoreV1Api(admin)
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="kept"), data={"k": "v"})
    core.create_namespaced_config_map(namespace, body)
    url = control_plane.url
    control_plane.restart_apiserver()
    assert control_plane.url == url
    assert core.read_namespaced_config_map("kept", namespace).data == {"k": "v"}


def _bare_pod(name: str, service_account: str | None = None) -> dict[str, Any]:
    """A pod that meets the restricted Pod Security level (every test namespace enforces it)."""
    spec: dict[str, Any] = {
        "securityContext": {"runAsNonRoot": True, "runAsUser": 10001,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "c", "image": "registry.invalid/none:1",
            "securityContext": {"allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]}},
        }],
    }  # fmt: skip
    if service_account:
        spec["serviceAccountName"] = service_account
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_the_service_account_admission_plugin_is_on(admin: Any, namespace: str) -> None:
    """As in a cluster: a pod runs as its namespace's ``default`` ServiceAccount (which
    ``ensure_namespace`` makes, in the stead of the controller-manager's ServiceAccount
    controller) with that account's token mounted, and a pod naming an account that does not
    exist is refused. With the plugin off, both pods were admitted as written."""
    core = client.CoreV1Api(admin)
    pod = core.create_namespaced_pod(namespace, _bare_pod("as-default"))
    assert pod.spec.service_account_name == "default"
    (volume,) = pod.spec.volumes
    assert volume.name.startswith("kube-api-access-") and volume.projected is not None
    mounts = {m.name: m.mount_path for m in pod.spec.containers[0].volume_mounts}
    assert mounts == {volume.name: "/var/run/secrets/kubernetes.io/serviceaccount"}
    try:
        core.create_namespaced_pod(namespace, _bare_pod("as-nobody", "nobody"))
        raise AssertionError("a pod naming a missing ServiceAccount was admitted")
    except ApiException as exc:
        assert exc.status == 403, exc.body
        message = json.loads(exc.body)["message"]
        assert message.endswith(
            f"error looking up service account {namespace}/nobody: "
            'serviceaccount "nobody" not found'
        ), message


def test_the_namespaces_the_server_makes_have_their_default_service_account(
    admin: Any,
) -> None:
    core = client.CoreV1Api(admin)
    for namespace in BUILTIN_NAMESPACES:
        assert core.read_namespaced_service_account("default", namespace).metadata.name
