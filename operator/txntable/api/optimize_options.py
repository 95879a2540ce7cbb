"""OPTIMIZE's settings as one typed record: what a run plans and writes with, policy to planner.

Why it exists: a setting used to be modelled three times (the policy's spec, a document the
controller sent the job, and the planner's own policy) under three spellings, with its defaults
in four places and its range checks in three. Now this record is all of them:

* the controller builds it once from the policy (``OptimizeOptions.from_spec``) and hands it to
  the job whole, as JSON (``--options-json``), next to the table URI and the run's own flags
  (run id, executor, VACUUM, storage options);
* a human's flags (``txntable optimize --target-size 1Gi ...``) fill the same record; the flags
  are made from the fields' ``Flag`` metadata (``jobs.optimize``), so a setting's flag, help and
  parser are declared once, here;
* the planner, the executors and the controller's plan in status take the record itself.

Fields are named as the CRD names them (``z_order_by`` is ``spec.zOrderBy``, its JSON key
``zOrderBy``); the few that are the run's form of a policy field say so (``where`` is
``spec.partitionFilters`` as a predicate, ``avoid_recent_writes_ms`` is
``spec.avoidRecentWrites.within``). Every value is checked here, its type when read from JSON
and its range whenever a record is made (``InvalidSpecError`` naming the JSON key), so a bad
value is refused the same way from a policy, a document or a flag.

Adding a setting: a field here (with its ``Flag``), its line in ``from_spec`` when a policy
field feeds it (then the CRD, its chart copy and the ``CompactionPolicySpec`` field), and the
code that uses it. ``tests/unit/api/test_adding_a_setting.py`` keeps that promise.

The record lives in the API package, the lowest layer (standard library only), because every
side imports it: the controller, the jobs and the planner. An unknown JSON key is refused, never
ignored: a job older than its controller says so rather than silently running without a setting.
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Final

from txntable.api import defaults as d
from txntable.api.errors import InvalidSpecError
from txntable.api.policies import CompactionPolicySpec, FilterOperator, PartitionFilter
from txntable.api.quantity import parse_size

MiB: Final = 1024 * 1024
#: a run's defaults when a setting is not given (a policy always gives its own)
DEFAULT_TARGET_FILE_SIZE: Final = parse_size(d.TARGET_FILE_SIZE)
DEFAULT_PARTIAL_COMMIT_SIZE: Final = 16 * 1024 * MiB
AVOID_WRITES: Final = ("removes", "any")

#: where a bad record is reported (``InvalidSpecError.field_path``)
DOCUMENT: Final = "optimizeOptions"

# How a flag's text becomes a setting (``Flag.kind``; jobs.optimize maps each to a parser).
#: a Kubernetes quantity of bytes (``128Mi``), read after the flags are parsed
SIZE: Final = "size"
#: a whole number of at least ``Flag.minimum``
COUNT: Final = "count"
#: a whole number whose range another check knows (a compression level: the codec's)
WHOLE: Final = "whole"
#: a whole percentage in (0, 100]
PERCENT: Final = "percent"
#: a duration above zero (``10m``, ``1 hour``), as milliseconds
DURATION: Final = "duration"
#: one of ``Flag.choices``
CHOICE: Final = "choice"
#: the text itself
TEXT: Final = "text"
#: a predicate; the empty text selects every partition
PREDICATE: Final = "predicate"
#: comma-separated column names
COLUMNS: Final = "columns"

FLAG: Final = "flag"


@dataclass(frozen=True, kw_only=True)
class Flag:
    """A setting on the command line: its flag, help and parser, and the range its values take
    (checked whichever way the value came)."""

    name: str
    help: str
    kind: str = TEXT
    metavar: str | None = None
    minimum: int | None = None
    maximum: int | None = None
    #: what ``minimum`` counts, for the messages ("files", "rows")
    unit: str = ""
    choices: tuple[str, ...] = ()


def _setting(default: Any, **flag: Any) -> Any:
    return field(default=default, metadata={FLAG: Flag(**flag)})


@dataclass(frozen=True, kw_only=True)
class OptimizeOptions:
    """How one OPTIMIZE run plans and writes (sizes in bytes, durations in milliseconds)."""

    target_file_size: int = _setting(
        DEFAULT_TARGET_FILE_SIZE,
        name="--target-size",
        kind=SIZE,
        minimum=1,
        metavar="SIZE",
        help="target file size, a Kubernetes quantity as in the CRDs: 128Mi = 128 MiB, "
        f"500M = 500,000,000 bytes (default {d.TARGET_FILE_SIZE})",
    )
    #: files under this are candidates (None: the target size, Spark's rule)
    min_file_size: int | None = _setting(
        None,
        name="--min-file-size",
        kind=SIZE,
        minimum=1,
        metavar="SIZE",
        help="files below this are candidates (default: the target size)",
    )
    min_input_files: int = _setting(
        d.MIN_INPUT_FILES,
        name="--min-input-files",
        kind=COUNT,
        minimum=2,
        unit="files",
        metavar="N",
        help=f"fewest files a bin may have (default {d.MIN_INPUT_FILES})",
    )
    #: most files one bin combines (None: as many as fit the target size); Z-order and
    #: clustered bins hold a whole partition and ignore it
    max_files_per_bin: int | None = _setting(
        None,
        name="--max-files-per-bin",
        kind=COUNT,
        minimum=2,
        unit="files",
        metavar="N",
        help="most files a bin may combine, so one task never opens more (default: no limit)",
    )
    #: rewrite a file whose deletion vector hides at least this percentage of its rows
    #: (Delta's auto-purge heuristic starts at 5 %)
    deletion_vector_purge_percent: int = _setting(
        d.DV_PURGE_PERCENT,
        name="--purge-deleted-percent",
        kind=PERCENT,
        minimum=1,
        maximum=100,
        metavar="PERCENT",
        help="rewrite a file whose deletion vector hides this %% of its rows, 1-100 "
        f"(default {d.DV_PURGE_PERCENT})",
    )
    #: Parquet settings of the files written (None: the table property
    #: ``delta.parquet.compression.codec`` or ``engine.write.parquet_options``' default)
    compression: str | None = _setting(
        None,
        name="--compression",
        metavar="CODEC",
        help="Parquet codec of the files written: zstd, snappy, gzip, lz4_raw, uncompressed "
        "(default: the table property delta.parquet.compression.codec, else zstd)",
    )
    compression_level: int | None = _setting(
        None,
        name="--compression-level",
        kind=WHOLE,
        metavar="N",
        help="codec level: zstd 1-22 (default 1), gzip 1-9 (default 6); checked against the codec",
    )
    row_group_rows: int | None = _setting(
        None,
        name="--row-group-rows",
        kind=COUNT,
        minimum=1,
        unit="rows",
        metavar="N",
        help="most rows per Parquet row group (default 1048576)",
    )
    dictionary: str | None = _setting(
        None,
        name="--dictionary",
        metavar="MODE",
        help="dictionary encoding: auto (per column, by sampled cardinality; the default), on, off",
    )
    #: ``spec.partitionFilters`` as one predicate of the engine's SQL subset (None: every
    #: partition)
    where: str | None = _setting(
        None,
        name="--where",
        kind=PREDICATE,
        help="partition predicate, e.g. \"d = '2024'\" (default: every partition)",
    )
    z_order_by: tuple[str, ...] = _setting(
        (),
        name="--zorder-by",
        kind=COLUMNS,
        metavar="COLS",
        help="comma-separated columns to Z-order by (default: none, plain compaction)",
    )
    #: input bytes one run rewrites at most (None: no limit)
    max_bytes_per_run: int | None = _setting(
        None,
        name="--max-bytes",
        kind=SIZE,
        minimum=1,
        metavar="SIZE",
        help="max input bytes rewritten by this run (default: no limit)",
    )
    #: ``spec.commit.partialCommitSize``: commit after about this many input bytes
    partial_commit_size: int = _setting(
        DEFAULT_PARTIAL_COMMIT_SIZE,
        name="--commit-every",
        kind=SIZE,
        minimum=1,
        metavar="SIZE",
        help="commit after about this many input bytes (default 16Gi)",
    )
    #: ``spec.avoidRecentWrites.within``: defer partitions other writers changed within this
    #: many milliseconds (None: never)
    avoid_recent_writes_ms: int | None = _setting(
        None,
        name="--avoid-partitions-written-within",
        kind=DURATION,
        minimum=1,
        metavar="DURATION",
        help="defer partitions other writers changed within this long (e.g. 10m, '1 hour'): "
        "their rewrites would likely be dropped; read from the newest commits only "
        "(default: defer none)",
    )
    #: ``spec.avoidRecentWrites.writes``: "removes", only writes that removed files (DELETE,
    #: UPDATE, MERGE, overwrite, OPTIMIZE) defer a partition; "any", any commit that touched it
    avoid_writes: str = _setting(
        "removes",
        name="--avoid-writes",
        kind=CHOICE,
        choices=AVOID_WRITES,
        help="which recent writes defer a partition: removes (DELETE, UPDATE, MERGE, overwrite, "
        "OPTIMIZE: the ones that invalidate our inputs; the default) or any (appends too)",
    )

    def __post_init__(self) -> None:
        errors = [*_out_of_range(self), *_inconsistent(self)]
        if errors:
            raise InvalidSpecError.combine(errors)

    @property
    def effective_min_file_size(self) -> int:
        """The size under which a file is a candidate."""
        return self.target_file_size if self.min_file_size is None else self.min_file_size

    @property
    def dv_purge_ratio(self) -> float:
        """``deletion_vector_purge_percent`` as a share of a file's rows."""
        return self.deletion_vector_purge_percent / 100

    @classmethod
    def from_spec(cls, spec: CompactionPolicySpec) -> OptimizeOptions:
        """The record for a CompactionPolicy: the controller's one translation."""
        parquet, avoid = spec.parquet, spec.avoid_recent_writes
        return cls(
            target_file_size=spec.target_file_size,
            min_file_size=spec.min_file_size,
            min_input_files=spec.min_input_files,
            max_files_per_bin=spec.max_files_per_bin,
            deletion_vector_purge_percent=spec.deletion_vector_purge_percent,
            max_bytes_per_run=spec.max_bytes_per_run,
            partial_commit_size=spec.commit.partial_commit_size or DEFAULT_PARTIAL_COMMIT_SIZE,
            where=predicate(spec.partition_filters),
            z_order_by=tuple(spec.z_order_by),
            avoid_recent_writes_ms=avoid.within * 1000 if avoid.within else None,
            avoid_writes=avoid.writes.value.lower(),
            compression=parquet.compression.value if parquet.compression else None,
            compression_level=parquet.compression_level,
            row_group_rows=parquet.row_group_rows,
            dictionary=parquet.dictionary.value.lower() if parquet.dictionary else None,
        )

    def to_json(self) -> dict[str, Any]:
        """The record as JSON (camelCase keys, every setting present)."""
        return {
            key(name): list(value) if isinstance(value, tuple) else value
            for name, value in asdict(self).items()
        }

    def dumps(self) -> str:
        """The record as one compact JSON text (what ``--options-json`` carries)."""
        return json.dumps(self.to_json(), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, doc: object) -> OptimizeOptions:
        """The record from its JSON; a key left out takes its default. An unknown key or a
        value of the wrong type or range raises ``InvalidSpecError`` naming every bad key."""
        if not isinstance(doc, dict):
            raise InvalidSpecError(DOCUMENT, f"must be a JSON object, got {type(doc).__name__}")
        names = {key(f.name): f.name for f in fields(cls)}
        hints = typing.get_type_hints(cls)
        errors: list[InvalidSpecError] = []
        values: dict[str, Any] = {}
        for json_key, value in doc.items():
            name = names.get(json_key)
            if name is None:
                errors.append(InvalidSpecError(f"{DOCUMENT}.{json_key}", "unknown setting"))
                continue
            try:
                values[name] = _typed(value, hints[name], f"{DOCUMENT}.{json_key}")
            except InvalidSpecError as exc:
                errors.append(exc)
        if errors:
            raise InvalidSpecError.combine(errors)
        return cls(**values)

    @classmethod
    def loads(cls, text: str) -> OptimizeOptions:
        """The record from its JSON text."""
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise InvalidSpecError(DOCUMENT, f"not JSON: {exc}") from None
        return cls.from_json(doc)


