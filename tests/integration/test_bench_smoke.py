"""The read-path benchmark still runs end to end (tiny tables, one repetition, no timing checks).

It exercises the log generator, the delta-rs checkpoint it asks for, both engines and the peak
RSS subprocesses, so ``make bench`` cannot rot unnoticed between full runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bench import read_snapshot
from bench.gen import TableSpec, table_path
from bench.run import replace_section

pytestmark = pytest.mark.integration


def test_read_benchmark_runs_and_engines_agree(tmp_path: Path) -> None:
    result = read_snapshot.run_specs(read_snapshot.TINY, reps=1, out_dir=tmp_path)
    expected = {
        "checkpoint": read_snapshot.TINY["checkpoint"].active_files,
        "replay": read_snapshot.TINY["replay"].active_files,
        "refresh": read_snapshot.TINY["checkpoint"].active_files,
    }
    for row, files in expected.items():
        measured = result["rows"][row]
        assert measured["files_ours"] == measured["files_theirs"] == [files], row
        assert measured["ours_s"] > 0 and measured["theirs_s"] > 0
    assert result["same_uris"] == dict.fromkeys(read_snapshot.TINY, True)
    tiny = {"long_tail": read_snapshot.TINY["long_tail"].active_files, **expected}
    for case in ("checkpoint", "long_tail", "replay"):
        for engine in ("ours", "ours_system", "theirs"):
            memory = result["rss"][case][engine]
            assert memory["files"] == tiny[case], (case, engine)
            assert memory["peak_mb"] >= memory["after_import_mb"] > 0
    markdown = read_snapshot.render(result)
    assert "| checkpoint |" in markdown and "ratio, system allocator" in markdown


def test_generated_log_is_what_delta_rs_reads(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    spec = TableSpec(commits=30, active_files=300, remove_every=4, removes_per=3, tail=2)
    root = table_path(spec, tmp_path)
    assert table_path(spec, tmp_path) == root  # cached: the second call reuses it
    table = DeltaTable(str(root))
    assert table.version() == spec.last_version
    assert len(table.file_uris()) == spec.active_files
    log = root / "_delta_log"
    assert (log / f"{spec.checkpoint_version:020d}.checkpoint.parquet").stat().st_size > 0
    removes = sum(p.read_text().count('{"remove":') for p in log.glob("*.json"))
    assert removes == len(range(4, spec.commits, 4)) * spec.removes_per


def test_run_rewrites_only_its_own_section() -> None:
    text = "# Benchmarks\n\nprose\n"
    once = replace_section(text, "x", "figures 1\n")
    assert once.startswith(text.rstrip("\n")) and "figures 1" in once
    twice = replace_section(once + "\nmore prose\n", "x", "figures 2\n")
    assert "figures 1" not in twice and "figures 2" in twice and "more prose" in twice
    assert twice.count("<!-- bench:x:begin -->") == 1


def test_vacuum_benchmark_runs_and_both_engines_delete_the_same_files() -> None:
    from bench import vacuum

    result = vacuum.run(quick=True)
    assert result["same_files_remain"]
    for engine in ("ours", "ours_cli", "deltalake"):
        assert result["samples"][engine][0]["deleted"] == result["deleted_expected"]
        assert result["samples"][engine][0]["peak_mb"] > 0
    assert "| ours |" in vacuum.render(result) and "| ours_cli |" in vacuum.render(result)


def test_scale_benchmark_runs_the_controller_and_counts_its_requests(tmp_path: Path) -> None:
    from bench import scale
    from bench.controller_memory import TINY

    row = scale.measure(4, 2.0, tmp_path, big=1, big_spec=TINY, window_intervals=2, lag_sample=4)
    assert (row["tables"], row["big_tables"], row["big_files"]) == (4, 1, TINY.active_files)
    # every table was observed, so each had its status patched at least once, counted by verb
    patches = sum(n for what, n in row["warmup_requests"].items() if what.startswith("patch "))
    assert patches >= 4, row["warmup_requests"]
    assert all(len(what.split()) == 2 for what in row["requests"]), row["requests"]
    assert len(row["lag_s"]) == 4 and len(row["lag_big_s"]) == 1
    assert row["rss_mb"] > 0 and row["peak_rss_mb"] >= row["rss_mb"] and row["cpu_s"] >= 0
    markdown = scale.render(
        {
            "rows": [row],
            "window_intervals": 2,
            "machine": scale._machine(),
            "measured": "now",
            "code": "abc",
            "wall_s": 1.0,
        }
    )
    assert f"| 4 (1 of {TINY.active_files:,} files) |" in markdown


def test_inspect_peer_prints_the_document_ours_prints(tmp_path: Path) -> None:
    """The deltalake script ``bench.inspect_peer`` compares us with lists the same files, with
    the same sizes and partition values, as ``txntable inspect --json``."""
    import json

    from bench import inspect_peer
    from bench.process import run_cli, run_script

    root = table_path(TableSpec(commits=30, active_files=300, tail=2), tmp_path)
    ours = json.loads(run_cli(["inspect", "--json", str(root)])["stdout"])
    theirs = json.loads(run_script(inspect_peer.PEER_DOCUMENT, [str(root)])["stdout"])

    def files(doc: dict) -> dict:
        return {f["path"]: (f["size"], f["partitionValues"]) for f in doc["files"]}

    assert len(ours["files"]) == 300
    assert files(ours) == files(theirs)
    assert (ours["version"], ours["numFiles"]) == (theirs["version"], theirs["numFiles"])
    markdown = inspect_peer.render(inspect_peer.measure(root, rounds=1))
    assert markdown.count("\n| ") == 4 and "| ours |" in markdown
