"""A killed OPTIMIZE job (SIGKILL mid-run) leaves a readable table that references no partial
file, and the next run finishes the work.

The job commits one bin per commit (``--commit-every 1``) over many partitions, and is killed as
soon as its first commit is visible, while later bins are being written. Whatever it left on
disk (files of uncommitted bins, possibly half-written) is garbage no commit refers to.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.integration.optimize_helpers import batch, rows_multiset

pytestmark = pytest.mark.integration

PARTITIONS = 24


def wide_table(path: Path) -> Path:
    for i in range(6):
        write_deltalake(
            str(path),
            batch(i * 6000, 6000, partitions=PARTITIONS),
            mode="append",
            partition_by=["p"],
        )
    return path


def commits(path: Path) -> list[str]:
    return sorted(n for n in os.listdir(path / "_delta_log") if n.endswith(".json"))


def run_job(path: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "txntable.jobs.optimize",
            str(path),
            "--executor",
            "arrow",
            "--workers",
            "1",
            "--commit-every",
            "1",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigkill_mid_run_then_rerun(tmp_path: Path) -> None:
    path = wide_table(tmp_path / "t")
    before = rows_multiset(path)
    start = len(commits(path))
    job = run_job(path)
    deadline = time.monotonic() + 120
    while len(commits(path)) == start and time.monotonic() < deadline and job.poll() is None:
        time.sleep(0.002)
    job.send_signal(signal.SIGKILL)
    job.communicate()
    assert job.returncode == -signal.SIGKILL
    landed = len(commits(path)) - start
    assert 1 <= landed < PARTITIONS + 1, "the kill did not land mid-run"

    # readable, same rows, and every referenced file is a complete Parquet file
    dt = DeltaTable(str(path))
    assert rows_multiset(path) == before
    for uri in dt.file_uris():
        pq.read_metadata(uri)  # a partial file has no valid footer
    on_disk = {p.resolve() for p in path.rglob("*.parquet") if "_delta_log" not in p.parts}
    referenced = {Path(u).resolve() for u in dt.file_uris()}
    assert referenced <= on_disk

    done = run_job(path, "--json")
    out, err = done.communicate(timeout=120)
    assert done.returncode == 0, err[-2000:]
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["error"] is None and doc["binsCommitted"] >= 1
    assert doc["binsCommitted"] + landed >= PARTITIONS
    counts = DeltaTable(str(path)).get_add_actions(flatten=True)
    assert counts.num_rows == PARTITIONS + 1  # one file per partition (incl. the null one)
    assert rows_multiset(path) == before
