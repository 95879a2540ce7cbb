"""The cluster parts the test control plane lacks, played by the test: kubelet, Job controller,
Spark Operator.

Why: the controller launches a run as a batch Job or a SparkApplication and learns how it ended
from what the Job controller or the Spark Operator writes (Job conditions, the application's
state) and from the driver's log, which the API server fetches from the kubelet of the pod's
node (pods/log). None of these run here, so:

``Kubelet``
    a Node (``standin-node``, address 127.0.0.1) and an HTTPS server on a free port, with a
    certificate of the control plane's CA (the API server verifies it:
    ``--kubelet-certificate-authority``), answering ``/containerLogs/<ns>/<pod>/<container>``
    (``tailLines`` honoured) with the log of the local process that played the container. So
    ``GET pods/<name>/log`` goes through the real API server to it, as in a cluster.
``JobController``
    for a Job: a pod as the Job controller makes it (``generateName``, its labels, an owner
    reference), bound to the node as the scheduler would; the container run by
    ``pod_runner.job_process``; pod status as the kubelet reports it; Job status as the Job
    controller writes it, one step at a time, each passing the API server's validation (since
    1.32): ``startTime`` and ``active``, then ``SuccessCriteriaMet`` or ``FailureTarget``, then
    ``Complete`` with ``completionTime`` or ``Failed`` (reason ``BackoffLimitExceeded``).
``SparkOperator``
    for a SparkApplication: ``SUBMITTED`` with ``submissionID`` and ``driverInfo.podName``, the
    driver pod (container ``spark-kubernetes-driver``), ``RUNNING``, the driver run by
    ``pod_runner.driver_process``, then ``SUCCEEDING``/``COMPLETED`` or ``FAILING``/``FAILED``
    with ``terminationTime`` and the operator's ``errorMessage`` ("driver container failed with
    ExitCode: N, Reason: Error").

Each step can also be taken alone (a test holding a run in flight, or failing one).
"""

from __future__ import annotations

import base64
import http.server
import ssl
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.controlplane.plane import ControlPlane, free_port
from tests.controlplane.pod_runner import LocalPod, driver_process, job_process

