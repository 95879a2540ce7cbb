"""The daemons' tick threads take a table observed before ahead of first observations, run
each tick in its caller's context, hand back results and errors, and stop when closed."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from txntable.handlers.tick_pool import AGAIN, FIRST, TickPool

WHO = contextvars.ContextVar("who", default="nobody")


def test_a_due_tick_overtakes_the_first_observations_queued_before_it() -> None:
    pool = TickPool(threads=1)
    gate = threading.Event()
    order: list[str] = []

    def tick(name: str) -> str:
        if name == "busy":
            gate.wait(10)
        order.append(name)
        return name

    async def main() -> list[str]:
        busy = asyncio.ensure_future(pool.run(AGAIN, tick, "busy"))  # holds the one thread
        await asyncio.sleep(0.05)
        firsts = [asyncio.ensure_future(pool.run(FIRST, tick, f"first-{i}")) for i in range(3)]
        await asyncio.sleep(0.01)
        again = asyncio.ensure_future(pool.run(AGAIN, tick, "again"))
        await asyncio.sleep(0.01)
        gate.set()
        return list(await asyncio.gather(busy, *firsts, again))

    results = asyncio.run(main())
    pool.close()
    assert results == ["busy", "first-0", "first-1", "first-2", "again"]
    assert order == ["busy", "again", "first-0", "first-1", "first-2"]


def test_a_tick_runs_in_its_callers_context_and_its_error_reaches_it() -> None:
    pool = TickPool(threads=2)

    def fail() -> None:
        raise ValueError(WHO.get())

    async def main() -> str:
        WHO.set("the daemon of t1")  # as Kopf sets its per-object context in a daemon's task
        seen = await pool.run(FIRST, WHO.get)
        with pytest.raises(ValueError, match="the daemon of t1"):
            await pool.run(AGAIN, fail)
        return seen

    assert asyncio.run(main()) == "the daemon of t1"
    pool.close()


def test_a_closed_pool_stops_its_threads_and_takes_no_more_ticks() -> None:
    pool = TickPool(threads=3)
    assert asyncio.run(pool.run(FIRST, lambda: 7)) == 7
    pool.close()
    assert not any(t.is_alive() for t in pool._workers)
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(pool.run(FIRST, lambda: 8))


def test_closing_cancels_the_queued_ticks_and_lets_the_running_one_end() -> None:
    pool = TickPool(threads=1)
    gate, ran = threading.Event(), []

    def tick(name: str) -> None:
        if name == "running":
            gate.wait(10)
        ran.append(name)

    async def main() -> list[object]:
        running = asyncio.ensure_future(pool.run(AGAIN, tick, "running"))
        await asyncio.sleep(0.05)
        queued = [asyncio.ensure_future(pool.run(FIRST, tick, f"q{i}")) for i in range(50)]
        await asyncio.sleep(0.01)
        closer = asyncio.get_running_loop().run_in_executor(None, pool.close)
        await asyncio.sleep(0.05)
        gate.set()
        await closer
        return list(await asyncio.gather(running, *queued, return_exceptions=True))

    results = asyncio.run(main())
    assert ran == ["running"] and results[0] is None
    assert all(isinstance(r, asyncio.CancelledError) for r in results[1:])
    assert not any(t.is_alive() for t in pool._workers)
