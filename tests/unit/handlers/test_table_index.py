"""The controller's table index: complete once it holds the tables counted at start (or at its
deadline), and the count read from one list request of one item per namespace."""

from __future__ import annotations

import time
from typing import Any

import pytest

from txntable.handlers import table_index
from txntable.handlers.table_index import TableIndex, count_tables


def _body(uid: str, namespace: str = "lake") -> dict[str, Any]:
    return {"metadata": {"name": f"t-{uid}", "namespace": namespace, "uid": uid}}


def test_complete_once_every_counted_table_is_in() -> None:
    index = TableIndex(expected=2, deadline=time.monotonic() + 3600)
    index.put(_body("a"))
    index.put(_body("a"))  # a second event of one table is not a second table
    assert len(index) == 1 and not index.complete()
    index.put(_body("b", namespace="other"))
    assert index.complete()
    assert [b["metadata"]["uid"] for b in index.bodies("lake")] == ["a"]


def test_a_table_deleted_since_the_count_waits_for_the_deadline_only() -> None:
    index = TableIndex(expected=3, deadline=time.monotonic() - 1)
    index.put(_body("a"))
    assert index.complete()
    unknown = TableIndex(expected=None, deadline=time.monotonic() + 3600)
    unknown.put(_body("a"))
    assert not unknown.complete()  # a count it could not get: the deadline
    assert TableIndex().complete()  # no deadline (tests, local mode): at once


def test_dropping_a_table_forgets_its_namespace_when_it_was_the_last() -> None:
    index = TableIndex()
    index.put(_body("a"))
    index.drop(_body("a"))
    index.drop(_body("a"))  # twice: nothing
    assert len(index) == 0 and index.bodies("lake") == [] and not index._by_namespace


class _Api:
    def __init__(self, pages: dict[str | None, dict[str, Any]]) -> None:
        self.pages = pages
        self.asked: list[tuple[str | None, int]] = []

    def __call__(self, _client: Any) -> _Api:
        return self

    def list_namespaced_custom_object(self, g: str, v: str, ns: str, p: str, limit: int) -> Any:
        self.asked.append((ns, limit))
        return self.pages[ns]

    def list_cluster_custom_object(self, g: str, v: str, p: str, limit: int) -> Any:
        self.asked.append((None, limit))
        return self.pages[None]


def test_the_count_is_the_item_and_the_remaining_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    import kubernetes.client

    api = _Api({
        "a": {"items": [{}], "metadata": {"remainingItemCount": 4, "continue": "x"}},
        "b": {"items": [], "metadata": {}},
        "c": {"items": [{}], "metadata": {}},
        None: {"items": [{}], "metadata": {"remainingItemCount": 9999, "continue": "y"}},
    })  # fmt: skip
    monkeypatch.setattr(kubernetes.client, "CustomObjectsApi", api)
    assert count_tables(object(), "g", "v", "txntables", ["a", "b", "c"]) == 6
    assert count_tables(object(), "g", "v", "txntables", []) == 10_000
    assert {limit for _, limit in api.asked} == {1}
    api.pages["a"] = {"items": [{}], "metadata": {"continue": "x"}}  # more, but not how many
    assert count_tables(object(), "g", "v", "txntables", ["a", "b"]) is None
    assert table_index.TableIndex(None, None).complete()
