"""``python -m txntable``: run the controller (Kopf) with the configuration from the environment.

A bad ``TXNTABLE_*`` value stops the process here with a one-line message naming the variable.
"""

from __future__ import annotations

import sys


def main() -> int:
    from txntable.config import Config, ConfigError

    try:
        config = Config.from_env()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    import logging

    import kopf

    from txntable.handlers import kopf_handlers  # noqa: F401 - registers the handlers

    logging.basicConfig(
        level=config.log_level,
        format='{"level":"%(levelname)s","logger":"%(name)s","message":"%(message)s"}'
        if config.log_format == "json"
        else "%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # /healthz and /readyz are served by txntable.observability.server on the health port
    # (started by the startup handler), so Kopf's own liveness endpoint is not bound here.
    kopf.run(
        clusterwide=not config.namespaces,
        namespaces=config.namespaces,
        peering_name=config.peering_name,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
