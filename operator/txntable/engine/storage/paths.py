"""Names inside ``_delta_log`` and the encoding of data-file paths.

Zero-padded names make lexicographic order equal version order, which is what lets a listing
"from version v" work on object stores. Versions must have exactly 20 digits (as delta-rs
requires): a stray ``3.json`` sorts after every padded name, so accepting it the way Spark's
permissive regexes would lets junk shadow the real commit 3. Part numbers may have any width;
the engine always writes 10. File paths in actions are URIs:
they are percent-decoded exactly once, never with ``unquote_plus`` (a ``+`` is a literal plus).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from enum import Enum
from urllib.parse import quote, unquote

LOG_DIR = "_delta_log"
LAST_CHECKPOINT = "_last_checkpoint"
SIDECAR_DIR = "_sidecars"

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CRC = re.compile(r"^(\d{20})\.crc$")
_COMPACTED = re.compile(r"^(\d{20})\.(\d{20})\.compacted\.json$")
_CLASSIC = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_MULTIPART = re.compile(r"^(\d{20})\.checkpoint\.(\d+)\.(\d+)\.parquet$")
_UUID = re.compile(r"^(\d{20})\.checkpoint\.([^.]+)\.(json|parquet)$")


class LogFileKind(Enum):
    """What a file in ``_delta_log`` is, judged by its name only."""

    COMMIT = "commit"
    CHECKPOINT_CLASSIC = "checkpoint"
    CHECKPOINT_MULTIPART = "checkpoint-part"
    CHECKPOINT_UUID = "checkpoint-v2"
    CRC = "crc"
    COMPACTED = "compacted"


@dataclass(frozen=True, slots=True)
class LogFileName:
    """A parsed ``_delta_log`` file name."""

    name: str
    kind: LogFileKind
    version: int
    part: int = 0
    num_parts: int = 0
    end_version: int = 0  # only for compacted files

    @property
    def is_checkpoint(self) -> bool:
        return self.kind in _CHECKPOINT_KINDS


_CHECKPOINT_KINDS = frozenset(
    {LogFileKind.CHECKPOINT_CLASSIC, LogFileKind.CHECKPOINT_MULTIPART, LogFileKind.CHECKPOINT_UUID}
)


def parse_log_name(name: str) -> LogFileName | None:
    """Classify a file name found in ``_delta_log``; ``None`` for anything we must ignore."""
    if not name or not name[0].isdigit():
        return None  # temp files (.x.tmp, _commit_*.tmp), _last_checkpoint, hidden files
    if m := _COMMIT.match(name):
        return LogFileName(name, LogFileKind.COMMIT, int(m[1]))
    if m := _CLASSIC.match(name):
        return LogFileName(name, LogFileKind.CHECKPOINT_CLASSIC, int(m[1]))
    if m := _MULTIPART.match(name):
        part, parts = int(m[2]), int(m[3])
        if not 1 <= part <= parts:
            return None
        return LogFileName(name, LogFileKind.CHECKPOINT_MULTIPART, int(m[1]), part, parts)
    if m := _UUID.match(name):
        return LogFileName(name, LogFileKind.CHECKPOINT_UUID, int(m[1]))
    if m := _CRC.match(name):
        return LogFileName(name, LogFileKind.CRC, int(m[1]))
    if m := _COMPACTED.match(name):
        return LogFileName(name, LogFileKind.COMPACTED, int(m[1]), end_version=int(m[2]))
    return None


def commit_name(version: int) -> str:
    return f"{version:020d}.json"


def classic_checkpoint_name(version: int) -> str:
    return f"{version:020d}.checkpoint.parquet"


def multipart_checkpoint_name(version: int, part: int, num_parts: int) -> str:
    return f"{version:020d}.checkpoint.{part:010d}.{num_parts:010d}.parquet"


def hadoop_checksum_name(name: str) -> str:
    """Hadoop's checksum file for the file ``name`` in the same directory: ``.<name>.crc``.

    Hadoop's ``LocalFileSystem`` (a ``ChecksumFileSystem``, what delta-spark and every Spark job
    write ``file:`` tables with) writes one beside each file it creates: a CRC32 per 512 bytes.
    Its readers verify a file against it, tolerate a missing one, and refuse a file that no
    longer matches (``ChecksumException``); they never list one."""
    return f".{name}.crc"


def hadoop_checksummed(name: str) -> str | None:
    """The file a Hadoop checksum file ``.<name>.crc`` belongs to; ``None`` for other names."""
    if len(name) > len("..crc") and name.startswith(".") and name.endswith(".crc"):
        return name[1 : -len(".crc")]
    return None


def listing_prefix(version: int) -> str:
    """The name every log file of ``version`` or later sorts at or after."""
    return f"{version:020d}."


def has_scheme(path: str) -> bool:
    """True when an action path is an absolute URI (``s3://…``, ``file:/…``)."""
    head, sep, _ = path.partition(":")
    return bool(sep) and len(head) > 1 and head.replace("+", "").replace(".", "").isalnum()


def decode_path(path: str) -> str:
    """Percent-decode an action path exactly once (PROTOCOL.md "Add File and Remove File": ``path``
    is a URI)."""
    return unquote(path)


def encode_path(relative: str) -> str:
    """URI-encode a relative data-file path for an action (``/`` and ``=`` stay literal)."""
    return quote(relative, safe="/=")


# Hive escaping of partition directory components (Spark's ExternalCatalogUtils.escapePathName).
_HIVE_ESCAPE = frozenset("\"#%'*/:=?\\\x7f{[]^")


def hive_escape(component: str) -> str:
    """Escape a partition column name or value the way Spark names partition directories."""
    out = []
    for ch in component:
        if ch in _HIVE_ESCAPE or ord(ch) < 0x20:
            out.append(f"%{ord(ch):02X}")
        else:
            out.append(ch)
    return "".join(out)


HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


def partition_dir(columns: list[str], values: dict[str, str | None]) -> str:
    """``a=1/b=x`` for the given partition values (null -> ``__HIVE_DEFAULT_PARTITION__``)."""
    parts = []
    for col in columns:
        value = values.get(col)
        text = HIVE_NULL if value is None or value == "" else hive_escape(value)
        parts.append(f"{hive_escape(col)}={text}")
    return "/".join(parts)


def join_uri(root: str, relative: str) -> str:
    """Join a table root URI and a decoded relative path."""
    return root.rstrip("/") + "/" + relative.lstrip("/")


#: URI schemes that name the same store (Hadoop's ``s3a``, Azure's Blob and ADLS spellings)
_SCHEME_FAMILIES = {
    "": "file",
    "file": "file",
    "local": "file",
    "s3": "s3",
    "s3a": "s3",
    "s3n": "s3",
    "abfs": "azure",
    "abfss": "azure",
    "az": "azure",
    "azure": "azure",
    "wasb": "azure",
    "wasbs": "azure",
}
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):(.*)$", re.DOTALL)


