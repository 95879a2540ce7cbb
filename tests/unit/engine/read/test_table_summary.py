"""The controller's compact TableSummary gives the health a full snapshot gives.

Random sequences of real commits (appends into partitions including a null one, whole-file and
row-level deletes through deletion vectors, OPTIMIZE, partition overwrites, removes that carry
no size, old tombstones, property changes, checkpoints, log cleanup) are written through the
engine; after every few commits the summary is advanced over them and its health is compared,
field by field, with the health of a freshly loaded snapshot and of a refreshed one.
"""

from __future__ import annotations

import dataclasses
import random
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from tests.conftest import TESTDATA
from tests.support.health_oracle import observe
from txntable.api.optimize_options import OptimizeOptions
from txntable.engine import Snapshot, Table
from txntable.engine.checkpoint.cleanup import cleanup_expired_logs
from txntable.engine.checkpoint.write import write_checkpoint
from txntable.engine.model.actions import RemoveFile
from txntable.engine.read.summary import TableSummary
from txntable.maintenance.executor_arrow import ArrowExecutor
from txntable.maintenance.optimize import optimize
from txntable.reconcile.health import TableHealth, observe_summary

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("pad", pa.string())])
PARTS = ["a", "b", "c", None]
THRESHOLDS = (1, 1_500, 3_000, 1 << 40)


class _Writer:
    """Random commits on one table; remembers whether a checkpoint may have dropped tombstones."""

    def __init__(self, table: Table, rng: random.Random, partitioned: bool) -> None:
        self.table, self.rng, self.partitioned = table, rng, partitioned
        self.next_id = 0
        self.checkpointed = False

    def step(self) -> None:
        ops = [self.append] * 6 + [
            self.delete_rows,
            self.delete_rows,
            self.delete_files,
            self.optimize,
            self.overwrite,
            self.old_tombstone,
            self.remove_and_restore,
            self.bare_remove,
            self.set_property,
            self.checkpoint,
            self.cleanup,
        ]
        self.rng.choice(ops)()

    def append(self) -> None:
        n = self.rng.choice([1, 5, 40, 200])
        part = self.rng.choice(PARTS)
        ids = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        pad = "x" * self.rng.choice([1, 50])
        self.table.append(pa.table({"id": ids, "p": [part] * n, "pad": [pad] * n}, SCHEMA))

    def delete_rows(self) -> None:
        if self.next_id:
            low = self.rng.randrange(self.next_id)
            self.table.delete(f"id >= {low} AND id < {low + self.rng.choice([1, 3, 30])}")

    def delete_files(self) -> None:
        if self.partitioned:
            self.table.delete(f"p = '{self.rng.choice(PARTS[:3])}'")

    def optimize(self) -> None:
        optimize(self.table, OptimizeOptions(target_file_size=4_000), ArrowExecutor(workers=1))

    def overwrite(self) -> None:
        if self.partitioned:
            data = pa.table({"id": [self.next_id], "p": ["b"], "pad": ["o"]}, SCHEMA)
            self.next_id += 1
            self.table.overwrite(data, "p = 'b'")

    def _some_adds(self, k: int):  # type: ignore[no-untyped-def]
        adds = list(self.table.snapshot().add_actions())
        return self.rng.sample(adds, min(k, len(adds)))

    def old_tombstone(self) -> None:
        """Removes dated long ago: past the retention, so VACUUM could reclaim them."""
        removed = self._some_adds(2)
        if removed:
            txn = self.table.transaction()
            txn.add(*(a.to_remove(deletion_timestamp=1_000, data_change=True) for a in removed))
            txn.commit("DELETE")

    def remove_and_restore(self) -> None:
        """A file removed (long ago, by its timestamp) and added back, as RESTORE does: the
        add clears the tombstone."""
        removed = self._some_adds(1)
        if removed:
            txn = self.table.transaction()
            txn.add(removed[0].to_remove(deletion_timestamp=1_000, data_change=True))
            txn.commit("DELETE")
            txn = self.table.transaction()
            txn.add(removed[0])
            txn.commit("RESTORE")

    def bare_remove(self) -> None:
        """A remove with only path (and vector): no size, no partition values."""
        removed = self._some_adds(1)
        if removed:
            a = removed[0]
            txn = self.table.transaction()
            now = int(time.time() * 1000)
            txn.add(
                RemoveFile(
                    path=a.path,
                    deletion_timestamp=now,
                    data_change=True,
                    deletion_vector=a.deletion_vector,
                )
            )
            txn.commit("DELETE")

    def set_property(self) -> None:
        snapshot = self.table.snapshot()
        hours = self.rng.choice(["1", "24", "1000000"])
        config = dict(snapshot.configuration)
        config["delta.deletedFileRetentionDuration"] = f"interval {hours} hours"
        txn = self.table.transaction()
        txn.set_metadata(dataclasses.replace(snapshot.metadata, configuration=config))
        txn.commit("SET TBLPROPERTIES")

    def checkpoint(self) -> None:
        write_checkpoint(self.table.snapshot())
        self.checkpointed = True

    def cleanup(self) -> None:
        snapshot = self.table.snapshot()
        if snapshot.checkpoint_version is not None:
            # cleanup cuts at whole days: two days ahead, every commit before the checkpoint goes
            cleanup_expired_logs(snapshot, retention_ms=0, now_ms=_now() + 2 * 86_400_000)


