"""kmock's Kubernetes emulator with the one thing of a real API server that Kopf cannot do without:
every object it stores has a ``metadata.uid``.

Why: Kopf keeps its memory of each object (the live body its timers and daemons read, which
timers run, the indexing state) keyed by ``metadata.uid`` alone (``kopf._core.reactor.inventory``
``ResourceMemories._build_key``), and a real API server gives every object one. kmock stores what
a test puts in ``kmock.objects`` (or POSTs) as it is, so objects written without a uid (the
tests' policies were) shared one Kopf memory across names and kinds: one live body that each
watch event replaced with another object's, one status timer for all of them, and indexing one
policy discarded another's entry in the ``compaction_policies`` index (a table then reported
``NoPolicy`` for a policy that existed). Objects that come with a uid keep it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from kmock import KubernetesEmulator


def with_uid(value: Mapping[str, Any]) -> dict[str, Any]:
    """``value`` with a ``metadata.uid``: its own when it has one, else a new one."""
    meta = dict(value.get("metadata") or {})
    if not meta.get("uid"):
        meta["uid"] = str(uuid.uuid4())
    return {**value, "metadata": meta}


class _ObjectsWithUids(KubernetesEmulator.ObjectsArray):
    """kmock's object store, which gives each object stored whole (a test's assignment or an
    API create: key ``(resource, namespace, name)``) a uid when it has none."""

    def __setitem__(self, key: Any, value: Any, /) -> None:
        if isinstance(key, tuple) and len(key) == 3 and isinstance(value, Mapping):
            value = with_uid(value)
        super().__setitem__(key, value)


class ApiServerEmulator(KubernetesEmulator):
    """``KubernetesEmulator`` whose objects all have a uid, as on a real API server."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._objects = _ObjectsWithUids()
