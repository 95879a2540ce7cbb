"""The Iceberg compatibility features' rules (PROTOCOL.md "Iceberg Compatibility V1/V2", and
V3's RFC) as a rewrite checks them against the table, and when partition columns are
materialized."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.feature_tables import field
from txntable.engine.errors import UnsupportedWriterFeatureError
from txntable.engine.model.actions import Metadata, Protocol
from txntable.engine.model.features import check_writable
from txntable.engine.model.iceberg_compat import (
    materializes_partitions,
    row_tracking_field_ids,
    unmet_rules,
)

V2 = Protocol(2, 7, None, ["columnMapping", "icebergCompatV2"])
V1 = Protocol(2, 7, None, ["columnMapping", "icebergCompatV1"])
NAME_MODE = {"delta.columnMapping.mode": "name"}
ARRAY = {"type": "array", "elementType": "integer", "containsNull": True}
MAP = {"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True}


def meta(*fields: dict[str, Any], **config: str) -> Metadata:
    schema = {"type": "struct", "fields": list(fields) or [field("a", "long", 1, "col-a")]}
    return Metadata(id="x", schema_string=json.dumps(schema), configuration=config)


def v2(*fields: dict[str, Any], **config: str) -> Metadata:
    return meta(*fields, **{"delta.enableIcebergCompatV2": "true", **NAME_MODE, **config})


def test_inactive_features_ask_nothing() -> None:
    assert unmet_rules(V2, meta(field("m", MAP, 1, "col-m"))) == []
    off = meta(field("m", MAP, 1, "col-m"), **{"delta.enableIcebergCompatV2": "false"})
    assert unmet_rules(V2, off) == []


def test_a_compliant_table_meets_every_rule() -> None:
    ids = {"delta.columnMapping.nested.ids": {"col-t.element": 7, "col-m.key": 8, "col-m.value": 9}}
    nested = [field("t", ARRAY, 1, "col-t", **ids), field("m", MAP, 2, "col-m", **ids)]
    assert unmet_rules(V2, v2(*nested, field("d", "decimal(10,2)", 3, "col-d"))) == []
    check_writable(V2, v2(*nested), rows_unchanged=True)


@pytest.mark.parametrize(
    ("protocol", "metadata", "rule"),
    [
        pytest.param(
            V2, meta(**{"delta.enableIcebergCompatV2": "true"}), "column mapping", id="no-mapping"
        ),
        pytest.param(V2, v2(field("v", "variant", 1, "col-v")), "Iceberg's types", id="variant"),
        pytest.param(V2, v2(field("t", ARRAY, 1, "col-t")), "nested.ids", id="no-nested-ids"),
        pytest.param(
            V2,
            v2(
                field(
                    "n",
                    "double",
                    1,
                    "col-n",
                    **{"delta.typeChanges": [{"fromType": "integer", "toType": "double"}]},
                )
            ),
            "type changes Iceberg supports",
            id="int-to-double",
        ),
        pytest.param(
            Protocol(
                3,
                7,
                ["deletionVectors", "columnMapping"],
                ["deletionVectors", "columnMapping", "icebergCompatV2"],
            ),
            v2(**{"delta.enableDeletionVectors": "true"}),
            "deletion vectors must not be active",
            id="deletion-vectors-v2",
        ),
        pytest.param(
            Protocol(
                3,
                7,
                ["deletionVectors", "columnMapping"],
                ["deletionVectors", "columnMapping", "icebergCompatV1"],
            ),
            meta(**{"delta.enableIcebergCompatV1": "true", **NAME_MODE}),
            "deletionVectors feature must not be supported",
            id="deletion-vectors-v1",
        ),
        pytest.param(
            V1,
            meta(
                field("t", ARRAY, 1, "col-t"),
                **{"delta.enableIcebergCompatV1": "true", **NAME_MODE},
            ),
            "no map, array or void",
            id="v1-array",
        ),
    ],
)
def test_rules_no_writer_can_meet_are_named(
    protocol: Protocol, metadata: Metadata, rule: str
) -> None:
    assert any(rule in text for _, text in unmet_rules(protocol, metadata))
    with pytest.raises(UnsupportedWriterFeatureError, match="is active and its rule"):
        check_writable(protocol, metadata, rows_unchanged=True)


def test_what_materializes_partition_columns() -> None:
    assert materializes_partitions(Protocol(1, 7, None, ["materializePartitionColumns"]), {})
    assert materializes_partitions(V2, {"delta.enableIcebergCompatV2": "true"})
    assert not materializes_partitions(V2, {})
    assert materializes_partitions(Protocol(1, 2), {"delta.writePartitionColumnsToParquet": "true"})
    assert not materializes_partitions(Protocol(1, 2), {})


# -- icebergCompatV3 (issue 33.7: Delta 4.4's, maintained as V2 is) -----------------------------

V3 = Protocol(
    3,
    7,
    ["deletionVectors", "columnMapping"],
    ["deletionVectors", "columnMapping", "rowTracking", "domainMetadata", "icebergCompatV3"],
)
V3_ON = {
    "delta.enableIcebergCompatV3": "true",
    "delta.enableRowTracking": "true",
    "delta.enableDeletionVectors": "true",
    **NAME_MODE,
}


def v3(*fields: dict[str, Any], **config: str) -> Metadata:
    return meta(*fields, **{**V3_ON, **config})


def _widened(name: str, source: str, target: str) -> dict[str, Any]:
    change = {"delta.typeChanges": [{"fromType": source, "toType": target}]}
    return field(name, target, 1, f"col-{name}", **change)


def test_a_v3_table_as_delta_spark_makes_it_meets_every_rule() -> None:
    """Deletion vectors enabled (V1 and V2 forbid them), variant and geospatial columns,
    Iceberg V3's promotions, literal defaults: nothing to refuse, and the rewrite may run."""
    ids = {"delta.columnMapping.nested.ids": {"col-t.element": 9}}
    columns = [
        field("a", "long", 1, "col-a", CURRENT_DEFAULT="42"),
        field("v", "variant", 2, "col-v"),
        field("g", "geometry(OGC:CRS84)", 3, "col-g"),
        field("h", "geography(OGC:CRS84, spherical)", 4, "col-h"),
        field("t", ARRAY, 5, "col-t", **ids),
        _widened("n", "integer", "long"),
        _widened("d", "decimal(10,2)", "decimal(20,2)"),
    ]
    assert unmet_rules(V3, v3(*columns)) == []
    check_writable(V3, v3(*columns), rows_unchanged=True)
    assert row_tracking_field_ids(V3, V3_ON)
    assert not row_tracking_field_ids(V3, {**V3_ON, "delta.enableIcebergCompatV3": "false"})
    assert materializes_partitions(V3, V3_ON)


