"""The first handlers of each event (the policies' indexes, the tables' spec-changes handler,
which fills the table index) drop what the controller never reads from the body Kopf keeps of
every object: ``managedFields`` and kubectl's last-applied manifest (issue 30.4: most of an idle
table's cost)."""

from __future__ import annotations

import asyncio
import types
from typing import Any

import kopf
import pytest

from txntable.api.types import TxnTable
from txntable.controller.memory import TableMemories
from txntable.handlers.kopf_glue import LAST_APPLIED
from txntable.handlers.kopf_handlers import spec_changes
from txntable.handlers.kopf_policies import checkpoint_policies, compaction_policies
from txntable.handlers.table_index import TableIndex


def tables(*, namespace: str, body: kopf.Body, kind: str | None = None) -> dict[str, Any]:
    """The table index as the spec-changes handler fills it, by namespace (the one body)."""
    state = types.SimpleNamespace(tables=TableIndex(), memories=TableMemories())
    memo = types.SimpleNamespace(state=state)
    asyncio.run(spec_changes(body=body, memo=memo, type=kind))  # type: ignore[arg-type]
    found = state.tables.bodies(namespace)
    return {namespace: found[0]} if found else {}


MANAGED = [
    {"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {}},
    {"manager": "txntable", "operation": "Update", "subresource": "status", "fieldsV1": {}},
]


def body(kind: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "txntable.io/v1alpha1",
        "kind": kind,
        "metadata": {
            "name": "a",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "7",
            "labels": {"team": "x"},
            "annotations": {LAST_APPLIED: '{"the": "manifest"}', "txntable.io/note": "kept"},
            "managedFields": list(MANAGED),
        },
        "spec": spec,
    }


def test_a_table_body_keeps_everything_but_the_two_fields() -> None:
    raw = body("TxnTable", location="s3://b/t")
    notes_before = raw["metadata"]["annotations"]
    live = kopf.Body(raw)
    indexed = tables(namespace="ns", body=live)["ns"]
    meta = raw["metadata"]
    assert "managedFields" not in meta
    assert meta["annotations"] == {"txntable.io/note": "kept"}
    assert {"name", "namespace", "uid", "resourceVersion", "labels"} <= set(meta)
    # the body Kopf keeps is the one shed, and the index shares it
    assert live["metadata"] is meta and indexed["metadata"] is meta
    # a tick reading the old annotations at that moment sees a dict that did not change
    assert notes_before == {LAST_APPLIED: '{"the": "manifest"}', "txntable.io/note": "kept"}
    parsed = TxnTable.from_manifest(dict(live))
    assert parsed.metadata.labels == {"team": "x"}
    assert dict(parsed.metadata.annotations) == {"txntable.io/note": "kept"}


@pytest.mark.parametrize(
    ("index", "kind"),
    [(compaction_policies, "CompactionPolicy"), (checkpoint_policies, "CheckpointPolicy")],
)
def test_policy_bodies_are_shed_too(index: Any, kind: str) -> None:
    raw = body(kind)
    index(namespace="ns", body=kopf.Body(raw))
    assert "managedFields" not in raw["metadata"]
    assert LAST_APPLIED not in raw["metadata"]["annotations"]


def test_a_body_without_the_fields_is_left_as_it_is() -> None:
    raw = body("TxnTable", location="s3://b/t")
    del raw["metadata"]["managedFields"]
    raw["metadata"]["annotations"] = notes = {"txntable.io/note": "kept"}
    tables(namespace="ns", body=kopf.Body(raw))
    assert raw["metadata"]["annotations"] is notes
    tables(namespace="ns", body=kopf.Body({"kind": "TxnTable"}))  # no metadata: nothing to do


def test_a_deleted_table_leaves_the_index() -> None:
    index = TableIndex()
    state = types.SimpleNamespace(tables=index, memories=TableMemories())
    memo = types.SimpleNamespace(state=state)
    raw = body("TxnTable", location="s3://b/t")
    asyncio.run(spec_changes(body=kopf.Body(raw), memo=memo, type=None))  # type: ignore[arg-type]
    asyncio.run(spec_changes(body=kopf.Body(raw), memo=memo, type="MODIFIED"))  # type: ignore[arg-type]
    assert len(index) == 1 and index.bodies("ns")[0]["metadata"]["uid"] == "u1"
    asyncio.run(spec_changes(body=kopf.Body(raw), memo=memo, type="DELETED"))  # type: ignore[arg-type]
    assert len(index) == 0 and index.bodies("ns") == []
