"""Table ticks parse each policy once per resourceVersion, and never read a policy's status."""

from __future__ import annotations

from typing import Any

from tests.support.manifests import compaction_policy_manifest
from txntable.api.errors import InvalidSpecError
from txntable.api.policies import CompactionPolicy
from txntable.handlers.kopf_policies import compaction_policies
from txntable.handlers.parsed_resources import ParsedResources


def policy(name: str, version: str | None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"uid": f"uid-{name}"}
    if version is not None:
        meta["resourceVersion"] = version
    return compaction_policy_manifest(
        name, namespace="ns", metadata=meta, **{"triggers": {"smallFiles": 200}, **spec}
    )


class Counting:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, body: dict[str, Any]) -> CompactionPolicy:
        self.calls.append(body["metadata"]["name"])
        return CompactionPolicy.from_manifest(body)


def test_a_policy_is_parsed_once_per_resource_version() -> None:
    parsed, parse = ParsedResources(), Counting()
    store = [policy("a", "1"), policy("b", "7")]
    first = parsed.parse_all(store, parse)
    again = parsed.parse_all(store, parse)
    assert [p.metadata.name for p in again] == ["a", "b"]
    assert again[0] is first[0] and parse.calls == ["a", "b"]
    changed = parsed.parse_all([policy("a", "2", targetFileSize="64Mi")], parse)
    assert parse.calls == ["a", "b", "a"]
    assert changed[0] is not first[0]


def test_a_new_version_replaces_the_parse_of_the_old_one() -> None:
    """One entry per resource: each status write makes a new resourceVersion, and entries kept
    per version filled the cache with superseded parses of every table."""
    parsed, parse = ParsedResources(), Counting()
    for version in range(1, 101):
        parsed.parse_all([policy("a", str(version)), policy("b", "1")], parse)
    assert len(parsed._parsed) == 2
    assert parse.calls.count("a") == 100 and parse.calls.count("b") == 1


def test_invalid_policies_are_skipped_and_not_parsed_again() -> None:
    parsed, calls = ParsedResources(), []

    def refuse(body: dict[str, Any]) -> Any:
        calls.append(body["metadata"]["name"])
        raise InvalidSpecError("spec", "bad")

    store = [policy("bad", "3")]
    assert parsed.parse_all(store, refuse) == []
    assert parsed.parse_all(store, refuse) == []
    assert calls == ["bad"]


def test_a_body_without_resource_version_is_parsed_every_time() -> None:
    parsed, parse = ParsedResources(), Counting()
    store = [policy("a", None)]
    parsed.parse_all(store, parse)
    parsed.parse_all(store, parse)
    assert parse.calls == ["a", "a"]


def test_the_cache_starts_again_at_its_limit() -> None:
    parsed, parse = ParsedResources(), Counting()
    parsed.LIMIT = 2
    parsed.parse_all([policy("a", "1"), policy("b", "1"), policy("c", "1")], parse)
    parsed.parse_all([policy("a", "1")], parse)
    assert parse.calls == ["a", "b", "c", "a"]


def test_the_policy_index_leaves_the_status_out() -> None:
    body = policy("a", "1")
    body["status"] = {"matchedTables": [f"t{i}" for i in range(1000)]}
    indexed = compaction_policies(namespace="ns", body=body)
    assert "status" not in indexed["ns"] and indexed["ns"]["spec"] == body["spec"]


def test_a_table_naming_an_invalid_policy_says_it_is_invalid() -> None:
    """Before, a table naming a policy that does not validate said it "does not exist"."""
    from tests.support.decide import table
    from txntable.api.conditions import Reason
    from txntable.reconcile.resolve import resolve

    parsed = ParsedResources()
    store = [policy("good", "1"), policy("bad", "1", minFileSize="1Gi", targetFileSize="1Mi")]
    valid = parsed.parse_all(store, CompactionPolicy.from_manifest)
    invalid = parsed.invalid(store, CompactionPolicy.from_manifest)
    assert [p.metadata.name for p in valid] == ["good"] and list(invalid) == ["bad"]
    named = table({"compactionPolicyRef": {"name": "bad"}})
    found = resolve(named, valid, "compaction", invalid)
    assert found.policy is None and found.reason is Reason.INVALID_SPEC
    assert "compaction policy bad is invalid: " in found.message and "minFileSize" in found.message
    missing = table({"compactionPolicyRef": {"name": "gone"}})
    assert resolve(missing, valid, "compaction", invalid).reason is Reason.POLICY_NOT_FOUND


def test_a_namespaces_split_is_kept_until_one_of_its_bodies_changes() -> None:
    parsed, parse = ParsedResources(), Counting()
    store = [policy("a", "1"), policy("b", "7", minFileSize="not a size")]
    first = parsed.split(store, parse, "ns")
    assert [p.metadata.name for p in first[0]] == ["a"] and list(first[1]) == ["b"]
    looked_up = {"n": 0}
    real = parsed._each

    def counted(items: Any, how: Any) -> Any:
        looked_up["n"] += 1
        return real(items, how)

    parsed._each = counted  # type: ignore[method-assign]
    assert parsed.split(store, parse, "ns") is first  # the same bodies: no lookup at all
    assert looked_up["n"] == 0
    store[0] = policy("a", "2", minFileSize="1Mi")  # an event brings a new body
    again = parsed.split(store, parse, "ns")
    assert looked_up["n"] == 1 and again is not first and again[0][0].metadata.name == "a"
    assert parsed.split(store[:1], parse, "ns")[1] == {}  # one went: computed again
