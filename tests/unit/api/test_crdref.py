"""docs/crds.md is generated from crds/ and must be current."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

from tests.conftest import REPO
from txntable.api import crdref


def test_committed_reference_is_current() -> None:
    expected = crdref.render(crdref.load(REPO / "crds"))
    committed = (REPO / "docs" / "crds.md").read_text()
    assert committed == expected, "regenerate: python -m txntable.api.crdref > docs/crds.md"


def test_reference_lists_every_spec_field_and_rule() -> None:
    text = crdref.render(crdref.load(REPO / "crds"))
    for needle in (
        "## TxnTable",
        "## CompactionPolicy",
        "## CheckpointPolicy",
        "| `spec.location` |",
        "| `spec.triggers.schedule` |",
        "| `spec.logCleanup.logRetention` |",
        "`self == oldSelf`",
        "minFileSize must not exceed targetFileSize",
    ):
        assert needle in text


def test_main_writes_to_stdout() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert crdref.main(["--crds", str(REPO / "crds")]) == 0
    assert out.getvalue() == (REPO / "docs" / "crds.md").read_text()
