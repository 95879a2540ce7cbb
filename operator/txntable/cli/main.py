"""Entry point of the ``txntable`` command: one subcommand per module, errors as one line.

Every expected failure (not a table, unsupported feature, corrupt log, unreachable storage, bad
arguments) ends with a single ``error: ...`` line on stderr and a non-zero status, never a
traceback: the command is used from scripts and from the controller's runs.

Building the parser is cheap: the subcommand modules define their arguments with nothing but
argparse and import the engine, pyarrow, Spark or the controller only inside ``run``, so
``--help``, ``--version`` and a bad flag answer without loading them (``import txntable`` is
cheap too), and each subcommand loads only what it uses.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

from txntable import arrow_pool, interrupts
from txntable.cli import (
    checkpoint_cmd,
    cleanup_cmd,
    demo_cmd,
    inspect_cmd,
    optimize_cmd,
    run_cmd,
    vacuum_cmd,
)
from txntable.cli.errors import CliError
from txntable.engine import EngineError
from txntable.jobs.flags import Parser, parse
from txntable.jobs.signals import describe, exit_status, raise_on_signals

#: Subcommand modules; each has ``register(subparsers) -> None`` and ``run(args) -> int``.
COMMANDS: tuple[ModuleType, ...] = (
    inspect_cmd,
    demo_cmd,
    optimize_cmd,
    checkpoint_cmd,
    cleanup_cmd,
    run_cmd,
    vacuum_cmd,
)

#: commands that run the controller's loop, which keeps table summaries for as long as it
#: runs: pyarrow's default pool suits it (txntable.arrow_pool); the runs it starts get the
#: one-shot pool from the local launcher
LOOPS = frozenset({"run", "demo"})

EXIT_ENGINE_ERROR = 1
EXIT_USAGE = 2
#: the reader of the output went away (``| head``): 128 + SIGPIPE, what the shell reports for a
#: Unix tool that SIGPIPE ended
EXIT_PIPE_CLOSED = 141


class _VersionAction(argparse.Action):
    """``--version``: reads the installed distribution's version only when asked (slow)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        import txntable

        print(f"{parser.prog} {txntable.__version__}")  # stdout, as argparse's version action
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="txntable",
        description="Keep Delta Lake tables healthy: inspect, optimize, checkpoint, vacuum.",
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parse(parser, argv)  # --help and --version end here; a usage error is returned
    if isinstance(args, int):
        return args
    if args.command not in LOOPS:  # before the command loads pyarrow (txntable.arrow_pool)
        arrow_pool.for_one_shot()
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        with raise_on_signals():
            try:
                return run(args)
            except Exception as exc:
                interrupts.reraise(exc)  # an interrupt a library turned into an error
                raise
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ENGINE_ERROR
    except BrokenPipeError as exc:
        if _stdout_gone():  # the reader stopped reading (| head): as Unix tools, quietly
            return EXIT_PIPE_CLOSED
        print(f"error: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_ENGINE_ERROR
    except OSError as exc:  # e.g. permission denied on a path the engine wrote directly
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"error: {exc.strerror or exc}{where}", file=sys.stderr)
        return EXIT_ENGINE_ERROR
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (jobs.signals)
        print(f"error: {describe(exc)}", file=sys.stderr)
        return exit_status(exc)


def _stdout_gone() -> bool:
    """Whether stdout is a pipe nobody reads any more; if so it is pointed at /dev/null, so
    that flushing it at exit cannot fail a second time."""
    import os
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        gone = any(event & select.POLLERR for _, event in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture)
        return False
    if gone:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    return gone


if __name__ == "__main__":
    sys.exit(main())