def _now() -> int:
    return int(time.time() * 1000)


def _same(summary: TableSummary, storage_snapshot: Snapshot, now_ms: int, exact: bool) -> None:
    for threshold in THRESHOLDS:
        ours = observe_summary(summary, threshold, now_ms=now_ms)
        theirs = observe(storage_snapshot, threshold, now_ms=now_ms)
        if exact:
            assert ours == theirs, threshold
        else:
            # a checkpoint drops tombstones past the retention; an advanced summary (like a
            # refreshed snapshot) still counts them until its next full load
            assert _without_reclaimable(ours) == _without_reclaimable(theirs), threshold
            assert ours.reclaimable_bytes >= theirs.reclaimable_bytes
            if theirs.newest_removal_ms is not None:  # the newest tombstone is never dropped
                assert ours.newest_removal_ms == theirs.newest_removal_ms


def _without_reclaimable(h: TableHealth) -> TableHealth:
    return dataclasses.replace(h, reclaimable_bytes=0, newest_removal_ms=None)


@pytest.mark.parametrize("seed", range(6))
def test_an_advanced_summary_observes_what_a_fresh_snapshot_observes(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    partitioned = seed % 2 == 0
    table = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        ["p"] if partitioned else [],
        {"delta.enableDeletionVectors": "true"},
    )
    writer = _Writer(table, rng, partitioned)
    for _ in range(6):
        writer.append()
    summary = TableSummary.load(table.storage)
    refreshed = Snapshot.load(table.storage)
    for _ in range(12):
        for _ in range(rng.randint(0, 4)):
            writer.step()
        now = _now()
        summary = summary.advance(table.storage)
        refreshed = refreshed.refresh()
        _same(summary, refreshed, now, exact=True)
        _same(summary, Snapshot.load(table.storage), now, exact=not writer.checkpointed)
        assert summary.version == table.snapshot().version


def test_reference_tables_summarize_as_they_observe() -> None:
    """Column mapping, deletion vectors, null partitions, checkpoints of other writers."""
    now = int(time.time() * 1000)
    names = [
        "delta-0.8.0-partitioned",
        "delta-0.8.0-null-partition",
        "table_with_column_mapping",
        "basic-dv-with-checkpoint",
        "table-with-dv-small",
        "latest_not_checkpointed",
        "simple_table",
    ]
    for name in names:
        snapshot = Table.open(str(TESTDATA / name)).snapshot()
        summary = TableSummary.from_snapshot(snapshot)
        for threshold in THRESHOLDS:
            ours = observe_summary(summary, threshold, now_ms=now)
            assert ours == observe(snapshot, threshold, now_ms=now), name


