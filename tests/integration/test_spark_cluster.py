"""Maintenance jobs on a real Spark standalone cluster: a master and two workers, each a JVM of
its own, and executors in JVMs of theirs (``spark_cluster.py``; one cluster for the session).

Every job runs as ``python -m txntable.jobs.<kind> --master spark://...`` in a process of its
own, as a SparkApplication's driver does, against a local table and an S3 table on moto's
server: OPTIMIZE bin-pack, OPTIMIZE Z-order distributed over the executors followed by VACUUM
as Spark tasks (listing and deletes; the VACUUM job is that run with ``--vacuum-only``) and the
checkpoint job (its log replay reads through the engine's storage inside tasks:
docs/adr/0008-log-replay-in-tasks.md), which also runs against an Azure table on Azurite. S3 and
Azure options reach the jobs as the launchers pass them, in ``TXNTABLE_STORAGE_OPTIONS`` with
object_store's names. After each job deltalake (in a child process) and our own reader see the
same rows as before, and the master's record shows that the application ran on the cluster, with
executors on both workers.

How jobs fail: a master nobody answers at, storage nobody answers at, and tasks that fail on the
executors (a Python there without txntable, as in an image without the package) each end in one
JSON result line whose ``error`` is one line (never a JVM stack trace), with the table unchanged.

And the cluster itself: Ctrl-C stops it, a killed parent takes it along, a start that fails
stops what it started; no JVM survives any of these.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from tests import oracle_read
from tests.conftest import REPO
from tests.integration import spark_cluster as cluster_support
from tests.integration.moto_support import moto_server
from tests.integration.optimize_helpers import SCHEMA, batch
from tests.integration.spark_cluster import SparkCluster
from tests.support.azurite import CONTAINER as AZURE_CONTAINER
from tests.support.azurite import _options as azure_options
from txntable.engine.checkpoint.write import write_checkpoint
from txntable.engine.storage.paths import decode_path
from txntable.engine.storage.s3 import S3Storage
from txntable.engine.table import Table

pytestmark = [pytest.mark.integration, pytest.mark.spark]

BUCKET = "txntable-cluster"
#: VACUUM may delete what OPTIMIZE removed at once (the test tables keep no history)
NO_RETENTION = {"delta.deletedFileRetentionDuration": "interval 0 hours"}
JOB_TIMEOUT_S = 600
ORPHAN = "p=part2/orphan-of-a-crashed-writer.parquet"


# -- helpers ----------------------------------------------------------------------------------
def run_job(
    kind: str,
    uri: str,
    *args: str,
    env: dict[str, str],
    cluster: SparkCluster | None = None,
    watch: set[str] | None = None,
) -> tuple[int, dict[str, Any], str]:
    """``python -m txntable.jobs.<kind>``: its exit status, its one result line, its stderr.
    With ``watch``, what ``executors_in_the_tree`` sees while it runs is added to it."""
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", f"txntable.jobs.{kind}", uri, *args],
            stdout=out,
            stderr=err,
            text=True,
            env=env,
            cwd=REPO,
        )
        try:
            if watch is not None and cluster is not None:
                watch |= executors_in_the_tree(cluster, proc)
            proc.wait(timeout=JOB_TIMEOUT_S)
        finally:
            if proc.poll() is None:  # pragma: no cover - a hung job
                proc.kill()
                proc.wait()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    seconds = time.monotonic() - started
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    logs = cluster.log_tail() if cluster is not None else ""
    assert len(lines) == 1 and lines[0].startswith("{"), (
        f"{kind} printed {len(lines)} lines, not one result line:\n{stdout[-2000:]}\n"
        f"{stderr[-3000:]}\n{logs}"
    )
    doc: dict[str, Any] = json.loads(lines[0])
    print(f"{kind} {' '.join(args)}: exit {proc.returncode} in {seconds:.1f} s")  # -s shows it
    return proc.returncode, doc, stderr


def executors_in_the_tree(cluster: SparkCluster, job: subprocess.Popen[str]) -> set[str]:
    """While ``job`` runs: its executor JVMs and Python worker daemons that ``stop`` would find
    in the cluster's process tree (``cluster_processes``), by parent."""
    workers = {p.pid for name, p in cluster.procs.items() if name.startswith("worker-")}
    seen: set[str] = set()
    while job.poll() is None and len(seen) < 4:
        for proc in cluster_support.cluster_processes(cluster):
            # a JVM's child holds the JVM's command line until it execs (an executor starting
            # its Python daemon): only a worker's child is an executor
            if "CoarseGrainedExecutorBackend" in proc.command and proc.ppid in workers:
                seen.add(f"executor under {proc.ppid}")  # one per worker
            elif "pyspark.daemon" in proc.command and proc.pgid == proc.pid:
                seen.add(f"python daemon under {proc.ppid}")  # one per executor
        time.sleep(0.2)
    return seen


