"""Invalid manifests: each is rejected by the CRD (schema or CEL) and by ``from_manifest``.

Every case starts from a valid example, breaks one thing, and states what the API server
would say (a substring of the schema error or the CEL rule's message) and where the models
point (the field path of ``InvalidSpecError``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.invalid_manifests import (
    CASES,
    CEILINGS,
    CKPT,
    CRDS,
    NIGHTLY,
    SIZES,
    TABLE,
    Case,
    _build,
    ceiling_doc,
    model_refuses,
    put,
)
from tests.unit.crdtools import MISSING, validate
from txntable.api import CheckpointPolicy, CompactionPolicy, InvalidSpecError, TxnTable
from txntable.api.policies import OVERHEAD_MIN_BYTES
from txntable.api.quantity import parse_quantity

PARSERS: dict[str, Any] = {
    "TxnTable": TxnTable,
    "CompactionPolicy": CompactionPolicy,
    "CheckpointPolicy": CheckpointPolicy,
}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_api_server_rejects(case: Case) -> None:
    doc, old = _build(case)
    errors = validate(CRDS[doc["kind"]], doc, old)
    assert errors, "accepted"
    assert any(case.api_says in e for e in errors), errors


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_models_reject_with_a_field_path(case: Case) -> None:
    doc, old = _build(case)
    parser = PARSERS[doc["kind"]]
    with pytest.raises(InvalidSpecError) as info:
        if case.update:
            parser.from_manifest(doc, old=old)
        else:
            parser.from_manifest(doc)
    assert info.value.field_path == case.path
    assert info.value.reason
    assert str(info.value).startswith(case.path)


def test_the_base_manifests_are_valid() -> None:
    """Guards the table above: every case fails because of its edit, not its base."""
    for base in (TABLE, NIGHTLY, CKPT):
        assert validate(CRDS[base["kind"]], base) == []
        PARSERS[base["kind"]].from_manifest(base)


def test_unknown_time_zone_is_caught_by_the_models_only() -> None:
    """The schema checks a zone's shape; the tz database lookup happens in from_manifest."""
    doc = copy.deepcopy(NIGHTLY)
    doc["spec"]["timeZone"] = "Mars/Olympus_Mons"
    assert validate(CRDS["CompactionPolicy"], doc) == []
    with pytest.raises(InvalidSpecError, match="unknown time zone") as info:
        CompactionPolicy.from_manifest(doc)
    assert info.value.field_path == "spec.timeZone"


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (put("apiVersion", "txntable.io/v1"), "apiVersion"),
        (put("kind", "Table"), "kind"),
        (put("metadata", {}), "metadata.name"),
        (put("spec", MISSING), "spec"),
    ],
)
def test_envelope_errors(edit: Callable[[dict[str, Any]], None], path: str) -> None:
    doc = copy.deepcopy(TABLE)
    edit(doc)
    with pytest.raises(InvalidSpecError) as info:
        TxnTable.from_manifest(doc)
    assert info.value.field_path == path


@pytest.mark.parametrize(("heap", "ceiling"), CEILINGS)
def test_the_ceiling_rule_and_the_model_draw_the_line_at_the_same_byte(
    heap: str, ceiling: str | int
) -> None:
    doc = ceiling_doc(heap, ceiling)
    assert bool(validate(CRDS["CompactionPolicy"], doc)) is model_refuses(doc)


@pytest.mark.parametrize(
    "heap",
    ["1", "1Gi", "3840Mi", "3841Mi", "1.5Gi", "2.5Gi", "7.5Gi", "12.25Gi", "100.5Gi", "3.75Ti",
     "15.5Ti", "16Ti", "123456Gi", "16G", "15.9G", "999999999999", "7.123456789T"],
)  # fmt: skip
def test_the_ceiling_rule_is_exact_at_the_executor_pod(heap: str) -> None:
    """The rule compares floats (kube-apiserver's ``asApproximateFloat``, as the server rounds
    each form of quantity): one byte either side of the pod it gets the models' verdict, up to
    16 TiB, also for heaps the server keeps as decimals (a fractional binary suffix)."""
    pod = int(parse_quantity(heap))
    pod += max(OVERHEAD_MIN_BYTES, pod // 10)
    for ceiling in (pod - 1, pod, pod + 1):
        doc = ceiling_doc(heap, ceiling)
        assert (
            bool(validate(CRDS["CompactionPolicy"], doc)) is model_refuses(doc) is (ceiling <= pod)
        ), ceiling


def test_a_ceiling_one_byte_above_the_executor_pod_is_accepted() -> None:
    """The autoSize rule's boundary: the CRD and the model both accept heap + overhead + 1."""
    doc = copy.deepcopy(NIGHTLY)
    put("spec.spark.autoSize.maxExecutorMemory", 16 * 2**30 + 16 * 2**30 // 10 + 1)(doc)
    assert validate(CRDS["CompactionPolicy"], doc) == []
    CompactionPolicy.from_manifest(doc)


@pytest.mark.parametrize(("text", "size"), SIZES, ids=[t for t, _ in SIZES])
def test_the_crd_and_the_models_agree_on_every_size(text: str, size: int | None) -> None:
    """A size is a positive whole number of bytes: what the API server admits the controller
    can use (it used to admit ``1.1Ki``, which the controller then refused as not whole)."""
    doc = copy.deepcopy(NIGHTLY)
    doc["spec"]["maxBytesPerRun"] = text
    refused = validate(CRDS["CompactionPolicy"], doc)
    if size is None:
        assert refused, f"the CRD admits {text!r}"
        with pytest.raises(InvalidSpecError) as info:
            CompactionPolicy.from_manifest(doc)
        assert info.value.field_path == "spec.maxBytesPerRun"
    else:
        assert refused == []
        assert CompactionPolicy.from_manifest(doc).spec.max_bytes_per_run == size
