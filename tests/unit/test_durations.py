"""One duration syntax everywhere (issue 23, item 15): ``vacuum``, ``cleanup`` and
``--vacuum-retention`` took ``7 days`` and refused ``7d`` (quoting ``interval '7d'``), while
``--avoid-partitions-written-within`` and every manifest duration took ``7d`` and refused
``7 days``. Now both forms parse everywhere, with one parser, and what the CRDs' pattern admits
is exactly what the models parse."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.support.manifests import compaction_policy_manifest
from tests.unit.case_ids import readable
from tests.unit.crdtools import load_crds, schema_of, validate
from txntable.api import CompactionPolicy
from txntable.api.quantity import DURATION_PATTERN, QuantityError, parse_duration
from txntable.cli.main import main
from txntable.durations import MANIFEST_PATTERN, DurationError, parse_manifest_seconds, parse_ms
from txntable.engine import Table
from txntable.engine.checkpoint.retention import parse_interval_ms

DAY = 86_400_000
CRDS = load_crds()

#: every form either parser accepted before, and the forms people type: text -> milliseconds
SAME = {
    "7d": 7 * DAY,
    "7 days": 7 * DAY,
    "interval 7 days": 7 * DAY,
    "7days": 7 * DAY,
    "1 week": 7 * DAY,
    "2 weeks": 14 * DAY,
    "1 day": DAY,
    "1h30m": 5_400_000,
    "1h 30m": 5_400_000,
    "1 hour 30 minutes": 5_400_000,
    "interval 1 day 12 hours": 36 * 3_600_000,
    "90s": 90_000,
    "90 seconds": 90_000,
    "15m": 900_000,
    "30d": 30 * DAY,
    "720h": 720 * 3_600_000,
}
#: accepted by the command line and table properties, not by a manifest (not whole seconds
#: above zero, or not as the API server spells it)
COMMAND_LINE_ONLY = {
    "0 hours": 0,
    "0s": 0,
    "500 milliseconds": 500,
    "1 millisecond": 1,
    "INTERVAL 7 DAYS": 7 * DAY,
    " 7d ": 7 * DAY,
}
NEITHER = ["", "7", "d", "7x", "1 month", "2 years", "1.5h", "-1h", "P1D", "7 dayz", "interval"]


@pytest.mark.parametrize(("text", "ms"), [*SAME.items(), *COMMAND_LINE_ONLY.items()], ids=readable)
def test_the_command_line_and_table_properties_read_both_forms(text: str, ms: int) -> None:
    assert parse_ms(text) == ms
    assert parse_interval_ms(text) == ms  # table properties, vacuum/cleanup --retention


@pytest.mark.parametrize(("text", "ms"), SAME.items(), ids=readable)
def test_manifests_read_both_forms(text: str, ms: int) -> None:
    assert parse_duration(text) == ms // 1000
    policy = CompactionPolicy.from_manifest(_policy(text))
    assert policy.spec.triggers.cooldown == ms // 1000


EXAMPLES = [*SAME, *COMMAND_LINE_ONLY, *NEITHER, "0d0h", "0d1h", "1h0m", "07d", "1s", "1 ms"]


@pytest.mark.parametrize("text", EXAMPLES, ids=readable)
def test_the_crd_pattern_admits_exactly_what_the_models_parse(text: str) -> None:
    """Parsed both ways: what the API server's pattern admits, the controller reads; what it
    refuses, the models refuse too (and the other way round)."""
    admitted = re.search(MANIFEST_PATTERN, text) is not None
    try:
        parse_manifest_seconds(text)
        parsed = True
    except DurationError:
        parsed = False
    assert admitted == parsed, text
    if parsed:
        assert parse_manifest_seconds(text) >= 1


@pytest.mark.parametrize("text", EXAMPLES, ids=readable)
def test_the_api_server_and_the_models_agree_on_a_policy(text: str) -> None:
    """The whole path: the CRD's schema (as kube-apiserver checks it, ``crdtools``) against
    ``CompactionPolicy.from_manifest``, for one duration field."""
    doc = _policy(text)
    schema_errors = validate(CRDS["CompactionPolicy"], doc)
    try:
        CompactionPolicy.from_manifest(doc)
        model_ok = True
    except Exception:
        model_ok = False
    too_long = len(text) > 32  # maxLength of every duration field
    assert (schema_errors == []) == model_ok == (parse_ok(text) and not too_long), schema_errors


def parse_ok(text: str) -> bool:
    try:
        parse_duration(text)
    except QuantityError:
        return False
    return True


def test_every_duration_field_of_every_crd_uses_the_one_pattern() -> None:
    found = []
    for kind, crd in CRDS.items():
        for path, node in _strings(schema_of(crd), kind):
            pattern = node.get("pattern", "")
            if "d|h|m|s" in pattern or "minutes" in pattern:  # a duration, old or new
                found.append(path)
                assert pattern == MANIFEST_PATTERN == DURATION_PATTERN, path
    assert len(found) >= 12  # cooldown, within, delays, retention, intervals, maxAge ...


def test_the_pattern_is_re2_and_ecma_alike() -> None:
    """No look-around, back-references or flags: the API server compiles ``pattern`` with Go's
    RE2, and the docs call it ECMA-262; both read this pattern the same way."""
    assert "(?" not in MANIFEST_PATTERN and "\\1" not in MANIFEST_PATTERN


@pytest.mark.parametrize("text", NEITHER, ids=readable)
def test_a_non_duration_is_refused_with_examples_of_both_forms(text: str) -> None:
    with pytest.raises(DurationError) as info:
        parse_ms(text)
    said = str(info.value)
    assert repr(text) in said
    assert "7d" in said or "days" in said or "months" in said


def test_every_duration_flag_takes_both_forms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``vacuum``/``cleanup --retention`` refused ``7d``; ``--avoid-partitions-written-within``
    refused ``7 days``. Each now runs with either (dry runs: nothing changes)."""
    location = str(tmp_path / "t")
    table = Table.create(location, pa.schema([("id", pa.int64()), ("d", pa.string())]), ["d"])
    for i in range(3):
        table.append(pa.table({"id": [i], "d": ["a"]}))
    for compact, words in (("7d", "7 days"), ("30d", "interval 30 days")):
        for value in (compact, words):
            assert main(["vacuum", location, "--retention", value, "--dry-run"]) == 0
            assert main(["cleanup", location, "--retention", value, "--dry-run"]) == 0
            common = ["optimize", location, "--executor", "arrow", "--dry-run", "--json"]
            assert main([*common, "--avoid-partitions-written-within", value]) == 0
            assert main([*common, "--vacuum", "--vacuum-retention", value]) == 0
    assert "error" not in capsys.readouterr().err
    assert Table.open(location).version() == 3


def _policy(cooldown: str) -> dict[str, Any]:
    return compaction_policy_manifest("p", triggers={"smallFiles": 2, "cooldown": cooldown})


def _strings(node: dict[str, Any], path: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    if node.get("type") == "string":
        out.append((path, node))
    for name, sub in node.get("properties", {}).items():
        out += _strings(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        out += _strings(node["items"], f"{path}[]")
    return out
