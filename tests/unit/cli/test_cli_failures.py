"""What ``txntable`` prints when things go wrong or are only pretended (issue 23, items 12, 14
and 16): one ``error:`` line and no traceback for a log it may not write, nothing at all when
its reader closes the pipe, and text output that says what docs/optimize.md says it does.

* ``optimize`` on a ``_delta_log`` it may not write printed a ~40-line traceback and left the
  bins' new data files behind (the commit certainly failed: they are deleted now).
* ``inspect ... | head -1`` printed ``error: Broken pipe`` and exited 1; a reader that stops
  reading is not an error (quiet, 141 as the shell reports a Unix tool ended by SIGPIPE).
* ``--dry-run`` printed one line, not every bin with its files; ``--vacuum --vacuum-dry-run``
  said nothing about what would be deleted; a retention below the table's told ``optimize``'s
  user to pass ``--force``, which ``optimize`` does not have.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from tests.faults import read_only_dir
from txntable.cli.main import EXIT_ENGINE_ERROR, main
from txntable.engine import Table

EXIT_PIPE_CLOSED = 141  # 128 + SIGPIPE, what the shell reports for a tool SIGPIPE ended
SCHEMA = pa.schema([("id", pa.int64()), ("d", pa.string())])


def _fragmented(path: Path, appends: int = 6, properties: dict[str, str] | None = None) -> str:
    table = Table.create(str(path), SCHEMA, ["d"], properties)
    for i in range(appends):
        table.append(pa.table({"id": [i], "d": ["a" if i % 2 else "b"]}))
    return str(path)


def _parquet(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*.parquet"))


def test_optimize_on_a_log_it_may_not_write_is_one_line_and_leaves_no_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    location = _fragmented(tmp_path / "t")
    before = _parquet(tmp_path / "t")
    with read_only_dir(tmp_path / "t" / "_delta_log"):
        code = main(["optimize", location, "--executor", "arrow"])
        after = _parquet(tmp_path / "t")
    assert code == EXIT_ENGINE_ERROR
    err = capsys.readouterr().err
    assert "Traceback" not in err and "retrying" not in err
    (line,) = err.splitlines()
    assert line.startswith("error: ") and "_delta_log/00000000000000000007.json" in line
    # what logging would print on the terminal: no retry warnings, no logged traceback
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert after == before  # the rewritten bins' files were deleted: the commit never landed
    assert Table.open(location).version() == 6


def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    """``txntable inspect T | head -1`` on a table whose listing outgrows the pipe's buffer."""
    table = Table.create(str(tmp_path / "t"), SCHEMA, ["d"])
    n = 1000  # ~100 KB of listing: more than a pipe buffers
    table.append(pa.table({"id": list(range(n)), "d": [f"p{i:05d}" for i in range(n)]}))
    for extra in ([], ["--json"]):
        inspect = [sys.executable, "-m", "txntable.cli.main", "inspect", str(tmp_path / "t")]
        proc = subprocess.Popen(
            [*inspect, "--max-files", str(n), *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.read(10)  # what head -c 10 reads, then it exits
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == EXIT_PIPE_CLOSED, err
        assert err == ""


def test_a_dry_run_lists_every_bin_with_its_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = _fragmented(tmp_path / "t")
    assert main(["optimize", location, "--executor", "arrow", "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert main(["optimize", location, "--executor", "arrow", "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert plan["numBins"] == 2
    for b in plan["bins"]:
        assert f"bin {b['binId']} [d={b['partitionValues']['d']}]" in text
        for path in b["files"]:
            assert f"    {path}\n" in text
    assert Table.open(location).version() == 6


def test_vacuum_dry_run_says_what_would_be_deleted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``optimize --vacuum --vacuum-dry-run`` compacts, then lists the files its VACUUM would
    delete (the compacted inputs, with a retention of zero) and deletes none of them."""
    zero = {"delta.deletedFileRetentionDuration": "interval 0 hours"}
    location = _fragmented(tmp_path / "t", properties=zero)
    before = set(_parquet(tmp_path / "t"))
    argv = ["optimize", location, "--executor", "arrow", "--vacuum", "--vacuum-dry-run"]
    assert main([*argv, "--vacuum-retention", "0 hours"]) == 0
    out = capsys.readouterr().out.splitlines()
    (summary,) = [line for line in out if line.startswith("vacuum: ")]
    assert summary.startswith("vacuum: would delete 6 files (")
    listed = {line.strip() for line in out[out.index(summary) + 1 :]}
    assert listed == before  # every compacted input, each named
    assert before <= set(_parquet(tmp_path / "t"))  # and still there


def test_a_too_short_retention_names_a_flag_the_command_has(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = _fragmented(tmp_path / "t")
    argv = ["optimize", location, "--executor", "arrow", "--vacuum"]
    assert main([*argv, "--vacuum-retention", "1h"]) == EXIT_ENGINE_ERROR
    err = capsys.readouterr().err
    assert "--vacuum-retention" in err and "at least 7d" in err
    assert "(--force)" not in err and "txntable vacuum --force" in err
    assert main(["vacuum", location, "--retention", "1 hour"]) == EXIT_ENGINE_ERROR
    err = capsys.readouterr().err
    assert "pass --force" in err and "--vacuum-retention" not in err
