"""Protocol versions and table features: what this engine can read and write.

A reader that silently ignores a feature it does not understand returns wrong answers (deleted
rows come back, columns are misnamed), so the checks here run before anything beyond the protocol
and metadata is read, and name the offending feature in the error.
"""

from __future__ import annotations

from txntable.engine.errors import (
    UnsupportedReaderFeatureError,
    UnsupportedWriterFeatureError,
)
from txntable.engine.model.actions import Metadata, Protocol
from txntable.engine.model.protocol_features import (
    ALIASES,
    reader_features,
    table_features,
    writer_features,
)

# what a protocol puts in force is read in ``protocol_features``; its names stay importable here
__all__ = [
    "ALIASES",
    "LOG_FEATURES",
    "READABLE_FEATURES",
    "REWRITABLE_FEATURES",
    "WRITABLE_FEATURES",
    "check_maintainable",
    "check_readable",
    "check_writable",
    "reader_features",
    "table_features",
    "writer_features",
]

#: Reader features whose log-level semantics this engine implements. Column mapping is read at
#: the log level (physical partition names map to logical ones); deletion vectors are listed with
#: their descriptors; V2 checkpoints and sidecars are read. Variant and type-widening tables
#: differ only in their data files (a variant column's encoding, a column stored in an older,
#: narrower type), never in the log: they are readable for inspection and log maintenance.
#: Writing them is limited to rewrites (``REWRITABLE_FEATURES``).
READABLE_FEATURES = frozenset(
    {
        "columnMapping",
        "deletionVectors",
        "timestampNtz",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "variantType",
        "variantType-preview",
        "variantShredding-preview",
        "variantShredding",
        "typeWidening",
        "typeWidening-preview",
        # geometry and geography columns: WKB in the data files (``geospatial``), nothing new
        # in the log beyond their type names
        "geospatial",
    }
)

#: Writer features this engine can always honour, listed or not (PROTOCOL.md "Supported Features").
WRITABLE_FEATURES = frozenset(
    {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "generatedColumns",
        "allowColumnDefaults",
        "changeDataFeed",
        "identityColumns",
        "timestampNtz",
        "domainMetadata",
        # liquid clustering: files may stay unclustered (a writer need not cluster at any given
        # moment), adds carry stats per the table's stats settings (Delta keeps the clustering
        # columns among them); OPTIMIZE clusters and sets clusteringProvider
        "clustering",
        "vacuumProtocolCheck",
        "v2Checkpoint",
        "deletionVectors",
        "checkpointProtection",
        # the commit path writes commitInfo first with a monotonic inCommitTimestamp (commit.info)
        "inCommitTimestamp",
        # every commit numbers its adds above the row-id high-water mark, per attempt
        # (engine/commit/row_tracking.py); OPTIMIZE preserves stable row ids and commit versions
        "rowTracking",
    }
)


#: Features that change how rows sit in data files, which a rewrite (``rows_unchanged``, e.g.
#: OPTIMIZE) honours through ``engine.model.physical``: files are read by physical name or Parquet
#: field id and written with physical names and ids (column mapping), every column is written in
#: its current type (type widening) and variant columns are carried through as their two binaries;
#: partition columns are materialized into the files written (``materializePartitionColumns``, and
#: the Iceberg compatibility features, whose other rules ``engine.model.iceberg_compat`` checks;
#: icebergCompatV3's files also carry Iceberg's row lineage field ids on the materialized row
#: tracking columns). Geometry and geography columns are read and written as WKB with Parquet's
#: geospatial logical types (``engine.model.geospatial``; a CRS or edge algorithm the Parquet
#: writer cannot express is refused). Collations change how strings compare, never how they are
#: stored: a rewrite keeps the schema's collation metadata and the ``delta.collations`` domain
#: untouched and writes no min/max statistics for collated columns
#: (``PhysicalLayout.unbounded_paths``), so no reader skips a file by a binary order its collation
#: does not share. Appends stay refused: the writer of new rows does not map columns yet. Shredded
#: variants (``variantShredding*``) are not here: their per-file typed_value layouts cannot be
#: merged byte for byte, so such tables are refused, rewrites included.
REWRITABLE_FEATURES = frozenset(
    {
        "collations",
        "collations-preview",
        "columnMapping",
        "typeWidening",
        "typeWidening-preview",
        "variantType",
        "variantType-preview",
        "materializePartitionColumns",
        "icebergCompatV1",
        "icebergCompatV2",
        "icebergCompatV3",
        "geospatial",
    }
)

_SHREDDING = frozenset({"variantShredding", "variantShredding-preview"})

#: Every feature whose rules for the log this engine knows (PROTOCOL.md "Valid Feature Names in
#: Table Features" and the accepted RFCs): the steps that change no row (a checkpoint, log
#: cleanup, VACUUM) can honour all of them on a table this engine reads. A checkpoint carries
#: every field of the actions it keeps (``read.state`` holds each field these features define);
#: cleanup never creates a checkpoint and never deletes one at or after its truncation version,
#: which is what ``checkpointProtection`` allows; VACUUM keeps every file a feature makes the
#: log reference (deletion vectors, change data) and the Iceberg metadata of the compatibility
#: features. A feature not named here may add fields, files or rules this engine would drop:
#: every step refuses it. ``catalogManaged`` tables are not read at all, and
#: ``coordinatedCommits-preview`` is left out on purpose: its commits are ratified by a
#: coordinator first, so the log in storage may lag the table and hold none of the newest files.
LOG_FEATURES = (
    READABLE_FEATURES | WRITABLE_FEATURES | REWRITABLE_FEATURES | _SHREDDING | frozenset({"liquid"})
)


