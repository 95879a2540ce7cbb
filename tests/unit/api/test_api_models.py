"""The typed models: defaults, helpers, codec errors, and statuses the API server would accept."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, time

import pytest

from tests.unit.case_ids import readable
from tests.unit.crdtools import load_crds, load_examples, schema_errors, schema_of
from txntable.api import (
    CheckpointPolicy,
    CompactionPolicy,
    ConditionType,
    InvalidSpecError,
    PolicyStatus,
    Reason,
    TxnTable,
    TxnTableStatus,
    set_condition,
)
from txntable.api.common import (
    LabelSelector,
    LabelSelectorRequirement,
    PolicyPhase,
    RunOutcome,
    RunRecord,
    SelectorOperator,
)
from txntable.api.policies import ConcurrencyPolicy, MaintenanceWindow
from txntable.api.table import TablePhase, TableProtocol

CRDS = load_crds()
EX = {(p.name, d["kind"]): d for p, d in load_examples()}
T0 = datetime(2026, 11, 22, 2, 30, tzinfo=UTC)


def minimal(kind: str, spec: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "txntable.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": "x", "namespace": "ns", "generation": 4, "labels": {"a": "b"}},
        "spec": spec,
    }


def test_defaults_fill_a_minimal_compaction_policy() -> None:
    policy = CompactionPolicy.from_manifest(
        minimal("CompactionPolicy", {"triggers": {"smallFiles": 10}})
    )
    spec = policy.spec
    assert spec.target_file_size == 128 * 2**20 and spec.min_file_size == 32 * 2**20
    assert spec.max_bytes_per_run == 64 * 2**30
    assert spec.min_input_files == 2 and spec.time_zone == "UTC"
    assert spec.concurrency_policy is ConcurrencyPolicy.FORBID
    assert spec.triggers.cooldown == 900
    assert spec.spark.backend is None  # the operator's configured default applies
    assert spec.spark.executor.memory == 2 * 2**30 and spec.spark.timeout == 7200
    assert spec.commit.max_attempts == 10 and spec.commit.partial_commit_size is None
    assert policy.metadata.generation == 4 and dict(policy.metadata.labels) == {"a": "b"}


def test_defaults_fill_a_minimal_table_and_checkpoint_policy() -> None:
    table = TxnTable.from_manifest(minimal("TxnTable", {"location": "s3://b/t"}))
    assert table.spec.observe_interval == 60 and not table.spec.suspend
    assert dict(table.spec.storage.options) == {} and table.spec.storage.secret_ref is None
    assert not table.spec.is_local_path
    ckpt = CheckpointPolicy.from_manifest(minimal("CheckpointPolicy", {}))
    assert ckpt.spec.commit_interval == 10 and ckpt.spec.max_age is None
    assert ckpt.spec.log_cleanup.log_retention == 30 * 86400
    assert ckpt.spec.log_cleanup.checkpoint_retention == 2 * 86400


def test_sizes_accept_integers_and_quantities_alike() -> None:
    a = CompactionPolicy.from_manifest(
        minimal("CompactionPolicy", {"targetFileSize": "1Gi", "triggers": {"smallFiles": 1}})
    )
    b = CompactionPolicy.from_manifest(
        minimal("CompactionPolicy", {"targetFileSize": 2**30, "triggers": {"smallFiles": 1}})
    )
    assert a.spec == b.spec


def test_models_are_frozen() -> None:
    table = TxnTable.from_manifest(EX["table-s3.yaml", "TxnTable"])
    with pytest.raises(AttributeError):
        table.spec.location = "s3://elsewhere"  # type: ignore[misc]
    with pytest.raises(TypeError):
        table.spec.storage.options["x"] = "y"  # type: ignore[index]


def test_unchanged_location_passes_the_update_rule() -> None:
    doc = EX["table-s3.yaml", "TxnTable"]
    changed = copy.deepcopy(doc)
    changed["spec"]["suspend"] = True
    assert TxnTable.from_manifest(changed, old=doc).spec.suspend


@pytest.mark.parametrize(
    ("spec", "path", "reason"),
    [
        ({"location": 5}, "spec.location", "must be a string"),
        ({"location": "s3://b/t", "suspend": "no"}, "spec.suspend", "must be a boolean"),
        ({"location": "s3://b/t", "storage": []}, "spec.storage", "must be an object"),
        ({"location": "s3://b/t", "storage": {"options": {"a": 1}}}, "spec.storage.options[a]",
         "must be a string"),
        ({"location": "s3://b/t", "create": {"columns": []}}, "spec.create.columns",
         "at least 1"),
        ({"location": "s3://b/t", "observeInterval": 60}, "spec.observeInterval", "duration"),
        ({"location": "s3://b/t", "compactionPolicyRef": {}}, "spec.compactionPolicyRef.name",
         "required"),
    ], ids=readable,
)  # fmt: skip
def test_codec_errors_name_the_field(spec: dict[str, object], path: str, reason: str) -> None:
    with pytest.raises(InvalidSpecError) as info:
        TxnTable.from_manifest(minimal("TxnTable", spec))
    assert info.value.field_path == path
    assert reason in info.value.reason


def test_label_selector_matches_like_kubernetes() -> None:
    sel = LabelSelector(
        match_labels={"tier": "gold"},
        match_expressions=(
            LabelSelectorRequirement(
                key="env", operator=SelectorOperator.IN, values=("prod", "qa")
            ),
            LabelSelectorRequirement(key="legacy", operator=SelectorOperator.DOES_NOT_EXIST),
        ),
    )
    assert sel.matches({"tier": "gold", "env": "prod"})
    assert not sel.matches({"tier": "gold", "env": "dev"})
    assert not sel.matches({"tier": "gold", "env": "prod", "legacy": "1"})
    assert not sel.matches({"env": "prod"})
    assert LabelSelector().matches({})
    not_in = LabelSelectorRequirement(key="env", operator=SelectorOperator.NOT_IN, values=("x",))
    assert not_in.matches({}) and not not_in.matches({"env": "x"})
    exists = LabelSelectorRequirement(key="env", operator=SelectorOperator.EXISTS)
    assert exists.matches({"env": ""}) and not exists.matches({})


def test_maintenance_window_times() -> None:
    window = MaintenanceWindow(start="22:00", end="04:30")
    assert window.start_time == time(22, 0) and window.end_time == time(4, 30)


def _full_table_status() -> TxnTableStatus:
    conds = set_condition(
        (), ConditionType.READY, True, Reason.TABLE_HEALTHY, "ok", observed_generation=3, now=T0
    )
    run = RunRecord(
        run_name="opt-events-nightly-20261122t023000",
        table="events",
        outcome=RunOutcome.SUCCEEDED,
        start_time=T0,
        completion_time=T0,
        version=42,
        message="rewrote 120 files into 3",
    )
    return TxnTableStatus(
        observed_generation=3,
        phase=TablePhase.READY,
        conditions=conds,
        version=42,
        protocol=TableProtocol(
            min_reader_version=3, min_writer_version=7, writer_features=("appendOnly",)
        ),
        files=3,
        size_bytes=3 * 2**27,
        small_files=0,
        partitions=1,
        commits_since_checkpoint=2,
        last_commit_time=T0,
        last_checkpoint_version=40,
        compaction_policy="nightly-zorder",
        checkpoint_policy="default-checkpoints",
        last_compaction=run,
        last_checkpoint=RunRecord(run_name="inline-40", outcome=RunOutcome.SUCCEEDED, version=40),
    )


def test_table_status_round_trips_and_passes_the_crd_schema() -> None:
    status = _full_table_status()
    data = status.to_status()
    assert data["lastCompaction"]["completionTime"] == "2026-11-22T02:30:00Z"
    assert data["conditions"][0]["lastTransitionTime"] == "2026-11-22T02:30:00Z"
    assert TxnTableStatus.from_dict(data) == status
    status_schema = schema_of(CRDS["TxnTable"])["properties"]["status"]
    assert schema_errors(status_schema, data) == []


def test_policy_status_round_trips_and_passes_both_crd_schemas() -> None:
    status = PolicyStatus(
        observed_generation=1,
        phase=PolicyPhase.ACTIVE,
        matched_tables=("events",),
        matched_table_count=1,
        last_schedule_time=T0,
        next_schedule_time=T0,
        active_runs=(RunRecord(run_name="r1", table="events", outcome=RunOutcome.RUNNING),),
    )
    data = status.to_status()
    assert PolicyStatus.from_dict(data) == status
    for kind in ("CompactionPolicy", "CheckpointPolicy"):
        assert schema_errors(schema_of(CRDS[kind])["properties"]["status"], data) == []


def test_status_from_the_api_server_is_parsed_with_the_resource() -> None:
    doc = copy.deepcopy(EX["table-s3.yaml", "TxnTable"])
    doc["status"] = _full_table_status().to_status()
    assert TxnTable.from_manifest(doc).status == _full_table_status()


def test_status_keys_written_by_other_tools_are_ignored() -> None:
    """Kopf keeps progress in status.kopf where nothing prunes it (local mode, emulators)."""
    data = {**_full_table_status().to_status(), "kopf": {"progress": {}}}
    assert TxnTableStatus.from_dict(data) == _full_table_status()
    assert PolicyStatus.from_dict({"kopf": {}, "matchedTableCount": 2}).matched_table_count == 2
    with pytest.raises(InvalidSpecError) as info:
        TxnTableStatus.from_dict({"files": -1})
    assert info.value.field_path == "status.files"


@pytest.mark.parametrize(
    "location",
    ["s3://b/t", "s3a://b/t", "abfss://c@acct.dfs.core.windows.net/t", "az://c/t", "azure://c/t"],
)
def test_every_scheme_the_engine_serves_is_a_valid_location(location: str) -> None:
    table = TxnTable.from_manifest(minimal("TxnTable", {"location": location}))
    assert table.spec.location == location
