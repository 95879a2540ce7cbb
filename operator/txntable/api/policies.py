"""The CompactionPolicy and CheckpointPolicy custom resources: when and how to maintain tables.

Both follow the scheduled-job pattern (CronJob, ScheduledSparkApplication): a trigger
(schedule in a time zone, or thresholds observed in the log), ``suspend``, a concurrency
policy and history limits; status reports the matched tables and the last/next runs. Cross-
field CEL rules of the CRDs are mirrored by ``check`` with the same messages.
"""

# ruff: noqa: RUF009  (spec_field is our dataclasses.field wrapper; its defaults are immutable)

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass, field
from datetime import time
from enum import StrEnum
from typing import Any, Final

from txntable.api import defaults as d
from txntable.api._codec import DURATION, SIZE, from_obj, spec_field
from txntable.api.common import (
    LabelSelector,
    PolicyStatus,
    SparkTemplate,
)
from txntable.api.constants import KIND_CHECKPOINT_POLICY, KIND_COMPACTION_POLICY
from txntable.api.errors import InvalidSpecError
from txntable.api.meta import ObjectMeta, read_manifest


def _cron_field(value: str, names: str = "", question: bool = False) -> str:
    atom = f"({value}{'|' + names if names else ''})"
    item = rf"(\*|{atom}(-{atom})?)(/[1-9][0-9]{{0,2}})?"
    listed = rf"{item}(,{item})*"
    return rf"(\?|{listed})" if question else listed


_MONTHS = "JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC"
_DAYS = "SUN|MON|TUE|WED|THU|FRI|SAT"
CRON_PATTERN: Final = (
    r"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|"
    + " +".join(
        (
            _cron_field("[0-5]?[0-9]"),
            _cron_field("[01]?[0-9]|2[0-3]"),
            _cron_field("0?[1-9]|[12][0-9]|3[01]", question=True),
            _cron_field("0?[1-9]|1[0-2]", _MONTHS),
            _cron_field("[0-7]", _DAYS, question=True),
        )
    )
    + ")$"
)


def _backwards_ranges() -> str:
    """A regex finding a cron range that runs backwards (``30-10``, ``FRI-MON``): its start
    above its end, for the numbers 0-59 (leading zero optional) and the month and day names.
    No cron implementation evaluates one (CronJob's parser refuses it too); regular expressions
    cannot compare numbers, so the pairs are spelt out by tens digit."""
    pairs = [f"0?{q}-0?[0-{q - 1}]" for q in range(1, 10)]
    for p in range(1, 6):
        lower = "0?[0-9]" + (f"|[1-{p - 1}][0-9]" if p > 1 else "")
        pairs.append(f"{p}[0-9]-({lower})")
        pairs += [f"{p}{q}-{p}[0-{q - 1}]" for q in range(1, 10)]
    for names in (_MONTHS.split("|"), _DAYS.split("|")):
        pairs += [f"{a}-({'|'.join(names[:i])})" for i, a in enumerate(names) if i]
    return "(^|[ ,])(" + "|".join(pairs) + ")([/, ]|$)"


#: A schedule matching this has a range that runs backwards (the CEL rule on the schedule).
CRON_BACKWARDS: Final = _backwards_ranges()
CRON_BACKWARDS_RULE: Final = f"!self.matches('{CRON_BACKWARDS}')"
MSG_CRON_BACKWARDS: Final = (
    "a range in the schedule runs backwards (e.g. 30-10 or FRI-MON): write its lower end first"
)
TIME_ZONE_PATTERN: Final = (
    r"^(UTC|Etc/(UTC|GMT([+-](1[0-4]|[0-9]))?)|[A-Z][A-Za-z_]+(/[A-Za-z0-9_+-]+){1,2})$"
)
CLOCK_PATTERN: Final = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
HINT_CRON: Final = (
    "a cron schedule: minute (0-59) hour (0-23) day-of-month month day-of-week, "
    "e.g. '0 2 * * *', or @daily"
)
HINT_TIME_ZONE: Final = "an IANA time zone name such as UTC or Europe/Berlin"
HINT_CLOCK: Final = "a time of day as HH:MM (24h), e.g. 02:30"
MSG_NO_TRIGGER: Final = (
    "set a schedule or at least one threshold (smallFiles, smallFilePercent, commitsSinceLastRun)"
)
MSG_MIN_ABOVE_TARGET: Final = "minFileSize must not exceed targetFileSize"
MSG_MAX_FILES_BELOW_MIN: Final = "maxFilesPerBin must not be below minInputFiles"
MSG_EMPTY_WINDOW: Final = "a maintenance window must not start and end at the same time"
MSG_FILTER_ARITY: Final = "In and NotIn take one or more values; other operators exactly one"
MSG_LEVEL_CODEC: Final = "compressionLevel applies only to zstd and gzip"
MSG_CEILING_BELOW_POD: Final = (
    "autoSize.maxExecutorMemory must exceed executor.memory plus Spark's memory overhead (10% "
    "of the heap, at least 384Mi): it bounds the executor pod, heap and overhead"
)
#: Spark's default executor memory overhead (``launch.sizing.default_overhead``): 10 % of the
#: heap, at least this; the CEL rule on ``spec.spark`` computes it the same way
OVERHEAD_MIN_BYTES: Final = 384 * 1024 * 1024


