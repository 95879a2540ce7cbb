"""Policies and tables parsed once per resourceVersion, for the Kopf handlers.

Kopf's indexes hand every table tick the raw bodies of its namespace's policies, and the table
index (``handlers.table_index``) every policy tick those of its namespace's tables. Parsing
them again at each tick was most of the controller's steady CPU at 1,000 tables
(bench/scale.py's profile); ``ParsedResources`` keeps the newest parse of each resource by
(parser, uid), with its resourceVersion. Kopf-free: it reads plain bodies.
"""

from __future__ import annotations

import operator
from typing import Any

from txntable.api.errors import InvalidSpecError


class ParsedResources:
    """Resources parsed once per resourceVersion. Every table tick reads every policy of its
    namespace and every policy tick every table: at 1,000 tables, parsing them again each time
    was most of the controller's steady CPU (bench/scale.py's profile). One entry per resource
    (its newest parse): every status write makes a new resourceVersion, so entries kept per
    version filled the cache with superseded parses of every table."""

    #: entries kept before the cache starts again (deleted resources' entries go with it)
    LIMIT = 20_000

    def __init__(self) -> None:
        #: (parser, uid) -> (resourceVersion, the parse or why it failed)
        self._parsed: dict[tuple[Any, str], tuple[str, Any]] = {}
        #: (parser, namespace) -> (the bodies, ``split``'s answer for them)
        self._splits: dict[tuple[Any, str], tuple[list[Any], tuple[list[Any], dict[str, str]]]] = {}

    def parse_all(self, store: Any, parse: Any) -> list[Any]:
        """``parse`` applied to each body of ``store``, skipping invalid ones (each reports
        its own error on itself, through its own handler; ``invalid`` lists them)."""
        return [found for _, found in self._each(store, parse) if not isinstance(found, str)]

    def invalid(self, store: Any, parse: Any) -> dict[str, str]:
        """The bodies of ``store`` that ``parse`` refuses: name -> why."""
        return {name: found for name, found in self._each(store, parse) if isinstance(found, str)}

    def split(
        self, store: Any, parse: Any, namespace: str | None = None
    ) -> tuple[list[Any], dict[str, str]]:
        """``parse_all`` and ``invalid`` in one pass over ``store``: every table tick reads its
        namespace's policies this way (one pass instead of two per kind). Given the
        ``namespace`` of ``store``, the answer is kept until one of its bodies changes (each
        event brings a new body; compared by identity, the kept ones held): a table tick then
        costs one identity check per policy, not a lookup and a version check (at 5,000 tables
        and 200 policies those lookups were 7% of the controller's start-up). The lists are
        shared: callers read them."""
        items = list(store or ())
        if namespace is not None:
            kept = self._splits.get((parse, namespace))
            same = kept is not None and len(kept[0]) == len(items)
            if kept is not None and same and all(map(operator.is_, kept[0], items)):
                return kept[1]
        valid: list[Any] = []
        invalid: dict[str, str] = {}
        for name, found in self._each(items, parse):
            if isinstance(found, str):
                invalid[name] = found
            else:
                valid.append(found)
        result = (valid, invalid)
        if namespace is not None:
            self._splits[(parse, namespace)] = (items, result)
        return result

    def _each(self, store: Any, parse: Any) -> list[tuple[str, Any]]:
        out = []
        for body in store or ():
            meta = body.get("metadata") or {}
            version = meta.get("resourceVersion")
            key = (parse, str(meta.get("uid") or meta.get("name")))
            kept = self._parsed.get(key)
            if version is not None and kept is not None and kept[0] == str(version):
                found = kept[1]
            else:
                try:
                    found = parse(body)
                except InvalidSpecError as exc:
                    found = str(exc)
                if version is not None:
                    if key not in self._parsed and len(self._parsed) >= self.LIMIT:
                        self._parsed.clear()
                    self._parsed[key] = (str(version), found)
            out.append((str(meta.get("name")), found))
        return out
