"""The checkpoint writer: content (PROTOCOL.md "Checkpoint Schema"), parts, the hint, and Spark's
hash."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests import deltagen as g
from txntable.engine.checkpoint import retention
from txntable.engine.checkpoint.spark_hash import murmur3_strings, partition_ids
from txntable.engine.checkpoint.write import write_checkpoint, write_checkpoint_state
from txntable.engine.errors import (
    CorruptLogError,
    InvalidArgumentError,
    UnsupportedWriterFeatureError,
)
from txntable.engine.read import last_checkpoint
from txntable.engine.read.snapshot import Snapshot
from txntable.engine.storage.base import LocalStorage
from txntable.engine.storage.factory import open_storage

DAY = 24 * 3600 * 1000
NOW = 1_800_000_000_000
SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "name", "type": "string", "nullable": True, "metadata": {}},
            {"name": "day", "type": "date", "nullable": True, "metadata": {}},
            {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {}},
            {"name": "part", "type": "integer", "nullable": True, "metadata": {}},
        ],
    }
)
STATS = json.dumps(
    {
        "numRecords": 3,
        "minValues": {"id": 1, "name": "a", "day": "2024-01-02", "ts": "2024-01-01T00:00:01.000Z"},
        "maxValues": {"id": 9, "name": "z", "day": "2024-02-02", "ts": "2024-01-03T00:00:00.000Z"},
        "nullCount": {"id": 0, "name": 1, "day": 0, "ts": 0},
    }
)


def _table(tmp_path: Path, configuration: dict[str, str] | None = None, **proto: Any) -> Path:
    root = tmp_path / "t"
    g.write_log(
        root,
        {
            0: [
                g.commit_info("CREATE TABLE"),
                g.protocol(**proto) if proto else g.protocol(),
                g.metadata(["part"], configuration, schema_string=SCHEMA),
            ],
            1: [
                g.add("part=1/a.parquet", 10, {"part": "1"}, stats=STATS, tags={"k": "v"}),
                g.add("part=2/b.parquet", 20, {"part": "2"}),
                g.add("part=__HIVE_DEFAULT_PARTITION__/c.parquet", 30, {"part": None}),
                g.add("part=1/gone-old.parquet", 1, {"part": "1"}),
                g.add("part=1/gone-new.parquet", 1, {"part": "1"}),
                g.add("part=1/gone-nots.parquet", 1, {"part": "1"}),
                {"txn": {"appId": "fresh", "version": 3, "lastUpdated": NOW - 1000}},
                {"txn": {"appId": "stale", "version": 1, "lastUpdated": NOW - 30 * DAY}},
                {"domainMetadata": {"domain": "d1", "configuration": "{}", "removed": False}},
            ],
            2: [
                g.remove("part=1/gone-old.parquet", deletionTimestamp=NOW - 8 * DAY, stats=STATS),
                g.remove("part=1/gone-new.parquet", deletionTimestamp=NOW - DAY, tags={"a": "b"}),
                {"remove": {"path": "part=1/gone-nots.parquet", "dataChange": True}},
                {"domainMetadata": {"domain": "d2", "configuration": "x", "removed": False}},
            ],
        },
    )
    return root


def _checkpoint_rows(root: Path, name: str) -> pa.Table:
    return pq.read_table(root / "_delta_log" / name)


def _only_checkpoint(root: Path, tmp_path: Path, version: int) -> Snapshot:
    """The table read from the checkpoint alone: commits up to it deleted."""
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    for v in range(version):
        (copy / "_delta_log" / f"{v:020d}.json").unlink()
    return Snapshot.load(LocalStorage(str(copy)))


def _paths(snapshot: Snapshot) -> list[str]:
    return sorted(snapshot.files().column("path").to_pylist())


def test_content_round_trips_through_our_reader(tmp_path: Path) -> None:
    root = _table(tmp_path)
    snapshot = Snapshot.load(LocalStorage(str(root)))
    result = write_checkpoint(snapshot, now_ms=NOW)
    assert result.files == ("00000000000000000002.checkpoint.parquet",)
    assert (result.version, result.num_of_add_files, result.parts) == (2, 3, None)
    again = _only_checkpoint(root, tmp_path, 2)
    assert again.version == 2
    assert _paths(again) == _paths(snapshot)
    assert again.raw_partition_values() == snapshot.raw_partition_values()
    assert again.files().column("stats").to_pylist() == snapshot.files().column("stats").to_pylist()
    assert again.metadata == snapshot.metadata
    assert again.protocol == snapshot.protocol
    assert sorted(again.domains) == ["d1", "d2"]
    # tombstones: within 1 week kept; older and timestamp-less expired
    assert again.tombstones().column("path").to_pylist() == ["part=1/gone-new.parquet"]
    assert again.txn_version("fresh") == 3 and again.txn_version("stale") == 1


def test_rows_follow_the_checkpoint_rules(tmp_path: Path) -> None:
    root = _table(tmp_path)
    write_checkpoint(Snapshot.load(LocalStorage(str(root))), now_ms=NOW)
    rows = _checkpoint_rows(root, "00000000000000000002.checkpoint.parquet")
    assert set(rows.column_names) == {
        "txn",
        "add",
        "remove",
        "metaData",
        "protocol",
        "domainMetadata",
    }
    adds = rows.column("add").drop_null()
    assert pc.all(pc.equal(pc.struct_field(adds, "dataChange"), False)).as_py()
    removes = rows.column("remove").drop_null()
    assert {f.name for f in removes.type} & {"stats", "tags"} == set()
    assert pc.struct_field(removes, "dataChange").to_pylist() == [False]
    protocol = rows.column("protocol").drop_null().to_pylist()
    assert protocol == [
        {
            "minReaderVersion": 1,
            "minWriterVersion": 2,
            "readerFeatures": None,
            "writerFeatures": None,
        }
    ]
    assert rows.schema.field("protocol").type.field("minReaderVersion").type == pa.int32()
    # one action per row
    valid = [pc.is_valid(rows.column(c)) for c in rows.column_names]
    counts = [sum(int(v[i].as_py()) for v in valid) for i in range(rows.num_rows)]
    assert set(counts) == {1}
    assert rows.num_rows == 1 + 1 + 2 + 2 + 3 + 1  # protocol, metaData, txns, domains, adds, remove


def test_txn_retention_and_tombstone_retention_are_table_properties(tmp_path: Path) -> None:
    config = {
        retention.TXN_RETENTION: "interval 2 days",
        retention.DELETED_FILE_RETENTION: "interval 10 days",
    }
    root = _table(tmp_path, config)
    write_checkpoint(Snapshot.load(LocalStorage(str(root))), now_ms=NOW)
    again = _only_checkpoint(root, tmp_path, 2)
    assert again.txn_version("fresh") == 3 and again.txn_version("stale") is None
    assert sorted(again.tombstones().column("path").to_pylist()) == [
        "part=1/gone-new.parquet",
        "part=1/gone-old.parquet",
    ]


def test_reader_and_writer_features_are_lists_only_for_versions_3_and_7(tmp_path: Path) -> None:
    root = _table(
        tmp_path,
        reader=3,
        writer=7,
        readerFeatures=["deletionVectors"],
        writerFeatures=["deletionVectors", "domainMetadata"],
    )
    write_checkpoint(Snapshot.load(LocalStorage(str(root))), now_ms=NOW)
    rows = _checkpoint_rows(root, "00000000000000000002.checkpoint.parquet")
    (protocol,) = rows.column("protocol").drop_null().to_pylist()
    assert protocol["readerFeatures"] == ["deletionVectors"]
    assert protocol["writerFeatures"] == ["deletionVectors", "domainMetadata"]


def test_stats_as_struct_and_without_json(tmp_path: Path) -> None:
    config = {retention.STATS_AS_STRUCT: "true", retention.STATS_AS_JSON: "false"}
    root = _table(tmp_path, config)
    snapshot = Snapshot.load(LocalStorage(str(root)))
    write_checkpoint(snapshot, now_ms=NOW)
    rows = _checkpoint_rows(root, "00000000000000000002.checkpoint.parquet")
    add_type = rows.schema.field("add").type
    assert add_type.get_field_index("stats") == -1
    adds = rows.column("add").drop_null()
    parsed_pv = pc.struct_field(adds, "partitionValues_parsed").to_pylist()
    assert parsed_pv == [{"part": 1}, {"part": 2}, {"part": None}]
    stats = pc.struct_field(adds, "stats_parsed").to_pylist()
    assert stats[1] is None and stats[2] is None
    first = stats[0]
    assert first["numRecords"] == 3 and first["minValues"]["id"] == 1
    assert str(first["minValues"]["day"]) == "2024-01-02"
    assert first["maxValues"]["ts"].isoformat().startswith("2024-01-03T00:00:00")
    assert first["nullCount"] == {"id": 0, "name": 1, "day": 0, "ts": 0}
    # our reader rebuilds JSON stats from the struct
    again = _only_checkpoint(root, tmp_path, 2)
    rebuilt = json.loads(again.files().column("stats")[0].as_py())
    assert rebuilt["numRecords"] == 3 and rebuilt["minValues"]["id"] == 1


def test_multi_part_checkpoint_parts_by_spark_hash(tmp_path: Path) -> None:
    root = tmp_path / "t"
    g.write_log(
        root,
        {
            0: [g.commit_info(), g.protocol(), g.metadata()],
            1: [g.add(f"f{i:03d}.parquet", i) for i in range(50)],
        },
    )
    snapshot = Snapshot.load(LocalStorage(str(root)))
    result = write_checkpoint(snapshot, part_size=20, now_ms=NOW)
    assert result.parts == 3 and len(result.files) == 3
    hint = last_checkpoint.read(LocalStorage(str(root)))
    assert hint is not None and (hint.version, hint.parts, hint.size) == (1, 3, 52)
    assert hint.raw["numOfAddFiles"] == 50
    assert hint.raw["sizeInBytes"] == sum(
        (root / "_delta_log" / n).stat().st_size for n in result.files
    )
    for index, name in enumerate(result.files):
        rows = _checkpoint_rows(root, name)
        paths = pc.struct_field(rows.column("add"), "path")
        assert pc.all(pc.equal(partition_ids(paths, 3), index)).as_py()
        if index == 42 % 3:  # non-file actions hash as null (the seed, 42)
            assert rows.column("protocol").null_count == rows.num_rows - 1
    again = _only_checkpoint(root, tmp_path, 1)
    assert _paths(again) == _paths(snapshot)
    # a second writer produces the same parts
    before = [_checkpoint_rows(root, n) for n in result.files]
    write_checkpoint(snapshot, part_size=20, now_ms=NOW)
    assert [_checkpoint_rows(root, n) for n in result.files] == before


def test_hint_never_moves_back(tmp_path: Path) -> None:
    root = g.simple_log(tmp_path / "t", 6)
    storage = LocalStorage(str(root))
    write_checkpoint(Snapshot.load(storage), now_ms=NOW)
    older = write_checkpoint(Snapshot.load(storage, 3), now_ms=NOW)
    assert not older.hint_written
    hint = last_checkpoint.read(storage)
    assert hint is not None and hint.version == 5
    assert (root / "_delta_log" / "00000000000000000003.checkpoint.parquet").exists()


@pytest.mark.parametrize(
    "stale",
    [
        pytest.param('{"version":900,"size":10}', id="beyond-the-log"),
        pytest.param('{"version":5,"size":10,"parts":3}', id="parts-missing"),
    ],
)
def test_a_hint_naming_a_missing_checkpoint_is_repaired(tmp_path: Path, stale: str) -> None:
    """Other engines fail on a hint whose checkpoint does not exist; writing a checkpoint fixes
    it (it used to keep any hint with a higher version)."""
    root = g.simple_log(tmp_path / "t", 6)
    storage = LocalStorage(str(root))
    write_checkpoint(Snapshot.load(storage, 2), now_ms=NOW)
    (root / "_delta_log" / "_last_checkpoint").write_text(stale)
    result = write_checkpoint(Snapshot.load(storage, 4), now_ms=NOW)
    assert result.hint_written
    hint = last_checkpoint.read(storage)
    assert hint is not None and hint.version == 4 and hint.parts is None


def test_memory_storage_checkpoint(tmp_path: Path) -> None:
    source = g.simple_log(tmp_path / "t", 4)
    storage = open_storage("memory://cp-test/t")
    for f in sorted((source / "_delta_log").iterdir()):
        storage.write(f"_delta_log/{f.name}", f.read_bytes())
    snapshot = Snapshot.load(storage)
    result = write_checkpoint(snapshot, now_ms=NOW)
    for v in range(3):
        storage.delete(f"_delta_log/{v:020d}.json")
    again = Snapshot.load(storage)
    assert (again.version, again.num_files, result.num_of_add_files) == (3, 3, 3)


@pytest.mark.parametrize("feature", ["someFutureFeature", "coordinatedCommits-preview"])
def test_unknown_writer_feature_writes_nothing(tmp_path: Path, feature: str) -> None:
    # a feature this engine does not know may add action fields a checkpoint would drop
    root = _table(tmp_path, reader=3, writer=7, readerFeatures=[], writerFeatures=[feature])
    snapshot = Snapshot.load(LocalStorage(str(root)))
    before = {p.name: p.read_bytes() for p in (root / "_delta_log").iterdir()}
    with pytest.raises(UnsupportedWriterFeatureError, match=f"checkpoint refused.*{feature}"):
        write_checkpoint(snapshot, now_ms=NOW)
    assert {p.name: p.read_bytes() for p in (root / "_delta_log").iterdir()} == before


def test_v2_checkpoint_tables_get_a_single_v2_spec_file(tmp_path: Path) -> None:
    root = _table(
        tmp_path,
        reader=3,
        writer=7,
        readerFeatures=["v2Checkpoint"],
        writerFeatures=["v2Checkpoint"],
    )
    snapshot = Snapshot.load(LocalStorage(str(root)))
    result = write_checkpoint(snapshot, part_size=1, now_ms=NOW)
    assert result.parts is None
    rows = _checkpoint_rows(root, result.files[0])
    assert rows.column("checkpointMetadata").drop_null().to_pylist() == [
        {"version": 2, "tags": None}
    ]
    assert _paths(_only_checkpoint(root, tmp_path, 2)) == _paths(snapshot)


def test_snapshot_mismatch_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from txntable.engine.checkpoint import build as checkpoint_build

    root = g.simple_log(tmp_path / "t", 4)
    real = checkpoint_build.add_column
    monkeypatch.setattr(checkpoint_build, "add_column", lambda state: real(state).slice(1))
    with pytest.raises(CorruptLogError, match="MISMATCH"):
        write_checkpoint(Snapshot.load(LocalStorage(str(root))), now_ms=NOW)
    assert not list((root / "_delta_log").glob("*.checkpoint*"))


def test_bad_part_size(tmp_path: Path) -> None:
    root = g.simple_log(tmp_path / "t", 2)
    snapshot = Snapshot.load(LocalStorage(str(root)))
    with pytest.raises(InvalidArgumentError):
        write_checkpoint_state(snapshot.storage, snapshot.state, part_size=0)


# -- Spark's hash ------------------------------------------------------------------------
def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF


def _mix(h: int, k: int) -> int:
    k = _rotl((k * 0xCC9E2D51) & 0xFFFFFFFF, 15) * 0x1B873593 & 0xFFFFFFFF
    return (_rotl(h ^ k, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF


def _reference_hash(text: str | None) -> int:
    """Spark's Murmur3_x86_32.hashUnsafeBytes with seed 42, one string at a time."""
    if text is None:
        return 42
    data, h = text.encode("utf-8"), 42
    aligned = len(data) - len(data) % 4
    for i in range(0, aligned, 4):
        h = _mix(h, int.from_bytes(data[i : i + 4], "little"))
    for b in data[aligned:]:
        h = _mix(h, (b - 256 if b >= 128 else b) & 0xFFFFFFFF)
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def test_murmur3_matches_the_reference_on_awkward_strings() -> None:
    rng = random.Random(3)
    alphabet = "ab=/%é日 -_.0123456789"
    values: list[str | None] = ["", "a", "ab", "abc", "abcd", None, "é", "日本"]
    values += ["".join(rng.choices(alphabet, k=rng.randint(0, 90))) for _ in range(300)]
    array = pa.array(values, pa.string())
    assert murmur3_strings(array).to_pylist() == [_reference_hash(v) for v in values]
    sliced = array.slice(5, 50)
    assert murmur3_strings(sliced).to_pylist() == [_reference_hash(v) for v in values[5:55]]
    ids = partition_ids(array, 7).to_pylist()
    assert ids == [_reference_hash(v) % 7 for v in values]  # Python's % is pmod