def _ceiling_rule() -> str:
    """The CEL rule on ``spec.spark``, the mirror of ``CompactionSparkTemplate.check``:
    ceiling C > heap H + max(H // 10, 384Mi), i.e. C - H - 384Mi >= 1 and 10 C - 11 H >= 1 in
    whole bytes. kube-apiserver keeps some quantities (``1.5Gi``, ``123456Gi``) as decimals, on
    which ``asInteger()`` fails (tests/controlplane/test_admission showed it), and ten exact
    ``add``s of C against eleven of H exceed its cost budget; so both sides are compared as
    floats with a margin of half a byte, which is exact for whole-byte sizes up to 16 TiB."""
    c = "quantity(string(self.autoSize.maxExecutorMemory)).asApproximateFloat()"
    h = "quantity(string(self.executor.memory)).asApproximateFloat()"
    return (
        "!has(self.autoSize) || !has(self.autoSize.maxExecutorMemory) || !has(self.executor) "
        f"|| !has(self.executor.memory) || ({c} > {h} + {OVERHEAD_MIN_BYTES}.5 "
        f"&& 10.0 * {c} > 11.0 * {h} + 0.5)"
    )


CEILING_RULE: Final = _ceiling_rule()
MSG_GZIP_LEVEL: Final = "gzip levels are 1 to 9"


class ConcurrencyPolicy(StrEnum):
    """What to do when a run is due while the previous one on the same table still runs."""

    FORBID = "Forbid"
    REPLACE = "Replace"


class CheckpointMode(StrEnum):
    """Where checkpoints are written: Auto chooses by log size."""

    AUTO = "Auto"
    INLINE = "Inline"
    SPARK = "Spark"


class Weekday(StrEnum):
    """Days of a maintenance window."""

    MON = "Mon"
    TUE = "Tue"
    WED = "Wed"
    THU = "Thu"
    FRI = "Fri"
    SAT = "Sat"
    SUN = "Sun"


class FilterOperator(StrEnum):
    """Comparison of a partition filter."""

    IN = "In"
    NOT_IN = "NotIn"
    EQUALS = "Equals"
    NOT_EQUALS = "NotEquals"
    LESS_THAN = "LessThan"
    LESS_OR_EQUAL = "LessOrEqual"
    GREATER_THAN = "GreaterThan"
    GREATER_OR_EQUAL = "GreaterOrEqual"


@dataclass(frozen=True, kw_only=True)
class PartitionFilter:
    """Restrict compaction to partitions whose column compares true against the values."""

    column: str = spec_field(min_length=1, max_length=255)
    operator: FilterOperator = spec_field()
    values: tuple[str, ...] = spec_field(min_items=1, max_items=256, max_length=1024)

    def check(self, path: str) -> None:
        """Mirror of the CEL arity rule."""
        many = self.operator in (FilterOperator.IN, FilterOperator.NOT_IN)
        if not many and len(self.values) != 1:
            raise InvalidSpecError(path, MSG_FILTER_ARITY)


@dataclass(frozen=True, kw_only=True)
class MaintenanceWindow:
    """A daily time range (in the policy's time zone) in which runs may start."""

    start: str = spec_field(pattern=CLOCK_PATTERN, hint=HINT_CLOCK)
    end: str = spec_field(pattern=CLOCK_PATTERN, hint=HINT_CLOCK)
    days: tuple[Weekday, ...] = spec_field((), max_items=7)

    def check(self, path: str) -> None:
        """Mirror of the CEL rule: a window has a length (end before start crosses midnight)."""
        if self.start == self.end:
            raise InvalidSpecError(path, MSG_EMPTY_WINDOW)

    @property
    def start_time(self) -> time:
        """``start`` as a time of day."""
        return time.fromisoformat(self.start)

    @property
    def end_time(self) -> time:
        """``end`` as a time of day (earlier than start: the window ends the next day)."""
        return time.fromisoformat(self.end)


