"""Which table features a protocol puts in force: the one reading of ``minReaderVersion``,
``minWriterVersion`` and the feature lists, legacy versions' implied features and legacy
spellings included.

Both the engine's capability checks (``features``) and the Iceberg compatibility rules
(``iceberg_compat``, which ``features.check_writable`` consults) start from it; it lives apart
from both so that neither has to import the other to learn what a table requires.
"""

from __future__ import annotations

from txntable.engine.model.actions import Protocol

# Features implied by legacy protocol versions (PROTOCOL.md "Table Features for New and Existing
# Tables" and "Writer Version Requirements").
_LEGACY_READER = {1: frozenset[str](), 2: frozenset({"columnMapping"})}
_LEGACY_WRITER: dict[int, frozenset[str]] = {
    1: frozenset(),
    2: frozenset({"appendOnly", "invariants"}),
    3: frozenset({"appendOnly", "invariants", "checkConstraints"}),
    4: frozenset(
        {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns"}
    ),
    5: frozenset(
        {
            "appendOnly",
            "invariants",
            "checkConstraints",
            "changeDataFeed",
            "generatedColumns",
            "columnMapping",
        }
    ),
    6: frozenset(
        {
            "appendOnly",
            "invariants",
            "checkConstraints",
            "changeDataFeed",
            "generatedColumns",
            "columnMapping",
            "identityColumns",
        }
    ),
}

#: Legacy spellings of a feature, by the name this engine knows it under: Delta's first liquid
#: clustering tables list ``liquid`` for what the protocol now calls ``clustering``.
ALIASES = {"liquid": "clustering"}


def reader_features(protocol: Protocol) -> frozenset[str]:
    """Reader features in force for a protocol (explicit list for reader version 3)."""
    if protocol.min_reader_version == 3:
        return frozenset(protocol.reader_features or ())
    return _LEGACY_READER.get(protocol.min_reader_version, frozenset())


def writer_features(protocol: Protocol) -> frozenset[str]:
    """Writer features in force for a protocol (explicit list for writer version 7)."""
    if protocol.min_writer_version == 7:
        return frozenset(protocol.writer_features or ())
    return _LEGACY_WRITER.get(protocol.min_writer_version, frozenset())


def table_features(protocol: Protocol) -> frozenset[str]:
    """Every feature in force, reader and writer, legacy spellings under their current names."""
    features = writer_features(protocol) | reader_features(protocol)
    return frozenset(ALIASES.get(f, f) for f in features)
