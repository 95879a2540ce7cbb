"""OPTIMIZE's settings as one typed document: what a run plans and writes with, from policy to job.

Why it exists: a setting used to be translated three times on its way from a CompactionPolicy to
the planner (the policy into command-line flags in ``handlers.requests``, the flags into the
planner's policy in ``jobs.optimize``, and the policy into the planner's policy again for the
plan shown in status), so one setting touched ten files. Now there is one document:

* the controller builds it once from the policy (``OptimizeOptions.from_spec``) and hands it to
  the job whole, as JSON (``--options-json``), next to the table URI and the run's own flags
  (run id, executor, VACUUM, storage options);
* a human's flags (``txntable optimize --target-size 1Gi ...``) fill the same document
  (``jobs.optimize.options_from_args``), over ``--options-json`` when both are given;
* the planner's policy is made from the document in one place
  (``maintenance.planner.OptimizePolicy.from_options``), for the run and the plan in status.

Adding a setting: a field here (its JSON key is the camelCase of its name), the line of
``from_spec`` that reads it from the policy, and the code that uses it.

The document lives in the API package, the lowest layer (standard library only), because every
side imports it: the controller, the jobs and the planner. Values are checked for their type
here; their ranges are the planner policy's to check (``OptimizePolicy``), as they were when they
came as flags. An unknown key is refused, never ignored: a job older than its controller says so
rather than silently running without a setting.
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import asdict, dataclass, fields
from typing import Any, Final

from txntable.api.errors import InvalidSpecError
from txntable.api.policies import CompactionPolicySpec, FilterOperator, PartitionFilter

MiB: Final = 1024 * 1024
#: the job's defaults when a setting is not given (a policy always gives its own)
DEFAULT_TARGET_FILE_SIZE: Final = 128 * MiB
DEFAULT_COMMIT_EVERY: Final = 16 * 1024 * MiB
DEFAULT_DV_PURGE_PERCENT: Final = 5
AVOID_WRITES: Final = ("removes", "any")

#: where a bad document is reported (``InvalidSpecError.field_path``)
DOCUMENT: Final = "optimizeOptions"


@dataclass(frozen=True, kw_only=True)
class OptimizeOptions:
    """How one OPTIMIZE run plans and writes (sizes in bytes, durations in milliseconds)."""

    target_file_size: int = DEFAULT_TARGET_FILE_SIZE
    #: files under this are candidates (None: the target size)
    min_file_size: int | None = None
    min_input_files: int = 2
    #: most files one bin combines (None: as many as fit the target size)
    max_files_per_bin: int | None = None
    #: rewrite a file whose deletion vector hides at least this percentage of its rows
    deletion_vector_purge_percent: int = DEFAULT_DV_PURGE_PERCENT
    #: input bytes one run rewrites at most (None: no limit)
    max_bytes: int | None = None
    #: commit after about this many input bytes
    commit_every: int = DEFAULT_COMMIT_EVERY
    #: partition predicate of the engine's SQL subset (None: every partition)
    where: str | None = None
    zorder_by: tuple[str, ...] = ()
    #: defer partitions other writers changed within this many milliseconds (None: never)
    avoid_recent_writes_ms: int | None = None
    #: which recent writes defer a partition: "removes" or "any"
    avoid_writes: str = "removes"
    #: Parquet settings of the files written (None: the table property or the default)
    compression: str | None = None
    compression_level: int | None = None
    row_group_rows: int | None = None
    dictionary: str | None = None

    @classmethod
    def from_spec(cls, spec: CompactionPolicySpec) -> OptimizeOptions:
        """The document for a CompactionPolicy: the controller's one translation."""
        parquet, avoid = spec.parquet, spec.avoid_recent_writes
        return cls(
            target_file_size=spec.target_file_size,
            min_file_size=spec.min_file_size,
            min_input_files=spec.min_input_files,
            max_files_per_bin=spec.max_files_per_bin,
            deletion_vector_purge_percent=spec.deletion_vector_purge_percent,
            max_bytes=spec.max_bytes_per_run,
            commit_every=spec.commit.partial_commit_size or DEFAULT_COMMIT_EVERY,
            where=predicate(spec.partition_filters),
            zorder_by=tuple(spec.z_order_by),
            avoid_recent_writes_ms=avoid.within * 1000 if avoid.within else None,
            avoid_writes=avoid.writes.value.lower(),
            compression=parquet.compression.value if parquet.compression else None,
            compression_level=parquet.compression_level,
            row_group_rows=parquet.row_group_rows,
            dictionary=parquet.dictionary.value.lower() if parquet.dictionary else None,
        )

    def to_json(self) -> dict[str, Any]:
        """The document as JSON (camelCase keys, every setting present)."""
        return {
            _key(name): list(value) if isinstance(value, tuple) else value
            for name, value in asdict(self).items()
        }

    def dumps(self) -> str:
        """The document as one compact JSON text (what ``--options-json`` carries)."""
        return json.dumps(self.to_json(), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, doc: object) -> OptimizeOptions:
        """The document from its JSON; a key left out takes its default. An unknown key or a
        value of the wrong type raises ``InvalidSpecError`` naming every bad key."""
        if not isinstance(doc, dict):
            raise InvalidSpecError(DOCUMENT, f"must be a JSON object, got {type(doc).__name__}")
        names = {_key(f.name): f.name for f in fields(cls)}
        hints = typing.get_type_hints(cls)
        errors: list[InvalidSpecError] = []
        values: dict[str, Any] = {}
        for key, value in doc.items():
            name = names.get(key)
            if name is None:
                errors.append(InvalidSpecError(f"{DOCUMENT}.{key}", "unknown setting"))
                continue
            try:
                values[name] = _typed(value, hints[name], f"{DOCUMENT}.{key}")
            except InvalidSpecError as exc:
                errors.append(exc)
        if errors:
            raise InvalidSpecError.combine(errors)
        return cls(**values)

    @classmethod
    def loads(cls, text: str) -> OptimizeOptions:
        """The document from its JSON text."""
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise InvalidSpecError(DOCUMENT, f"not JSON: {exc}") from None
        return cls.from_json(doc)


