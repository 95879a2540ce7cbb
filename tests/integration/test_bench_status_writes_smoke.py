"""The status-writes benchmark runs end to end, and its finding holds: while the run limit is
full, tables with nothing due write no status (issue 23.10; before: one write per table per
run starting or ending anywhere)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench import status_writes

pytestmark = pytest.mark.integration


def test_tables_with_nothing_due_write_no_status_while_the_limit_is_full(tmp_path: Path) -> None:
    row = status_writes.measure(20, 6, 8, tmp_path)  # 6 due tables, a limit of 4: always full
    assert row["writes_idle"] == 0
    assert row["writes_due"] > 0  # the due tables' own runs are still reported
    assert "| 20 | 6 | 8 |" in status_writes.render({"limit": 4, "rows": [row]})
