"""What ``txntable vacuum`` and ``txntable optimize --vacuum`` print when VACUUM kept files for
the Iceberg readers of a UniForm table (ADR 0010)."""

from __future__ import annotations

from txntable.cli.optimize_cmd import iceberg_lines, vacuum_lines

HELD = {
    "metadata": ["metadata/00002-a.metadata.json", "metadata/00002-b.metadata.json"],
    "snapshotIds": [1, 2],
    "deltaVersions": [6, 7],
    "numHeld": 3,
    "heldBytes": 300,
    "held": ["x/1.parquet", "x/2.parquet"],  # a result line names the first ones only
}


def test_the_files_kept_for_iceberg_are_counted_named_and_explained() -> None:
    assert iceberg_lines(HELD) == [
        "vacuum: kept 3 files (300 bytes) that the current Iceberg metadata still reads "
        "(metadata/00002-a.metadata.json, metadata/00002-b.metadata.json, converted from Delta "
        "version 6, 7): Delta regenerates it at the table's next Delta commit, and a VACUUM "
        "after that deletes them",
        "  x/1.parquet",
        "  x/2.parquet",
        "  ... and 1 more",
    ]


def test_nothing_is_said_when_nothing_was_kept() -> None:
    assert iceberg_lines(None) == []
    assert iceberg_lines({**HELD, "numHeld": 0, "heldBytes": 0, "held": []}) == []
    doc = {
        "retentionMs": 0,
        "dryRun": False,
        "numFiles": 1,
        "numDeleted": 1,
        "bytes": 10,
        "numReferenced": 2,
        "files": ["y.parquet"],
    }
    assert len(vacuum_lines(doc)) == 2
    assert vacuum_lines({**doc, "iceberg": HELD})[2:] == iceberg_lines(HELD)