NODE = "standin-node"
SPARK = ("sparkoperator.k8s.io", "v1beta2", "sparkapplications")
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
#: the driver container's name in the pods Spark's submission client makes (the Spark Operator's)
DRIVER_CONTAINER = "spark-kubernetes-driver"


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Kubelet:
    """Container logs for the API server (see the module docstring)."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.port = free_port()
        self.logs: dict[tuple[str, str, str], Path] = {}
        self.requests: list[str] = []
        self._server: http.server.ThreadingHTTPServer | None = None

    def start(self) -> Kubelet:
        kubelet = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlparse(self.path)
                kubelet.requests.append(self.path)
                parts = url.path.strip("/").split("/")
                found = None
                if len(parts) == 4 and parts[0] == "containerLogs":
                    found = kubelet.logs.get((parts[1], parts[2], parts[3]))
                if found is None:
                    self._answer(404, b"container not found\n")
                    return
                lines = found.read_bytes().splitlines(keepends=True)
                tail = parse_qs(url.query).get("tailLines")
                if tail:
                    lines = lines[-int(tail[0]) :] if int(tail[0]) else []
                self._answer(200, b"".join(lines))

            def _answer(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(
            self.plane.pki["kubelet_cert"], keyfile=self.plane.pki["kubelet_key"]
        )
        server.socket = context.wrap_socket(server.socket, server_side=True)
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._register_node()
        return self

    def _register_node(self) -> None:
        core = client.CoreV1Api(self.plane.client())
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}},
        }
        try:
            core.create_node(body)
        except ApiException as exc:
            if exc.status != 409:
                raise
        status = {
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "stand-in kubelet (pod logs only)",
                    "lastHeartbeatTime": now(),
                    "lastTransitionTime": now(),
                }
            ],
        }
        core.patch_node_status(NODE, {"status": status})

    def serve(self, namespace: str, pod: str, container: str, log: Path) -> None:
        self.logs[(namespace, pod, container)] = log

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def job_pod(job: Mapping[str, Any], node: str | None = NODE) -> dict[str, Any]:
    """The pod the Job controller makes for ``job`` (as the API server returned it): the
    template's spec as it is (service account, security contexts, volumes), ``generateName``,
    the template's labels with the Job controller's, and the Job as controlling owner; bound
    to ``node`` (the scheduler's part; None: left unscheduled)."""
    meta, template = job["metadata"], job["spec"]["template"]
    name, uid = meta["name"], meta["uid"]
    labels = {
        **(template.get("metadata") or {}).get("labels", {}),
        "batch.kubernetes.io/controller-uid": uid,
        JOB_NAME_LABEL: name,
        "controller-uid": uid,
        "job-name": name,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{name}-",
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": (template.get("metadata") or {}).get("annotations", {}),
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": name,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {**template["spec"], **({"nodeName": node} if node else {})},
    }


def driver_pod(app: Mapping[str, Any], submission: str, node: str | None = NODE) -> dict[str, Any]:
    """The driver pod of a SparkApplication, as Spark's submission client (run by the Spark
    Operator) makes it from the spec: container ``spark-kubernetes-driver`` running the image's
    entrypoint with the ``driver`` role, the run's properties from a ConfigMap at
    ``/opt/spark/conf``, and what the operator takes from ``spec.driver``: service account,
    labels, pod and container security contexts, environment, volumes and their mounts. The
    SparkApplication is its controlling owner; bound to ``node`` (None: left unscheduled)."""
    meta, spec = app["metadata"], app["spec"]
    driver = spec["driver"]
    name = f"{meta['name']}-driver"
    labels = {
        **(driver.get("labels") or {}),
        "spark-role": "driver",
        "spark-app-name": meta["name"],
        "sparkoperator.k8s.io/app-name": meta["name"],
        "sparkoperator.k8s.io/launched-by-spark-operator": "true",
        "sparkoperator.k8s.io/submission-id": submission,
    }
    conf = {"name": "spark-conf-volume-driver", "configMap": {"name": f"{name}-conf-map"}}
    container: dict[str, Any] = {
        "name": DRIVER_CONTAINER,
        "image": spec["image"],
        "args": [
            "driver", "--properties-file", "/opt/spark/conf/spark.properties",
            "--class", "org.apache.spark.deploy.PythonRunner",
            str(spec["mainApplicationFile"]), *[str(a) for a in spec.get("arguments") or ()],
        ],
        "ports": [
            {"name": "driver-rpc-port", "containerPort": 7078},
            {"name": "blockmanager", "containerPort": 7079},
            {"name": "spark-ui", "containerPort": 4040},
        ],
        "env": [
            *(driver.get("env") or ()),
            {"name": "SPARK_DRIVER_BIND_ADDRESS",
             "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "SPARK_CONF_DIR", "value": "/opt/spark/conf"},
        ],
        "volumeMounts": [
            *(driver.get("volumeMounts") or ()),
            {"name": conf["name"], "mountPath": "/opt/spark/conf"},
        ],
    }  # fmt: skip
    if "imagePullPolicy" in spec:
        container["imagePullPolicy"] = spec["imagePullPolicy"]
    if driver.get("envFrom"):
        container["envFrom"] = driver["envFrom"]
    if driver.get("securityContext"):
        container["securityContext"] = driver["securityContext"]
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [container],
        "volumes": [*(spec.get("volumes") or ()), conf],
    }
    if driver.get("serviceAccount"):
        pod_spec["serviceAccountName"] = driver["serviceAccount"]
    if driver.get("podSecurityContext"):
        pod_spec["securityContext"] = driver["podSecurityContext"]
    if node:
        pod_spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": app["apiVersion"],
                    "kind": "SparkApplication",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": pod_spec,
    }


