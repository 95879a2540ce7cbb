"""``bench/commit_events.py --quick`` still runs end to end (one trial per mode, no timing checks).

It drives the local controller loop with and without the LogProbe, so ``make bench`` cannot rot
unnoticed between full runs; the counts it reports are checked where they are deterministic.
"""

from __future__ import annotations

import pytest
from bench import commit_events

pytestmark = pytest.mark.integration


def test_commit_events_benchmark_runs_and_renders() -> None:
    result = commit_events.run(quick=True)
    events, polling = result["modes"]["events"], result["modes"]["polling"]
    for mode in (events, polling):
        (trial,) = mode["trials"]
        assert trial["decided_after_s"] is not None  # the burst was compacted in both modes
        assert trial["observations"] >= 1
    assert events["idle"]["probes_per_min"] > 0  # the LogProbe ran while idle
    assert polling["idle"]["probes_per_min"] == 0
    assert polling["idle"]["listings_per_min"] > 0
    text = commit_events.render(result)
    assert "| events |" in text and "| polling |" in text
