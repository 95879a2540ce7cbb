"""The kmock fixture stores objects as a real API server does in the one way Kopf depends on:
each has its own ``metadata.uid`` (``tests.kmock_emulator``).

Before: objects put in ``kmock.objects`` without a uid (the tests' policies) kept none, and Kopf,
which keys its memory of an object by uid, kept one memory for all of them: in
test_controller_status_events the ``compaction_policies`` index was seen holding the policy
``never`` under ``compact``'s entry, so the table naming ``compact`` reported ``NoPolicy``.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from tests.support.kmock_controller import CHECKPOINT, COMPACTION, register_resources

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]


def _uid(kmock: Any, resource: str, name: str) -> str:
    return str(kmock.objects[resource, "default", name]["metadata"].get("uid") or "")


async def test_every_object_gets_its_own_uid_and_keeps_a_given_one(kmock: Any) -> None:
    register_resources(kmock)
    policy = {"apiVersion": "txntable.io/v1alpha1", "metadata": {"namespace": "default"}}
    kmock.objects[COMPACTION, "default", "a"] = {**policy, "metadata": {"name": "a"}}
    kmock.objects[CHECKPOINT, "default", "a"] = {**policy, "metadata": {"name": "a"}}
    kmock.objects[COMPACTION, "default", "b"] = {
        **policy,
        "metadata": {"name": "b", "uid": "given"},
    }
    url = f"{str(kmock.url).rstrip('/')}/apis/txntable.io/v1alpha1/namespaces/default/"
    url += "checkpointpolicies"
    async with aiohttp.ClientSession() as session:  # created through the API, as a client does
        body = {"kind": "CheckpointPolicy", "metadata": {"name": "c", "namespace": "default"}}
        async with session.post(url, json=body) as resp:
            assert resp.status < 300
            created = await resp.json()
    uids = [
        _uid(kmock, COMPACTION, "a"),
        _uid(kmock, CHECKPOINT, "a"),
        _uid(kmock, CHECKPOINT, "c"),
    ]
    assert all(uids) and len(set(uids)) == 3
    assert created["metadata"]["uid"] == uids[2]
    assert _uid(kmock, COMPACTION, "b") == "given"