def _secrets(api: Any, namespace: str, containers: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The Secrets a container's ``envFrom`` names, decoded (the kubelet reads them)."""
    out: dict[str, dict[str, str]] = {}
    core = client.CoreV1Api(api)
    for container in containers:
        for source in container.get("envFrom") or ():
            name = (source.get("secretRef") or {}).get("name")
            if name and name not in out:
                secret = core.read_namespaced_secret(name, namespace)
                out[name] = {
                    k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()
                }
    return out


def _container_status(name: str, exit_code: int | None, started: str) -> dict[str, Any]:
    """A container status as the kubelet reports it: running, or terminated with a code."""
    state: dict[str, Any]
    if exit_code is None:
        state = {"running": {"startedAt": started}}
    else:
        reason = "Completed" if exit_code == 0 else "Error"
        state = {
            "terminated": {
                "exitCode": exit_code,
                "reason": reason,
                "startedAt": started,
                "finishedAt": now(),
            }
        }
    return {
        "name": name,
        "image": "txntable-spark",
        "imageID": "",
        "ready": exit_code is None,
        "restartCount": 0,
        "started": exit_code is None,
        "state": state,
    }


def _pod_status(api: Any, pod: Mapping[str, Any], container: str, exit_code: int | None) -> None:
    meta = pod["metadata"]
    started = (pod.get("status") or {}).get("startTime") or now()
    phase = "Running" if exit_code is None else ("Succeeded" if exit_code == 0 else "Failed")
    status = {
        "phase": phase,
        "podIP": "127.0.0.1",
        "hostIP": "127.0.0.1",
        "startTime": started,
        "containerStatuses": [_container_status(container, exit_code, started)],
    }
    client.CoreV1Api(api).patch_namespaced_pod_status(
        meta["name"], meta["namespace"], {"status": status}
    )


@dataclass
class JobController:
    """The Job controller (with scheduler and kubelet) for the Jobs a test hands it."""

    api: Any
    kubelet: Kubelet
    workdir: Path
    pods: dict[str, LocalPod] = field(default_factory=dict)

    def _patch(self, job: Mapping[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        meta = job["metadata"]
        out = client.BatchV1Api(self.api).patch_namespaced_job_status(
            meta["name"], meta["namespace"], {"status": status}
        )
        return dict(self.api.sanitize_for_serialization(out))

    def create_pod(self, job: Mapping[str, Any], node: str | None = NODE) -> dict[str, Any]:
        """The Job's pod, created as the Job controller does and bound to ``node`` (the
        scheduler's part; None: left unscheduled); the Job's status says it is active."""
        core = client.CoreV1Api(self.api)
        created = core.create_namespaced_pod(job["metadata"]["namespace"], job_pod(job, node))
        self._patch(job, {"startTime": now(), "active": 1, "ready": 0, "terminating": 0})
        return dict(self.api.sanitize_for_serialization(created))

    def start(self, job: Mapping[str, Any], test_env: Mapping[str, str] | None = None) -> LocalPod:
        """Pod created, its container started here, pod and Job status saying it runs.
        ``test_env``: variables a test adds to the container's (``txntable.engine.testhooks``)."""
        pod = self.create_pod(job)
        container = job["spec"]["template"]["spec"]["containers"][0]
        secrets = _secrets(self.api, job["metadata"]["namespace"], [container])
        local = job_process(job, pod, self.workdir, secrets)
        local.env |= dict(test_env or {})
        local.start()
        self.pods[job["metadata"]["name"]] = local
        self.kubelet.serve(pod["metadata"]["namespace"], local.name, container["name"], local.log)
        _pod_status(self.api, pod, container["name"], None)
        self._patch(job, {"active": 1, "ready": 1})
        return local

    def finish(self, job: Mapping[str, Any], exit_code: int) -> dict[str, Any]:
        """The pod ended with ``exit_code``: pod status, then the Job's terminal conditions
        in the Job controller's order (backoffLimit 0: one failed pod fails the Job)."""
        name, ns = job["metadata"]["name"], job["metadata"]["namespace"]
        pods = client.CoreV1Api(self.api).list_namespaced_pod(
            ns, label_selector=f"{JOB_NAME_LABEL}={name}"
        )
        container = job["spec"]["template"]["spec"]["containers"][0]["name"]
        for pod in pods.items:
            _pod_status(self.api, self.api.sanitize_for_serialization(pod), container, exit_code)
        t = now()
        if exit_code == 0:
            first = {"type": "SuccessCriteriaMet", "reason": "CompletionsReached",
                     "message": "Reached expected number of succeeded pods"}  # fmt: skip
            last = {"type": "Complete", "reason": "CompletionsReached",
                    "message": "Reached expected number of succeeded pods"}  # fmt: skip
            counts = {"active": 0, "ready": 0, "succeeded": 1}
        else:
            first = {"type": "FailureTarget", "reason": "BackoffLimitExceeded",
                     "message": "Job has reached the specified backoff limit"}  # fmt: skip
            last = {**first, "type": "Failed"}
            counts = {"active": 0, "ready": 0, "failed": 1}
        stamp = {"status": "True", "lastProbeTime": t, "lastTransitionTime": t}
        self._patch(job, {**counts, "conditions": [{**first, **stamp}]})
        done = {**counts, "conditions": [{**first, **stamp}, {**last, **stamp}]}
        if exit_code == 0:
            done["completionTime"] = t
        return self._patch(job, done)

    def run(self, job: Mapping[str, Any], timeout: float = 600.0) -> LocalPod:
        """The whole Job: pod, container to its end, terminal status."""
        local = self.start(job)
        self.finish(job, local.wait(timeout))
        return local


@dataclass
class SparkOperator:
    """The Spark Operator (with Spark's submission client and the kubelet) for a test."""

    api: Any
    kubelet: Kubelet
    workdir: Path
    drivers: dict[str, LocalPod] = field(default_factory=dict)

    def _status(self, app: Mapping[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        meta = app["metadata"]
        custom = client.CustomObjectsApi(self.api)
        out: dict[str, Any] = custom.patch_namespaced_custom_object_status(
            *SPARK[:2], meta["namespace"], SPARK[2], meta["name"], {"status": status}
        )
        return out

    def submit(self, app: Mapping[str, Any]) -> dict[str, Any]:
        """SUBMITTED, with the driver pod created (bound to the node)."""
        meta = app["metadata"]
        submission = str(uuid.uuid4())
        pod = driver_pod(app, submission, NODE)
        driver = pod["metadata"]["name"]
        client.CoreV1Api(self.api).create_namespaced_pod(meta["namespace"], pod)
        return self._status(
            app,
            {
                "submissionID": submission,
                "lastSubmissionAttemptTime": now(),
                "submissionAttempts": 1,
                "applicationState": {"state": "SUBMITTED"},
                "driverInfo": {"podName": driver},
            },
        )

    def start(self, app: Mapping[str, Any]) -> LocalPod:
        """Submitted, the driver running here, RUNNING."""
        app = self.submit(app)
        meta = app["metadata"]
        secrets = _secrets(self.api, meta["namespace"], [app["spec"]["driver"]])
        local = driver_process(app, self.workdir, secrets).start()
        self.drivers[meta["name"]] = local
        pod = client.CoreV1Api(self.api).read_namespaced_pod(local.name, meta["namespace"])
        self.kubelet.serve(meta["namespace"], local.name, DRIVER_CONTAINER, local.log)
        _pod_status(self.api, self.api.sanitize_for_serialization(pod), DRIVER_CONTAINER, None)
        self._status(
            app,
            {
                "applicationState": {"state": "RUNNING"},
                "sparkApplicationId": f"spark-{uuid.uuid4().hex}",
                "executionAttempts": 1,
            },
        )
        return local

    def finish(self, app: Mapping[str, Any], exit_code: int) -> dict[str, Any]:
        """The driver ended: the pod's status, then the application's terminal state."""
        meta = app["metadata"]
        driver = f"{meta['name']}-driver"
        pod = client.CoreV1Api(self.api).read_namespaced_pod(driver, meta["namespace"])
        _pod_status(self.api, self.api.sanitize_for_serialization(pod), DRIVER_CONTAINER, exit_code)
        if exit_code == 0:
            self._status(app, {"applicationState": {"state": "SUCCEEDING"}})
            return self._status(
                app, {"applicationState": {"state": "COMPLETED"}, "terminationTime": now()}
            )
        error = f"driver container failed with ExitCode: {exit_code}, Reason: Error"
        state = {"state": "FAILING", "errorMessage": error}
        self._status(app, {"applicationState": state, "terminationTime": now()})
        return self._status(app, {"applicationState": {**state, "state": "FAILED"}})

    def run(self, app: Mapping[str, Any], timeout: float = 600.0) -> LocalPod:
        local = self.start(app)
        self.finish(app, local.wait(timeout))
        return local
