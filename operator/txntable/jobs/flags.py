"""What every command line of txntable shares: value types checked at parse time, and one-line
usage errors.

A number or duration that cannot be right (``--writers 0``, ``--workers 0``,
``--purge-deleted-percent 150``, ``--retention 7x``) is refused by argparse before anything
starts, with exit status 2, instead of running half a command (``txntable demo --writers 0``
fragmented and healed a table before failing) or answering in another unit than the flag's.
``Parser`` turns argparse's usage-plus-error into the single ``error: ...`` line docs/cli.md
promises, naming ``--help`` for the rest. The ``txntable`` command and the jobs the controller
launches (``python -m txntable.jobs.*``) use both, so a flag means the same everywhere.

Only the standard library and ``txntable.durations`` are imported: building a parser must stay
cheap (``--help`` answers without loading the engine).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Sequence
from typing import NoReturn

from txntable.durations import DurationError, parse_ms

EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line: ``error: PROG: MESSAGE (PROG --help)``."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace | int:
    """``parser.parse_args(argv)``, or the exit status of a usage error (its one line is
    printed), so a ``main`` returns it as it returns every other status; ``--help`` (and
    ``--version``) still end the process as argparse ends it."""
    try:
        return parser.parse_args(argv)
    except SystemExit as stop:
        if not stop.code:
            raise
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def whole_number(text: str) -> int:
    """A whole number whose range another check knows (a compression level: the codec's)."""
    return _whole(text)


def at_least(minimum: int, what: str = "") -> Callable[[str], int]:
    """A whole number of at least ``minimum`` (``what`` names the unit in the message)."""

    def convert(text: str) -> int:
        value = _whole(text)
        if value < minimum:
            unit = f" {what}" if what else ""
            raise argparse.ArgumentTypeError(f"must be at least {minimum}{unit}, got {value}")
        return value

    convert.__name__ = f"whole number >= {minimum}"  # argparse names the type in some errors
    return convert


def percent(text: str) -> int:
    """A whole percentage in (0, 100]."""
    value = _whole(text)
    if not 0 < value <= 100:
        raise argparse.ArgumentTypeError(
            f"must be a percentage in (0, 100] (of the file's rows), got {value}"
        )
    return value


def positive_seconds(text: str) -> float:
    """A number of seconds above zero (``--interval 0.5``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text}")
    return value


#: the masters the Spark we run (4.x) accepts (spark-submit: "Master must either be yarn or start
#: with spark, k8s, or local"; SparkContext's local forms; mesos:// is gone since Spark 4); empty:
#: the one spark-submit (or the Spark Operator) configured
_SPARK_MASTER = re.compile(
    r"|yarn|(spark|k8s)://\S+|local|local\[([0-9]+|\*)( *, *[0-9]+)?\]"
    r"|local-cluster\[ *[0-9]+ *, *[0-9]+ *, *[0-9]+ *\]"
)
#: spark-submit refuses yarn unless one of these says where the cluster is
_YARN_CONF = ("HADOOP_CONF_DIR", "YARN_CONF_DIR")


def spark_master(text: str) -> str:
    """A Spark master URL as Spark reads it, refused at parse time with spark-submit's rule
    (Spark itself refuses it only after starting a JVM, with a Java stack trace, and PySpark
    then says only that the gateway exited)."""
    if _SPARK_MASTER.fullmatch(text) is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Spark master: Master must either be yarn or start with spark, "
            "k8s, or local (spark-submit's rule), as spark://HOST:PORT, k8s://https://HOST:PORT, "
            "local, local[N], local[*], local[N,F] or local-cluster[N,C,M]"
        )
    threads = re.fullmatch(r"local\[0*( *,.*)?\]", text)
    if threads is not None:  # no thread runs a task; Spark says so only once its JVM is up
        raise argparse.ArgumentTypeError(
            f"{text!r} asks for 0 threads: Spark runs locally with at least one (local[1], "
            "local[*])"
        )
    if text == "yarn" and not any(os.environ.get(name) for name in _YARN_CONF):
        raise argparse.ArgumentTypeError(
            "When running with master 'yarn' either HADOOP_CONF_DIR or YARN_CONF_DIR must be "
            "set in the environment (spark-submit's rule)"
        )
    return text


def duration_ms(text: str) -> int:
    """A duration in the shared grammar (``7d``, ``7 days``, ``interval 7 days``), as ms;
    zero allowed (a retention of ``0 hours`` is a real, forced, request)."""
    try:
        return parse_ms(text)
    except DurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_duration_ms(text: str) -> int:
    """A duration above zero, as ms."""
    value = duration_ms(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be longer than zero")
    return value


__all__ = [
    "EXIT_USAGE",
    "Parser",
    "at_least",
    "duration_ms",
    "parse",
    "percent",
    "positive_duration_ms",
    "positive_seconds",
    "spark_master",
    "whole_number",
]
