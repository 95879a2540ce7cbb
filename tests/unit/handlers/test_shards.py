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
from collections.abc import Callable
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

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class MemoryLeases:
    """Leases as the API server keeps them: a new resourceVersion per write, a write over an
    old version refused (409), a create of an existing name refused."""

    leases: dict[str, Lease] = field(default_factory=dict)
    versions: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    #: replicas whose calls fail (the network): identity -> True
    down: set[str] = field(default_factory=set)
    #: identity -> what runs once right after that replica's next list returns (another
    #: replica's round between one replica's reading and its writing)
    after_list: dict[str, Callable[[], None]] = field(default_factory=dict)
    #: seconds each request takes, on ``clock`` (a slow API server)
    latency: float = 0.0
    clock: Clock | None = None
    #: called at every request, after its latency (to look at a replica mid-round)
    probe: Callable[[], None] | None = None
    writes: Counter[str] = field(default_factory=Counter)

    def view(self, identity: str) -> MemoryView:
        return MemoryView(self, identity)


@dataclass
class MemoryView:
    store: MemoryLeases
    identity: str

    def _check(self) -> None:
        if self.store.clock is not None:
            self.store.clock.advance(self.store.latency)
        if self.store.probe is not None:
            self.store.probe()
        if self.identity in self.store.down:
            raise ConnectionError("API server unreachable")

    def list(self) -> list[Lease]:
        self._check()
        found = list(self.store.leases.values())
        hook = self.store.after_list.pop(self.identity, None)
        if hook is not None:
            hook()
        return found

    def create(self, name: str, role: str, holder: str, count: int, ready: bool = True) -> Lease:
        self._check()
        if name in self.store.leases:
            raise LeaseConflict("exists")
        lease = Lease(name, role, holder, str(next(self.store.versions)), count, ready)
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
    return Shards(
        store.view(identity),
        identity=identity,
        set_name="t",
        count=count,
        clock=clock,
        sleep=clock.advance,
    )


#: rounds until replicas that start together hold every shard: they join, wait out the
#: shard count's Lease (a lease duration), take, hand over
SETTLE = int(LEASE_SECONDS / ROUND_SECONDS) + 8
TABLES = [("ns", f"t{i}") for i in range(300)]


def assert_tables_exclusive(replicas: list[Shards]) -> None:
    """At this instant no table is maintained by two replicas (whatever their shard counts)."""
    for ns, name in TABLES:
        owners = [r.identity for r in replicas if r.owns(ns, name)]
        assert len(owners) <= 1, (name, owners)


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
    rounds(replicas, clock, SETTLE)
    held = [r.held() for r in replicas]
    assert sorted(len(h) for h in held) == [4, 4, 4]
    assert frozenset().union(*held) == frozenset(range(COUNT))
    # every table is owned by exactly one replica
    for i in range(200):
        assert sum(r.owns("ns", f"t{i}") for r in replicas) == 1


def test_a_killed_replica_s_shards_are_taken_over_within_the_bound() -> None:
    store, clock = MemoryLeases(), Clock()
    replicas = [replica(store, clock, f"pod-{i}") for i in range(3)]
    rounds(replicas, clock, SETTLE)
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
    rounds(replicas, clock, SETTLE)
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
    rounds(replicas, clock, SETTLE)
    assert sorted(len(r.held()) for r in replicas) == [6, 6]


def test_a_replica_stopping_cleanly_hands_over_at_once() -> None:
    store, clock = MemoryLeases(), Clock()
    replicas = [replica(store, clock, f"pod-{i}") for i in range(3)]
    rounds(replicas, clock, SETTLE)
    leaving = replicas[1]
    leaving.close()
    assert not leaving.held()
    closed_at = clock.now
    survivors = [replicas[0], replicas[2]]
    while len(survivors[0].held() | survivors[1].held()) < COUNT:
        rounds(replicas, clock, 1, alive=survivors)
    # the margin for writes in flight, then a round or two: not a lease duration
    assert clock.now - closed_at <= (LEASE_SECONDS - RENEW_DEADLINE_SECONDS) + 3 * ROUND_SECONDS


