"""Parquet writer settings for new data files: codec, level, row-group length, dictionary.

Why this exists: every data file the engine or a compaction writes used Snappy with pyarrow's
defaults, and compacted files came out ~50% larger than delta-rs's (which compacts with zstd).
The settings are resolved once per write, before anything is written, in this precedence:

1. what the caller asks for (``ParquetSettings``: a CompactionPolicy's ``spec.parquet``, the
   ``--compression``/``--compression-level``/``--row-group-rows``/``--dictionary`` flags);
2. the table property ``delta.parquet.compression.codec`` (codec only), the name the Delta
   protocol's table-properties RFC (delta-io/delta#6323, ``protocol_rfcs/
   parquet-compression-codec.md``) documents and Databricks writes; Delta has no property for the
   level, row groups or dictionary, so we invent none;
3. the measured default: zstd level 1, 1,048,576-row row groups, dictionary ``auto``
   (figures in docs/benchmarks.md, section optimize). On a realistic 57 MB table of 300 small
   files, zstd 1 wrote 30.0 MB in 1.4 s, zstd 3 29.3 MB in 2.0 s (levels 6 and 9: no smaller),
   Snappy 50.8 MB, deltalake's compact 33.0 MB in 1.7 s: level 1 is both smaller and faster than
   deltalake, level 3 buys 2.5% fewer bytes for 40% more time.

``auto`` dictionary: a column gets dictionary encoding when a strided sample of its values has
at most half as many distinct values as rows. High-cardinality columns (ids, random doubles,
timestamps, UUID strings) overflow the dictionary page anyway, and the pages encoded before the
fallback cost more than plain pages compressed with zstd; nested columns keep dictionaries.

Codecs: ``zstd``, ``snappy``, ``gzip``, ``lz4_raw`` and ``uncompressed`` (``none`` is an alias).
The protocol's ``lz4`` means the deprecated Hadoop-framed LZ4, which pyarrow cannot write, so it
is refused with a pointer to ``lz4_raw`` (the RFC lets a writer refuse a codec it cannot write).
Invalid values raise ``InvalidArgumentError`` naming the value and the accepted ones.

Importing this module loads nothing heavy (pyarrow only when a file is written).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from txntable.engine.errors import InvalidArgumentError

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

#: The table property naming the codec of new data files (Delta protocol RFC, delta-io/delta#6323).
CODEC_PROPERTY: Final = "delta.parquet.compression.codec"

#: Codecs we write, in the order error messages list them.
CODECS: Final = ("zstd", "snappy", "gzip", "lz4_raw", "uncompressed")
_ALIASES: Final = {"none": "uncompressed"}
#: Codecs that take a level, with the accepted range and our default level.
LEVELS: Final = {"zstd": (1, 22), "gzip": (1, 9)}
DEFAULT_LEVELS: Final = {"zstd": 1, "gzip": 6}
DICTIONARY_MODES: Final = ("auto", "on", "off")

DEFAULT_CODEC: Final = "zstd"
DEFAULT_ROW_GROUP_ROWS: Final = 1_048_576
DEFAULT_DICTIONARY: Final = "auto"
MAX_ROW_GROUP_ROWS: Final = 1 << 30

#: ``auto`` dictionary: rows sampled per column, and the distinct share at or below which a column
#: is dictionary-encoded
_SAMPLE_ROWS: Final = 16_384
_DICTIONARY_MAX_DISTINCT_SHARE: Final = 0.5


@dataclass(frozen=True)
class ParquetSettings:
    """What a caller asks for; ``None`` leaves a setting to the table property or the default."""

    codec: str | None = None
    level: int | None = None
    row_group_rows: int | None = None
    dictionary: str | None = None


@dataclass(frozen=True)
class ParquetWriteOptions:
    """Resolved settings for one write; ``source`` says where the codec came from
    (``"requested"``, ``"table"`` or ``"default"``)."""

    codec: str = DEFAULT_CODEC
    level: int | None = DEFAULT_LEVELS[DEFAULT_CODEC]
    row_group_rows: int = DEFAULT_ROW_GROUP_ROWS
    dictionary: str = DEFAULT_DICTIONARY
    source: str = "default"

    def to_json(self) -> dict[str, Any]:
        """JSON-shaped, to travel inside a bin task to any executor."""
        return {
            "codec": self.codec,
            "level": self.level,
            "rowGroupRows": self.row_group_rows,
            "dictionary": self.dictionary,
            "source": self.source,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ParquetWriteOptions:
        """The inverse of ``to_json``; the values are checked again."""
        settings = ParquetSettings(
            codec=obj.get("codec"),
            level=obj.get("level"),
            row_group_rows=obj.get("rowGroupRows"),
            dictionary=obj.get("dictionary"),
        )
        resolved = resolve({}, settings)
        return ParquetWriteOptions(
            codec=resolved.codec,
            level=resolved.level,
            row_group_rows=resolved.row_group_rows,
            dictionary=resolved.dictionary,
            source=str(obj.get("source") or resolved.source),
        )

    @property
    def file_tag(self) -> str:
        """The codec as Spark names it in data file names (``part-….c000.zstd.parquet``)."""
        return {"uncompressed": "uncompressed", "lz4_raw": "lz4raw"}.get(self.codec, self.codec)

    def write_kwargs(self, table: pa.Table) -> dict[str, Any]:
        """Keyword arguments for ``pyarrow.parquet.write_table`` writing ``table``."""
        kwargs: dict[str, Any] = {
            "compression": "none" if self.codec == "uncompressed" else self.codec,
            "row_group_size": self.row_group_rows,
        }
        if self.level is not None:
            kwargs["compression_level"] = self.level
        if self.dictionary == "off":
            kwargs["use_dictionary"] = False
        elif self.dictionary == "auto":
            kwargs["use_dictionary"] = dictionary_columns(table)
        return kwargs

    def write(self, table: pa.Table, where: Any) -> pq.FileMetaData:
        """Write ``table`` as one Parquet file to ``where`` (a path or an output stream); the
        file's footer, whose column statistics the writer computed on the way."""
        import pyarrow.parquet as pq

        kwargs = self.write_kwargs(table)
        row_group_size = kwargs.pop("row_group_size")
        try:
            with pq.ParquetWriter(where, table.schema, **kwargs) as writer:
                writer.write_table(table, row_group_size=row_group_size)
        except BaseException:
            if isinstance(where, str | os.PathLike):  # no half-written file left behind
                with contextlib.suppress(OSError):
                    os.remove(where)
            raise
        return writer.writer.metadata


