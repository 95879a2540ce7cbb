"""What S3 and Azure Blob Storage tables share, written once.

Both keep a table's files as objects under a key prefix, read whole objects or their tails,
tell "no such object" (``FileNotFoundError``, which the read path acts on) apart from a store
that failed (a ``StorageError`` naming the store, never a credential), and commit by a
conditional put whose lost answer is settled by reading the object back. Each store says how
to make one request (``_get``, ``_get_tail``, ``_put``, ``_remove``), how it answers "no such
object" (``_missing``) and how its failures read (``_storage_error``); its ``write_if_absent``
keeps the store's own retry rules.
"""

from __future__ import annotations

import io
from abc import abstractmethod
from collections.abc import Callable
from typing import TypeVar

from txntable.engine.errors import StorageError
from txntable.engine.storage.base import Storage

_T = TypeVar("_T")


class ObjectStorage(Storage):
    """A table whose files are objects under ``prefix`` in one bucket or container."""

    #: the key prefix of the table's files ("" at the bucket's or container's root)
    prefix: str = ""

    def _key(self, relative: str) -> str:
        relative = relative.lstrip("/")
        return f"{self.prefix}/{relative}" if self.prefix else relative

    # -- one request each, per store --------------------------------------------------------
    @abstractmethod
    def _get(self, key: str) -> bytes:
        """The whole object."""

    @abstractmethod
    def _get_tail(self, key: str, length: int) -> bytes:
        """The object's last ``length`` bytes (all of it when shorter)."""

    @abstractmethod
    def _put(self, key: str, data: bytes) -> None:
        """Create or replace the object."""

    @abstractmethod
    def _remove(self, key: str) -> None:
        """Delete the object."""

    @abstractmethod
    def _missing(self, exc: Exception) -> bool:
        """Whether ``exc`` is the store saying the object does not exist."""

    @abstractmethod
    def _storage_error(self, what: str, exc: Exception) -> StorageError:
        """The error of a failed request, ``what`` saying what we were doing."""

    # -- the shared semantics ---------------------------------------------------------------
    def read(self, relative: str) -> bytes:
        return self._request(relative, "reading", self._get)

    def read_tail(self, relative: str, length: int) -> bytes:
        return self._request(relative, "reading", lambda key: self._get_tail(key, length))

    def open_input(self, relative: str) -> io.BytesIO:
        return io.BytesIO(self.read(relative))

    def write(self, relative: str, data: bytes) -> None:
        try:
            self._put(self._key(relative), data)
        except Exception as exc:
            raise self._storage_error(f"writing {relative}", exc) from exc

    def delete(self, relative: str) -> None:
        try:
            self._remove(self._key(relative))
        except Exception as exc:
            if self._missing(exc):
                return  # already gone: what a delete asks
            raise self._storage_error(f"deleting {relative}", exc) from exc

    def _request(self, relative: str, verb: str, call: Callable[[str], _T]) -> _T:
        try:
            return call(self._key(relative))
        except Exception as exc:
            if self._missing(exc):
                raise FileNotFoundError(relative) from None
            raise self._storage_error(f"{verb} {relative}", exc) from exc

    def _require_conditional_put(self) -> None:
        """Refuse a commit on a store declared without conditional writes."""
        if not self.atomic_put_if_absent:
            raise StorageError(
                f"{self.root_uri} is declared without conditional PUT; refusing to commit "
                "(see the single-writer option)"
            )

    def _holds(self, relative: str, data: bytes) -> bool:
        """Whether the object at ``relative`` is ``data``: a conditional put that met an
        existing object after a lost answer checks that the object is its own."""
        try:
            return self.read(relative) == data
        except FileNotFoundError:
            return False
