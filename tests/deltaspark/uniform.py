"""A stand-in for Delta's UniForm converter: the Iceberg metadata of a table delta-spark wrote.

delta-spark writes UniForm's Iceberg metadata with its ``delta-iceberg`` module
(``IcebergConverter``, after each commit), which the Maven repository this project's machines
reach does not carry, and which converts only tables in a catalog (it commits through the Hive
Metastore). This module does what that converter does, with pyiceberg, so that an Iceberg
reader has the metadata it would have:

* a catalog holds the pointer to the current metadata file (pyiceberg's ``SqlCatalog`` on a
  SQLite file plays the Hive Metastore); a reader asks it (``current_metadata``), as Iceberg
  readers of a UniForm table ask the catalog;
* the metadata lies where UniForm puts it, ``<table>/metadata/NNNNN-<uuid>.metadata.json``,
  with the manifest lists and manifests beside it, and names the data files by absolute path
  (Hadoop's ``file:/...`` form, as ``IcebergTransactionUtils.canonicalizeFilePath`` does);
* the Iceberg schema takes the column-mapping ids as field ids (the ids the Parquet files
  carry) and the Delta partition columns as identity partitions;
* every conversion records ``delta-version`` and ``delta-timestamp`` in the table properties,
  and the next one starts from there: the first converts every live file (Delta's
  CREATE_TABLE), each later one the commits since, one Iceberg snapshot for them all (adds and
  removes that change no data: a rewrite; adds only: an append; anything else: an overwrite),
  as ``IcebergConverter.runIcebergConversionForActions`` does.

The Delta side is read from the commit files alone (no engine of ours), so it serves logs whose
every commit since version 0 is still there, and primitive columns only: what the tests write.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import StaticTable, Table
from pyiceberg.table.name_mapping import create_mapping_from_schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import (
    BooleanType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
)

_TYPES: dict[str, Any] = {
    "long": LongType,
    "integer": IntegerType,
    "string": StringType,
    "boolean": BooleanType,
    "double": DoubleType,
    "date": DateType,
}
_ID = "delta.columnMapping.id"
_PHYSICAL = "delta.columnMapping.physicalName"


@dataclass(frozen=True)
class Conversion:
    """What one conversion wrote."""

    delta_version: int
    snapshot_id: int
    metadata_location: str
    operation: str


class UniformStandIn:
    """Converts one Delta table's commits into its Iceberg metadata, as UniForm would."""

    def __init__(self, table: Path, work: Path) -> None:
        self.table = table
        work.mkdir(parents=True, exist_ok=True)
        self.catalog = SqlCatalog(
            "uniform", uri=f"sqlite:///{work / 'catalog.db'}", warehouse=f"file://{work}"
        )
        self.catalog.create_namespace_if_not_exists("default")
        self.ident = ("default", table.name.replace("-", "_"))

    # -- the Delta side ---------------------------------------------------------------------
    def _commits(self) -> list[list[dict[str, Any]]]:
        log = self.table / "_delta_log"
        versions = sorted(int(p.name[:20]) for p in log.glob("[0-9]*.json"))
        assert versions == list(range(len(versions))), f"commits missing: {versions}"
        return [
            [json.loads(line) for line in (log / f"{v:020d}.json").read_text().splitlines() if line]
            for v in versions
        ]

    @staticmethod
    def _last(commits: list[list[dict[str, Any]]], key: str) -> dict[str, Any]:
        found = [a[key] for actions in commits for a in actions if key in a]
        assert found, f"no {key} in the log"
        return found[-1]

    # -- the Iceberg side -------------------------------------------------------------------
    def _schema(self, meta: dict[str, Any]) -> tuple[Schema, PartitionSpec, dict[str, str]]:
        fields, physical = [], {}
        for f in json.loads(meta["schemaString"])["fields"]:
            kind = f["type"]
            assert isinstance(kind, str) and kind in _TYPES, f"stand-in: no {kind!r} columns"
            ident = int(f["metadata"][_ID])
            fields.append(NestedField(ident, f["name"], _TYPES[kind](), required=False))
            physical[f["name"]] = f["metadata"].get(_PHYSICAL, f["name"])
        schema = Schema(*fields)
        by_name = {f.name: f.field_id for f in fields}
        spec = PartitionSpec(
            *(
                PartitionField(by_name[c], 1000 + i, IdentityTransform(), c)
                for i, c in enumerate(meta["partitionColumns"])
            )
        )
        return schema, spec, physical

    def _data_file(
        self, add: dict[str, Any], meta: dict[str, Any], physical: dict[str, str]
    ) -> DataFile:
        values = add.get("partitionValues") or {}
        partition = Record(*(values.get(physical[c]) for c in meta["partitionColumns"]))
        stats = json.loads(add.get("stats") or "{}")
        return DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=f"file:{self.table}/{unquote(add['path'])}",
            file_format=FileFormat.PARQUET,
            partition=partition,
            record_count=int(stats["numRecords"]),
            file_size_in_bytes=int(add["size"]),
        )

    def _table(self) -> Table | None:
        if not self.catalog.table_exists(self.ident):
            return None
        return self.catalog.load_table(self.ident)

    def convert(self) -> Conversion:
        """Bring the Iceberg metadata up to the latest Delta version (a no-op when it is)."""
        commits = self._commits()
        latest = len(commits) - 1
        meta = self._last(commits, "metaData")
        info = self._last(commits[-1:], "commitInfo")
        schema, spec, physical = self._schema(meta)
        table = self._table()
        properties = {
            "delta-version": str(latest),
            "delta-timestamp": str(info.get("inCommitTimestamp") or info["timestamp"]),
            "schema.name-mapping.default": create_mapping_from_schema(schema).model_dump_json(),
        }
        if table is None:
            table = self.catalog.create_table(
                self.ident, schema, location=f"file://{self.table}", partition_spec=spec
            )
            got = {f.name: f.field_id for f in table.schema().fields}
            assert got == {f.name: f.field_id for f in schema.fields}, f"field ids moved: {got}"
            since = 0
            first = True
        else:
            since = int(table.properties["delta-version"]) + 1
            first = False
        if since > latest:
            current = table.current_snapshot()
            assert current is not None
            return Conversion(latest, current.snapshot_id, table.metadata_location, "none")
        adds: dict[str, dict[str, Any]] = {}
        removes: set[str] = set()
        data_change = False
        for actions in commits[since:]:
            for action in actions:
                if "add" in action:
                    adds[action["add"]["path"]] = action["add"]
                    removes.discard(action["add"]["path"])
                    data_change |= bool(action["add"]["dataChange"])
                elif "remove" in action:
                    path = action["remove"]["path"]
                    if adds.pop(path, None) is None:
                        removes.add(path)
                    data_change |= bool(action["remove"].get("dataChange", True))
        if first:  # CREATE_TABLE: every live file, as an append
            adds = self._live(commits)
            removes = set()
        new_files = [self._data_file(a, meta, physical) for a in adds.values()]
        with table.transaction() as tx:
            if removes:
                existing = {t.file.file_path: t.file for t in table.scan().plan_files()}
                operation = "rewrite" if adds and not data_change else "overwrite"
                with tx.update_snapshot().overwrite() as overwrite:
                    for path in sorted(removes):
                        overwrite.delete_data_file(existing[f"file:{self.table}/{unquote(path)}"])
                    for data_file in new_files:
                        overwrite.append_data_file(data_file)
            else:
                operation = "append"
                with tx.update_snapshot().fast_append() as append:
                    for data_file in new_files:
                        append.append_data_file(data_file)
            tx.set_properties(properties)
        table = self.catalog.load_table(self.ident)
        current = table.current_snapshot()
        assert current is not None
        return Conversion(latest, current.snapshot_id, table.metadata_location, operation)

    @staticmethod
    def _live(commits: list[list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
        live: dict[str, dict[str, Any]] = {}
        for actions in commits:
            for action in actions:
                if "add" in action:
                    live[action["add"]["path"]] = action["add"]
                elif "remove" in action:
                    live.pop(action["remove"]["path"], None)
        return live

    # -- an Iceberg reader ------------------------------------------------------------------
    def current_metadata(self) -> str:
        """The metadata file the catalog points at (what Iceberg readers of the table read)."""
        table = self._table()
        assert table is not None, "never converted"
        return str(table.metadata_location)

    def read(self) -> tuple[int | None, pa.Table]:
        """pyiceberg's ``StaticTable`` on the current metadata file: its snapshot id and rows."""
        static = StaticTable.from_metadata(self.current_metadata())
        current = static.current_snapshot()
        return (current.snapshot_id if current else None), static.scan().to_arrow()

    def referenced(self) -> set[str]:
        """Table-relative paths of the data files the current snapshot reads."""
        static = StaticTable.from_metadata(self.current_metadata())
        prefix = f"file:{self.table}/"
        return {task.file.file_path.removeprefix(prefix) for task in static.scan().plan_files()}
