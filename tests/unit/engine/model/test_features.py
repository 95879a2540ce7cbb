"""Protocol and table-feature checks (PROTOCOL.md "Table Features"): what we read, what we write,
what we refuse."""

from __future__ import annotations

import json

import pytest

from tests.conftest import TESTDATA
from tests.unit.case_ids import readable
from txntable.engine.errors import (
    UnsupportedFeatureError,
    UnsupportedReaderFeatureError,
    UnsupportedWriterFeatureError,
)
from txntable.engine.model.actions import Metadata, Protocol
from txntable.engine.model.features import (
    check_maintainable,
    check_readable,
    check_writable,
    reader_features,
    table_features,
    writer_features,
)
from txntable.engine.table import Table


def meta(
    configuration: dict[str, str] | None = None, field_metadata: dict | None = None
) -> Metadata:
    schema = {
        "type": "struct",
        "fields": [
            {"name": "a", "type": "long", "nullable": True, "metadata": field_metadata or {}}
        ],
    }
    return Metadata(id="x", schema_string=json.dumps(schema), configuration=configuration or {})


def test_legacy_versions_imply_features() -> None:
    assert writer_features(Protocol(1, 2)) == {"appendOnly", "invariants"}
    assert "identityColumns" in writer_features(Protocol(1, 6))
    assert reader_features(Protocol(2, 5)) == {"columnMapping"}
    assert reader_features(Protocol(1, 2)) == frozenset()
    explicit = Protocol(3, 7, ["deletionVectors"], ["deletionVectors", "appendOnly"])
    assert reader_features(explicit) == {"deletionVectors"}
    assert writer_features(explicit) == {"deletionVectors", "appendOnly"}


def protocol_id(value: object) -> str | None:
    """Case id: ``r3w7`` and the features for a Protocol, ``readable`` for anything else."""
    if not isinstance(value, Protocol):
        return readable(value)
    features = sorted({*(value.reader_features or ()), *(value.writer_features or ())})
    return "+".join([f"r{value.min_reader_version}w{value.min_writer_version}", *features])


@pytest.mark.parametrize(
    "protocol",
    [
        Protocol(1, 1),
        Protocol(1, 2),
        Protocol(1, 4),
        Protocol(1, 7, None, ["appendOnly", "domainMetadata"]),
        Protocol(1, 7, None, ["domainMetadata", "clustering"]),  # liquid clustering
        Protocol(1, 7, None, ["domainMetadata", "rowTracking"]),  # row tracking
        Protocol(3, 7, ["deletionVectors", "v2Checkpoint", "timestampNtz"], ["deletionVectors"]),
        Protocol(3, 7, ["vacuumProtocolCheck"], ["vacuumProtocolCheck", "checkpointProtection"]),
    ],
    ids=protocol_id,
)
def test_readable_and_writable(protocol: Protocol) -> None:
    check_readable(protocol)
    check_writable(protocol, meta())


@pytest.mark.parametrize(
    ("protocol", "named", "message"),
    [
        (Protocol(4, 7), "readerVersion=4", "reader protocol version 4"),
        (Protocol(0, 2), "readerVersion=0", "reader protocol version 0"),
        (Protocol(3, 6, ["deletionVectors"]), "readerVersion=3", "requires writer version 7"),
        (Protocol(1, 2, ["deletionVectors"]), "deletionVectors", "deletionVectors"),
        (Protocol(3, 7, ["blahabl", "deletionVectors"], ["blahabl"]), "blahabl", "blahabl"),
        (
            Protocol(3, 7, ["catalogManaged"], ["catalogManaged"]),
            "catalogManaged",
            "catalogManaged",
        ),
    ],
    ids=protocol_id,
)
def test_unreadable_protocols_name_the_problem(
    protocol: Protocol, named: str, message: str
) -> None:
    with pytest.raises(UnsupportedReaderFeatureError, match=message) as info:
        check_readable(protocol)
    assert named in info.value.features
    with pytest.raises(UnsupportedFeatureError):
        check_writable(protocol)


@pytest.mark.parametrize(
    ("protocol", "named"),
    [
        (Protocol(1, 8), "writerVersion=8"),
        (Protocol(2, 5), "columnMapping"),
        (Protocol(1, 7, None, ["icebergCompatV1"]), "icebergCompatV1"),
        (Protocol(1, 7, None, ["someFutureFeature"]), "someFutureFeature"),
        (Protocol(3, 7, ["columnMapping"], ["columnMapping"]), "columnMapping"),
        # read at the log level only: data rewrites would have to honour them
        (Protocol(3, 7, ["typeWidening"], ["typeWidening"]), "typeWidening"),
        (
            Protocol(3, 7, ["typeWidening-preview"], ["typeWidening-preview"]),
            "typeWidening-preview",
        ),
        (Protocol(3, 7, ["variantType"], ["variantType"]), "variantType"),
        (Protocol(3, 7, ["variantType-preview"], ["variantType-preview"]), "variantType-preview"),
        (
            Protocol(3, 7, ["variantType", "variantShredding-preview"], ["variantType"]),
            "variantShredding-preview",
        ),
    ],
    ids=protocol_id,
)
def test_unwritable_protocols_name_the_feature(protocol: Protocol, named: str) -> None:
    check_readable(protocol)
    with pytest.raises(UnsupportedWriterFeatureError) as info:
        check_writable(protocol, meta())
    assert named in info.value.features
    assert named.removeprefix("writerVersion=") in str(info.value)


