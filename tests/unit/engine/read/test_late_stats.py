"""A snapshot reads its checkpoint's file statistics only when asked, and then exactly.

``Snapshot.load`` leaves the ``stats`` and ``tags`` of the checkpoint's files in the checkpoint
(most of its bytes) until ``files()`` or ``state`` needs them. These tests hold the promise that
this changes nothing a caller can see: on every checkpointed reference table and on tables
whose commits after the checkpoint remove, re-add or re-describe its files, the completed
snapshot equals one that read the statistics at once, row for row and in order; and what needs
no statistics (locations, sizes, partitions) never reads them.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from tests.conftest import TESTDATA
from txntable.engine import Snapshot, Table
from txntable.engine.checkpoint.write import write_checkpoint
from txntable.engine.errors import EngineError, LogFileGoneError
from txntable.engine.model.actions import AddFile, RemoveFile
from txntable.engine.read.state import key_column
from txntable.engine.storage.paths import LOG_DIR

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string())])

#: every reference table (each is checked, with or without a checkpoint)
REFERENCE = sorted(p.name for p in TESTDATA.iterdir() if (p / LOG_DIR).is_dir())


def _same(late: Snapshot, eager: Snapshot) -> None:
    assert late.version == eager.version
    assert late.files().equals(eager.files())
    assert late.tombstones().equals(eager.tombstones())
    assert late.stats_read and eager.stats_read


@pytest.mark.parametrize("name", REFERENCE)
def test_statistics_read_late_equal_statistics_read_at_once(name: str) -> None:
    storage = Table.open(str(TESTDATA / name)).storage
    try:
        eager = Snapshot.load(storage, stats=True)
    except EngineError as refused:  # a table the engine cannot read refuses the same way
        with pytest.raises(type(refused), match=re.escape(str(refused))):
            Snapshot.load(storage)
        return
    late = Snapshot.load(storage)
    assert late.stats_read is (eager.checkpoint is None)  # nothing to read late without one
    # what needs no statistics leaves them unread
    assert late.file_uris() == eager.file_uris()
    assert (late.num_files, late.size_bytes) == (eager.num_files, eager.size_bytes)
    assert late.partition_values().equals(eager.partition_values())
    assert (
        late.files(stats=False)
        .drop_columns(["stats", "tags"])
        .equals(eager.files().drop_columns(["stats", "tags"]))
    )
    assert late.stats_read is (eager.checkpoint is None)
    _same(late, eager)
    assert list(late.add_actions()) == list(eager.add_actions())


def test_the_reference_tables_include_checkpoints_of_every_kind() -> None:
    """The parametrized test above covers classic, V2 (with sidecars) and DV checkpoints."""
    kinds = set()
    for name in REFERENCE:
        try:
            snap = Snapshot.load(Table.open(str(TESTDATA / name)).storage, stats=False)
        except EngineError:
            continue
        if snap.checkpoint is not None:
            kinds.add(snap.checkpoint.kind.value)
    assert len(kinds) >= 2, kinds


def _table(tmp_path: Path, rows: int = 6) -> Table:
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    for i in range(rows):
        table.append(pa.table({"id": [i, i + 100], "p": ["a" if i % 2 else None] * 2}, SCHEMA))
    write_checkpoint(table.snapshot())
    return table


def _commit(table: Table, *actions: AddFile | RemoveFile) -> None:
    txn = table.transaction()
    txn.add(*actions)
    txn.commit("ANALYZE")


def _checkpointed_adds(table: Table) -> list[AddFile]:
    return list(Snapshot.load(table.storage, stats=True).add_actions())


def test_a_file_described_again_after_the_checkpoint_keeps_its_new_description(
    tmp_path: Path,
) -> None:
    """The commit's ``add`` replaces the checkpoint's row: neither its new statistics nor
    their absence may be overwritten by what the checkpoint says of the same file."""
    table = _table(tmp_path)
    first, second, *_ = _checkpointed_adds(table)
    assert first.stats and second.stats
    _commit(
        table,
        replace(first, data_change=False, stats='{"numRecords":2}'),
        replace(second, data_change=False, stats=None, tags={"k": "v"}),
    )
    late = Snapshot.load(table.storage)
    by_path = {a.path: a for a in late.add_actions()}
    assert by_path[first.path].stats == '{"numRecords":2}'
    assert by_path[second.path].stats is None and by_path[second.path].tags == {"k": "v"}
    _same(Snapshot.load(table.storage), Snapshot.load(table.storage, stats=True))


def test_a_refreshed_snapshot_still_reads_the_statistics_of_what_is_left(tmp_path: Path) -> None:
    table = _table(tmp_path)
    late = Snapshot.load(table.storage)
    adds = _checkpointed_adds(table)
    _commit(table, adds[0].to_remove(1, True))  # a checkpoint file goes
    table.append(pa.table({"id": [7], "p": ["a"]}, SCHEMA))
    _commit(table, replace(adds[3], data_change=False, stats=None))
    refreshed = late.refresh()
    assert refreshed.version == late.version + 3 and not refreshed.stats_read
    eager = Snapshot.load(table.storage, stats=True)
    order = [refreshed, eager]
    keys = [s.files(stats=False).sort_by("path").column("path") for s in order]
    assert keys[0].equals(keys[1])
    for s in order:  # the same rows, each with its own statistics (fold order may differ)
        files = s.files()
        assert files.num_rows == eager.num_files
    mine, theirs = (s.files().sort_by("path") for s in order)
    assert mine.equals(theirs)
    assert refreshed.tombstones().sort_by("path").equals(eager.tombstones().sort_by("path"))
    assert not late.stats_read  # the snapshot refreshed from is untouched


def test_a_late_snapshot_is_written_from_as_an_eager_one(tmp_path: Path) -> None:
    """A checkpoint written from a snapshot that had not read its statistics yet is the
    checkpoint the eager snapshot writes."""
    table = _table(tmp_path)
    table.append(pa.table({"id": [9], "p": ["a"]}, SCHEMA))
    late = Snapshot.load(table.storage)
    assert not late.stats_read
    write_checkpoint(late)
    again = Snapshot.load(table.storage, stats=True)
    assert again.checkpoint_version == late.version
    # a checkpoint says dataChange=false of every file; the rest is as the snapshot had it
    assert (
        again.files()
        .sort_by("path")
        .drop_columns(["dataChange"])
        .equals(late.files().sort_by("path").drop_columns(["dataChange"]))
    )


def test_a_checkpoint_deleted_before_the_statistics_were_read_is_a_clear_error(
    tmp_path: Path,
) -> None:
    table = _table(tmp_path)
    late = Snapshot.load(table.storage)
    assert late.checkpoint is not None
    for info in late.checkpoint.files:
        (tmp_path / "t" / LOG_DIR / info.name).unlink()
    assert late.num_files == 6  # what was read stays usable
    with pytest.raises(LogFileGoneError, match="load the table again"):
        late.files()
    with pytest.raises(LogFileGoneError):
        late.state  # noqa: B018 - the property reads
    assert late.files(stats=False).num_rows == 6


def test_a_checkpoint_rewritten_without_a_file_it_held_is_refused(tmp_path: Path) -> None:
    table = _table(tmp_path)
    late = Snapshot.load(table.storage)
    assert late.checkpoint is not None
    (info,) = late.checkpoint.files
    path = tmp_path / "t" / LOG_DIR / info.name
    import pyarrow.parquet as pq

    written = pq.read_table(path)
    add = written.column("add")
    keep = pa.compute.or_(
        pa.compute.is_null(add),
        pa.compute.not_equal(
            pa.compute.struct_field(add, "path"), late.files(stats=False).column("path")[0]
        ),
    )
    pq.write_table(written.filter(pa.compute.fill_null(keep, True)), path)
    from txntable.engine.errors import CorruptLogError

    with pytest.raises(CorruptLogError, match="rewritten with other content"):
        late.files()


def test_statistics_kept_only_as_stats_parsed_are_rebuilt_when_asked(tmp_path: Path) -> None:
    """A checkpoint written with ``delta.checkpoint.writeStatsAsJson=false`` holds typed
    ``stats_parsed`` only; the late read rebuilds the JSON from them as the eager one does."""
    table = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        properties={
            "delta.checkpoint.writeStatsAsJson": "false",
            "delta.checkpoint.writeStatsAsStruct": "true",
        },
    )
    for i in range(3):
        table.append(pa.table({"id": [i, -i], "p": ["x", None]}, SCHEMA))
    write_checkpoint(table.snapshot())
    eager = Snapshot.load(table.storage, stats=True)
    late = Snapshot.load(table.storage)
    assert all(json.loads(s)["numRecords"] == 2 for s in eager.files().column("stats").to_pylist())
    _same(late, eager)


def test_keys_with_deletion_vectors_match_their_own_rows() -> None:
    """Deletion-vector tables: the key is path plus DV id, and each row gets its own."""
    storage = Table.open(str(TESTDATA / "partitioned-table-with-dv-large")).storage
    late = Snapshot.load(storage)
    files = late.files()
    assert files.column("deletionVector").null_count < files.num_rows
    eager = Snapshot.load(storage, stats=True).files()
    assert key_column(files).equals(key_column(eager))
    assert files.column("stats").equals(eager.column("stats"))
