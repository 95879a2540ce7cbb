"""Every maintenance step on every table we read, and time travel through all of them.

Each table (the reference tables, copied, and one per table feature from
``tests.feature_tables``) goes through OPTIMIZE, a classic checkpoint of the latest version, a
multi-part checkpoint of an older one, VACUUM and log cleanup, in that order. Before the first
step every version the table can read is recorded three ways: our reader's log state, the rows
as our reader reads the data files, and deltalake's rows (where deltalake reads the table at
all). After each step every version still retained must read the same three ways (log cleanup
retains the versions from its cutoff checkpoint on), a new OPTIMIZE version must hold the rows
of the version before it, and every checkpoint written must give, alone (the commits it covers
deleted from a copy), the state and rows of its version to our reader and to deltalake.

A step a table's protocol does not allow must refuse with the feature (or the rule) named and
leave every file of the table byte-identical.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests import deltagen as g
from tests import feature_tables as ft
from tests import table_reads as tr
from tests.conftest import TESTDATA, reference_tables
from txntable.api.optimize_options import OptimizeOptions
from txntable.engine.checkpoint.cleanup import cleanup_expired_logs
from txntable.engine.checkpoint.write import write_checkpoint
from txntable.engine.errors import UnsupportedFeatureError
from txntable.engine.table import Table
from txntable.engine.vacuum import vacuum
from txntable.maintenance.executor_arrow import ArrowExecutor
from txntable.maintenance.optimize import optimize

pytestmark = pytest.mark.integration

DAY_MS = 86_400_000
#: versions compared per table at most (the first, evenly spread ones, the last three)
MAX_VERSIONS = 12
#: the reference table no step may touch: it declares reader version 5
UNREADABLE = {"simple_table_features": "reader protocol version 5"}
#: reference tables whose OPTIMIZE is refused, and why
NOT_REWRITABLE = {**ft.NOT_REWRITABLE, "variant-stats-no-checkpoint": "variantShredding-preview"}
#: tables deltalake 1.x misreads, so its rows are no oracle: it resolves id-mode columns by name
#: (nulls for files that name them otherwise) and reads INT96 as nanoseconds (9999-12-31 comes
#: back as 1816-03-28); our rewrite writes both the way it reads them right
LAKE_MISREADS = {"column_mapping_id", "int96_edges"}


@dataclass
class Reading:
    """What each version reads with our reader: the log state, the rows."""

    states: dict[int, dict[str, Any]] = field(default_factory=dict)
    rows: dict[int, tuple[int, str]] = field(default_factory=dict)


@dataclass
class Lake:
    """deltalake's reads, made in one child process at the end of a test: a copy of the table
    as each step left it, and the versions to read there. ``same`` reads must all agree with
    the first (the table before any step) wherever that one succeeded."""

    work: Path
    enabled: bool
    pending: list[tuple[str, Path, int]] = field(default_factory=list)

    def read(self, label: str, root: Path, versions: list[int], key: str | None = None) -> None:
        if not self.enabled:
            return
        copy = self.work / f"lake-{label}"
        if not copy.exists():
            g.copy_table(root, copy)
        self.pending.extend((f"{key or v}", copy, v) for v in versions)

    def check(self) -> None:
        if not self.pending:
            return
        results = tr.deltalake_reads([(str(p), v) for _, p, v in self.pending])
        first: dict[str, dict[str, Any]] = {}
        for (key, path, v), got in zip(self.pending, results, strict=True):
            want = first.setdefault(key, got)
            if "error" not in want:
                got = {**got, "version": want.get("version")}  # an OPTIMIZE version: its own
                assert got == want, f"deltalake reads version {v} of {path.name} otherwise"


def _now() -> int:
    return int(time.time() * 1000)


def _versions(root: Path) -> list[int]:
    """Versions our reader can load (old ones may be gone behind a checkpoint), at most
    ``MAX_VERSIONS`` of them; the latest always."""
    latest = tr.load(root).version
    found = []
    for v in range(latest + 1):
        try:
            tr.load(root, v)
        except Exception:
            continue
        found.append(v)
    if len(found) <= MAX_VERSIONS:
        return found
    step = len(found) / (MAX_VERSIONS - 3)
    sample = {found[int(i * step)] for i in range(MAX_VERSIONS - 3)}
    return sorted(sample | set(found[-3:]))


def _read(root: Path, versions: list[int], now: int) -> Reading:
    out = Reading()
    for v in versions:
        snapshot = tr.load(root, v)
        out.states[v] = tr.state(snapshot, now)
        out.rows[v] = tr.rows_digest(snapshot)
    return out


def _same(before: Reading, after: Reading, versions: list[int], step: str) -> None:
    for v in versions:
        assert after.states[v] == before.states[v], f"{step}: state of version {v} changed"
        assert after.rows[v] == before.rows[v], f"{step}: rows of version {v} changed"


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _checkpoint_alone(root: Path, work: Path, version: int) -> Path:
    """A copy of the table whose commits up to ``version`` are gone: only the checkpoint at
    ``version`` can give that version."""
    copy = work / f"alone-{version}"
    shutil.rmtree(copy, ignore_errors=True)
    g.copy_table(root, copy)
    for v in range(version + 1):
        (copy / "_delta_log" / f"{v:020d}.json").unlink(missing_ok=True)
    return copy


def _check_checkpoint(
    root: Path, work: Path, version: int, before: Reading, now: int, lake: Lake
) -> None:
    alone = _checkpoint_alone(root, work, version)
    snapshot = tr.load(alone, version)
    assert snapshot.checkpoint is not None and snapshot.checkpoint.version == version
    assert tr.state(snapshot, now) == before.states[version], f"checkpoint {version}: state"
    assert tr.rows_digest(snapshot) == before.rows[version], f"checkpoint {version}: rows"
    lake.read(f"alone-{version}", alone, [version])


def _age(paths: list[Path], ms: int) -> None:
    for p in paths:
        os.utime(p, ns=(ms * 1_000_000, ms * 1_000_000))


def _table(name: str, tmp_path: Path) -> Path:
    root = tmp_path / name
    if name in ft.BUILDERS:
        return ft.build(name, root)
    return g.copy_table(TESTDATA / name, root)


TABLES = sorted(ft.BUILDERS) + reference_tables()


def _refused_everywhere(root: Path, named: str) -> None:
    before = _files(root)
    snapshot_steps = [
        lambda: optimize(Table.open(str(root)), OptimizeOptions(), ArrowExecutor()),
        lambda: write_checkpoint(tr.load(root)),
        lambda: cleanup_expired_logs(tr.load(root), retention_ms=0),
        lambda: vacuum(tr.load(root), retention_ms=0, force=True),
    ]
    for step in snapshot_steps:
        with pytest.raises(UnsupportedFeatureError, match=named):
            step()
        assert _files(root) == before


@pytest.mark.parametrize("name", TABLES)
def test_every_step_keeps_every_retained_version(name: str, tmp_path: Path) -> None:
    root = _table(name, tmp_path)
    refused = UNREADABLE.get(name) or ft.UNMAINTAINABLE.get(name)
    if refused is not None:
        _refused_everywhere(root, refused)
        return
    now = _now()
    lake = Lake(tmp_path, enabled=name not in LAKE_MISREADS)
    versions = _versions(root)
    before = _read(root, versions, now)
    lake.read("before", root, versions)
    latest = versions[-1]

    # OPTIMIZE: a new version with the same rows, or a refusal that changes nothing
    policy = OptimizeOptions(target_file_size=1 << 30, min_file_size=1 << 30)
    if name in NOT_REWRITABLE:
        files = _files(root)
        with pytest.raises(UnsupportedFeatureError, match=NOT_REWRITABLE[name]):
            optimize(Table.open(str(root)), policy, ArrowExecutor())
        assert _files(root) == files
    else:
        result = optimize(Table.open(str(root)), policy, ArrowExecutor())
        if before.rows[latest][0] < 0:  # its files cannot be read: nothing may be rewritten
            assert result.version == latest and result.bins_committed == 0
        else:
            assert result.error is None, result.error
        if result.version != latest:
            added = _read(root, [result.version], now)
            assert added.rows[result.version] == before.rows[latest]
            lake.read("optimized", root, [result.version], key=str(latest))
            before.states[result.version] = added.states[result.version]
            before.rows[result.version] = added.rows[result.version]
            versions.append(result.version)
            latest = result.version
    _same(before, _read(root, versions, now), versions, "OPTIMIZE")
    lake.read("optimize", root, versions)

    # a classic checkpoint of the latest version, a multi-part one of an older version
    write_checkpoint(tr.load(root))
    _check_checkpoint(root, tmp_path, latest, before, now, lake)
    middle = versions[max(0, len(versions) - 3)]
    write_checkpoint(tr.load(root, middle), part_size=1)
    _check_checkpoint(root, tmp_path, middle, before, now, lake)
    _same(before, _read(root, versions, now), versions, "checkpoints")

    # VACUUM at the table's retention: data files old, commits young; an orphan goes, every
    # file a version reads stays, and so does an Iceberg-compatible table's metadata
    data = [p for p in root.rglob("*") if p.is_file() and "_delta_log" not in p.parts]
    (root / "orphan.parquet").write_bytes(b"not referenced")
    _age([*data, root / "orphan.parquet"], now - 30 * DAY_MS)
    result = vacuum(tr.load(root))
    assert "orphan.parquet" in result.files
    assert not any(f.startswith("metadata/") for f in result.files)
    _same(before, _read(root, versions, now), versions, "VACUUM")
    lake.read("vacuum", root, versions)

    # log cleanup: the commits up to the multi-part checkpoint are 60 days old, the later ones
    # young, so that checkpoint is the cutoff and every version from it on is retained; the
    # young ones were stamped by a clock that went backwards (each older than the one before)
    log = root / "_delta_log"
    old = [log / f"{v:020d}.json" for v in range(middle + 1)]
    _age([p for p in old if p.exists()] + sorted(log.glob("*.checkpoint*")), now - 60 * DAY_MS)
    for v in range(middle + 1, tr.load(root).version + 1):
        _age([log / f"{v:020d}.json"], now - (v - middle) * 60_000)
    cleaned = cleanup_expired_logs(tr.load(root), now_ms=now)
    assert cleaned.skipped is None and cleaned.checkpoint_version == middle
    assert not any((log / f"{v:020d}.json").exists() for v in range(middle))
    kept = [v for v in versions if v >= middle]
    _same(before, _read(root, kept, now), kept, "log cleanup")
    lake.read("cleanup", root, kept)
    lake.check()
