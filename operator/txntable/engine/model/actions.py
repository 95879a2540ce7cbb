"""Delta log actions as typed values with an exact JSON round trip.

Each line of a commit file holds one action. Readers must ignore unknown fields and actions, and a
writer that copies an action (an ``add`` turned into a ``remove``) must not drop what it did not
understand, so every action keeps the JSON members it does not model in ``extra``. A known
optional member written as an explicit ``null`` is kept there too, so
``parse_action(a.to_json()) == a`` and ``a.to_json()`` equals the parsed JSON object.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar, cast

from txntable.engine.errors import InvalidActionError

JsonObject = dict[str, Any]
_A = TypeVar("_A", bound="_Action")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@dataclass(frozen=True, slots=True)
class _Action:
    """Shared JSON mapping: dataclass fields <-> camelCase members, the rest in ``extra``."""

    KEY: ClassVar[str] = ""
    REQUIRED: ClassVar[frozenset[str]] = frozenset()
    # members with a nested action type: json key -> (from_json, to_json)
    NESTED: ClassVar[Mapping[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]]] = {}
    RENAMES: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def _json_names(cls) -> list[tuple[str, str]]:
        """(attribute, JSON member) pairs, computed once per class (replay asks per action)."""
        found = _NAMES.get(cls)
        if found is None:
            found = [
                (f.name, cls.RENAMES.get(f.name, _camel(f.name)))
                for f in fields(cls)
                if f.name != "extra"
            ]
            _NAMES[cls] = found
        return found

    @classmethod
    def _checks(cls) -> dict[str, Callable[[Any], bool]]:
        """json key -> type check, derived once per class from the field annotations."""
        found = _CHECKS.get(cls)
        if found is None:
            annotations: dict[str, str] = {}
            for klass in reversed(cls.__mro__):
                annotations.update(getattr(klass, "__annotations__", {}))
            found = {key: _check_for(str(annotations[attr])) for attr, key in cls._json_names()}
            _CHECKS[cls] = found
        return found

    @classmethod
    def from_json(cls: type[_A], obj: Any) -> _A:
        if not isinstance(obj, dict):
            raise InvalidActionError(f"{cls.KEY or cls.__name__} action is not a JSON object")
        extra = dict(obj)
        kwargs: dict[str, Any] = {}
        checks = cls._checks()
        for attr, key in cls._json_names():
            if key not in extra:
                continue
            value = extra[key]
            if value is None:
                continue  # explicit null stays in extra, so the round trip is exact
            if not checks[key](value):
                raise InvalidActionError(f"{cls.KEY}.{key} has the wrong type: {value!r}"[:300])
            del extra[key]
            conv = cls.NESTED.get(key)
            kwargs[attr] = conv[0](value) if conv else value
        missing = [
            key for attr, key in cls._json_names() if attr in cls.REQUIRED and attr not in kwargs
        ]
        if missing:
            raise InvalidActionError(
                f"{cls.KEY} action lacks required field(s) {missing}: {obj!r}"[:500]
            )
        try:
            return cls(**kwargs, extra=extra)  # type: ignore[call-arg]
        except TypeError as exc:  # pragma: no cover - dataclass guards
            raise InvalidActionError(f"{cls.KEY} action is malformed: {exc}") from exc

    def to_json(self) -> JsonObject:
        out: JsonObject = {}
        for attr, key in self._json_names():
            value = getattr(self, attr)
            if value is None:
                continue
            conv = self.NESTED.get(key)
            out[key] = conv[1](value) if conv else value
        extra: Mapping[str, Any] = getattr(self, "extra")  # noqa: B009 - defined by subclasses
        for key, value in extra.items():
            out.setdefault(key, value)
        return out

    def to_line(self) -> str:
        """The action as one commit-file line (without the newline)."""
        return dumps({self.KEY: self.to_json()})


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_str_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) or v is None for v in value.values())


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _check_for(annotation: str) -> Callable[[Any], bool]:
    """A JSON type check for a field annotation (wrong types would break Arrow replay later)."""
    base = annotation.removesuffix(" | None")
    if base == "int":
        return _is_int
    if base == "bool":
        return lambda v: isinstance(v, bool)
    if base == "str":
        return lambda v: isinstance(v, str)
    if base.startswith("dict[str, str"):
        return _is_str_map
    if base == "list[str]":
        return _is_str_list
    return lambda v: isinstance(v, dict)  # JsonObject, nested actions


_CHECKS: dict[type, dict[str, Callable[[Any], bool]]] = {}
_NAMES: dict[type, list[tuple[str, str]]] = {}


def dumps(obj: Any) -> str:
    """Compact JSON exactly as the engine writes it to the log."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@dataclass(frozen=True, slots=True)
