"""Log layout edge cases: damaged, cleaned and cluttered logs.

Every test copies a reference table (or writes a log by hand), damages it in one way, and checks
that the snapshot is still exactly right, or that the error names the problem.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests import deltagen as g
from txntable.engine.errors import (
    CorruptLogError,
    TableNotFoundError,
    TruncatedLogError,
    VersionGapError,
)
from txntable.engine.read.last_checkpoint import render
from txntable.engine.read.segment import build_segment
from txntable.engine.storage.base import LocalStorage
from txntable.engine.storage.paths import LogFileKind
from txntable.engine.table import Table

CKPT_TABLE = "simple_table_with_checkpoint"  # commits 0..10, classic checkpoint at 10
fingerprint, load, log = g.fingerprint, g.load, g.log


@pytest.fixture
def ckpt_table(table_copy: Any) -> Path:
    path: Path = table_copy(CKPT_TABLE)
    return path


# -- listing ---------------------------------------------------------------------------------
def test_junk_in_the_log_directory_changes_nothing(ckpt_table: Path) -> None:
    before = fingerprint(load(ckpt_table))
    d = log(ckpt_table)
    junk = {
        ".00000000000000000011.json.0f3a6c1e-2b7c-4a51-9b7e-1f0d5d8c2a11.tmp": "{}",
        "_commit_0f3a6c1e-2b7c-4a51-9b7e-1f0d5d8c2a11.json.tmp": "{}",
        "foo.txt": "hello",
        "00000000000000000011.crc": "{}",
        "00000000000000000010.crc": '{"numFiles": 999}',
        "11.json": "not even json",
        "0000000000000000011.json": "not even json",  # 19 digits
        "00000000000000000011.json.bak": "junk",
        "00000000000000000011.checkpoint.0000000001.0000000002.parquet": "",  # empty part
        "00000000000000000011.00000000000000000012.compacted.json": "junk",
    }
    for name, text in junk.items():
        (d / name).write_text(text)
    (d / ".tmp").mkdir()
    (d / ".tmp" / "00000000000000000011.json.uuid").write_text("{}")
    (d / "_staged_commits").mkdir()
    (d / "_staged_commits" / "00000000000000000011.uuid.json").write_text("{}")
    (d / "_sidecars").mkdir()
    assert fingerprint(load(ckpt_table)) == before
    assert fingerprint(Table.open(str(ckpt_table)).snapshot()) == before
    os.unlink(d / "_last_checkpoint")
    assert fingerprint(load(ckpt_table)) == before


def test_only_junk_in_the_log_is_not_a_table(tmp_path: Path) -> None:
    (tmp_path / "_delta_log").mkdir()
    (tmp_path / "_delta_log" / "foo.txt").write_text("x")
    (tmp_path / "_delta_log" / "3.json").write_text("{}")
    with pytest.raises(TableNotFoundError):
        Table.open(str(tmp_path)).snapshot()


def test_missing_log_is_not_a_table(tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError):
        Table.open(str(tmp_path))


@pytest.mark.parametrize("spelling", ["plain", "file-uri", "file-uri-encoded"])
def test_table_locations_with_special_characters(tmp_path: Path, spelling: str) -> None:
    table = g.simple_log(tmp_path / "a b%2C日本", 2)
    uri = {
        "plain": str(table),
        # unencoded: fine as long as the name has no '%' (a '%2C' in a URI means ',')
        "file-uri": f"file://{table}".replace("%2C", "%252C"),
        "file-uri-encoded": f"file://{tmp_path}/a%20b%252C%E6%97%A5%E6%9C%AC",
    }[spelling]
    snap = Table.open(uri).snapshot()
    assert snap.version == 1
    assert snap.file_uris() == [f"{table}/f1.parquet"]


# -- gaps and truncation ---------------------------------------------------------------------
def test_gap_after_the_checkpoint_is_an_error(ckpt_table: Path) -> None:
    g.write_commit(ckpt_table, 12, [g.commit_info()])  # 11 missing
    with pytest.raises(VersionGapError, match="missing commit version 11"):
        load(ckpt_table)
    g.write_commit(ckpt_table, 11, [g.commit_info()])
    assert load(ckpt_table).version == 12


def test_gap_after_the_checkpoint_without_hint_is_an_error(ckpt_table: Path) -> None:
    os.unlink(log(ckpt_table) / "_last_checkpoint")
    g.write_commit(ckpt_table, 13, [g.commit_info()])
    g.write_commit(ckpt_table, 11, [g.commit_info()])
    with pytest.raises(VersionGapError, match="missing commit version 12"):
        load(ckpt_table)


@pytest.mark.parametrize("keep_hint", [True, False])
def test_gap_before_the_checkpoint_is_fine(ckpt_table: Path, keep_hint: bool) -> None:
    before = fingerprint(load(ckpt_table))
    for v in (0, 3, 4, 9):
        os.unlink(log(ckpt_table) / f"{v:020d}.json")
    if not keep_hint:
        os.unlink(log(ckpt_table) / "_last_checkpoint")
    assert fingerprint(load(ckpt_table)) == before


def test_no_checkpoint_and_first_commit_missing_is_truncated(table_copy: Any) -> None:
    path = table_copy("simple_table")
    os.unlink(log(path) / f"{0:020d}.json")
    with pytest.raises(TruncatedLogError, match="starts at version 1"):
        load(path)


def test_gap_without_checkpoint_is_an_error(table_copy: Any) -> None:
    path = table_copy("simple_table")
    os.unlink(log(path) / f"{2:020d}.json")
    with pytest.raises(VersionGapError):
        load(path)


def test_checkpoint_whose_own_commit_was_cleaned_up_is_read(ckpt_table: Path) -> None:
    before = fingerprint(load(ckpt_table))
    for v in range(11):
        os.unlink(log(ckpt_table) / f"{v:020d}.json")
    assert fingerprint(load(ckpt_table)) == before


# -- checkpoints -----------------------------------------------------------------------------
def test_multi_part_checkpoint_gives_the_same_snapshot(ckpt_table: Path) -> None:
    before = fingerprint(load(ckpt_table))
    g.split_checkpoint(log(ckpt_table), 10, 3)
    for v in range(10):  # prove the parts are really used: no replay possible
        os.unlink(log(ckpt_table) / f"{v:020d}.json")
    segment = build_segment(LocalStorage(str(ckpt_table)))
    assert segment.checkpoint is not None
    assert segment.checkpoint.kind is LogFileKind.CHECKPOINT_MULTIPART
    assert len(segment.checkpoint.files) == 3
    assert fingerprint(load(ckpt_table)) == before


def test_classic_and_multi_part_at_one_version_agree(ckpt_table: Path) -> None:
    before = fingerprint(load(ckpt_table))
    classic = log(ckpt_table) / f"{10:020d}.checkpoint.parquet"
    saved = classic.read_bytes()
    g.split_checkpoint(log(ckpt_table), 10, 2)
    classic.write_bytes(saved)
    assert fingerprint(load(ckpt_table)) == before
    classic.unlink()
    assert fingerprint(load(ckpt_table)) == before


def test_missing_checkpoint_part_falls_back_to_full_replay(ckpt_table: Path) -> None:
    before = fingerprint(load(ckpt_table))
    parts = g.split_checkpoint(log(ckpt_table), 10, 2)
    parts[1].unlink()
    (log(ckpt_table) / "_last_checkpoint").write_bytes(
        render({"version": 10, "size": 13, "parts": 2})
    )
    segment = build_segment(LocalStorage(str(ckpt_table)))
    assert segment.checkpoint is None
    assert fingerprint(load(ckpt_table)) == before


def test_missing_checkpoint_part_falls_back_to_an_older_checkpoint(ckpt_table: Path) -> None:
    g.write_commit(ckpt_table, 11, [g.commit_info(), g.add("extra-11.parquet", size=11)])
    g.write_commit(ckpt_table, 12, [g.commit_info(), g.remove("extra-11.parquet")])
    expected = fingerprint(load(ckpt_table))
    # an incomplete two-part checkpoint at 12 (part 2 never written), named by the hint
    ckpt10 = log(ckpt_table) / f"{10:020d}.checkpoint.parquet"
    part1 = log(ckpt_table) / f"{12:020d}.checkpoint.0000000001.0000000002.parquet"
    pq.write_table(pq.read_table(ckpt10).slice(0, 3), part1)
    (log(ckpt_table) / "_last_checkpoint").write_bytes(
        render({"version": 12, "size": 13, "parts": 2})
    )
    for v in range(10):
        os.unlink(log(ckpt_table) / f"{v:020d}.json")
    segment = build_segment(LocalStorage(str(ckpt_table)))
    assert segment.checkpoint is not None and segment.checkpoint.version == 10
    assert [c.version for c in segment.commits] == [11, 12]
    assert fingerprint(load(ckpt_table)) == expected


def test_zero_byte_checkpoint_is_ignored(table_copy: Any) -> None:
    path = table_copy("latest_not_checkpointed")  # checkpoint at 2, commits 0..3
    before = fingerprint(load(path))
    (log(path) / f"{3:020d}.checkpoint.parquet").write_bytes(b"")
    (log(path) / "_last_checkpoint").write_bytes(render({"version": 3, "size": 5}))
    assert fingerprint(load(path)) == before
    segment = build_segment(LocalStorage(str(path)))
    assert segment.checkpoint is not None and segment.checkpoint.version == 2


def test_unreadable_checkpoint_is_passed_over_while_the_commits_cover_it(
    ckpt_table: Path,
) -> None:
    """As Delta Spark does: a corrupt checkpoint costs a replay from an older starting point
    when one exists; without one it is a corrupt log."""
    before = fingerprint(load(ckpt_table))
    (log(ckpt_table) / f"{10:020d}.checkpoint.parquet").write_bytes(b"PAR1 garbage")
    assert fingerprint(load(ckpt_table)) == before
    os.unlink(log(ckpt_table) / f"{0:020d}.json")
    with pytest.raises(CorruptLogError, match="checkpoint"):
        load(ckpt_table)


def test_a_checkpoint_deleted_after_the_listing_costs_one_new_listing(
    ckpt_table: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cleanup replaced the checkpoint a reader had just listed: the reader lists again."""
    storage = LocalStorage(str(ckpt_table))
    before = fingerprint(load(ckpt_table))
    real = build_segment(storage)
    assert real.checkpoint is not None
    stale = real.checkpoint.files[0]
    gone = type(stale)(stale.name.replace("10.checkpoint", "09.checkpoint"), 10, stale.mtime_ms)
    calls: list[int] = []

    def first_stale(_storage: Any, version: Any = None, **kw: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            return type(real)(
                real.version,
                type(real.checkpoint)(real.checkpoint.version, real.checkpoint.kind, (gone,)),
                real.commits,
                real.timestamp_ms,
            )
        return build_segment(_storage, version, **kw)

    import txntable.engine.read.snapshot as snapshot_module

    monkeypatch.setattr(snapshot_module, "build_segment", first_stale)
    assert fingerprint(snapshot_module.Snapshot.load(storage)) == before
    assert len(calls) == 2


# -- the _last_checkpoint hint ---------------------------------------------------------------
HINTS = {
    "missing": None,
    "stale": render({"version": 2, "size": 3}),
    "deleted-checkpoint": render({"version": 7, "size": 3}),
    "beyond-latest": render({"version": 40, "size": 3}),
    "truncated": b'{"version":10,"si',
    "checksum-mismatch": b'{"version":7,"size":13,"checksum":"6a92d155a59bf2eecbd4b4ec7fd1f875"}',
    "unknown-fields": render({"version": 10, "size": 13, "future": {"x": [1, None]}}),
    "v2-info": render({"version": 10, "size": 13, "v2Checkpoint": {"path": "nope.json"}}),
    "empty": b"",
    "not-json-object": b"[10]",
}


@pytest.mark.parametrize("case", sorted(HINTS))
def test_bad_hints_never_change_the_snapshot(ckpt_table: Path, case: str) -> None:
    before = fingerprint(load(ckpt_table))
    hint = log(ckpt_table) / "_last_checkpoint"
    data = HINTS[case]
    if data is None:
        hint.unlink()
    else:
        hint.write_bytes(data)
    assert fingerprint(load(ckpt_table)) == before
    for v in (0, 5, 9, 10):
        expected = fingerprint(load(ckpt_table, v)) if case == "missing" else _fresh(ckpt_table, v)
        assert fingerprint(load(ckpt_table, v)) == expected


def _fresh(path: Path, version: int) -> dict[str, Any]:
    """The snapshot at ``version`` computed without any hint."""
    hint = log(path) / "_last_checkpoint"
    saved = hint.read_bytes()
    hint.unlink()
    try:
        return fingerprint(load(path, version))
    finally:
        hint.write_bytes(saved)


def test_hint_pointing_to_a_deleted_checkpoint_with_cleaned_log_is_an_error(
    ckpt_table: Path,
) -> None:
    (log(ckpt_table) / f"{10:020d}.checkpoint.parquet").unlink()
    for v in range(5):
        os.unlink(log(ckpt_table) / f"{v:020d}.json")
    with pytest.raises(TruncatedLogError):
        load(ckpt_table)


# -- V2 checkpoints --------------------------------------------------------------------------
_STR_MAP = pa.map_(pa.string(), pa.string())
_V2_TYPES = {
    "checkpointMetadata": pa.struct([("version", pa.int64()), ("tags", _STR_MAP)]),
    "sidecar": pa.struct(
        [("path", pa.string()), ("sizeInBytes", pa.int64()), ("modificationTime", pa.int64())]
    ),
    "protocol": pa.struct(
        [
            ("minReaderVersion", pa.int32()),
            ("minWriterVersion", pa.int32()),
            ("readerFeatures", pa.list_(pa.string())),
            ("writerFeatures", pa.list_(pa.string())),
        ]
    ),
    "metaData": pa.struct(
        [
            ("id", pa.string()),
            ("format", pa.struct([("provider", pa.string()), ("options", _STR_MAP)])),
            ("schemaString", pa.string()),
            ("partitionColumns", pa.list_(pa.string())),
            ("configuration", _STR_MAP),
            ("createdTime", pa.int64()),
        ]
    ),
}


def _as_arrow(value: Any, arrow_type: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_map(arrow_type):
        return list(value.items())
    if pa.types.is_struct(arrow_type):
        return {
            f.name: _as_arrow(value.get(f.name), f.type)
            for f in (arrow_type.field(i) for i in range(arrow_type.num_fields))
        }
    return value


@pytest.mark.parametrize("name_kind", ["uuid", "classic"])
def test_v2_checkpoint_as_parquet_with_sidecars(table_copy: Any, name_kind: str) -> None:
    """The JSON top-level V2 checkpoint rewritten as Parquet (UUID-named, and classic-named:
    the kind is decided by content) gives the same snapshot."""
    path = table_copy("checkpoint-v2-table")
    expected = fingerprint(load(path))
    d = log(path)
    (top,) = d.glob(f"{8:020d}.checkpoint.*.json")
    rows = [json.loads(line) for line in top.read_text().splitlines() if line.strip()]
    columns = {
        key: pa.array([_as_arrow(r.get(key), t) for r in rows], t) for key, t in _V2_TYPES.items()
    }
    target = (
        top.with_suffix(".parquet") if name_kind == "uuid" else d / f"{8:020d}.checkpoint.parquet"
    )
    pq.write_table(pa.table(columns), target)
    top.unlink()
    for v in range(9):
        (d / f"{v:020d}.json").unlink()
    (d / "_last_checkpoint").unlink()
    segment = build_segment(LocalStorage(str(path)))
    assert segment.checkpoint is not None and segment.checkpoint.version == 8
    assert fingerprint(load(path)) == expected


def test_v2_checkpoint_with_missing_sidecar_is_a_corrupt_log(table_copy: Any) -> None:
    path = table_copy("checkpoint-v2-table")
    for sidecar in (log(path) / "_sidecars").glob(f"{8:020d}.*"):
        sidecar.unlink()
    with pytest.raises(CorruptLogError, match="_sidecars/00000000000000000008"):
        load(path)


def test_stats_are_rebuilt_from_stats_parsed(table_copy: Any) -> None:
    """A checkpoint without JSON ``stats`` (only ``stats_parsed``) gives the same statistics,
    timestamps in Delta's ISO form."""
    path = table_copy("checkpoint-v2-table")
    expected = {
        p: json.loads(s)
        for p, s in zip(
            load(path).files().column("path").to_pylist(),
            load(path).files().column("stats").to_pylist(),
            strict=True,
        )
    }
    for sidecar in (log(path) / "_sidecars").glob("*.parquet"):
        table = pq.read_table(sidecar)
        add = table.column("add").combine_chunks()
        keep = [f for f in add.type if f.name != "stats"]
        stripped = pa.StructArray.from_arrays(
            [add.field(f.name) for f in keep], fields=keep, mask=pc.invert(pc.is_valid(add))
        )
        table = table.set_column(table.schema.get_field_index("add"), "add", stripped)
        pq.write_table(table, sidecar)
    snap = load(path)
    got = {
        p: json.loads(s)
        for p, s in zip(
            snap.files().column("path").to_pylist(),
            snap.files().column("stats").to_pylist(),
            strict=True,
        )
    }
    assert got == expected
    assert any("T" in v["minValues"]["created_at"] for v in got.values())
