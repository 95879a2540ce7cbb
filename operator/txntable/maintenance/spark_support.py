"""What every piece of maintenance that runs Spark tasks shares.

* Arrow tables cross Spark (task results, shuffles) as zstd-compressed Arrow IPC streams: exact
  Arrow types, no pandas (our images carry none, and ``mapInArrow`` needs it), and about half the
  bytes of plain IPC on random data for ~0.02 s per 100,000 rows.
* A failed Spark call raises a Py4J error whose text is the JVM's stack trace, often with the
  task's Python traceback inside it (twice: once for the stage failure, once as ``Caused by``).
  ``spark_error_line`` finds the one line a person needs: the Python exception that failed the
  task, else the first JVM exception message. Jobs put that line in their result line.
* Tasks reach the table as the driver does: ``location`` is what a task passes to
  ``open_storage``, with the run's storage options, to open the same root.
"""

from __future__ import annotations

import re

import pyarrow as pa

from txntable.engine.storage.base import LocalStorage, MemoryStorage, Storage
from txntable.maintenance.errors import MaintenanceError

_IPC = pa.ipc.IpcWriteOptions(compression="zstd")


def to_ipc(table: pa.Table) -> bytes:
    """``table`` as one Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_IPC) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def from_ipc(blob: bytes) -> pa.Table:
    """The table ``to_ipc`` wrote."""
    return pa.ipc.open_stream(pa.py_buffer(blob)).read_all()


#: the last line of a Python traceback: ``module.Name: message`` at the start of a line
_PYTHON_ERROR = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Za-z_]\w*(?:Error|Exception|Exit)): (.+)$")
#: a JVM exception message: ``[: ]org.apache...SomeException: message``
_JVM_ERROR = re.compile(r"^(?::\s*|Caused by:\s*)?([a-z][\w$]*(?:\.[\w$]+)+): (.+)$")
#: JVM wrappers whose own message only says a Python worker failed
_WRAPPERS = ("PythonException", "Py4JJavaError")


def spark_error_line(exc: BaseException) -> str:
    """One line saying why a Spark call failed (module docstring), at most 1,000 characters."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    lines = [ln.rstrip() for ln in text.splitlines()]
    in_traceback = False
    python_error: str | None = None
    for line in lines:
        if "Traceback (most recent call last)" in line:
            in_traceback = True
            continue
        if in_traceback:
            found = _PYTHON_ERROR.match(line)
            if found:
                python_error = f"{found.group(1)}: {found.group(2)}"
                in_traceback = False
    if python_error:
        return python_error[:1000]
    for line in lines:
        found = _JVM_ERROR.match(line.strip())
        if found and not found.group(1).endswith(_WRAPPERS):
            return f"{found.group(1).rsplit('.', 1)[-1]}: {found.group(2)}"[:1000]
    first = next((ln.strip() for ln in lines if ln.strip()), type(exc).__name__)
    return f"{type(exc).__name__}: {first}"[:1000]


def location(storage: Storage) -> str:
    """What a Spark task passes to ``open_storage`` (with the run's storage options) to reach
    the root of ``storage``: a local path, or the object-store URI the table was opened with."""
    if isinstance(storage, MemoryStorage):
        raise MaintenanceError(
            "a memory:// table lives in one process: Spark executors cannot reach it"
        )
    if isinstance(storage, LocalStorage):
        return storage.root_path  # a plain path: a file:// URI would be percent-decoded again
    return storage.root_uri


__all__ = ["from_ipc", "location", "spark_error_line", "to_ipc"]
