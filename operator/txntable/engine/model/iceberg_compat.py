"""What the Iceberg compatibility features ask of a writer of data files, and partition columns
materialized into the files.

``icebergCompatV1`` and ``icebergCompatV2`` (PROTOCOL.md "Iceberg Compatibility V1/V2") and
``icebergCompatV3`` (delta-io/delta ``protocol_rfcs/iceberg-compat-v3.md``, Delta 4.4) are
writer features: once active (``delta.enableIcebergCompatV1``/``V2``/``V3`` is ``true``) every
writer must keep the table convertible to Iceberg. A rewrite (OPTIMIZE) changes no schema and no
protocol, so the rules about the table itself are checked here and, when the table breaks one,
the rewrite is refused with the rule named (``unmet_rules``): a writer must require them, and
files written into such a table would carry what Iceberg cannot read. The rules about the files
written are met by the writer: Parquet field ids from column mapping (and the nested ids of
array elements and map keys and values), timestamps as INT64, ``numRecords`` in every ``add``,
no deletion vector on a new file, and partition values materialized into the file after the data
columns (``materializes_partitions``, which ``materializePartitionColumns`` and
``delta.writePartitionColumnsToParquet`` ask for too).

V3 differs from V2: deletion vectors may be enabled (Iceberg V3 has its own), row tracking must
be, and its materialized columns carry Iceberg's row lineage field ids in the files
(``ROW_ID_FIELD_ID``, ``ROW_COMMIT_VERSION_FIELD_ID``; ``row_tracking_field_ids``); the types
allowed add variant, geometry and geography; type changes are Iceberg V3's promotions only (an
allow-list); column defaults must be literals. A rewrite keeps every row's id and commit version
(``engine.commit.row_tracking``), so the rules about files are met as for V2.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from txntable.engine.model.actions import Metadata, Protocol
from txntable.engine.model.geospatial import is_geospatial
from txntable.engine.model.physical import (
    NESTED_IDS_KEYS,
    PHYSICAL_NAME_KEY,
    column_mapping_mode,
)
from txntable.engine.model.protocol_features import table_features
from txntable.engine.model.schema import parse_schema

#: feature -> the table property that makes it active
ENABLE_KEYS = {
    "icebergCompatV1": "delta.enableIcebergCompatV1",
    "icebergCompatV2": "delta.enableIcebergCompatV2",
    "icebergCompatV3": "delta.enableIcebergCompatV3",
}
ICEBERG_FEATURES = frozenset(ENABLE_KEYS)
MATERIALIZE_FEATURE = "materializePartitionColumns"
MATERIALIZE_PROPERTY = "delta.writePartitionColumnsToParquet"

#: the types an icebergCompatV2 table may hold (PROTOCOL.md's allow-list)
_V2_PRIMITIVES = frozenset(
    {
        "byte",
        "short",
        "integer",
        "long",
        "float",
        "double",
        "string",
        "binary",
        "boolean",
        "timestamp",
        "timestamp_ntz",
        "date",
    }
)
_INTEGERS = ("byte", "short", "integer", "long")
#: icebergCompatV3 adds Iceberg V3's variant and geospatial types to V2's list (no void)
_V3_PRIMITIVES = _V2_PRIMITIVES | {"variant"}
#: the Parquet field ids icebergCompatV3 gives the materialized row tracking columns (Iceberg
#: V3's row lineage fields ``_row_id`` and ``_last_updated_sequence_number``)
ROW_ID_FIELD_ID = 2147483540
ROW_COMMIT_VERSION_FIELD_ID = 2147483539
#: where Spark keeps a column's default value (allowColumnDefaults)
_DEFAULT_KEY = "CURRENT_DEFAULT"
_LITERAL = re.compile(
    r"""^\s*(?:
        NULL|TRUE|FALSE
      | [+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[LSYDBF]?(?:BD)?
      | (?:DATE|TIMESTAMP|TIMESTAMP_NTZ|TIMESTAMP_LTZ|X|INTERVAL)?\s*'(?:[^'\\]|\\.|'')*'
      | "(?:[^"\\]|\\.)*"
    )\s*$""",
    re.IGNORECASE | re.VERBOSE,
)

Unmet = tuple[str, str]


def _true(configuration: Mapping[str, str], key: str) -> bool:
    return (configuration.get(key) or "").strip().lower() == "true"


def active(protocol: Protocol, configuration: Mapping[str, str]) -> tuple[str, ...]:
    """The Iceberg compatibility features that are supported and enabled."""
    features = table_features(protocol)
    return tuple(f for f, key in ENABLE_KEYS.items() if f in features and _true(configuration, key))


def row_tracking_field_ids(protocol: Protocol, configuration: Mapping[str, str]) -> bool:
    """Whether the materialized row tracking columns of new files carry Iceberg's row lineage
    field ids: icebergCompatV3 is active."""
    return "icebergCompatV3" in active(protocol, configuration)


def materializes_partitions(protocol: Protocol, configuration: Mapping[str, str]) -> bool:
    """Whether new data files carry the partition columns: required by
    ``materializePartitionColumns`` and the active Iceberg compatibility features, asked for
    (best effort) by ``delta.writePartitionColumnsToParquet=true``."""
    if MATERIALIZE_FEATURE in table_features(protocol) or active(protocol, configuration):
        return True
    return _true(configuration, MATERIALIZE_PROPERTY)


def unmet_rules(protocol: Protocol, metadata: Metadata) -> list[Unmet]:
    """(feature, rule) for every rule of an active Iceberg compatibility feature the table
    breaks; empty when a writer can meet them all."""
    config = metadata.configuration
    versions = active(protocol, config)
    if not versions:
        return []
    out: list[Unmet] = []
    fields = [
        {"name": f.name, "type": f.type, "metadata": f.metadata}
        for f in parse_schema(metadata.schema_string)
    ]
    features = table_features(protocol)
    mode = column_mapping_mode(config)
    for feature in versions:
        if mode == "none":
            out.append(
                (
                    feature,
                    "column mapping must be in name or id mode (delta.columnMapping.mode is "
                    "none), so the files written cannot carry the Parquet field ids Iceberg reads",
                )
            )
        if feature != "icebergCompatV3":
            out.extend((feature, rule) for rule in _type_change_problems(fields))
    if "icebergCompatV1" in versions:
        if "deletionVectors" in features:
            out.append(("icebergCompatV1", "the deletionVectors feature must not be supported"))
        out.extend(("icebergCompatV1", rule) for rule in _v1_type_problems(fields))
    if "icebergCompatV2" in versions:
        if "icebergCompatV1" in versions:
            out.append(("icebergCompatV2", "icebergCompatV1 must not be active as well"))
        if "deletionVectors" in features and _true(config, "delta.enableDeletionVectors"):
            rule = "deletion vectors must not be active (delta.enableDeletionVectors is true)"
            out.append(("icebergCompatV2", rule))
        out.extend(("icebergCompatV2", rule) for rule in _v2_type_problems(fields))
        if mode != "none":
            out.extend(("icebergCompatV2", rule) for rule in _missing_nested_ids(fields))
    if "icebergCompatV3" in versions:
        out.extend(("icebergCompatV3", rule) for rule in _v3_problems(features, config, fields))
        if mode != "none":
            out.extend(("icebergCompatV3", rule) for rule in _missing_nested_ids(fields))
    return out


def _v3_problems(
    features: frozenset[str], config: Mapping[str, str], fields: list[dict[str, Any]]
) -> list[str]:
    """icebergCompatV3's rules about the table (the geospatial types RFC's companion, delta-io's
    ``protocol_rfcs/iceberg-compat-v3.md``), apart from column mapping and the nested ids."""
    out: list[str] = []
    others = [v for v in ("icebergCompatV1", "icebergCompatV2") if _true(config, ENABLE_KEYS[v])]
    if others:
        out.append(f"{' and '.join(others)} must not be active as well")
    if "rowTracking" not in features or not _true(config, "delta.enableRowTracking"):
        out.append("row tracking must be enabled (delta.enableRowTracking is not true)")
    out.extend(_v3_type_problems(fields))
    out.extend(_v3_type_change_problems(fields))
    out.extend(_non_literal_defaults(fields))
    return out


def _v3_type_problems(fields: list[dict[str, Any]]) -> list[str]:
    for where, typ in _all_types(fields):
        if isinstance(typ, dict):
            if typ.get("type") in ("struct", "array", "map"):
                continue
            kind = str(typ.get("type"))
        else:
            kind = str(typ)
        if kind in _V3_PRIMITIVES or kind.startswith("decimal") or is_geospatial(kind):
            continue
        return [f"only Iceberg V3's types in the schema (column {where} is a {kind})"]
    return []


def _v3_type_change_problems(fields: list[dict[str, Any]]) -> list[str]:
    """Type widening within Iceberg V3's promotions: integers to wider integers, float to
    double, a decimal to a higher precision at the same scale (an allow-list, as the RFC)."""
    for f in _every_field(fields):
        raw = (f.get("metadata") or {}).get("delta.typeChanges")
        changes = json.loads(raw) if isinstance(raw, str) else raw
        for change in changes if isinstance(changes, list) else []:
            if not isinstance(change, Mapping):
                continue
            source, target = str(change.get("fromType")), str(change.get("toType"))
            if not _v3_promotion(source, target):
                return [
                    f"only type changes Iceberg V3 supports (column {f['name']} was widened "
                    f"from {source} to {target})"
                ]
    return []


def _v3_promotion(source: str, target: str) -> bool:
    if source in _INTEGERS and target in _INTEGERS:
        return _INTEGERS.index(target) > _INTEGERS.index(source)
    if (source, target) == ("float", "double"):
        return True
    before, after = _decimal_scale(source), _decimal_scale(target)
    return (
        before is not None
        and before == after
        and _decimal_precision(target) > (_decimal_precision(source) or 0)
    )


def _decimal_precision(name: str) -> int:
    try:
        return int(name.split("(")[1].split(",", maxsplit=1)[0])
    except (IndexError, ValueError):
        return 0


def _non_literal_defaults(fields: list[dict[str, Any]]) -> list[str]:
    for f in _every_field(fields):
        default = (f.get("metadata") or {}).get(_DEFAULT_KEY)
        if isinstance(default, str) and not _LITERAL.match(default):
            return [f"column defaults must be literals (column {f['name']} defaults to {default})"]
    return []


# -- schema walks -------------------------------------------------------------------------------


def _walk_types(delta_type: Any, where: str, out: list[tuple[str, Any]]) -> None:
    """Every type in ``delta_type`` (itself included) with the column path it sits at."""
    out.append((where, delta_type))
    if not isinstance(delta_type, dict):
        return
    kind = delta_type.get("type")
    if kind == "struct":
        for f in delta_type.get("fields", []):
            _walk_types(f["type"], f"{where}.{f['name']}", out)
    elif kind == "array":
        _walk_types(delta_type.get("elementType"), f"{where}.element", out)
    elif kind == "map":
        _walk_types(delta_type.get("keyType"), f"{where}.key", out)
        _walk_types(delta_type.get("valueType"), f"{where}.value", out)


def _all_types(fields: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for f in fields:
        _walk_types(f["type"], f["name"], out)
    return out


def _v1_type_problems(fields: list[dict[str, Any]]) -> list[str]:
    for where, typ in _all_types(fields):
        kind = typ.get("type") if isinstance(typ, dict) else typ
        if kind in ("map", "array", "void"):
            return [f"no map, array or void columns (column {where} is a {kind})"]
    return []


def _v2_type_problems(fields: list[dict[str, Any]]) -> list[str]:
    for where, typ in _all_types(fields):
        if isinstance(typ, dict):
            if typ.get("type") in ("struct", "array", "map"):
                continue
            kind = str(typ.get("type"))
        else:
            kind = str(typ)
        if kind not in _V2_PRIMITIVES and not kind.startswith("decimal"):
            return [f"only Iceberg's types in the schema (column {where} is a {kind})"]
    return []


def _nested_paths(delta_type: Any, prefix: str, out: list[str]) -> None:
    """Paths of array elements and map keys and values below one struct field, down to (not
    into) the next struct, whose fields hold their own ids."""
    if not isinstance(delta_type, dict):
        return
    kind = delta_type.get("type")
    if kind == "array":
        out.append(f"{prefix}.element")
        _nested_paths(delta_type.get("elementType"), f"{prefix}.element", out)
    elif kind == "map":
        out.extend((f"{prefix}.key", f"{prefix}.value"))
        _nested_paths(delta_type.get("keyType"), f"{prefix}.key", out)
        _nested_paths(delta_type.get("valueType"), f"{prefix}.value", out)


def _struct_fields(delta_type: Any) -> list[dict[str, Any]]:
    """Struct fields reachable from a type through arrays and maps (one level of structs)."""
    if not isinstance(delta_type, dict):
        return []
    kind = delta_type.get("type")
    if kind == "struct":
        return list(delta_type.get("fields", []))
    if kind == "array":
        return _struct_fields(delta_type.get("elementType"))
    if kind == "map":
        return _struct_fields(delta_type.get("keyType")) + _struct_fields(
            delta_type.get("valueType")
        )
    return []


def _every_field(fields: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every struct field: the top-level ones and those of nested structs, at any depth."""
    for f in fields:
        yield f
        yield from _every_field(_struct_fields(f["type"]))


