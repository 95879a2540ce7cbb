"""Opt-in gate of the e2e tier: these tests need a real Kubernetes cluster.

They run only with ``--e2e`` (when the root conftest defines it) or ``TXNTABLE_E2E=1``, against
the current kubectl context, with ``helm`` and ``kubectl`` on PATH and the images named by
``TXNTABLE_E2E_IMAGE`` / ``TXNTABLE_E2E_SPARK_IMAGE`` pullable by the cluster. Otherwise every
test here is skipped with this reason, visibly (``-ra``), never silently passed.
"""

from __future__ import annotations

import os

import pytest

REASON = (
    "e2e: needs a real Kubernetes cluster (kubectl context, helm, pushed images); "
    "opt in with --e2e or TXNTABLE_E2E=1"
)


def enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("--e2e", default=False)) or os.environ.get("TXNTABLE_E2E") == "1"


@pytest.fixture(autouse=True, scope="session")
def _require_opt_in(request: pytest.FixtureRequest) -> None:
    if not enabled(request.config):
        pytest.skip(REASON)