def test_file_figures_are_computed_once_per_version_and_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An idle table's summary is the same object tick after tick: its file figures (small
    files, partitions, compactable files, deletion vectors) are computed once per minimum
    size, and each observation still gives what a fresh computation gives."""
    from txntable.reconcile import health

    calls = []
    real = health._file_figures
    monkeypatch.setattr(health, "_file_figures", lambda *a: calls.append(a[1]) or real(*a))
    snapshot = Table.open(str(TESTDATA / "delta-0.8.0-partitioned")).snapshot()
    summary = TableSummary.from_snapshot(snapshot)
    for threshold in (*THRESHOLDS, *THRESHOLDS):
        assert observe_summary(summary, threshold, now_ms=0) == observe(
            snapshot, threshold, now_ms=0
        )
    assert calls == list(THRESHOLDS)
    # a summary made from this one (here: a new checkpoint) starts without them
    moved = dataclasses.replace(summary, checkpoint=None)
    observe_summary(moved, THRESHOLDS[0], now_ms=0)
    assert calls == [*THRESHOLDS, THRESHOLDS[0]]


def test_a_summary_advanced_from_an_old_version_matches(tmp_path: Path) -> None:
    """The reference table's log from its first version on, one commit at a time."""
    source = TESTDATA / "delta-0.8.0-partitioned"
    table = Table.open(str(source))
    first = min(c["version"] for c in table.history())
    summary = TableSummary.from_snapshot(table.snapshot(version=first))
    latest = table.snapshot()
    summary = summary.advance(table.storage)
    assert observe_summary(summary, 1_000, now_ms=0) == observe(latest, 1_000, now_ms=0)


def test_a_summary_holds_a_few_bytes_per_file(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), SCHEMA, ["p"])
    for i in range(20):
        table.append(pa.table({"id": [i], "p": [PARTS[i % 4]], "pad": ["y" * 500]}, SCHEMA))
    snapshot = Snapshot.load(table.storage)
    summary = TableSummary.from_snapshot(snapshot)
    assert summary.num_files == 20 and len(summary.partitions) == 4
    assert summary.nbytes < 40 * 20 < snapshot.files().nbytes


def test_commits_cleaned_up_before_they_were_seen_cost_one_full_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = Table.create(str(tmp_path / "t"), SCHEMA, ["p"])
    writer = _Writer(table, random.Random(1), partitioned=True)
    writer.append()
    summary = TableSummary.load(table.storage)
    loads: list[int] = []
    real_load = TableSummary.load.__func__  # type: ignore[attr-defined]

    def counted(cls: type[TableSummary], storage: object) -> TableSummary:
        loads.append(1)
        return real_load(cls, storage)  # type: ignore[no-any-return]

    monkeypatch.setattr(TableSummary, "load", classmethod(counted))
    for _ in range(4):
        writer.append()
    writer.old_tombstone()
    writer.checkpoint()
    writer.append()
    writer.cleanup()
    assert not (tmp_path / "t" / "_delta_log" / f"{1:020d}.json").exists()
    summary = summary.advance(table.storage)
    assert loads == [1]
    now = _now()
    _same(summary, Snapshot.load(table.storage), now, exact=True)
    writer.append()
    summary = summary.advance(table.storage)  # back to folding commits
    assert loads == [1]
    _same(summary, Snapshot.load(table.storage), now, exact=True)


CHECKPOINTED = [
    "basic-dv-with-checkpoint",
    "checkpoint-v2-table",
    "checkpoint_with_partitions",
    "latest_not_checkpointed",
    "simple_table_with_checkpoint",
    "with_checkpoint_no_last_checkpoint",
]


