"""Pure builders of the Kubernetes objects that run a maintenance job.

``spark_application`` builds a ``sparkoperator.k8s.io/v1beta2`` SparkApplication (Kubeflow
Spark Operator, cluster mode); ``spark_submit_job`` builds a ``batch/v1`` Job whose pod runs
``spark-submit`` in client mode against the in-cluster API server, with executors as pods
shaped by ``executor_pod_template``. Both are plain dicts (no I/O, no client objects), so the
tests validate them against the real schemas and the launchers only create them.

Every object and pod carries the run's labels, the owner reference to its TxnTable (deleting
the table deletes its runs), a restricted security context (non-root, no privilege
escalation, all capabilities dropped, read-only root filesystem with an emptyDir ``/tmp``,
seccomp RuntimeDefault), and credentials only by reference: ``envFrom.secretRef``.
"""

from __future__ import annotations

import json
from importlib import metadata
from typing import Any, Final

from txntable.api.constants import API_VERSION, KIND_TABLE
from txntable.config import Config
from txntable.launch.run import RunRequest

SPARK_API_VERSION: Final = "sparkoperator.k8s.io/v1beta2"
#: Where the Spark image keeps the job programs (``txntable/jobs/<kind>.py``).
JOBS_DIR: Final = "/opt/txntable/jobs"
SPARK_SUBMIT: Final = "/opt/spark/bin/spark-submit"
#: The ``spark`` user of the Apache Spark images.
SPARK_UID: Final = 185
K8S_MASTER: Final = "k8s://https://kubernetes.default.svc"
SA_DIR: Final = "/var/run/secrets/kubernetes.io/serviceaccount"
DRIVER_CONTAINER: Final = "spark-driver"
EXECUTOR_CONTAINER: Final = "spark-executor"
#: Container name the Spark Operator gives the driver (for reading its log).
OPERATOR_DRIVER_CONTAINER: Final = "spark-kubernetes-driver"
TEMPLATE_ENV: Final = "TXNTABLE_EXECUTOR_POD_TEMPLATE"
TEMPLATE_FILE: Final = "/tmp/executor-pod-template.json"
DRIVER_PORT: Final = 7078
BLOCK_MANAGER_PORT: Final = 7079
RETRY_INTERVAL_SECONDS: Final = 60
TMP_VOLUME: Final = (
    "spark-local-dir-1"  # the Spark Operator turns spark-local-dir-* into local dirs
)

# The Job's shell writes the executor pod template from the environment, then execs spark-submit.
SUBMIT_SCRIPT: Final = f'printf "%s" "${TEMPLATE_ENV}" > {TEMPLATE_FILE} && exec "$@"'


def spark_version() -> str:
    """The Spark version the image ships: the operator is built from the same pins."""
    try:
        return metadata.version("pyspark")
    except metadata.PackageNotFoundError:  # pragma: no cover - pyspark is a dependency
        return "4.0.0"


