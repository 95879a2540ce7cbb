"""The ``_last_checkpoint`` hint: read it defensively, write it with Delta's checksum.

The hint only saves a listing from version 0. It is overwritten in place (not atomic on every
store), so a reader treats a missing, truncated, mismatching or stale hint as absent and finds
the checkpoint by listing; nothing here may ever make a snapshot wrong, only slower.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from txntable.engine.storage.base import Storage
from txntable.engine.storage.paths import LAST_CHECKPOINT, LOG_DIR


@dataclass(frozen=True, slots=True)
class LastCheckpoint:
    version: int
    size: int
    parts: int | None
    raw: dict[str, Any]


def _encode(text: str) -> str:
    return '"' + quote(text.encode("utf-8"), safe="-._~") + '"'


def _flatten(value: Any, path: str, out: list[tuple[str, str]]) -> None:
    if isinstance(value, dict):
        for key, child in value.items():
            child_path = _encode(key) if not path else f"{path}+{_encode(key)}"
            _flatten(child, child_path, out)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            _flatten(child, f"{path}+{index}" if path else str(index), out)
    elif isinstance(value, str):
        out.append((path, _encode(value)))
    elif value is None:
        out.append((path, "null"))
    elif isinstance(value, bool):
        out.append((path, "true" if value else "false"))
    else:
        out.append((path, json.dumps(value)))


def checksum(obj: dict[str, Any]) -> str:
    """Delta's canonical JSON checksum (PROTOCOL.md "JSON checksum"), without ``checksum``."""
    pairs: list[tuple[str, str]] = []
    _flatten({k: v for k, v in obj.items() if k != "checksum"}, "", pairs)
    pairs.sort(key=lambda p: p[0].encode("utf-8"))
    canonical = ",".join(f"{p}={v}" for p, v in pairs)
    return hashlib.md5(canonical.encode("utf-8"), usedforsecurity=False).hexdigest()


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def parse(data: bytes) -> LastCheckpoint | None:
    """The hint, or ``None`` when it is unusable (bad JSON, bad checksum, unknown kind)."""
    try:
        obj = json.loads(data.decode("utf-8"), object_pairs_hook=_reject_duplicates)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(obj, dict):
        return None
    version, size, parts = obj.get("version"), obj.get("size", -1), obj.get("parts")
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        return None
    if "checksum" in obj and obj["checksum"] != checksum(obj):
        return None
    if "checkpointType" in obj or "amtCheckpoint" in obj:
        return None  # Spark-internal checkpoint kinds: fall back to listing
    if parts is not None and (not isinstance(parts, int) or parts < 1):
        return None
    return LastCheckpoint(version, size if isinstance(size, int) else -1, parts, obj)


def read(storage: Storage) -> LastCheckpoint | None:
    """Read and validate the hint; any problem means "no hint"."""
    try:
        data = storage.read(f"{LOG_DIR}/{LAST_CHECKPOINT}")
    except FileNotFoundError:
        return None
    return parse(data)


def render(fields: dict[str, Any]) -> bytes:
    """Hint bytes: ``version``, ``size``, ``parts`` first (old readers split-read them)."""
    ordered: dict[str, Any] = {k: fields[k] for k in ("version", "size", "parts") if k in fields}
    ordered.update({k: v for k, v in fields.items() if k not in ordered and k != "checksum"})
    ordered["checksum"] = checksum(ordered)
    return json.dumps(ordered, separators=(",", ":")).encode("utf-8")
