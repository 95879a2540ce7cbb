"""The gateway JVM's stderr: held back while a session starts, summed up when the start fails.

PySpark launches its gateway JVM (``spark-submit``) on this process's stderr. A start that
failed printed what the JVM said first: log4j's ``ERROR SparkContext`` with a Java stack trace
(28 lines for ``local[0]``, 300 for an unreachable ``k8s://`` master), or the launcher script's
complaint about ``java``, before the command's one ``error:`` line; and when the JVM died before
it was up, PySpark said only "Java gateway process exited before sending its port number", so
the reason was *only* in that noise.

Here the gateway is launched by ``launch_gateway`` (PySpark's own, with ``popen_kwargs``, its
hook for capturing the JVM's output) with its stderr on a pipe this process reads. A thread
forwards every line to the stderr the JVM would have had, except while a session starts
(``hold``): a start that succeeds releases the held lines (Spark's start-up warnings appear as
before, then everything else as it comes), one that fails drops them, and ``start_reason`` names
the line that says why. Under ``spark-submit`` (the job on Kubernetes) the JVM is our parent and
its output is not ours to hold: nothing changes there.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from txntable.maintenance.errors import SparkJvmExitedError
from txntable.maintenance.spark_support import spark_error_line

#: start-up lines kept while a session starts (the newest; a failed start needs only its reason)
HELD_LINES = 5000
#: the attribute of PySpark's gateway object that holds its ``GatewayOutput``
_ATTR = "_txntable_stderr"


class GatewayOutput:
    """Forwards the gateway JVM's stderr (``read_fd``) to ``write_fd``, holds it back while a
    session starts, or drops it after a start failed."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._lock = threading.Lock()
        self._held: collections.deque[bytes] = collections.deque(maxlen=HELD_LINES)
        self._mode = "forward"  # or "hold", "drop"
        self._thread = threading.Thread(target=self._pump, name="spark-gateway-stderr", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        with open(self._read_fd, "rb", buffering=0) as stream:
            for line in _lines(stream):
                with self._lock:
                    if self._mode == "hold":
                        self._held.append(line)
                    elif self._mode == "forward":
                        with contextlib.suppress(OSError):  # stderr gone: never block the JVM
                            os.write(self._write_fd, line)
        with contextlib.suppress(OSError):
            os.close(self._write_fd)

    def hold(self) -> None:
        """Hold the lines back from now on (what is held already stays)."""
        with self._lock:
            if self._mode != "hold":
                self._held.clear()
                self._mode = "hold"

    def release(self) -> None:
        """Write the held lines, then forward every line as it comes."""
        with self._lock:
            with contextlib.suppress(OSError):
                os.write(self._write_fd, b"".join(self._held))
            self._held.clear()
            self._mode = "forward"

    def drop(self) -> list[str]:
        """The held lines (decoded); what the JVM says next is dropped too (the end of the
        failed start), until the next ``hold``."""
        with self._lock:
            held = [line.decode("utf-8", "replace").rstrip("\n") for line in self._held]
            self._held.clear()
            self._mode = "drop"
        return held

    def settle(self, seconds: float = 2.0) -> None:
        """Wait up to ``seconds`` for the lines of a JVM that exited to be read."""
        self._thread.join(seconds)


def _lines(stream: Any) -> Iterator[bytes]:
    """The lines of ``stream`` as they come (a partial last line too)."""
    pending = b""
    while chunk := stream.read(65536):
        pending += chunk
        *whole, pending = pending.split(b"\n")
        for line in whole:
            yield line + b"\n"
    if pending:
        yield pending + b"\n"


def launch(options: Mapping[str, str]) -> GatewayOutput | None:
    """The ``GatewayOutput`` of PySpark's gateway JVM, holding its lines back: launched here
    with ``options`` (what PySpark would pass it: the session's master, name and settings)
    when PySpark has none yet; None when PySpark's gateway was not launched here, or when it
    runs under ``spark-submit``. A JVM that exits before it is up raises
    ``SparkJvmExitedError`` with what it said."""
    from pyspark import SparkConf
    from pyspark.core.context import SparkContext
    from pyspark.java_gateway import launch_gateway

    existing = SparkContext._gateway
    if existing is not None:
        found = getattr(existing, _ATTR, None)
        if isinstance(found, GatewayOutput):
            found.hold()
            return found
        return None
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return None
    conf = SparkConf()
    for key, value in options.items():
        conf.set(key, value)
    read_fd, write_fd = os.pipe()
    output = GatewayOutput(read_fd, os.dup(2))
    output.hold()
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": write_fd})  # type: ignore[no-untyped-call]
    except Exception as exc:
        os.close(write_fd)
        output.settle()  # the JVM is gone: read all it said
        raise SparkJvmExitedError(exc, output.drop()) from exc
    except BaseException:
        os.close(write_fd)
        output.drop()
        raise
    os.close(write_fd)  # the JVM has its own copy: the pipe ends when it does
    setattr(gateway, _ATTR, output)
    SparkContext._ensure_initialized(gateway=gateway)
    return output


#: what a JVM or its launcher prints on the way that says nothing of why a start failed
_NOISE = re.compile(
    r"^\s*$|^\s+at |^\s*\.\.\. \d+ more|^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN) "
    r"|^WARNING: |^Using Spark's default log4j profile|^Setting default log level"
    r"|^To adjust logging level"
)
#: the launcher scripts' prefix of a shell error (``.../bin/spark-class: line 71: ``)
_SCRIPT = re.compile(
    r"^\S*/(spark-class|spark-submit|load-spark-env\.sh|find-spark-home): (line \d+: )?"
)
#: a JVM's uncaught exception as ``java`` prints it
_UNCAUGHT = re.compile(r'^Exception in thread "[^"]*" ')
#: the deepest cause of a Java exception, as its stack trace prints it
_CAUSE = re.compile(r"^\s*Caused by: ([\w$.]+): (.+)$", re.MULTILINE)


def start_reason(exc: BaseException) -> str:
    """One line saying why a session could not start: what the JVM said when it exited
    before it was up, else the exception's own reason with its deepest cause."""
    if isinstance(exc, SparkJvmExitedError):
        said = _gateway_said(exc.lines)
        return f"the Spark JVM exited: {said}" if said else spark_error_line(exc.cause)
    line = spark_error_line(exc)
    causes = _CAUSE.findall(str(exc))
    if causes:
        name, message = causes[-1]
        cause = f"{name.rsplit('.', 1)[-1]}: {message.strip()}"
        if cause not in line:
            line = f"{line} (caused by {cause})"
    return line[:1000]


def _gateway_said(lines: list[str]) -> str | None:
    """The line of a JVM that exited at start-up that says why: its uncaught exception, else
    the first line that is not log noise (the launcher's ``JAVA_HOME is not set``, ``java: No
    such file or directory``)."""
    meaningful = [ln.strip() for ln in lines if not _NOISE.search(ln)]
    for line in meaningful:
        if _UNCAUGHT.match(line):
            return spark_error_line(Exception(_UNCAUGHT.sub("", line)))
    for line in meaningful:
        return _SCRIPT.sub("", line)[:1000]
    return None


__all__ = ["GatewayOutput", "launch", "start_reason"]