class Protocol(_Action):
    KEY: ClassVar[str] = "protocol"
    REQUIRED: ClassVar[frozenset[str]] = frozenset({"min_reader_version", "min_writer_version"})

    min_reader_version: int = 1
    min_writer_version: int = 2
    reader_features: list[str] | None = None
    writer_features: list[str] | None = None
    extra: JsonObject = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class Metadata(_Action):
    KEY: ClassVar[str] = "metaData"
    REQUIRED: ClassVar[frozenset[str]] = frozenset({"id"})

    id: str = ""
    name: str | None = None
    description: str | None = None
    format: JsonObject = field(default_factory=lambda: {"provider": "parquet", "options": {}})
    schema_string: str = ""
    partition_columns: list[str] = field(default_factory=list)
    configuration: dict[str, str] = field(default_factory=dict)
    created_time: int | None = None
    extra: JsonObject = field(default_factory=dict, compare=False)

    def to_json(self) -> JsonObject:
        # Older writers omit schemaString; Spark reads that as an empty schema (and would fail
        # on an empty string), so an empty one is written back as absent.
        out = _Action.to_json(self)
        if not out.get("schemaString"):
            out.pop("schemaString", None)
        return out


@dataclass(frozen=True, slots=True)
class DeletionVector(_Action):
    KEY: ClassVar[str] = "deletionVector"
    REQUIRED: ClassVar[frozenset[str]] = frozenset({"storage_type", "path_or_inline_dv"})

    storage_type: str = "u"
    path_or_inline_dv: str = ""
    offset: int | None = None
    size_in_bytes: int = 0
    cardinality: int = 0
    max_row_index: int | None = None
    extra: JsonObject = field(default_factory=dict, compare=False)

    @property
    def unique_id(self) -> str:
        """Spark's ``legacyUniqueId``: the DV part of a logical file's key."""
        suffix = f"@{self.offset}" if self.offset is not None else ""
        return f"{self.storage_type}{self.path_or_inline_dv}{suffix}"


def _dv_from(obj: Any) -> DeletionVector:
    return DeletionVector.from_json(obj)


def _dv_to(dv: DeletionVector) -> JsonObject:
    return dv.to_json()


_DV_NESTED = {"deletionVector": (_dv_from, _dv_to)}


@dataclass(frozen=True, slots=True)
class AddFile(_Action):
    KEY: ClassVar[str] = "add"
    REQUIRED: ClassVar[frozenset[str]] = frozenset(
        {"path", "partition_values", "size", "modification_time", "data_change"}
    )
    NESTED: ClassVar[Mapping[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]]] = _DV_NESTED

    path: str = ""
    partition_values: dict[str, str | None] = field(default_factory=dict)
    size: int = 0
    modification_time: int = 0
    data_change: bool = True
    stats: str | None = None
    tags: dict[str, str | None] | None = None
    deletion_vector: DeletionVector | None = None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None
    clustering_provider: str | None = None
    extra: JsonObject = field(default_factory=dict, compare=False)

    @property
    def key(self) -> tuple[str, str | None]:
        """The logical-file key used by replay: raw path plus DV id."""
        return (self.path, self.deletion_vector.unique_id if self.deletion_vector else None)

    def to_remove(self, deletion_timestamp: int, data_change: bool) -> RemoveFile:
        """The remove that cancels this file, copying everything a reader may need."""
        return RemoveFile(
            path=self.path,
            deletion_timestamp=deletion_timestamp,
            data_change=data_change,
            extended_file_metadata=True,
            partition_values=dict(self.partition_values),
            size=self.size,
            stats=self.stats,
            tags=self.tags,
            deletion_vector=self.deletion_vector,
            base_row_id=self.base_row_id,
            default_row_commit_version=self.default_row_commit_version,
        )


@dataclass(frozen=True, slots=True)
class RemoveFile(_Action):
    KEY: ClassVar[str] = "remove"
    REQUIRED: ClassVar[frozenset[str]] = frozenset({"path", "data_change"})
    NESTED: ClassVar[Mapping[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]]] = _DV_NESTED

    path: str = ""
    deletion_timestamp: int | None = None
    data_change: bool = True
    extended_file_metadata: bool | None = None
    partition_values: dict[str, str | None] | None = None
    size: int | None = None
    stats: str | None = None
    tags: dict[str, str | None] | None = None
    deletion_vector: DeletionVector | None = None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None
    extra: JsonObject = field(default_factory=dict, compare=False)

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.path, self.deletion_vector.unique_id if self.deletion_vector else None)


