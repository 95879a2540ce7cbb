"""The restricted Pod Security level, judged by the API server's own PodSecurity admission.

Every namespace the control-plane tests make enforces the restricted level
(``kube.ensure_namespace``: ``pod-security.kubernetes.io/enforce: restricted``,
``enforce-version: latest``). Here the pods our manifests produce are created in such a
namespace, and the real server must admit each of them:

* the spark-submit Job's pod (``manifests.spark_submit_job``, created as a Job, its pod made from
  the template the server kept, as the Job controller makes it: ``standins.job_pod``);
* an executor pod from ``manifests.executor_pod_template``, with what Spark's Kubernetes backend
  adds to the template (``executor_pod``);
* the SparkApplication's driver pod (``manifests.spark_application``, made as the Spark
  Operator's submission makes it: ``standins.driver_pod``);
* the controller Deployment's pod, from the chart rendered by Helm's engine for the default
  values and every ``ci/`` values file.

Each case of the manifest builders' unit tests is tried (``tests/unit/launch``). Then pods that
break the level, each in one way, must be refused with the server's own reason, so this test
fails when the namespaces stop enforcing the level or the manifests stop meeting it.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import helm_python
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.controlplane.kube import RESTRICTED
from tests.controlplane.standins import driver_pod, job_pod
from tests.support.launch_requests import CASES, request
from tests.unit.chart_support import cases as chart_cases
from tests.unit.chart_support import chart_copy, render
from txntable.config import Config
from txntable.launch import manifests
from txntable.launch.run import Backend

CONFIG = Config()
CHART_CASES = chart_cases()
#: the reason PodSecurity admission gives, before the list of what breaks the level
REFUSED = 'violates PodSecurity "restricted:latest"'


def _core(api: Any) -> client.CoreV1Api:
    return client.CoreV1Api(api)


def _service_account(api: Any, namespace: str, name: str) -> None:
    """The ServiceAccount a pod names (the chart makes it where it installs; the
    ServiceAccount admission plugin refuses a pod whose account does not exist)."""
    body = client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name))
    try:
        _core(api).create_namespaced_service_account(namespace, body)
    except ApiException as exc:
        if exc.status != 409:
            raise


def _create_pod(api: Any, namespace: str, pod: dict[str, Any]) -> dict[str, Any]:
    """Create ``pod`` in ``namespace`` (a fresh name each time); the object the server kept."""
    pod = copy.deepcopy(pod)
    meta = pod.setdefault("metadata", {})
    meta.pop("name", None)
    meta["generateName"] = "pss-"
    meta["namespace"] = namespace
    spec = pod["spec"]
    spec.pop("nodeName", None)  # no kubelet: nothing to bind to
    if spec.get("serviceAccountName"):
        _service_account(api, namespace, spec["serviceAccountName"])
    created = _core(api).create_namespaced_pod(namespace, pod)
    return dict(api.sanitize_for_serialization(created))


def _refusal(api: Any, namespace: str, pod: dict[str, Any]) -> str:
    """The server's message refusing ``pod``; fails when it is admitted."""
    try:
        created = _create_pod(api, namespace, pod)
    except ApiException as exc:
        assert exc.status == 403, exc.body
        return str(json.loads(exc.body)["message"])
    raise AssertionError(f"admitted in a restricted namespace: {created['metadata']['name']}")


def _job(api: Any, namespace: str, case: str) -> dict[str, Any]:
    """The spark-submit Job of manifest case ``case``, created; the object the server kept."""
    req = request(**{**CASES[case], "namespace": namespace, "backend": Backend.JOB})
    job = manifests.spark_submit_job(req, CONFIG)
    job["metadata"]["name"] = f"{job['metadata']['name'][:50]}-{uuid.uuid4().hex[:6]}"
    created = client.BatchV1Api(api).create_namespaced_job(namespace, job)
    return dict(api.sanitize_for_serialization(created))


def executor_pod(template: dict[str, Any], image: str) -> dict[str, Any]:
    """An executor pod as Spark's Kubernetes backend makes it from ``template`` (its
    ``podTemplateFile``): the template's pod, the container ``podTemplateContainerName`` names
    given the image, the ``executor`` role, the block manager's port and the executor's
    environment; ``restartPolicy: Never``. Spark keeps the template's security contexts,
    volumes and ``automountServiceAccountToken``, which is what admission judges."""
    pod = copy.deepcopy(template)
    (container,) = pod["spec"]["containers"]
    assert container["name"] == manifests.EXECUTOR_CONTAINER
    container |= {
        "image": image,
        "args": ["executor"],
        "ports": [{"name": "blockmanager", "containerPort": manifests.BLOCK_MANAGER_PORT}],
        "env": [
            *container.get("env", []),
            {"name": "SPARK_EXECUTOR_ID", "value": "1"},
            {"name": "SPARK_DRIVER_URL", "value": "spark://CoarseGrainedScheduler@10.0.0.1:7078"},
            {
                "name": "SPARK_EXECUTOR_POD_IP",
                "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
            },
        ],
    }
    pod["spec"]["restartPolicy"] = "Never"
    return pod