@pytest.mark.parametrize(
    ("protocol", "metadata", "named"),
    [
        (Protocol(1, 2), meta(field_metadata={"delta.invariants": "{}"}), "invariants"),
        (Protocol(1, 3), meta({"delta.constraints.pos": "a > 0"}), "checkConstraints"),
        (
            Protocol(1, 4),
            meta(field_metadata={"delta.generationExpression": "1"}),
            "generatedColumns",
        ),
        (
            Protocol(1, 7, None, ["identityColumns"]),
            meta(field_metadata={"delta.identity.start": 1}),
            "identityColumns",
        ),
    ],
    ids=protocol_id,
)
def test_supported_if_inactive_features_are_refused_when_active(
    protocol: Protocol, metadata: Metadata, named: str
) -> None:
    check_writable(protocol, meta())  # inactive: fine
    with pytest.raises(UnsupportedWriterFeatureError, match=named):
        check_writable(protocol, metadata)
    # a rewrite (OPTIMIZE, VACUUM's commits) changes no row: the rows there satisfy them
    check_writable(protocol, metadata, rows_unchanged=True)


def test_reference_table_with_unknown_features_is_refused_on_read() -> None:
    # simple_table_features declares reader version 5 with a feature list (deltalake refuses too)
    with pytest.raises(UnsupportedReaderFeatureError, match="reader protocol version 5"):
        Table.open(str(TESTDATA / "simple_table_features")).snapshot()


@pytest.mark.parametrize(
    ("name", "writable"),
    [
        ("simple_table", True),
        ("table-with-dv-small", True),
        ("table_with_column_mapping", False),  # column mapping: rewrites only, no appends
        ("checkpoint-v2-table", False),  # identity column active
    ],
)
def test_reference_tables_writability(name: str, writable: bool) -> None:
    snapshot = Table.open(str(TESTDATA / name)).snapshot()
    if writable:
        check_writable(snapshot.protocol, snapshot.metadata)
    else:
        with pytest.raises(UnsupportedWriterFeatureError):
            check_writable(snapshot.protocol, snapshot.metadata)


# -- steps that change no row: a checkpoint, log cleanup, VACUUM ------------------------------


@pytest.mark.parametrize(
    "protocol",
    [
        Protocol(2, 5),  # column mapping
        Protocol(3, 7, ["variantType", "variantShredding-preview"], ["variantType"]),
        Protocol(3, 7, ["typeWidening"], ["typeWidening"]),
        Protocol(1, 7, None, ["icebergCompatV2", "columnMapping", "collations", "liquid"]),
        Protocol(1, 7, None, ["checkpointProtection", "materializePartitionColumns"]),
        Protocol(3, 7, ["vacuumProtocolCheck"], ["vacuumProtocolCheck", "invariants"]),
    ],
    ids=protocol_id,
)
def test_every_known_feature_allows_the_steps_that_change_no_row(protocol: Protocol) -> None:
    for step in ("checkpoint", "log cleanup", "VACUUM"):
        check_maintainable(protocol, step)


@pytest.mark.parametrize(
    ("protocol", "named", "why"),
    [
        (Protocol(1, 7, None, ["someFutureFeature"]), "someFutureFeature", "may add fields"),
        (
            Protocol(3, 7, ["vacuumProtocolCheck"], ["vacuumProtocolCheck", "futureOne"]),
            "futureOne",
            "may add fields",
        ),
        (
            Protocol(1, 7, None, ["coordinatedCommits-preview", "inCommitTimestamp"]),
            "coordinatedCommits-preview",
            "commit coordinator",
        ),
        (Protocol(1, 8), "writerVersion=8", "writer protocol version 8"),
    ],
    ids=protocol_id,
)
def test_unknown_features_refuse_every_step(protocol: Protocol, named: str, why: str) -> None:
    with pytest.raises(UnsupportedWriterFeatureError, match=why) as info:
        check_maintainable(protocol, "VACUUM")
    assert named in info.value.features


def test_unreadable_tables_refuse_every_step() -> None:
    with pytest.raises(UnsupportedReaderFeatureError):
        check_maintainable(Protocol(3, 7, ["catalogManaged"], ["catalogManaged"]), "checkpoint")


def test_rewrites_honour_collations_iceberg_compat_and_materialized_partitions() -> None:
    protocol = Protocol(2, 7, None, ["columnMapping", "collations-preview", "icebergCompatV1"])
    check_writable(protocol, meta(), rows_unchanged=True)
    with pytest.raises(UnsupportedWriterFeatureError, match="collations-preview"):
        check_writable(protocol, meta())  # appends: the writer of new rows does not map columns
    check_writable(Protocol(1, 7, None, ["materializePartitionColumns"]), rows_unchanged=True)


def test_liquid_is_the_clustering_feature() -> None:
    assert table_features(Protocol(1, 7, None, ["liquid", "domainMetadata"])) == {
        "clustering",
        "domainMetadata",
    }
    check_writable(Protocol(1, 7, None, ["liquid", "domainMetadata"]), meta())
