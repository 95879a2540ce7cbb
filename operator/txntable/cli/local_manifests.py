"""The manifests local mode reconciles: read from a directory or one file, checked as the API
server would check them, and watched for changes while ``txntable run --local`` runs.

Local mode has no API server, so this module plays its part: every ``*.yaml``/``*.yml`` under
the directory (or the one file given), each document in it; our kinds parsed and validated,
other tools' objects (a Secret) skipped. Every error of every manifest is reported, one line
per broken field, naming the file, the object and the field; two objects of one kind with one
name in one namespace are refused, as the API server would refuse the second ``create``.

``ManifestWatch`` notices an edit (an approval annotation added, a policy changed, a file
added, removed or renamed) by the list of manifest files and a digest of each, so the loop
re-reads the manifests only when one of them changed (not when a run's directory appears next
to them).
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from txntable.cli.errors import CliError

if TYPE_CHECKING:  # the models and YAML load when manifests are read, not when parsers build
    from txntable.api.types import CheckpointPolicy, CompactionPolicy, TxnTable

#: the namespace of a manifest that names none (kubectl's default)
DEFAULT_NAMESPACE = "default"


@dataclass
class Manifests:
    """The valid objects found, and one line for each error."""

    tables: list[TxnTable] = field(default_factory=list)
    compaction: list[CompactionPolicy] = field(default_factory=list)
    checkpoint: list[CheckpointPolicy] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def manifest_files(path: Path) -> list[Path]:
    """The manifest files ``path`` names: itself when a file, else every YAML file under it."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise CliError(f"{path} is neither a manifest file nor a directory of them")
    return sorted(p for p in path.rglob("*.y*ml") if p.suffix in (".yaml", ".yml"))


def load_manifests(path: Path) -> Manifests:
    """Every manifest of ours in ``path`` (a directory, or one file); invalid ones (every broken
    field of each, a misspelled kind, a name taken twice) are reported, not fatal; other tools'
    objects are skipped."""
    import yaml

    from txntable.api.errors import InvalidSpecError
    from txntable.api.manifests import parse_manifest
    from txntable.api.types import CheckpointPolicy, CompactionPolicy, TxnTable

    out = Manifests()
    first_seen: dict[tuple[str, str, str], Path] = {}
    for file in manifest_files(path):
        try:
            documents = list(yaml.safe_load_all(file.read_text()))
        except yaml.YAMLError as exc:
            out.errors.append(f"{file}: not YAML: {_yaml_problem(exc)}")
            continue
        for doc in documents:
            if not isinstance(doc, dict):
                continue
            kind = doc.get("kind")
            metadata = doc.setdefault("metadata", {})
            if isinstance(metadata, dict):  # else parse_manifest reports it
                # no uid: the controller keys its state by uid, else by namespace/name, and
                # two tables of one name in two namespaces must not share it
                metadata.setdefault("namespace", DEFAULT_NAMESPACE)
                metadata.setdefault("generation", 1)
            name = metadata.get("name") if isinstance(metadata, dict) else None
            namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
            where = f"{file}: {kind}/{namespace}/{name}"
            try:
                resource = parse_manifest(doc)
            except InvalidSpecError as exc:
                out.errors += [
                    f"{where}: {p}: {r}" if p else f"{where}: {r}" for p, r in exc.errors
                ]
                continue
            if resource is None:
                continue
            identity = (str(kind), str(namespace), str(name))
            if identity in first_seen:
                out.errors.append(
                    f"{where}: defined twice (first in {first_seen[identity]}); names are "
                    "unique per kind and namespace, as in a cluster"
                )
                continue
            first_seen[identity] = file
            if isinstance(resource, TxnTable):
                out.tables.append(resource)
            elif isinstance(resource, CompactionPolicy):
                out.compaction.append(resource)
            elif isinstance(resource, CheckpointPolicy):
                out.checkpoint.append(resource)
    return out


def refuse(manifests: Manifests, where: str) -> NoReturn:
    """Every manifest error on stderr, one line each, then ``CliError`` (exit 2): as ``kubectl
    apply`` refuses an invalid object, nothing runs on a partial set of manifests (a dropped
    policy would silently leave its tables unmaintained)."""
    for error in manifests.errors:
        print(f"invalid manifest: {error}", file=sys.stderr)
    raise CliError(f"{len(manifests.errors)} manifest error(s) in {where}; nothing was reconciled")


def _yaml_problem(exc: Exception) -> str:
    """Where and what, on one line: ``line 3, column 1: expected ',' or ']' ...``."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
    context = getattr(exc, "context", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{problem}" + (f" ({context})" if context else "")


class ManifestWatch:
    """Tells whether the manifests under a path changed since the last look."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen = self._fingerprint()

    def _fingerprint(self) -> tuple[tuple[str, str], ...]:
        """Each manifest file and a digest of its bytes (manifests are small; a modification
        time can stay the same for two quick edits of one size)."""
        entries = []
        try:
            files = manifest_files(self.path)
        except CliError:  # the path went away: that is a change too
            return ()
        for place in files:  # a file added, removed or renamed changes the list itself
            try:
                digest = hashlib.sha256(place.read_bytes()).hexdigest()
            except OSError:
                continue
            entries.append((str(place), digest))
        return tuple(sorted(entries))

    def changed(self) -> bool:
        """True once after every change (an edit, a file added, removed or renamed)."""
        now = self._fingerprint()
        if now == self._seen:
            return False
        self._seen = now
        return True


__all__ = [
    "DEFAULT_NAMESPACE",
    "ManifestWatch",
    "Manifests",
    "load_manifests",
    "manifest_files",
    "refuse",
]
