"""An interrupt that a library turned into another error is still an interrupt.

The case that made this module: Ctrl-C during ``collect()`` raised ``KeyboardInterrupt`` in
py4j's socket read, and PySpark's ``SCCallSiteSync.__exit__`` then made one more py4j call,
which failed (``Py4JNetworkError: Answer from Java side is empty``) and replaced the interrupt.
The run reported a failed Spark job and stopped the session normally, which waited forever for
the task in flight (one run in four under load). The chain is rebuilt here with the same shape.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pytest

from txntable import interrupts
from txntable.api.optimize_options import OptimizeOptions
from txntable.engine import Table
from txntable.jobs.outcome import fail
from txntable.jobs.signals import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated, raise_on_signals
from txntable.maintenance import spark_session
from txntable.maintenance.executor_arrow import BinResult, BinTask
from txntable.maintenance.optimize import optimize


class NetworkError(Exception):
    """Stands in for py4j's ``Py4JNetworkError`` (an ``Exception``)."""


def _hidden(interrupt: KeyboardInterrupt) -> NetworkError:
    """The error py4j's clean-up raised while ``interrupt`` propagated."""
    try:
        try:
            raise interrupt
        except KeyboardInterrupt:
            raise NetworkError("Answer from Java side is empty") from None
    except NetworkError as exc:
        return exc


def test_the_interrupt_behind_an_error_is_found() -> None:
    interrupt = Terminated()
    error = _hidden(interrupt)
    assert error.__suppress_context__ and error.__context__ is interrupt
    assert interrupts.interrupt_in(error) is interrupt
    assert interrupts.interrupt_in(interrupt) is interrupt
    assert interrupts.interrupt_in(ValueError("plain")) is None
    assert interrupts.interrupt_in(None) is None


def test_reraise_raises_the_interrupt_itself() -> None:
    interrupt = Terminated()
    with pytest.raises(Terminated) as raised:
        interrupts.reraise(_hidden(interrupt))
    assert raised.value is interrupt
    interrupts.reraise(ValueError("plain"))  # nothing behind it: returns


@pytest.fixture
def sigint_default() -> Iterator[None]:
    """SIGINT as Python sets it up in a terminal (not ignored, as in a background job)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("sigint_default")
def test_signals_raise_and_are_noted_then_forgotten() -> None:
    before_int = signal.getsignal(signal.SIGINT)
    before_term = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated), raise_on_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises at once
    assert interrupts.noted() is None  # forgotten with the handlers
    seen: list[KeyboardInterrupt | None] = []
    with pytest.raises(KeyboardInterrupt), raise_on_signals():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        finally:
            seen.append(interrupts.noted())
    assert isinstance(seen[0], KeyboardInterrupt) and not isinstance(seen[0], Terminated)
    assert signal.getsignal(signal.SIGINT) is before_int
    assert signal.getsignal(signal.SIGTERM) is before_term


def test_an_ignored_sigint_stays_ignored() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with raise_on_signals():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_the_result_line_says_terminated_behind_an_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert fail({"table": "t"}, _hidden(Terminated())) == EXIT_TERMINATED
    assert capsys.readouterr().err.rstrip().splitlines()[-1] == "error: terminated"
    assert fail({"table": "t"}, _hidden(KeyboardInterrupt())) == EXIT_INTERRUPTED


class _HidingExecutor:
    """A Spark executor's failure after Ctrl-C, as py4j left it."""

    name = "hiding"

    def run(self, tasks: Sequence[BinTask]) -> list[BinResult]:
        del tasks
        raise _hidden(Terminated())


def test_optimize_does_not_report_an_interrupt_as_a_failed_run(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    for i in range(4):
        table.append(pa.table({"id": [i]}))
    with pytest.raises(Terminated):
        optimize(table, OptimizeOptions(), _HidingExecutor())
    assert table.version() == 4


class _Session:
    """A session whose ``stop`` blocks (a task whose Python worker never answers) or fails."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.stopping = threading.Event()
        self.release = threading.Event()

    def stop(self) -> None:
        self.stopping.set()
        if self.error is not None:
            raise self.error
        self.release.wait(60)


@pytest.fixture
def aborted(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """One entry per call of ``spark_session.abort`` (which is not run)."""
    calls: list[bool] = []
    monkeypatch.setattr(spark_session, "abort", lambda: calls.append(True) or [])
    return calls


def test_a_stop_that_hangs_is_given_up_and_the_processes_stopped(aborted: list[bool]) -> None:
    session = _Session()
    spark_session.stop(session, timeout=0.3)
    assert session.stopping.is_set() and aborted == [True]
    session.release.set()


def test_a_stop_after_a_swallowed_interrupt_aborts_without_asking_spark(
    aborted: list[bool],
) -> None:
    session = _Session()
    with raise_on_signals():
        interrupts.note(KeyboardInterrupt())  # as the SIGINT handler does
        spark_session.stop(session)
    assert aborted == [True] and not session.stopping.is_set()


def test_a_stop_that_fails_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_session, "abort", lambda: pytest.fail("not an interrupt"))
    with pytest.raises(RuntimeError, match="cannot stop"):
        spark_session.stop(_Session(RuntimeError("cannot stop")))


def test_an_interrupt_is_found_behind_raise_from() -> None:
    """``raise X from Y`` while an interrupt is handled: the interrupt is X's context."""
    interrupt = KeyboardInterrupt()
    try:
        try:
            raise interrupt
        except KeyboardInterrupt:
            raise NetworkError("send failed") from ValueError("the cause")
    except NetworkError as exc:
        error = exc
    assert isinstance(error.__cause__, ValueError) and error.__context__ is interrupt
    assert interrupts.interrupt_in(error) is interrupt


@pytest.mark.usefixtures("sigint_default")
def test_a_block_that_fails_after_a_swallowed_interrupt_ends_with_it() -> None:
    with pytest.raises(KeyboardInterrupt) as raised, raise_on_signals():
        _swallowed_ctrl_c()
        raise RuntimeError("the job failed afterwards")
    assert isinstance(raised.value.__cause__, RuntimeError)
    with raise_on_signals():  # one that finishes its work all the same ends normally
        _swallowed_ctrl_c()
    assert interrupts.noted() is None


def _swallowed_ctrl_c() -> None:
    """Ctrl-C arrives and a library swallows it whole."""
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the handler raises at once
    except KeyboardInterrupt:
        pass


def test_vacuum_on_spark_reports_an_interrupt_py4j_hid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from txntable.cli.main import main
    from txntable.maintenance import vacuum_spark
    from txntable.maintenance.errors import SparkJobError

    class HidingSweeper:
        name = "spark"

        def __init__(self, **kwargs: object) -> None:
            del kwargs

        def doomed(self, storage: object, rules: object) -> list[object]:
            raise SparkJobError("VACUUM's listing job failed") from _hidden(KeyboardInterrupt())

        def close(self) -> None:
            pass

    monkeypatch.setattr(vacuum_spark, "SparkSweeper", HidingSweeper)
    table = Table.create(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1]}))
    assert main(["vacuum", str(tmp_path / "t"), "--executor", "spark"]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err.splitlines() == ["error: interrupted"]
    assert table.version() == 1  # nothing recorded