@pytest.mark.parametrize("name", CHECKPOINTED)
def test_a_load_without_statistics_differs_only_in_statistics(name: str) -> None:
    storage = Table.open(str(TESTDATA / name)).storage
    full = Snapshot.load(storage)
    lean = Snapshot.load(storage, stats=False)
    assert full.has_stats and not lean.has_stats
    nulls = [s.files().column("stats").null_count for s in (full, lean)]
    if name in ("basic-dv-with-checkpoint", "checkpoint-v2-table"):
        assert nulls[1] > nulls[0]  # the checkpoint's statistics were left unread
    kept = [c for c in full.files().column_names if c not in ("stats", "tags")]
    assert lean.files().select(kept).equals(full.files().select(kept)), name
    assert (
        lean.tombstones()
        .drop_columns(["stats", "tags"])
        .equals(full.tombstones().drop_columns(["stats", "tags"]))
    )
    assert (lean.protocol, lean.metadata, lean.version) == (
        full.protocol,
        full.metadata,
        full.version,
    )
    now = _now()
    assert observe(lean, 1_000, now_ms=now) == observe(full, 1_000, now_ms=now)
    assert observe_summary(TableSummary.load(storage), 1_000, now_ms=now) == observe(
        full, 1_000, now_ms=now
    )


def test_a_snapshot_without_statistics_is_never_checkpointed(tmp_path: Path) -> None:
    from txntable.engine.errors import InvalidArgumentError

    table = Table.create(str(tmp_path / "t"), SCHEMA)
    table.append(pa.table({"id": [1], "p": ["a"], "pad": ["z"]}, SCHEMA))
    write_checkpoint(table.snapshot())
    table.append(pa.table({"id": [2], "p": ["a"], "pad": ["z"]}, SCHEMA))
    lean = Snapshot.load(table.storage, stats=False)
    assert lean.refresh().has_stats is False
    listing = sorted(p.name for p in (tmp_path / "t" / "_delta_log").iterdir())
    with pytest.raises(InvalidArgumentError, match="without file statistics"):
        write_checkpoint(lean)
    assert sorted(p.name for p in (tmp_path / "t" / "_delta_log").iterdir()) == listing


def test_the_controller_keeps_no_snapshot_between_ticks(tmp_path: Path) -> None:
    """Through ``Operator.reconcile``: the status follows new commits, and once a tick is
    over no snapshot of the table is alive (the controller holds its summary only)."""
    import gc

    from tests.support.controller import T0, Harness

    h = Harness(tmp_path)
    root = Table.open(str(tmp_path / "t")).uri

    def snapshots_alive() -> int:
        gc.collect()
        return sum(
            1 for o in gc.get_objects() if isinstance(o, Snapshot) and o.storage.root_uri == root
        )

    for step in range(3):
        tick = h.tick(T0 + timedelta(seconds=step))
        fresh = observe(Snapshot.load(Table.open(str(tmp_path / "t")).storage), 1)
        assert (tick.status.version, tick.status.files, tick.status.partitions) == (
            fresh.version,
            fresh.files,
            fresh.partitions,
        )
        assert snapshots_alive() == 0
        Table.open(str(tmp_path / "t")).append(pa.table({"id": [step], "part": [f"n{step}"]}))


def test_partitions_without_files_are_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table whose old partitions are deleted as new ones arrive (hourly partitions with a
    retention): the summary keeps a bounded list of partition values, and the same figures."""
    import txntable.engine.read.summary as summary_module

    monkeypatch.setattr(summary_module, "_KEEP_PARTITIONS", 4)
    table = Table.create(str(tmp_path / "t"), SCHEMA, ["p"])
    table.append(pa.table({"id": [0, 1], "p": ["h0", "h1"], "pad": ["x", "x"]}, SCHEMA))
    summary = TableSummary.load(table.storage)
    now = _now()
    for hour in range(2, 14):
        table.append(pa.table({"id": [hour] * 2, "p": [f"h{hour}"] * 2, "pad": ["x", "y"]}, SCHEMA))
        table.delete(f"p = 'h{hour - 2}'")
        summary = summary.advance(table.storage)
        assert len(summary.partitions) <= 2 * 4 + 1
        for threshold in THRESHOLDS:
            assert observe_summary(summary, threshold, now_ms=now) == observe(
                Snapshot.load(table.storage), threshold, now_ms=now
            )
    assert sorted(p[0] or "" for p in summary.partitions) == ["h12", "h13"]
