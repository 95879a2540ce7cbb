"""Replay rules and commit contents (PROTOCOL.md "Action Reconciliation") on hand-written logs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests import deltagen as g
from tests.conftest import TESTDATA, reference_tables
from tests.support.json_replay import _json_replay
from txntable.engine.errors import CorruptLogError, InvalidActionError
from txntable.engine.read.snapshot import Snapshot
from txntable.engine.storage.base import FsspecStorage
from txntable.engine.table import Table

fingerprint, load, log = g.fingerprint, g.load, g.log
CKPT_TABLE = "simple_table_with_checkpoint"  # commits 0..10, classic checkpoint at 10


@pytest.fixture
def ckpt_table(table_copy: Any) -> Path:
    path: Path = table_copy(CKPT_TABLE)
    return path


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
        # on a remote store (here: the same files under an object-store URI)
        remote = Snapshot.load(FsspecStorage(fs, root, "gs://bucket/tables/t"))
        assert remote.resolve("p%20q.parquet") == "gs://bucket/tables/t/p q.parquet"
        assert remote.resolve("/other/x%3Dy.parquet") == "gs://bucket/other/x=y.parquet"
        assert remote.resolve("s3://b/k.parquet") == "s3://b/k.parquet"
    finally:
        fs.rm(root, recursive=True)


@pytest.mark.parametrize(
    "name",
    [
        n
        for n in reference_tables()
        # tables whose log starts at 0, except the one we must refuse (test_features)
        if (TESTDATA / n / "_delta_log" / f"{0:020d}.json").exists()
        and n != "simple_table_features"
    ],
)
def test_arrow_state_reproduces_every_live_add_exactly(name: str) -> None:
    """``add_actions()`` (from the Arrow state) equals a dictionary replay of the JSON commits;
    only ``dataChange`` differs for files that came from a checkpoint (written as false)."""
    path = TESTDATA / name
    snapshot = load(path)
    ours = {a.key: a.to_json() for a in snapshot.add_actions()}
    expected = _json_replay(path)
    assert ours.keys() == expected.keys()
    from_checkpoint = snapshot.state.files.num_rows and any(
        ".checkpoint." in n for n in os.listdir(log(path))
    )
    for key, value in expected.items():
        if from_checkpoint:
            value = {**value, "dataChange": ours[key]["dataChange"]}
        assert ours[key] == value, key


def test_reconciliation_compares_raw_path_strings(tmp_path: Path) -> None:
    """A remove spelled differently from its add (``a b`` vs ``a%20b``) does not cancel it: keys
    are the raw log strings, so writers must copy the add's path."""
    g.write_log(
        tmp_path,
        {
            0: [g.protocol(), g.metadata(), g.add("a%20b.parquet"), g.add("c%2Bd.parquet")],
            1: [g.remove("a b.parquet"), g.remove("c%2bd.parquet")],
        },
    )
    s = load(tmp_path)
    assert sorted(s.files().column("path").to_pylist()) == ["a%20b.parquet", "c%2Bd.parquet"]
    assert s.file_uris()[0].endswith("/a b.parquet")
