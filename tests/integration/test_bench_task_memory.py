"""Smoke test of ``bench/task_memory.py`` (the figure run sizing uses, issue 16.3): a small bin is
compacted in a fresh interpreter and its peak memory per input byte is measured and rendered."""

from __future__ import annotations

import pytest
from bench import task_memory

pytestmark = pytest.mark.integration


def test_task_memory_bench_measures_a_bin() -> None:
    result = task_memory.run(files=(2,))
    (row,) = result["rows"]
    assert row["files"] == 2 and row["error"] is None
    assert row["input_bytes"] > 0
    assert row["hwm_after_mb"] >= row["hwm_before_mb"] > 0
    text = task_memory.render(result)
    assert "| 2 |" in text and "per input byte" in text
