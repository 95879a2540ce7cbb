"""Fake Kubernetes API clients that record every call, and the launchers built on them."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from txntable.config import Config
from txntable.launch import manifests
from txntable.launch.kubernetes import JobLauncher, SparkApplicationLauncher
from txntable.launch.run import Backend, RunState

RESULT = {"runId": "x", "filesRemoved": 12, "filesAdded": 2}


def api_error(status: int, message: str = "", retry_after: str | None = None) -> ApiException:
    exc = ApiException(status=status, reason="Reason")  # kubernetes 36 takes no body here
    exc.body = json.dumps({"message": message})
    exc.headers = {"Retry-After": retry_after} if retry_after else {}
    return exc


class Fake:
    """Records (group, resource, verb) of every call; ``fail[verb]`` raises once."""

    def __init__(self, group: str, resource: str) -> None:
        self.group, self.resource = group, resource
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, str, str]] = []
        self.fail: dict[str, BaseException] = {}

    def _record(self, verb: str, resource: str | None = None) -> None:
        self.calls.append((self.group, resource or self.resource, verb))
        if verb in self.fail:
            raise self.fail.pop(verb)

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self._record("create")
        key = (namespace, body["metadata"]["name"])
        if key in self.objects:
            raise api_error(409, "already exists")
        obj = copy.deepcopy(body)
        obj["metadata"]["creationTimestamp"] = "2026-11-22T02:00:01Z"
        self.objects[key] = obj
        return copy.deepcopy(obj)

    def read(self, namespace: str, name: str) -> dict[str, Any]:
        self._record("get")
        if (namespace, name) not in self.objects:
            raise api_error(404, "not found")
        return copy.deepcopy(self.objects[(namespace, name)])

    def list(self, namespace: str, selector: str) -> dict[str, Any]:
        self._record("list")
        wanted = dict(pair.split("=", 1) for pair in selector.split(","))
        items = [
            copy.deepcopy(o)
            for (ns, _), o in self.objects.items()
            if ns == namespace
            and all(o["metadata"]["labels"].get(k) == v for k, v in wanted.items())
        ]
        return {"items": items}

    def remove(self, namespace: str, name: str) -> None:
        self._record("delete")
        if self.objects.pop((namespace, name), None) is None:
            raise api_error(404, "not found")


class FakeCustomObjects(Fake):
    def __init__(self) -> None:
        super().__init__("sparkoperator.k8s.io", "sparkapplications")

    def _check(self, kw: dict[str, Any]) -> None:
        assert (kw["group"], kw["version"], kw["plural"]) == (
            "sparkoperator.k8s.io",
            "v1beta2",
            "sparkapplications",
        )
        assert kw["_request_timeout"] > 0

    def create_namespaced_custom_object(self, body: dict[str, Any], **kw: Any) -> Any:
        self._check(kw)
        return self.create(kw["namespace"], body)

    def get_namespaced_custom_object(self, name: str, **kw: Any) -> Any:
        self._check(kw)
        return self.read(kw["namespace"], name)

    def list_namespaced_custom_object(self, label_selector: str, **kw: Any) -> Any:
        self._check(kw)
        return self.list(kw["namespace"], label_selector)

    def delete_namespaced_custom_object(self, name: str, propagation_policy: str, **kw: Any) -> Any:
        self._check(kw)
        assert propagation_policy == "Background"
        return self.remove(kw["namespace"], name)


def _model(kind: str, data: dict[str, Any]) -> Any:
    """The client model ``kind`` of the API server's JSON ``data``, as the client builds it."""
    model = getattr(client, kind)
    if hasattr(model, "from_dict"):  # kubernetes >= 37
        return model.from_dict(data)
    return client.ApiClient()._ApiClient__deserialize(data, kind)  # kubernetes < 37


