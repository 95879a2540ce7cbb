"""Launchers that run maintenance on a cluster: SparkApplication and batch/v1 Job.

Both take the official client's API objects as arguments (``CustomObjectsApi`` or
``BatchV1Api``, plus an optional ``CoreV1Api`` for reading the driver's log), so tests pass
small fakes and the controller passes clients built once at start-up. They only create what
``manifests`` builds; errors are translated once, in ``kube_calls.translate``:

    409 on create          adopt the existing run (after checking it is ours)
    404 on get             RunNotFoundError (on create: the kind is not served, permanent)
    429, 5xx, 0, timeouts  TransientLaunchError (Retry-After honoured)
    other 4xx, bad params  PermanentLaunchError with a CamelCase reason
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, Final

from txntable.api.common import Backend
from txntable.api.constants import LABEL_MANAGED_BY, LABEL_RUN, LABEL_TABLE, MANAGED_BY
from txntable.config import Config
from txntable.launch import manifests
from txntable.launch.base import Launcher, check_adoptable
from txntable.launch.errors import LaunchError, PermanentLaunchError, RunNotFoundError
from txntable.launch.kube_calls import call, dig, parse_time, serialize, status_code
from txntable.launch.names import label_value
from txntable.launch.run import (
    RunRequest,
    RunState,
    RunStatus,
    last_json_line,
    out_of_memory,
    spark_error,
)

log = logging.getLogger(__name__)

SPARK_GROUP: Final = "sparkoperator.k8s.io"
SPARK_VERSION: Final = "v1beta2"
SPARK_PLURAL: Final = "sparkapplications"
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
# Spark Operator application states (api/v1beta2 ApplicationStateType) → run state.
SPARK_STATES: Final = {
    "": RunState.PENDING,
    "SUBMITTED": RunState.PENDING,
    "PENDING_RERUN": RunState.PENDING,
    "INVALIDATING": RunState.PENDING,
    "RUNNING": RunState.RUNNING,
    "SUCCEEDING": RunState.RUNNING,
    "FAILING": RunState.RUNNING,
    "COMPLETED": RunState.SUCCEEDED,
    "FAILED": RunState.FAILED,
    "SUBMISSION_FAILED": RunState.FAILED,
}


class _ClusterLauncher(Launcher):
    """What both cluster launchers share: create-or-adopt, errors, listing, log results."""

    kind_name: str

    def __init__(
        self,
        config: Config,
        core_api: Any | None = None,
        *,
        request_timeout: float = 30.0,
        log_tail_lines: int = 500,
    ) -> None:
        self.config = config
        self.core_api = core_api
        self.request_timeout = request_timeout
        self.log_tail_lines = log_tail_lines

    # Backend-specific parts.
    def build(self, req: RunRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _create(self, namespace: str, body: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _read(self, namespace: str, name: str) -> Any:
        raise NotImplementedError

    def _list(self, namespace: str, selector: str) -> Any:
        raise NotImplementedError

    def _remove(self, namespace: str, name: str) -> Any:
        raise NotImplementedError

    def _plain(self, obj: Any) -> dict[str, Any]:
        raise NotImplementedError

    def state_of(
        self, obj: Mapping[str, Any]
    ) -> tuple[RunState, str, datetime | None, datetime | None]:
        raise NotImplementedError

    def _driver_log(self, obj: Mapping[str, Any]) -> str | None:
        raise NotImplementedError

    # The Launcher interface.
    def launch(self, req: RunRequest) -> RunStatus:
        body = self.build(req)
        what = f"create {self.kind_name} {req.namespace}/{req.name}"
        try:
            created = call(what, lambda: self._create(req.namespace, body))
        except LaunchError as exc:
            code = status_code(exc)
            if code == 409:
                existing = self.status(req.namespace, req.name)
                check_adoptable(existing, req)
                log.info("adopted existing run", extra={"run": req.name, "table": req.table})
                return _with(existing, adopted=True)
            if code == 404:
                raise PermanentLaunchError(
                    f"{what}: the API server does not serve {self.kind_name} here "
                    "(is its CRD installed?)",
                    reason="KindNotServed",
                ) from exc
            raise
        log.info("launched run", extra={"run": req.name, "table": req.table})
        answer = self._plain(created)
        if not dig(answer, "metadata", "name"):
            # an answer that does not carry the object (kmock answers a create with no body):
            # the run is what was sent; its name and labels keep it counted in flight
            answer = body
        return self.to_status(answer)

    def status(self, namespace: str, name: str) -> RunStatus:
        what = f"get {self.kind_name} {namespace}/{name}"
        try:
            obj = self._plain(call(what, lambda: self._read(namespace, name)))
        except LaunchError as exc:
            if status_code(exc) == 404:
                raise RunNotFoundError(namespace, name) from exc
            raise
        st = self.to_status(obj)
        if st.state.finished and self.core_api is not None:
            try:
                text = self._driver_log(obj)
            except LaunchError as exc:  # the result line is optional: the table log decides
                log.debug("no driver log for %s/%s: %s", namespace, name, exc)
                text = None
            if text:
                st = _with(st, result=last_json_line(text))
            logged = spark_error(text) if st.state is RunState.FAILED else None
            if logged and logged not in st.message:
                st = _with(st, message=f"Spark logged {logged}; {st.message}".rstrip("; "))
            if st.state is RunState.FAILED and not st.out_of_memory:
                st = _with(st, out_of_memory=bool(out_of_memory(text) or self._pods_oom(obj)))
        return st

    def _pods_oom(self, obj: Mapping[str, Any]) -> bool:
        """Whether a pod of the run was killed for its memory (only Jobs need to look)."""
        return False

    def waiting(self, namespace: str, name: str) -> str:
        """Why a pod of run ``name`` (driver or executor: every pod carries the run's label)
        cannot start, read from the pods' own status (``pod_waiting``); empty when none."""
        core = self.core_api
        if core is None:
            return ""
        selector = f"{LABEL_RUN}={label_value(name)}"
        listing = serialize(
            core,
            call(
                f"list pods of run {namespace}/{name}",
                lambda: core.list_namespaced_pod(
                    namespace=namespace, label_selector=selector,
                    _request_timeout=self.request_timeout,
                ),
            ),
        )  # fmt: skip
        pods = [p for p in listing.get("items") or [] if isinstance(p, Mapping)]
        pods.sort(key=lambda p: str(dig(p, "metadata", "creationTimestamp") or ""))
        for pod in pods:
            said = pod_waiting(pod)
            if said:
                return said
        return ""

    def delete(self, namespace: str, name: str) -> None:
        what = f"delete {self.kind_name} {namespace}/{name}"
        try:
            call(what, lambda: self._remove(namespace, name))
        except LaunchError as exc:
            if status_code(exc) != 404:
                raise

    def list_runs(self, namespace: str, table: str) -> list[RunStatus]:
        selector = f"{LABEL_TABLE}={label_value(table)},{LABEL_MANAGED_BY}={MANAGED_BY}"
        return self._listed(namespace, selector)

    def list_managed(self, namespace: str) -> list[RunStatus]:
        """Every run txntable manages in ``namespace`` (all tables), oldest first: one request
        that a shared cache (``launch.run_cache``) serves every table's lookup from."""
        return self._listed(namespace, f"{LABEL_MANAGED_BY}={MANAGED_BY}")

    def _listed(self, namespace: str, selector: str) -> list[RunStatus]:
        what = f"list {self.kind_name} in {namespace}"
        listing = self._plain(call(what, lambda: self._list(namespace, selector)))
        runs = [self.to_status(item) for item in listing.get("items") or []]
        return sorted(runs, key=lambda r: (r.created.timestamp() if r.created else 0.0, r.name))

    def to_status(self, obj: Mapping[str, Any]) -> RunStatus:
        meta = obj.get("metadata") or {}
        state, message, started, finished = self.state_of(obj)
        return RunStatus(
            name=str(meta.get("name", "")),
            namespace=str(meta.get("namespace", "")),
            state=state,
            message=message,
            created=parse_time(meta.get("creationTimestamp")),
            started=started,
            finished=finished if state.finished else None,
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            out_of_memory=state is RunState.FAILED and bool(out_of_memory(message)),
        )

    def _read_log(self, namespace: str, pod: str, container: str) -> str | None:
        core = self.core_api
        if core is None:
            return None
        text = call(
            f"read log of pod {namespace}/{pod}",
            lambda: core.read_namespaced_pod_log(
                name=pod,
                namespace=namespace,
                container=container,
                tail_lines=self.log_tail_lines,
                _request_timeout=self.request_timeout,
            ),
        )
        return text if isinstance(text, str) else None


def _with(st: RunStatus, **changes: Any) -> RunStatus:
    return replace(st, **changes)


#: Reasons a container stays waiting that no wait will end by itself (a pull that failed keeps
#: failing until the image exists; a configuration the kubelet refused stays refused)
STUCK_REASONS: Final = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
     "CreateContainerConfigError", "CreateContainerError", "RunContainerError"}
)  # fmt: skip


