"""``txntable inspect``: the summary, the JSON document, and one-line errors (run in-process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests import deltagen as g
from tests.conftest import TESTDATA
from txntable.cli.main import main


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
    "negative-version": (lambda tmp: TESTDATA / "simple_table", ["--version", "-1"], ">= 0"),
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
