"""Table health computed from real snapshots of the reference tables."""

from __future__ import annotations

from tests.conftest import TESTDATA
from txntable.engine import Table
from txntable.reconcile.health import observe


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
    h = health("table_with_column_mapping")
    assert not h.writable and "columnMapping" in (h.unwritable_reason or "")
    assert h.partitions == 2  # partition values keyed by physical names are still counted