class FakeBatch(Fake):
    """Returns client models, as the real BatchV1Api does."""

    api_client = client.ApiClient()

    def __init__(self) -> None:
        super().__init__("batch", "jobs")

    def create_namespaced_job(self, namespace: str, body: dict[str, Any], **kw: Any) -> Any:
        return _model("V1Job", self.create(namespace, body))

    def read_namespaced_job(self, name: str, namespace: str, **kw: Any) -> Any:
        return _model("V1Job", self.read(namespace, name))

    def list_namespaced_job(self, namespace: str, label_selector: str, **kw: Any) -> Any:
        return _model("V1JobList", self.list(namespace, label_selector))

    def delete_namespaced_job(
        self, name: str, namespace: str, propagation_policy: str, **kw: Any
    ) -> Any:
        assert propagation_policy == "Background"
        return self.remove(namespace, name)


class FakeCore(Fake):
    api_client = client.ApiClient()

    def __init__(self) -> None:
        super().__init__("", "pods")
        self.logs: dict[tuple[str, str, str], str] = {}
        self.pods: list[dict[str, Any]] = []

    def read_namespaced_pod_log(self, name: str, namespace: str, container: str, **kw: Any) -> str:
        self._record("get", "pods/log")
        if (namespace, name, container) not in self.logs:
            raise api_error(404, "pod not found")
        return self.logs[(namespace, name, container)]

    def list_namespaced_pod(self, namespace: str, label_selector: str, **kw: Any) -> Any:
        self._record("list")
        key, value = label_selector.split("=", 1)
        items = [p for p in self.pods if p["metadata"]["labels"].get(key) == value]
        return _model("V1PodList", {"items": items})


Builder = Callable[[], tuple[Any, Any, FakeCore, Backend]]


def spark() -> tuple[Any, Any, FakeCore, Backend]:
    api, core = FakeCustomObjects(), FakeCore()
    return SparkApplicationLauncher(api, Config(), core), api, core, Backend.SPARK_APPLICATION


def job() -> tuple[Any, Any, FakeCore, Backend]:
    api, core = FakeBatch(), FakeCore()
    return JobLauncher(api, Config(), core), api, core, Backend.JOB


BACKENDS = {"sparkapplication": spark, "job": job}


def finish(api: Fake, core: FakeCore, backend: Backend, req: Any, state: RunState) -> None:
    """Make the fake cluster report the run finished, with a driver log holding the result."""
    obj = api.objects[(req.namespace, req.name)]
    log = "INFO starting\n" + json.dumps(RESULT) + "\nINFO SparkContext stopped\n"
    if backend is Backend.SPARK_APPLICATION:
        app_state = "COMPLETED" if state is RunState.SUCCEEDED else "FAILED"
        obj["status"] = {
            "applicationState": {"state": app_state},
            "driverInfo": {"podName": f"{req.name}-driver"},
            "lastSubmissionAttemptTime": "2026-11-22T02:00:05Z",
            "terminationTime": "2026-11-22T02:10:00Z",
        }
        core.logs[(req.namespace, f"{req.name}-driver", manifests.OPERATOR_DRIVER_CONTAINER)] = log
    else:
        kind = "Complete" if state is RunState.SUCCEEDED else "Failed"
        obj["status"] = {
            "startTime": "2026-11-22T02:00:05Z",
            "completionTime": "2026-11-22T02:10:00Z",
            "conditions": [
                {"type": kind, "status": "True", "lastTransitionTime": "2026-11-22T02:10:00Z"}
            ],
        }
        for i, stamp in enumerate(("2026-11-22T02:00:02Z", "2026-11-22T02:00:04Z")):
            core.pods.append(
                {
                    "metadata": {
                        "name": f"{req.name}-pod{i}",
                        "creationTimestamp": stamp,
                        "labels": {"batch.kubernetes.io/job-name": req.name},
                    }
                }
            )
        core.logs[(req.namespace, f"{req.name}-pod1", manifests.DRIVER_CONTAINER)] = log