def _accepted(values: tuple[str, ...]) -> str:
    return ", ".join(values)


def parse_codec(value: str, where: str = "") -> str:
    """``value`` as one of ``CODECS`` (case-insensitive, ``none`` for ``uncompressed``);
    ``where`` prefixes the error (e.g. the table property's name)."""
    prefix = f"{where}: " if where else ""
    name = str(value).strip().lower()
    name = _ALIASES.get(name, name)
    if name in CODECS:
        return name
    if name == "lz4":
        raise InvalidArgumentError(
            f"{prefix}Parquet compression codec 'lz4' (Hadoop-framed LZ4, deprecated by the Delta "
            f"protocol) cannot be written; use lz4_raw (accepted: {_accepted(CODECS)} or none)"
        )
    raise InvalidArgumentError(
        f"{prefix}unknown Parquet compression codec {value!r} "
        f"(accepted: {_accepted(CODECS)} or none)"
    )


def _check_level(codec: str, level: int, note: str) -> int:
    if isinstance(level, bool) or not isinstance(level, int):
        raise InvalidArgumentError(f"compression level {level!r} is not an integer")
    bounds = LEVELS.get(codec)
    if bounds is None:
        raise InvalidArgumentError(
            f"codec {codec}{note} takes no compression level (got {level}); "
            f"only {' and '.join(LEVELS)} do"
        )
    low, high = bounds
    if not low <= level <= high:
        raise InvalidArgumentError(
            f"compression level {level} is out of range for {codec}{note} "
            f"(accepted: {low} to {high})"
        )
    return level


