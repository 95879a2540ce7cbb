"""Start the Spark session of a maintenance run, and stop everything it started when interrupted.

PySpark launches a gateway JVM (``spark-submit``) that ignores SIGINT and stops only when it sees
its stdin close, which it watches only once its gateway is up. So a Ctrl-C in the first seconds
of start-up left the JVM running forever, reparented to PID 1; a Ctrl-C during a job let the
``finally`` that stops the session talk to the JVM over a py4j connection the interrupt had cut
mid-call, which printed py4j tracebacks before the command's one ``error: interrupted`` line (and
PySpark's own SIGINT handler, which calls the JVM from inside the handler, added more and could
hang the command).

Here every process the start launches carries ``TXNTABLE_SPARK_OWNER=<pid>-<token>`` in its
environment (the JVMs, and the Python workers they fork), and ``abort`` stops all of them
through ``txntable.processes`` without a word to Spark, then makes PySpark forget its gateway.
``stop`` stops a session normally, or aborts when called while a ``KeyboardInterrupt`` (Ctrl-C,
or SIGTERM through ``jobs.signals``) propagates, so every ``finally`` that stops a session does
the right thing. A start that fails is one ``SparkStartError`` with Spark's reason on one line
(``spark_gateway.start_reason``, not a Java stack trace), flagged as a bad argument when Spark
could not parse the master URL, and what the JVM printed while it started is not shown
(``spark_gateway``: the reason is in that line); a ``spark://`` master that does not answer is
reported before Spark starts, not after its minute of retries.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from txntable import interrupts
from txntable.maintenance import spark_gateway
from txntable.maintenance.errors import SparkStartError
from txntable.processes import stop_marked

ENV_OWNER = "TXNTABLE_SPARK_OWNER"
_TOKEN = uuid.uuid4().hex[:12]
log = logging.getLogger(__name__)
#: how long a standalone master may take to accept a connection before it counts as unreachable
MASTER_CONNECT_TIMEOUT_S = 10.0


def owner_marker() -> str:
    """The value of ``ENV_OWNER`` this process gives the Spark processes it starts."""
    return f"{os.getpid()}-{_TOKEN}"


def start_session(master: str, app_name: str, conf: Mapping[str, str] | None = None) -> Any:
    """A SparkSession for maintenance work: UI off, few shuffle partitions, and Python workers
    on this interpreter in local mode (so they import the same txntable). Its processes carry
    this process's ``owner_marker``; a failed start raises ``SparkStartError`` (a ``spark://``
    master that does not answer at once, ``check_master_reachable``), an interrupted one stops
    what it launched before re-raising."""
    if master and "PYSPARK_GATEWAY_PORT" not in os.environ:
        check_master_reachable(master)
    from pyspark.sql import SparkSession

    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    options: dict[str, str] = {}
    # empty, or started by spark-submit (its gateway exists): the master spark-submit (or the
    # Spark Operator) configured wins; a default like local[2] must not override k8s://...
    if master and "PYSPARK_GATEWAY_PORT" not in os.environ:
        options["spark.master"] = master
    options |= {
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.python.worker.reuse": "true",
        "spark.ui.showConsoleProgress": "false",
        **(conf or {}),
    }
    builder = SparkSession.builder
    for key, value in options.items():
        builder = builder.config(key, value)
    previous = os.environ.get(ENV_OWNER)
    os.environ[ENV_OWNER] = owner_marker()  # the JVM copies this environment, its workers too
    on_sigint = _sigint_handler()
    _quiet_py4j_interrupts()
    output = None
    try:
        # the JVM's stderr is held back until the session is up (``spark_gateway``)
        output = spark_gateway.launch(options)
        session = builder.getOrCreate()
        if output is not None:
            output.release()
        # PySpark's SparkContext replaces the SIGINT handler with one that calls the JVM from
        # inside the handler (cancelAllJobs) while the interrupted main thread is in the middle
        # of a py4j call: py4j tracebacks, then a hang. Ctrl-C stays a plain KeyboardInterrupt
        # here, and ``stop`` ends the processes instead.
        _restore_sigint(on_sigint)
        return session
    except KeyboardInterrupt:
        if output is not None:
            output.drop()
        abort()
        raise
    except Exception as exc:
        if output is not None:
            output.drop()  # a Java stack trace: the reason is in the exception
        reason = spark_gateway.start_reason(exc)
        raise SparkStartError(
            f"Spark could not start (master {master!r}): {reason}",
            bad_argument="master url" in reason.lower(),
        ) from None
    finally:
        if previous is None:
            os.environ.pop(ENV_OWNER, None)
        else:
            os.environ[ENV_OWNER] = previous


def check_master_reachable(master: str, timeout: float = MASTER_CONNECT_TIMEOUT_S) -> None:
    """Fail at once, in one line, when no standalone master answers at a ``spark://`` URL.

    Spark itself retries the registration for a minute, gives up in a log line, and then fails
    with "Cannot call methods on a stopped SparkContext", which says nothing about the master
    (measured: 90 s). Other masters (``local``, ``k8s://``, ``yarn``) are left to Spark."""
    if not master.startswith("spark://"):
        return
    problems = []
    for address in master[len("spark://") :].split(","):  # high availability: any one will do
        host, sep, port = address.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise SparkStartError(
                f"bad Spark master URL {master!r}: expected spark://HOST:PORT", bad_argument=True
            )
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
            return
        except OSError as exc:
            problems.append(f"{address.strip()}: {exc.strerror or exc}")
    raise SparkStartError(f"cannot reach the Spark master {master} ({'; '.join(problems)})")


def _sigint_handler() -> Any:
    """The SIGINT handler now, when this is the main thread (only it can set one)."""
    if threading.current_thread() is threading.main_thread():
        return signal.getsignal(signal.SIGINT)
    return None


def _restore_sigint(handler: Any) -> None:
    if handler is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, handler)


