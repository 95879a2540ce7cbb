"""Runs that ran out of memory are told apart from other failures by every launcher (issue 16.3):
the local backend with real processes (a ``MemoryError`` under an address-space limit, and a
SIGKILL as from the kernel's OOM killer), the cluster launchers from what the Spark Operator and
the kubelet report (``errorMessage``, pods terminated ``OOMKilled``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.support.kube_fakes import finish, job, spark
from tests.support.launch_requests import request as make_request
from tests.support.local_launcher import finished, request
from txntable.launch import LocalLauncher, RunKind, RunState
from txntable.launch.run import Backend

pytestmark = pytest.mark.integration


def local(tmp_path: Path, module: str) -> LocalLauncher:
    return LocalLauncher(
        tmp_path / "runs",
        modules={RunKind.OPTIMIZE: module},
        env={"PYTHONPATH": str(REPO)},
        grace_seconds=5,
    )


@pytest.mark.parametrize("how", ["limit", "kill"], ids=["memory-error", "sigkill"])
def test_a_local_run_out_of_memory_is_flagged(tmp_path: Path, how: str) -> None:
    lx = local(tmp_path, "tests.integration.launch_oom_job")
    req = request("--how", how)
    lx.launch(req)
    st = finished(lx, req)
    assert st.state is RunState.FAILED
    assert st.out_of_memory, st.message


def test_a_local_run_failing_otherwise_is_not_flagged(tmp_path: Path) -> None:
    lx = local(tmp_path, "tests.integration.launch_echo_job")
    req = request("--exit", "3")
    lx.launch(req)
    st = finished(lx, req)
    assert st.state is RunState.FAILED
    assert not st.out_of_memory, st.message


def test_a_spark_application_killed_for_memory_is_flagged() -> None:
    launcher, api, core, backend = spark()
    req = make_request(backend=backend)
    launcher.launch(req)
    finish(api, core, backend, req, RunState.FAILED)
    app = api.objects[(req.namespace, req.name)]
    assert not launcher.status(req.namespace, req.name).out_of_memory
    app["status"]["applicationState"]["errorMessage"] = (
        "driver container failed with ExitCode: 137, Reason: OOMKilled"
    )
    assert launcher.status(req.namespace, req.name).out_of_memory
    (listed,) = launcher.list_runs(req.namespace, req.table)
    assert listed.out_of_memory  # the listing alone tells it: the message is on the object


@pytest.mark.parametrize(
    "terminated",
    [
        pytest.param({"reason": "OOMKilled", "exitCode": 137}, id="oomkilled"),
        pytest.param({"reason": "Error", "exitCode": 137}, id="exit-137"),
    ],
)
def test_a_job_whose_pod_was_killed_for_memory_is_flagged(terminated: dict[str, Any]) -> None:
    launcher, api, core, backend = job()
    req = make_request(backend=Backend.JOB)
    launcher.launch(req)
    finish(api, core, backend, req, RunState.FAILED)
    assert not launcher.status(req.namespace, req.name).out_of_memory
    core.pods[-1]["status"] = {
        "containerStatuses": [
            {
                "name": "spark-driver",
                "image": "x",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": terminated},
            }
        ]
    }
    assert launcher.status(req.namespace, req.name).out_of_memory
