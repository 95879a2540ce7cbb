"""The exit statuses docs/cli.md promises: a bad flag value is bad usage (2, one ``error:``
line, nothing changed) whether the command or the engine parses it; what the table or its
storage refuses is 1. Runs ``txntable`` in-process on a real table."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from tests.unit.case_ids import readable
from txntable.cli.main import EXIT_ENGINE_ERROR, EXIT_USAGE, main
from txntable.engine import Table


@pytest.fixture
def table(tmp_path: Path) -> str:
    location = str(tmp_path / "t")
    t = Table.create(location, pa.schema([("id", pa.int64()), ("d", pa.string())]), ["d"])
    t.append(pa.table({"id": [1, 2], "d": ["a", "b"]}))
    return location


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["cleanup", "{t}", "--retention", "bogus"], "--retention: 'bogus' is not a duration"),
        (["vacuum", "{t}", "--retention", "7x"], "--retention: '7x': unknown unit 'x'"),
        (["optimize", "{t}", "--executor", "arrow", "--where", "d ((("], "--where"),
        (["optimize", "{t}", "--executor", "arrow", "--where", "id = 1"], "partition columns"),
        (["optimize", "{t}", "--executor", "arrow", "--target-size", "12QQ"], "--target-size"),
        (["inspect", "{t}", "--small-below", "-1"], "--small-below"),
    ],
    ids=readable,
)
def test_a_bad_flag_value_is_bad_usage(
    table: str, args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = Table.open(table).version()
    assert main([a.format(t=table) for a in args]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and says in err[0], err
    assert Table.open(table).version() == before


def test_what_the_table_refuses_is_an_engine_error(
    tmp_path: Path, table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in ("inspect", "checkpoint", "cleanup", "vacuum"):
        assert main([command, str(tmp_path / "nowhere")]) == EXIT_ENGINE_ERROR
        assert capsys.readouterr().err.startswith("error: no such directory")
    # a retention below the table's without --force: VACUUM refuses, nothing deleted
    assert main(["vacuum", table, "--retention", "interval 1 hours"]) == EXIT_ENGINE_ERROR
    assert "--force" in capsys.readouterr().err