def completed_apps(cluster: SparkCluster) -> list[dict[str, Any]]:
    apps: list[dict[str, Any]] = cluster.state().get("completedapps", [])
    return apps


def assert_ran_on_cluster(cluster: SparkCluster, before: int, name: str) -> None:
    """One more application called ``name`` finished on the master, and its executors ran on
    both workers (each worker keeps an executor directory per application)."""
    deadline = time.monotonic() + 30  # the master learns of the end when the driver leaves
    while len(apps := completed_apps(cluster)) < before + 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(apps) == before + 1, apps
    app = max(apps, key=lambda a: a.get("starttime", 0))
    assert app["name"] == name, app
    workers = {p.parent.parent.parent.name for p in cluster.executor_logs() if app["id"] in str(p)}
    assert workers == {"work-0", "work-1"}, (app, cluster.executor_logs())


def _ids_by_partition(table: Table) -> Counter[tuple[str, int]]:
    """(partition, id) of every live row, read by our engine: its snapshot and its storage."""
    snapshot = table.snapshot()
    out: Counter[tuple[str, int]] = Counter()
    for add in snapshot.add_actions():
        data = pq.read_table(snapshot.storage.open_input(decode_path(add.path)), columns=["id"])
        part = str(add.partition_values.get("p"))
        out.update((part, i) for i in data.column("id").to_pylist())
    return out


def _fill(table: Table, commits: int = 4, rows: int = 30) -> None:
    for i in range(commits):
        table.append(batch(i * rows, rows))


class Store:
    """Where a test table lives and how every party reaches it (deltalake with
    ``oracle_options``, by default the same options as ours)."""

    def __init__(
        self,
        uri: str,
        options: dict[str, str] | None,
        env: dict[str, str],
        oracle_options: dict[str, str] | None = None,
    ) -> None:
        self.uri, self.options, self.env = uri, options, env
        self.oracle_options = options if oracle_options is None else oracle_options

    def table(self) -> Table:
        return Table.open(self.uri, self.options)

    def oracle(self, version: int | None = None) -> dict[str, Any]:
        return oracle_read.read(self.uri, version, self.oracle_options)

    def drop_commits_before(self, version: int) -> None:
        storage = self.table().storage
        for v in range(version):
            storage.delete(f"_delta_log/{v:020d}.json")


