"""Every manifest in examples/ is what the API server and the models accept.

Each document is defaulted from its CRD, validated against the openAPIV3Schema (strictly:
unknown fields fail), every CEL rule is evaluated with cel-python and must hold, and the
typed models parse it too. The Secret in the S3 example carries placeholders only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unit.crdtools import (
    EXAMPLES,
    apply_defaults,
    cel_errors,
    load_crds,
    load_examples,
    schema_errors,
    schema_of,
    validate,
)
from txntable.api import CheckpointPolicy, CompactionPolicy, InvalidSpecError, TxnTable
from txntable.api.common import Backend
from txntable.api.constants import API_VERSION
from txntable.api.manifests import is_ours, parse_manifest
from txntable.api.policies import CheckpointMode

CRDS = load_crds()
DOCS = load_examples()
PARSERS: dict[str, Any] = {
    "TxnTable": TxnTable,
    "CompactionPolicy": CompactionPolicy,
    "CheckpointPolicy": CheckpointPolicy,
}
OURS = [(p, d) for p, d in DOCS if d.get("apiVersion") == API_VERSION]


def _id(item: tuple[Path, dict[str, Any]]) -> str:
    path, doc = item
    return f"{path.relative_to(EXAMPLES)}:{doc['kind']}/{doc['metadata']['name']}"


def test_the_expected_examples_exist() -> None:
    names = {str(p.relative_to(EXAMPLES)) for p, _ in DOCS}
    assert {
        "table-s3.yaml",
        "compaction-nightly-zorder.yaml",
        "compaction-streaming.yaml",
        "checkpoint-policy.yaml",
        "local/table.yaml",
        "local/compaction.yaml",
        "local/checkpoint.yaml",
    } <= names
    assert {d["kind"] for _, d in OURS} == set(PARSERS)


def test_every_example_is_one_of_our_kinds_or_another_tools() -> None:
    """A misspelled kind (``TxnTabel``) fails here naming the closest kind, not as a KeyError
    further down or a document loaders skip."""
    for path, doc in DOCS:
        try:
            parsed = parse_manifest(doc)
        except InvalidSpecError as exc:
            pytest.fail(f"{path.relative_to(EXAMPLES)}: {exc}")
        assert (parsed is not None) == is_ours(doc), path


@pytest.mark.parametrize("item", OURS, ids=[_id(i) for i in OURS])
def test_example_passes_schema_and_every_cel_rule(item: tuple[Path, dict[str, Any]]) -> None:
    _path, doc = item
    crd = CRDS[doc["kind"]]
    defaulted = apply_defaults(schema_of(crd), doc)
    assert schema_errors(schema_of(crd), defaulted) == []
    assert cel_errors(schema_of(crd), defaulted) == []
    # an update that changes nothing passes the transition rules (oldSelf) too
    assert validate(crd, doc, old=doc) == []


@pytest.mark.parametrize("item", OURS, ids=[_id(i) for i in OURS])
def test_example_parses_with_the_models(item: tuple[Path, dict[str, Any]]) -> None:
    _path, doc = item
    parsed = PARSERS[doc["kind"]].from_manifest(doc)
    assert parsed.metadata.name == doc["metadata"]["name"]


@pytest.mark.parametrize("item", OURS, ids=[_id(i) for i in OURS])
def test_models_see_the_same_defaults_as_the_api_server(item: tuple[Path, dict[str, Any]]) -> None:
    """Parsing the raw manifest and the API-server-defaulted manifest gives the same model."""
    _path, doc = item
    parser = PARSERS[doc["kind"]]
    defaulted = apply_defaults(schema_of(CRDS[doc["kind"]]), doc)
    assert parser.from_manifest(doc) == parser.from_manifest(defaulted)


def test_s3_secret_is_a_placeholder_referenced_by_the_table() -> None:
    docs = [d for p, d in DOCS if p.name == "table-s3.yaml"]
    secret = next(d for d in docs if d["kind"] == "Secret")
    table = TxnTable.from_manifest(next(d for d in docs if d["kind"] == "TxnTable"))
    assert secret["apiVersion"] == "v1" and secret["type"] == "Opaque"
    assert table.spec.storage.secret_ref is not None
    assert table.spec.storage.secret_ref.name == secret["metadata"]["name"]
    assert secret["metadata"]["namespace"] == table.metadata.namespace
    assert all(v.startswith("REPLACE-WITH-") for v in secret["stringData"].values())
    assert "data" not in secret  # no base64 values that could hide a real key


def test_local_examples_are_a_local_mode_set() -> None:
    local = {d["kind"]: d for p, d in OURS if p.parent.name == "local"}
    table = TxnTable.from_manifest(local["TxnTable"])
    compaction = CompactionPolicy.from_manifest(local["CompactionPolicy"])
    checkpoint = CheckpointPolicy.from_manifest(local["CheckpointPolicy"])
    assert table.spec.location == "./demo-tables/events" and table.spec.is_local_path
    assert table.spec.compaction_policy_ref is not None
    assert table.spec.compaction_policy_ref.name == compaction.metadata.name
    assert table.spec.checkpoint_policy_ref is not None
    assert table.spec.checkpoint_policy_ref.name == checkpoint.metadata.name
    assert compaction.spec.spark.backend is Backend.LOCAL
    assert checkpoint.spec.spark.backend is Backend.LOCAL
    # thresholds that fire on a freshly fragmented demo table
    assert compaction.spec.triggers.small_files is not None
    assert compaction.spec.triggers.small_files <= 10
    assert compaction.spec.triggers.schedule is None
    assert checkpoint.spec.commit_interval <= 10
    assert checkpoint.spec.mode is CheckpointMode.INLINE
