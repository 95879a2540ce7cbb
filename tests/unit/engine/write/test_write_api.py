"""create/append/overwrite/delete on in-memory tables, including storage faults at commit time."""

from __future__ import annotations

import json
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.faults import FAIL_BEFORE, LANDED_EXISTS, LOST_RESPONSE, FaultyStorage
from txntable.engine.commit.transaction import CommitOptions
from txntable.engine.errors import (
    InvalidArgumentError,
    TableNotFoundError,
    UnsafeCommitStorageError,
    UnsupportedWriterFeatureError,
)
from txntable.engine.storage.factory import open_storage
from txntable.engine.storage.paths import decode_path
from txntable.engine.table import Table

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string())])
FAST = CommitOptions(backoff_initial_s=0.0, backoff_max_s=0.0)


def _uri() -> str:
    return f"memory://write-api-{uuid.uuid4().hex}"


def _rows(table: Table) -> list[tuple[int, str | None]]:
    snap = table.snapshot()
    out: list[tuple[int, str | None]] = []
    for add in snap.add_actions():
        data = pq.read_table(snap.storage.open_input(decode_path(add.path)))
        if "p" in data.column_names:
            out += list(
                zip(data.column("id").to_pylist(), data.column("p").to_pylist(), strict=True)
            )
        else:
            out += [(i, add.partition_values.get("p")) for i in data.column("id").to_pylist()]
    return sorted(out, key=lambda r: r[0])


def _faulty(uri: str) -> tuple[Table, FaultyStorage]:
    storage = FaultyStorage(open_storage(uri))
    return Table(storage), storage


def _commits(storage: FaultyStorage) -> list[str]:
    return [f.name for f in storage.list_log() if f.name.endswith(".json")]


def test_create_append_overwrite_delete_round_trip() -> None:
    table = Table.create(
        _uri(), SCHEMA, partition_by=["p"], properties={"delta.appendOnly": "false"}
    )
    assert table.version() == 0
    first = table.append(pa.table({"id": [1, 2, 3], "p": ["a", "b", None]}))
    assert first.version == 1 and first.operation == "WRITE"
    table.overwrite(pa.table({"id": [10], "p": ["a"]}), "p = 'a'")
    assert _rows(table) == [(2, "b"), (3, None), (10, "a")]
    assert table.delete("p IS NULL") is not None
    assert table.delete("p = 'nothing'") is None
    assert _rows(table) == [(2, "b"), (10, "a")]
    table.overwrite(pa.table({"id": [7], "p": ["c"]}))
    assert _rows(table) == [(7, "c")]
    ops = [h["operation"] for h in table.history()]
    assert ops == ["WRITE", "DELETE", "WRITE", "WRITE", "CREATE TABLE"]
    info = table.history()[-2]
    assert info["isBlindAppend"] is True and info["operationMetrics"]["numOutputRows"] == "3"


def test_create_refuses_an_existing_table_and_bad_layouts() -> None:
    uri = _uri()
    Table.create(uri, SCHEMA)
    with pytest.raises(InvalidArgumentError, match="already exists"):
        Table.create(uri, SCHEMA)
    for kwargs, message in [
        ({"partition_by": ["nope"]}, "not in the schema"),
        ({"partition_by": ["id", "id"]}, "twice"),
        ({"partition_by": ["id", "p"]}, "at least one column"),
    ]:
        other = _uri()
        with pytest.raises(InvalidArgumentError, match=message):
            Table.create(other, SCHEMA, **kwargs)  # type: ignore[arg-type]
        assert open_storage(other).list_log() == []
    with pytest.raises(UnsupportedWriterFeatureError, match="changeDataFeed"):
        Table.create(_uri(), SCHEMA, properties={"delta.enableChangeDataFeed": "true"})
    bad_codec = _uri()
    with pytest.raises(InvalidArgumentError, match="unknown Parquet compression codec 'brotli9'"):
        Table.create(bad_codec, SCHEMA, properties={"delta.parquet.compression.codec": "brotli9"})
    assert open_storage(bad_codec).list_log() == []
    zstd = Table.create(_uri(), SCHEMA, properties={"delta.parquet.compression.codec": "ZSTD"})
    assert zstd.snapshot().configuration["delta.parquet.compression.codec"] == "ZSTD"


def test_timestamp_ntz_tables_get_the_feature() -> None:
    schema = pa.schema([("t", pa.timestamp("us"))])
    table = Table.create(_uri(), schema)
    protocol = table.snapshot().protocol
    assert (protocol.min_reader_version, protocol.min_writer_version) == (3, 7)
    assert protocol.writer_features == ["timestampNtz"]


