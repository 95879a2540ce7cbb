"""Iceberg metadata beside a table root, written by pyiceberg, for tests of what VACUUM keeps for
Iceberg readers (``txntable.engine.read.iceberg_metadata``, ADR 0010).

``IcebergWriter`` lays it out as UniForm does (``<root>/metadata/NNNNN-<uuid>.metadata.json``,
manifest lists and manifests beside it, data files named by absolute ``file:`` location) and
keeps the pointer to the current metadata file in a catalog of its own (pyiceberg's
``SqlCatalog`` on SQLite, where Delta's converter uses the Hive Metastore). Its snapshots only
name files (a one-column schema, no partitions); nothing reads the data files, so they need not
exist. ``tests.deltaspark.uniform`` converts a real Delta table instead.
"""

from __future__ import annotations

from pathlib import Path

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField


class IcebergWriter:
    def __init__(self, root: Path, work: Path) -> None:
        self.root = root
        work.mkdir(parents=True, exist_ok=True)
        self.catalog = SqlCatalog(
            "tests", uri=f"sqlite:///{work / 'catalog.db'}", warehouse=f"file://{work}"
        )
        self.catalog.create_namespace_if_not_exists("default")
        schema = Schema(NestedField(1, "id", LongType(), required=False))
        self.table: Table = self.catalog.create_table(
            ("default", "t"), schema, location=f"file://{root}"
        )

    def location(self, name: str) -> str:
        """A root-relative name as Iceberg metadata names it; a URI stays as it is."""
        return name if ":" in name else f"file:{self.root}/{name}"

    def _file(self, name: str) -> DataFile:
        return DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=self.location(name),
            file_format=FileFormat.PARQUET,
            partition=Record(),
            record_count=1,
            file_size_in_bytes=100,
        )

    def append(self, *names: str, delta_version: int | None = None) -> int:
        """A snapshot that adds ``names``; its id."""
        with self.table.transaction() as tx:
            with tx.update_snapshot().fast_append() as append:
                for name in names:
                    append.append_data_file(self._file(name))
            if delta_version is not None:
                tx.set_properties({"delta-version": str(delta_version)})
        return self._reload()

    def replace(self, old: list[str], new: list[str], delta_version: int | None = None) -> int:
        """A snapshot that swaps ``old`` for ``new`` (as UniForm converts an OPTIMIZE); its id."""
        existing = {t.file.file_path: t.file for t in self.table.scan().plan_files()}
        with self.table.transaction() as tx:
            with tx.update_snapshot().overwrite() as overwrite:
                for name in old:
                    overwrite.delete_data_file(existing[self.location(name)])
                for name in new:
                    overwrite.append_data_file(self._file(name))
            if delta_version is not None:
                tx.set_properties({"delta-version": str(delta_version)})
        return self._reload()

    def _reload(self) -> int:
        self.table = self.catalog.load_table(("default", "t"))
        snapshot = self.table.current_snapshot()
        assert snapshot is not None
        return snapshot.snapshot_id

    @property
    def metadata_file(self) -> str:
        """The current metadata file, root-relative."""
        return str(self.table.metadata_location).removeprefix(f"file://{self.root}/")