#: how long a normal stop may take before the session's processes are stopped instead
STOP_SECONDS = 30.0


def stop(session: Any, timeout: float = STOP_SECONDS) -> None:
    """Stop a session this process started: by ``abort`` while an interrupt is being handled
    (called from a ``finally`` during Ctrl-C, where asking Spark over the cut py4j connection
    would only print tracebacks, or after one that py4j turned into another error:
    ``interrupts.pending``), else normally. A normal stop that takes longer than ``timeout``
    s is given up and the processes are stopped: ``SparkContext.stop`` waits for the tasks in
    flight, and a task whose Python worker never answers never ends."""
    if interrupts.pending() is not None:
        abort()
        return
    failed: list[BaseException] = []

    def stop_session() -> None:
        try:
            session.stop()
        except BaseException as exc:  # raised in the caller, below
            failed.append(exc)

    stopper = threading.Thread(target=stop_session, name="spark-session-stop", daemon=True)
    stopper.start()
    try:
        stopper.join(timeout)
    except KeyboardInterrupt:  # Ctrl-C while Spark stops: it is not waited for
        abort()
        raise
    if stopper.is_alive():
        log.warning("Spark did not stop within %g s; its processes are stopped instead", timeout)
        abort()
    elif failed:
        raise failed[0]


def abort() -> list[int]:
    """Stop every Spark process this process started (JVMs and Python workers), without a py4j
    call: after an interrupt the connection may be cut mid-call. The gateway JVM is told the way
    it listens for (its stdin closes, as when the driver exits: it stops Spark and deletes its
    temporary files); whatever carries this process's marker after that (a JVM still starting,
    its Python workers) is terminated, then killed. PySpark then forgets its gateway, so nothing
    talks to the dead JVM again (a later start launches a new one). Returns the pids found."""
    gateway = _gateway_process()
    if gateway is not None and gateway.stdin is not None and gateway.poll() is None:
        with contextlib.suppress(OSError, ValueError):
            gateway.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            gateway.wait(timeout=GATEWAY_EXIT_SECONDS)
    pids = stop_marked(ENV_OWNER, owner_marker(), grace_seconds=2.0)
    _forget_gateway()
    return pids


#: how long an aborted gateway JVM gets to stop Spark and exit after its stdin closed
GATEWAY_EXIT_SECONDS = 5.0


def _gateway_process() -> subprocess.Popen[bytes] | None:
    """The gateway JVM PySpark launched (``gateway.proc``), if one is up."""
    context = sys.modules.get("pyspark.core.context") or sys.modules.get("pyspark.context")
    gateway = getattr(getattr(context, "SparkContext", None), "_gateway", None)
    proc = getattr(gateway, "proc", None)
    return proc if isinstance(proc, subprocess.Popen) and proc.stdin is not None else None


class _DuringInterrupt(logging.Filter):
    """Drops py4j's log records made while it handles a ``KeyboardInterrupt``: py4j logs the
    interrupt of the call it was in, and then every failure of the cut connection, each with a
    traceback, before the command can say ``error: interrupted``."""

    def filter(self, record: logging.LogRecord) -> bool:
        if f"{os.sep}py4j{os.sep}" not in record.pathname:
            return True
        return interrupts.interrupt_in(sys.exc_info()[1]) is None


def _quiet_py4j_interrupts() -> None:
    """Install ``_DuringInterrupt`` on the loggers py4j logs to (once)."""
    for name in ("", "py4j", "py4j.java_gateway", "py4j.clientserver"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DuringInterrupt) for f in logger.filters):
            logger.addFilter(_DuringInterrupt())


def _forget_gateway() -> None:
    """Clear PySpark's class-level handles on the gateway and the session (private attributes
    of PySpark, set back to their initial values; only after their JVM is gone)."""
    context = sys.modules.get("pyspark.core.context") or sys.modules.get("pyspark.context")
    session = sys.modules.get("pyspark.sql.session")
    spark_context = getattr(context, "SparkContext", None)
    for attr in ("_gateway", "_jvm", "_active_spark_context"):
        if spark_context is not None and hasattr(spark_context, attr):
            setattr(spark_context, attr, None)
    spark_session = getattr(session, "SparkSession", None)
    for attr in ("_instantiatedSession", "_activeSession"):
        if spark_session is not None and hasattr(spark_session, attr):
            setattr(spark_session, attr, None)


__all__ = [
    "ENV_OWNER",
    "abort",
    "check_master_reachable",
    "owner_marker",
    "start_session",
    "stop",
]
