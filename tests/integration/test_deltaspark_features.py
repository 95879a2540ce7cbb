"""Our maintenance on tables delta-spark wrote, one per table feature (issue 21.3).

For each recipe (``deltaspark_features.RECIPES``) delta-spark makes the table, then we run
``txntable checkpoint``, ``txntable optimize`` (arrow executor), ``txntable vacuum`` (retention 0,
``--force``, so it deletes what OPTIMIZE replaced) and ``txntable cleanup`` (the log aged three
days, retention one day) as a user would, and delta-spark reads the table once after the four
steps: it starts from our checkpoint, replays our OPTIMIZE and VACUUM commits, reads the files
VACUUM left, in the log cleanup trimmed. The read must give the rows delta-spark read before we
touched the table, and the feature's own extra query the same answer (row ids and row commit
versions of every row for row tracking; the change data feed, compared before VACUUM and
cleanup, which remove the feed of old commits by design). Then delta-spark's next operations
(an append; for a clustered table its own OPTIMIZE, which must still see its clustering columns)
must work.

A step we refuse must exit 1 naming the feature, with the table directory byte-identical.
``REFUSED`` lists the refusals that are by design (none today: the four checkpoint refusals of
column mapping, type widening and variant were removed by issue 22, and these cells now pass);
any other refusal fails its cell.

The tables are built and maintained three at a time (delta-spark's requests run on its thread
pool, our CLI in subprocesses), once per module; each (feature, step) cell is its own test. The
matrix is also written to ``deltaspark-matrix.json`` in pytest's base temporary directory.
"""

from __future__ import annotations

import json
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.deltaspark.client import DeltaSpark, DeltaSparkError
from tests.deltaspark.support import age_log, txntable
from tests.integration.deltaspark_features import RECIPES, Recipe, fill

# building the matrix (module fixture) takes minutes on two busy cores: past pytest's 600 s default
pytestmark = [pytest.mark.integration, pytest.mark.deltaspark, pytest.mark.timeout(1800)]

STEPS = ("checkpoint", "optimize", "vacuum", "cleanup")
ARGS = {
    "checkpoint": [],
    "optimize": ["--executor", "arrow"],
    "vacuum": ["--retention", "interval 0 hours", "--force"],
    "cleanup": ["--retention", "interval 1 days"],
}

#: (recipe, step) -> why we refuse it, by design
REFUSED: dict[tuple[str, str], str] = {}


class RefusedError(Exception):
    """A step was refused cleanly (exit 1, the feature named, the table unchanged)."""


@dataclass
class Cell:
    code: int | None = None
    error: str = ""
    unchanged: bool | None = None  # for a refusal: the table directory is byte-identical
    read_ok: bool | None = None  # delta-spark read the same rows (and extra) after the step
    detail: str = ""


@dataclass
class FeatureRun:
    recipe: str
    feature: str
    setup_error: str = ""
    cells: dict[str, Cell] = field(default_factory=dict)
    next_ok: bool | None = None
    next_detail: str = ""


def _tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def _read(ds: DeltaSpark, path: Path, recipe: Recipe, extra: bool) -> dict[str, Any]:
    got = {"rows": ds.read(path, columns=recipe.columns)}
    if extra and recipe.extra:
        got["extra"] = ds.call("query", sql=fill(recipe.extra, str(path)))
    return {k: (v["count"], v["digest"]) for k, v in got.items()}


#: what each step reports in its result line, for the matrix
_FIGURES = {
    "checkpoint": ("version", "parts", "numOfAddFiles"),
    "optimize": ("numFilesRemoved", "numFilesAdded", "binsSkipped"),
    "vacuum": ("numDeleted",),
    "cleanup": ("checkpointVersion", "numDeleted"),
}


def _step(path: Path, step: str) -> Cell:
    before = _tree(path)
    done = txntable(step, str(path), *ARGS[step], check=False)
    cell = Cell(code=done.code)
    if done.code == 0 and done.doc is not None:
        cell.detail = ", ".join(f"{k}={done.doc.get(k)}" for k in _FIGURES[step])
    if done.code != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
        cell.error = lines[-1] if lines else done.stderr.strip()[-600:]
        cell.unchanged = _tree(path) == before
    return cell


def _compare(cells: list[Cell], base: dict[str, Any], now: dict[str, Any]) -> None:
    same = all(now.get(k) == v for k, v in base.items())
    for cell in cells:
        if cell.code == 0:
            cell.read_ok = same
            if not same:
                cell.detail += f"; delta-spark read {now}, expected {base}"