def check_readable(protocol: Protocol) -> None:
    """Raise unless this engine can read a table with this protocol."""
    version = protocol.min_reader_version
    if version not in (1, 2, 3):
        raise UnsupportedReaderFeatureError(
            f"unsupported reader protocol version {version} (this engine reads versions 1-3)",
            (f"readerVersion={version}",),
        )
    if version == 3 and protocol.min_writer_version != 7:
        raise UnsupportedReaderFeatureError(
            "invalid protocol: reader version 3 requires writer version 7", ("readerVersion=3",)
        )
    if version != 3 and protocol.reader_features:
        raise UnsupportedReaderFeatureError(
            f"invalid protocol: reader features {sorted(protocol.reader_features)} listed "
            f"with reader version {version}",
            tuple(protocol.reader_features),
        )
    missing = sorted(reader_features(protocol) - READABLE_FEATURES)
    if missing:
        raise UnsupportedReaderFeatureError(
            f"table requires reader feature(s) this engine does not support: {', '.join(missing)}",
            tuple(missing),
        )


def _check_writer_version(protocol: Protocol) -> None:
    version = protocol.min_writer_version
    if not 1 <= version <= 7:
        raise UnsupportedWriterFeatureError(
            f"unsupported writer protocol version {version}", (f"writerVersion={version}",)
        )


def check_writable(
    protocol: Protocol, metadata: Metadata | None = None, *, rows_unchanged: bool = False
) -> None:
    """Raise unless this engine can commit to a table with this protocol and metadata.

    ``rows_unchanged``: the commit only rewrites files (``dataChange=false``) or records
    commitInfo, so no row is added or changed. CHECK constraints, invariants, generated and
    identity columns then need no enforcement: the rows already in the table satisfy them; the
    Iceberg compatibility features' rules are checked against the table (``iceberg_compat``)."""
    check_readable(protocol)
    _check_writer_version(protocol)
    features = table_features(protocol)
    missing = set(features - WRITABLE_FEATURES)
    if rows_unchanged:
        missing -= REWRITABLE_FEATURES
    if metadata is not None and not rows_unchanged:
        missing |= _active_but_unenforced(features, metadata)
    if missing:
        names = ", ".join(sorted(missing))
        hint = ""
        if missing & _SHREDDING:
            hint = (
                " (shredded variant columns keep a typed_value layout per file, which a "
                "rewrite cannot merge byte for byte)"
            )
        raise UnsupportedWriterFeatureError(
            f"table requires writer feature(s) this engine does not support: {names}{hint}",
            tuple(sorted(missing)),
        )
    if metadata is not None and "geospatial" in features:
        from txntable.engine.model.geospatial import unwritable_columns

        bad = unwritable_columns(metadata.schema_string)
        if bad:
            column, why = bad[0]
            raise UnsupportedWriterFeatureError(
                f"geospatial column {column} cannot be rewritten: {why}", ("geospatial",)
            )
    if metadata is not None:
        from txntable.engine.model.iceberg_compat import unmet_rules

        unmet = unmet_rules(protocol, metadata)
        if unmet:
            feature, rule = unmet[0]
            raise UnsupportedWriterFeatureError(
                f"{feature} is active and its rule cannot be met: {rule}",
                tuple(sorted({f for f, _ in unmet})),
            )


def check_maintainable(protocol: Protocol, step: str) -> None:
    """Raise unless ``step`` (a checkpoint, log cleanup or VACUUM: a step that changes no row)
    can run on a table with this protocol: the table must be readable and every feature it
    lists known to this engine (``LOG_FEATURES``). ``step`` names the step in the message."""
    check_readable(protocol)
    _check_writer_version(protocol)
    unknown = sorted(table_features(protocol) - LOG_FEATURES)
    if not unknown:
        return
    names = ", ".join(unknown)
    if "coordinatedCommits-preview" in unknown:
        why = (
            "its commits are ratified by a commit coordinator first, so the log in storage may "
            "lag the table"
        )
    else:
        why = "an unknown feature may add fields, files or rules this step would break"
    raise UnsupportedWriterFeatureError(
        f"{step} refused: the table requires feature(s) this engine does not know: {names} ({why})",
        tuple(unknown),
    )


def _active_but_unenforced(features: frozenset[str], metadata: Metadata) -> set[str]:
    """Supported-if-inactive features (PROTOCOL.md "Active Features") that the table has actually
    turned on."""
    from txntable.engine.model.schema import parse_schema

    active: set[str] = set()
    fields = parse_schema(metadata.schema_string)
    if "invariants" in features and any("delta.invariants" in f.metadata for f in fields):
        active.add("invariants")
    if "checkConstraints" in features and any(
        k.startswith("delta.constraints.") for k in metadata.configuration
    ):
        active.add("checkConstraints")
    if "generatedColumns" in features and any(
        "delta.generationExpression" in f.metadata for f in fields
    ):
        active.add("generatedColumns")
    if "identityColumns" in features and any("delta.identity.start" in f.metadata for f in fields):
        active.add("identityColumns")
    return active
