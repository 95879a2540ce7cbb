"""Which tables this replica maintains: shards of the tables, held through Leases.

Two Kopf peers of equal priority freeze each other, so before this a second replica added
neither capacity nor a fast failover (ADR 0005). With ``TXNTABLE_SHARDS`` set, every replica
watches every table (Kopf in standalone mode) and maintains only the tables of the shards it
holds: a table's shard is a stable hash of its namespace and name (``shard_of``), and each
shard is one Lease in coordination.k8s.io (the object controller leader election uses) in the
controller's namespace. Each replica also keeps a member Lease of its own, so all of them see
the same set of live members and compute the same wanted owner of each shard (``assign``:
rendezvous hashing with bounded loads, so a member joining or leaving moves few shards).

Safety is leader election's, per shard, without trusting another node's clock:

- a replica acts on a shard only until ``renew_deadline`` after it *sent* the request that last
  renewed its lease (``owns``; each renewal counts from its own request, and counts at once);
  a renewal that fails stops it at that time;
- another replica takes a lease only once it has seen the same version of it, unchanged, for
  ``duration`` seconds on its own clock, dated when its listing returned (or its holder
  released it), and takes it with the version it read, so of two that try, one wins (the API
  server's optimistic concurrency);
- ``duration - renew_deadline`` is the margin for a write that was already on its way when
  its replica's time ran out: a shard given up is released only that long after, and every
  Lease request of the cluster's store gives up sooner (a timeout, no retries);
- two shard counts would map one table to two shards: one more Lease records the count in
  force (``_gate``), a replica of another count takes nothing while one of that count is
  alive, and every replica waits a lease duration after it first sees the record.

Kopf-free: the API calls go through ``LeaseStore`` (``KubeLeases`` in the cluster, an
in-memory store in the tests), the clock is injected.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from txntable.api.constants import GROUP

log = logging.getLogger(__name__)

#: the label that names the set of leases of one controller install (its peering name)
SET_LABEL: Final = f"{GROUP}/shard-set"
#: the label that tells a shard's lease from a member's
ROLE_LABEL: Final = f"{GROUP}/lease-role"
#: the annotation of a shard's lease that says how many shards its holder splits tables into
COUNT_ANNOTATION: Final = f"{GROUP}/shards"
SHARD, MEMBER, EPOCH = "shard", "member", "count"
#: the annotation of a member's lease that says whether it takes shards now
READY_ANNOTATION: Final = f"{GROUP}/ready"
#: seconds a lease is good for without renewal
LEASE_SECONDS: Final = 20.0
#: seconds after sending a renewal that its holder stops acting if no renewal succeeded since
RENEW_DEADLINE_SECONDS: Final = 13.0
#: seconds from the start of one round to the start of the next (renewals, takeovers,
#: releases): two rounds may fail in a row before a held shard lapses
ROUND_SECONDS: Final = 4.0
#: seconds a single Lease request may take (the margin ``LEASE_SECONDS -
#: RENEW_DEADLINE_SECONDS`` must cover a write already sent when its replica's time runs out)
REQUEST_SECONDS: Final = 3.0
#: a member lease left by a replica that died is deleted once it is this many durations old
STALE_MEMBER_DURATIONS: Final = 20


class LeaseConflict(Exception):  # noqa: N818 - what happened: the lease changed under us
    """The lease was created, changed or deleted by someone else since it was read."""


@dataclass(frozen=True, slots=True)
class Lease:
    """What the shards keep of one Lease object."""

    name: str
    role: str
    holder: str
    version: str
    count: int = 0
    #: a member's: whether it takes shards now (not while it waits, or refuses)
    ready: bool = True
    #: the object as read, for the store to write back (``KubeLeases``)
    raw: Any = field(default=None, compare=False, repr=False)


class LeaseStore(Protocol):
    """The Lease objects of one set, in one namespace."""

    def list(self) -> list[Lease]: ...

    def create(self, name: str, role: str, holder: str, count: int, ready: bool = True) -> Lease:
        """Create it held by ``holder``; ``LeaseConflict`` if it exists."""
        ...

    def update(self, lease: Lease, holder: str) -> Lease:
        """Write ``holder`` (renewed now), and the lease's ``count`` and ``ready``, over the
        version read; ``LeaseConflict`` if it is not the current one."""
        ...

    def delete(self, lease: Lease) -> None: ...


def shard_of(namespace: str, name: str, count: int) -> int:
    """The shard of the object ``namespace/name`` among ``count``: fixed for its name, the
    same on every replica and in every release (SHA-256, not Python's salted ``hash``)."""
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


def _score(member: str, shard: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{member}#{shard}".encode()).digest()[:8], "big")


def assign(count: int, members: Iterable[str]) -> list[str]:
    """The wanted holder of each of ``count`` shards among ``members``: each shard goes to the
    member that ranks it highest (rendezvous hashing) among those holding fewer than their
    fair share, ceil(count / members). Every replica that sees the same members computes the
    same list; one member more or less moves about count / members shards."""
    ranked = sorted(set(members))
    if not ranked:
        return []
    cap = math.ceil(count / len(ranked))
    load: Counter[str] = Counter()
    wanted = []
    for shard in range(count):
        order = sorted(ranked, key=lambda m: _score(m, shard), reverse=True)
        pick = next(m for m in order if load[m] < cap)
        load[pick] += 1
        wanted.append(pick)
    return wanted


def run_share(limit: int, held: int, count: int) -> int:
    """This replica's share of the controller-wide limit on runs in flight: in proportion to
    the shards it holds, rounded, at least one while it holds any (so with more replicas than
    the limit allows runs, each still runs one: the sum is then the number of replicas)."""
    if held <= 0:
        return 0
    return max(1, round(limit * held / count))


@dataclass(frozen=True, slots=True)
class Change:
    """What one round changed: shards now held, shards given up or lost."""

    gained: frozenset[int] = frozenset()
    lost: frozenset[int] = frozenset()


class Shards:
    """This replica's shards: held, renewed, taken over and given up, one round at a time."""

    def __init__(
        self,
        store: LeaseStore,
        *,
        identity: str,
        set_name: str,
        count: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        duration: float = LEASE_SECONDS,
        renew_deadline: float = RENEW_DEADLINE_SECONDS,
    ) -> None:
        if count < 1:
            raise ValueError(f"shard count must be >= 1, not {count}")
        if not 0 < renew_deadline < duration:
            raise ValueError("the renew deadline must be shorter than the lease duration")
        self.store, self.identity, self.set_name, self.count = store, identity, set_name, count
        self.clock, self.sleep = clock, sleep
        self.duration, self.renew_deadline = duration, renew_deadline
        #: shard -> until when (our clock) this replica may act on it; replaced, never changed
        self._held: Mapping[int, float] = {}
        #: what the last ``step`` reported as held (its ``Change`` is against this)
        self._reported: frozenset[int] = frozenset()
        #: shards given up -> when: released (holder emptied) once the margin has passed
        self._releasing: dict[int, float] = {}
        #: lease name -> (version, when this replica first saw that version, after the list)
        self._seen: dict[str, tuple[str, float]] = {}
        #: the version of the count's lease this replica has waited out (``_gate``)
        self._trusted_epoch = ""
        self.rounds = 0
        #: why this replica holds nothing now (waiting, or another shard count is alive)
        self.refused: str = ""

    # -- what the handlers ask ------------------------------------------------------------
    def owns(self, namespace: str, name: str) -> bool:
        """Whether this replica may act on the object ``namespace/name`` now."""
        until = self._held.get(shard_of(namespace, name, self.count))
        return until is not None and self.clock() < until

    def held(self) -> frozenset[int]:
        now = self.clock()
        return frozenset(s for s, until in self._held.items() if now < until)

    # -- names ------------------------------------------------------------------------------
    def shard_lease(self, shard: int) -> str:
        return f"{self.set_name}-shard-{shard}"

    def member_lease(self, member: str | None = None) -> str:
        return f"{self.set_name}-member-{member or self.identity}"

    def epoch_lease(self) -> str:
        return f"{self.set_name}-count"

    # -- one round --------------------------------------------------------------------------
    def step(self) -> Change:
        """Renew what is held, take what is wanted and free, give up what another member is
        wanted for; what changed since the last step, lapses included. A failure of the API
        server ends the round (a single lease's failure, that lease's part of it): what is
        held stays held until its deadline."""
        sent = self.clock()
        try:
            self._round(sent)
        except Exception as exc:  # the API server or the network: try again next round
            log.warning("shard leases: round failed (%s: %s)", type(exc).__name__, exc)
        finally:
            self.rounds += 1
        after = self.held()
        change = Change(after - self._reported, self._reported - after)
        self._reported = after
        return change

    def _round(self, sent: float) -> None:
        leases = {lease.name: lease for lease in self.store.list()}
        listed = self.clock()  # a version is dated when it was seen, not when it was asked for
        for name, lease in leases.items():
            if self._seen.get(name, ("", 0.0))[0] != lease.version:
                self._seen[name] = (lease.version, listed)
        for name in set(self._seen) - set(leases):
            del self._seen[name]
        self._release(leases, listed)
        if self.rounds == 0:
            self._keep_member(leases, ready=False)
            self.refused = "joining: the others see this member from their next round"
            return
        try:
            self.refused = self._gate(leases, listed)
        except Exception as exc:  # the count's Lease could not be written: take nothing
            self.refused = f"the shard count's Lease: {type(exc).__name__}: {exc}"
        self._keep_member(leases, ready=not self.refused)
        self._sweep_members(leases, listed)
        if self.refused:
            self._give_up(set(self._held))
            return
        members = {self.identity} | {  # members that take shards, of this count, alive
            lease.holder
            for lease in leases.values()
            if lease.role == MEMBER
            and lease.holder
            and lease.ready
            and lease.count == self.count
            and not self._expired(lease, listed)
        }
        wanted = assign(self.count, members)
        for shard, member in enumerate(wanted):
            if member != self.identity:
                if shard in self._held:
                    self._give_up({shard})
                continue
            if shard in self._releasing:
                continue
            name = self.shard_lease(shard)
            try:
                until = self._take(name, leases.get(name), listed)
            except Exception as exc:  # this lease's request failed: the others go on
                log.warning("shard lease %s: %s: %s", name, type(exc).__name__, exc)
                continue
            if until is not None:  # acted on from now, not from the end of the round
                self._held = {**self._held, shard: until}
            elif shard in self._held:  # taken from under us: never act on it past this line
                self._held = {s: u for s, u in self._held.items() if s != shard}

    def _gate(self, leases: Mapping[str, Lease], now: float) -> str:
        """Why this replica may not take shards now ("" when it may). The count's Lease says
        how many shards the tables are split into; a replica of another count waits until no
        replica of that count is alive, then switches it. After the count's Lease is made or
        switched, or when a replica first sees it, it waits a lease duration: a replica of
        the old count whose renewals were failing may act until its deadline, and no shard
        Lease of the new count conflicts with its renewals."""
        epoch = leases.get(self.epoch_lease())
        if epoch is None:
            others = self._alive_of_another_count(leases, now)
            if others:  # the record was deleted under live replicas of another count
                return f"no shard count recorded, and replicas of another are alive ({others})"
            with suppress(LeaseConflict):
                self.store.create(self.epoch_lease(), EPOCH, "", self.count)
            return f"shard count {self.count} recorded: waiting a lease duration"
        if epoch.count != self.count:
            alive = [
                lease.holder
                for lease in leases.values()
                if lease.role in (SHARD, MEMBER)
                and lease.holder
                and lease.count == epoch.count
                and not self._expired(lease, now)
            ]
            if alive:
                who = ", ".join(sorted(set(alive)))
                return (
                    f"replicas of shard count {epoch.count} are alive ({who}); this one splits "
                    f"the tables into {self.count} and waits until they are gone"
                )
            with suppress(LeaseConflict):
                self.store.update(replace(epoch, count=self.count), "")
                log.warning("shard count switched from %d to %d", epoch.count, self.count)
            return f"shard count switched to {self.count}: waiting a lease duration"
        if self._trusted_epoch != epoch.version:
            seen = self._seen.get(epoch.name)
            if seen is None or now - seen[1] < self.duration:
                return f"waiting a lease duration under shard count {self.count}"
            self._trusted_epoch = epoch.version
        return ""

    def _alive_of_another_count(self, leases: Mapping[str, Lease], now: float) -> str:
        """Replicas of another count that act (hold a shard, or are ready members)."""
        alive = {
            lease.holder
            for lease in leases.values()
            if (lease.role == SHARD or (lease.role == MEMBER and lease.ready))
            and lease.holder
            and lease.count != self.count
            and not self._expired(lease, now)
        }
        return ", ".join(sorted(alive))

    def _take(self, name: str, lease: Lease | None, listed: float) -> float | None:
        """Create, renew or take over the lease; until when it may be acted on (from the
        moment this request was sent), or None."""
        sent = self.clock()
        try:
            if lease is None:
                self.store.create(name, SHARD, self.identity, self.count)
            elif lease.holder == self.identity:
                self.store.update(replace(lease, count=self.count), self.identity)
            elif not lease.holder or self._expired(lease, listed):
                self.store.update(replace(lease, count=self.count), self.identity)
                log.info("shard lease %s taken over from %r", name, lease.holder or "nobody")
            else:
                return None  # its holder has not released it yet
        except LeaseConflict:
            return None
        return sent + self.renew_deadline

    def _give_up(self, shards: set[int]) -> None:
        """Stop acting on ``shards`` now; their leases are released once the margin has
        passed (``_release``)."""
        if not shards:
            return
        now = self.clock()
        self._held = {s: u for s, u in self._held.items() if s not in shards}
        for shard in shards:
            self._releasing.setdefault(shard, now)

    def _release(self, leases: Mapping[str, Lease], now: float, *, all_: bool = False) -> None:
        """Release the leases of shards given up at least the margin ago (``all_``: every
        one, the caller has waited)."""
        margin = self.duration - self.renew_deadline
        for shard, since in sorted(self._releasing.items()):
            if not all_ and now - since < margin:
                continue
            del self._releasing[shard]
            lease = leases.get(self.shard_lease(shard))
            if lease is not None and lease.holder == self.identity:
                try:
                    self.store.update(lease, "")
                except LeaseConflict:
                    pass
                except Exception as exc:  # left to expire
                    log.warning("shard lease %s not released: %s", lease.name, exc)

    def _keep_member(self, leases: Mapping[str, Lease], *, ready: bool) -> None:
        mine = leases.get(self.member_lease())
        try:
            if mine is None:
                self.store.create(self.member_lease(), MEMBER, self.identity, self.count, ready)
            else:
                self.store.update(replace(mine, count=self.count, ready=ready), self.identity)
        except LeaseConflict:
            pass
        except Exception as exc:  # the shards' renewals go on
            log.warning("member lease: %s: %s", type(exc).__name__, exc)

    def _sweep_members(self, leases: Mapping[str, Lease], now: float) -> None:
        """Delete member leases of replicas long dead (a pod replaced has a new name)."""
        for lease in leases.values():
            seen = self._seen.get(lease.name)
            stale = seen is not None and now - seen[1] > STALE_MEMBER_DURATIONS * self.duration
            if lease.role == MEMBER and lease.holder != self.identity and stale:
                try:
                    self.store.delete(lease)
                except LeaseConflict:
                    pass
                except Exception as exc:  # tried again next round
                    log.warning("stale member lease %s: %s", lease.name, exc)

    def _expired(self, lease: Lease, now: float) -> bool:
        seen = self._seen.get(lease.name)
        return seen is not None and seen[0] == lease.version and now - seen[1] > self.duration

    def close(self) -> None:
        """Stop acting on every shard, wait the margin a write already sent may take, and
        release the leases (a replica stopping cleanly): the others take its shards at their
        next round instead of after a lease duration."""
        self._give_up(set(self._held))
        margin = self.duration - self.renew_deadline
        if self._releasing:  # a write may still be on its way: wait it out, then release
            self.sleep(max(0.0, min(self._releasing.values()) + margin - self.clock()))
        try:
            leases = {lease.name: lease for lease in self.store.list()}
            self._release(leases, self.clock(), all_=True)
            mine = leases.get(self.member_lease())
            if mine is not None:
                self.store.delete(mine)
        except Exception as exc:  # stopping: the leases expire by themselves
            log.warning("shard leases not released (%s: %s)", type(exc).__name__, exc)


class ShardKeeper:
    """Runs ``Shards.step`` every ``period`` seconds (from the start of one round to the
    start of the next) in a thread, handing each change to ``on_change`` (the controller
    wakes the tables of shards gained, forgets those lost)."""

    def __init__(
        self, shards: Shards, on_change: Callable[[Change], None], period: float = ROUND_SECONDS
    ) -> None:
        self.shards, self.on_change, self.period = shards, on_change, period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="shard-leases", daemon=True)

    def start(self) -> ShardKeeper:
        self._thread.start()
        return self

    def _run(self) -> None:
        said = ""
        while not self._stop.is_set():
            began = time.monotonic()
            change = self.shards.step()
            if self.shards.refused != said and self.shards.rounds > 1:
                said = self.shards.refused
                if said:
                    log.warning("shards: none taken: %s", said)
            if change.gained or change.lost:
                log.info(
                    "shards held: %s (gained %s, lost %s)",
                    sorted(self.shards.held()), sorted(change.gained), sorted(change.lost),
                )  # fmt: skip
                try:
                    self.on_change(change)
                except Exception:
                    log.exception("acting on a change of shards failed")
            self._stop.wait(max(0.0, began + self.period - time.monotonic()))

    def close(self, timeout: float = 10.0) -> None:
        """Stop the rounds; release the leases unless a round is still running (then they
        are left to expire: releasing beside a round could take them again)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("shard leases left to expire: a round did not end in %.0f s", timeout)
            return
        self.shards.close()


class KubeLeases:
    """``LeaseStore`` on the API server (coordination.k8s.io/v1 Leases in ``namespace``)."""

    def __init__(self, api_client: Any, namespace: str, set_name: str, duration: float) -> None:
        from kubernetes import client

        self.api = client.CoordinationV1Api(api_client)
        self.namespace, self.set_name, self.duration = namespace, set_name, duration

    def list(self) -> list[Lease]:
        found = self.api.list_namespaced_lease(
            self.namespace,
            label_selector=f"{SET_LABEL}={self.set_name}",
            _request_timeout=REQUEST_SECONDS,
        )
        return [_lease(item) for item in found.items]

    def create(self, name: str, role: str, holder: str, count: int, ready: bool = True) -> Lease:
        now = _micro(datetime.now(UTC))
        body: Any = {  # a dict: the client's V1Lease would write its times without microseconds
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": name,
                "labels": {SET_LABEL: self.set_name, ROLE_LABEL: role},
                "annotations": {COUNT_ANNOTATION: str(count), READY_ANNOTATION: str(ready).lower()},
            },
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": math.ceil(self.duration),
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        }
        with _conflicts(missing=False):  # a 404 here is the namespace's: not a conflict
            return _lease(
                self.api.create_namespaced_lease(
                    self.namespace, body, _request_timeout=REQUEST_SECONDS
                )
            )

    def update(self, lease: Lease, holder: str) -> Lease:
        raw = lease.raw
        now = _micro(datetime.now(UTC))
        spec = raw.spec
        if spec.holder_identity != holder:
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
            spec.acquire_time = now
        elif isinstance(spec.acquire_time, datetime):
            spec.acquire_time = _micro(spec.acquire_time)
        spec.holder_identity = holder
        spec.renew_time = now
        spec.lease_duration_seconds = math.ceil(self.duration)
        raw.metadata.annotations = dict(raw.metadata.annotations or {}) | {
            COUNT_ANNOTATION: str(lease.count),
            READY_ANNOTATION: str(lease.ready).lower(),
        }
        with _conflicts():
            return _lease(
                self.api.replace_namespaced_lease(
                    lease.name, self.namespace, raw, _request_timeout=REQUEST_SECONDS
                )
            )

    def delete(self, lease: Lease) -> None:
        from kubernetes import client

        with _conflicts():
            self.api.delete_namespaced_lease(
                lease.name,
                self.namespace,
                body=client.V1DeleteOptions(
                    preconditions=client.V1Preconditions(resource_version=lease.version)
                ),
                _request_timeout=REQUEST_SECONDS,
            )


def _lease(item: Any) -> Lease:
    meta, spec = item.metadata, item.spec
    labels, notes = meta.labels or {}, meta.annotations or {}
    try:
        count = int(notes.get(COUNT_ANNOTATION, "0"))
    except ValueError:
        count = -1  # not a count this release wrote: never ours
    return Lease(
        name=str(meta.name),
        role=str(labels.get(ROLE_LABEL, "")),
        holder=str(spec.holder_identity or ""),
        version=str(meta.resource_version),
        count=count,
        ready=notes.get(READY_ANNOTATION, "true") == "true",
        raw=item,
    )


@contextmanager
def _conflicts(*, missing: bool = True) -> Iterator[None]:
    """409 (exists, or a newer version) and, with ``missing``, 404 (deleted since read) are
    ``LeaseConflict``; the rest (the network, 5xx, 403) is the caller's failure as it is."""
    from kubernetes.client.exceptions import ApiException

    try:
        yield
    except ApiException as exc:
        if exc.status == 409 or (missing and exc.status == 404):
            raise LeaseConflict(str(exc.reason)) from exc
        raise


def _micro(moment: datetime) -> str:
    """A Lease's MicroTime as the API server parses it (always six fraction digits)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


__all__ = [
    "Change",
    "KubeLeases",
    "Lease",
    "LeaseConflict",
    "LeaseStore",
    "ShardKeeper",
    "Shards",
    "assign",
    "run_share",
    "shard_of",
]
