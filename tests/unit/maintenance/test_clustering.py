"""Liquid clustering: reading the clustering domain, mapping its columns, and the planner's
choice of files on a clustered table."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.planner import MB, files_table
from tests.unit.case_ids import readable
from txntable.api.optimize_options import OptimizeOptions
from txntable.engine.model.actions import DomainMetadata, Protocol
from txntable.engine.model.schema import Field
from txntable.maintenance.clustering import (
    CLUSTERING_DOMAIN,
    LIQUID,
    clustering_paths,
    is_clustered,
    logical_columns,
)
from txntable.maintenance.errors import ClusteringError, InvalidPolicyError
from txntable.maintenance.planner import plan_optimize


def domain(config: Any, removed: bool = False) -> dict[str, DomainMetadata]:
    text = config if isinstance(config, str) else json.dumps(config)
    return {CLUSTERING_DOMAIN: DomainMetadata(CLUSTERING_DOMAIN, text, removed)}


def field(name: str, type_: Any = "long", physical: str | None = None) -> Field:
    meta = {"delta.columnMapping.physicalName": physical} if physical else {}
    return Field(name, type_, True, meta)


def test_clustered_means_the_writer_feature() -> None:
    assert is_clustered(Protocol(1, 7, None, ["domainMetadata", "clustering"]))
    assert not is_clustered(Protocol(1, 7, None, ["domainMetadata"]))
    assert not is_clustered(Protocol(1, 2))


@pytest.mark.parametrize(
    ("domains", "paths"),
    [
        ({}, []),  # a clustered table without the domain: no clustering columns
        (domain({"clusteringColumns": []}), []),
        (domain({}), []),
        (domain({"clusteringColumns": [["a"], ["s", "x"]]}), [("a",), ("s", "x")]),  # Delta
        (domain({"clusteringColumns": ["col-1", "col-2"]}), [("col-1",), ("col-2",)]),  # spec
        (domain({"clusteringColumns": [["a"]]}, removed=True), []),
    ],
    ids=readable,
)
def test_clustering_paths(domains: dict[str, DomainMetadata], paths: list[tuple[str, ...]]) -> None:
    assert clustering_paths(domains) == paths


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1]", "not a JSON object"),
        ({"clusteringColumns": "a"}, "clusteringColumns is not a list"),
        ({"clusteringColumns": [["a", ""]]}, "bad clustering column"),
        ({"clusteringColumns": [[]]}, "bad clustering column"),
        ({"clusteringColumns": [3]}, "bad clustering column"),
    ],
    ids=readable,
)
def test_malformed_domains_are_named(config: Any, message: str) -> None:
    with pytest.raises(ClusteringError, match=message):
        clustering_paths(domain(config))


def test_physical_names_map_back_to_logical_ones_under_column_mapping() -> None:
    fields = [field("a", physical="col-1"), field("b", physical="col-2"), field("col-1")]
    mapping = {"delta.columnMapping.mode": "name"}
    assert logical_columns([("col-2",), ("col-1",)], fields, mapping) == ("b", "a")
    # without column mapping the domain holds logical names (matched case-insensitively too)
    assert logical_columns([("col-1",), ("B",)], fields, {}) == ("col-1", "b")
    with pytest.raises(ClusteringError, match=r"'b' .* is not in the table schema"):
        logical_columns([("b",)], fields, mapping)  # a logical name is not a physical one


@pytest.mark.parametrize(
    ("paths", "message"),
    [
        ([("s", "x")], "clustering column 's.x' is a nested field"),
        ([("gone",)], "'gone' .* is not in the table schema"),
        ([("p",)], "'p' is also a partition column"),
        ([("s",)], "cannot cluster by column 's' of type struct"),
        ([("a",), ("A",)], "'a' is listed twice"),
    ],
    ids=readable,
)
def test_unusable_clustering_columns_are_refused(
    paths: list[tuple[str, ...]], message: str
) -> None:
    struct = {"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True}]}
    fields = [field("a"), field("p", "string"), field("s", struct)]
    with pytest.raises(ClusteringError, match=message):
        logical_columns(paths, fields, {}, partition_columns=["p"])


def test_nested_path_is_shown_by_logical_name_under_column_mapping() -> None:
    struct = {"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True}]}
    fields = [field("s", struct, physical="col-9")]
    with pytest.raises(ClusteringError, match=r"'s\.col-x' is a nested field"):
        logical_columns([("col-9", "col-x")], fields, {"delta.columnMapping.mode": "id"})


def clustered_files(*spec: tuple[float, str | None], dv: int | None = None) -> Any:
    """Files f000.. of the given (MiB, clusteringProvider); ``dv``: index with a big DV."""
    table = files_table(
        [
            {
                "path": f"f{i:03d}.parquet",
                "size": int(mb * MB),
                "dv": 90 if i == dv else None,
                "stats": json.dumps({"numRecords": 100}),
            }
            for i, (mb, _) in enumerate(spec)
        ]
    )
    import pyarrow as pa

    providers = pa.array([p for _, p in spec], pa.string())
    index = table.schema.get_field_index("clusteringProvider")
    return table.set_column(index, "clusteringProvider", providers)


def paths_of(plan: Any) -> list[set[str]]:
    return [set(b.paths) for b in plan.bins]


def test_unclustered_and_small_clustered_files_are_clustered_together() -> None:
    files = clustered_files((1, None), (200, None), (300, LIQUID), (10, LIQUID), (1, None))
    plan = plan_optimize(files, [], OptimizeOptions(), 5, cluster_by=["x"])
    assert paths_of(plan) == [{"f000.parquet", "f001.parquet", "f003.parquet", "f004.parquet"}]
    assert plan.bins[0].clustered and not plan.bins[0].zorder
    doc = plan.to_json()
    assert doc["clusterBy"] == ["x"] and doc["bins"][0]["clustered"] is True
    assert any("clustering by x" in n for n in doc["notes"])


def test_nothing_to_do_when_every_file_is_clustered() -> None:
    # small clustered files alone are not re-clustered: that would churn run after run
    files = clustered_files((1, LIQUID), (2, LIQUID), (300, LIQUID))
    assert plan_optimize(files, [], OptimizeOptions(), cluster_by=["x"]).bins == ()
    # one new file and no small clustered file to merge it with: below min input files
    files = clustered_files((1, None), (300, LIQUID), (300, LIQUID))
    assert plan_optimize(files, [], OptimizeOptions(), cluster_by=["x"]).bins == ()


def test_a_large_clustered_file_due_a_purge_is_rewritten() -> None:
    files = clustered_files((300, LIQUID), (300, LIQUID), dv=1)
    plan = plan_optimize(files, [], OptimizeOptions(), cluster_by=["x"])
    assert paths_of(plan) == [{"f001.parquet"}] and plan.bins[0].clustered


def test_files_of_another_clustering_implementation_are_left_alone() -> None:
    files = clustered_files((1, None), (1, "other"), (1, None), (1, "other"))
    plan = plan_optimize(files, [], OptimizeOptions(), cluster_by=["x"])
    assert paths_of(plan) == [{"f000.parquet", "f002.parquet"}]
    assert any("2 file(s) clustered by another implementation" in n for n in plan.notes)
    # also on a clustered table without columns (plain compaction)
    plan = plan_optimize(files, [], OptimizeOptions(), cluster_by=[])
    assert paths_of(plan) == [{"f000.parquet", "f002.parquet"}] and not plan.bins[0].clustered


def test_no_clustering_columns_means_plain_compaction() -> None:
    files = clustered_files((1, None), (2, None), (300, None))
    plan = plan_optimize(files, [], OptimizeOptions(), cluster_by=[])
    assert paths_of(plan) == [{"f000.parquet", "f001.parquet"}]
    assert plan.to_json()["clusterBy"] == []
    unclustered = plan_optimize(files, [], OptimizeOptions())
    assert unclustered.to_json()["clusterBy"] is None
    assert paths_of(unclustered) == paths_of(plan)


def test_zorder_policy_on_a_clustered_plan_is_refused() -> None:
    files = clustered_files((1, None), (2, None))
    with pytest.raises(InvalidPolicyError, match="clustered table cannot be Z-ordered"):
        plan_optimize(files, [], OptimizeOptions(z_order_by=("x",)), cluster_by=["x"])