@dataclass(frozen=True, slots=True)
class AddCDCFile(_Action):
    KEY: ClassVar[str] = "cdc"
    REQUIRED: ClassVar[frozenset[str]] = frozenset({"path", "size"})

    path: str = ""
    partition_values: dict[str, str | None] = field(default_factory=dict)
    size: int = 0
    data_change: bool = False
    tags: dict[str, str | None] | None = None
    extra: JsonObject = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class SetTransaction(_Action):
    KEY: ClassVar[str] = "txn"
    REQUIRED: ClassVar[frozenset[str]] = frozenset({"app_id", "version"})

    app_id: str = ""
    version: int = 0
    last_updated: int | None = None
    extra: JsonObject = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class DomainMetadata(_Action):
    KEY: ClassVar[str] = "domainMetadata"
    REQUIRED: ClassVar[frozenset[str]] = frozenset({"domain", "configuration"})

    domain: str = ""
    configuration: str = ""
    removed: bool = False
    extra: JsonObject = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class CheckpointMetadata(_Action):
    KEY: ClassVar[str] = "checkpointMetadata"
    REQUIRED: ClassVar[frozenset[str]] = frozenset({"version"})

    version: int = 0
    tags: dict[str, str] | None = None
    extra: JsonObject = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class Sidecar(_Action):
    KEY: ClassVar[str] = "sidecar"
    REQUIRED: ClassVar[frozenset[str]] = frozenset({"path"})

    path: str = ""
    size_in_bytes: int | None = None
    modification_time: int | None = None
    tags: dict[str, str] | None = None
    extra: JsonObject = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class CommitInfo:
    """Free-form provenance of a commit; every member is kept as written."""

    KEY: ClassVar[str] = "commitInfo"
    data: JsonObject = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: Any) -> CommitInfo:
        if not isinstance(obj, dict):
            raise InvalidActionError("commitInfo action is not a JSON object")
        return cls(dict(obj))

    def to_json(self) -> JsonObject:
        return dict(self.data)

    def to_line(self) -> str:
        return dumps({self.KEY: self.data})

    @property
    def operation(self) -> str | None:
        op = self.data.get("operation")
        return op if isinstance(op, str) else None

    @property
    def txn_id(self) -> str | None:
        value = self.data.get("txnId")
        return value if isinstance(value, str) else None

    @property
    def in_commit_timestamp(self) -> int | None:
        value = self.data.get("inCommitTimestamp")
        return value if isinstance(value, int) else None


Action = (
    Protocol
    | Metadata
    | AddFile
    | RemoveFile
    | AddCDCFile
    | SetTransaction
    | DomainMetadata
    | CommitInfo
    | CheckpointMetadata
    | Sidecar
)

_BY_KEY: dict[str, Any] = {
    cls.KEY: cls
    for cls in (
        Protocol,
        Metadata,
        AddFile,
        RemoveFile,
        AddCDCFile,
        SetTransaction,
        DomainMetadata,
        CommitInfo,
        CheckpointMetadata,
        Sidecar,
    )
}


def parse_action(obj: Any) -> Action | None:
    """One action from a decoded JSON line; ``None`` for action types readers must ignore."""
    if not isinstance(obj, dict) or len(obj) != 1:
        raise InvalidActionError(f"a log line must be an object with one action: {obj!r}"[:300])
    ((key, body),) = obj.items()
    cls = _BY_KEY.get(key)
    if cls is None:
        return None
    return cast(Action, cls.from_json(body))


def parse_commit(data: bytes | str, source: str = "commit") -> list[Action]:
    """All recognised actions of a newline-delimited commit file, in file order."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise InvalidActionError(f"{source}: not valid UTF-8 ({exc})") from exc
    out: list[Action] = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise InvalidActionError(f"{source}: line {lineno} is not valid JSON ({exc})") from exc
        try:
            action = parse_action(obj)
        except InvalidActionError as exc:
            raise InvalidActionError(f"{source}: line {lineno}: {exc}") from exc
        if action is not None:
            out.append(action)
    return out


def serialize_commit(actions: list[Action]) -> bytes:
    """Actions as commit-file bytes: one compact JSON object per line, each ending in ``\\n``."""
    return "".join(a.to_line() + "\n" for a in actions).encode("utf-8")


def iter_file_actions(actions: list[Action]) -> Iterator[AddFile | RemoveFile]:
    for a in actions:
        if isinstance(a, AddFile | RemoveFile):
            yield a
