"""Hadoop reads every file of a delta-spark table after each of our maintenance steps (issue 33).

delta-spark writes ``file:`` tables through Hadoop's ``LocalFileSystem``, which keeps a checksum
file ``.<name>.crc`` beside each file, deletes it with the file, and refuses to read a file that
no longer matches it (``ChecksumException``). Our checkpoint used to replace the checkpoint
delta-spark had written for the same version, and its ``_last_checkpoint``, leaving delta-spark's
checksums beside our bytes: Hadoop refused both, and delta-spark silently started from an older
checkpoint (or failed); log cleanup and VACUUM deleted files and left their checksums.

One table per kind of checkpoint delta-spark writes at the version we then checkpoint: classic,
multi-part (``partSize`` 1) and V2 (``delta.checkpointPolicy = v2``); delta-spark also
checkpoints on its own every 3 commits. Each goes through our ``checkpoint``, log ``cleanup``
(the log aged 40 days) and ``vacuum`` (zero retention, after a delta-spark DELETE removed a
file), as a user runs them. After each step, Hadoop reads every file of the table in
delta-spark's JVM, no checksum file is left without its file, every data file delta-spark wrote
that is still there keeps its checksum, and delta-spark loads the latest version from the
newest checkpoint and reads the rows it read before. The steps run once, in a module fixture
that records what each found, so each test fails on its own step; the figures are written to
``deltaspark-checksums.json`` in pytest's base temporary directory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.deltaspark.client import DeltaSpark, DeltaSparkError
from tests.deltaspark.support import CliResult, age_log, checksum_files, hadoop_refusals, txntable

pytestmark = [pytest.mark.integration, pytest.mark.deltaspark, pytest.mark.timeout(1200)]

KINDS = ("classic", "multipart", "v2")
#: the version delta-spark and then we checkpoint (delta-spark's own checkpoint is at 3)
LATEST = 5


@dataclass
class Step:
    """What one maintenance step left."""

    code: int
    doc: dict[str, Any]
    #: files Hadoop refused to read, with why
    refused: dict[str, str]
    #: checksum files whose file is gone
    orphans: list[str]
    #: data files delta-spark wrote (all with a checksum) that lost theirs
    unchecked: list[str]
    #: delta-spark's version and the checkpoint it started from, or its error
    segment: dict[str, Any]
    #: (count, digest) delta-spark reads at the latest version, or its error
    rows: tuple[int, str] | str
    stderr: str = field(repr=False, default="")


def _spark_checkpoint(ds: DeltaSpark, path: Path, kind: str) -> None:
    if kind != "multipart":
        ds.call("checkpoint", path=str(path))
        return
    ds.sql("SET spark.databricks.delta.checkpoint.partSize = 1")
    try:
        ds.call("checkpoint", path=str(path))
    finally:
        ds.sql("RESET spark.databricks.delta.checkpoint.partSize")


def _data_files(path: Path) -> list[Path]:
    return [
        p
        for p in path.rglob("*")
        if p.is_file() and "_delta_log" not in p.parts and not p.name.startswith((".", "_"))
    ]


def _after(ds: DeltaSpark, path: Path, done: CliResult) -> Step:
    unchecked = [
        str(p.relative_to(path))
        for p in _data_files(path)
        if not p.with_name(f".{p.name}.crc").exists()
    ]
    try:
        segment = {
            k: v
            for k, v in ds.call("log_segment", path=str(path)).items()
            if k in ("version", "checkpointVersion")
        }
    except DeltaSparkError as exc:
        segment = {"error": str(exc)[:1000]}
    rows: tuple[int, str] | str
    try:
        got = ds.read(path)
        rows = (got["count"], got["digest"])
    except DeltaSparkError as exc:
        rows = str(exc)[:1000]
    return Step(
        done.code,
        done.doc or {},
        hadoop_refusals(ds, path),
        checksum_files(path)[1],
        unchecked,
        segment,
        rows,
        done.stderr[-2000:],
    )


def _maintain(ds: DeltaSpark, path: Path, kind: str) -> tuple[tuple[int, str], dict[str, Step]]:
    ref = f"delta.`{path}`"
    props = "'delta.checkpointInterval' = '3', 'delta.enableDeletionVectors' = 'false'"
    if kind == "v2":
        props += ", 'delta.checkpointPolicy' = 'v2'"
    ds.sql(
        f"CREATE TABLE {ref} (id BIGINT, g STRING) USING delta PARTITIONED BY (g) "
        f"TBLPROPERTIES ({props})"
    )
    for i in range(3):
        ds.sql(f"INSERT INTO {ref} VALUES ({i}, 'a'), ({10 + i}, 'b')")  # delta-spark: cp 3
    ds.sql(f"DELETE FROM {ref} WHERE id = 1")  # version 4 removes a file for VACUUM
    ds.sql(f"INSERT INTO {ref} VALUES (20, 'a')")
    _spark_checkpoint(ds, path, kind)
    assert ds.call("log_segment", path=str(path))["checkpointVersion"] == LATEST
    got = ds.read(path)
    expected = (got["count"], got["digest"])
    steps = {"checkpoint": _after(ds, path, txntable("checkpoint", str(path), check=False))}
    age_log(path, days=40)
    steps["cleanup"] = _after(ds, path, txntable("cleanup", str(path), check=False))
    vacuum = txntable("vacuum", str(path), "--retention", "0 hours", "--force", check=False)
    steps["vacuum"] = _after(ds, path, vacuum)
    return expected, steps


@pytest.fixture(scope="module")
def maintained(
    delta_spark: DeltaSpark, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[tuple[int, str], dict[str, Step]]]:
    root = tmp_path_factory.mktemp("checksums")
    done = {kind: _maintain(delta_spark, root / kind, kind) for kind in KINDS}
    figures = {
        kind: {
            name: {
                "refused": sorted(step.refused),
                "orphans": len(step.orphans),
                "segment": step.segment,
                "rowsAsBefore": step.rows == expected,
            }
            for name, step in steps.items()
        }
        for kind, (expected, steps) in done.items()
    }
    out = tmp_path_factory.getbasetemp() / "deltaspark-checksums.json"
    out.write_text(json.dumps(figures, indent=1))
    return done


def _readable(step: Step, expected: tuple[int, str]) -> None:
    assert not step.orphans, step.orphans
    assert not step.unchecked, step.unchecked
    assert not step.refused, step.refused
    assert step.segment.get("checkpointVersion") == LATEST, step.segment
    assert step.rows == expected


@pytest.mark.parametrize("kind", KINDS)
def test_our_checkpoint_keeps_delta_sparks(maintained: Any, kind: str) -> None:
    expected, steps = maintained[kind]
    step = steps["checkpoint"]
    assert step.code == 0, step.stderr
    _readable(step, expected)
    assert step.doc["version"] == LATEST and step.doc.get("existing") is True, step.doc
    assert step.doc["hintWritten"] is False, step.doc


@pytest.mark.parametrize("kind", KINDS)
def test_cleanup_deletes_each_checksum_with_its_file(maintained: Any, kind: str) -> None:
    expected, steps = maintained[kind]
    step = steps["cleanup"]
    assert step.code == 0, step.stderr
    # commits 0-4, delta-spark's checkpoint 3 and version checksums 0-4 go
    assert step.doc["checkpointVersion"] == LATEST and step.doc["numDeleted"] >= 11, step.doc
    _readable(step, expected)


@pytest.mark.parametrize("kind", KINDS)
def test_vacuum_deletes_each_checksum_with_its_file(maintained: Any, kind: str) -> None:
    expected, steps = maintained[kind]
    step = steps["vacuum"]
    assert step.code == 0, step.stderr
    assert step.doc["numDeleted"] >= 1, step.doc
    assert not [f for f in step.doc["files"] if f.endswith(".crc")], step.doc
    _readable(step, expected)
