"""delta-spark's change data feed of a table with deletion vectors, across our OPTIMIZE and
checkpoint, is exactly the changes the test made (issue 33.4, case 2).

With deletion vectors a DELETE, UPDATE or MERGE re-adds a file with a new vector (``dataChange``
true), and the feed of such a commit is computed from the difference of the two vectors (and the
``cdc`` files UPDATE and MERGE write). Our OPTIMIZE rewrites those files without their deleted
rows (a vector purge) and bin-packs the small ones, removing and adding with
``dataChange=false``: the feed must show nothing for it, and delta-spark's own DELETE and UPDATE
afterwards, which put vectors on the files we wrote, must feed exactly the rows they changed.

The model is the table's rows by id, each statement applied to it by the test itself, the change
rows it must feed (``insert``, ``delete``, ``update_preimage``, ``update_postimage``) recorded per
version. ``table_changes_by_path`` from version 0 to the latest must equal it, row for row, and
the table must hold the model's rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.deltaspark import canon
from tests.deltaspark.client import DeltaSpark
from tests.integration.deltaspark_upkeep import step, table_ref
from txntable.engine.table import Table

pytestmark = [pytest.mark.integration, pytest.mark.deltaspark, pytest.mark.timeout(900)]

Change = tuple[int, str, str, int]  # id, s, _change_type, _commit_version


class Model:
    """The rows by id and the feed each version must give."""

    def __init__(self) -> None:
        self.rows: dict[int, str] = {}
        self.changes: list[Change] = []

    def insert(self, version: int, ids: range, s: str) -> None:
        for k in ids:
            self.rows[k] = s
            self.changes.append((k, s, "insert", version))

    def update(self, version: int, ids: list[int], s: str) -> None:
        for k in ids:
            self.changes.append((k, self.rows[k], "update_preimage", version))
            self.changes.append((k, s, "update_postimage", version))
            self.rows[k] = s

    def delete(self, version: int, ids: list[int]) -> None:
        for k in ids:
            self.changes.append((k, self.rows.pop(k), "delete", version))

    def where(self, keep: Any) -> list[int]:
        return sorted(k for k in self.rows if keep(k))


def _vectors(path: Path) -> int:
    adds = Table.open(str(path)).snapshot().add_actions()
    return sum(1 for a in adds if a.deletion_vector is not None)


def _our_optimize(ds: DeltaSpark, path: Path) -> int:
    """Our OPTIMIZE purging every vector (and compacting): one commit, which changes no row."""
    before = Table.open(str(path)).version()
    done = step(ds, path, "optimize", "--executor", "arrow", "--purge-deleted-percent", "1")
    assert done["numFilesRemoved"] > done["numFilesAdded"] > 0, done
    assert Table.open(str(path)).version() == before + 1
    assert _vectors(path) == 0, "the purge left deletion vectors"
    return before + 1


def test_change_feed_with_deletion_vectors_across_our_optimize(
    delta_spark: DeltaSpark, tmp_path: Path
) -> None:
    ds, path = delta_spark, tmp_path / "cdf"
    ref = table_ref(path)
    model = Model()
    ds.sql(
        f"CREATE TABLE {ref} (id BIGINT, s STRING) USING delta TBLPROPERTIES ("
        "'delta.enableChangeDataFeed' = 'true', 'delta.enableDeletionVectors' = 'true')"
    )
    for version, start in ((1, 0), (2, 60)):
        ds.sql(
            f"INSERT INTO {ref} SELECT /*+ REPARTITION(3) */ id, 'v{version}' "
            f"FROM range({start}, {start + 60}) AS r(id)"
        )
        model.insert(version, range(start, start + 60), f"v{version}")
    ds.sql(f"UPDATE {ref} SET s = 'u3' WHERE id % 5 = 0")
    model.update(3, model.where(lambda k: k % 5 == 0), "u3")
    ds.sql(f"DELETE FROM {ref} WHERE id % 7 = 0")
    model.delete(4, model.where(lambda k: k % 7 == 0))
    ds.sql(
        f"MERGE INTO {ref} AS t USING (SELECT id, 'm5' AS s FROM range(110, 130) AS r(id)) AS m "
        "ON t.id = m.id WHEN MATCHED AND t.id % 3 = 0 THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET s = m.s WHEN NOT MATCHED THEN INSERT *"
    )
    matched = model.where(lambda k: 110 <= k < 130)
    model.delete(5, [k for k in matched if k % 3 == 0])
    model.update(5, [k for k in matched if k % 3 != 0], "m5")
    for k in range(110, 130):
        if k not in matched:
            model.insert(5, range(k, k + 1), "m5")
    assert _vectors(path) > 0, "delta-spark wrote no deletion vector"

    assert _our_optimize(ds, path) == 6
    step(ds, path, "checkpoint")
    # delta-spark's vectors on the files our OPTIMIZE wrote
    ds.sql(f"DELETE FROM {ref} WHERE id % 11 = 0")
    model.delete(7, model.where(lambda k: k % 11 == 0))
    ds.sql(f"UPDATE {ref} SET s = 'u8' WHERE id BETWEEN 30 AND 45")
    model.update(8, model.where(lambda k: 30 <= k <= 45), "u8")
    assert _vectors(path) > 0
    assert _our_optimize(ds, path) == 9
    step(ds, path, "checkpoint")

    feed = ds.sql(
        f"SELECT id, s, _change_type, _commit_version FROM table_changes_by_path('{path}', 0)"
    )
    got = sorted((r["id"], r["s"], r["_change_type"], r["_commit_version"]) for r in feed)
    expected = sorted(model.changes)
    missing = sorted(set(expected) - set(got))[:20]
    extra = sorted(set(got) - set(expected))[:20]
    assert got == expected, f"feed differs: missing {missing}, extra {extra}"
    assert not [c for c in got if c[3] in (6, 9)], "our OPTIMIZE fed changes"

    now = ds.read(path)
    want = [{"id": k, "s": s} for k, s in model.rows.items()]
    assert (now["count"], now["digest"]) == (len(want), canon.digest(want))