def _missing_nested_ids(fields: list[dict[str, Any]]) -> list[str]:
    for f in _every_field(fields):
        meta = f.get("metadata") or {}
        physical = meta.get(PHYSICAL_NAME_KEY) or f["name"]
        wanted: list[str] = []
        _nested_paths(f["type"], "", wanted)
        ids: dict[str, Any] = {}
        for key in NESTED_IDS_KEYS:
            raw = meta.get(key)
            if isinstance(raw, Mapping):
                ids.update(raw)
        for path in wanted:
            if f"{physical}{path}" not in ids and f"{f['name']}{path}" not in ids:
                return [
                    f"array elements and map keys and values need ids in "
                    f"delta.columnMapping.nested.ids (column {f['name']} has none for "
                    f"{path.lstrip('.')})"
                ]
    return []


def _type_change_problems(fields: list[dict[str, Any]]) -> list[str]:
    for f in _every_field(fields):
        raw = (f.get("metadata") or {}).get("delta.typeChanges")
        changes = json.loads(raw) if isinstance(raw, str) else raw
        for change in changes if isinstance(changes, list) else []:
            if not isinstance(change, Mapping):
                continue
            source, target = str(change.get("fromType")), str(change.get("toType"))
            if not _iceberg_type_change(source, target):
                return [
                    f"only type changes Iceberg supports (column {f['name']} was widened from "
                    f"{source} to {target})"
                ]
    return []


def _decimal_scale(name: str) -> int | None:
    if not name.startswith("decimal"):
        return None
    try:
        return int(name.split(",")[1].strip(" )"))
    except (IndexError, ValueError):
        return None


def _iceberg_type_change(source: str, target: str) -> bool:
    """PROTOCOL.md "Writer Requirements for Type Widening": the changes Iceberg V2 refuses."""
    if target == "double" and source in _INTEGERS:
        return False
    if source == "date" and target == "timestamp_ntz":
        return False
    if target.startswith("decimal") and source in _INTEGERS:
        return False
    before, after = _decimal_scale(source), _decimal_scale(target)
    return not (before is not None and after is not None and after > before)