def pod_waiting(pod: Mapping[str, Any]) -> str:
    """Why ``pod`` cannot start, from its status: a container waiting for one of
    ``STUCK_REASONS``, or the scheduler's ``Unschedulable``; empty when neither."""
    name = str(dig(pod, "metadata", "name") or "")
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in dig(pod, "status", key) or []:
            waiting = dig(cs, "state", "waiting") or {} if isinstance(cs, Mapping) else {}
            reason = str(waiting.get("reason") or "")
            if reason in STUCK_REASONS:
                message = str(waiting.get("message") or "").strip()
                return f"pod {name}: {reason}" + (f": {message}" if message else "")
    for cond in dig(pod, "status", "conditions") or []:
        if (
            isinstance(cond, Mapping)
            and cond.get("type") == "PodScheduled"
            and cond.get("status") == "False"
            and cond.get("reason") == "Unschedulable"
        ):
            message = str(cond.get("message") or "").strip()
            return f"pod {name} cannot be scheduled" + (f": {message}" if message else "")
    return ""


class SparkApplicationLauncher(_ClusterLauncher):
    """Runs as ``sparkoperator.k8s.io/v1beta2`` SparkApplications (Kubeflow Spark Operator)."""

    backend = Backend.SPARK_APPLICATION
    kind_name = "SparkApplication"

    def __init__(
        self, custom_api: Any, config: Config, core_api: Any | None = None, **kw: Any
    ) -> None:
        super().__init__(config, core_api, **kw)
        self.api = custom_api

    def build(self, req: RunRequest) -> dict[str, Any]:
        return manifests.spark_application(req, self.config)

    def _args(self, namespace: str) -> dict[str, Any]:
        return {
            "group": SPARK_GROUP,
            "version": SPARK_VERSION,
            "namespace": namespace,
            "plural": SPARK_PLURAL,
            "_request_timeout": self.request_timeout,
        }

    def _create(self, namespace: str, body: dict[str, Any]) -> Any:
        return self.api.create_namespaced_custom_object(body=body, **self._args(namespace))

    def _read(self, namespace: str, name: str) -> Any:
        return self.api.get_namespaced_custom_object(name=name, **self._args(namespace))

    def _list(self, namespace: str, selector: str) -> Any:
        return self.api.list_namespaced_custom_object(
            label_selector=selector, **self._args(namespace)
        )

    def _remove(self, namespace: str, name: str) -> Any:
        return self.api.delete_namespaced_custom_object(
            name=name, propagation_policy="Background", **self._args(namespace)
        )

    def _plain(self, obj: Any) -> dict[str, Any]:
        return obj if isinstance(obj, dict) else {}

    def state_of(
        self, obj: Mapping[str, Any]
    ) -> tuple[RunState, str, datetime | None, datetime | None]:
        app_state = dig(obj, "status", "applicationState") or {}
        raw = str(app_state.get("state") or "")
        state = SPARK_STATES.get(raw, RunState.UNKNOWN)
        message = str(app_state.get("errorMessage") or "")
        if not message and raw:
            message = f"SparkApplication is {raw}"
        started = parse_time(dig(obj, "status", "lastSubmissionAttemptTime"))
        finished = parse_time(dig(obj, "status", "terminationTime"))
        return state, message, started, finished

    def _driver_log(self, obj: Mapping[str, Any]) -> str | None:
        meta = obj.get("metadata") or {}
        pod = dig(obj, "status", "driverInfo", "podName") or f"{meta.get('name')}-driver"
        return self._read_log(
            str(meta.get("namespace")), str(pod), manifests.OPERATOR_DRIVER_CONTAINER
        )


