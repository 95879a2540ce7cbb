"""One object's status as the API server keeps it (RFC 7386 patches), for status writer tests."""

from __future__ import annotations

from typing import Any

from txntable.handlers.status_writer import Current, StatusNotWritten, Stored, apply_merge_patch


class Server:
    """One object's status as the API server keeps it."""

    def __init__(self, status: dict[str, Any]) -> None:
        self.status, self.version, self.refuse = status, 1, False
        self.patches: list[dict[str, Any]] = []

    def body(self) -> Current:
        return Current(self.status, str(self.version))

    def touch(self) -> Current:
        """A write that leaves the status alone (Kopf adding its finalizer): a new version."""
        self.version += 1
        return self.body()

    def patch(self, key: str, namespace: str, name: str, patch: dict[str, Any]) -> Stored:
        if self.refuse:
            raise StatusNotWritten("HTTP 503 Service Unavailable")
        self.patches.append(patch)
        self.status, self.version = apply_merge_patch(self.status, patch), self.version + 1
        return Stored(self.status, str(self.version))