def test_a_new_replica_gets_its_share_without_overlap() -> None:
    store, clock = MemoryLeases(), Clock()
    first = replica(store, clock, "pod-a")
    rounds([first], clock, SETTLE)
    assert first.held() == frozenset(range(COUNT))
    later = [replica(store, clock, "pod-b"), replica(store, clock, "pod-c")]
    everyone = [first, *later]
    rounds(everyone, clock, SETTLE)
    assert sorted(len(r.held()) for r in everyone) == [4, 4, 4]


def test_a_restarted_container_takes_its_shards_back_after_the_count_s_wait() -> None:
    store, clock = MemoryLeases(), Clock()
    old = replica(store, clock, "pod-a")
    rounds([old], clock, SETTLE)
    new = replica(store, clock, "pod-a")  # same pod name: the kubelet restarted the container
    rounds([new], clock, SETTLE, alive=[new])
    assert new.held() == frozenset(range(COUNT))


def test_a_new_shard_count_waits_for_the_old_one_to_go() -> None:
    store, clock = MemoryLeases(), Clock()
    old = replica(store, clock, "pod-a", count=12)
    rounds([old], clock, SETTLE)
    new = replica(store, clock, "pod-b", count=16)
    both = [old, new]
    for _ in range(SETTLE):
        for r in both:
            r.step()
            assert_tables_exclusive(both)
        clock.now += ROUND_SECONDS
    assert not new.held() and "replicas of shard count 12 are alive" in new.refused
    assert old.held() == frozenset(range(12))  # the new member is not counted: it takes none
    old.close()  # the old pod goes (a rolling update): the new count switches, waits, takes
    for _ in range(SETTLE):
        new.step()
        assert_tables_exclusive(both)
        clock.now += ROUND_SECONDS
    assert new.held() == frozenset(range(16)) and not new.refused


def test_two_counts_starting_together_never_share_a_table() -> None:
    """A crash-looping pod of the old ReplicaSet and a pod of the new one, no live lease."""
    store, clock = MemoryLeases(), Clock()
    pods = [replica(store, clock, "pod-a", count=4), replica(store, clock, "pod-b", count=8)]
    for _ in range(3 * SETTLE):
        for r in pods:
            r.step()
            assert_tables_exclusive(pods)
            clock.now += ROUND_SECONDS / 2
    assert sorted(len(r.held()) for r in pods) in ([0, 4], [0, 8])


def test_an_old_count_cut_off_never_acts_beside_the_new_count() -> None:
    """The old count's last replica loses the API server; a replica of a new count waits its
    leases out, switches the count, and must not act while the old one still may."""
    store, clock = MemoryLeases(), Clock()
    old = replica(store, clock, "pod-a", count=4)
    rounds([old], clock, SETTLE)
    store.down.add(old.identity)
    new = replica(store, clock, "pod-b", count=8)
    both = [old, new]
    restored = False
    for i in range(6 * SETTLE):
        for r in both:
            r.step()
            assert_tables_exclusive(both)
            clock.now += ROUND_SECONDS / 2
        if not restored and new.held():
            store.down.clear()  # it comes back just as the new count starts acting
            restored = True
        del i
    assert restored and new.held() == frozenset(range(8)) and not old.held()
    assert "replicas of shard count 8 are alive" in old.refused


def test_one_failed_round_does_not_pause_a_shard() -> None:
    store, clock = MemoryLeases(), Clock()
    a = replica(store, clock, "pod-a")
    rounds([a], clock, SETTLE)
    assert a.held() == frozenset(range(COUNT))
    store.down.add(a.identity)
    change = a.step()
    clock.now += ROUND_SECONDS
    store.down.clear()
    change2 = a.step()
    assert not change.lost and not change2.lost and a.held() == frozenset(range(COUNT))


def test_a_lapse_is_reported_as_lost() -> None:
    store, clock = MemoryLeases(), Clock()
    a = replica(store, clock, "pod-a")
    rounds([a], clock, SETTLE)
    store.down.add(a.identity)
    lost: set[int] = set()
    for _ in range(6):
        lost |= a.step().lost
        clock.now += ROUND_SECONDS
    assert lost == set(range(COUNT)) and not a.held()


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
    for _ in range(3 * SETTLE):
        for r in alive:
            r.step()
            assert_exclusive(replicas)
            clock.now += ROUND_SECONDS / len(alive)
    assert frozenset().union(*(r.held() for r in alive)) == frozenset(range(COUNT))