def maintain_on_the_cluster(cluster: SparkCluster, store: Store) -> None:
    """Bin-pack one partition; Z-order another distributed over the executors and VACUUM with
    Spark tasks in the same run (``--vacuum``: the VACUUM job is this run with
    ``--vacuum-only``); checkpoint with Spark tasks. After each job deltalake and our reader see
    the same rows as before."""
    master = ("--master", cluster.master_url)
    table = store.table()
    table.storage.write(ORPHAN, b"not a parquet file")  # no commit names it: VACUUM's to delete
    rows = store.oracle()
    ours = _ids_by_partition(table)
    assert rows["rows"] == sum(ours.values()) > 0
    apps = len(completed_apps(cluster))

    def same_rows() -> None:
        assert store.oracle()["digest"] == rows["digest"]
        assert _ids_by_partition(table) == ours

    code, doc, err = run_job(
        "optimize", store.uri, *master, "--where", "p = 'part1'", env=store.env, cluster=cluster
    )
    assert code == 0 and doc["error"] is None, (doc, err[-3000:])
    assert doc["numFilesRemoved"] >= 4 and doc["numFilesAdded"] == 1, doc
    assert_ran_on_cluster(cluster, apps, "txntable-optimize")
    same_rows()

    code, doc, err = run_job(
        "optimize",
        store.uri,
        *master,
        *("--where", "p = 'part0'", "--zorder-by", "i32,id", "--target-size", "4Ki"),
        *("--distribute-zorder-above", "1", "--vacuum", "--vacuum-spark-min-files", "1"),
        env=store.env,
        cluster=cluster,
    )
    assert code == 0 and doc["error"] is None, (doc, err[-3000:])
    assert_ran_on_cluster(cluster, apps + 1, "txntable-optimize")
    snapshot = table.snapshot()
    added = [a.path for a in snapshot.add_actions() if a.path.startswith("p=part0/")]
    # zorder_spark names a run's files part-<range>-<one suffix>; a single task names its own
    suffixes = {p.split("/")[-1].split("-", 2)[2] for p in added}
    assert len(added) >= 2 and len(suffixes) == 1, added
    same_rows()

    live = {decode_path(a.path) for a in snapshot.add_actions()}
    removed = set(snapshot.tombstones().column("path").to_pylist())
    vacuumed = doc["vacuum"]
    assert vacuumed["executor"] == "spark" and vacuumed["logged"], vacuumed
    assert vacuumed["numDeleted"] == len(removed) + 1, (vacuumed, removed)
    left = {f.name for f in table.storage.list_tree() if not f.name.startswith("_delta_log/")}
    assert left == live, left ^ live
    same_rows()

    checkpoint_on_the_cluster(cluster, store, rows["digest"], ours)


def checkpoint_on_the_cluster(
    cluster: SparkCluster, store: Store, digest: str, ours: Counter[tuple[str, int]]
) -> None:
    """The checkpoint job on the cluster, its replay in tasks on both executors; then, with
    every commit before it gone, deltalake and our reader find the same rows in it alone."""
    table = store.table()
    version, live = table.version(), table.snapshot().num_files
    apps = len(completed_apps(cluster))
    seen: set[str] = set()
    code, doc, err = run_job(
        "checkpoint",
        store.uri,
        *("--master", cluster.master_url),
        env=store.env,
        cluster=cluster,
        watch=seen,
    )
    assert code == 0 and "error" not in doc, (doc, err[-3000:])
    # two executors, each with its Python worker daemon in a process group of its own: all in
    # the tree the cluster's stop signals
    assert len(seen) == 4, seen
    assert doc["version"] == version and doc["numOfAddFiles"] == live, doc
    assert_ran_on_cluster(cluster, apps, "txntable-checkpoint")
    store.drop_commits_before(version)  # from now on only the checkpoint knows the files
    read = store.oracle()
    assert (read["version"], read["digest"]) == (version, digest)
    reopened = Table.open(store.uri, store.options)
    assert reopened.snapshot().num_files == live and _ids_by_partition(reopened) == ours


# -- the jobs on the cluster ------------------------------------------------------------------
def test_local_table(spark_cluster: SparkCluster, tmp_path: Path) -> None:
    path = tmp_path / "local"
    for i in range(4):  # written by deltalake: its partition layout and statistics
        write_deltalake(
            str(path),
            batch(i * 30, 30),
            mode="append",
            partition_by=["p"],
            configuration=NO_RETENTION if i == 0 else None,
        )
    maintain_on_the_cluster(spark_cluster, Store(str(path), None, spark_cluster.job_env()))


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, str]]:
    """moto's S3 server with a bucket; the options in object_store's names (as users and the
    launchers write them)."""
    with moto_server() as url:
        options = {
            "AWS_ENDPOINT_URL": url,
            "AWS_ALLOW_HTTP": "true",
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
        }
        S3Storage(f"s3://{BUCKET}", options).client.create_bucket(Bucket=BUCKET)
        yield options


