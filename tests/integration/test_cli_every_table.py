"""Every command of ``txntable`` on every table: never a traceback, always the documented exit.

The tables are the reference tables (copied), every feature table of ``tests.feature_tables``
and one deltalake writes. On each, in order: ``inspect`` (text and ``--json``), ``optimize``
(dry run and real, text and ``--json``, the in-process Arrow executor), ``checkpoint`` (classic
and multi-part), ``cleanup`` (dry run and real) and ``vacuum`` (dry run, real at the table's
retention, real at zero retention with ``--force``), all through ``cli.main.main`` in this
process, as docs/cli.md allows. docs/cli.md's exit statuses: 0 done (nothing to do included),
1 the table or its storage refused (not readable, a feature this engine cannot honour, a run
every bin of which failed) with exactly one ``error:`` line on stderr; ``--json`` prints one
JSON document on stdout whenever a run produced a result.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from tests import deltagen as g
from tests import feature_tables as ft
from tests.conftest import TESTDATA, reference_tables
from txntable.cli.main import main

pytestmark = pytest.mark.integration

#: (table, command) -> the exit status docs/cli.md gives it; anything else exits 0
UNREADABLE = {"simple_table_features"}
UNMAINTAINABLE = set(ft.UNMAINTAINABLE)
NOT_REWRITABLE = {*ft.NOT_REWRITABLE, "variant-stats-no-checkpoint"}
#: tables whose data cannot be read, so a real OPTIMIZE fails every bin: ``checkpoints`` holds a
#: log and no data files; the deletion vectors of ``table-with-dv-special-char`` lie outside the
#: table root (a placeholder path); those of ``partitioned-table-with-dv-large`` carry the name
#: prefix only Delta Spark's own tests add (``test%dv%prefix-``), which their descriptors lack
UNREADABLE_FILES = {"checkpoints", "table-with-dv-special-char", "partitioned-table-with-dv-large"}

COMMANDS: list[tuple[str, list[str]]] = [
    ("inspect", ["inspect", "{t}"]),
    ("inspect", ["inspect", "{t}", "--json"]),
    ("optimize-dry", ["optimize", "{t}", "--executor", "arrow", "--dry-run"]),
    ("optimize-dry", ["optimize", "{t}", "--executor", "arrow", "--dry-run", "--json"]),
    ("optimize", ["optimize", "{t}", "--executor", "arrow", "--min-file-size", "1Gi", "--json"]),
    ("optimize", ["optimize", "{t}", "--executor", "arrow", "--min-file-size", "1Gi"]),
    ("checkpoint", ["checkpoint", "{t}"]),
    ("checkpoint", ["checkpoint", "{t}", "--part-size", "1", "--json"]),
    ("cleanup", ["cleanup", "{t}", "--dry-run"]),
    ("cleanup", ["cleanup", "{t}", "--retention", "interval 0 days", "--json"]),
    ("vacuum", ["vacuum", "{t}", "--dry-run", "--json"]),
    ("vacuum", ["vacuum", "{t}"]),
    ("vacuum", ["vacuum", "{t}", "--retention", "interval 0 hours", "--force", "--json"]),
]


def _expected(name: str, step: str) -> int:
    if name in UNREADABLE:
        return 1
    if step == "inspect":
        return 0
    if name in UNMAINTAINABLE:
        return 1
    if step.startswith("optimize") and name in NOT_REWRITABLE:
        return 1
    if step == "optimize" and name in UNREADABLE_FILES:
        return 1
    return 0


def _deltalake_table(root: Path) -> Path:
    import deltalake

    data = pa.table({"id": pa.array(range(6), pa.int64()), "p": ["a", "b"] * 3})
    for _ in range(3):
        deltalake.write_deltalake(str(root), data, mode="append", partition_by=["p"])
    return root


def _table(name: str, tmp_path: Path) -> Path:
    root = tmp_path / name
    if name == "deltalake-written":
        return _deltalake_table(root)
    if name in ft.BUILDERS:
        return ft.build(name, root)
    return g.copy_table(TESTDATA / name, root)


@pytest.mark.parametrize("name", [*reference_tables(), *sorted(ft.BUILDERS), "deltalake-written"])
def test_every_command_exits_as_documented(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _table(name, tmp_path)
    for step, argv in COMMANDS:
        args = [a.format(t=root) for a in argv]
        code = main(args)  # an exception escaping here is the traceback a user would see
        out, err = capsys.readouterr()
        where = f"{name}: txntable {' '.join(argv)} -> {code}\n{err[-2000:]}"
        assert "Traceback" not in out + err, where
        assert code == _expected(name, step), where
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        if code:
            assert len(errors) == 1 and err.rstrip().endswith(errors[0]), where
        else:
            assert not errors, where
        if "--json" in argv and out.strip():
            json.loads(out)
        elif "--json" in argv:
            assert code, f"{where}: --json printed nothing"


def test_optimize_says_why_when_every_bin_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run in which nothing could be done says why, in both output modes."""
    root = tmp_path / "t"
    g.write_commit(root, 0, [g.commit_info("CREATE TABLE"), g.protocol(), g.metadata()])
    for v in (1, 2):
        path = root / f"f{v}.parquet"
        path.write_bytes(b"PAR1 this is no Parquet file PAR1")
        g.write_commit(root, v, [g.commit_info(), g.add(path.name, path.stat().st_size)])
    before = sorted(p.name for p in (root / "_delta_log").iterdir())
    for extra in (["--json"], []):
        code = main(["optimize", str(root), "--executor", "arrow", *extra])
        out, err = capsys.readouterr()
        assert code == 1
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: every bin that ran failed"), err
        if extra:
            assert json.loads(out)["error"] == lines[0].removeprefix("error: ")
    assert sorted(p.name for p in (root / "_delta_log").iterdir()) == before