def resolve(
    configuration: Mapping[str, str], requested: ParquetSettings | None = None
) -> ParquetWriteOptions:
    """The settings for a write to a table with ``configuration``: ``requested`` first, then the
    table property, then the defaults. Raises ``InvalidArgumentError`` for any invalid value,
    whether the caller's or the table's (before anything is written)."""
    req = requested or ParquetSettings()
    if req.codec is not None:
        codec, source = parse_codec(req.codec), "requested"
    elif configuration.get(CODEC_PROPERTY):
        codec = parse_codec(configuration[CODEC_PROPERTY], f"table property {CODEC_PROPERTY}")
        source = "table"
    else:
        codec, source = DEFAULT_CODEC, "default"
    if req.level is not None:
        note = f" (from the table property {CODEC_PROPERTY})" if source == "table" else ""
        level: int | None = _check_level(codec, req.level, note)
    else:
        level = DEFAULT_LEVELS.get(codec)
    rows = DEFAULT_ROW_GROUP_ROWS if req.row_group_rows is None else req.row_group_rows
    if isinstance(rows, bool) or not isinstance(rows, int) or not 1 <= rows <= MAX_ROW_GROUP_ROWS:
        raise InvalidArgumentError(
            f"row group rows {rows!r} must be an integer from 1 to {MAX_ROW_GROUP_ROWS}"
        )
    dictionary = DEFAULT_DICTIONARY if req.dictionary is None else req.dictionary.strip().lower()
    if dictionary not in DICTIONARY_MODES:
        raise InvalidArgumentError(
            f"unknown dictionary mode {req.dictionary!r} (accepted: {_accepted(DICTIONARY_MODES)})"
        )
    return ParquetWriteOptions(
        codec=codec, level=level, row_group_rows=rows, dictionary=dictionary, source=source
    )


def dictionary_columns(table: pa.Table) -> list[str]:
    """Parquet column paths to dictionary-encode in ``table`` (``auto``): flat columns whose
    sampled values are at most half distinct, and every leaf of a nested column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = table.num_rows
    step = max(1, rows // _SAMPLE_ROWS)
    sample = table.take(pa.array(range(0, rows, step), pa.int64())) if step > 1 else table
    chosen: list[str] = []
    for field, column in zip(sample.schema, sample.columns, strict=True):
        if pa.types.is_nested(field.type):
            chosen.extend(_leaf_paths(field.name, field.type))
            continue
        if sample.num_rows == 0:
            chosen.append(field.name)
            continue
        try:
            distinct = pc.count_distinct(column, mode="all").as_py()
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid):
            chosen.append(field.name)  # a type it cannot count (null): pyarrow's default
            continue
        if distinct <= _DICTIONARY_MAX_DISTINCT_SHARE * sample.num_rows:
            chosen.append(field.name)
    return chosen


def _leaf_paths(name: str, typ: pa.DataType) -> list[str]:
    """The Parquet leaf column paths pyarrow writes for a column (compliant nested types)."""
    import pyarrow as pa

    if pa.types.is_struct(typ):
        out: list[str] = []
        for i in range(typ.num_fields):
            child = typ.field(i)
            out.extend(_leaf_paths(f"{name}.{child.name}", child.type))
        return out
    if pa.types.is_map(typ):
        return [
            *_leaf_paths(f"{name}.key_value.key", typ.key_type),
            *_leaf_paths(f"{name}.key_value.value", typ.item_type),
        ]
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        return _leaf_paths(f"{name}.list.element", typ.value_type)
    return [name]


__all__ = [
    "CODECS",
    "CODEC_PROPERTY",
    "DEFAULT_CODEC",
    "DICTIONARY_MODES",
    "ParquetSettings",
    "ParquetWriteOptions",
    "dictionary_columns",
    "parse_codec",
    "resolve",
]
