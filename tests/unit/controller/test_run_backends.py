"""Which backends a table's runs are listed on (issue 33.5): its policies', nothing for a kind
without a policy."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.controller import checkpointing
from tests.unit.policy_support import compaction_policy
from txntable.api.common import Backend
from txntable.controller.runs import run_backends

SPARK, JOB = Backend.SPARK_APPLICATION, Backend.JOB


@pytest.mark.parametrize(
    ("compaction", "checkpoint", "expected"),
    [
        pytest.param({"backend": "Job"}, None, {JOB}, id="job-policy-no-checkpoint-policy"),
        pytest.param({}, None, {SPARK}, id="policy-naming-none-gets-the-default"),
        pytest.param({"backend": "Job"}, {}, {JOB, SPARK}, id="each-policy-its-own"),
        pytest.param(None, None, set(), id="no-policy-no-runs"),
    ],
)
def test_only_the_policies_backends(
    compaction: dict[str, Any] | None, checkpoint: dict[str, Any] | None, expected: set[Backend]
) -> None:
    comp = None if compaction is None else compaction_policy({"spark": compaction})
    ckpt = None if checkpoint is None else checkpointing(spark=checkpoint)
    assert run_backends(SPARK, comp, ckpt) == expected
