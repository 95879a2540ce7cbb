"""Optional push of a run's engine metrics to a Prometheus Pushgateway.

A maintenance run lives minutes; Prometheus may never scrape it. Its result line already carries
an ``engineMetrics`` summary for the controller; when ``TXNTABLE_PUSHGATEWAY_URL`` is set the job
also pushes its whole registry there, grouped by run kind and table, so the engine's own metric
names (``txntable_commit_*``) reach Prometheus. Each push replaces the previous run's group (one
group per kind and table, never per run: the Pushgateway keeps groups forever). The group's
table goes into ``instance``, not ``table``: the engine metrics carry their own ``table`` label and
the Pushgateway refuses a grouping label that disagrees with a metric's. A failed push is logged
and never fails the run.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, push_to_gateway

from txntable.api.common import RunKind

log = logging.getLogger(__name__)

ENV_URL = "TXNTABLE_PUSHGATEWAY_URL"
JOB = "txntable-run"


def push_run_metrics(
    registry: CollectorRegistry,
    *,
    kind: RunKind,
    table: str,
    url: str | None = None,
    environ: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> bool:
    """Push ``registry`` when a Pushgateway is configured; True when pushed.

    ``url`` defaults to ``$TXNTABLE_PUSHGATEWAY_URL``; nothing happens when neither is set.
    ``table`` is the resource name (namespace/name), never a path.
    """
    env = os.environ if environ is None else environ
    target = url if url is not None else env.get(ENV_URL, "")
    if not target:
        return False
    try:
        push_to_gateway(
            target,
            job=JOB,
            registry=registry,
            grouping_key={"kind": kind, "instance": table},
            timeout=timeout,
        )
    except Exception as exc:  # the run's result must not depend on monitoring
        log.warning("could not push run metrics to %s: %s", target, exc)
        return False
    return True
