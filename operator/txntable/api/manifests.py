"""Which of our kinds a manifest is, for code that reads manifest files without an API server.

``kubectl apply`` answers a misspelled kind with an error; a loader that matched kinds by equality
skipped ``kind: TxnTabel`` or ``kind: CompactionPolcy`` in silence, and a table then ran without
its policy. ``parse_manifest`` parses our kinds, returns None for other tools' objects (a Secret,
a ConfigMap) and raises ``InvalidSpecError`` for a kind under our group that we do not define or
a kind that is close to one of ours, naming the closest.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any, Final

from txntable.api.constants import (
    GROUP,
    KIND_CHECKPOINT_POLICY,
    KIND_COMPACTION_POLICY,
    KIND_TABLE,
)
from txntable.api.errors import InvalidSpecError
from txntable.api.policies import CheckpointPolicy, CompactionPolicy
from txntable.api.table import TxnTable

Resource = TxnTable | CompactionPolicy | CheckpointPolicy

PARSERS: Final[Mapping[str, Callable[[Any], Resource]]] = {
    KIND_TABLE: TxnTable.from_manifest,
    KIND_COMPACTION_POLICY: CompactionPolicy.from_manifest,
    KIND_CHECKPOINT_POLICY: CheckpointPolicy.from_manifest,
}

#: How alike a kind must be to one of ours to count as a misspelling of it (difflib ratio on
#: lower case: ``TxnTabel`` 0.88, ``CompactionPolcy`` 0.97; ``Table`` 0.77, ``Policy`` 0.55).
_CLOSE: Final = 0.8


def closest_kind(kind: str) -> str | None:
    """Our kind that ``kind`` most likely misspells, or None when none is close."""
    lowered = {k.lower(): k for k in PARSERS}
    match = difflib.get_close_matches(kind.lower(), list(lowered), n=1, cutoff=_CLOSE)
    return lowered[match[0]] if match else None


def is_ours(doc: Mapping[str, Any]) -> bool:
    """Whether the document claims our API group (whatever its kind)."""
    api_version = doc.get("apiVersion")
    return isinstance(api_version, str) and api_version.split("/")[0] == GROUP


def parse_manifest(doc: object) -> Resource | None:
    """The parsed resource; None for another tool's object; ``InvalidSpecError`` otherwise."""
    if not isinstance(doc, dict):
        return None
    kind = doc.get("kind")
    if isinstance(kind, str) and kind in PARSERS:
        return PARSERS[kind](doc)
    guess = closest_kind(kind) if isinstance(kind, str) else None
    if guess is not None:
        raise InvalidSpecError("kind", f"unknown kind {kind!r}; did you mean {guess}?")
    if is_ours(doc):
        known = ", ".join(PARSERS)
        raise InvalidSpecError("kind", f"unknown kind {kind!r} in {GROUP} (known: {known})")
    return None