def _key(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _typed(value: object, hint: object, path: str) -> object:
    """``value`` when it is of the type ``hint`` names (int, str, optional, tuple of str)."""
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType):  # X | None
        return None if value is None else _typed(value, args[0], path)
    if typing.get_origin(hint) is tuple:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise InvalidSpecError(path, f"must be a list of strings, got {value!r}")
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if hint is str and isinstance(value, str):
        return value
    raise InvalidSpecError(path, f"must be {getattr(hint, '__name__', hint)}, got {value!r}")


# -- a policy's partition filters as the engine's predicate ---------------------------------------
_OPS = {
    FilterOperator.EQUALS: "=",
    FilterOperator.NOT_EQUALS: "!=",
    FilterOperator.LESS_THAN: "<",
    FilterOperator.LESS_OR_EQUAL: "<=",
    FilterOperator.GREATER_THAN: ">",
    FilterOperator.GREATER_OR_EQUAL: ">=",
}


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _column(name: str) -> str:
    return name if name.isidentifier() else "`" + name.replace("`", "``") + "`"


def predicate(filters: tuple[PartitionFilter, ...]) -> str | None:
    """The partition filters of a policy as one predicate of the engine's SQL subset."""
    parts = []
    for f in filters:
        col = _column(f.column)
        if f.operator in (FilterOperator.IN, FilterOperator.NOT_IN):
            neg = "NOT " if f.operator is FilterOperator.NOT_IN else ""
            parts.append(f"{col} {neg}IN ({', '.join(_quote(v) for v in f.values)})")
        else:
            parts.append(f"{col} {_OPS[f.operator]} {_quote(f.values[0])}")
    return " AND ".join(parts) if parts else None