def owner_reference(req: RunRequest) -> dict[str, Any]:
    """The TxnTable owns its runs: the garbage collector deletes them with the table."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND_TABLE,
        "name": req.table,
        "uid": req.table_uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def object_meta(req: RunRequest) -> dict[str, Any]:
    """Name, namespace, labels, annotations and owner of the run object."""
    return {
        "name": req.name,
        "namespace": req.namespace,
        "labels": req.labels,
        "annotations": req.annotations,
        "ownerReferences": [owner_reference(req)],
    }


def pod_security_context() -> dict[str, Any]:
    """Pod-level part of the restricted Pod Security Standard."""
    return {
        "runAsNonRoot": True,
        "runAsUser": SPARK_UID,
        "runAsGroup": SPARK_UID,
        "fsGroup": SPARK_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> dict[str, Any]:
    """Container-level part of the restricted Pod Security Standard."""
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _env(values: dict[str, str]) -> list[dict[str, Any]]:
    return [{"name": k, "value": v} for k, v in sorted(values.items())]


def _job_env(req: RunRequest, config: Config) -> dict[str, str]:
    """The job's environment: the run's own, plus the Pushgateway its metrics go to."""
    env = dict(req.job_env)
    if config.pushgateway_url:
        env["TXNTABLE_PUSHGATEWAY_URL"] = config.pushgateway_url
    return env


def _env_from(req: RunRequest) -> list[dict[str, Any]]:
    return [{"secretRef": {"name": req.secret_ref}}] if req.secret_ref else []


def _tmp_mount() -> list[dict[str, Any]]:
    return [{"name": TMP_VOLUME, "mountPath": "/tmp"}]


def _tmp_volume() -> list[dict[str, Any]]:
    return [{"name": TMP_VOLUME, "emptyDir": {}}]


def _image(req: RunRequest, config: Config) -> str:
    return req.image or config.spark_image


def _service_account(req: RunRequest, config: Config) -> str:
    return req.service_account or config.spark_service_account


def main_file(req: RunRequest) -> str:
    """Path of the job program inside the image."""
    return f"{JOBS_DIR}/{req.kind.value}.py"


def spark_application(req: RunRequest, config: Config) -> dict[str, Any]:
    """The SparkApplication (Spark Operator, ``type: Python``, cluster mode) for ``req``."""
    sa = _service_account(req, config)

    def pod(resources_cores: int, memory: str, core_limit: str | None) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "cores": resources_cores,
            "memory": memory,
            "labels": req.labels,
            "env": _env(_job_env(req, config)),
            "podSecurityContext": pod_security_context(),
            "securityContext": container_security_context(),
            "volumeMounts": _tmp_mount(),
            "serviceAccount": sa,
        }
        if req.secret_ref:
            spec["envFrom"] = _env_from(req)
        if core_limit:
            spec["coreLimit"] = core_limit
        return spec

    driver = pod(req.driver.cores, req.driver.spark_memory, req.driver.core_limit)
    executor = pod(req.executor.cores, req.executor.spark_memory, req.executor.core_limit)
    executor["instances"] = req.executor_instances
    restart: dict[str, Any] = {"type": "Never"}
    if req.backend_retries:
        restart = {
            "type": "OnFailure",
            "onFailureRetries": req.backend_retries,
            "onFailureRetryInterval": RETRY_INTERVAL_SECONDS,
            "onSubmissionFailureRetries": req.backend_retries,
            "onSubmissionFailureRetryInterval": RETRY_INTERVAL_SECONDS,
        }
    conf = dict(sorted(req.spark_conf.items()))
    conf["spark.kubernetes.executor.podNamePrefix"] = req.name
    return {
        "apiVersion": SPARK_API_VERSION,
        "kind": "SparkApplication",
        "metadata": object_meta(req),
        "spec": {
            "type": "Python",
            "pythonVersion": "3",
            "mode": "cluster",
            "image": _image(req, config),
            "imagePullPolicy": req.image_pull_policy,
            "mainApplicationFile": f"local://{main_file(req)}",
            "arguments": list(req.args),
            "sparkVersion": spark_version(),
            "sparkConf": conf,
            "restartPolicy": restart,
            "timeToLiveSeconds": req.ttl_seconds,
            "volumes": _tmp_volume(),
            "driver": driver,
            "executor": executor,
        },
    }


def executor_pod_template(req: RunRequest) -> dict[str, Any]:
    """Pod template for executors of a ``spark-submit`` Job (labels, security, credentials)."""
    container: dict[str, Any] = {
        "name": EXECUTOR_CONTAINER,
        "securityContext": container_security_context(),
        "volumeMounts": _tmp_mount(),
    }
    if req.secret_ref:
        container["envFrom"] = _env_from(req)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"labels": req.labels, "annotations": req.annotations},
        "spec": {
            "automountServiceAccountToken": False,
            "securityContext": pod_security_context(),
            "containers": [container],
            "volumes": _tmp_volume(),
        },
    }


def _escape(value: str) -> str:
    """Keep the kubelet from expanding ``$(VAR)`` inside user-supplied values."""
    return value.replace("$(", "$$(")


def submit_arguments(req: RunRequest, config: Config) -> list[str]:
    """``spark-submit`` arguments (client mode: the driver is the Job's pod)."""
    conf = {
        "spark.driver.host": "$(POD_IP)",
        # the pod's address, not 0.0.0.0: with spark.kubernetes.executor.useDriverPodIP (on by
        # default in the image's Spark 4.3, its driver log says so) the driver gives executors
        # its bind address, and executors told 0.0.0.0 connect to themselves (seen on the real
        # node: "Connection refused: /0.0.0.0:7078", every executor lost)
        "spark.driver.bindAddress": "$(POD_IP)",
        "spark.driver.port": str(DRIVER_PORT),
        "spark.blockManager.port": str(BLOCK_MANAGER_PORT),
        "spark.local.dir": "/tmp",
        "spark.kubernetes.namespace": req.namespace,
        "spark.kubernetes.container.image": _image(req, config),
        "spark.kubernetes.container.image.pullPolicy": req.image_pull_policy,
        "spark.kubernetes.driver.pod.name": "$(POD_NAME)",
        "spark.kubernetes.executor.podNamePrefix": req.name,
        "spark.kubernetes.executor.podTemplateFile": TEMPLATE_FILE,
        "spark.kubernetes.executor.podTemplateContainerName": EXECUTOR_CONTAINER,
        "spark.kubernetes.authenticate.caCertFile": f"{SA_DIR}/ca.crt",
        "spark.kubernetes.authenticate.oauthTokenFile": f"{SA_DIR}/token",
        "spark.executor.instances": str(req.executor_instances),
        "spark.executor.cores": str(req.executor.cores),
        "spark.executor.memory": req.executor.spark_memory,
    }
    if req.executor.core_limit:
        conf["spark.kubernetes.executor.limit.cores"] = req.executor.core_limit
    for key, value in req.job_env.items():
        conf[f"spark.executorEnv.{key}"] = _escape(value)
    for key, value in sorted(req.spark_conf.items()):
        conf[key] = _escape(value)
    args = [SPARK_SUBMIT, "--master", K8S_MASTER, "--deploy-mode", "client"]
    args += ["--name", req.name, "--driver-memory", req.driver.spark_memory]
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    args.append(main_file(req))
    args += [_escape(a) for a in req.args]
    return args


def spark_submit_job(req: RunRequest, config: Config) -> dict[str, Any]:
    """The batch/v1 Job whose pod runs ``spark-submit`` for ``req``."""
    memory = f"{req.driver.pod_memory_mib}Mi"
    resources: dict[str, Any] = {
        "requests": {"cpu": str(req.driver.cores), "memory": memory},
        "limits": {"memory": memory},
    }
    if req.driver.core_limit:
        resources["limits"]["cpu"] = req.driver.core_limit
    env = _env(_job_env(req, config))
    env.append({"name": TEMPLATE_ENV, "value": json.dumps(executor_pod_template(req))})
    env.append({"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    env.append({"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
    container: dict[str, Any] = {
        "name": DRIVER_CONTAINER,
        "image": _image(req, config),
        "imagePullPolicy": req.image_pull_policy,
        "command": ["/bin/sh", "-c", SUBMIT_SCRIPT, "txntable-run"],
        "args": submit_arguments(req, config),
        "env": env,
        "resources": resources,
        "securityContext": container_security_context(),
        "volumeMounts": _tmp_mount(),
        "ports": [
            {"name": "driver", "containerPort": DRIVER_PORT},
            {"name": "blockmanager", "containerPort": BLOCK_MANAGER_PORT},
        ],
    }
    if req.secret_ref:
        container["envFrom"] = _env_from(req)
    job_spec: dict[str, Any] = {
        "backoffLimit": req.backend_retries,
        # a driver evicted, preempted or drained away fails the Job at once and says so (the
        # Job's Failed condition names DisruptionTarget): otherwise it is one more of the
        # backoffLimit's failures and the Job says only "reached the specified backoff limit"
        "podFailurePolicy": {
            "rules": [
                {
                    "action": "FailJob",
                    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                }
            ]
        },
        "ttlSecondsAfterFinished": req.ttl_seconds,
        "template": {
            "metadata": {"labels": req.labels, "annotations": req.annotations},
            "spec": {
                "restartPolicy": "Never",
                "serviceAccountName": _service_account(req, config),
                "securityContext": pod_security_context(),
                "containers": [container],
                "volumes": _tmp_volume(),
            },
        },
    }
    if req.deadline_seconds is not None:
        job_spec["activeDeadlineSeconds"] = req.deadline_seconds
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": object_meta(req),
        "spec": job_spec,
    }
