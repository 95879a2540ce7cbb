"""Our OPTIMIZE, checkpoint and VACUUM racing delta-spark's writers (issue 21.4), a few rounds.

One round with our maintenance and one with delta-spark's own (the reference: the same writers,
seed and timing), each checked by ``tests.deltaspark.race``: no acknowledged row lost, none
resurrected, every acknowledged streaming batch there, every retained version read by deltalake
and the versions around the maintainer's commits by delta-spark with the same rows. Conflicts
must be the ones Delta's rules give for the pair, on both sides: a blind append (INSERT, the
streaming sink) never loses to maintenance; a DELETE, UPDATE or MERGE loses to an OPTIMIZE that
removed files it read only with ``ConcurrentDeleteReadException`` or
``ConcurrentDeleteDeleteException``; a checkpoint or a VACUUM makes no writer lose. ``make
soak-deltaspark`` runs many rounds and prints the figures (docs/reliability.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deltaspark.client import DeltaSpark
from tests.deltaspark.race import Round, RoundResult

pytestmark = [pytest.mark.integration, pytest.mark.deltaspark, pytest.mark.timeout(1200)]

ALLOWED_WRITER_LOSSES = {"ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException"}


def _check_conflicts(result: RoundResult) -> None:
    for key in result.conflicts:
        loser, rest = key.split(" lost to ", 1)
        winner, exception = rest.split(": ", 1)
        if loser in ("append", "stream"):
            raise AssertionError(f"a blind append lost a conflict: {key}")
        if loser in ("delete", "update", "merge") and "OPTIMIZE" in winner:
            assert exception in ALLOWED_WRITER_LOSSES, key
        assert not any(op in winner for op in ("VACUUM", "CHECKPOINT")), key


@pytest.mark.parametrize("maintainer", ["ours", "delta-spark"])
def test_race_round(delta_spark: DeltaSpark, tmp_path: Path, maintainer: str) -> None:
    result = Round(delta_spark, tmp_path, seed=21, maintainer=maintainer, ops=3).run()
    assert not result.problems, result.problems
    assert result.acknowledged_rows > 0 and result.writer_ops == 12
    assert [m["step"] for m in result.maintenance] == ["optimize", "checkpoint", "vacuum"]
    assert not [m for m in result.maintenance if "error" in m], result.maintenance
    _check_conflicts(result)
