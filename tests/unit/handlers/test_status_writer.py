"""The one status writer computes its merge patch and "changed?" against the newest status
known for the table, not against whatever body Kopf handed the caller.

Kopf hands the timer and the commit-events daemon the object as the last watch event showed
it, which may be older than what this process has just written (a watch event arrives late,
for several ticks under load). Patching against such a body went wrong two ways, both seen
with main's ``_merge_patch``/``_changed`` and the same bodies: a field the newest status had
and the stale body lacked (the daemon had written ``plan``) was not sent as null and stayed on
the server beside a status that no longer had it; a status equal to the stale body was judged
unchanged and not written, leaving the newer one, now wrong, on the server. The server here
applies RFC 7386 as the API server does and bumps a resourceVersion per write.
"""

from __future__ import annotations

from typing import Any

from tests.support.status_server import Server
from txntable.controller.memory import TableMemories
from txntable.handlers.status_writer import (
    Current,
    StatusWriter,
    WriteResult,
    Written,
    compare_resource_versions,
)

KEY = "default/events/uid-1"
S0 = {"phase": "Ready", "version": 3, "conditions": [{"type": "Ready", "status": "True"}]}
WITH_PLAN = {**S0, "phase": "Pending", "version": 4, "plan": {"planId": "aaa", "bins": 2}}


def _write(writer: StatusWriter, body: Current, status: dict[str, Any]) -> WriteResult:
    return writer.write(KEY, "default", "events", body, status)


def test_a_field_written_since_the_stale_body_is_deleted() -> None:
    server = Server(dict(S0))
    writer = StatusWriter(TableMemories(), server)
    stale = server.body()  # the watch event of the next write arrives late
    assert _write(writer, stale, WITH_PLAN) is WriteResult.WRITTEN  # the daemon's tick
    new = {**S0, "version": 5}  # the policy went away: no plan now
    assert _write(writer, stale, new) is WriteResult.WRITTEN  # the timer's tick, on the stale body
    assert server.status == new


def test_a_status_equal_to_the_stale_body_is_written_over_the_newer_one() -> None:
    server = Server(dict(S0))
    writer = StatusWriter(TableMemories(), server)
    stale = server.body()
    _write(writer, stale, WITH_PLAN)
    assert _write(writer, stale, S0) is WriteResult.WRITTEN
    assert server.status == S0


def test_a_status_already_written_is_not_written_again() -> None:
    server = Server(dict(S0))
    writer = StatusWriter(TableMemories(), server)
    stale = server.body()
    _write(writer, stale, WITH_PLAN)
    assert _write(writer, stale, WITH_PLAN) is WriteResult.UNCHANGED  # the stale body says S0
    assert _write(writer, server.body(), WITH_PLAN) is WriteResult.UNCHANGED  # caught up
    assert len(server.patches) == 1


def test_a_body_newer_than_the_last_write_is_the_base() -> None:
    """Someone else wrote after this process (an invalid spec's condition, kubectl): the body
    that shows it is newer than what this process remembers, and the patch is made on it."""
    server = Server(dict(S0))
    writer = StatusWriter(TableMemories(), server)
    _write(writer, server.body(), WITH_PLAN)
    server.patch(KEY, "default", "events", {"conflicts": {"percent": 10}})
    assert _write(writer, server.body(), WITH_PLAN) is WriteResult.WRITTEN
    assert server.status == WITH_PLAN


def test_a_refused_write_is_not_taken_as_written() -> None:
    server = Server(dict(S0))
    writer = StatusWriter(TableMemories(), server)
    body = server.body()
    server.refuse = True
    assert _write(writer, body, WITH_PLAN) is WriteResult.REFUSED
    assert server.status == S0
    server.refuse = False  # the next tick writes it
    assert _write(writer, body, WITH_PLAN) is WriteResult.WRITTEN
    assert server.status == WITH_PLAN


def test_a_partial_status_keeps_the_other_fields() -> None:
    """An invalid spec's status sets its own fields only (as Kopf's patch.status did)."""
    server = Server(dict(WITH_PLAN))
    writer = StatusWriter(TableMemories(), server)
    invalid = {"phase": "Invalid", "conditions": [{"type": "Ready", "status": "False"}]}
    writer.write(KEY, "default", "events", server.body(), invalid, whole=False)
    assert server.status == {**WITH_PLAN, **invalid}


def test_forgetting_the_table_forgets_what_was_written() -> None:
    server = Server(dict(S0))
    memories = TableMemories()
    writer = StatusWriter(memories, server)
    stale = server.body()
    _write(writer, stale, WITH_PLAN)
    memories.forget(KEY)
    assert writer.newest(KEY, stale) == S0


def test_the_status_kept_for_a_lagging_body_is_dropped_once_the_body_caught_up() -> None:
    """The copy of the written status serves only bodies older than the write: once a body at
    least as new is seen, it is dropped (at scale it was a second copy of every status), and
    the writes after it still patch against the newest status."""
    server = Server(dict(S0))
    memories = TableMemories()
    writer = StatusWriter(memories, server)
    stale = server.body()
    assert _write(writer, stale, WITH_PLAN) is WriteResult.WRITTEN
    assert writer.newest(KEY, stale) == WITH_PLAN  # the body lags: the kept copy answers
    written = memories.peek(KEY, Written)
    assert written is not None and written.status == WITH_PLAN
    caught_up = server.body()
    assert writer.newest(KEY, caught_up) == WITH_PLAN  # now from the body itself
    assert written.status is None
    assert _write(writer, caught_up, WITH_PLAN) is WriteResult.UNCHANGED
    assert _write(writer, caught_up, S0) is WriteResult.WRITTEN
    assert server.status == S0  # the plan was sent as null: the base was the newest status
    assert writer.newest(KEY, caught_up) == S0  # lagging again: the new copy answers


def test_a_body_older_than_the_write_but_not_its_base_is_still_stale() -> None:
    """Seen at start under load (300 tables, 2 cores, load average 20): Kopf added its
    finalizer (a new resourceVersion, status unchanged) after the body the first tick read and
    before that tick's write; the watch event of the finalizer came after the write. The next
    tick's body is that one: older than the write, yet no write of ours was based on it. Taken
    for caught up, every condition looked new and the same status was written again, with new
    transition times."""
    server = Server({})
    writer = StatusWriter(TableMemories(), server)
    first = server.body()
    finalized = server.touch()
    assert _write(writer, first, WITH_PLAN) is WriteResult.WRITTEN
    assert writer.newest(KEY, finalized) == WITH_PLAN
    assert _write(writer, finalized, WITH_PLAN) is WriteResult.UNCHANGED
    assert len(server.patches) == 1


def test_resource_versions_compare_as_kubernetes_defines_it() -> None:
    assert compare_resource_versions("9", "10") == -1
    assert compare_resource_versions("10", "10") == 0
    assert compare_resource_versions("123", "99") == 1
    # not the comparable form (KEP-5504): opaque, compared for equality only, elsewhere
    for a, b in [("010", "10"), ("0", "1"), ("abc", "1"), ("", "1"), ("1", None), ("\u0661", "1")]:
        assert compare_resource_versions(a, b) is None
