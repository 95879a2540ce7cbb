"""Ctrl-C on ``txntable``: one line, the right exit status, and nothing left running
(issue 23, items 12 and 13). Real signals to real subprocesses: SIGINT to the command's process
group, as a terminal sends it; then every process carrying the test's marker is looked for.

* Ctrl-C in the first seconds of Spark's start-up left the gateway JVM running forever,
  reparented to PID 1 (it ignores SIGINT and watches its stdin only once it is up).
* Ctrl-C during a Spark job printed four py4j tracebacks before ``error: interrupted`` (PySpark's
  own SIGINT handler calls the JVM from inside the handler), and could hang.
* Ctrl-C on ``txntable run --local`` left the run it had started going; it committed later.
* Ctrl-C while ``txntable demo`` started its writers printed a writer's own traceback.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from tests.integration.process_support import Job, blocking_python, wait_until
from txntable.engine import Table

pytestmark = [pytest.mark.integration, pytest.mark.spark]

TXNTABLE = [sys.executable, "-m", "txntable.cli.main"]
SCHEMA = pa.schema([("id", pa.int64()), ("d", pa.string())])


def _fragmented(path: Path, appends: int = 6) -> str:
    table = Table.create(str(path), SCHEMA, ["d"])
    for i in range(appends):
        table.append(pa.table({"id": [i], "d": ["a" if i % 2 else "b"]}))
    return str(path)


def _one_error_line(stderr: str, expected: str) -> None:
    """No Python traceback and no py4j complaint; the last line is the command's own."""
    assert "Traceback" not in stderr and "py4j" not in stderr, stderr[-4000:]
    assert stderr.rstrip().splitlines()[-1] == expected, stderr[-2000:]


@pytest.fixture
def jobs() -> object:
    started: list[Job] = []
    yield started
    for job in started:  # whatever a failed test leaves running, it does not leak
        job.kill_leftovers()


def test_ctrl_c_while_spark_starts_leaves_no_jvm(tmp_path: Path, jobs: list[Job]) -> None:
    location = _fragmented(tmp_path / "t")
    job = Job([*TXNTABLE, "optimize", location, "--master", "local[1]"], tmp_path)
    jobs.append(job)
    wait_until(lambda: bool(job.leftovers("java")), job)  # the JVM is starting
    job.interrupt()
    assert job.wait() == 130
    _one_error_line(job.stderr(), "error: interrupted")
    assert job.no_leftovers_after() == []
    assert Table.open(location).version() == 6


def test_ctrl_c_during_a_spark_job_is_one_line(tmp_path: Path, jobs: list[Job]) -> None:
    location = _fragmented(tmp_path / "t")
    files = sorted(p.name for p in (tmp_path / "t").rglob("*.parquet"))
    worker, started = blocking_python(tmp_path)
    job = Job(
        [*TXNTABLE, "optimize", location, "--master", "local[1]"],
        tmp_path,
        env={"PYSPARK_PYTHON": str(worker)},
    )
    jobs.append(job)
    wait_until(started.exists, job)  # a bin's task is running
    job.interrupt()
    assert job.wait() == 130
    _one_error_line(job.stderr(), "error: interrupted")
    assert job.no_leftovers_after() == []
    assert Table.open(location).version() == 6
    assert sorted(p.name for p in (tmp_path / "t").rglob("*.parquet")) == files


MANIFESTS = """apiVersion: txntable.io/v1alpha1
kind: TxnTable
metadata: {{name: events}}
spec: {{location: {location}, compactionPolicyRef: {{name: compact}}}}
---
apiVersion: txntable.io/v1alpha1
kind: CompactionPolicy
metadata: {{name: compact}}
spec:
  triggers: {{smallFiles: 2, cooldown: 1s}}
  spark: {{backend: Local}}
"""


QUICK = ["--no-events", "--interval", "1"]


def test_ctrl_c_on_run_local_stops_the_run_it_started(tmp_path: Path, jobs: list[Job]) -> None:
    location = _fragmented(tmp_path / "t")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "all.yaml").write_text(MANIFESTS.format(location=location))
    runs = tmp_path / "runs"
    worker, started = blocking_python(tmp_path)
    job = Job(
        [*TXNTABLE, "run", "--local", str(tmp_path / "m"), "--runs-dir", str(runs), *QUICK],
        tmp_path,
        env={"PYSPARK_PYTHON": str(worker)},
    )
    jobs.append(job)
    wait_until(started.exists, job)  # the compaction run's Spark job is in flight
    job.interrupt()
    assert job.wait() == 130
    (run,) = (runs / "default").iterdir()
    _one_error_line(
        job.stderr(),
        f"error: interrupted; stopped the run(s) it had started: default/{run.name}",
    )
    assert job.no_leftovers_after() == []
    finished = json.loads((run / "exit.json").read_text())
    assert finished["exitCode"] == 143  # the job was stopped (SIGTERM) and said so
    assert (run / "stderr.log").read_text().rstrip().endswith("error: terminated")
    result = json.loads((run / "stdout.log").read_text().strip().splitlines()[-1])
    assert result["error"] == "terminated"  # the job's one result line says so too
    assert Table.open(location).version() == 6  # and nothing was committed after


def _importing_arrow(job: Job) -> bool:
    """Whether a writer of the demo has started loading pyarrow (its imports take a while
    after that: a Ctrl-C now lands inside them, where it printed a traceback)."""
    for line in job.leftovers("multiprocessing"):
        with contextlib.suppress(OSError):
            if "libarrow" in Path(f"/proc/{line.split()[0]}/maps").read_text():
                return True
    return False


def test_ctrl_c_while_the_demo_starts_its_writers_is_one_line(
    tmp_path: Path, jobs: list[Job]
) -> None:
    (tmp_path / "m").mkdir()
    location = tmp_path / "demo-table"
    (tmp_path / "m" / "all.yaml").write_text(MANIFESTS.format(location=location))
    job = Job(
        [*TXNTABLE, "demo", "--manifests", str(tmp_path / "m"), "--runs-dir", str(tmp_path / "r")],
        tmp_path,
    )
    jobs.append(job)
    wait_until(lambda: _importing_arrow(job), job)  # a writer is in the middle of its imports
    job.interrupt()
    assert job.wait() == 130
    _one_error_line(job.stderr(), "error: interrupted")
    assert "KeyboardInterrupt" not in job.stderr()
    assert job.no_leftovers_after() == []
