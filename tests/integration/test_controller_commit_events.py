"""The Kopf controller's commit-events daemon, in-process against kmock with a real local table.

The table's ``observeInterval`` is ten minutes, so after the first observation the polling timer
leaves it alone: only the LogProbe waking the ``commit-events`` daemon can bring the status to
the version a burst of commits made. The status says the table is event-driven.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.support.kmock_controller import (
    apply,
    manifests,
    metrics_text,
    operate_until,
    register_resources,
    status,
)
from txntable.engine import Table

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]


async def test_a_burst_of_commits_wakes_the_table_before_its_next_poll(
    kmock: Any, tmp_path: Path
) -> None:
    location = tmp_path / "events"
    schema = pa.schema([("id", pa.int64())])
    table = Table.create(str(location), schema)
    register_resources(kmock)
    docs = manifests(str(location), small_files=10_000)  # nothing to compact: no Spark here
    docs["table"]["spec"]["observeInterval"] = "10m"
    docs["table"]["spec"].pop("checkpointPolicyRef")
    apply(kmock, docs)
    wrote: list[bool] = []
    scraped: list[str] = []

    def caught_up() -> bool:
        st = status(kmock)
        if st.get("version") == 0 and not wrote:
            for i in range(6):  # after the first observation: the burst
                table.append(pa.table({"id": [i]}, schema=schema))
            wrote.append(True)
        done = st.get("version") == 6
        if done:
            scraped.append(metrics_text())
        return done

    assert await operate_until(kmock, caught_up, timeout=90), status(kmock)
    observation = status(kmock)["observation"]
    assert observation["mode"] == "Events" and observation["source"] == "LogProbe"
    assert 'txntable_table_event_driven{namespace="default",table="events"} 1.0' in scraped[0]
    assert 'txntable_commit_events_total{source="LogProbe"}' in scraped[0]
