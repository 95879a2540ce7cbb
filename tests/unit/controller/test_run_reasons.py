"""Why a run failed comes from the job's own result line, on every backend (issue 23.1).

A cluster listing carries no result line: the run is read in detail once (its driver's log)
before it is recorded. A local run's stderr is Spark's log as much as the job's: only its
``error:`` line, or the last line that is not log noise, may stand for the reason. A job that
refuses its input still prints a result line, with ``errorType``.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.support.controller import Controller, MemoryLauncher, compaction, txntable, with_garbage
from txntable.engine.errors import UnsupportedWriterFeatureError
from txntable.jobs import BAD_INPUT, UNSUPPORTED_FEATURE
from txntable.jobs.optimize import main as optimize_main
from txntable.jobs.outcome import error_type
from txntable.launch import RunStatus
from txntable.launch.run import failure_detail

SPARK_TAIL = """\
Setting default log level to "WARN".
To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).
25/11/27 10:00:01 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform
25/11/27 10:00:09 INFO SparkContext: Successfully stopped SparkContext
INFO:py4j.clientserver:Closing down clientserver connection
"""


def test_the_reason_line_of_stderr_is_never_log_noise() -> None:
    assert failure_detail(SPARK_TAIL) == ""
    said = "error: not a Delta table: /data/x (no _delta_log)\n"
    assert failure_detail(said + SPARK_TAIL) == said.strip()
    trace = "Traceback (most recent call last):\n  File x\nValueError: bad column\n"
    assert failure_detail(trace + SPARK_TAIL) == "ValueError: bad column"
    assert failure_detail("2026-11-27 10:00:00,001 WARN x\nWARNING: An illegal reflective") == ""


class Listing(MemoryLauncher):
    """Lists runs as a cluster API lists them, without their result line; ``status`` reads
    it (the driver's log), as the Job and SparkApplication launchers do."""

    def __init__(self, clock: list[datetime]) -> None:
        super().__init__(clock)
        self.results: dict[str, dict[str, object]] = {}
        self.detailed: list[str] = []

    def list_runs(self, namespace: str, table: str) -> list[RunStatus]:
        return [replace(r, result=None) for r in super().list_runs(namespace, table)]

    def status(self, namespace: str, name: str) -> RunStatus:
        self.detailed.append(name)
        return replace(self.runs[name], result=self.results.get(name))


VACUUMING = compaction(triggers={"smallFiles": 100}, vacuum={"enabled": True})


def _vacuum_run(tmp_path: Path) -> tuple[Controller, Listing, str, datetime]:
    """A table with garbage and nothing to compact, its VACUUM-only run launched on a
    launcher that lists runs as a cluster does."""
    now = datetime.now(UTC).replace(microsecond=0)
    with_garbage(tmp_path / "t", now)
    c = Controller(txntable(tmp_path / "t"), at=now)
    launcher = c.launcher = Listing(c.clock)
    c.tick(compaction=[VACUUMING])
    (name,) = launcher.launched
    assert name.startswith("vac-")
    return c, launcher, name, now


def test_a_listed_run_is_read_once_for_its_reason(tmp_path: Path) -> None:
    c, launcher, name, now = _vacuum_run(tmp_path)
    policy = VACUUMING
    c.clock[0] = now + timedelta(seconds=20)
    launcher.fail(name, "BackoffLimitExceeded: Job has reached the specified backoff limit")
    launcher.results[name] = {
        "vacuumOnly": True,
        "error": "vacuum: retention 1 h is shorter than the table's (7 d)",
        "errorType": BAD_INPUT,
    }
    for s in (30, 60, 90):
        tick = c.tick(now + timedelta(seconds=s), compaction=[policy])
    assert launcher.detailed == [name]  # once
    record = tick.status.last_vacuum
    assert record is not None and record.outcome == "Failed"
    assert (record.message or "").startswith("vacuum: retention 1 h is shorter")
    assert "(BackoffLimitExceeded" in (record.message or "")  # the backend's, after it
    (said,) = c.reasons("RunFailed")
    assert "retention 1 h is shorter" in said


def test_a_run_stopped_by_a_table_feature_holds_its_step(tmp_path: Path) -> None:
    c, launcher, name, now = _vacuum_run(tmp_path)
    launcher.fail(name, "exit code 2")
    launcher.results[name] = {"error": "needs writer feature x", "errorType": UNSUPPORTED_FEATURE}
    for hours in range(1, 30, 3):  # a day and more: past every back-off
        tick = c.tick(now + timedelta(hours=hours), compaction=[VACUUMING])
    assert launcher.launched == [name]
    vacuuming = {x.type: x for x in tick.status.conditions}["Vacuuming"]
    assert vacuuming.reason == "UnsupportedTableFeature" and "writer feature x" in vacuuming.message
    assert len(c.reasons("UnsupportedTableFeature")) == 1


def test_a_refused_input_still_prints_a_result_line(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = optimize_main([str(tmp_path / "nothing"), "--run-id", "r-1", "--executor", "arrow"])
    assert code == 2 and err.getvalue().startswith("error: ")
    line = json.loads(out.getvalue().strip().splitlines()[-1])
    assert line["runId"] == "r-1" and line["errorType"] == BAD_INPUT
    assert line["error"] in err.getvalue()
    feature = UnsupportedWriterFeatureError("needs x", ("x",))
    assert error_type(feature) == UNSUPPORTED_FEATURE
