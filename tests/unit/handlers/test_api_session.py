"""Kopf's session keeps at most N requests in flight, and a watch does not hold a slot
(handlers/api_session.py). Real HTTP: an aiohttp server on a local port that counts the
requests it is serving at once."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio
from aiohttp import web

from txntable.handlers.api_session import InFlightLimit, bounded_session


@dataclass
class _Info:
    """What the session reads of Kopf's ConnectionInfo."""

    proxy_url: str | None = None
    trust_env: bool = False

    def as_ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context()

    def as_http_headers(self) -> dict[str, str]:
        return {"Authorization": "Bearer token-1"}


class _Server:
    def __init__(self) -> None:
        self.now = 0
        self.most = 0
        self.headers: list[str] = []
        self.release = asyncio.Event()

    async def slow(self, request: web.Request) -> web.Response:
        self.headers.append(request.headers.get("Authorization", ""))
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            await asyncio.sleep(0.05)
        finally:
            self.now -= 1
        return web.json_response({"ok": True})

    async def watch(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)  # headers sent: the stream goes on until released
        await response.write(b'{"type": "ADDED"}\n')
        await self.release.wait()
        return response


@pytest_asyncio.fixture
async def server() -> AsyncIterator[tuple[_Server, str]]:
    state = _Server()
    app = web.Application()
    app.router.add_get("/slow", state.slow)
    app.router.add_get("/watch", state.watch)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield state, f"http://127.0.0.1:{port}"
    state.release.set()
    await runner.cleanup()


@pytest.mark.asyncio
async def test_no_more_than_the_limit_are_in_flight(server: tuple[_Server, str]) -> None:
    state, url = server
    session = bounded_session(_Info(), in_flight=4)
    try:

        async def get() -> int:
            async with session.get(f"{url}/slow") as resp:
                await resp.read()
                return resp.status

        statuses = await asyncio.gather(*(get() for _ in range(40)))
    finally:
        await session.close()
    assert statuses == [200] * 40
    assert state.most == 4  # the limit was reached and never passed
    assert state.headers == ["Bearer token-1"] * 40  # the credentials went with every request


@pytest.mark.asyncio
async def test_a_watch_gives_its_slot_back_once_its_headers_arrive(
    server: tuple[_Server, str],
) -> None:
    _, url = server
    session = bounded_session(_Info(), in_flight=1)
    try:
        watch = await session.get(f"{url}/watch")
        assert await watch.content.readline() == b'{"type": "ADDED"}\n'  # still streaming
        async with asyncio.timeout(10):  # with the one slot held, this would never finish
            async with session.get(f"{url}/slow") as resp:
                assert resp.status == 200
        watch.close()
    finally:
        await session.close()


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        InFlightLimit(0)
