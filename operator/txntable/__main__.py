"""``python -m txntable``: run the controller (Kopf) with the configuration from the environment.

Logs go through Kopf's formatter (JSON by default); ``/healthz`` on the health port is Kopf's
liveness endpoint; ``/metrics`` on the metrics port is served by the startup handler.

A bad ``TXNTABLE_*`` value stops the process here with a one-line message naming the variable.
"""

from __future__ import annotations

import sys

#: Path of Kopf's liveness endpoint on the health port (the chart's probes use it).
HEALTH_PATH = "/healthz"


def liveness_endpoint(port: int) -> str:
    """The URL Kopf serves its liveness endpoint on (all interfaces: the kubelet probes it)."""
    return f"http://0.0.0.0:{port}{HEALTH_PATH}"


USAGE = """usage: python -m txntable

Runs the txntable controller (Kopf) against the cluster of the current kubeconfig or the pod's
service account, configured by TXNTABLE_* environment variables (docs/configuration.md). It
takes no arguments. The maintenance commands are the txntable command (txntable --help)."""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    if args:  # a command meant for the txntable CLI must not start a controller instead
        print(
            f"error: python -m txntable takes no arguments (got {' '.join(args)})", file=sys.stderr
        )
        print(USAGE, file=sys.stderr)
        return 2
    from txntable.config import Config, ConfigError

    try:
        config = Config.from_env()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    import kopf

    from txntable.handlers import kopf_handlers  # noqa: F401 - registers the handlers
    from txntable.handlers.logs import configure_logging

    configure_logging(config)
    # Kopf's liveness endpoint runs on the Kopf event loop, so a stuck loop fails the probe
    # (a side thread would answer regardless). It is served once the startup handler is done,
    # which makes it the readiness signal too; the probe handlers add what they check.
    # with shards, replicas split the tables through Leases (handlers.shards), and Kopf's
    # peering, which would pause every replica but one, is off
    kopf.run(
        clusterwide=not config.namespaces,
        namespaces=config.namespaces,
        peering_name=None if config.shards else config.peering_name,
        standalone=bool(config.shards),
        liveness_endpoint=liveness_endpoint(config.health_port),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
