"""Log layout edge cases (brief 9, items 1-13): damaged, cleaned and cluttered logs.

Every test copies a reference table (or writes a log by hand), damages it in one way, and checks
that the snapshot is still exactly right, or that the error names the problem.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests import deltagen as g
from txntable.engine import snapshot as snapshot_module
from txntable.engine.errors import (
    CorruptLogError,
    InvalidActionError,
    TableNotFoundError,
    TruncatedLogError,
    VersionGapError,
    VersionNotFoundError,
)
from txntable.engine.last_checkpoint import render
from txntable.engine.paths import LogFileKind
from txntable.engine.segment import build_segment
from txntable.engine.snapshot import Snapshot
from txntable.engine.storage import LocalStorage
from txntable.engine.table import Table

CKPT_TABLE = "simple_table_with_checkpoint"  # commits 0..10, classic checkpoint at 10


def fingerprint(s: Snapshot) -> dict[str, Any]:
    """Everything a snapshot reconstructs, in a comparable form."""
    files = s.files()
    dvs = files.column("deletionVector").to_pylist()
    rows = sorted(
        (path, size, json.dumps(pv, sort_keys=True), json.dumps(dv, sort_keys=True))
        for path, size, pv, dv in zip(
            files.column("path").to_pylist(),
            files.column("size").to_pylist(),
            [dict(v or []) for v in files.column("partitionValues").to_pylist()],
            dvs,
            strict=True,
        )
    )
    tombstones = sorted(s.tombstones().column("path").to_pylist())
    return {
        "version": s.version,
        "files": rows,
        "tombstones": tombstones,
        "protocol": s.protocol.to_json(),
        "metadata": s.metadata.to_json(),
        "txns": {k: v.to_json() for k, v in s.state.txns.items()},
        "domains": {k: v.to_json() for k, v in s.domains.items()},
    }


def load(path: Path, version: int | None = None) -> Snapshot:
    return Snapshot.load(LocalStorage(str(path)), version)


def log(path: Path) -> Path:
    return path / "_delta_log"


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


def test_unreadable_checkpoint_is_a_corrupt_log(ckpt_table: Path) -> None:
    (log(ckpt_table) / f"{10:020d}.checkpoint.parquet").write_bytes(b"PAR1 garbage")
    with pytest.raises(CorruptLogError, match="checkpoint"):
        load(ckpt_table)


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


# -- commit contents -------------------------------------------------------------------------
def test_invalid_json_line_names_the_file(ckpt_table: Path) -> None:
    (log(ckpt_table) / f"{11:020d}.json").write_text('{"commitInfo":{}}\n{"add": {oops\n')
    with pytest.raises(InvalidActionError, match=r"00000000000000000011\.json.*line 2"):
        load(ckpt_table)


def test_wrongly_typed_action_names_the_file(ckpt_table: Path) -> None:
    g.write_commit(ckpt_table, 11, [g.add("x.parquet", size="big")])  # type: ignore[arg-type]
    with pytest.raises(InvalidActionError, match=r"00000000000000000011\.json.*size"):
        load(ckpt_table)


def test_commit_without_trailing_newline(tmp_path: Path) -> None:
    g.write_commit(tmp_path, 0, [g.protocol(), g.metadata()], newline=False)
    g.write_commit(tmp_path, 1, [g.add("a.parquet"), g.add("b.parquet")], newline=False)
    assert sorted(load(tmp_path).files().column("path").to_pylist()) == ["a.parquet", "b.parquet"]


def test_unknown_actions_and_fields_are_ignored(tmp_path: Path) -> None:
    g.write_commit(
        tmp_path,
        0,
        [
            g.commit_info(nested={"deep": [1, {"x": None}]}),
            {"futureAction": {"anything": [1, 2]}},
            g.protocol(futureProtocolField=True),
            g.metadata(),
            g.add("a.parquet", futureAddField={"k": "v"}),
        ],
    )
    s = load(tmp_path)
    assert s.files().column("path").to_pylist() == ["a.parquet"]
    assert s.protocol.extra == {"futureProtocolField": True}


def test_missing_protocol_or_metadata_is_a_corrupt_log(tmp_path: Path) -> None:
    g.write_commit(tmp_path, 0, [g.metadata(), g.add("a.parquet")])
    with pytest.raises(CorruptLogError, match="no protocol or no metadata"):
        load(tmp_path)


# -- replay ----------------------------------------------------------------------------------
def test_add_remove_readd_resurrects_the_file(tmp_path: Path) -> None:
    g.write_log(
        tmp_path,
        {
            0: [g.protocol(), g.metadata()],
            1: [g.add("a.parquet", size=1)],
            2: [g.remove("a.parquet")],
            3: [g.add("a.parquet", size=3)],
        },
    )
    for version, files, tombs in [
        (1, [("a.parquet", 1)], []),
        (2, [], ["a.parquet"]),
        (3, [("a.parquet", 3)], []),
    ]:
        s = load(tmp_path, version)
        got = list(
            zip(
                s.files().column("path").to_pylist(),
                s.files().column("size").to_pylist(),
                strict=True,
            )
        )
        assert got == files
        assert s.tombstones().column("path").to_pylist() == tombs


def test_add_remove_readd_within_one_fold(tmp_path: Path) -> None:
    # the same sequence folded in one go (no intermediate snapshot)
    g.write_log(
        tmp_path,
        {
            0: [g.protocol(), g.metadata(), g.add("a.parquet", size=1)],
            1: [g.remove("a.parquet")],
            2: [g.add("a.parquet", size=3), g.add("b.parquet")],
            3: [g.remove("b.parquet")],
        },
    )
    s = load(tmp_path)
    assert s.files().column("path").to_pylist() == ["a.parquet"]
    assert s.files().column("size").to_pylist() == [3]
    assert s.tombstones().column("path").to_pylist() == ["b.parquet"]


def test_remove_of_a_never_added_path_is_a_pure_tombstone(tmp_path: Path) -> None:
    g.write_log(
        tmp_path,
        {0: [g.protocol(), g.metadata(), g.add("a.parquet")], 1: [g.remove("ghost.parquet")]},
    )
    s = load(tmp_path)
    assert s.files().column("path").to_pylist() == ["a.parquet"]
    assert s.tombstones().column("path").to_pylist() == ["ghost.parquet"]


def test_readd_with_new_stats_replaces_the_entry(tmp_path: Path) -> None:
    g.write_log(
        tmp_path,
        {
            0: [g.protocol(), g.metadata(), g.add("a.parquet", stats='{"numRecords":1}')],
            1: [g.add("a.parquet", stats='{"numRecords":2}')],
        },
    )
    s = load(tmp_path)
    assert s.files().column("stats").to_pylist() == ['{"numRecords":2}']


DV_PROTOCOL = g.protocol(
    3, 7, readerFeatures=["deletionVectors"], writerFeatures=["deletionVectors"]
)


def test_same_path_with_different_deletion_vectors(tmp_path: Path) -> None:
    dv1, dv2 = g.dv("dvone", 1), g.dv("dvtwo", 2, offset=None)
    g.write_log(
        tmp_path,
        {
            0: [DV_PROTOCOL, g.metadata(), g.add("a.parquet"), g.add("b.parquet")],
            1: [g.add("a.parquet", dv=dv1), g.remove("a.parquet")],
            2: [g.add("a.parquet", dv=dv2), g.remove("a.parquet", dv=dv1)],
            3: [g.remove("b.parquet", dv=dv1)],  # different key: b.parquet stays live
        },
    )
    s = load(tmp_path)
    rows = sorted(
        (p, (d or {}).get("pathOrInlineDv"))
        for p, d in zip(
            s.files().column("path").to_pylist(),
            s.files().column("deletionVector").to_pylist(),
            strict=True,
        )
    )
    assert rows == [("a.parquet", dv2["pathOrInlineDv"]), ("b.parquet", None)]
    for version in range(4):  # incremental folds agree with full loads
        assert fingerprint(load(tmp_path, 0 if version == 0 else version)) == fingerprint(
            Table.open(str(tmp_path)).snapshot(version=version)
        )
    s1 = load(tmp_path, 1)
    by_path = dict(
        zip(
            s1.files().column("path").to_pylist(),
            s1.files().column("deletionVector").to_pylist(),
            strict=True,
        )
    )
    assert by_path["a.parquet"]["cardinality"] == 1
    assert by_path["b.parquet"] is None


def test_txn_latest_wins_even_when_decreasing_and_domains_can_be_removed(tmp_path: Path) -> None:
    dm = {"domainMetadata": {"domain": "app.x", "configuration": '{"a":1}', "removed": False}}
    gone = {"domainMetadata": {"domain": "app.x", "configuration": "", "removed": True}}
    back = {"domainMetadata": {"domain": "app.x", "configuration": '{"a":2}', "removed": False}}
    g.write_log(
        tmp_path,
        {
            0: [g.protocol(1, 7, writerFeatures=["domainMetadata"]), g.metadata(), dm,
                {"txn": {"appId": "s", "version": 5}}],
            1: [{"txn": {"appId": "s", "version": 3, "lastUpdated": 7}}, gone],
            2: [back],
        },
    )  # fmt: skip
    assert load(tmp_path, 0).txn_version("s") == 5
    assert load(tmp_path, 1).txn_version("s") == 3
    assert load(tmp_path, 1).domains == {}
    assert load(tmp_path).domains["app.x"].configuration == '{"a":2}'
    assert load(tmp_path).txn_version("other") is None


def test_metadata_and_protocol_changes_mid_log(tmp_path: Path) -> None:
    g.write_log(
        tmp_path,
        {
            0: [g.protocol(), g.metadata(), g.add("a.parquet")],
            1: [g.metadata(["part"], {"delta.appendOnly": "true"}), g.protocol(1, 3)],
        },
    )
    s = load(tmp_path)
    assert s.partition_columns == ["part"]
    assert s.configuration == {"delta.appendOnly": "true"}
    assert s.protocol.min_writer_version == 3
    assert load(tmp_path, 0).partition_columns == []


# -- refresh and time travel -----------------------------------------------------------------
def test_refresh_equals_a_full_load(tmp_path: Path) -> None:
    g.simple_log(tmp_path, 3)
    snap = load(tmp_path)
    assert snap.refresh() is snap
    g.write_commit(tmp_path, 3, [g.remove("f1.parquet"), g.add("g.parquet")])
    g.write_commit(
        tmp_path, 4, [g.metadata(configuration={"k": "v"}), {"txn": {"appId": "a", "version": 1}}]
    )
    refreshed = snap.refresh()
    assert refreshed.version == 4
    assert fingerprint(refreshed) == fingerprint(load(tmp_path))
    assert snap.version == 2, "refresh must not change the old snapshot"


@pytest.mark.parametrize("replay_limit", [0, 1000])
def test_refresh_across_a_new_checkpoint(
    ckpt_table: Path, monkeypatch: pytest.MonkeyPatch, replay_limit: int
) -> None:
    # replay_limit 0 forces the "restart from the new checkpoint" branch, 1000 the replay branch
    monkeypatch.setattr(snapshot_module, "_REFRESH_REPLAY_LIMIT", replay_limit)
    old = load(ckpt_table, 4)
    g.write_commit(ckpt_table, 11, [g.add("late.parquet")])
    assert fingerprint(old.refresh()) == fingerprint(load(ckpt_table))


def test_refresh_after_log_cleanup(ckpt_table: Path) -> None:
    old = load(ckpt_table, 4)
    g.write_commit(ckpt_table, 11, [g.add("late.parquet")])
    for v in range(10):  # metadata cleanup deleted everything before the checkpoint
        os.unlink(log(ckpt_table) / f"{v:020d}.json")
    refreshed = old.refresh()
    assert refreshed.version == 11
    assert fingerprint(refreshed) == fingerprint(load(ckpt_table))


def test_table_snapshot_follows_new_commits(tmp_path: Path) -> None:
    g.simple_log(tmp_path, 2)
    table = Table.open(str(tmp_path))
    assert table.snapshot().version == 1
    g.write_commit(tmp_path, 2, [g.add("n.parquet")])
    assert table.snapshot().version == 2
    assert fingerprint(table.snapshot()) == fingerprint(load(tmp_path))


def test_time_travel_bounds(ckpt_table: Path) -> None:
    with pytest.raises(VersionNotFoundError, match="newest version is 10"):
        load(ckpt_table, 11)
    for v in range(10):
        os.unlink(log(ckpt_table) / f"{v:020d}.json")
    assert load(ckpt_table, 10).version == 10
    for v in (0, 3, 9):
        with pytest.raises(VersionNotFoundError):
            load(ckpt_table, v)
    table = Table.open(str(ckpt_table))
    with pytest.raises(VersionNotFoundError):
        table.snapshot(version=5)
    with pytest.raises(VersionNotFoundError):
        table.snapshot(version=11)


def test_time_travel_to_every_version_equals_replay_without_checkpoint(
    ckpt_table: Path, tmp_path: Path
) -> None:
    # the same log without its checkpoint is replayed from commit 0 at every version
    bare = tmp_path / "bare"
    shutil.copytree(ckpt_table, bare)
    for name in ("_last_checkpoint", f"{10:020d}.checkpoint.parquet"):
        os.unlink(log(bare) / name)
    for v in range(11):
        a, b = fingerprint(load(ckpt_table, v)), fingerprint(load(bare, v))
        # checkpoints keep only unexpired tombstones; compare live state
        a.pop("tombstones")
        b.pop("tombstones")
        assert a == b, v


def test_absolute_and_relative_paths_resolve(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    table = tmp_path / "t"
    g.write_log(
        table,
        {
            0: [
                g.protocol(),
                g.metadata(),
                g.add("rel%20a.parquet"),
                g.add(f"file://{other}/abs%20b.parquet"),
                g.add(f"file:{other}/c%2Bd.parquet"),
                g.add(f"{other}/scheme-less.parquet"),
                g.add("s3://bucket/t/x%3Dy.parquet"),
            ]
        },
    )
    # (delta-rs 1.x joins absolute URIs onto the table root; the protocol says they are absolute)
    assert sorted(load(table).file_uris()) == sorted(
        [
            f"{table}/rel a.parquet",
            f"{other}/abs b.parquet",
            f"{other}/c+d.parquet",
            f"{other}/scheme-less.parquet",
            "s3://bucket/t/x=y.parquet",
        ]
    )


def test_memory_storage_reads_the_same_log(tmp_path: Path) -> None:
    import fsspec

    g.simple_log(tmp_path, 4)
    g.write_commit(tmp_path, 4, [g.remove("f2.parquet"), g.add("p%20q.parquet")])
    fs = fsspec.filesystem("memory")
    root = "/txntable-test-segment"
    for name in os.listdir(log(tmp_path)):
        fs.pipe_file(f"{root}/_delta_log/{name}", (log(tmp_path) / name).read_bytes())
    try:
        table = Table.open(f"memory://{root}")
        snap = table.snapshot()
        expected = fingerprint(load(tmp_path))
        assert fingerprint(snap) == expected
        assert f"memory://{root}/p q.parquet" in snap.file_uris()
        assert table.snapshot(version=2).version == 2
    finally:
        fs.rm(root, recursive=True)