def test_a_renewal_read_before_the_count_switched_never_overlaps_the_new_count() -> None:
    """The old count's last replica comes back from a cut just as a replica of the new count
    switches the count: it read the leases before the switch and renews them after it (its
    renewals do not conflict: the switch wrote only the count's Lease). The new count must
    wait a lease duration before it acts, so the old replica's deadline passes first."""
    store, clock = MemoryLeases(), Clock()
    old = replica(store, clock, "pod-a", count=4)
    rounds([old], clock, SETTLE)
    store.down.add(old.identity)
    new = replica(store, clock, "pod-b", count=8)
    both = [old, new]
    old_leases = [old.shard_lease(i) for i in range(4)] + [old.member_lease()]

    def would_switch() -> bool:
        seen = [new._seen.get(name) for name in old_leases]
        return all(s is not None and clock.now - s[1] > LEASE_SECONDS for s in seen)

    for _ in range(10 * SETTLE):
        if new.rounds > 2 and would_switch():
            break
        new.step()
        assert_tables_exclusive(both)
        clock.now += ROUND_SECONDS / 2
    else:
        raise AssertionError("the new count never came to switch")
    store.down.clear()
    store.after_list[old.identity] = new.step  # the switch lands between its list and renewals
    old.step()
    assert store.leases[new.epoch_lease()].count == 8
    assert old.held(), "it renewed what it read before the switch"
    for _ in range(3 * SETTLE):
        for r in (new, old):  # the new count's round first, while the old one holds
            r.step()
            assert_tables_exclusive(both)
            clock.now += ROUND_SECONDS / 4
    assert new.held() == frozenset(range(8)) and not old.held()


def test_a_shard_handed_over_waits_the_margin_even_when_rounds_run_back_to_back() -> None:
    """A member joins: shards move from the holder to it. Between the last instant the old
    holder may act on a shard and the first the new one does, at least the margin a write in
    flight may take, however close together the rounds come."""
    store, clock = MemoryLeases(), Clock()
    first = replica(store, clock, "pod-a")
    rounds([first], clock, SETTLE)
    second = replica(store, clock, "pod-b")
    both = [first, second]
    last_a: dict[int, float] = {}
    first_b: dict[int, float] = {}
    for _ in range(20 * SETTLE):
        for r in both:
            r.step()
            clock.now += 0.1  # rounds back to back (an overrun keeps the next one waiting not)
            for shard in first.held():
                last_a[shard] = clock.now
            for shard in second.held():
                first_b.setdefault(shard, clock.now)
    moved = set(first_b) & set(last_a)
    assert moved, "no shard moved to the new member"
    margin = LEASE_SECONDS - RENEW_DEADLINE_SECONDS
    assert all(first_b[s] - last_a[s] >= margin - 0.2 for s in moved), {
        s: round(first_b[s] - last_a[s], 1) for s in moved
    }


def test_slow_requests_keep_a_replica_s_shards_held() -> None:
    """One replica, twelve shards, each Lease request taking 0.6 s (a round of 14 requests
    takes 8.4 s): every renewal counts from its own request and at once, so each shard is
    renewed every 9 s and its tables stay maintained, within the 13 s deadline. Counted from
    the round's start and published at its end, they were maintained half the time."""
    clock = Clock()
    store = MemoryLeases(clock=clock)
    a = replica(store, clock, "pod-a")
    rounds([a], clock, SETTLE)
    assert a.held() == frozenset(range(COUNT))
    store.latency = 0.6
    looks, gaps = 0, 0

    def look() -> None:  # at every request of every round: are all its tables maintained?
        nonlocal looks, gaps
        looks += 1
        gaps += len(a.held()) < COUNT

    store.probe = look
    for _ in range(2 * SETTLE):
        a.step()
    assert looks > 100 and gaps == 0 and a.held() == frozenset(range(COUNT))
