"""One key per resource: the uid the API server gave it, else ``namespace/name``."""

from __future__ import annotations

from txntable.api.meta import ObjectMeta, resource_key


def test_uid_is_the_key_when_the_api_server_gave_one() -> None:
    meta = ObjectMeta(name="sales", namespace="lake", uid="3f2a")
    assert meta.key == resource_key("lake", "sales", "3f2a") == "3f2a"
    assert meta.namespaced_name == "lake/sales"


def test_without_uid_two_namespaces_are_two_keys_and_none_means_default() -> None:
    assert ObjectMeta(name="sales", namespace="a").key == "a/sales"
    assert ObjectMeta(name="sales", namespace="b").key == "b/sales"
    assert ObjectMeta(name="sales").key == resource_key("default", "sales") == "default/sales"
