"""The operator's one configuration object, read from ``TXNTABLE_*`` environment variables.

Every knob of the controller lives here, is validated once at start-up (a bad value stops the
process with a message naming the variable, instead of failing later in a handler), and is
documented in docs/configuration.md. The Helm chart maps its values 1:1 onto these variables.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, get_type_hints

from txntable.api.common import Backend

PREFIX = "TXNTABLE_"

BACKENDS = tuple(b.config_name for b in Backend)  # as TXNTABLE_DEFAULT_BACKEND spells them
LOG_FORMATS = ("json", "text")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
#: The shortest time a finished run is kept (TXNTABLE_RUN_TTL_SECONDS)
MIN_RUN_TTL_SECONDS = 30
#: The most shards (TXNTABLE_SHARDS): one Lease each, renewed every few seconds
MAX_SHARDS = 256


class ConfigError(ValueError):
    """An environment variable holds a value the operator cannot use."""


@dataclass(frozen=True, slots=True)
class Config:
    """Controller settings. Field ``x_y`` is read from ``TXNTABLE_X_Y``."""

    #: Namespaces to watch, comma-separated; empty = all namespaces (cluster-wide install).
    watch_namespaces: str = ""
    #: Seconds between the Kopf timer's firings for each TxnTable and policy: the timer
    #: observes a table whose observation is due and was not made (each table's daemon
    #: observes it every spec.observeInterval), and refreshes policies' statuses; also the
    #: longest a listing of runs is reused.
    observe_interval_seconds: float = 30.0
    #: Seconds between existence checks of a local table's next commit file (one stat, no
    #: Kubernetes call); a commit found wakes the table's observation. 0: local tables are polled.
    event_probe_interval_seconds: float = 1.0
    #: Quiet seconds after a commit event before the table is observed, so a burst of commits
    #: is one observation (a steady stream is observed at least every 10 debounce periods).
    event_debounce_seconds: float = 1.0
    #: Most requests Kopf's watches and patches have in flight to the API server at once
    #: (waiting for their response headers); the API server's fairness queues answer a
    #: burst beyond them with 429s, as when the controller first meets many new objects.
    api_requests_in_flight: int = 16
    #: Global limit on maintenance runs in flight, across all tables.
    max_concurrent_runs: int = 4
    #: Default launch backend when a policy does not name one.
    default_backend: str = "sparkapplication"
    #: Container image for Spark runs (driver and executors).
    spark_image: str = "ghcr.io/txntable/txntable-spark:0.1.0"
    #: ServiceAccount of Spark drivers (the chart creates it, apart from the controller's).
    spark_service_account: str = "txntable-spark"
    #: Checkpoints of logs with at most this many live files run inline in the controller.
    inline_checkpoint_max_files: int = 200_000
    #: Seconds before a launch refused for want of permission (HTTP 401/403, e.g. the
    #: controller's RBAC lost a verb) is tried again; doubled after each further refusal, up
    #: to 30 times this. Other refusals wait for a change of the policy or the table.
    permission_retry_seconds: float = 60.0
    #: Seconds a finished run (its Job or SparkApplication) and its pods are kept before
    #: Kubernetes deletes them (ttlSecondsAfterFinished, timeToLiveSeconds). Keep it longer
    #: than the tables' observeInterval: the run is recorded when it is seen finished.
    run_ttl_seconds: int = 86_400
    #: Port of the Prometheus /metrics endpoint and of /readyz (the readiness probe).
    metrics_port: int = 8080
    #: Port of Kopf's liveness endpoint (/healthz).
    health_port: int = 8081
    #: Optional Pushgateway URL that Spark drivers push their engine metrics to.
    pushgateway_url: str = ""
    #: Log format: json in the cluster, text for people.
    log_format: str = "json"
    #: Log level.
    log_level: str = "INFO"
    #: Kopf peering name for high availability (two replicas never run the same handler);
    #: with shards, the name of the controller's set of Leases.
    peering_name: str = "txntable"
    #: Shards the tables are split into among the controller's replicas, each held through a
    #: Lease in the controller's namespace (docs/adr/0011-shards.md). 0: no shards, one
    #: replica serves every table (Kopf peering keeps a second one paused).
    shards: int = 0

    def __post_init__(self) -> None:
        if self.observe_interval_seconds <= 0:
            raise ConfigError(f"{PREFIX}OBSERVE_INTERVAL_SECONDS must be > 0")
        if self.event_probe_interval_seconds < 0:
            raise ConfigError(f"{PREFIX}EVENT_PROBE_INTERVAL_SECONDS must be >= 0")
        if self.event_debounce_seconds < 0:
            raise ConfigError(f"{PREFIX}EVENT_DEBOUNCE_SECONDS must be >= 0")
        if self.api_requests_in_flight < 1:
            raise ConfigError(f"{PREFIX}API_REQUESTS_IN_FLIGHT must be >= 1")
        if self.max_concurrent_runs < 1:
            raise ConfigError(f"{PREFIX}MAX_CONCURRENT_RUNS must be >= 1")
        if self.default_backend not in BACKENDS:
            raise ConfigError(f"{PREFIX}DEFAULT_BACKEND must be one of {', '.join(BACKENDS)}")
        if self.log_format not in LOG_FORMATS:
            raise ConfigError(f"{PREFIX}LOG_FORMAT must be one of {', '.join(LOG_FORMATS)}")
        if self.log_level not in LOG_LEVELS:
            raise ConfigError(f"{PREFIX}LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}")
        if self.permission_retry_seconds <= 0:
            raise ConfigError(f"{PREFIX}PERMISSION_RETRY_SECONDS must be > 0")
        if self.run_ttl_seconds < MIN_RUN_TTL_SECONDS:
            raise ConfigError(
                f"{PREFIX}RUN_TTL_SECONDS must be >= {MIN_RUN_TTL_SECONDS}: a run deleted "
                "before the controller saw it finish would end unrecorded"
            )
        for name in ("metrics_port", "health_port"):
            port = getattr(self, name)
            if not 1 <= port <= 65535:
                raise ConfigError(f"{PREFIX}{name.upper()} must be a port number (1-65535)")
        if not 0 <= self.shards <= MAX_SHARDS:
            raise ConfigError(f"{PREFIX}SHARDS must be between 0 and {MAX_SHARDS}")
        if self.inline_checkpoint_max_files < 0:
            raise ConfigError(f"{PREFIX}INLINE_CHECKPOINT_MAX_FILES must be >= 0")

    @property
    def namespaces(self) -> list[str]:
        return [n.strip() for n in self.watch_namespaces.split(",") if n.strip()]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Config:
        """Read every field from ``TXNTABLE_<FIELD>``; unset variables keep their defaults."""
        env = os.environ if environ is None else environ
        hints = get_type_hints(cls)
        values: dict[str, Any] = {}
        for f in fields(cls):
            key = PREFIX + f.name.upper()
            if key not in env:
                continue
            raw = env[key]
            kind = hints[f.name]
            try:
                values[f.name] = kind(raw) if kind in (int, float) else raw
            except ValueError:
                raise ConfigError(f"{key}={raw!r} is not a valid {kind.__name__}") from None
        return cls(**values)

    @staticmethod
    def variables() -> list[tuple[str, str, Any]]:
        """(variable, type, default) of every setting, for docs and the chart's tests."""
        hints = get_type_hints(Config)
        return [
            (PREFIX + f.name.upper(), hints[f.name].__name__, f.default) for f in fields(Config)
        ]
