"""A short soak run in every ``make test``: the torture harness itself must work and find nothing.

``make soak`` runs the long version (several seeds, many steps); this one keeps the harness honest
(processes start, kills happen, every invariant is checked at least once against deltalake).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.soak.torture import Soak

pytestmark = pytest.mark.integration


def test_short_seeded_soak_breaks_no_invariant(tmp_path: Path) -> None:
    report = Soak(tmp_path / "soak", seed=7, kill_rate=0.5).run(steps=12)
    assert report.violations == []
    assert report.invariant_checks == 13
    assert report.versions_loaded["ours"] > 0
    assert report.versions_loaded["deltalake"] == report.versions_loaded["ours"]
    assert report.acked_commits["ours"] > 0 and report.acked_commits["deltalake"] > 0