def flags() -> tuple[tuple[str, Flag], ...]:
    """Each setting's field name and flag, in the order of the fields (and of ``--help``)."""
    return tuple((f.name, f.metadata[FLAG]) for f in fields(OptimizeOptions))


def _out_of_range(options: OptimizeOptions) -> list[InvalidSpecError]:
    """The values outside their flag's range or choices."""
    errors = []
    for name, flag in flags():
        value = getattr(options, name)
        if value is None:
            continue
        path = f"{DOCUMENT}.{key(name)}"
        low, high = flag.minimum, flag.maximum
        if flag.choices and value not in flag.choices:
            errors.append(InvalidSpecError(path, f"must be one of {', '.join(flag.choices)}"))
        elif isinstance(value, int) and (
            (low is not None and value < low) or (high is not None and value > high)
        ):
            unit = f" {flag.unit}" if flag.unit else ""
            bound = f"at least {low}{unit}" if high is None else f"in [{low}, {high}]"
            errors.append(InvalidSpecError(path, f"must be {bound}, got {value}"))
    return errors


def _inconsistent(options: OptimizeOptions) -> list[InvalidSpecError]:
    """The settings that contradict each other."""
    errors = []
    if (
        options.max_files_per_bin is not None
        and options.max_files_per_bin < options.min_input_files
    ):
        errors.append(
            InvalidSpecError(
                f"{DOCUMENT}.maxFilesPerBin",
                f"max files per bin ({options.max_files_per_bin}) must not be below min input "
                f"files ({options.min_input_files})",
            )
        )
    columns = options.z_order_by
    if len(set(columns)) != len(columns) or any(not c for c in columns):
        errors.append(
            InvalidSpecError(f"{DOCUMENT}.zOrderBy", f"bad Z-order columns {list(columns)}")
        )
    return errors


def key(name: str) -> str:
    """A field's JSON key: its name in camelCase (``z_order_by`` is ``zOrderBy``)."""
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
