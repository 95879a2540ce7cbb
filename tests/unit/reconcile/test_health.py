"""Table health computed from real snapshots of the reference tables."""

from __future__ import annotations

from tests.conftest import TESTDATA
from tests.support.health_oracle import observe
from txntable.engine import Table


def health(name: str, min_size: int = 1000):
    return observe(Table.open(str(TESTDATA / name)).snapshot(), min_size)


def test_partitioned_table_with_one_file_per_partition_has_nothing_to_merge() -> None:
    h = health("delta-0.8.0-partitioned")
    assert (h.files, h.partitions, h.small_files, h.compactable_small_files) == (6, 6, 6, 0)
    assert h.writable and h.checkpoint_version is None and h.commits_since_checkpoint == 1


def test_unpartitioned_small_files_are_all_mergeable() -> None:
    h = health("simple_table")
    assert (h.partitions, h.small_files, h.compactable_small_files) == (1, 5, 5)
    assert health("simple_table", min_size=1).small_files == 0


def test_null_partition_counts_as_its_own_partition() -> None:
    assert health("delta-0.8.0-null-partition").partitions == 2


def test_checkpoint_lag_is_counted_from_the_checkpoint() -> None:
    h = health("latest_not_checkpointed")
    assert (h.version, h.checkpoint_version, h.commits_since_checkpoint) == (3, 2, 1)
    assert h.checkpoint_time is not None


def test_tables_we_cannot_write_are_observed_with_the_reason() -> None:
    h = health("variant-stats-no-checkpoint")
    assert not h.writable and "variantShredding-preview" in (h.unwritable_reason or "")
    # a checkpoint, log cleanup and VACUUM change no row: they still run there
    assert h.maintainable and h.unmaintainable_reason is None


def test_column_mapped_tables_are_maintainable() -> None:
    h = health("table_with_column_mapping")
    assert h.writable and h.unwritable_reason is None  # OPTIMIZE rewrites them physically
    assert h.partitions == 2  # partition values keyed by physical names are still counted


def test_deletion_vector_figures_match_a_plain_replay_of_the_log() -> None:
    from tests.support.json_replay import _json_replay

    for name in ("basic-dv-with-checkpoint", "table-with-dv-small", "simple_table"):
        live = _json_replay(TESTDATA / name).values()
        dvs = [a["deletionVector"] for a in live if a.get("deletionVector")]
        h = health(name)
        assert h.files_with_deletion_vectors == len(dvs), name
        assert h.deleted_rows == sum(dv["cardinality"] for dv in dvs), name
    assert health("basic-dv-with-checkpoint").deleted_rows > 0


def test_reclaimable_bytes_count_tombstones_past_the_file_retention(tmp_path) -> None:
    import pyarrow as pa

    from tests.support.health_oracle import _deletion_figures

    table = Table.create(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    for i in range(3):
        table.append(pa.table({"id": [i]}))
    snapshot = table.snapshot()
    txn = table.transaction()
    removed = list(snapshot.add_actions())[:2]
    txn.add(*(a.to_remove(deletion_timestamp=1_000, data_change=True) for a in removed))
    txn.commit("DELETE")
    after = table.snapshot()
    week = 7 * 86_400_000
    assert _deletion_figures(after, now_ms=1_000 + week)["reclaimable_bytes"] == 0
    assert _deletion_figures(after, now_ms=1_001 + week)["reclaimable_bytes"] == sum(
        a.size for a in removed
    )
