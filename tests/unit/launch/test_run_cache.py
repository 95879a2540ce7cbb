"""The shared run cache (``launch.run_cache``) over the real cluster launchers with fake clients:
one listing per namespace per ``max_age`` serves every table; what the cache launched or deleted
is never out of date; a failed listing is not repeated per table; the Secret cache reads each
Secret once per maximum age."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.support.kube_fakes import BACKENDS, api_error
from tests.support.launch_requests import request as make_request
from txntable.api.common import Backend
from txntable.handlers.secret_cache import SecretCache, SecretData, SecretUnavailable
from txntable.launch.errors import TransientLaunchError
from txntable.launch.run import RunState
from txntable.launch.run_cache import CachedRuns


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=BACKENDS)
def cached(request: pytest.FixtureRequest) -> tuple[CachedRuns, Any, Any, Clock]:
    launcher, api, _core, backend = BACKENDS[request.param]()
    clock = Clock()
    return CachedRuns(launcher, max_age=30, clock=clock), api, backend, clock


def lists(api: Any) -> int:
    return sum(1 for c in api.calls if c[2] == "list")


def set_state(api: Any, namespace: str, name: str, backend: Any) -> None:
    obj = api.objects[(namespace, name)]
    if backend is Backend.SPARK_APPLICATION:
        obj["status"] = {"applicationState": {"state": "COMPLETED"}}
    else:
        cond = {"type": "Complete", "status": "True"}
        obj["status"] = {"conditions": [cond], "completionTime": "2026-11-22T02:10:00Z"}


def test_one_listing_per_namespace_per_max_age_serves_every_table(cached: Any) -> None:
    cache, api, backend, clock = cached
    tables = ["sales", "orders", "events"]
    for table in tables:
        req = make_request(backend=backend, table=table)
        api.objects[(req.namespace, req.name)] = cache.inner.build(req)
        api.objects[(req.namespace, req.name)]["metadata"]["creationTimestamp"] = (
            "2026-11-22T02:00:01Z"
        )
    other_ns = make_request(backend=backend, table="sales", namespace="elsewhere")
    api.objects[("elsewhere", other_ns.name)] = cache.inner.build(other_ns)
    for _ in range(5):  # five ticks of every table within max_age
        for table in tables:
            runs = cache.list_runs("lake", table)
            assert [r.labels["txntable.io/table"] for r in runs] == [table]
        clock.now += 5
    assert lists(api) == 1
    assert [r.namespace for r in cache.list_runs("elsewhere", "sales")] == ["elsewhere"]
    assert lists(api) == 2  # a second namespace is a second listing
    clock.now += 30
    cache.list_runs("lake", "sales")
    assert lists(api) == 3 and cache.listings == 3


def test_progress_by_others_is_seen_at_the_next_listing(cached: Any) -> None:
    cache, api, backend, clock = cached
    req = make_request(backend=backend)
    cache.launch(req)
    assert [r.state for r in cache.list_runs(req.namespace, req.table)] == [RunState.PENDING]
    set_state(api, req.namespace, req.name, backend)  # the run finished on the cluster
    clock.now += 10
    assert cache.list_runs(req.namespace, req.table)[0].state is RunState.PENDING  # cached
    clock.now += 30
    assert cache.list_runs(req.namespace, req.table)[0].state is RunState.SUCCEEDED


def test_what_the_cache_launched_or_deleted_is_never_stale(cached: Any) -> None:
    cache, api, backend, clock = cached
    req = make_request(backend=backend)
    assert cache.list_runs(req.namespace, req.table) == []  # listed: nothing yet
    status = cache.launch(req)
    clock.now += 1
    assert [r.name for r in cache.list_runs(req.namespace, req.table)] == [status.name]
    assert cache.list_runs(req.namespace, "orders") == []  # another table's runs stay apart
    assert lists(api) == 1  # served without asking the API server
    cache.delete(req.namespace, req.name)
    assert cache.list_runs(req.namespace, req.table) == []
    assert lists(api) == 1
    # a listing that began after the delete is the truth again; the fresh path asks the API
    clock.now += 60
    again = cache.launch(req)
    assert [r.name for r in cache.list_runs(req.namespace, req.table)] == [again.name]
    assert [r.name for r in cache.list_fresh(req.namespace, req.table)] == [again.name]


def test_a_failed_listing_is_raised_to_every_table_until_retry_after(cached: Any) -> None:
    cache, api, _backend, clock = cached
    api.fail["list"] = api_error(503, "unavailable")
    for table in ("sales", "orders", "events"):
        with pytest.raises(TransientLaunchError):
            cache.list_runs("lake", table)
    assert lists(api) == 1
    clock.now += cache.retry_after
    assert cache.list_runs("lake", "sales") == []
    assert lists(api) == 2


def test_concurrent_tables_share_one_listing(cached: Any) -> None:
    cache, api, _backend, _clock = cached
    barrier = threading.Barrier(8)

    def tick(table: str) -> None:
        barrier.wait()
        cache.list_runs("lake", table)

    threads = [threading.Thread(target=tick, args=(f"t{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert lists(api) == 1


def test_bad_ages_are_refused(cached: Any) -> None:
    cache = cached[0]
    with pytest.raises(ValueError, match="max_age"):
        CachedRuns(cache.inner, max_age=-1)
    with pytest.raises(ValueError, match="max_age"):
        SecretCache(lambda ns, name: SecretData({}), max_age=-1)


def test_secrets_are_read_once_per_max_age_and_again_after_invalidate() -> None:
    clock = Clock()
    reads: list[tuple[str, str]] = []
    versions = iter(["1", "2", "3"])

    def read(namespace: str, name: str) -> SecretData:
        reads.append((namespace, name))
        return SecretData({"key": f"v-{len(reads)}"}, next(versions))

    cache = SecretCache(read, max_age=300, clock=clock)
    for _ in range(10):
        assert cache.get("lake", "s3").data == {"key": "v-1"}
        clock.now += 20
    assert reads == [("lake", "s3")]
    clock.now += 300
    assert cache.get("lake", "s3").resource_version == "2"  # older than max_age: read again
    cache.invalidate("lake", "s3")
    assert cache.get("lake", "s3").data == {"key": "v-3"}
    assert len(reads) == 3 == cache.reads


def test_a_secret_that_cannot_be_read_is_not_cached() -> None:
    calls = []

    def read(namespace: str, name: str) -> SecretData:
        calls.append(name)
        if len(calls) == 1:
            raise TransientLaunchError("the API server is away")
        return SecretData({"key": "v"}, "1")

    cache = SecretCache(read, max_age=300)
    with pytest.raises(TransientLaunchError):
        cache.get("lake", "s3")
    assert cache.get("lake", "s3").data == {"key": "v"}
    assert len(calls) == 2


def test_a_missing_secret_is_asked_for_again_after_a_growing_back_off() -> None:
    """Issue 23.2: every table naming a missing Secret reports it at each tick from one read
    per back-off (30 s, doubling up to max_age), and the Secret is used as soon as it is read."""
    clock = Clock()
    there: list[bool] = [False]
    reads: list[float] = []

    def read(namespace: str, name: str) -> SecretData:
        reads.append(clock.now)
        if not there[0]:
            raise SecretUnavailable(f"Secret {namespace}/{name} does not exist", missing=True)
        return SecretData({"key": "v"}, "1")

    cache = SecretCache(read, max_age=300, clock=clock)
    start = clock.now
    for _ in range(60):  # 10 minutes of ticks every 10 s, several tables each
        for _table in range(3):
            with pytest.raises(SecretUnavailable, match="does not exist") as caught:
                cache.get("lake", "s3")
            assert caught.value.missing
        clock.now += 10
    assert [r - start for r in reads] == [0, 30, 90, 210, 450]  # 30, 60, 120, 240 s apart
    there[0] = True
    clock.now = reads[-1] + 300
    assert cache.get("lake", "s3").data == {"key": "v"}


def test_the_cache_passes_on_every_question_it_does_not_answer_itself() -> None:
    """Every Launcher method the cache does not serve from its listing goes to the launcher it
    wraps: a method left to the Launcher base's default answered 'nothing known' instead (the
    real node showed it: runs whose pods could not start were said to be running)."""
    from txntable.launch.base import Launcher

    for name, member in vars(Launcher).items():
        if callable(member) and not name.startswith("_"):
            assert name in vars(CachedRuns), f"CachedRuns does not pass on {name}"


def test_a_run_whose_pods_cannot_start_is_said_through_the_cache() -> None:
    launcher, _api, core, backend = BACKENDS["job"]()
    cache = CachedRuns(launcher, max_age=30, clock=Clock())
    req = make_request(backend=backend)
    cache.launch(req)
    core.pods.append(
        {
            "metadata": {"name": "p", "labels": {"txntable.io/run": req.name}},
            "status": {"conditions": [{"type": "PodScheduled", "status": "False",
                                       "reason": "Unschedulable", "message": "Insufficient cpu"}]},
        }
    )  # fmt: skip
    assert cache.waiting(req.namespace, req.name) == "pod p cannot be scheduled: Insufficient cpu"