def run_recipe(ds: DeltaSpark, root: Path, name: str) -> FeatureRun:
    try:
        return _run_recipe(ds, root, name)
    except Exception:  # one recipe's surprise must not take the other cells down with it
        return FeatureRun(name, RECIPES[name].feature, setup_error=traceback.format_exc()[-3000:])


def _run_recipe(ds: DeltaSpark, root: Path, name: str) -> FeatureRun:
    recipe = RECIPES[name]
    run = FeatureRun(name, recipe.feature)
    path = root / name
    try:
        for sql in recipe.sql:
            ds.sql(fill(sql, str(path)))
        base = _read(ds, path, recipe, extra=True)
    except DeltaSparkError as exc:
        run.setup_error = str(exc)[:1500]
        return run
    for step in ("checkpoint", "optimize"):
        run.cells[step] = _step(path, step)
    if name == "changeDataFeed":
        # the feed of the commits VACUUM and cleanup remove is gone by design: compare it now
        mid = _safe_read(ds, path, recipe)
        _compare([run.cells["checkpoint"], run.cells["optimize"]], base, mid)
        base = {"rows": base["rows"]}
    age_log(path, days=3)
    for step in ("vacuum", "cleanup"):
        run.cells[step] = _step(path, step)
    # one read covers the four steps: delta-spark starts from our checkpoint, replays our
    # OPTIMIZE and VACUUM commits and reads the files VACUUM left, in a log cleanup trimmed
    _compare(list(run.cells.values()), base, _safe_read(ds, path, recipe, extra="extra" in base))
    try:
        for sql in recipe.next:
            ds.sql(fill(sql, str(path)))
        run.next_ok = True
        run.next_detail = "; ".join(fill(sql, str(path)) for sql in recipe.next)
        if name == "clustering":
            detail = ds.sql(f"DESCRIBE DETAIL delta.`{path}`")[0]
            run.next_ok = run.next_ok and detail["clusteringColumns"] == ["x"]
            run.next_detail += f"; clusteringColumns {detail['clusteringColumns']}"
    except DeltaSparkError as exc:
        run.next_ok = False
        run.next_detail = str(exc)[:1500]
    return run


def _safe_read(ds: DeltaSpark, path: Path, recipe: Recipe, extra: bool = True) -> dict[str, Any]:
    try:
        return _read(ds, path, recipe, extra)
    except DeltaSparkError as exc:
        return {"error": str(exc)[:1500]}


@pytest.fixture(scope="module")
def matrix(
    delta_spark: DeltaSpark, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, FeatureRun]:
    root = tmp_path_factory.mktemp("features")
    with ThreadPoolExecutor(max_workers=3) as pool:
        runs = dict(
            zip(RECIPES, pool.map(lambda n: run_recipe(delta_spark, root, n), RECIPES), strict=True)
        )
    out = tmp_path_factory.getbasetemp() / "deltaspark-matrix.json"
    out.write_text(json.dumps({k: asdict(v) for k, v in runs.items()}, indent=1))
    return runs


def _cases() -> list[Any]:
    cases = []
    for name in RECIPES:
        for step in STEPS:
            cases.append(pytest.param(name, step, id=f"{name}-{step}"))
    return cases


@pytest.mark.parametrize(("name", "step"), _cases())
def test_cell(matrix: dict[str, FeatureRun], name: str, step: str) -> None:
    run = matrix[name]
    assert not run.setup_error, f"delta-spark could not make the {name} table: {run.setup_error}"
    cell = run.cells[step]
    if cell.code != 0:
        assert cell.code == 1, f"{step} exited {cell.code}: {cell.error}"
        assert run.feature.lower() in cell.error.lower(), f"refusal names no feature: {cell.error}"
        assert cell.unchanged, f"{step} was refused but changed the table: {cell.error}"
        if (name, step) in REFUSED:
            return
        raise RefusedError(f"{step} refused: {cell.error}")
    assert (name, step) not in REFUSED, f"{step} now runs: update REFUSED ({REFUSED[name, step]})"
    assert cell.read_ok, cell.detail


@pytest.mark.parametrize("name", list(RECIPES))
def test_delta_spark_writes_after_our_maintenance(matrix: dict[str, FeatureRun], name: str) -> None:
    run = matrix[name]
    assert not run.setup_error, run.setup_error
    assert run.next_ok, run.next_detail
