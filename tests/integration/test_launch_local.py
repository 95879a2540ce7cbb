"""The local launcher with real subprocesses: outcome and result line from a finished run,
failure messages, adoption of a running run by a new launcher (controller restart), a run
whose process vanished, and ``delete`` ending the whole process group."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.local_launcher import eventually, finished, request
from txntable.arrow_pool import ONE_SHOT_POOL, VARIABLE
from txntable.launch import LocalLauncher, RunKind, RunState, runs_to_delete
from txntable.launch.errors import PermanentLaunchError, RunNotFoundError

pytestmark = pytest.mark.integration
MODULES = {RunKind.OPTIMIZE: "tests.integration.launch_echo_job"}


def launcher(tmp_path: Path) -> LocalLauncher:
    return LocalLauncher(
        tmp_path / "runs", modules=MODULES, env={"PYTHONPATH": str(REPO)}, grace_seconds=5
    )


def test_a_run_succeeds_with_its_result_and_is_adopted_not_restarted(tmp_path: Path) -> None:
    lx = launcher(tmp_path)
    req = request("--target-size", "1MB")
    first = lx.launch(req)
    assert first.state in (RunState.PENDING, RunState.RUNNING) and not first.adopted
    st = finished(lx, req)
    assert st.state is RunState.SUCCEEDED, st.message
    assert st.result == {
        "runId": req.name,
        "tableUri": "file:///data/sales",
        "master": "local[6]",
        "storageOptions": {"region": "eu-west-1"},
        "args": ["file:///data/sales", "--target-size", "1MB"],
    }
    assert st.started and st.finished and st.created and st.finished >= st.started
    run_dir = tmp_path / "runs" / "lake" / req.name
    pid_before = (run_dir / "pid.json").read_text()
    again = lx.launch(req)
    assert again.adopted and again.state is RunState.SUCCEEDED
    assert (run_dir / "pid.json").read_text() == pid_before  # no second process
    assert [r.name for r in lx.list_runs("lake", "sales")] == [req.name]
    assert lx.list_runs("lake", "orders") == []


def test_a_failing_run_reports_its_exit_code_and_last_error_line(tmp_path: Path) -> None:
    lx = launcher(tmp_path)
    req = request("--exit", "3")
    lx.launch(req)
    st = finished(lx, req)
    assert st.state is RunState.FAILED
    assert st.message == "exit code 3: echo job failing with 3"
    assert st.result is not None and st.result["runId"] == req.name


def test_history_limits_delete_old_local_runs(tmp_path: Path) -> None:
    lx = launcher(tmp_path)
    reqs = [request(hour=h) for h in range(4)] + [request("--exit", "1", hour=9)]
    for req in reqs:
        lx.launch(req)
    for req in reqs:
        finished(lx, req)
    doomed = runs_to_delete(lx.list_runs("lake", "sales"), successful_limit=2, failed_limit=1)
    assert [r.name for r in doomed] == [reqs[0].name, reqs[1].name]
    for run in doomed:
        lx.delete(run.namespace, run.name)
    assert [r.name for r in lx.list_runs("lake", "sales")] == [r.name for r in reqs[2:]]


def test_a_new_launcher_adopts_a_running_run(tmp_path: Path) -> None:
    go = tmp_path / "go"
    req = request("--wait-for", str(go))

    def start_then_forget() -> None:  # the controller that launched the run goes away
        old = launcher(tmp_path)
        old.launch(req)
        eventually(
            lambda: old.status(req.namespace, req.name), lambda s: s.state.value == "Running"
        )

    start_then_forget()
    new = launcher(tmp_path)
    assert new.status(req.namespace, req.name).state is RunState.RUNNING
    adopted = new.launch(req)
    assert adopted.adopted and adopted.state is RunState.RUNNING
    assert [r.state for r in new.list_runs("lake", "sales")] == [RunState.RUNNING]
    go.touch()
    st = finished(new, req)
    assert st.state is RunState.SUCCEEDED and st.result and st.result["runId"] == req.name


def test_a_run_whose_process_vanished_is_failed(tmp_path: Path) -> None:
    go = tmp_path / "never"
    lx = launcher(tmp_path)
    req = request("--wait-for", str(go))
    lx.launch(req)
    eventually(lambda: lx.status(req.namespace, req.name), lambda s: s.state is RunState.RUNNING)
    pid = json.loads((tmp_path / "runs/lake" / req.name / "pid.json").read_text())["pid"]
    os.killpg(pid, signal.SIGKILL)  # machine crash: no supervisor left to record an exit code
    st = finished(lx, req)
    assert st.state is RunState.FAILED
    assert "without recording an exit code" in st.message


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_delete_ends_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    lx = launcher(tmp_path)
    req = request("--wait-for", str(tmp_path / "never"), "--grandchild-pid", str(pid_file))
    lx.launch(req)
    eventually(pid_file.exists, bool)
    grandchild = int(pid_file.read_text())
    assert alive(grandchild)
    lx.delete(req.namespace, req.name)
    assert not eventually(lambda: alive(grandchild), lambda a: not a, timeout=10)
    assert not (tmp_path / "runs/lake" / req.name).exists()
    with pytest.raises(RunNotFoundError):
        lx.status(req.namespace, req.name)
    lx.delete(req.namespace, req.name)  # idempotent


def test_a_foreign_directory_is_not_adopted_and_names_stay_inside(tmp_path: Path) -> None:
    lx = launcher(tmp_path)
    req = request()
    squatter = tmp_path / "runs" / "lake" / req.name
    squatter.mkdir(parents=True)
    (squatter / "request.json").write_text(json.dumps({"labels": {"app": "other"}}))
    with pytest.raises(PermanentLaunchError, match="not managed by txntable"):
        lx.launch(req)
    with pytest.raises(PermanentLaunchError, match="DNS-1123"):
        lx.status("lake", "../../etc")


def test_a_run_past_its_deadline_is_stopped_and_failed(tmp_path: Path) -> None:
    lx = launcher(tmp_path)
    req = request("--wait-for", str(tmp_path / "never"), deadline_seconds=1)
    lx.launch(req)
    st = finished(lx, req)
    assert st.state is RunState.FAILED
    assert st.message == f"exit code -{int(signal.SIGTERM)}: deadline of 1 s exceeded"


def test_stop_started_records_each_stopped_run_even_one_that_ignores_sigterm(
    tmp_path: Path,
) -> None:
    lx = launcher(tmp_path)
    polite = request("--wait-for", str(tmp_path / "never"), hour=3)
    stubborn = request("--wait-for", str(tmp_path / "never"), "--ignore-sigterm", hour=4)
    for req in (polite, stubborn):
        lx.launch(req)
        log = tmp_path / "runs/lake" / req.name / "stderr.log"  # written after the handler is set
        eventually(lambda log=log: log.exists() and "starting" in log.read_text(), bool)
    stopped = lx.stop_started(timeout=5)  # the polite one needs far less, even under load
    assert sorted(stopped) == sorted(f"lake/{r.name}" for r in (polite, stubborn))
    first = lx.status(polite.namespace, polite.name)
    assert first.state is RunState.FAILED
    assert first.message.startswith(f"exit code -{int(signal.SIGTERM)}")
    second = lx.status(stubborn.namespace, stubborn.name)
    assert second.state is RunState.FAILED
    assert second.message == (
        f"exit code -{int(signal.SIGKILL)}: did not stop within 5 s of SIGTERM; killed"
    )
    assert not second.out_of_memory  # a kill we made, not the kernel's OOM killer
    assert lx.stop_started() == []  # nothing is left running


def test_a_run_gets_the_one_shot_arrow_pool_unless_one_was_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lx = launcher(tmp_path)
    monkeypatch.delenv(VARIABLE, raising=False)
    assert lx.environment(request())[VARIABLE] == ONE_SHOT_POOL
    monkeypatch.setenv(VARIABLE, "mimalloc")
    assert lx.environment(request())[VARIABLE] == "mimalloc"
