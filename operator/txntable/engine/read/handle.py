"""What the commit, checkpoint and write paths need of a table: its store, its URI and its
latest snapshot.

``Table`` (the engine's top) has all three. A ``Transaction``, a post-commit hook and the write
operations take this Protocol instead, so none of them imports ``table``: the write path sits
below the handle that calls it, and there is no {table, commit.transaction, write.api,
commit.options} import cycle to hide behind ``TYPE_CHECKING``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from txntable.engine.read.snapshot import Snapshot
    from txntable.engine.storage.base import Storage


class TableHandle(Protocol):
    """A Delta table at a location; ``txntable.engine.table.Table`` is the implementation."""

    @property
    def storage(self) -> Storage: ...

    @property
    def uri(self) -> str: ...

    def snapshot(self, version: int | None = None) -> Snapshot:
        """The table at ``version``, or the latest (raises ``TableNotFoundError`` without a log)."""
        ...
