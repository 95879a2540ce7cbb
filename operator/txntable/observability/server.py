"""The controller's HTTP endpoints: ``/metrics`` for Prometheus, ``/healthz`` and ``/readyz``.

Served from a daemon thread so the Kopf event loop never blocks on a scrape. The metrics port and
the health port may differ (``TXNTABLE_METRICS_PORT``, ``TXNTABLE_HEALTH_PORT``); every server
answers all three paths, so one port is enough for a process that commits (a test, a job).
``/readyz`` asks a caller-given callable (e.g. "the operator has started"); ``/healthz`` only
says the process serves requests.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

log = logging.getLogger(__name__)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept") or "")
            self._reply(200, encoder(self.server.registry), content_type)
        elif path in ("/healthz", "/livez"):
            self._reply(200, b"ok\n")
        elif path == "/readyz":
            ready = self._ready()
            self._reply(200 if ready else 503, b"ready\n" if ready else b"not ready\n")
        else:
            self._reply(404, b"not found: try /metrics, /healthz or /readyz\n")

    def _ready(self) -> bool:
        try:
            return bool(self.server.ready())
        except Exception:
            log.exception("readiness check failed")
            return False

    def _reply(
        self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8"
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # scrapes are not news
        log.debug("%s " + format, self.address_string(), *args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    registry: CollectorRegistry
    ready: Callable[[], bool]


class ObservabilityServer:
    """One listening socket serving /metrics, /healthz and /readyz in a daemon thread."""

    def __init__(
        self,
        registry: CollectorRegistry,
        port: int,
        host: str = "0.0.0.0",
        ready: Callable[[], bool] | None = None,
    ) -> None:
        self._server = _Server((host, port), _Handler)
        self._server.registry = registry
        self._server.ready = ready or (lambda: True)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"txntable-http-{self.port}", daemon=True
        )

    @property
    def port(self) -> int:
        """The bound port (useful when 0 was asked for)."""
        return int(self._server.server_address[1])

    def start(self) -> ObservabilityServer:
        self._thread.start()
        log.info("serving /metrics, /healthz and /readyz on port %d", self.port)
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (also for a server never started)."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(5)
        self._server.server_close()


def start_servers(
    registry: CollectorRegistry,
    metrics_port: int,
    health_port: int | None = None,
    *,
    host: str = "0.0.0.0",
    ready: Callable[[], bool] | None = None,
) -> list[ObservabilityServer]:
    """Start the metrics server, and a second one on ``health_port`` when it differs."""
    servers = [ObservabilityServer(registry, metrics_port, host, ready).start()]
    if health_port is not None and health_port != metrics_port:
        servers.append(ObservabilityServer(registry, health_port, host, ready).start())
    return servers
