"""The command line on bad days: ``txntable demo`` never deletes or overwrites what it did not
create (it used to rmtree whatever location its manifests named), its deltalake read-back cannot
abort it, and an OS error is one line and exit 1, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from txntable.cli.demo_cmd import DEMO_MARKER, check_claimable, claim
from txntable.cli.errors import CliError
from txntable.cli.main import main as cli
from txntable.engine.table import Table

MANIFEST = """apiVersion: txntable.io/v1alpha1
kind: TxnTable
metadata: {{name: events, namespace: default}}
spec: {{location: {location}}}
"""


def test_demo_refuses_a_table_it_did_not_create(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = tmp_path / "precious"
    table = Table.create(str(location), pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1, 2, 3]}))
    before = sorted(p.name for p in location.rglob("*"))
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "t.yaml").write_text(MANIFEST.format(location=location))
    code = cli(["demo", "--manifests", str(manifests), "--runs-dir", str(tmp_path / "runs")])
    assert code == 2
    err = capsys.readouterr().err
    assert "not created by txntable demo" in err and str(location) in err
    assert sorted(p.name for p in location.rglob("*")) == before
    assert Table.open(str(location)).snapshot().version == 1
    assert not (tmp_path / "runs").exists()  # nothing created either


def test_a_foreign_runs_dir_is_refused_before_anything_is_deleted(tmp_path: Path) -> None:
    previous = tmp_path / "table"
    claim(previous)
    foreign = tmp_path / "runs"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    check_claimable(previous, "table")
    with pytest.raises(CliError, match="not created by txntable demo"):
        check_claimable(foreign, "--runs-dir")
    assert (foreign / "keep.txt").read_text() == "mine"


def test_a_previous_demo_table_is_replaced(tmp_path: Path) -> None:
    location = tmp_path / "events"
    claim(location)
    Table.create(str(location), pa.schema([("id", pa.int64())]))
    check_claimable(location, "table")
    claim(location)
    assert sorted(p.name for p in location.iterdir()) == [DEMO_MARKER]


def test_rows_read_back_survive_an_abort_at_interpreter_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """deltalake can abort the interpreter at exit after a read (exit 134); the demo reads in a
    child, so the count it printed stands and the demo's own exit status is untouched."""
    import txntable.cli.demo_cmd as demo

    monkeypatch.setattr(demo, "_COUNT_ROWS", "import os\nprint(42, flush=True)\nos.abort()\n")
    assert demo._rows_read_by_deltalake(tmp_path) == 42
    monkeypatch.setattr(demo, "_COUNT_ROWS", "import os\nos.abort()\n")
    with pytest.raises(CliError, match="deltalake could not read"):
        demo._rows_read_by_deltalake(tmp_path)


def test_an_os_error_is_one_line_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A permission error while writing a checkpoint printed a traceback."""
    import os

    table = Table.create(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1]}))

    def denied(src: str, dst: str) -> None:
        raise PermissionError(13, "Permission denied", dst)

    # the checkpoint's Parquet file is created with a hard link (never over an existing one)
    monkeypatch.setattr(os, "link", denied)
    assert cli(["checkpoint", str(tmp_path / "t")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: Permission denied (") and err.count("\n") == 1
    assert "Traceback" not in err


def test_demo_without_deltalake_says_which_extra_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "deltalake" else real(name, *a),
    )
    location = tmp_path / "t"
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "t.yaml").write_text(MANIFEST.format(location=location))
    code = cli(["demo", "--manifests", str(manifests), "--runs-dir", str(tmp_path / "runs")])
    assert code == 2
    assert "txntable[demo]" in capsys.readouterr().err
    assert not location.exists() and not (tmp_path / "runs").exists()
