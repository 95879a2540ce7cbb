"""Row tracking (PROTOCOL.md "Row Tracking"): fresh row ids and commit versions for every commit.

When a table's protocol lists the ``rowTracking`` writer feature (row tracking is *supported*),
every ``add`` a writer commits needs a ``baseRowId`` above the table's row-id high-water mark and
a ``defaultRowCommitVersion`` equal to the version the commit lands at, and the commit carries the
raised mark in the ``delta.rowTracking`` domain metadata. Both values depend on which version an
attempt writes and on the mark left by the commits that won the race before it, so the
transaction's retry loop asks ``RowTrackingAssigner`` for the actions of each attempt anew; two
appends racing is therefore never a conflict, the loser simply numbers its rows after the
winner's (as Spark does). A file that is re-added (a deletion vector replaced) or removed keeps
the values of the live ``add`` with the same path.

When row tracking is also *enabled* (``delta.enableRowTracking=true``), rows keep their stable ids
across rewrites through two hidden columns named in the table configuration; OPTIMIZE fills them
with ``stable_row_tracking`` and ``stable_row_ids`` reads them back for any snapshot (the
protocol's reader rule, used as the test oracle).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from txntable.engine.errors import InvalidArgumentError, InvalidCommitError
from txntable.engine.model.actions import (
    Action,
    AddFile,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
)
from txntable.engine.model.deletion_vectors import deleted_rows, keep_mask
from txntable.engine.model.features import writer_features
from txntable.engine.model.schema import parse_schema
from txntable.engine.read.data_files import read_table
from txntable.engine.storage.paths import decode_path, has_scheme

if TYPE_CHECKING:
    from txntable.engine.commit.conflicts import WinningCommit
    from txntable.engine.commit.validate import PreparedCommit
    from txntable.engine.read.snapshot import Snapshot

FEATURE = "rowTracking"
DOMAIN = "delta.rowTracking"
HIGH_WATER_MARK_KEY = "rowIdHighWaterMark"
ENABLE_KEY = "delta.enableRowTracking"
SUSPENDED_KEY = "delta.rowTrackingSuspended"
ROW_ID_COLUMN_KEY = "delta.rowTracking.materializedRowIdColumnName"
COMMIT_VERSION_COLUMN_KEY = "delta.rowTracking.materializedRowCommitVersionColumnName"
#: The mark of a table that has assigned no row id yet: the first file starts at row id 0.
INITIAL_HIGH_WATER_MARK = -1


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def is_supported(protocol: Protocol) -> bool:
    """The protocol lists ``rowTracking``: writers must assign row ids and commit versions."""
    return FEATURE in writer_features(protocol)


def is_enabled(protocol: Protocol, metadata: Metadata) -> bool:
    """Supported and ``delta.enableRowTracking=true``: stable ids must survive rewrites."""
    return is_supported(protocol) and _true(metadata.configuration.get(ENABLE_KEY))


def is_assigning(protocol: Protocol, metadata: Metadata) -> bool:
    """Supported and not suspended (``delta.rowTrackingSuspended``)."""
    return is_supported(protocol) and not _true(metadata.configuration.get(SUSPENDED_KEY))


@dataclass(frozen=True)
class MaterializedColumns:
    """Names of the hidden Parquet columns that hold preserved row ids and commit versions."""

    row_id: str
    row_commit_version: str

    @classmethod
    def of(cls, configuration: Mapping[str, str]) -> MaterializedColumns | None:
        row_id = configuration.get(ROW_ID_COLUMN_KEY)
        version = configuration.get(COMMIT_VERSION_COLUMN_KEY)
        return cls(row_id, version) if row_id and version else None

    @classmethod
    def required(cls, configuration: Mapping[str, str]) -> MaterializedColumns:
        """The names of a table with row tracking enabled; refuses when they are missing."""
        found = cls.of(configuration)
        if found is None:
            raise InvalidArgumentError(
                f"row tracking is enabled but the table configuration lacks {ROW_ID_COLUMN_KEY} "
                f"or {COMMIT_VERSION_COLUMN_KEY}, so row ids cannot be preserved"
            )
        return found

    @property
    def names(self) -> tuple[str, str]:
        return (self.row_id, self.row_commit_version)

    def extend(self, schema: pa.Schema) -> pa.Schema:
        """A data-file schema with both columns appended (they are not in the table schema)."""
        for name in self.names:
            if name not in schema.names:
                schema = schema.append(pa.field(name, pa.int64()))
        return schema

    def attach(
        self,
        data: pa.Table,
        base_row_id: int | None,
        default_row_commit_version: int | None,
        where: str = "file",
    ) -> pa.Table:
        """``data`` (one whole file, in file order) with both columns holding every row's
        stable value, so the rows keep them wherever a rewrite moves them."""
        ids, versions = stable_row_tracking(
            data, base_row_id, default_row_commit_version, self, where
        )
        data = data.drop_columns([n for n in self.names if n in data.column_names])
        return data.append_column(self.row_id, ids).append_column(self.row_commit_version, versions)


def preserved_columns(configuration: Mapping[str, str]) -> MaterializedColumns | None:
    """The columns a rewrite must fill to preserve row ids: None unless row tracking is
    enabled (``delta.enableRowTracking=true``); refuses an enabled table without the names."""
    if not _true(configuration.get(ENABLE_KEY)):
        return None
    return MaterializedColumns.required(configuration)


def new_table_configuration() -> dict[str, str]:
    """Materialized column names for a table created with row tracking (Spark's shape)."""
    return {
        ROW_ID_COLUMN_KEY: f"_row-id-col-{uuid.uuid4()}",
        COMMIT_VERSION_COLUMN_KEY: f"_row-commit-version-col-{uuid.uuid4()}",
    }


def high_water_mark_of(domain: DomainMetadata | None) -> int | None:
    """The mark a ``delta.rowTracking`` domain records (None: no domain, or removed)."""
    if domain is None or domain.removed:
        return None
    try:
        value = json.loads(domain.configuration).get(HIGH_WATER_MARK_KEY)
    except (ValueError, AttributeError):
        value = None
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidCommitError(
            f"the {DOMAIN} domain metadata holds no integer {HIGH_WATER_MARK_KEY}: "
            f"{domain.configuration!r}"[:300],
            "DELTA_ROW_ID_HIGH_WATER_MARK_INVALID",
        )
    return value


def high_water_mark(domains: Mapping[str, DomainMetadata]) -> int:
    """The table's row-id high-water mark (``INITIAL_HIGH_WATER_MARK`` when none is recorded)."""
    found = high_water_mark_of(domains.get(DOMAIN))
    return INITIAL_HIGH_WATER_MARK if found is None else found


def num_records(add: AddFile) -> int | None:
    """``numRecords`` of an add's statistics (physical rows, deletion vectors not applied)."""
    try:
        value = json.loads(add.stats).get("numRecords") if add.stats else None
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


_Values = tuple[int | None, int | None]  # (baseRowId, defaultRowCommitVersion)


class RowTrackingAssigner:
    """Gives one commit's actions their row ids and commit versions, attempt by attempt.

    Built once per commit (``for_commit`` checks the rules that do not depend on the attempt);
    the retry loop reports each winning commit (``observe_winner``) and asks for the actions of
    the version it is about to write (``actions_at``)."""

    def __init__(
        self,
        actions: Sequence[Action],
        *,
        assigning: bool,
        mark: int,
        live: Mapping[str, _Values],
    ) -> None:
        self._actions = list(actions)
        self.assigning = assigning
        self.high_water_mark = mark
        self._live = dict(live)

    @classmethod
    def for_commit(cls, prepared: PreparedCommit, snapshot: Snapshot | None) -> RowTrackingAssigner:
        """The assigner for a validated commit read at ``snapshot`` (None: a new table)."""
        protocol, metadata = prepared.protocol, prepared.metadata
        _check_enablement(prepared, snapshot)
        assigning = is_assigning(protocol, metadata)
        paths = {a.path for a in prepared.actions if isinstance(a, AddFile | RemoveFile)}
        live = _live_values(snapshot, paths) if snapshot is not None and paths else {}
        mark = high_water_mark(snapshot.domains) if snapshot else INITIAL_HIGH_WATER_MARK
        if assigning:  # refuse an add that cannot be numbered before any attempt
            for action in prepared.actions:
                if isinstance(action, AddFile) and live.get(action.path, (None,))[0] is None:
                    _records_of(action)
        return cls(prepared.actions, assigning=assigning, mark=mark, live=live)

    def observe_winner(self, winner: WinningCommit) -> None:
        """Follow a commit that landed first: its raised mark, a protocol that adds the feature."""
        for action in winner.actions:
            if isinstance(action, DomainMetadata) and action.domain == DOMAIN:
                theirs = high_water_mark_of(action)
                if theirs is not None:
                    self.high_water_mark = max(self.high_water_mark, theirs)
            elif isinstance(action, Protocol) and not self.assigning:
                own = next((a for a in self._actions if isinstance(a, Metadata)), None)
                suspended = own is not None and _true(own.configuration.get(SUSPENDED_KEY))
                self.assigning = is_supported(action) and not suspended

    def actions_at(self, version: int) -> list[Action]:
        """The commit's actions for an attempt at ``version``: adds numbered from the mark,
        recommitted files and removes with their live values, and the raised mark."""
        if not self.assigning:
            return list(self._actions)
        next_id = self.high_water_mark + 1
        out: list[Action] = []
        for action in self._actions:
            if isinstance(action, AddFile):
                base, committed = self._live.get(action.path, (None, None))
                if base is None:
                    base = next_id
                    next_id += _records_of(action)
                    committed = version
                action = replace(
                    action,
                    base_row_id=base,
                    default_row_commit_version=version if committed is None else committed,
                )
            elif isinstance(action, RemoveFile) and action.path in self._live:
                base, committed = self._live[action.path]
                action = replace(
                    action,
                    base_row_id=action.base_row_id if action.base_row_id is not None else base,
                    default_row_commit_version=(
                        action.default_row_commit_version
                        if action.default_row_commit_version is not None
                        else committed
                    ),
                )
            out.append(action)
        mark = next_id - 1
        if mark > self.high_water_mark:
            config = json.dumps({HIGH_WATER_MARK_KEY: mark}, separators=(",", ":"))
            at = next(
                (i for i, a in enumerate(out) if not isinstance(a, Protocol | Metadata)), len(out)
            )
            out.insert(at, DomainMetadata(domain=DOMAIN, configuration=config))
        return out


def _records_of(add: AddFile) -> int:
    records = num_records(add)
    if records is None:
        raise InvalidCommitError(
            f"add {add.path!r} has no numRecords statistic; a table with row tracking needs it "
            "to assign row ids",
            "DELTA_ROW_ID_ASSIGNMENT_WITHOUT_STATS",
        )
    return records


def _live_values(snapshot: Snapshot, paths: Iterable[str]) -> dict[str, _Values]:
    files = snapshot.files(stats=False)
    if files.num_rows == 0:
        return {}
    mask = pc.is_in(files.column("path"), pa.array(sorted(paths), pa.string()))
    hits = files.filter(mask).select(["path", "baseRowId", "defaultRowCommitVersion"])
    return {
        row["path"]: (row["baseRowId"], row["defaultRowCommitVersion"]) for row in hits.to_pylist()
    }


def _check_enablement(prepared: PreparedCommit, snapshot: Snapshot | None) -> None:
    """The protocol's rules for a table that supports or enables row tracking."""
    protocol, metadata = prepared.protocol, prepared.metadata
    supported = is_supported(protocol)
    if supported and "domainMetadata" not in writer_features(protocol):
        raise InvalidCommitError(
            "the rowTracking feature needs the domainMetadata writer feature in the protocol",
            "DELTA_FEATURE_REQUIRES_DEPENDENCY",
        )
    config = metadata.configuration
    if not _true(config.get(ENABLE_KEY)):
        return
    if not supported:
        raise InvalidCommitError(
            f"{ENABLE_KEY}=true needs the rowTracking writer feature in the protocol",
            "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE",
        )
    if _true(config.get(SUSPENDED_KEY)):
        raise InvalidCommitError(
            f"{ENABLE_KEY} and {SUSPENDED_KEY} cannot both be true",
            "DELTA_ROW_TRACKING_ILLEGAL_PROPERTY_COMBINATION",
        )
    columns = MaterializedColumns.of(config)
    if columns is None:
        raise InvalidCommitError(
            f"{ENABLE_KEY}=true needs {ROW_ID_COLUMN_KEY} and {COMMIT_VERSION_COLUMN_KEY} in the "
            "table configuration",
            "DELTA_MATERIALIZED_ROW_TRACKING_COLUMN_NAME_MISSING",
        )
    taken = {
        n.lower() for f in parse_schema(metadata.schema_string) for n in (f.name, f.physical_name)
    }
    clash = [c for c in (columns.row_id, columns.row_commit_version) if c.lower() in taken]
    if clash or columns.row_id == columns.row_commit_version:
        raise InvalidCommitError(
            f"materialized row tracking column names must be distinct and unlike every column of "
            f"the table (clash: {clash or [columns.row_id]})",
            "DELTA_CONFLICTING_MATERIALIZED_ROW_TRACKING_COLUMN_NAME",
        )
    was_enabled = snapshot is not None and _true(snapshot.configuration.get(ENABLE_KEY))
    if snapshot is None or was_enabled:
        return
    removed = {a.path for a in prepared.actions if isinstance(a, RemoveFile)}
    files = snapshot.files(stats=False)
    missing = files.filter(
        pc.or_(
            pc.is_null(files.column("baseRowId")),
            pc.is_null(files.column("defaultRowCommitVersion")),
        )
    )
    lacking = [p for p in missing.column("path").to_pylist() if p not in removed]
    if lacking:
        raise InvalidCommitError(
            f"cannot enable row tracking: {len(lacking)} live file(s) have no baseRowId or "
            f"defaultRowCommitVersion (e.g. {lacking[0]!r}); they need a row tracking backfill",
            "DELTA_ROW_TRACKING_BACKFILL_REQUIRED",
        )


# -- stable values of rows, for rewrites and readers ------------------------------------------


def stable_row_tracking(
    data: pa.Table,
    base_row_id: int | None,
    default_row_commit_version: int | None,
    columns: MaterializedColumns | None,
    where: str = "file",
) -> tuple[pa.Array, pa.Array]:
    """The stable row id and row commit version of every physical row of one data file.

    ``data`` is the file as read (all its rows, deletion vectors not applied, so a row's index
    is its position in the file). The materialized value wins where present and not null; else
    ``base_row_id`` + the row's index and ``default_row_commit_version``."""
    n = data.num_rows
    ids = _fill(
        _materialized(data, columns.row_id if columns else None, n),
        None if base_row_id is None else _positions(n, base_row_id),
        f"{where} has rows without a materialized row id and no baseRowId",
    )
    versions = _fill(
        _materialized(data, columns.row_commit_version if columns else None, n),
        None
        if default_row_commit_version is None
        else pa.repeat(pa.scalar(default_row_commit_version, pa.int64()), n),
        f"{where} has rows without a materialized row commit version and no "
        "defaultRowCommitVersion",
    )
    return ids, versions


def _positions(n: int, base: int) -> pa.Array:
    if n == 0:
        return pa.array([], pa.int64())
    ones = pa.repeat(pa.scalar(1, pa.int64()), n)
    return pc.add(pc.cumulative_sum(ones), pa.scalar(base - 1, pa.int64()))


def _materialized(data: pa.Table, name: str | None, n: int) -> pa.Array | None:
    if name is None or name not in data.column_names:
        return None
    column = data.column(name).combine_chunks() if n else pa.array([], pa.int64())
    return column.cast(pa.int64())


def _fill(materialized: pa.Array | None, default: pa.Array | None, problem: str) -> pa.Array:
    if materialized is not None and materialized.null_count == 0:
        return materialized
    if default is None:
        raise InvalidArgumentError(problem)
    if materialized is None:
        return default
    return pc.coalesce(materialized, default)


ROW_ID = "row_id"
ROW_COMMIT_VERSION = "row_commit_version"


def stable_row_ids(snapshot: Snapshot, columns: Sequence[str] = ()) -> pa.Table:
    """Every live row of ``snapshot`` with its stable ``row_id`` and ``row_commit_version``
    (PROTOCOL.md, "Reader Requirements for Row Tracking"), after the named data ``columns``.

    Reads every live data file whole, position by position, and leaves out the rows deletion
    vectors delete: meant for tests and inspection, not as a query engine."""
    if not is_supported(snapshot.protocol):
        raise InvalidArgumentError("the table does not support row tracking (no rowTracking)")
    materialized = MaterializedColumns.of(snapshot.configuration)
    storage = snapshot.storage
    schema = pa.schema(
        [
            *[(c, pa.null()) for c in columns],
            (ROW_ID, pa.int64()),
            (ROW_COMMIT_VERSION, pa.int64()),
        ]
    )
    parts: list[pa.Table] = []
    wanted = ["path", "baseRowId", "defaultRowCommitVersion", "deletionVector"]
    for row in snapshot.files(stats=False).select(wanted).to_pylist():
        raw: str = row["path"]
        if has_scheme(raw) or decode_path(raw).startswith("/"):
            data = read_table(snapshot.resolve(raw))
        else:
            source = storage.open_input(decode_path(raw))
            if isinstance(source, str):
                data = read_table(source)
            else:
                with source:
                    data = read_table(source)
        ids, versions = stable_row_tracking(
            data, row["baseRowId"], row["defaultRowCommitVersion"], materialized, raw
        )
        missing = [c for c in columns if c not in data.column_names]
        if missing:
            raise InvalidArgumentError(f"data file {raw} has no column(s) {missing}")
        out = data.select(list(columns)).append_column(ROW_ID, ids)
        out = out.append_column(ROW_COMMIT_VERSION, versions)
        if row["deletionVector"] is not None:
            out = out.filter(keep_mask(out.num_rows, deleted_rows(storage, row["deletionVector"])))
        parts.append(out)
    if not parts:
        return schema.empty_table()
    return pa.concat_tables(parts, promote_options="permissive")


__all__ = [
    "COMMIT_VERSION_COLUMN_KEY",
    "DOMAIN",
    "ENABLE_KEY",
    "FEATURE",
    "HIGH_WATER_MARK_KEY",
    "INITIAL_HIGH_WATER_MARK",
    "ROW_COMMIT_VERSION",
    "ROW_ID",
    "ROW_ID_COLUMN_KEY",
    "SUSPENDED_KEY",
    "MaterializedColumns",
    "RowTrackingAssigner",
    "high_water_mark",
    "high_water_mark_of",
    "is_assigning",
    "is_enabled",
    "is_supported",
    "new_table_configuration",
    "num_records",
    "preserved_columns",
    "stable_row_ids",
    "stable_row_tracking",
]
