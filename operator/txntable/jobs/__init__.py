"""Driver programs that Spark (or a local process) runs: ``python -m txntable.jobs.<name>``.

Each parses its arguments, runs one piece of maintenance, and prints one JSON result line. A job
that refuses its input (exit status 2) prints ``error: ...`` on stderr and still one JSON line
on stdout, ``{"runId": ..., "error": ..., "errorType": ...}`` (``refusal``): the controller
reads why a run failed from that line on every backend (a Spark driver's stderr is mostly log
output), and ``errorType`` ``UnsupportedFeature`` tells it a table feature stopped the step.
"""

from __future__ import annotations

from typing import Any

#: ``errorType`` of a refusal because of a table feature this engine cannot handle.
UNSUPPORTED_FEATURE = "UnsupportedFeature"
#: ``errorType`` of any other refused input (not a table, a bad option, ...).
BAD_INPUT = "BadInput"


def refusal(exc: BaseException, run_id: str | None) -> dict[str, Any]:
    """The result line of a job that refused its input with ``exc``."""
    from txntable.engine.errors import UnsupportedFeatureError

    kind = UNSUPPORTED_FEATURE if isinstance(exc, UnsupportedFeatureError) else BAD_INPUT
    return {"runId": run_id, "error": str(exc), "errorType": kind}