@dataclass(frozen=True, kw_only=True)
class CompactionTriggers:
    """When compaction runs: on a schedule, when thresholds are crossed, or both."""

    schedule: str | None = spec_field(None, pattern=CRON_PATTERN, hint=HINT_CRON, max_length=256)
    small_files: int | None = spec_field(None, minimum=1, maximum=10_000_000)
    small_file_percent: int | None = spec_field(None, minimum=1, maximum=100)
    commits_since_last_run: int | None = spec_field(None, minimum=1, maximum=1_000_000)
    cooldown: int = spec_field(kind=DURATION, text_default=d.COOLDOWN)

    def check(self, path: str) -> None:
        """Mirror of the CEL rules: a schedule or a threshold must be set; no range of the
        schedule runs backwards. (A schedule that admits no date, ``0 0 30 2 *``, only the
        controller finds: it says so on the policy's status, ``reconcile.policy_status``.)"""
        thresholds = (self.small_files, self.small_file_percent, self.commits_since_last_run)
        if self.schedule is None and all(t is None for t in thresholds):
            raise InvalidSpecError(path, MSG_NO_TRIGGER)
        if self.schedule is not None and re.search(CRON_BACKWARDS, self.schedule):
            raise InvalidSpecError(f"{path}.schedule", MSG_CRON_BACKWARDS)


@dataclass(frozen=True, kw_only=True)
class CommitSettings:
    """How a compaction run commits through the engine."""

    max_attempts: int = spec_field(d.COMMIT_MAX_ATTEMPTS, minimum=1, maximum=100)
    partial_commit_size: int | None = spec_field(None, kind=SIZE, minimum=1)


class AvoidWrites(StrEnum):
    """Which recent writes make conflict-aware planning defer a partition."""

    REMOVES = "Removes"
    ANY = "Any"


@dataclass(frozen=True, kw_only=True)
class ConflictBackOff:
    """Back off a table whose writers keep beating our runs: when, over our newest ``runs``
    compaction runs, the share of planned bins dropped for conflicts or of commit attempts
    retried reaches ``conflict_percent`` (None: off), the next run waits ``initial_delay``,
    doubling per conflicting run in a row up to ``max_delay`` (seconds)."""

    conflict_percent: int | None = spec_field(None, minimum=1, maximum=100)
    runs: int = spec_field(d.CONFLICT_RUNS, minimum=1, maximum=20)
    initial_delay: int = spec_field(kind=DURATION, text_default=d.CONFLICT_INITIAL_DELAY)
    max_delay: int = spec_field(kind=DURATION, text_default=d.CONFLICT_MAX_DELAY)


@dataclass(frozen=True, kw_only=True)
class AvoidRecentWrites:
    """Conflict-aware planning: defer partitions other writers changed ``within`` this long
    (seconds; None: off), counting only commits that removed files (``Removes``) or any; and
    back off the table when our runs keep conflicting (``back_off``)."""

    within: int | None = spec_field(None, kind=DURATION)
    writes: AvoidWrites = spec_field(AvoidWrites.REMOVES)
    back_off: ConflictBackOff = spec_field(factory=ConflictBackOff)


@dataclass(frozen=True, kw_only=True)
class VacuumSettings:
    """VACUUM at the end of every compaction run: delete the files no retained version reads.
    A table with nothing to compact gets a VACUUM-only run instead, once it has at least
    ``min_reclaimable_bytes`` reclaimable and its last VACUUM is ``interval`` old."""

    enabled: bool = spec_field(False)
    retention: int | None = spec_field(None, kind=DURATION)
    dry_run: bool = spec_field(False)
    interval: int = spec_field(kind=DURATION, text_default=d.VACUUM_INTERVAL)
    min_reclaimable_bytes: int = spec_field(
        kind=SIZE, minimum=1, text_default=d.VACUUM_MIN_RECLAIMABLE
    )


class ParquetCodec(StrEnum):
    """Parquet codecs compaction writes, spelt as the table property
    ``delta.parquet.compression.codec`` spells them (``engine.write.parquet_options.CODECS``)."""

    ZSTD = "zstd"
    SNAPPY = "snappy"
    GZIP = "gzip"
    LZ4_RAW = "lz4_raw"
    UNCOMPRESSED = "uncompressed"


