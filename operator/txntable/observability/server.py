"""The controller's ``/metrics`` endpoint, served by prometheus_client's own HTTP server.

prometheus_client serves its registry from a daemon thread (a threading WSGI server), so the
Kopf event loop never blocks on a scrape, and it speaks the exposition formats and
content negotiation Prometheus expects. ``register_process_collectors`` adds the client's
default collectors (process CPU, memory, open files and start time; Python platform and GC) to
a registry, so the controller's own resource use is scraped with its metrics.

Liveness is *not* served here: a thread that answers while the Kopf loop is stuck proves
nothing, so the liveness probe goes to Kopf's liveness endpoint on the health port, which runs
on the Kopf loop itself (``python -m txntable``, ``handlers.kopf_startup`` probe handlers).
Readiness is: ``/readyz`` answers 200 or 503 with the JSON of the ``ready`` callback
(``handlers.readiness``: started, and Kopf not paused by peering), a state Kopf's endpoint
cannot report without also failing liveness.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    make_wsgi_app,
)

log = logging.getLogger(__name__)

__all__ = ["MetricsServer", "ObservabilityServer", "register_process_collectors"]


def register_process_collectors(registry: CollectorRegistry) -> CollectorRegistry:
    """Add prometheus_client's process, platform and GC collectors to ``registry`` (the ones
    its global registry has by default); a collector already there is left alone."""
    for collector in (ProcessCollector, PlatformCollector, GCCollector):
        try:
            collector(registry=registry)
        except ValueError:  # "Duplicated timeseries": registered before
            continue
    return registry


#: What ``/readyz`` asks: (ready, details as JSON).
ReadyCheck = Callable[[], tuple[bool, dict[str, Any]]]


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


class MetricsServer:
    """``/metrics`` of one registry on one port (prometheus_client's WSGI app, one thread per
    request), and ``/readyz`` when a ``ready`` check is given."""

    def __init__(
        self,
        registry: CollectorRegistry,
        port: int,
        host: str = "0.0.0.0",
        *,
        ready: ReadyCheck | None = None,
    ) -> None:
        self.registry = registry
        self.host = host
        self.ready = ready
        self._port = port
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def _app(self) -> Callable[[dict[str, Any], Any], Iterable[bytes]]:
        metrics = make_wsgi_app(self.registry)

        def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
            if environ.get("PATH_INFO") == "/readyz" and self.ready is not None:
                ok, details = self.ready()
                body = json.dumps(details).encode()
                status = "200 OK" if ok else "503 Service Unavailable"
                start_response(status, [("Content-Type", "application/json")])
                return [body]
            return metrics(environ, start_response)  # type: ignore[no-any-return]

        return app

    @property
    def port(self) -> int:
        """The bound port once started (useful when 0 was asked for), else the asked one."""
        return int(self._server.server_port) if self._server is not None else self._port

    def start(self) -> MetricsServer:
        """Bind and serve in a daemon thread (the socket is open when this returns)."""
        if self._server is None:
            kind = _Server6 if ":" in self.host else _Server
            server = make_server(self.host, self._port, self._app(), kind, handler_class=_Quiet)
            thread = threading.Thread(target=server.serve_forever, daemon=True)
            thread.start()
            self._server, self._thread = server, thread
            log.info("serving /metrics on port %d", self.port)
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (a no-op for a server never started)."""
        if self._server is None:
            return
        self._server.shutdown()
        if self._thread is not None:
            self._thread.join(5)
        self._server.server_close()
        self._server = self._thread = None


#: The earlier name.
ObservabilityServer = MetricsServer
