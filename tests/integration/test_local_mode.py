"""``txntable run --local`` on real tables (issue 23, item 17).

* Two TxnTables named ``events`` in namespaces ``a`` (40 commits, checkpointed by its policy)
  and ``b`` (one commit) shared status: ``b`` reported ``a``'s version and checkpoint (the
  controller's per-table state was keyed by a uid both got, ``local-events``).
* ``--json`` printed plain-text ``event ...`` lines among the JSON lines.
* Manifests were read at start-up only: an edit made while it ran (an approval annotation, a
  suspended table, a new table) did nothing until a restart.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.integration.process_support import Job, wait_until
from txntable.cli.main import main
from txntable.engine import Table

pytestmark = pytest.mark.integration

SCHEMA = pa.schema([("id", pa.int64())])
TABLE = """apiVersion: txntable.io/v1alpha1
kind: TxnTable
metadata: {{name: {name}, namespace: {namespace}}}
spec: {{location: {location}, suspend: {suspend}}}
"""
CHECKPOINTS = """apiVersion: txntable.io/v1alpha1
kind: CheckpointPolicy
metadata: {name: checkpoints, namespace: a}
spec: {tableSelector: {}, commitInterval: 10, mode: Inline}
"""


def _table(name: str, namespace: str, location: Path, suspend: bool = False) -> str:
    flag = "true" if suspend else "false"
    return TABLE.format(name=name, namespace=namespace, location=location, suspend=flag)


def _lines(out: str) -> list[dict[str, Any]]:
    docs = []
    for line in out.splitlines():
        try:
            docs.append(json.loads(line))
        except ValueError:
            pytest.fail(f"not a JSON line in --json output: {line!r}")
    return docs


def test_two_tables_named_alike_in_two_namespaces_keep_their_own_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = Table.create(str(tmp_path / "a"), SCHEMA)
    for i in range(40):
        a.append(pa.table({"id": [i]}))
    Table.create(str(tmp_path / "b"), SCHEMA)
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "tables.yaml").write_text(
        _table("events", "a", tmp_path / "a") + "---\n" + _table("events", "b", tmp_path / "b")
    )
    (manifests / "policy.yaml").write_text(CHECKPOINTS)
    argv = ["run", "--local", str(manifests), "--once", "--json", "--no-events"]
    assert main([*argv, "--runs-dir", str(tmp_path / "runs")]) == 0
    docs = _lines(capsys.readouterr().out)
    last = {d["namespace"]: d["status"] for d in docs if "status" in d}
    assert last["a"]["version"] == 40 and last["a"]["lastCheckpointVersion"] == 40
    assert last["b"]["version"] == 0
    assert "lastCheckpointVersion" not in last["b"]
    assert last["b"]["commitsSinceCheckpoint"] == 1
    events = [d for d in docs if "event" in d]  # the inline checkpoint's, as JSON
    assert events and {d["namespace"] for d in events} == {"a"}
    assert {"type", "reason", "message"} <= set(events[0]["event"])


def test_manifests_edited_while_it_runs_are_read_again(tmp_path: Path) -> None:
    Table.create(str(tmp_path / "t"), SCHEMA)
    Table.create(str(tmp_path / "u"), SCHEMA)
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "t.yaml").write_text(_table("t", "default", tmp_path / "t"))
    run = [sys.executable, "-m", "txntable.cli.main", "run", "--local", str(manifests)]
    quick = ["--json", "--no-events", "--interval", "0.5"]
    job = Job([*run, *quick, "--runs-dir", str(tmp_path / "runs")], tmp_path)
    try:

        def statuses() -> dict[str, str]:
            docs = [json.loads(line) for line in job.stdout().splitlines() if line.strip()]
            return {d["table"]: d["status"]["phase"] for d in docs if "status" in d}

        wait_until(lambda: "t" in statuses(), job, timeout=120)
        assert statuses()["t"] != "Suspended"
        # while it runs: suspend t, and add a table u in a file of its own
        (manifests / "t.yaml").write_text(_table("t", "default", tmp_path / "t", suspend=True))
        (manifests / "u.yaml").write_text(_table("u", "default", tmp_path / "u"))
        wait_until(lambda: statuses().get("t") == "Suspended" and "u" in statuses(), job, 120)
        # an invalid edit is refused; the manifests before it stay in force
        bad = TABLE.format(name="u", namespace="default", location=tmp_path / "u", suspend="2")
        (manifests / "u.yaml").write_text(bad)
        wait_until(lambda: "refused" in job.stdout(), job, timeout=120)
        job.interrupt()
        assert job.wait() == 130
    finally:
        job.kill_leftovers()
    assert job.stderr().rstrip().splitlines()[-1] == "error: interrupted"
    docs = _lines(job.stdout())  # JSON lines only, the notes about the manifests included
    (refused,) = [d for d in docs if "refused" in d.get("manifests", "")]
    assert any(
        "u.yaml: TxnTable/default/u: spec.suspend: must be a boolean" in e
        for e in refused["errors"]
    )
