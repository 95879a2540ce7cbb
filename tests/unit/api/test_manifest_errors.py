"""A bad manifest is reported whole: every broken field at once (as the API server lists them),
and a misspelled kind (``TxnTabel``) is an error naming the closest kind, not a document skipped
in silence by ``run --local`` and ``demo``."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.unit.crdtools import load_crds, load_examples, validate
from txntable.api import CompactionPolicy, InvalidSpecError, TxnTable
from txntable.api.manifests import parse_manifest
from txntable.cli.local_manifests import load_manifests
from txntable.cli.main import main as cli

CRDS = load_crds()
EXAMPLES = {(p.name, d["kind"]): d for p, d in load_examples()}
NIGHTLY = EXAMPLES["compaction-nightly-zorder.yaml", "CompactionPolicy"]
TABLE = EXAMPLES["table-s3.yaml", "TxnTable"]


def test_every_broken_field_is_reported_at_once() -> None:
    doc: dict[str, Any] = copy.deepcopy(NIGHTLY)
    doc["spec"]["targetFileSize"] = "512MB"
    doc["spec"]["triggers"]["schedule"] = "every night"
    doc["spec"]["spark"]["backend"] = "Flink"
    doc["spec"]["schedule"] = "0 2 * * *"  # unknown field
    doc["spec"]["spark"]["executor"]["memory"] = "-4Gi"
    assert len(validate(CRDS["CompactionPolicy"], doc)) >= 5  # the API server lists them all
    with pytest.raises(InvalidSpecError) as info:
        CompactionPolicy.from_manifest(doc)
    paths = [path for path, _reason in info.value.errors]
    assert sorted(paths) == sorted(
        [
            "spec.schedule",
            "spec.targetFileSize",
            "spec.triggers.schedule",
            "spec.spark.backend",
            "spec.spark.executor.memory",
        ]
    )
    for path in paths:
        assert path in str(info.value)
    assert (info.value.field_path, info.value.reason) == info.value.errors[0]


def test_items_of_a_list_are_each_reported() -> None:
    doc: dict[str, Any] = copy.deepcopy(TABLE)
    doc["spec"]["create"]["columns"] = [
        {"name": "a", "type": "varchar"},
        {"name": "b", "type": "long"},
        {"name": "c", "type": "text"},
    ]
    with pytest.raises(InvalidSpecError) as info:
        TxnTable.from_manifest(doc)
    assert [p for p, _ in info.value.errors] == [
        "spec.create.columns[0].type",
        "spec.create.columns[2].type",
    ]


def test_envelope_and_spec_errors_come_together() -> None:
    doc: dict[str, Any] = copy.deepcopy(TABLE)
    doc["apiVersion"] = "txntable.io/v1"
    doc["metadata"] = {}
    doc["spec"]["suspend"] = "yes"
    with pytest.raises(InvalidSpecError) as info:
        TxnTable.from_manifest(doc)
    assert [p for p, _ in info.value.errors] == ["apiVersion", "metadata.name", "spec.suspend"]


@pytest.mark.parametrize(
    ("kind", "api_version", "closest"),
    [
        ("TxnTabel", "txntable.io/v1alpha1", "TxnTable"),
        ("CompactionPolcy", "txntable.io/v1alpha1", "CompactionPolicy"),
        ("checkpointpolicy", "txntable.io/v1alpha1", "CheckpointPolicy"),
        ("TxnTabel", "v1", "TxnTable"),  # a close kind under another apiVersion still counts
    ],
)
def test_a_misspelled_kind_names_the_closest_kind(
    kind: str, api_version: str, closest: str
) -> None:
    doc = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, "spec": {}}
    with pytest.raises(InvalidSpecError, match=f"did you mean {closest}") as info:
        parse_manifest(doc)
    assert info.value.field_path == "kind" and repr(kind) in str(info.value)


def test_our_group_with_an_unknown_kind_is_an_error_and_others_are_not_ours() -> None:
    ours = {"apiVersion": "txntable.io/v1alpha1", "kind": "Lakehouse", "metadata": {"name": "x"}}
    with pytest.raises(InvalidSpecError, match="unknown kind 'Lakehouse'"):
        parse_manifest(ours)
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}}
    assert parse_manifest(secret) is None


LOCAL = """apiVersion: txntable.io/v1alpha1
kind: TxnTable
metadata: {{name: events}}
spec: {{location: {location}}}
---
apiVersion: txntable.io/v1alpha1
kind: CompactionPolcy
metadata: {{name: compact}}
spec: {{triggers: {{smallFiles: 2}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: unrelated}}
"""


def test_run_local_reports_a_misspelled_kind(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(LOCAL.format(location=tmp_path / "t"))
    manifests = load_manifests(tmp_path)
    assert [t.metadata.name for t in manifests.tables] == ["events"]
    assert manifests.compaction == []
    (error,) = manifests.errors
    assert "CompactionPolcy" in error and "did you mean CompactionPolicy" in error


def test_demo_refuses_manifests_with_a_misspelled_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "m.yaml").write_text(LOCAL.format(location=tmp_path / "t"))
    code = cli(["demo", "--manifests", str(manifests), "--runs-dir", str(tmp_path / "runs")])
    assert code == 2
    assert "did you mean CompactionPolicy" in capsys.readouterr().err
    assert not (tmp_path / "t").exists() and not (tmp_path / "runs").exists()


def test_run_local_refuses_invalid_manifests_with_every_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "m.yaml").write_text(LOCAL.format(location=tmp_path / "t"))
    (manifests / "n.yaml").write_text(
        "apiVersion: txntable.io/v1alpha1\nkind: CompactionPolicy\nmetadata: {name: p}\n"
        "spec: {minFileSize: 2Gi, targetFileSize: 1Gi, triggers: {smallFiles: 2}}\n"
    )
    runs = tmp_path / "runs"
    code = cli(["run", "--local", str(manifests), "--once", "--runs-dir", str(runs)])
    assert code == 2
    captured = capsys.readouterr()
    assert "did you mean CompactionPolicy" in captured.err and "minFileSize" in captured.err
    assert captured.err.rstrip().splitlines()[-1].startswith("error: 2 manifest error(s)")
    assert captured.out == ""  # no table was reconciled
    assert not runs.exists()


def _pattern_fields(cls: type, where: str, seen: set[type]) -> list[tuple[str, dict[str, Any]]]:
    """(path, metadata) of every field under ``cls`` whose value is checked by a pattern."""
    import dataclasses
    from typing import get_args

    from txntable.api._codec import hints, json_name, unwrap_optional

    if cls in seen:
        return []
    seen.add(cls)
    out = []
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        at = f"{where}.{json_name(field)}"
        tp, _ = unwrap_optional(hints(cls)[field.name])
        if "pattern" in field.metadata:
            out.append((at, dict(field.metadata)))
        for inner in (tp, *get_args(tp)):
            if dataclasses.is_dataclass(inner):
                out += _pattern_fields(inner, at, seen)  # type: ignore[arg-type]
    return out


def test_every_pattern_checked_field_explains_itself_in_words() -> None:
    """A value a pattern refuses is reported with what the field takes, never with the regular
    expression (``61 * * * *`` got ~1,500 characters of cron regex): every such field has a
    ``hint``, or is a size or duration, whose parsers explain them."""
    from txntable.api.types import CheckpointPolicy, CompactionPolicy, TxnTable

    fields = []
    for kind in (TxnTable, CompactionPolicy, CheckpointPolicy):
        fields += _pattern_fields(kind, kind.__name__, set())
    assert len(fields) >= 15
    silent = [path for path, meta in fields if not meta.get("hint") and not meta.get("kind")]
    assert silent == []