def test_writes_need_a_table_and_partition_only_predicates() -> None:
    with pytest.raises(TableNotFoundError, match="create it first"):
        Table(open_storage(_uri())).append(pa.table({"id": [1], "p": ["a"]}))
    table = Table.create(_uri(), SCHEMA, partition_by=["p"])
    with pytest.raises(InvalidArgumentError, match="only use partition columns"):
        table.delete("id = 1")
    with pytest.raises(InvalidArgumentError, match="empty predicate"):
        table.delete("")  # an empty condition is a mistake, never "delete everything"
    with pytest.raises(InvalidArgumentError, match="do not match the overwrite predicate"):
        table.overwrite(pa.table({"id": [1], "p": ["b"]}), "p = 'a'")
    assert table.version() == 0
    assert [f for f in open_storage(table.uri).list_dir("p=b")] == []


@pytest.mark.parametrize("fault", [LOST_RESPONSE, LANDED_EXISTS])
def test_a_landed_commit_whose_answer_was_lost_is_not_written_twice(fault: str) -> None:
    uri = _uri()
    Table.create(uri, SCHEMA)
    table, storage = _faulty(uri)
    storage.inject(fault)
    result = table.append(pa.table({"id": [1], "p": ["a"]}), options=FAST)
    assert result.version == 1
    assert _commits(storage) == [f"{v:020d}.json" for v in (0, 1)]
    assert _rows(Table.open(uri)) == [(1, "a")]


def test_a_write_that_failed_before_landing_is_retried() -> None:
    uri = _uri()
    Table.create(uri, SCHEMA)
    table, storage = _faulty(uri)
    storage.inject(FAIL_BEFORE)
    result = table.append(pa.table({"id": [1], "p": ["a"]}), options=FAST)
    assert result.version == 1 and result.attempts == 2
    assert [outcome for _, outcome in storage.writes] == [FAIL_BEFORE, "written"]


def test_store_without_put_if_absent_needs_single_writer_opt_in() -> None:
    uri = _uri()
    Table.create(uri, SCHEMA)
    table, storage = _faulty(uri)
    storage.atomic_put_if_absent = False
    with pytest.raises(UnsafeCommitStorageError, match=r"txntable\.singleWriter"):
        table.append(pa.table({"id": [1], "p": ["a"]}))
    assert _commits(storage) == [f"{0:020d}.json"]

    single = _uri()
    Table.create(single, SCHEMA, properties={"txntable.singleWriter": "true"})
    table, storage = _faulty(single)
    storage.atomic_put_if_absent = False
    assert table.append(pa.table({"id": [1], "p": ["a"]})).version == 1


def test_commit_lines_are_valid_delta_json() -> None:
    table = Table.create(_uri(), SCHEMA, partition_by=["p"])
    table.append(pa.table({"id": [1], "p": ["x y"]}))
    raw = table.storage.read_log(f"{1:020d}.json").decode()
    actions = [json.loads(line) for line in raw.splitlines()]
    assert [next(iter(a)) for a in actions] == ["commitInfo", "add"]
    add = actions[1]["add"]
    assert add["path"].startswith("p=x%20y/") and add["partitionValues"] == {"p": "x y"}
    assert json.loads(add["stats"])["numRecords"] == 1


def test_a_refused_overwrite_removes_the_files_it_wrote(monkeypatch: pytest.MonkeyPatch) -> None:
    from txntable.engine.errors import ConcurrentAppendException
    from txntable.engine.write import api as write_api

    uri = _uri()
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    table.append(pa.table({"id": [1], "p": ["a"]}))
    original = write_api._writable_snapshot
    calls: list[int] = []

    def append_meanwhile(t: Table) -> object:
        snapshot = original(t)
        if not calls:
            calls.append(1)
            Table.open(uri).append(pa.table({"id": [2], "p": ["a"]}))
        return snapshot

    monkeypatch.setattr(write_api, "_writable_snapshot", append_meanwhile)
    with pytest.raises(ConcurrentAppendException):
        table.overwrite(pa.table({"id": [3], "p": ["a"]}), "p = 'a'")
    live = {decode_path(a.path) for a in Table.open(uri).snapshot().add_actions()}
    on_disk = {f"p=a/{f.name}" for f in open_storage(uri).list_dir("p=a")}
    assert on_disk == live and len(live) == 2
