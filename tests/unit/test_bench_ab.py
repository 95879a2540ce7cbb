"""bench.ab runs each module in both checkouts' own processes, alternating who goes first, and its
summary compares what each side returned (two fake checkouts, each a ``bench`` package whose
module says which checkout it ran in)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from bench import ab

FIG = """
import os, sys
def run(quick):
    side = os.path.basename(os.getcwd())
    if side == "b" and os.environ.get("FAIL_B"):
        raise SystemExit("b refuses")
    return {"seconds": {"a": 1.0, "b": 2.0}[side], "quick": int(quick), "label": side,
            "ok": True, "machine": {"cores": 2}, "rows": [{"files": 7}]}
"""


def _checkout(root: Path, name: str, modules: dict[str, str]) -> Path:
    path = root / name
    (path / ".venv" / "bin").mkdir(parents=True)
    (path / ".venv" / "bin" / "python").symlink_to(sys.executable)
    (path / "bench").mkdir()
    (path / "bench" / "__init__.py").write_text("")
    for module, text in modules.items():
        (path / "bench" / f"{module}.py").write_text(text)
    return path


def test_runs_alternate_and_the_summary_compares_the_sides(tmp_path: Path) -> None:
    sides = {
        "A": _checkout(tmp_path, "a", {"fig": FIG}),
        "B": _checkout(tmp_path, "b", {"fig": FIG, "only_b": FIG}),
    }
    modules = [("bench.fig", True), ("bench.only_b", False)]
    runs = ab.measure(sides, modules, rounds=3, timeout=120, json_path=tmp_path / "runs.json")
    assert [r.side for r in runs] == ["A", "B", "B", "A", "A", "B"]  # bench.only_b: not run
    assert {r.side: r.figures["seconds"] for r in runs} == {"A": 1.0, "B": 2.0}
    # numbers only, by path; labels, checks and the machine's description are not figures
    # and the memory of the child's process tree, compared like any figure
    assert set(runs[0].figures) == {"seconds", "quick", "rows.0.files", "process_tree_peak_mb"}
    assert runs[0].figures["quick"] == 1.0
    assert runs[0].figures["process_tree_peak_mb"] > 0  # sampled while it ran
    text = ab.report(*_args(ab.load(tmp_path / "runs.json")))
    assert "| seconds | 1 | 2 | 2.00 | 1-1 | 2-2 | **no** |" in text
    assert "quick=1" in text and "rows.0.files=7" in text  # the same everywhere: listed once
    assert "bench.only_b: skipped" in text


def test_a_failing_run_is_reported_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAIL_B", "1")
    sides = {
        "A": _checkout(tmp_path, "a", {"fig": FIG}),
        "B": _checkout(tmp_path, "b", {"fig": FIG}),
    }
    runs = ab.measure(sides, [("bench.fig", False)], rounds=1, timeout=120)
    assert [bool(r.error) for r in runs] == [False, True]
    assert "b refuses" in runs[1].error
    assert "failed: B round 1" in ab.report(runs, sides, [("bench.fig", False)])


def _args(
    saved: tuple[dict[str, Path], list[tuple[str, bool]], list[ab.Run]],
) -> tuple[list[ab.Run], dict[str, Path], list[tuple[str, bool]]]:
    sides, modules, runs = saved
    return runs, sides, modules