def test_spark_hash_of_empty_string_is_sparks_value() -> None:
    # SELECT hash('') in Spark SQL
    assert murmur3_strings(pa.array([""])).to_pylist() == [142593372]


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("interval 1 week", 7 * DAY),
        ("interval 30 days", 30 * DAY),
        ("2 hours", 7_200_000),
        ("interval 1 day 12 hours", 36 * 3600 * 1000),
        ("INTERVAL 5 MINUTES", 300_000),
        ("interval 1 second", 1000),
    ],
)
def test_intervals(text: str, ms: int) -> None:
    assert retention.parse_interval_ms(text) == ms


@pytest.mark.parametrize("text", ["", "interval", "1 month", "forever", "interval 3 days x"])
def test_bad_intervals(text: str) -> None:
    with pytest.raises(InvalidArgumentError):
        retention.parse_interval_ms(text)


def test_metadata_without_schema_string_reads_as_an_empty_schema(tmp_path: Path) -> None:
    """Older writers omit schemaString; Spark reads an empty schema. It used to be refused as a
    malformed action; now it loads, checkpoints (null, never "") and loads again."""
    meta = g.metadata()
    del meta["metaData"]["schemaString"]
    root = tmp_path / "t"
    g.write_commit(root, 0, [g.commit_info(), g.protocol(), meta])
    g.write_commit(root, 1, [g.commit_info(), g.add("a.parquet")])
    storage = LocalStorage(str(root))
    snapshot = Snapshot.load(storage)
    assert snapshot.fields == [] and snapshot.schema.names == []
    assert "schemaString" not in snapshot.metadata.to_json()
    write_checkpoint(snapshot, now_ms=NOW)
    rows = _checkpoint_rows(root, f"{1:020d}.checkpoint.parquet")
    metadata = [m for m in rows.column("metaData").to_pylist() if m]
    assert metadata[0]["schemaString"] is None
    again = Snapshot.load(storage)
    assert again.checkpoint_version == 1 and again.fields == []
    assert again.num_files == 1