def _spark_application(api: Any, namespace: str, case: str) -> dict[str, Any]:
    """The SparkApplication of manifest case ``case``, created; the object the server kept."""
    req = request(**{**CASES[case], "namespace": namespace})
    app = manifests.spark_application(req, CONFIG)
    app["metadata"]["name"] = f"{app['metadata']['name'][:50]}-{uuid.uuid4().hex[:6]}"
    out: dict[str, Any] = client.CustomObjectsApi(api).create_namespaced_custom_object(
        "sparkoperator.k8s.io", "v1beta2", namespace, "sparkapplications", app
    )
    return out


def test_every_test_namespace_enforces_the_restricted_level(admin: Any, namespace: str) -> None:
    labels = _core(admin).read_namespace(namespace).metadata.labels
    assert RESTRICTED.items() <= labels.items()


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_pods_of_our_run_manifests_are_admitted(
    admin: Any, namespace: str, spark_crds: None, case: str
) -> None:
    job = _job(admin, namespace, case)
    created = _create_pod(admin, namespace, job_pod(job, node=None))
    assert created["spec"]["securityContext"]["runAsNonRoot"] is True
    req = request(**{**CASES[case], "namespace": namespace})
    template = manifests.executor_pod_template(req)
    image = req.image or CONFIG.spark_image
    _create_pod(admin, namespace, executor_pod(template, image))
    app = _spark_application(admin, namespace, case)
    _create_pod(admin, namespace, driver_pod(app, str(uuid.uuid4()), node=None))


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory) -> helm_python.Chart:
    return helm_python.Chart.load(chart_copy(Path(tmp_path_factory.mktemp("chart"))))


@pytest.mark.parametrize("case", sorted(CHART_CASES))
def test_the_controller_pod_of_the_chart_is_admitted(
    admin: Any, namespace: str, chart: helm_python.Chart, case: str
) -> None:
    deployment = render(chart, CHART_CASES[case]).one("Deployment")
    template = deployment["spec"]["template"]
    _create_pod(admin, namespace, {"metadata": template["metadata"], "spec": template["spec"]})


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change of the pod: ``value`` at the dotted ``path`` (``container.`` is the first
    container; ``None`` removes the field)."""

    def change(pod: dict[str, Any]) -> None:
        node: dict[str, Any] = pod
        parts = path.split(".")
        if parts[0] == "container":
            node, parts = pod["spec"]["containers"][0], parts[1:]
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(parts[-1], None)
        else:
            node[parts[-1]] = value

    return change


def _privileged(pod: dict[str, Any]) -> None:
    # with allowPrivilegeEscalation=false the pod would be invalid (422), not a breach
    context = pod["spec"]["containers"][0]["securityContext"]
    context.pop("allowPrivilegeEscalation")
    context["privileged"] = True


def _without_seccomp(pod: dict[str, Any]) -> None:
    pod["spec"]["securityContext"].pop("seccompProfile")
    pod["spec"]["containers"][0]["securityContext"].pop("seccompProfile")


#: one breach of the restricted level each, and the words of the server's reason for it
BREACHES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "privilege escalation": (
        _set("container.securityContext.allowPrivilegeEscalation", True),
        "allowPrivilegeEscalation != false",
    ),
    "capabilities kept": (
        _set("container.securityContext.capabilities", None),
        "unrestricted capabilities",
    ),
    "a capability added": (
        _set("container.securityContext.capabilities.add", ["NET_ADMIN"]),
        "unrestricted capabilities",
    ),
    "root allowed": (
        _set("container.securityContext.runAsNonRoot", False),
        "runAsNonRoot != true",
    ),
    "uid 0": (_set("spec.securityContext.runAsUser", 0), "runAsUser=0"),
    "no seccomp profile": (_without_seccomp, "seccompProfile"),
    "privileged": (_privileged, "privileged ("),
    "host network": (_set("spec.hostNetwork", True), "host namespaces"),
    "a hostPath volume": (
        _set("spec.volumes", [{"name": "spark-local-dir-1", "hostPath": {"path": "/tmp"}}]),
        "restricted volume types",
    ),
    "a host port": (
        _set("container.ports", [{"containerPort": 7078, "hostPort": 7078}]),
        "hostPort",
    ),
}


@pytest.mark.parametrize("breach", sorted(BREACHES))
def test_a_pod_that_breaks_the_restricted_level_is_refused(
    admin: Any, namespace: str, breach: str
) -> None:
    """Our Job's pod (admitted above) changed in one way: refused, for that reason."""
    pod = job_pod(_job(admin, namespace, "minimal"), node=None)
    change, reason = BREACHES[breach]
    change(pod)
    message = _refusal(admin, namespace, pod)
    assert REFUSED in message and reason in message, message