def test_s3_table(spark_cluster: SparkCluster, s3: dict[str, str]) -> None:
    uri = f"s3://{BUCKET}/t-{uuid.uuid4().hex[:8]}"
    table = Table.create(uri, SCHEMA, ["p"], NO_RETENTION, storage_options=s3)
    _fill(table)
    env = spark_cluster.job_env()
    env["TXNTABLE_STORAGE_OPTIONS"] = json.dumps(s3)
    maintain_on_the_cluster(spark_cluster, Store(uri, s3, env))


def test_checkpoint_job_on_an_azure_table(
    spark_cluster: SparkCluster,
    blob_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The checkpoint job on an Azure table (Azurite): the replay tasks read an inline
    checkpoint and the commits after it from Blob Storage through the engine's storage, as
    the Spark image has no Hadoop Azure connector (ADR 0008)."""
    options = azure_options(blob_url)
    uri = f"az://{AZURE_CONTAINER}/t-{uuid.uuid4().hex[:8]}"
    table = Table.create(uri, SCHEMA, ["p"], storage_options=options)
    _fill(table, commits=2)
    write_checkpoint(table.snapshot())  # the replay starts from it (version 2)
    table.append(batch(60, 30))
    table.delete("p = 'part1'")  # tombstones after the checkpoint
    assert table.snapshot().tombstones().num_rows >= 3
    env = spark_cluster.job_env()
    env["TXNTABLE_STORAGE_OPTIONS"] = json.dumps(options)
    # deltalake reaches Azurite through its emulator settings (object_store reads them here)
    monkeypatch.setenv("AZURE_STORAGE_USE_EMULATOR", "true")
    monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", blob_url)
    store = Store(uri, options, env, oracle_options={})
    rows = store.oracle()
    ours = _ids_by_partition(store.table())
    assert rows["rows"] == sum(ours.values()) > 0
    assert not any(part == "part1" for part, _ in ours)
    checkpoint_on_the_cluster(spark_cluster, store, rows["digest"], ours)


# -- how jobs fail ----------------------------------------------------------------------------
def _no_txntable_python(tmp_path: Path) -> str:
    """This interpreter without site-packages: PySpark's worker (on Spark's own PYTHONPATH)
    starts, but neither txntable nor pyarrow imports, as on executors of a wrong image."""
    script = tmp_path / "python-without-txntable"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


@pytest.fixture(scope="module")
def fragmented(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small local table with work for every job (unchanged by the failing runs)."""
    path = tmp_path_factory.mktemp("failing") / "t"
    for i in range(3):
        write_deltalake(str(path), batch(i * 10, 10), mode="append", partition_by=["p"])
    return path


JOBS = {
    "optimize": (),
    "vacuum": ("--vacuum-spark-min-files", "1"),
    "checkpoint": (),
}