class DictionaryMode(StrEnum):
    """Parquet dictionary encoding: Auto decides per column by sampled cardinality."""

    AUTO = "Auto"
    ON = "On"
    OFF = "Off"


@dataclass(frozen=True, kw_only=True)
class ParquetWriteSettings:
    """Parquet settings of the files compaction writes; unset fields fall back to the table
    property ``delta.parquet.compression.codec`` (codec only), then zstd level 1, 1,048,576-row
    row groups and Auto dictionary."""

    compression: ParquetCodec | None = spec_field(None)
    compression_level: int | None = spec_field(None, minimum=1, maximum=22)
    row_group_rows: int | None = spec_field(None, minimum=1, maximum=1_073_741_824)
    dictionary: DictionaryMode | None = spec_field(None)

    def check(self, path: str) -> None:
        """Mirrors of the CEL rules (a level only for codecs that take one, gzip's range)."""
        level, codec = self.compression_level, self.compression
        if level is None or codec is None:
            return
        if codec not in (ParquetCodec.ZSTD, ParquetCodec.GZIP):
            raise InvalidSpecError(path, MSG_LEVEL_CODEC)
        if codec == ParquetCodec.GZIP and level > 9:
            raise InvalidSpecError(path, MSG_GZIP_LEVEL)


@dataclass(frozen=True, kw_only=True)
class AutoSize:
    """Executors and memory sized from each run's plan (``launch.sizing``, ADR 0007), and the
    ceilings every compaction run stays within, the retry after running out of memory too."""

    enabled: bool = spec_field(False)
    max_executor_instances: int = spec_field(d.AUTO_SIZE_MAX_INSTANCES, minimum=1, maximum=1000)
    max_executor_memory: int = spec_field(kind=SIZE, minimum=1, text_default=d.AUTO_SIZE_MAX_MEMORY)