def test_stats_parsed_of_column_mapped_and_variant_columns(tmp_path: Path) -> None:
    """Statistics are keyed by physical names at every level of a struct, and a variant column
    is one value: a null count, no bounds. Before: nested members took logical names (so every
    nested statistic was null) and a variant's null count was a struct, which failed the parse
    and dropped ``stats_parsed`` altogether."""
    from tests.feature_tables import field, schema

    inner = {"type": "struct", "fields": [field("x", "integer", 3, "col-x")]}
    fields = [
        field("a", "long", 1, "col-a"),
        field("s", inner, 2, "col-s"),
        field("v", "variant", 4, "col-v"),
        field("p", "string", 5, "col-p"),
    ]
    config = {
        "delta.columnMapping.mode": "name",
        "delta.checkpoint.writeStatsAsStruct": "true",
    }
    stats = {
        "numRecords": 2,
        "minValues": {"col-a": 1, "col-s": {"col-x": 3}},
        "maxValues": {"col-a": 5, "col-s": {"col-x": 4}},
        "nullCount": {"col-a": 0, "col-s": {"col-x": 1}, "col-v": 1},
    }
    root = tmp_path / "t"
    protocol = g.protocol(
        3,
        7,
        readerFeatures=["columnMapping", "variantType"],
        writerFeatures=["columnMapping", "variantType"],
    )
    g.write_log(
        root,
        {
            0: [
                g.commit_info(),
                protocol,
                g.metadata(["p"], config, schema_string=schema(*fields)),
            ],
            1: [g.add("col-p=z/f.parquet", 10, {"col-p": "z"}, stats=json.dumps(stats))],
        },
    )
    result = write_checkpoint(Snapshot.load(LocalStorage(str(root))), now_ms=NOW)
    adds = _checkpoint_rows(root, result.files[0]).column("add").drop_null().to_pylist()
    (add,) = adds
    parsed = add["stats_parsed"]
    assert parsed["minValues"] == {"col-a": 1, "col-s": {"col-x": 3}}
    assert parsed["maxValues"] == {"col-a": 5, "col-s": {"col-x": 4}}
    assert parsed["nullCount"] == {"col-a": 0, "col-s": {"col-x": 1}, "col-v": 1}
    assert add["partitionValues_parsed"] == {"col-p": "z"}