@pytest.mark.parametrize("kind", sorted(JOBS))
@pytest.mark.parametrize("failure", ["bad master", "unreachable storage", "failing task"])
def test_a_failed_job_prints_one_result_line_with_a_clear_error(
    spark_cluster: SparkCluster, fragmented: Path, tmp_path: Path, kind: str, failure: str
) -> None:
    env = spark_cluster.job_env()
    uri, master = str(fragmented), spark_cluster.master_url
    nobody = f"127.0.0.1:{cluster_support.free_port()}"  # a port nobody listens at
    if failure == "bad master":
        master = f"spark://{nobody}"
        expected = (1, f"cannot reach the Spark master {master}")
    elif failure == "unreachable storage":
        uri = f"s3://{BUCKET}/t"
        env["TXNTABLE_STORAGE_OPTIONS"] = json.dumps(
            {
                "AWS_ENDPOINT_URL": f"http://{nobody}",
                **{"AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1"},
                **{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"},
            }
        )
        expected = (2, f"EndpointConnectionError (no connection to http://{nobody})")
    else:
        env["PYSPARK_PYTHON"] = _no_txntable_python(tmp_path)
        # one attempt per task: retrying an executor image without the package cannot help
        env["PYSPARK_SUBMIT_ARGS"] = "--conf spark.task.maxFailures=1 pyspark-shell"
        expected = (1, "No module named 'txntable'")
    log = sorted(p.name for p in (fragmented / "_delta_log").iterdir())
    files = sorted(str(p) for p in fragmented.rglob("*"))
    code, doc, err = run_job(kind, uri, "--master", master, *JOBS[kind], env=env)
    error = doc.get("error") or ""
    assert code == expected[0], (doc, err[-3000:])
    assert expected[1] in error, (doc, err[-3000:])
    assert "\n" not in error and "\tat " not in error and "Traceback" not in error, error
    assert err.rstrip().splitlines()[-1] == f"error: {error}"
    assert sorted(p.name for p in (fragmented / "_delta_log").iterdir()) == log  # no commit
    assert sorted(str(p) for p in fragmented.rglob("*")) == files


# -- the cluster itself -----------------------------------------------------------------------
def _cluster_process(workdir: Path) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.spark_cluster", str(workdir), "1"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, proc.stderr.read() if proc.stderr else ""
    return proc, json.loads(line)


def _gone(pgids: set[int], within: float = 60.0) -> list[str]:
    deadline = time.monotonic() + within
    while (alive := cluster_support.processes_in(pgids)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive


def test_nothing_survives_ctrl_c_or_a_killed_parent(tmp_path: Path) -> None:
    """Two clusters (one worker each) in child processes: Ctrl-C stops the first, whose JVMs
    are then gone; SIGKILL ends the second's parent, and its JVMs follow (PR_SET_PDEATHSIG)."""
    started: list[tuple[subprocess.Popen[str], set[int]]] = []
    try:
        interrupted, first = _cluster_process(tmp_path / "interrupted")
        started.append((interrupted, set(first["pgids"])))
        killed, second = _cluster_process(tmp_path / "killed")
        started.append((killed, set(second["pgids"])))
        groups = [pgids for _, pgids in started]
        assert all(len(g) == 2 and cluster_support.processes_in(g) for g in groups)
        interrupted.send_signal(signal.SIGINT)
        out, err = interrupted.communicate(timeout=60)
        assert interrupted.returncode == 0 and '"stopped": true' in out, err[-2000:]
        assert cluster_support.processes_in(groups[0]) == []
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(timeout=10)
        assert _gone(groups[1]) == []
    finally:  # a failed assertion must not leave the clusters' JVMs running
        for proc, pgids in started:
            proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):  # keep the test's own failure
                proc.wait(timeout=10)
            for line in cluster_support.processes_in(pgids):
                if str(tmp_path) in line:  # ours still (the JVMs' class path names it)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(line.split()[0]), signal.SIGKILL)


def test_a_failed_start_stops_what_it_started(tmp_path: Path) -> None:
    """The master is up when the worker refuses its command line and exits: the start fails
    with the worker's log, and the master it had started is stopped."""
    with pytest.raises(cluster_support.ClusterStartError, match="worker-0 exited") as failed:
        cluster_support.start(tmp_path / "bad", workers=1, worker_options=["--no-such-option"])
    assert "Usage: Worker" in str(failed.value)  # its log, in the message
    assert len(failed.value.pgids) == 2  # the master and the worker
    assert cluster_support.processes_in(failed.value.pgids) == []
