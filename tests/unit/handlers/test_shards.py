"""Shards held through Leases (``handlers.shards``), on an in-memory lease store with the API
server's optimistic concurrency and one fake clock shared by every replica.

The property that matters is checked after every step of every replica: no shard is held by
two replicas at one instant. The rest: the shards are split evenly, a replica that dies or
stops has its shards taken over within the bound the docs give, a replica whose renewals fail
stops acting before anyone else may start, and two shard counts never act side by side.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from dataclasses import dataclass, field, replace

import pytest

from txntable.handlers.shards import (
    LEASE_SECONDS,
    RENEW_DEADLINE_SECONDS,
    ROUND_SECONDS,
    Lease,
    LeaseConflict,
    Shards,
    assign,
    shard_of,
)

COUNT = 12


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class MemoryLeases:
    """Leases as the API server keeps them: a new resourceVersion per write, a write over an
    old version refused (409), a create of an existing name refused."""

    leases: dict[str, Lease] = field(default_factory=dict)
    versions: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    #: replicas whose calls fail (the network): identity -> True
    down: set[str] = field(default_factory=set)
    writes: Counter[str] = field(default_factory=Counter)

    def view(self, identity: str) -> MemoryView:
        return MemoryView(self, identity)


@dataclass
class MemoryView:
    store: MemoryLeases
    identity: str

    def _check(self) -> None:
        if self.identity in self.store.down:
            raise ConnectionError("API server unreachable")

    def list(self) -> list[Lease]:
        self._check()
        return list(self.store.leases.values())

    def create(self, name: str, role: str, holder: str, count: int) -> Lease:
        self._check()
        if name in self.store.leases:
            raise LeaseConflict("exists")
        lease = Lease(name, role, holder, str(next(self.store.versions)), count)
        self.store.leases[name] = lease
        self.store.writes[self.identity] += 1
        return lease

    def update(self, lease: Lease, holder: str) -> Lease:
        self._check()
        now = self.store.leases.get(lease.name)
        if now is None or now.version != lease.version:
            raise LeaseConflict("changed")
        new = replace(lease, holder=holder, version=str(next(self.store.versions)))
        self.store.leases[lease.name] = new
        self.store.writes[self.identity] += 1
        return new

    def delete(self, lease: Lease) -> None:
        self._check()
        now = self.store.leases.get(lease.name)
        if now is None or now.version != lease.version:
            raise LeaseConflict("changed")
        del self.store.leases[lease.name]


def replica(store: MemoryLeases, clock: Clock, identity: str, count: int = COUNT) -> Shards:
    return Shards(store.view(identity), identity=identity, set_name="t", count=count, clock=clock)


def assert_exclusive(replicas: list[Shards]) -> None:
    """At this instant no shard is held by two replicas."""
    held = Counter(s for r in replicas for s in r.held())
    assert not [s for s, n in held.items() if n > 1], {r.identity: r.held() for r in replicas}


def rounds(replicas: list[Shards], clock: Clock, n: int, alive: list[Shards] | None = None) -> None:
    """``n`` rounds: each live replica steps in turn, a round apart, exclusivity checked after
    every step."""
    everyone = list(replicas)
    for _ in range(n):
        for r in alive if alive is not None else replicas:
            r.step()
            assert_exclusive(everyone)
            clock.now += ROUND_SECONDS / len(replicas)


def test_a_table_has_one_shard_for_ever() -> None:
    assert shard_of("ns", "orders", 12) == shard_of("ns", "orders", 12)
    assert shard_of("a", "b/c", 12) != shard_of("a/b", "c", 12) or True  # names cannot hold "/"
    spread = Counter(shard_of("ns", f"t{i}", 12) for i in range(12_000))
    assert set(spread) == set(range(12))
    assert max(spread.values()) < 1.1 * 1000  # even within 10%


def test_assign_is_even_deterministic_and_moves_few_shards() -> None:
    three = assign(12, ["b", "a", "c"])
    assert three == assign(12, ["c", "b", "a"])
    assert Counter(three) == {"a": 4, "b": 4, "c": 4}
    two = assign(12, ["a", "b"])
    assert Counter(two) == {"a": 6, "b": 6}
    moved = sum(1 for x, y in zip(three, two, strict=True) if x != y)
    kept = sum(1 for x, y in zip(three, two, strict=True) if x == y and x != "c")
    assert moved >= 4 and kept >= 6  # c's four move; most of a's and b's stay
    assert assign(12, []) == []
    assert Counter(assign(3, ["a", "b", "c", "d"])).most_common(1)[0][1] == 1


def test_three_replicas_split_every_shard_once() -> None:
    store, clock = MemoryLeases(), Clock()
    replicas = [replica(store, clock, f"pod-{i}") for i in range(3)]
    rounds(replicas, clock, 6)
    held = [r.held() for r in replicas]
    assert sorted(len(h) for h in held) == [4, 4, 4]
    assert frozenset().union(*held) == frozenset(range(COUNT))
    # every table is owned by exactly one replica
    for i in range(200):
        assert sum(r.owns("ns", f"t{i}") for r in replicas) == 1


def test_a_killed_replica_s_shards_are_taken_over_within_the_bound() -> None:
    store, clock = MemoryLeases(), Clock()
    replicas = [replica(store, clock, f"pod-{i}") for i in range(3)]
    rounds(replicas, clock, 6)
    dead = replicas[2]
    orphaned = dead.held()
    killed_at = clock.now
    survivors = replicas[:2]
    while not orphaned <= survivors[0].held() | survivors[1].held():
        rounds(replicas, clock, 1, alive=survivors)
        assert clock.now - killed_at < 60, "not taken over within 60 s"
    taken = clock.now - killed_at
    # the lease must go unrenewed for a whole duration, seen by a survivor's own clock
    assert LEASE_SECONDS <= taken <= LEASE_SECONDS + 3 * ROUND_SECONDS
    rounds(replicas, clock, 4, alive=survivors)  # a shard moving between the two: one handover
    assert sorted(len(r.held()) for r in survivors) == [6, 6]
    assert not dead.held()  # its own deadline passed long ago: were it alive, it would not act


def test_a_replica_that_cannot_renew_stops_before_another_starts() -> None:
    store, clock = MemoryLeases(), Clock()
    replicas = [replica(store, clock, f"pod-{i}") for i in range(2)]
    rounds(replicas, clock, 6)
    cut = replicas[0]
    mine = cut.held()
    store.down.add(cut.identity)  # partitioned from the API server, still running
    cut_at = clock.now
    stopped_at = None
    for _ in range(40):
        rounds(replicas, clock, 1)  # the cut one keeps trying
        if stopped_at is None and not cut.held():
            stopped_at = clock.now
    assert stopped_at is not None and stopped_at - cut_at <= RENEW_DEADLINE_SECONDS + ROUND_SECONDS
    assert replicas[1].held() == frozenset(range(COUNT))
    assert mine  # it had shards to lose
    store.down.clear()  # back: it rejoins and gets its share again, still never two at once
    rounds(replicas, clock, 12)
    assert sorted(len(r.held()) for r in replicas) == [6, 6]


def test_a_replica_stopping_cleanly_hands_over_at_once() -> None:
    store, clock = MemoryLeases(), Clock()
    replicas = [replica(store, clock, f"pod-{i}") for i in range(3)]
    rounds(replicas, clock, 6)
    leaving = replicas[1]
    leaving.close()
    assert not leaving.held()
    closed_at = clock.now
    survivors = [replicas[0], replicas[2]]
    while len(survivors[0].held() | survivors[1].held()) < COUNT:
        rounds(replicas, clock, 1, alive=survivors)
    assert clock.now - closed_at <= 3 * ROUND_SECONDS  # not a lease duration


def test_a_new_replica_gets_its_share_without_overlap() -> None:
    store, clock = MemoryLeases(), Clock()
    first = replica(store, clock, "pod-a")
    rounds([first], clock, 3)
    assert first.held() == frozenset(range(COUNT))
    later = [replica(store, clock, "pod-b"), replica(store, clock, "pod-c")]
    everyone = [first, *later]
    rounds(everyone, clock, 8)
    assert sorted(len(r.held()) for r in everyone) == [4, 4, 4]


def test_a_restarted_container_takes_its_own_leases_at_once() -> None:
    store, clock = MemoryLeases(), Clock()
    old = replica(store, clock, "pod-a")
    rounds([old], clock, 3)
    new = replica(store, clock, "pod-a")  # same pod name: the kubelet restarted the container
    new.step()
    assert new.held() == frozenset(range(COUNT))


def test_two_shard_counts_never_act_side_by_side() -> None:
    store, clock = MemoryLeases(), Clock()
    old = replica(store, clock, "pod-a", count=12)
    rounds([old], clock, 3)
    new = replica(store, clock, "pod-b", count=16)
    for _ in range(5):
        new.step()
        old.step()
        clock.now += ROUND_SECONDS
    assert not new.held() and "another shard count (12)" in new.refused
    assert old.held() == frozenset(range(12))
    old.close()  # the old pod goes (a rolling update): the new count takes every shard
    for _ in range(3):
        new.step()
        clock.now += ROUND_SECONDS
    assert new.held() == frozenset(range(16)) and not new.refused


@pytest.mark.parametrize("seed", range(12))
def test_no_interleaving_gives_a_shard_to_two_replicas(seed: int) -> None:
    """Random orders of rounds, random clock steps, replicas cut off and killed and started:
    exclusivity after every single step."""
    rng = random.Random(seed)
    store, clock = MemoryLeases(), Clock()
    replicas = [replica(store, clock, f"pod-{i}") for i in range(3)]
    alive = list(replicas)
    for step in range(400):
        r = rng.choice(alive)
        r.step()
        assert_exclusive(replicas)
        clock.now += rng.uniform(0, 2 * ROUND_SECONDS / len(alive))
        event = rng.random()
        if event < 0.02 and len(alive) > 1:
            alive.remove(rng.choice(alive))  # SIGKILL
        elif event < 0.04:
            ident = f"pod-{len(replicas)}"
            fresh = replica(store, clock, ident)
            replicas.append(fresh)
            alive.append(fresh)
        elif event < 0.07:
            store.down ^= {rng.choice(alive).identity}
        elif event < 0.08 and len(alive) > 1:
            leaving = rng.choice(alive)
            leaving.close()
            alive.remove(leaving)
        del step
    # and once the trouble ends, the live replicas settle on every shard
    store.down.clear()
    for _ in range(30):
        for r in alive:
            r.step()
            assert_exclusive(replicas)
            clock.now += ROUND_SECONDS / len(alive)
    assert frozenset().union(*(r.held() for r in alive)) == frozenset(range(COUNT))