def _location_parts(location: str) -> tuple[str, str, str | None, str]:
    """``(store family, bucket or container, account or None, normalised absolute path)`` of
    a URI (``s3a://bucket/key``, ``file:/p``, ``file:///p``) or a local path. Taken apart by
    hand: a file name may hold ``?`` or ``#``, which a URL parser would cut off."""
    match = _SCHEME.match(location)
    scheme, rest = (match[1].lower(), match[2]) if match else ("", location)
    authority, path = "", rest
    if rest.startswith("//"):
        authority, _, tail = rest[2:].partition("/")
        path = "/" + tail
    family = _SCHEME_FAMILIES.get(scheme, scheme)
    if family == "file" and authority == "localhost":
        authority = ""
    container, at, host = authority.partition("@")
    account = host.split(".", 1)[0] if at else None
    return family, container, account, posixpath.normpath("/" + path.lstrip("/"))


def relative_location(location: str, root_uri: str) -> str | None:
    """The root-relative name of an absolute, not percent-encoded location (how Iceberg
    metadata names files: ``file:/t/a b/x.parquet``, ``s3a://bucket/t/x.parquet``) under the
    table root ``root_uri``; None when it lies outside. Spellings of one store match: ``s3``,
    ``s3a`` and ``s3n``; the Azure schemes, by container (and account when both name one);
    ``file:/p``, ``file:///p``, ``file://localhost/p`` and ``/p``."""
    family, container, account, path = _location_parts(location)
    root_family, root_container, root_account, root_path = _location_parts(root_uri)
    if (family, container) != (root_family, root_container):
        return None
    if account and root_account and account.lower() != root_account.lower():
        return None
    prefix = root_path.rstrip("/") + "/"
    if not path.startswith(prefix) or len(path) == len(prefix):
        return None
    return path[len(prefix) :]
