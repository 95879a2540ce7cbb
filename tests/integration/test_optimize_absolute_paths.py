"""OPTIMIZE reads data files the log names by absolute URI (shallow clones, files outside the
table root) through the table's storage classes, and deltalake reads the same rows after."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from tests.integration.optimize_helpers import fragmented_table
from tests.oracle_read import read
from txntable.api.optimize_options import OptimizeOptions
from txntable.engine.commit.transaction import Transaction
from txntable.engine.table import Table
from txntable.maintenance.executor_arrow import ArrowExecutor
from txntable.maintenance.optimize import optimize

pytestmark = pytest.mark.integration


def test_files_named_by_absolute_uri_are_compacted(tmp_path: Path) -> None:
    root = fragmented_table(tmp_path / "t", commits=6, rows=50, partitioned=False)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    table = Table.open(str(root))
    snapshot = table.snapshot()
    moved = list(snapshot.add_actions())[:3]
    txn = Transaction(table, snapshot)
    for add in moved:
        target = outside / Path(add.path).name
        shutil.copy(root / add.path, target)
        txn.add(
            add.to_remove(deletion_timestamp=0, data_change=False),
            replace(add, path=target.as_uri(), data_change=False),
        )
    txn.commit("RESTORE")  # any rows-unchanged operation: the same rows, other files
    before = read(root)

    result = optimize(table, OptimizeOptions(target_file_size=1 << 30), ArrowExecutor())

    assert result.error is None and result.bins_committed == 1, result.to_json()
    after = read(root)
    assert after["digest"] == before["digest"] and after["rows"] == before["rows"] == 300
    live = list(Table.open(str(root)).snapshot().add_actions())
    assert len(live) == 1 and not live[0].path.startswith("file:")
