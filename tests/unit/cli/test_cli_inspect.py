"""``txntable inspect``: the summary, the JSON document, and one-line errors (run in-process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests import deltagen as g
from tests.conftest import TESTDATA, reference_tables
from txntable.cli import inspect_cmd
from txntable.cli.main import main
from txntable.engine import EngineError
from txntable.engine.checkpoint.write import write_checkpoint
from txntable.engine.table import Table


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def inspect_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = run(capsys, "inspect", *argv, "--json")
    assert (code, err) == (0, "")
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_json_document_of_a_partitioned_table(capsys: pytest.CaptureFixture[str]) -> None:
    path = TESTDATA / "delta-0.8.0-null-partition"
    doc = inspect_json(capsys, str(path))
    assert doc["version"] == 0
    assert doc["protocol"] == {
        "minReaderVersion": 1,
        "minWriterVersion": 2,
        "readerFeatures": None,
        "writerFeatures": None,
    }
    meta = doc["metadata"]
    assert meta["id"] == "4c831cf5-cd89-40af-9828-c1de38c23b2a"
    assert meta["partitionColumns"] == ["k"]
    assert meta["configuration"] == {}
    assert json.loads(meta["schemaString"])["type"] == "struct"
    assert doc["numFiles"] == len(doc["files"]) == 2
    assert doc["sizeBytes"] == sum(f["size"] for f in doc["files"])
    by_value = {f["partitionValues"]["k"]: f for f in doc["files"]}
    assert set(by_value) == {"A", None}
    for f in doc["files"]:
        assert set(f) >= {"path", "uri", "size", "partitionValues", "deletionVector"}
        assert Path(f["uri"]).is_file()
        assert Path(f["uri"]).stat().st_size == f["size"]
        assert f["deletionVector"] is None


def test_json_document_shows_deletion_vectors_and_features(
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = inspect_json(capsys, str(TESTDATA / "table-with-dv-small"))
    assert doc["protocol"]["readerFeatures"] == ["deletionVectors"]
    assert doc["protocol"]["writerFeatures"] == ["deletionVectors"]
    (only,) = doc["files"]
    assert only["deletionVector"]["storageType"] == "u"
    assert only["deletionVector"]["cardinality"] == 2


def test_time_travel_and_file_uri(capsys: pytest.CaptureFixture[str]) -> None:
    path = TESTDATA / "simple_table"
    latest = inspect_json(capsys, f"file://{path}")
    older = inspect_json(capsys, str(path), "--version", "1")
    assert (latest["version"], older["version"]) == (4, 1)
    assert latest["metadata"]["id"] == older["metadata"]["id"]
    assert latest["numFiles"] == 5


def test_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "inspect", str(TESTDATA / "delta-0.8.0-partitioned"), "--max-files", "2"
    )
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[1].split() == ["version", "0"]
    assert "partitions year, month, day" in out
    assert "files      6 (" in out
    assert lines[-1].strip() == "... 4 more"
    assert sum(1 for line in lines if ".parquet" in line) == 2


def test_summary_shows_null_partitions_as_null(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "inspect", str(TESTDATA / "delta-0.8.0-null-partition"))
    assert code == 0
    assert "[k=null]" in out
    assert "[k=A]" in out


def _corrupt(tmp_path: Path) -> Path:
    table = g.simple_log(tmp_path / "corrupt", 2)
    (table / "_delta_log" / f"{2:020d}.json").write_text('{"add": {broken\n')
    return table


def _not_a_table(tmp_path: Path) -> Path:
    (tmp_path / "empty").mkdir()
    return tmp_path / "empty"


def _file(tmp_path: Path) -> Path:
    (tmp_path / "f.txt").write_text("x")
    return tmp_path / "f.txt"


FAILURES = {
    "missing-dir": (lambda tmp: tmp / "does-not-exist", [], "no such directory"),
    "not-a-table": (_not_a_table, [], "no Delta table"),
    "a-file": (_file, [], "error"),
    "unsupported": (
        lambda tmp: TESTDATA / "simple_table_features",
        [],
        "reader protocol version 5",
    ),
    "corrupt-log": (_corrupt, [], "00000000000000000002.json"),
    "version-too-new": (lambda tmp: TESTDATA / "simple_table", ["--version", "9"], "version 9"),
    "negative-version": (
        lambda tmp: TESTDATA / "simple_table",
        ["--version", "-1"],
        "must be at least 0",
    ),
}


@pytest.mark.parametrize("case", sorted(FAILURES))
@pytest.mark.parametrize("as_json", [False, True])
def test_expected_failures_are_one_error_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str, as_json: bool
) -> None:
    make, extra, fragment = FAILURES[case]
    argv = ["inspect", str(make(tmp_path)), *extra] + (["--json"] if as_json else [])
    code, out, err = run(capsys, *argv)
    assert code != 0
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert fragment in lines[0]
    assert "Traceback" not in err


def _fragmented(path: Path) -> Path:
    """A table partitioned by ``p`` with 3 files in a, 2 in b, 1 in c, and a checkpoint at v4."""
    schema = pa.schema([("id", pa.int64()), ("p", pa.string()), ("tags", pa.list_(pa.string()))])
    table = Table.create(str(path), schema, partition_by=["p"])
    for part in ("a", "b", "a", "c", "a", "b"):
        table.append(pa.table({"id": [1, 2], "p": [part, part], "tags": [["x"], []]}, schema))
        if table.snapshot().version == 4:
            write_checkpoint(table.snapshot(), part_size=1)  # a multi-part checkpoint
    return path


def _on_disk(path: Path, partition: str) -> list[int]:
    return [f.stat().st_size for f in (path / partition).glob("*.parquet")]


def test_json_has_schema_checkpoint_and_small_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _fragmented(tmp_path / "t")
    doc = inspect_json(capsys, str(path))
    assert doc["schema"] == [
        {"name": "id", "type": "long", "nullable": True, "partition": False},
        {"name": "p", "type": "string", "nullable": True, "partition": True},
        {"name": "tags", "type": "array<string>", "nullable": True, "partition": False},
    ]
    parts = sorted((path / "_delta_log").glob("00000000000000000004.checkpoint.*.parquet"))
    assert len(parts) > 1
    assert doc["checkpoint"] == {
        "version": 4,
        "kind": "checkpoint-part",
        "parts": len(parts),
        "sizeBytes": sum(p.stat().st_size for p in parts),
        "commitsSince": 2,
    }
    small = doc["smallFiles"]
    sizes = {p: _on_disk(path, f"p={p}") for p in "abc"}
    assert small["below"] == 128 * 2**20
    assert (small["files"], small["bytes"]) == (6, sum(map(sum, sizes.values())))
    assert small["partitions"] == 3
    assert small["top"] == [
        {"partition": f"p={p}", "files": len(sizes[p]), "bytes": sum(sizes[p])} for p in "abc"
    ]


def test_small_below_counts_only_files_under_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _fragmented(tmp_path / "t")
    cut = min(min(_on_disk(path, f"p={p}")) for p in "abc")  # strictly below: none is small
    assert inspect_json(capsys, str(path), "--small-below", str(cut))["smallFiles"]["files"] == 0
    code, _out, err = run(capsys, "inspect", str(path), "--small-below", "64MB")
    assert code == 2 and "64Mi" in err


def test_summary_shows_schema_checkpoint_and_small_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _fragmented(tmp_path / "t")
    code, out, _ = run(capsys, "inspect", str(path))
    assert code == 0
    assert "columns    id long, p string (partition), tags array<string>" in out
    assert "checkpoint version 4 (2 commits since), " in out
    assert "small      6 files under 128.0 MiB (" in out
    assert "  p=a: 3 files (" in out.split("small", 1)[1]
    bare = tmp_path / "bare"
    Table.create(str(bare), pa.schema([("id", pa.int64())]))
    _code, out, _ = run(capsys, "inspect", str(bare))
    assert "checkpoint none (1 commit since the start)" in out
    assert "small      0 files under 128.0 MiB" in out


@pytest.mark.parametrize("name", reference_tables())
def test_the_streamed_document_is_what_one_dumps_would_print(
    name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--json`` writes the files a batch at a time; with batches of 2 rows every reference
    table (partitions, deletion vectors, encoded paths) must print byte for byte what
    ``print(json.dumps(describe(snapshot)))`` prints, and the summary the same lines."""
    try:
        snapshot = Table.open(str(TESTDATA / name)).snapshot()
    except EngineError:  # refused before anything is written: no part of a document
        code, out, err = run(capsys, "inspect", str(TESTDATA / name), "--json")
        assert code != 0 and '"files"' not in out and err.startswith("error: "), (out, err)
        return
    whole = json.dumps(inspect_cmd.describe(snapshot), ensure_ascii=False) + "\n"
    monkeypatch.setattr(inspect_cmd, "BATCH_ROWS", 2)
    code, out, err = run(capsys, "inspect", str(TESTDATA / name), "--json")
    assert (code, err, out) == (0, "", whole)
    assert json.loads(out)["numFiles"] == len(json.loads(out)["files"])
    limited = inspect_cmd.describe(snapshot, max_files=3)
    assert limited["files"] == json.loads(whole)["files"][:3]
