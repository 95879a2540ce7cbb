"""The data files the current Iceberg metadata of a UniForm table reads (docs/adr/0010).

Delta's UniForm (``delta.universalFormat.enabledFormats`` naming ``iceberg``) keeps Iceberg
metadata beside the log, ``metadata/NNNNN-<uuid>.metadata.json`` with Avro manifest lists and
manifests, and only Delta's converter writes it, after Delta's own commits; this engine's
commits (OPTIMIZE, a DV purge, VACUUM's records) leave it as it was. Until the table's next
Delta commit the current Iceberg snapshot therefore reads files this engine's OPTIMIZE removed
from the log, and VACUUM keeps them (``vacuum``).

Which metadata file is current only the catalog knows (the Hive Metastore or Unity Catalog,
which Delta's converter commits through), and this engine does not reach it. Every file that
may be current is honoured: those with the highest version in their name (Iceberg numbers them
one past the current at each commit; several with one number are attempts of which at most one
committed) and the one written last (a table whose UniForm was turned off and on again starts
its numbers afresh). A file whose current snapshot is absent (no ``current-snapshot-id``, or
-1) reads nothing. Data and delete files whose entry is live (status other than DELETED) are
read; names outside the table root are not this engine's to delete and are left out.

Anything that cannot be read (a metadata file that is not JSON, a snapshot it does not list, a
missing or undecodable manifest list or manifest, one outside the table root) raises
``IcebergMetadataError``: a VACUUM that guessed could delete what Iceberg readers read. Avro is
decoded by fastavro, imported only here.
"""

from __future__ import annotations

import gzip
import io
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from txntable.engine.errors import IcebergMetadataError
from txntable.engine.storage.base import FileInfo, Storage
from txntable.engine.storage.paths import relative_location

#: where UniForm writes the Iceberg metadata (the table root's ``metadata``)
METADATA_DIR = "metadata"

#: ``00003-<uuid>.metadata.json`` (catalog tables), ``v3.metadata.json`` (Hadoop tables), with
#: ``.gz`` where the writer compressed it
_NAME = re.compile(r"^v?(\d+)(?:-[^.]*)?(?:\.gz)?\.metadata\.json(?:\.gz)?$")
_DELETED = 2  # manifest entry status: 0 EXISTING, 1 ADDED, 2 DELETED


@dataclass(frozen=True, slots=True)
class IcebergSnapshot:
    """One metadata file honoured: its current snapshot and the Delta version it converted."""

    metadata_file: str
    snapshot_id: int | None
    delta_version: int | None


@dataclass(frozen=True, slots=True)
class IcebergFiles:
    """What the metadata files that may be current read."""

    snapshots: tuple[IcebergSnapshot, ...]
    #: root-relative, normalised paths of the data and delete files their snapshots read
    paths: frozenset[str]


def is_metadata_file(name: str) -> bool:
    return name.endswith((".metadata.json", ".metadata.json.gz"))


def candidates(listing: Sequence[FileInfo]) -> list[FileInfo]:
    """The metadata files that may be current (module docstring), sorted by name."""
    files = [f for f in listing if is_metadata_file(f.name)]
    if not files:
        return []
    numbered = [(int(m[1]), f) for f in files if (m := _NAME.match(f.name))]
    newest = max(f.mtime_ms for f in files)
    chosen = {f.name: f for f in files if f.mtime_ms == newest}
    if numbered:
        top = max(n for n, _ in numbered)
        chosen.update((f.name, f) for n, f in numbered if n == top)
    return sorted(chosen.values(), key=lambda f: f.name)


def current_files(storage: Storage, metadata_dir: str = METADATA_DIR) -> IcebergFiles:
    """The files every metadata file that may be current reads (none without metadata)."""
    reader = _Reader(storage)
    snapshots = []
    paths: set[str] = set()
    for info in candidates(storage.list_dir(metadata_dir)):
        name = f"{metadata_dir}/{info.name}"
        snapshot, files = reader.snapshot_files(name)
        snapshots.append(snapshot)
        paths.update(files)
    return IcebergFiles(tuple(snapshots), frozenset(paths))


