"""Cluster launchers against small fakes of the kubernetes client: create, 409 adoption,
transient vs permanent errors, state mapping, result lines from driver logs, and that every
API call made is one that ``permissions.py`` grants."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.support.kube_fakes import BACKENDS, RESULT, FakeCore, api_error, finish, job, spark
from tests.support.launch_requests import request as make_request
from tests.unit.case_ids import readable
from txntable.api.constants import LABEL_KIND
from txntable.config import Config
from txntable.launch import permissions
from txntable.launch.errors import PermanentLaunchError, RunNotFoundError, TransientLaunchError
from txntable.launch.kubernetes import JobLauncher, SparkApplicationLauncher, pod_waiting
from txntable.launch.run import Backend, RunState


def granted(backend: Backend) -> set[tuple[str, str, str]]:
    return {(p.group, p.resource, v) for p in permissions.LAUNCHERS[backend] for v in p.verbs}


@pytest.fixture(params=BACKENDS)
def setup(request: pytest.FixtureRequest) -> tuple[Any, Any, FakeCore, Backend]:
    return BACKENDS[request.param]()


def test_launch_creates_then_adopts_on_409(setup: Any) -> None:
    launcher, api, _core, backend = setup
    req = make_request(backend=backend)
    first = launcher.launch(req)
    assert (first.name, first.state, first.adopted) == (req.name, RunState.PENDING, False)
    assert list(api.objects) == [(req.namespace, req.name)]
    body = api.objects[(req.namespace, req.name)]
    assert body["metadata"]["labels"] == req.labels
    again = launcher.launch(req)  # controller restarted, or a second replica raced
    assert again.adopted and again.name == req.name
    assert len(api.objects) == 1
    assert [c[2] for c in api.calls] == ["create", "create", "get"]


def test_a_create_answered_without_the_object_is_the_run_that_was_sent(setup: Any) -> None:
    """A create whose answer carries no object (kmock answers with no body) is still the run
    asked for: its name and kind label keep it counted in flight. With an empty status the run
    cache counted a nameless run of no kind, and the next tick launched compaction again."""
    launcher, api, _core, backend = setup
    create = api.create

    def answer_nothing(namespace: str, body: dict[str, Any]) -> None:
        create(namespace, body)

    api.create = answer_nothing
    req = make_request(backend=backend)
    run = launcher.launch(req)
    assert (run.name, run.namespace, run.state) == (req.name, req.namespace, RunState.PENDING)
    assert run.labels == req.labels and run.labels[LABEL_KIND] == req.labels[LABEL_KIND]


def test_a_foreign_object_with_the_run_name_is_not_adopted(setup: Any) -> None:
    launcher, api, _core, backend = setup
    req = make_request(backend=backend)
    foreign = copy.deepcopy(launcher.build(req))
    foreign["metadata"]["labels"] = {"app": "someone-else"}
    api.objects[(req.namespace, req.name)] = foreign
    with pytest.raises(PermanentLaunchError) as err:
        launcher.launch(req)
    assert err.value.reason == "NameTaken"


def test_a_run_of_another_table_is_not_adopted(setup: Any) -> None:
    launcher, api, _core, backend = setup
    req = make_request(backend=backend)
    other = copy.deepcopy(launcher.build(req))
    other["metadata"]["labels"]["txntable.io/table"] = "not-sales"
    api.objects[(req.namespace, req.name)] = other
    with pytest.raises(PermanentLaunchError, match="another run"):
        launcher.launch(req)


@pytest.mark.parametrize(
    ("error", "expected", "detail"),
    [
        (api_error(500, "etcd timeout"), TransientLaunchError, 10.0),
        (api_error(503, "", retry_after="7"), TransientLaunchError, 7.0),
        (api_error(429, "slow down", retry_after="3"), TransientLaunchError, 3.0),
        (urllib3.exceptions.MaxRetryError(None, "/x", "refused"), TransientLaunchError, 10.0),
        (urllib3.exceptions.ReadTimeoutError(None, "/x", "timed out"), TransientLaunchError, 10.0),
        (ConnectionRefusedError("refused"), TransientLaunchError, 10.0),
        (api_error(422, "spec.driver.cores: Invalid value"), PermanentLaunchError, "Invalid"),
        (api_error(400, "bad"), PermanentLaunchError, "BadRequest"),
        (api_error(403, "forbidden"), PermanentLaunchError, "Forbidden"),
        (api_error(404, "no such kind"), PermanentLaunchError, "KindNotServed"),
    ],
    ids=readable,
)
def test_create_errors_are_transient_or_permanent(
    setup: Any, error: BaseException, expected: type, detail: Any
) -> None:
    launcher, api, _core, backend = setup
    api.fail["create"] = error
    with pytest.raises(expected) as err:
        launcher.launch(make_request(backend=backend))
    if expected is TransientLaunchError:
        assert err.value.delay == detail
    else:
        assert err.value.reason == detail
    assert api.objects == {}
    if isinstance(error, ApiException) and error.status == 422:
        assert "spec.driver.cores" in str(err.value)


def test_status_delete_and_list(setup: Any) -> None:
    launcher, api, _core, backend = setup
    req = make_request(backend=backend)
    other_table = make_request(backend=backend, table="orders")
    launcher.launch(req)
    launcher.launch(other_table)
    runs = launcher.list_runs(req.namespace, req.table)
    assert [r.name for r in runs] == [req.name]
    assert runs[0].policy == "nightly" and runs[0].kind == "optimize" and runs[0].attempt == 0
    assert runs[0].created == datetime(2026, 11, 22, 2, 0, 1, tzinfo=UTC)
    launcher.delete(req.namespace, req.name)
    launcher.delete(req.namespace, req.name)  # idempotent
    with pytest.raises(RunNotFoundError):
        launcher.status(req.namespace, req.name)
    api.fail["delete"] = api_error(504)
    with pytest.raises(TransientLaunchError):
        launcher.delete(other_table.namespace, other_table.name)
    api.fail["list"] = api_error(403, "forbidden")
    with pytest.raises(PermanentLaunchError):
        launcher.list_runs(req.namespace, req.table)


def test_every_call_is_granted_by_permissions(setup: Any) -> None:
    launcher, api, core, backend = setup
    req = make_request(backend=backend)
    launcher.launch(req)
    launcher.launch(req)
    finish(api, core, backend, req, RunState.SUCCEEDED)
    launcher.status(req.namespace, req.name)
    launcher.list_runs(req.namespace, req.table)
    launcher.delete(req.namespace, req.name)
    made = set(api.calls) | set(core.calls)
    assert made <= granted(backend), made - granted(backend)
    assert {c[2] for c in api.calls} == {"create", "get", "list", "delete"}


@pytest.mark.parametrize("state", [RunState.SUCCEEDED, RunState.FAILED])
def test_finished_runs_carry_times_and_the_result_line(setup: Any, state: RunState) -> None:
    launcher, api, core, backend = setup
    req = make_request(backend=backend)
    launcher.launch(req)
    finish(api, core, backend, req, state)
    st = launcher.status(req.namespace, req.name)
    assert st.state is state
    assert st.result == RESULT
    assert st.started == datetime(2026, 11, 22, 2, 0, 5, tzinfo=UTC)
    assert st.finished == datetime(2026, 11, 22, 2, 10, tzinfo=UTC)


def test_a_failed_run_says_what_spark_logged_at_error(setup: Any) -> None:
    """The job sees only "SparkContext was shut down" when every executor failed; the driver's
    log says why (as on the real node, whose executors could not reach the driver)."""
    launcher, api, core, backend = setup
    req = make_request(backend=backend)
    launcher.launch(req)
    finish(api, core, backend, req, RunState.FAILED)
    ((key, log),) = core.logs.items()
    core.logs[key] = (
        "26/11/29 00:20:36 WARN ExecutorPodsLifecycleManager: 1 new failed executors.\n"
        "26/11/29 00:20:37 ERROR ExecutorPodsLifecycleManager: Max number of executor "
        "failures (4) reached\n" + log
    )
    st = launcher.status(req.namespace, req.name)
    assert (
        "Spark logged ExecutorPodsLifecycleManager: Max number of executor failures (4) "
        "reached" in st.message
    ), st.message
    finish(api, core, backend, req, RunState.SUCCEEDED)
    assert "Spark logged" not in launcher.status(req.namespace, req.name).message


def test_an_executor_oom_before_the_context_started_is_said_and_counted(setup: Any) -> None:
    """On the real node: every executor pod OOMKilled at start, Spark deleted each at once, and
    the driver's last ERROR is only the consequence ("Error initializing SparkContext."). The
    reason Spark logged first is the one said, and its OOM words make the run out of memory
    (the controller's memory retry)."""
    launcher, api, core, backend = setup
    req = make_request(backend=backend)
    launcher.launch(req)
    finish(api, core, backend, req, RunState.FAILED)
    ((key, log),) = core.logs.items()
    core.logs[key] = (
        "26/12/01 23:16:45 WARN ExecutorPodsLifecycleManager: 1 new failed executors.\n"
        "26/12/01 23:16:45 WARN KubernetesClusterSchedulerBackend: OOM is detected.\n"
        "26/12/01 23:16:45 ERROR ExecutorPodsLifecycleManager: Max number of executor "
        "failures (3) reached\n"
        "26/12/01 23:16:45 ERROR SparkContext: Error initializing SparkContext.\n"
        "java.lang.IllegalStateException: Spark context stopped while waiting for backend\n" + log
    )
    st = launcher.status(req.namespace, req.name)
    assert "Max number of executor failures (3) reached" in st.message, st.message
    assert st.out_of_memory


def test_the_result_line_is_optional(setup: Any) -> None:
    launcher, api, core, backend = setup
    req = make_request(backend=backend)
    launcher.launch(req)
    finish(api, core, backend, req, RunState.SUCCEEDED)
    core.logs.clear()  # driver pod already gone
    st = launcher.status(req.namespace, req.name)
    assert st.state is RunState.SUCCEEDED and st.result is None
    no_core = type(launcher)(api, Config())
    assert no_core.status(req.namespace, req.name).result is None


@pytest.mark.parametrize(
    ("app_state", "expected"),
    [
        (None, RunState.PENDING),
        ("", RunState.PENDING),
        ("SUBMITTED", RunState.PENDING),
        ("PENDING_RERUN", RunState.PENDING),
        ("INVALIDATING", RunState.PENDING),
        ("RUNNING", RunState.RUNNING),
        ("SUCCEEDING", RunState.RUNNING),
        ("FAILING", RunState.RUNNING),
        ("COMPLETED", RunState.SUCCEEDED),
        ("FAILED", RunState.FAILED),
        ("SUBMISSION_FAILED", RunState.FAILED),
        ("UNKNOWN", RunState.UNKNOWN),
        ("SOMETHING_NEW", RunState.UNKNOWN),
    ],
)
def test_spark_application_states(app_state: str | None, expected: RunState) -> None:
    launcher, *_ = spark()
    obj: dict[str, Any] = {"metadata": {"name": "r", "namespace": "n"}}
    if app_state is not None:
        obj["status"] = {"applicationState": {"state": app_state, "errorMessage": "boom"}}
    st = launcher.to_status(obj)
    assert st.state is expected
    if app_state is not None:
        assert st.message == "boom"


def cond(kind: str, status: str = "True", **kw: str) -> dict[str, str]:
    return {"type": kind, "status": status, **kw}


@pytest.mark.parametrize(
    ("status", "expected", "message"),
    [
        ({}, RunState.PENDING, ""),
        ({"active": 1, "ready": 0}, RunState.PENDING, ""),
        ({"active": 1, "ready": 1}, RunState.RUNNING, ""),
        ({"active": 1}, RunState.RUNNING, ""),
        ({"failed": 1}, RunState.PENDING, "retries"),
        ({"conditions": [cond("Suspended")]}, RunState.PENDING, "suspended"),
        ({"conditions": [cond("FailureTarget")], "active": 1}, RunState.RUNNING, "failing"),
        ({"conditions": [cond("Complete", "False")], "active": 1}, RunState.RUNNING, ""),
        (
            {"conditions": [cond("SuccessCriteriaMet"), cond("Complete")]},
            RunState.SUCCEEDED,
            "completed",
        ),
        (
            {"conditions": [cond("Failed", reason="DeadlineExceeded", message="too slow")]},
            RunState.FAILED,
            "DeadlineExceeded: too slow",
        ),
        (
            {"conditions": [cond("Failed", reason="BackoffLimitExceeded")]},
            RunState.FAILED,
            "BackoffLimit",
        ),
        (  # the Job's podFailurePolicy: a driver evicted or preempted fails it, said as such
            {
                "conditions": [
                    cond(
                        "Failed",
                        reason="PodFailurePolicy",
                        message="Pod n/r-x has "
                        "condition DisruptionTarget matching FailJob rule at index 0",
                    )
                ]
            },
            RunState.FAILED,
            "the driver pod was evicted, preempted or drained away",
        ),
    ],
    ids=readable,
)
def test_job_states(status: dict[str, Any], expected: RunState, message: str) -> None:
    launcher, *_ = job()
    st = launcher.to_status({"metadata": {"name": "r", "namespace": "n"}, "status": status})
    assert st.state is expected
    assert message in st.message


def test_permission_data_is_well_formed() -> None:
    rules = permissions.as_policy_rules(permissions.launcher_permissions())
    resources = {(r["apiGroups"][0], r["resources"][0]): r["verbs"] for r in rules}
    assert resources[("sparkoperator.k8s.io", "sparkapplications")] == [
        "create",
        "delete",
        "get",
        "list",
    ]
    assert resources[("batch", "jobs")] == ["create", "delete", "get", "list"]
    assert resources[("", "pods/log")] == ["get"]
    assert permissions.launcher_permissions([Backend.LOCAL]) == []
    assert str(permissions.OWNER_FINALIZERS) == "txntable.io/txntables/finalizers: update"


def test_make_launcher_picks_the_backend(tmp_path: Any) -> None:
    from txntable.launch import LocalLauncher, make_launcher

    api_client = client.ApiClient()
    assert isinstance(
        make_launcher("SparkApplication", Config(), api_client=api_client), SparkApplicationLauncher
    )
    assert isinstance(make_launcher(Backend.JOB, Config(), api_client=api_client), JobLauncher)
    assert isinstance(make_launcher("local", Config(), runs_dir=tmp_path), LocalLauncher)
    with pytest.raises(ValueError, match="runs directory"):
        make_launcher("local", Config())


PULL_FAILED = {
    "reason": "ImagePullBackOff",
    "message": 'Back-off pulling image "ghcr.io/x/spark:nope": ErrImagePull: failed to resolve',
}


@pytest.mark.parametrize(
    ("status", "said"),
    [
        ({"containerStatuses": [{"name": "c", "state": {"waiting": PULL_FAILED}}]},
         f"pod p: ImagePullBackOff: {PULL_FAILED['message']}"),
        ({"initContainerStatuses": [{"state": {"waiting": {"reason": "CreateContainerConfigError",
                                                          "message": 'secret "s" not found'}}}]},
         'pod p: CreateContainerConfigError: secret "s" not found'),
        ({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                          "message": "0/1 nodes are available: 1 Insufficient cpu."}]},
         "pod p cannot be scheduled: 0/1 nodes are available: 1 Insufficient cpu."),
        # waiting that ends by itself is not reported
        ({"containerStatuses": [{"state": {"waiting": {"reason": "ContainerCreating"}}}]}, ""),
        ({"conditions": [{"type": "PodScheduled", "status": "True"}]}, ""),
        ({}, ""),
    ],
)  # fmt: skip
def test_what_keeps_a_pod_from_starting(status: dict[str, Any], said: str) -> None:
    assert pod_waiting({"metadata": {"name": "p"}, "status": status}) == said


def test_a_run_in_flight_says_why_its_pods_cannot_start(setup: Any) -> None:
    launcher, _api, core, backend = setup
    req = make_request(backend=backend)
    launcher.launch(req)
    assert launcher.waiting(req.namespace, req.name) == ""
    for i, state in enumerate(({"running": {}}, {"waiting": PULL_FAILED})):
        core.pods.append(
            {
                "metadata": {
                    "name": f"{req.name}-exec-{i}",
                    "creationTimestamp": f"2026-11-22T02:00:0{i}Z",
                    "labels": {"txntable.io/run": req.name},
                },
                "status": {
                    "containerStatuses": [
                        {
                            "name": "c",
                            "image": "i",
                            "imageID": "",
                            "ready": False,
                            "restartCount": 0,
                            "state": state,
                        }
                    ]
                },
            }
        )
    said = launcher.waiting(req.namespace, req.name)
    assert said == f"pod {req.name}-exec-1: ImagePullBackOff: {PULL_FAILED['message']}"
    assert type(launcher)(_api, Config()).waiting(req.namespace, req.name) == ""  # no core API
