"""Driver programs that Spark (or a local process) runs: ``python -m txntable.jobs.<name>``.

Each parses its arguments, runs one piece of maintenance, and prints one JSON result line,
failures included (``jobs.outcome``). A job that refuses its input (exit status 2) prints
``error: ...`` on stderr and still its JSON line on stdout, with ``error`` and ``errorType``:
the controller reads why a run failed from that line on every backend (a Spark driver's stderr
is mostly log output), and ``errorType`` ``UnsupportedFeature`` tells it a table feature stopped
the step.
"""

from __future__ import annotations

#: ``errorType`` of a refusal because of a table feature this engine cannot handle.
UNSUPPORTED_FEATURE = "UnsupportedFeature"
#: ``errorType`` of any other refused input (not a table, a bad option, ...).
BAD_INPUT = "BadInput"