class _Reader:
    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._manifests: dict[str, list[str]] = {}

    def _relative(self, location: str, what: str, source: str) -> str:
        relative = relative_location(location, self.storage.root_uri)
        if relative is None:
            raise IcebergMetadataError(
                f"{source} names its {what} {location!r}, outside the table root "
                f"{self.storage.root_uri}: VACUUM cannot read it to tell which files Iceberg "
                "readers still read"
            )
        return relative

    def _bytes(self, relative: str, what: str, source: str) -> bytes:
        try:
            data = self.storage.read(relative)
        except FileNotFoundError:
            raise IcebergMetadataError(
                f"{what} {relative}, named by {source}, is missing: the Iceberg metadata is "
                "broken, and VACUUM cannot tell which files Iceberg readers still read"
            ) from None
        if data[:2] == b"\x1f\x8b":
            try:
                return gzip.decompress(data)
            except (OSError, EOFError) as exc:
                raise IcebergMetadataError(f"{what} {relative} is not valid gzip: {exc}") from exc
        return data

    def snapshot_files(self, name: str) -> tuple[IcebergSnapshot, list[str]]:
        raw = self._bytes(name, "the metadata file", "the metadata directory's listing")
        try:
            doc = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise IcebergMetadataError(f"Iceberg metadata file {name} is not JSON: {exc}") from exc
        if not isinstance(doc, dict) or "format-version" not in doc:
            raise IcebergMetadataError(f"{name} is not Iceberg table metadata (no format-version)")
        properties = doc.get("properties") or {}
        delta_version = _int(properties.get("delta-version"))
        raw_current = doc.get("current-snapshot-id")
        if raw_current is None or _int(raw_current) == -1:
            return IcebergSnapshot(name, None, delta_version), []
        current = _int(raw_current)
        if current is None:
            raise IcebergMetadataError(
                f"{name}: current-snapshot-id {raw_current!r} is not a snapshot id"
            )
        found = [s for s in doc.get("snapshots") or () if _int(s.get("snapshot-id")) == current]
        if not found:
            raise IcebergMetadataError(
                f"{name}: its current snapshot {current} is not among its snapshots"
            )
        snapshot = found[0]
        if snapshot.get("manifest-list"):
            list_name = self._relative(snapshot["manifest-list"], "manifest list", name)
            manifests = [
                record["manifest_path"]
                for record in self._avro(list_name, "manifest list", name)
                if "manifest_path" in record
            ]
        elif isinstance(snapshot.get("manifests"), list):  # format v1 may list them inline
            manifests = list(snapshot["manifests"])
        else:
            raise IcebergMetadataError(
                f"{name}: snapshot {current} has neither a manifest list nor manifests"
            )
        files: list[str] = []
        for manifest in manifests:
            files.extend(self._manifest(self._relative(manifest, "manifest", name), name))
        return IcebergSnapshot(name, current, delta_version), files

    def _manifest(self, relative: str, source: str) -> list[str]:
        if relative not in self._manifests:
            paths = []
            for entry in self._avro(relative, "manifest", source):
                if entry.get("status") == _DELETED:
                    continue
                data_file = entry.get("data_file") or {}
                location = data_file.get("file_path")
                if not isinstance(location, str):
                    raise IcebergMetadataError(f"manifest {relative} has an entry without a path")
                path = relative_location(location, self.storage.root_uri)
                if path is not None:  # outside the root: never ours to delete
                    paths.append(path)
            self._manifests[relative] = paths
        return self._manifests[relative]

    def _avro(self, relative: str, what: str, source: str) -> Iterator[dict[str, Any]]:
        import fastavro

        data = self._bytes(relative, what, source)
        try:
            records: Iterable[Any] = list(fastavro.reader(io.BytesIO(data)))
        except Exception as exc:  # fastavro raises several kinds for a file it cannot decode
            raise IcebergMetadataError(
                f"{what} {relative} cannot be decoded as Avro: {type(exc).__name__}: {exc}"
            ) from exc
        for record in records:
            if not isinstance(record, dict):
                raise IcebergMetadataError(f"{what} {relative} holds a record that is not one")
            yield record


def _int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
