"""Small client helpers for the control-plane tests: apply, wait, token, namespace.

Namespaces are made by ``ensure_namespace`` only: each enforces the restricted Pod Security
level and gets its ``default`` ServiceAccount (the part of the absent controller-manager).

Objects are applied with server-side apply (one field manager, conflicts forced), which is what
``kubectl apply --server-side`` does and what large CRDs need: a client-side apply stores the
whole object in an annotation, and the Spark Operator's 836 KB CRD is past its 256 KiB limit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

FIELD_MANAGER = "txntable-tests"
T = TypeVar("T")


def wait_for(
    what: str, check: Callable[[], T | None], timeout: float = 60.0, every: float = 0.25
) -> T:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            found = check()
            if found:
                return found
        except Exception as exc:
            last = exc
        time.sleep(every)
    raise TimeoutError(
        f"timed out after {timeout:.0f} s waiting for {what}"
        + (f" (last error: {last!r})" if last else "")
    )


def dynamic(api: client.ApiClient) -> DynamicClient:
    return DynamicClient(api)


def _resource(dyn: DynamicClient, obj: dict[str, Any]) -> Any:
    try:
        return dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    except ResourceNotFoundError:
        dyn.resources.invalidate_cache()  # a CRD applied since the last discovery
        return dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])


def apply(api: client.ApiClient, obj: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
    """Server-side apply ``obj`` (any kind the server serves); the object the server returns."""
    dyn = dynamic(api)
    meta = obj["metadata"]
    kwargs: dict[str, Any] = {"field_manager": FIELD_MANAGER, "force_conflicts": True}
    if dry_run:
        kwargs["dry_run"] = "All"
    res = _resource(dyn, obj)
    out = res.server_side_apply(
        body=obj,
        name=meta["name"],
        namespace=meta.get("namespace") if res.namespaced else None,
        **kwargs,
    )
    return dict(out.to_dict())


def apply_all(api: client.ApiClient, objects: Iterable[dict[str, Any]]) -> None:
    """Apply CRDs first (waiting until they are Established), then everything else."""
    objects = list(objects)
    crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    for crd in crds:
        apply(api, crd)
    wait_established(api, [c["metadata"]["name"] for c in crds])
    for obj in objects:
        if obj["kind"] != "CustomResourceDefinition":
            apply(api, obj)


def wait_established(api: client.ApiClient, names: Iterable[str], timeout: float = 60.0) -> None:
    ext = client.ApiextensionsV1Api(api)

    def established(name: str) -> bool:
        crd = ext.read_custom_resource_definition(name)
        return any(
            c.type == "Established" and c.status == "True" for c in crd.status.conditions or ()
        )

    for name in names:
        wait_for(f"CRD {name} Established", lambda n=name: established(n), timeout)  # type: ignore[misc]


#: the labels of every namespace the tests make: PodSecurity admission (on by default in
#: kube-apiserver) enforces the restricted level there, so a pod that breaks it is refused
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}
#: the ServiceAccount a pod runs as when it names none
DEFAULT_SERVICE_ACCOUNT = "default"


def ensure_namespace(api: client.ApiClient, name: str) -> None:
    """Namespace ``name``, enforcing the restricted Pod Security level (``RESTRICTED``), with
    its ``default`` ServiceAccount (``ensure_default_service_account``)."""
    try:
        client.CoreV1Api(api).create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=RESTRICTED))
        )
    except ApiException as exc:
        if exc.status != 409:
            raise
    ensure_default_service_account(api, name)


def ensure_default_service_account(api: client.ApiClient, namespace: str) -> None:
    """The ``default`` ServiceAccount of ``namespace``: a stand-in for the controller-manager's
    ServiceAccount controller, which makes it in every namespace, and which does not run here.
    The API server's ServiceAccount admission plugin is on: it refuses a pod whose account does
    not exist (``error looking up service account <ns>/default``), and mounts the account's
    token into the pods it admits, as in a cluster."""
    body = client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=DEFAULT_SERVICE_ACCOUNT))
    try:
        client.CoreV1Api(api).create_namespaced_service_account(namespace, body)
    except ApiException as exc:
        if exc.status != 409:
            raise


def service_account_token(
    api: client.ApiClient, namespace: str, name: str, seconds: int = 3600
) -> str:
    """A token for ServiceAccount ``namespace/name`` from the TokenRequest API (as a kubelet
    would mount it), valid ``seconds``, for the API server's default audience."""
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=seconds)
    )
    out = client.CoreV1Api(api).create_namespaced_service_account_token(name, namespace, request)
    return str(out.status.token)


def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def get_table(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    out: dict[str, Any] = custom(api).get_namespaced_custom_object(
        "txntable.io", "v1alpha1", namespace, "txntables", name
    )
    return out


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    """The condition of ``type_`` in ``obj``'s status, or None."""
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return dict(c)
    return None