@pytest.mark.parametrize(
    ("metadata", "rule"),
    [
        pytest.param(
            v3(**{"delta.enableRowTracking": "false"}), "row tracking must be enabled", id="no-rt"
        ),
        pytest.param(
            v3(**{"delta.enableIcebergCompatV2": "true"}), "must not be active", id="v2-too"
        ),
        pytest.param(
            meta(**{**V3_ON, "delta.columnMapping.mode": "none"}), "column mapping", id="no-mapping"
        ),
        pytest.param(v3(field("z", "void", 1, "col-z")), "Iceberg V3's types", id="void"),
        pytest.param(v3(_widened("n", "long", "double")), "Iceberg V3 supports", id="long-double"),
        pytest.param(
            v3(_widened("d", "decimal(10,2)", "decimal(12,4)")),
            "Iceberg V3 supports",
            id="decimal-scale",
        ),
        pytest.param(v3(field("t", ARRAY, 1, "col-t")), "nested.ids", id="no-nested-ids"),
        pytest.param(
            v3(field("c", "timestamp", 1, "col-c", CURRENT_DEFAULT="current_timestamp()")),
            "column defaults must be literals",
            id="default-expression",
        ),
    ],
)
def test_v3_rules_no_writer_can_meet_are_named(metadata: Metadata, rule: str) -> None:
    assert any(f == "icebergCompatV3" and rule in text for f, text in unmet_rules(V3, metadata))
    with pytest.raises(UnsupportedWriterFeatureError, match="icebergCompatV3 is active"):
        check_writable(V3, metadata, rows_unchanged=True)


def test_v3_appends_stay_refused() -> None:
    with pytest.raises(UnsupportedWriterFeatureError, match="icebergCompatV3"):
        check_writable(V3, v3())
