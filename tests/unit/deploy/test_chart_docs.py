"""The chart's generated artifacts are current, and every value is documented.

docs/chart-values.md is rendered from values.yaml comments and the chart's files/crds/ are
copies of crds/ (``python -m tests.chart_docs --write`` refreshes both).
"""

from __future__ import annotations

import pytest

from tests.chart_docs import (
    DOC,
    VALUES,
    current_doc,
    main,
    parse_values,
    stale_crds,
    undocumented,
)


def test_values_doc_is_current() -> None:
    assert DOC.read_text() == current_doc(), "run: python -m tests.chart_docs --write"


def test_chart_crds_are_copies() -> None:
    assert stale_crds() == []
    assert main([]) == 0


def test_every_value_is_documented() -> None:
    assert undocumented(VALUES.read_text()) == []


def test_parser_reads_paths_defaults_and_variables() -> None:
    text = (
        "# header, not a value\n"
        "a:\n"
        "  # -- (TXNTABLE_X) First line\n"
        "  # second line.\n"
        "  b: 3\n"
        "  c: 4\n"
        "# -- A list.\n"
        "d:\n"
        "  - x\n"
    )
    entries = parse_values(text)
    assert [(e.path, e.default, e.env, e.description) for e in entries] == [
        ("a.b", "3", "TXNTABLE_X", "First line second line."),
        ("d", '["x"]', "", "A list."),
    ]
    assert undocumented(text) == ["a.c"]


def test_empty_description_is_refused() -> None:
    with pytest.raises(ValueError, match="empty description"):
        parse_values("# --\nkey: 1\n")
