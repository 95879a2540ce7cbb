"""How every job ends: its exit status and its one JSON result line, failures included.

The controller learns what a run did from the last JSON line of its output
(``launch/run.last_json_line``; on Kubernetes the driver's log holds stdout and stderr together),
so a job prints exactly one such line whatever happens once its arguments are read (a bad flag is
``jobs.flags``' one usage line, exit 2). On failure it carries ``error``: one line saying why (a
Spark failure is reduced to the exception that caused it, never a JVM stack trace), and for a
refusal ``errorType`` (``error_type``: ``UnsupportedFeature`` lets the controller hold the
step); stderr ends with ``error: ...`` (the local launcher's message). Exit statuses:

* 0: the run finished;
* 1: it failed after work began (the result line says what was committed), or Spark could
  not start, or a Spark job failed;
* 2: refused: bad input (not a table, a bad option or policy, an unsupported feature, even one
  found only once Spark reconstructed the state, a master URL Spark cannot parse) or a store
  that could not be read before work began; nothing changed;
* 130, 143: interrupted by SIGINT or SIGTERM (``jobs.signals``); the job's Spark processes are
  stopped, and ``error`` is ``interrupted`` or ``terminated``.

Light on purpose: ``txntable --help`` imports the jobs' argument parsers (the maintenance
package, which loads pyarrow, is imported only when a job fails).
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any

from txntable import interrupts
from txntable.engine import EngineError
from txntable.jobs import BAD_INPUT, UNSUPPORTED_FEATURE, signals

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


def exit_status(exc: BaseException, *, started: bool = False) -> int:
    """2 for what a job refuses (our errors before work ``started``, a table feature this
    engine does not know whenever it shows, a master URL Spark refused), 1 for everything else:
    any other error once work started, Spark's failures, unexpected errors; 130/143 for an
    interrupt."""
    from txntable.engine import UnsupportedFeatureError
    from txntable.maintenance.errors import MaintenanceError, SparkJobError, SparkStartError

    if isinstance(exc, KeyboardInterrupt):
        return signals.exit_status(exc)
    if isinstance(exc, UnsupportedFeatureError):  # found late (after a replay) or early: refused
        return EXIT_BAD_INPUT
    if isinstance(exc, SparkStartError) and exc.bad_argument:  # no session: nothing changed
        return EXIT_BAD_INPUT
    if started or isinstance(exc, (SparkStartError, SparkJobError)):
        return EXIT_FAILED
    if isinstance(exc, (EngineError, MaintenanceError)):
        return EXIT_BAD_INPUT
    return EXIT_FAILED


def error_type(exc: BaseException) -> str:
    """The ``errorType`` of a refusal (exit 2): a table feature this engine cannot handle, or
    any other bad input."""
    from txntable.engine import UnsupportedFeatureError

    return UNSUPPORTED_FEATURE if isinstance(exc, UnsupportedFeatureError) else BAD_INPUT


def error_text(exc: BaseException) -> str:
    """One line for the result line: our errors' messages, a Spark failure's cause, what
    interrupted the job."""
    from txntable.maintenance.errors import MaintenanceError

    if isinstance(exc, KeyboardInterrupt):
        return signals.describe(exc)
    if isinstance(exc, (EngineError, MaintenanceError)):
        text = " ".join(str(exc).split())
        return text[:2000] if text else type(exc).__name__
    from txntable.maintenance.spark_support import spark_error_line  # pyarrow: only here

    return spark_error_line(exc)


def print_result(doc: dict[str, Any]) -> None:
    """The one JSON result line."""
    print(json.dumps(doc, separators=(",", ":"), default=str), flush=True)


def fail(doc: dict[str, Any], exc: BaseException, *, started: bool = False) -> int:
    """Print ``doc`` with the error (and for a refusal its ``errorType``) as the result line,
    and ``error: ...`` on stderr; the exit status to return (``exit_status``)."""
    from txntable.maintenance.errors import MaintenanceError

    exc = interrupts.interrupt_in(exc) or exc  # an interrupt a library turned into an error
    message = error_text(exc)
    status = exit_status(exc, started=started)
    line = {**doc, "error": message}
    if status == EXIT_BAD_INPUT:
        line["errorType"] = error_type(exc)
    print_result(line)
    if not isinstance(exc, (EngineError, MaintenanceError, KeyboardInterrupt)):
        traceback.print_exception(exc, file=sys.stderr)  # unexpected: keep the traceback
    print(f"error: {message}", file=sys.stderr, flush=True)
    return status
