"""``Table.from_snapshot``: a handle that refreshes the snapshot it was given instead of loading
the table again (VACUUM commits after planning on one), and never keeps one without statistics."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from txntable.engine.read.snapshot import Snapshot
from txntable.engine.table import Table


def _table(tmp_path: Path) -> Table:
    table = Table.create(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    for i in range(3):
        table.append(pa.table({"id": [i]}))
    return table


def test_the_next_snapshot_is_a_refresh_of_the_one_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = _table(tmp_path)
    held = Snapshot.load(writer.storage)
    writer.append(pa.table({"id": [9]}))  # a commit after the snapshot was taken
    expected = Snapshot.load(writer.storage)

    def no_full_load(*args: object, **kwargs: object) -> Snapshot:
        raise AssertionError("loaded the table again")

    monkeypatch.setattr(Snapshot, "load", no_full_load)
    table = Table.from_snapshot(held)
    latest = table.snapshot()
    assert latest.version == expected.version == held.version + 1
    assert sorted(latest.files().column("path").to_pylist()) == sorted(
        expected.files().column("path").to_pylist()
    )
    txn = table.transaction()  # what VACUUM records its start and end with
    txn.commit("VACUUM START", {}, {})
    assert table.snapshot().version == expected.version + 1


def test_a_snapshot_without_statistics_is_not_kept(tmp_path: Path) -> None:
    writer = _table(tmp_path)
    table = Table.from_snapshot(Snapshot.load(writer.storage, stats=False))
    assert table.snapshot().has_stats
