"""The controller's ``/metrics`` endpoint, served by prometheus_client's own HTTP server.

prometheus_client serves its registry from a daemon thread (a threading WSGI server), so the
Kopf event loop never blocks on a scrape, and it speaks the exposition formats and
content negotiation Prometheus expects. ``register_process_collectors`` adds the client's
default collectors (process CPU, memory, open files and start time; Python platform and GC) to
a registry, so the controller's own resource use is scraped with its metrics.

Liveness and readiness are *not* served here: a thread that answers while the Kopf loop is
stuck proves nothing. The probes go to Kopf's liveness endpoint on the health port, which runs
on the Kopf loop itself (``python -m txntable``, ``handlers.kopf_handlers`` probe handlers).
"""

from __future__ import annotations

import logging
import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
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


class MetricsServer:
    """``/metrics`` of one registry on one port, via ``prometheus_client.start_http_server``."""

    def __init__(self, registry: CollectorRegistry, port: int, host: str = "0.0.0.0") -> None:
        self.registry = registry
        self.host = host
        self._port = port
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port once started (useful when 0 was asked for), else the asked one."""
        return int(self._server.server_port) if self._server is not None else self._port

    def start(self) -> MetricsServer:
        """Bind and serve in a daemon thread (the socket is open when this returns)."""
        if self._server is None:
            self._server, self._thread = start_http_server(
                self._port, addr=self.host, registry=self.registry
            )
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


#: The earlier name; the server now answers /metrics only (probes go to Kopf).
ObservabilityServer = MetricsServer