class JobLauncher(_ClusterLauncher):
    """Runs as batch/v1 Jobs whose pod runs ``spark-submit`` in client mode."""

    backend = Backend.JOB
    kind_name = "Job"

    def __init__(
        self, batch_api: Any, config: Config, core_api: Any | None = None, **kw: Any
    ) -> None:
        super().__init__(config, core_api, **kw)
        self.api = batch_api

    def build(self, req: RunRequest) -> dict[str, Any]:
        return manifests.spark_submit_job(req, self.config)

    def _create(self, namespace: str, body: dict[str, Any]) -> Any:
        return self.api.create_namespaced_job(
            namespace=namespace, body=body, _request_timeout=self.request_timeout
        )

    def _read(self, namespace: str, name: str) -> Any:
        return self.api.read_namespaced_job(
            name=name, namespace=namespace, _request_timeout=self.request_timeout
        )

    def _list(self, namespace: str, selector: str) -> Any:
        return self.api.list_namespaced_job(
            namespace=namespace, label_selector=selector, _request_timeout=self.request_timeout
        )

    def _remove(self, namespace: str, name: str) -> Any:
        return self.api.delete_namespaced_job(
            name=name,
            namespace=namespace,
            propagation_policy="Background",
            _request_timeout=self.request_timeout,
        )

    def _plain(self, obj: Any) -> dict[str, Any]:
        return serialize(self.api, obj)

    def state_of(
        self, obj: Mapping[str, Any]
    ) -> tuple[RunState, str, datetime | None, datetime | None]:
        status = obj.get("status") or {}
        started = parse_time(status.get("startTime"))
        conditions = {
            c.get("type"): c
            for c in status.get("conditions") or []
            if isinstance(c, Mapping) and c.get("status") == "True"
        }
        if "Complete" in conditions:
            done = parse_time(status.get("completionTime")) or parse_time(
                conditions["Complete"].get("lastTransitionTime")
            )
            return RunState.SUCCEEDED, "Job completed", started, done
        if "Failed" in conditions:
            cond = conditions["Failed"]
            message = f"{cond.get('reason') or 'Failed'}: {cond.get('message') or ''}".rstrip(": ")
            if cond.get("reason") == "PodFailurePolicy" and "DisruptionTarget" in message:
                message = f"the driver pod was evicted, preempted or drained away ({message})"
            return RunState.FAILED, message, started, parse_time(cond.get("lastTransitionTime"))
        if "FailureTarget" in conditions:
            return RunState.RUNNING, "Job is failing; pods are terminating", started, None
        if "Suspended" in conditions:
            return RunState.PENDING, "Job is suspended", started, None
        active = int(status.get("active") or 0)
        ready = status.get("ready")
        failed = int(status.get("failed") or 0)
        if active and (ready is None or int(ready) > 0):
            return RunState.RUNNING, "", started, None
        if failed:
            return RunState.PENDING, f"{failed} pod(s) failed; the Job retries", started, None
        return RunState.PENDING, "", started, None

    def _pods_oom(self, obj: Mapping[str, Any]) -> bool:
        """A container of the Job's pods terminated ``OOMKilled`` (or with exit code 137)."""
        try:
            pods = self._pods(obj)
        except LaunchError as exc:
            log.debug("no pods to tell an OOM kill: %s", exc)
            return False
        for pod in pods:
            for cs in dig(pod, "status", "containerStatuses") or []:
                if not isinstance(cs, Mapping):
                    continue
                for key in ("state", "lastState"):
                    ended = dig(cs, key, "terminated") or {}
                    if ended.get("reason") == "OOMKilled" or ended.get("exitCode") == 137:
                        return True
        return False

    def _pods(self, obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        core = self.core_api
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        if core is None:
            return []
        pods = serialize(
            core,
            call(
                f"list pods of Job {namespace}/{name}",
                lambda: core.list_namespaced_pod(
                    namespace=namespace,
                    label_selector=f"{JOB_NAME_LABEL}={name}",
                    _request_timeout=self.request_timeout,
                ),
            ),
        )
        return [p for p in pods.get("items") or [] if isinstance(p, Mapping)]

    def _driver_log(self, obj: Mapping[str, Any]) -> str | None:
        namespace = str(dig(obj, "metadata", "namespace"))
        items = self._pods(obj)
        if not items:
            return None
        newest = max(items, key=lambda p: str(dig(p, "metadata", "creationTimestamp") or ""))
        pod = str(dig(newest, "metadata", "name"))
        return self._read_log(namespace, pod, manifests.DRIVER_CONTAINER)
