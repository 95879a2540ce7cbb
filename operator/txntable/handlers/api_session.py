"""Kopf's HTTP session to the API server, with a bound on the requests it has in flight.

Kopf's own session has no limit: it opens a connection per concurrent request. When the
controller starts on a thousand TxnTables that it has never handled, Kopf handles each object
at once (its finalizer, then its handlers' bookkeeping annotations), so a thousand patches
went out together. The API server's priority and fairness queues for one client hold far
fewer: measured on the real kube-apiserver at 1,000 tables (``make bench-scale``), 1,424 of
the requests were answered 429, and Kopf logged each retry at ERROR. Every connection it had
opened also kept a 256 KB TLS read buffer (asyncio's ``SSLProtocol``) in the connection pool:
80 MB of the controller's heap.

``bounded_session`` builds the session Kopf uses (``kopf.AiohttpSession``, from the login
handler) with the same server, TLS, headers and proxy as Kopf's own, and a client middleware
that lets at most ``in_flight`` requests wait for their response headers at once. A watch
holds its slot only until its headers arrive (the stream is read after), so long-lived
watches never starve the other requests. Kopf-free: it reads the connection info by duck
typing (``kopf.ConnectionInfo``'s methods), aiohttp is the only import.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import aiohttp


class ConnectionInfo(Protocol):
    """What the session needs of Kopf's ``ConnectionInfo``."""

    @property
    def proxy_url(self) -> str | None: ...

    @property
    def trust_env(self) -> bool: ...

    def as_ssl_context(self) -> Any: ...

    def as_http_headers(self) -> dict[str, str]: ...


class InFlightLimit:
    """A client middleware: at most ``limit`` requests between sending and response headers."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"in-flight limit must be >= 1, not {limit}")
        self.limit = limit
        self._slots = asyncio.Semaphore(limit)
        #: the most requests that were in flight at once (what tests and benchmarks read)
        self.most = 0
        self._now = 0

    async def __call__(
        self, request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
    ) -> aiohttp.ClientResponse:
        async with self._slots:
            self._now += 1
            self.most = max(self.most, self._now)
            try:
                return await handler(request)
            finally:
                self._now -= 1


def bounded_session(
    info: ConnectionInfo, in_flight: int, *, user_agent: str | None = None
) -> aiohttp.ClientSession:
    """An aiohttp session like Kopf's own for ``info``, with at most ``in_flight`` requests
    in flight (and ``user_agent``, else Kopf's). Call it in the operator's event loop (the
    session binds to the running loop)."""
    headers = info.as_http_headers()
    if user_agent:
        headers = headers | {"User-Agent": user_agent}
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, ssl=info.as_ssl_context()),
        headers=headers,
        proxy=info.proxy_url,
        trust_env=info.trust_env,
        middlewares=(InFlightLimit(in_flight),),
    )


__all__ = ["ConnectionInfo", "InFlightLimit", "bounded_session"]
