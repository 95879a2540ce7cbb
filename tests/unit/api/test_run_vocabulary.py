"""The words of a run, defined once in txntable.api: its kind and its backend."""

from __future__ import annotations

import pytest

from txntable.api.common import Backend, RunKind


@pytest.mark.parametrize(
    ("label", "kind"),
    [("optimize", RunKind.OPTIMIZE), ("vacuum", RunKind.VACUUM), ("rewrite", None), (None, None)],
    ids=["optimize", "vacuum", "unknown-label", "no-label"],
)
def test_a_kind_label_reads_as_its_kind_or_none(label: str | None, kind: RunKind | None) -> None:
    assert RunKind.of(label) is kind


def test_messages_call_an_optimize_run_a_compaction() -> None:
    assert [k.noun for k in RunKind] == ["compaction", "checkpoint", "vacuum"]


def test_backend_reads_both_spellings_and_nothing_else() -> None:
    assert Backend("SparkApplication") is Backend("sparkapplication") is Backend.SPARK_APPLICATION
    assert [b.config_name for b in Backend] == ["sparkapplication", "job", "local"]
    with pytest.raises(ValueError, match="yarn"):
        Backend("yarn")