@dataclass(frozen=True, kw_only=True)
class CompactionSparkTemplate(SparkTemplate):
    """The Spark template of compaction runs: the shared one plus plan-based sizing."""

    auto_size: AutoSize = spec_field(factory=AutoSize)

    def check(self, path: str) -> None:
        """The shared checks, and the CEL rule's mirror: the ceiling bounds the executor pod
        (heap plus overhead); one that does not exceed the pod the policy already asks for
        leaves sizing and the out-of-memory retry nothing to give."""
        super().check(path)
        heap = self.executor.memory
        if self.auto_size.max_executor_memory <= heap + max(OVERHEAD_MIN_BYTES, heap // 10):
            raise InvalidSpecError(path, MSG_CEILING_BELOW_POD)


@dataclass(frozen=True, kw_only=True)
class CompactionPolicySpec:
    """How and when to OPTIMIZE (bin-pack, optionally Z-order) the selected tables."""

    table_selector: LabelSelector | None = spec_field(None)
    target_file_size: int = spec_field(kind=SIZE, minimum=1, text_default=d.TARGET_FILE_SIZE)
    min_file_size: int = spec_field(kind=SIZE, minimum=1, text_default=d.MIN_FILE_SIZE)
    min_input_files: int = spec_field(d.MIN_INPUT_FILES, minimum=2, maximum=100_000)
    max_files_per_bin: int | None = spec_field(None, minimum=2, maximum=100_000)
    deletion_vector_purge_percent: int = spec_field(d.DV_PURGE_PERCENT, minimum=1, maximum=100)
    max_bytes_per_run: int = spec_field(kind=SIZE, minimum=1, text_default=d.MAX_BYTES_PER_RUN)
    partition_filters: tuple[PartitionFilter, ...] = spec_field((), max_items=16)
    z_order_by: tuple[str, ...] = spec_field((), max_items=8, min_length=1, max_length=255)
    triggers: CompactionTriggers = spec_field()
    time_zone: str = spec_field(
        d.TIME_ZONE, pattern=TIME_ZONE_PATTERN, hint=HINT_TIME_ZONE, max_length=64
    )
    maintenance_windows: tuple[MaintenanceWindow, ...] = spec_field((), max_items=16)
    concurrency_policy: ConcurrencyPolicy = spec_field(ConcurrencyPolicy.FORBID)
    suspend: bool = spec_field(False)
    require_approval: bool = spec_field(False)
    commit: CommitSettings = spec_field(factory=CommitSettings)
    avoid_recent_writes: AvoidRecentWrites = spec_field(factory=AvoidRecentWrites)
    vacuum: VacuumSettings = spec_field(factory=VacuumSettings)
    parquet: ParquetWriteSettings = spec_field(factory=ParquetWriteSettings)
    spark: CompactionSparkTemplate = spec_field(factory=CompactionSparkTemplate)
    successful_runs_history_limit: int = spec_field(
        d.SUCCESSFUL_RUNS_HISTORY_LIMIT, minimum=0, maximum=100
    )
    failed_runs_history_limit: int = spec_field(d.FAILED_RUNS_HISTORY_LIMIT, minimum=0, maximum=100)

    def check(self, path: str) -> None:
        """Mirrors of the CEL rules, plus a time-zone lookup the schema cannot do."""
        if self.min_file_size > self.target_file_size:
            raise InvalidSpecError(path, MSG_MIN_ABOVE_TARGET)
        if self.max_files_per_bin is not None and self.max_files_per_bin < self.min_input_files:
            raise InvalidSpecError(path, MSG_MAX_FILES_BELOW_MIN)
        for i, column in enumerate(self.z_order_by):
            if column in self.z_order_by[:i]:  # the item, as the API server reports it
                raise InvalidSpecError(f"{path}.zOrderBy[{i}]", "duplicate entry")
        check_time_zone(self.time_zone, f"{path}.timeZone")


def check_time_zone(name: str, path: str) -> None:
    """The zone must exist in the tz database (the CRD can only check its shape)."""
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidSpecError(path, f"unknown time zone {name!r}") from exc


@dataclass(frozen=True, kw_only=True)
class LogCleanup:
    """Deleting expired log files after a checkpoint (Delta's expired-log cleanup)."""

    enabled: bool = spec_field(True)
    log_retention: int = spec_field(kind=DURATION, text_default=d.LOG_RETENTION)
    checkpoint_retention: int = spec_field(kind=DURATION, text_default=d.CHECKPOINT_RETENTION)


@dataclass(frozen=True, kw_only=True)
class CheckpointPolicySpec:
    """When and how to write checkpoints for the selected tables."""

    table_selector: LabelSelector | None = spec_field(None)
    commit_interval: int = spec_field(d.COMMIT_INTERVAL, minimum=1, maximum=1_000_000)
    max_age: int | None = spec_field(None, kind=DURATION)
    mode: CheckpointMode = spec_field(CheckpointMode.AUTO)
    inline_max_actions: int = spec_field(d.INLINE_MAX_ACTIONS, minimum=1, maximum=100_000_000)
    part_size: int = spec_field(d.PART_SIZE, minimum=1000, maximum=100_000_000)
    log_cleanup: LogCleanup = spec_field(factory=LogCleanup)
    suspend: bool = spec_field(False)
    spark: SparkTemplate = spec_field(factory=SparkTemplate)
    successful_runs_history_limit: int = spec_field(
        d.SUCCESSFUL_RUNS_HISTORY_LIMIT, minimum=0, maximum=100
    )
    failed_runs_history_limit: int = spec_field(d.FAILED_RUNS_HISTORY_LIMIT, minimum=0, maximum=100)


@dataclass(frozen=True, kw_only=True)
class CompactionPolicy:
    """A parsed, validated CompactionPolicy manifest."""

    metadata: ObjectMeta
    spec: CompactionPolicySpec
    status: PolicyStatus = field(default_factory=PolicyStatus)

    @classmethod
    def from_manifest(cls, obj: object) -> CompactionPolicy:
        """Parse and validate a manifest the way the CRD does."""
        meta, spec, status = read_manifest(
            obj,
            KIND_COMPACTION_POLICY,
            lambda raw: from_obj(CompactionPolicySpec, raw, "spec"),
            PolicyStatus.from_dict,
        )
        return cls(metadata=meta, spec=spec, status=status)

    def to_status(self) -> dict[str, Any]:
        """The status subresource as JSON."""
        return self.status.to_status()


@dataclass(frozen=True, kw_only=True)
class CheckpointPolicy:
    """A parsed, validated CheckpointPolicy manifest."""

    metadata: ObjectMeta
    spec: CheckpointPolicySpec
    status: PolicyStatus = field(default_factory=PolicyStatus)

    @classmethod
    def from_manifest(cls, obj: object) -> CheckpointPolicy:
        """Parse and validate a manifest the way the CRD does."""
        meta, spec, status = read_manifest(
            obj,
            KIND_CHECKPOINT_POLICY,
            lambda raw: from_obj(CheckpointPolicySpec, raw, "spec"),
            PolicyStatus.from_dict,
        )
        return cls(metadata=meta, spec=spec, status=status)

    def to_status(self) -> dict[str, Any]:
        """The status subresource as JSON."""
        return self.status.to_status()
