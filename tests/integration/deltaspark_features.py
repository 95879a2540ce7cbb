"""Tables delta-spark writes on the fly, one per table feature it can write (issue 21.3).

Each ``Recipe`` is the SQL delta-spark runs to make a table that uses one feature for real (not a
property flipped on an empty table): several small files in more than one commit, so OPTIMIZE has
work, and the feature's own operations (DELETE/UPDATE/MERGE for deletion vectors, renames and
drops for column mapping, ``ALTER COLUMN TYPE`` for type widening, ...). ``extra`` is a query
whose rows must not change under our maintenance beyond the table's rows themselves (row ids and
commit versions of row tracking, the change data feed); ``next`` is what delta-spark does on top
of our maintenance (its own OPTIMIZE of a clustered table, an append everywhere).

``{t}`` is the table (``delta.`path```), ``{path}`` its path.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

_FILES = "/*+ REPARTITION(3) */"


def _insert(columns: str, select: str, start: int, n: int) -> str:
    return (
        f"INSERT INTO {{t}} {columns} SELECT {_FILES} {select} "
        f"FROM range({start}, {start + n}) AS r(id)"
    )


@dataclass(frozen=True)
class Recipe:
    feature: str  # the table feature's name in the protocol
    sql: list[str]
    extra: str | None = None
    next: list[str] = field(default_factory=list)
    #: columns of the rows read and compared (``*`` by default)
    columns: str = "*"


_APPEND_NEXT = ["INSERT INTO {t} (id) VALUES (100000)"]


def _wkb(kind: int, *rings: list[tuple[float, float]]) -> str:
    """A little-endian WKB literal: a point (1), a line string (2) or a polygon (3)."""
    body = b""
    if kind == 1:
        body = struct.pack("<2d", *rings[0][0])
    elif kind == 2:
        body = struct.pack("<I", len(rings[0])) + b"".join(struct.pack("<2d", *p) for p in rings[0])
    else:
        body = struct.pack("<I", len(rings)) + b"".join(
            struct.pack("<I", len(r)) + b"".join(struct.pack("<2d", *p) for p in r) for r in rings
        )
    return "X'" + (struct.pack("<BI", 1, kind) + body).hex().upper() + "'"


#: a point, a line string, a polygon and a null, by row
_SHAPES = (
    "CASE id % 4 "
    f"WHEN 0 THEN {_wkb(1, [(1.0, 2.0)])} "
    f"WHEN 1 THEN {_wkb(2, [(0.0, 0.0), (3.0, 4.0)])} "
    f"WHEN 2 THEN {_wkb(3, [(0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 0.0)])} END"
)


def _geometry(srid: int) -> str:
    return f"ST_GeomFromWKB({_SHAPES}, {srid})"


_GEOGRAPHY = f"ST_GeogFromWKB({_SHAPES})"

RECIPES: dict[str, Recipe] = {
    "deletionVectors": Recipe(
        "deletionVectors",
        [
            "CREATE TABLE {t} (id BIGINT, s STRING) USING delta "
            "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
            _insert("", "id, CAST(id AS STRING)", 0, 600),
            "DELETE FROM {t} WHERE id % 10 = 0",
            "UPDATE {t} SET s = 'updated' WHERE id % 10 = 1",
            "MERGE INTO {t} AS d USING (SELECT id, 'merged' AS s FROM range(590, 620) AS r(id)) "
            "AS m ON d.id = m.id WHEN MATCHED THEN UPDATE SET s = m.s "
            "WHEN NOT MATCHED THEN INSERT *",
        ],
        next=_APPEND_NEXT,
    ),
    "columnMapping-name": Recipe(
        "columnMapping",
        [
            "CREATE TABLE {t} (id BIGINT, a STRING, b INT) USING delta "
            "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')",
            _insert("", "id, CAST(id AS STRING), CAST(id AS INT)", 0, 300),
            "ALTER TABLE {t} RENAME COLUMN a TO renamed",
            "ALTER TABLE {t} DROP COLUMN b",
            "ALTER TABLE {t} ADD COLUMN c DOUBLE",
            _insert("", "id, CAST(id AS STRING), id / 4", 300, 300),
        ],
        next=_APPEND_NEXT,
    ),
    "columnMapping-id": Recipe(
        "columnMapping",
        [
            "CREATE TABLE {t} (id BIGINT, a STRING, b INT) USING delta "
            "TBLPROPERTIES ('delta.columnMapping.mode' = 'id')",
            _insert("", "id, CAST(id AS STRING), CAST(id AS INT)", 0, 300),
            "ALTER TABLE {t} RENAME COLUMN a TO renamed",
            "ALTER TABLE {t} DROP COLUMN b",
            "ALTER TABLE {t} ADD COLUMN b STRING",
            _insert("", "id, CAST(id AS STRING), 'new b'", 300, 300),
        ],
        next=_APPEND_NEXT,
    ),
    "rowTracking": Recipe(
        "rowTracking",
        [
            "CREATE TABLE {t} (id BIGINT, s STRING) USING delta "
            "TBLPROPERTIES ('delta.enableRowTracking' = 'true')",
            _insert("", "id, CAST(id AS STRING)", 0, 300),
            _insert("", "id, CAST(id AS STRING)", 300, 300),
            "UPDATE {t} SET s = 'updated' WHERE id % 7 = 0",
        ],
        extra="SELECT id, s, _metadata.row_id AS row_id, "
        "_metadata.row_commit_version AS row_commit_version FROM {t}",
        next=_APPEND_NEXT,
    ),
    "clustering": Recipe(
        "clustering",
        [
            "CREATE TABLE {t} (id BIGINT, x BIGINT) USING delta CLUSTER BY (x)",
            _insert("", "id, (id * 7919) % 1000", 0, 300),
            _insert("", "id, (id * 7919) % 1000", 300, 300),
        ],
        next=["INSERT INTO {t} VALUES (100000, 5)", "OPTIMIZE {t}"],
    ),
    "v2Checkpoint": Recipe(
        "v2Checkpoint",
        [
            "CREATE TABLE {t} (id BIGINT, s STRING) USING delta "
            "TBLPROPERTIES ('delta.checkpointPolicy' = 'v2', 'delta.checkpointInterval' = '2')",
            _insert("", "id, CAST(id AS STRING)", 0, 300),
            _insert("", "id, CAST(id AS STRING)", 300, 300),
            _insert("", "id, CAST(id AS STRING)", 600, 300),
        ],
        next=_APPEND_NEXT,
    ),
    "inCommitTimestamp": Recipe(
        "inCommitTimestamp",
        [
            "CREATE TABLE {t} (id BIGINT, s STRING) USING delta "
            "TBLPROPERTIES ('delta.enableInCommitTimestamps' = 'true')",
            _insert("", "id, CAST(id AS STRING)", 0, 300),
            _insert("", "id, CAST(id AS STRING)", 300, 300),
        ],
        next=_APPEND_NEXT,
    ),
    "typeWidening": Recipe(
        "typeWidening",
        [
            "CREATE TABLE {t} (id BIGINT, n INT, f FLOAT) USING delta "
            "TBLPROPERTIES ('delta.enableTypeWidening' = 'true')",
            _insert("", "id, CAST(id AS INT), CAST(id AS FLOAT) / 3", 0, 300),
            "ALTER TABLE {t} ALTER COLUMN n TYPE BIGINT",
            "ALTER TABLE {t} ALTER COLUMN f TYPE DOUBLE",
            _insert("", "id, id * 10000000000, CAST(id AS DOUBLE) / 3", 300, 300),
        ],
        next=_APPEND_NEXT,
    ),
    "variantType": Recipe(
        "variantType",
        [
            "CREATE TABLE {t} (id BIGINT, v VARIANT) USING delta",
            _insert(
                "",
                "id, parse_json(to_json(named_struct('a', id, 'b', array(id, id + 1), 'c', 'x')))",
                0,
                300,
            ),
            _insert("", "id, parse_json(CAST(id AS STRING))", 300, 300),
        ],
        next=_APPEND_NEXT,
    ),
    "checkConstraints": Recipe(
        "checkConstraints",
        [
            "CREATE TABLE {t} (id BIGINT, s STRING) USING delta",
            "ALTER TABLE {t} ADD CONSTRAINT non_negative CHECK (id >= 0)",
            _insert("", "id, CAST(id AS STRING)", 0, 300),
            _insert("", "id, CAST(id AS STRING)", 300, 300),
        ],
        next=_APPEND_NEXT,
    ),
    "generatedColumns": Recipe(
        "generatedColumns",
        [
            "CREATE TABLE {t} (id BIGINT, twice BIGINT GENERATED ALWAYS AS (id * 2)) USING delta",
            _insert("(id)", "id", 0, 300),
            _insert("(id)", "id", 300, 300),
        ],
        next=_APPEND_NEXT,
    ),
    "identityColumns": Recipe(
        "identityColumns",
        [
            "CREATE TABLE {t} (k BIGINT GENERATED ALWAYS AS IDENTITY, id BIGINT) USING delta",
            _insert("(id)", "id", 0, 300),
            _insert("(id)", "id", 300, 300),
        ],
        next=_APPEND_NEXT,
    ),
    "changeDataFeed": Recipe(
        "changeDataFeed",
        [
            "CREATE TABLE {t} (id BIGINT, s STRING) USING delta "
            "TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')",
            _insert("", "id, CAST(id AS STRING)", 0, 300),
            _insert("", "id, CAST(id AS STRING)", 300, 300),
            "UPDATE {t} SET s = 'updated' WHERE id % 9 = 0",
            "DELETE FROM {t} WHERE id % 11 = 0",
        ],
        extra="SELECT id, s, _change_type, _commit_version FROM table_changes_by_path('{path}', 0)",
        next=_APPEND_NEXT,
    ),
    "timestampNtz": Recipe(
        "timestampNtz",
        [
            "CREATE TABLE {t} (id BIGINT, t TIMESTAMP_NTZ, d DATE) USING delta",
            _insert(
                "",
                "id, CAST(timestamp_seconds(id * 86400 + 1) AS TIMESTAMP_NTZ), "
                "date_add(DATE '1900-01-01', CAST(id * 97 AS INT))",
                0,
                300,
            ),
            _insert(
                "",
                "id, CAST(timestamp_seconds(id * 3600) AS TIMESTAMP_NTZ), DATE '9999-12-31'",
                300,
                300,
            ),
        ],
        next=_APPEND_NEXT,
    ),
    # Delta 4.4's icebergCompatV3 (issue 33.7): column mapping and row tracking switched on by
    # the property, deletion vectors allowed (V1 and V2 forbid them), partition values in the
    # files; the files delta-spark writes sit under random two-letter prefixes
    "icebergCompatV3": Recipe(
        "icebergCompatV3",
        [
            "CREATE TABLE {t} (id BIGINT, s STRING, p STRING) USING delta PARTITIONED BY (p) "
            "TBLPROPERTIES ('delta.enableIcebergCompatV3' = 'true', "
            "'delta.enableDeletionVectors' = 'true')",
            _insert("", "id, CAST(id AS STRING), IF(id % 2 = 0, 'even', 'odd')", 0, 300),
            _insert("", "id, CAST(id AS STRING), IF(id % 2 = 0, 'even', 'odd')", 300, 300),
            "UPDATE {t} SET s = 'updated' WHERE id % 7 = 0",
            "DELETE FROM {t} WHERE id % 10 = 0",
        ],
        extra="SELECT id, s, p, _metadata.row_id AS row_id, "
        "_metadata.row_commit_version AS row_commit_version FROM {t}",
        next=["INSERT INTO {t} VALUES (100000, 'x', 'even')"],
    ),
    # Delta 4.4's geospatial reader/writer feature (issue 33.7), a preview in delta-spark 4.4
    # (spark.databricks.delta.geo.preview.enabled): WKB in Parquet's GEOMETRY/GEOGRAPHY types.
    # Read back as WKB hex and SRID, which every reader compares exactly
    "geospatial": Recipe(
        "geospatial",
        [
            "SET spark.databricks.delta.geo.preview.enabled = true",
            "CREATE TABLE {t} (id BIGINT, g GEOMETRY(4326), h GEOGRAPHY(4326), "
            "m GEOMETRY(3857)) USING delta",
            *(
                _insert("", f"id, {_geometry(4326)}, {_GEOGRAPHY}, {_geometry(3857)}", n, 200)
                for n in (0, 200, 400)
            ),
        ],
        columns="id, hex(ST_AsBinary(g)) AS g, ST_Srid(g) AS g_srid, hex(ST_AsBinary(h)) AS h, "
        "ST_Srid(h) AS h_srid, hex(ST_AsBinary(m)) AS m, ST_Srid(m) AS m_srid",
        next=_APPEND_NEXT,
    ),
}


def fill(text: str, path: str) -> str:
    return text.replace("{t}", f"delta.`{path}`").replace("{path}", path)
