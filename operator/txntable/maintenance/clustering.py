"""Liquid clustering: whether a table is clustered, and by which columns, as OPTIMIZE needs it.

A table is clustered when its protocol lists the ``clustering`` writer feature (PROTOCOL.md,
"Clustered Table"). Its clustering columns live in the ``delta.clustering`` domain metadata, whose
configuration is ``{"clusteringColumns": [...]}``: each entry is a column path of *physical*
names when column mapping is on (logical names otherwise). Delta's writers store each path as a
list of name parts (``[["a"], ["s", "x"]]``); the protocol's example shows plain strings
(``["a"]``): both are read. A clustered table without the domain, or with an empty list, has no
clustering columns, and OPTIMIZE then compacts it like any other table.

OPTIMIZE orders the rows it reads by logical top-level column names, so the physical paths are
mapped back through the schema here, once, before any work; a nested path, a column the schema
no longer has, a partition column or a type rows cannot be ordered by is refused with the column
named. Files OPTIMIZE clustered carry ``clusteringProvider: "liquid"``, the name Delta's own
implementation uses, so Spark and this operator recognise each other's clustered files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from txntable.engine.model.actions import DomainMetadata, Protocol
from txntable.engine.model.features import table_features
from txntable.engine.model.schema import Field, to_arrow_type
from txntable.engine.read.snapshot import Snapshot
from txntable.maintenance.errors import ClusteringError

CLUSTERING_FEATURE = "clustering"
CLUSTERING_DOMAIN = "delta.clustering"
#: ``clusteringProvider`` of the files OPTIMIZE clusters (Delta's liquid clustering writes it too).
LIQUID = "liquid"
_MAPPING_MODE = "delta.columnMapping.mode"


def is_clustered(protocol: Protocol) -> bool:
    """The table is clustered (its protocol lists the ``clustering`` writer feature, or
    ``liquid``, its name in Delta's first liquid clustering tables)."""
    return CLUSTERING_FEATURE in table_features(protocol)


def clustering_paths(domains: Mapping[str, DomainMetadata]) -> list[tuple[str, ...]]:
    """The column paths recorded in the ``delta.clustering`` domain, as stored (physical names
    under column mapping); empty when the domain is absent or lists no column."""
    domain = domains.get(CLUSTERING_DOMAIN)
    if domain is None or domain.removed:
        return []
    try:
        config = json.loads(domain.configuration) if domain.configuration else {}
    except ValueError as exc:
        raise ClusteringError(
            f"the {CLUSTERING_DOMAIN} domain metadata is not valid JSON: {exc}"
        ) from exc
    if not isinstance(config, dict):
        raise ClusteringError(f"the {CLUSTERING_DOMAIN} domain metadata is not a JSON object")
    raw = config.get("clusteringColumns")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ClusteringError(f"{CLUSTERING_DOMAIN}: clusteringColumns is not a list: {raw!r}")
    paths: list[tuple[str, ...]] = []
    for entry in raw:
        path = (entry,) if isinstance(entry, str) else entry
        if (
            not isinstance(path, (list, tuple))
            or not path
            or not all(isinstance(p, str) and p for p in path)
        ):
            raise ClusteringError(f"{CLUSTERING_DOMAIN}: bad clustering column {entry!r}")
        paths.append(tuple(path))
    return paths


def logical_columns(
    paths: Sequence[tuple[str, ...]],
    fields: Sequence[Field],
    configuration: Mapping[str, str],
    partition_columns: Sequence[str] = (),
) -> tuple[str, ...]:
    """Logical top-level column names of clustering ``paths``; refuses what OPTIMIZE cannot
    order rows by, naming the column."""
    mapped = (configuration.get(_MAPPING_MODE) or "none").strip().lower() in ("name", "id")
    out: list[str] = []
    for path in paths:
        shown = ".".join(path)
        field = _find(fields, path[0], mapped)
        if field is None:
            raise ClusteringError(
                f"clustering column {shown!r} ({CLUSTERING_DOMAIN}) is not in the table schema"
            )
        if len(path) > 1:
            logical = ".".join([field.name, *path[1:]]) if mapped else shown
            raise ClusteringError(
                f"clustering column {logical!r} is a nested field: OPTIMIZE clusters by "
                "top-level columns only"
            )
        if field.name in partition_columns:
            raise ClusteringError(
                f"clustering column {field.name!r} is also a partition column (a clustered "
                "table may not be partitioned)"
            )
        if _unorderable(field.type):
            raise ClusteringError(
                f"cannot cluster by column {field.name!r} of type {_type_name(field.type)}"
            )
        if field.name in out:
            raise ClusteringError(f"clustering column {field.name!r} is listed twice")
        out.append(field.name)
    return tuple(out)


def clustering_columns(snapshot: Snapshot) -> tuple[str, ...] | None:
    """The logical clustering columns of a clustered table (possibly none), or None when the
    table is not clustered."""
    if not is_clustered(snapshot.protocol):
        return None
    return logical_columns(
        clustering_paths(snapshot.domains),
        snapshot.fields,
        snapshot.configuration,
        snapshot.partition_columns,
    )


def describe_clustering(snapshot: Snapshot) -> list[str] | None:
    """For display (``inspect``): the clustering columns by logical name where they map, by
    their stored path otherwise; None when the table is not clustered. Never raises for a
    domain OPTIMIZE would refuse: showing it is still useful."""
    if not is_clustered(snapshot.protocol):
        return None
    try:
        paths = clustering_paths(snapshot.domains)
    except ClusteringError:
        domain = snapshot.domains.get(CLUSTERING_DOMAIN)
        return [f"(unreadable: {domain.configuration if domain else ''})"]
    mapped = (snapshot.configuration.get(_MAPPING_MODE) or "none").strip().lower() in (
        "name",
        "id",
    )
    shown = []
    for path in paths:
        field = _find(snapshot.fields, path[0], mapped)
        head = field.name if field is not None else path[0]
        shown.append(".".join([head, *path[1:]]))
    return shown


def _find(fields: Sequence[Field], name: str, mapped: bool) -> Field | None:
    if mapped:  # the domain holds physical names
        return next((f for f in fields if f.physical_name == name), None)
    exact = next((f for f in fields if f.name == name), None)
    if exact is not None:
        return exact
    folded = [f for f in fields if f.name.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


def _unorderable(delta_type: Any) -> bool:
    try:
        arrow = to_arrow_type(delta_type)
    except Exception:
        return True
    return bool(pa.types.is_nested(arrow) or pa.types.is_null(arrow))


def _type_name(delta_type: Any) -> str:
    if isinstance(delta_type, dict):
        return str(delta_type.get("type", "complex"))
    return str(delta_type)


__all__ = [
    "CLUSTERING_DOMAIN",
    "CLUSTERING_FEATURE",
    "LIQUID",
    "clustering_columns",
    "clustering_paths",
    "describe_clustering",
    "is_clustered",
    "logical_columns",
]