def test_checkpoints_before_a_dropped_feature_need_its_protocol(tmp_path: Path) -> None:
    """checkpointProtection: a feature dropped at version 2 (its barrier checkpoint there)
    still rules the versions before it. A checkpoint is checked against the protocol of the
    version it holds, so it is refused before the drop and written after it."""
    root = tmp_path / "t"
    dropped = g.protocol(1, 7, writerFeatures=["someDroppedFeature", "appendOnly"])
    after = g.protocol(1, 7, writerFeatures=["checkpointProtection", "appendOnly"])
    config = {"delta.requireCheckpointProtectionBeforeVersion": "2"}
    g.write_log(
        root,
        {
            0: [g.commit_info(), dropped, g.metadata()],
            1: [g.commit_info(), g.add("a.parquet", 1)],
            2: [g.commit_info("DROP FEATURE"), after, g.metadata(configuration=config)],
            3: [g.commit_info(), g.add("b.parquet", 1)],
        },
    )
    storage = LocalStorage(str(root))
    with pytest.raises(UnsupportedWriterFeatureError, match="someDroppedFeature"):
        write_checkpoint(Snapshot.load(storage, 1), now_ms=NOW)
    assert not list((root / "_delta_log").glob("*.checkpoint*"))
    assert write_checkpoint(Snapshot.load(storage, 3), now_ms=NOW).version == 3
