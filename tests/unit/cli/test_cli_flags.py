"""Every flag of every command says its default, and no number a flag cannot use gets past the
parser (issue 23, items 16 and 18).

docs/cli.md promises that ``txntable COMMAND --help`` lists every flag with its default; about
nine did not say it. ``demo --writers 0`` ran the whole demo and then failed, ``--workers 0`` was
accepted, and ``--purge-deleted-percent 150`` answered about a ratio in (0, 1]. Now a bad number
is one ``error:`` line and exit 2 before anything runs, for the ``txntable`` commands and the
jobs the controller launches alike.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.case_ids import readable
from txntable.cli.main import EXIT_USAGE, build_parser, main
from txntable.jobs import checkpoint as checkpoint_job
from txntable.jobs import optimize as optimize_job


def _job_parser(module: object) -> argparse.ArgumentParser:
    """The parser a job's ``main`` builds (captured by letting it parse ``--help``)."""
    built: list[argparse.ArgumentParser] = []
    original = argparse.ArgumentParser.parse_args

    def capture(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> object:
        built.append(self)
        raise SystemExit(0)

    argparse.ArgumentParser.parse_args = capture  # type: ignore[method-assign,assignment]
    try:
        with pytest.raises(SystemExit):
            module.main(["x"])  # type: ignore[attr-defined]
    finally:
        argparse.ArgumentParser.parse_args = original  # type: ignore[method-assign]
    return built[0]


def parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every subcommand of ``txntable`` and every job's parser."""
    (sub,) = (a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in sub.choices.items():
        yield f"txntable {name}", parser
    yield "python -m txntable.jobs.optimize", _job_parser(optimize_job)
    yield "python -m txntable.jobs.checkpoint", _job_parser(checkpoint_job)


def options() -> Iterator[tuple[str, argparse.Action]]:
    for where, parser in parsers():
        for action in parser._actions:
            if action.option_strings and not isinstance(action, argparse._HelpAction):
                yield f"{where} {action.option_strings[-1]}", action


def test_every_flag_that_takes_a_value_shows_its_default() -> None:
    """A flag with a value names its default in its help: the value itself when it has one
    (``(default 2)``), in words when it is the table's or nobody's (``default: the newest``)."""
    missing = []
    seen = 0
    for where, action in options():
        if action.nargs == 0 or action.required:  # --json, --force: off unless given
            continue
        seen += 1
        text = (action.help or "").lower()
        default = action.default
        if "default" not in text:
            missing.append(f"{where}: no default in {action.help!r}")
        elif default not in (None, [], "") and _shown(default) not in text:
            missing.append(f"{where}: default {default!r} not in {action.help!r}")
    assert seen >= 45
    assert missing == []


def _shown(default: object) -> str:
    return f"{default:g}" if isinstance(default, float) else str(default).lower()


def test_optimize_help_says_text_is_the_default_output(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``optimize --help`` said JSON was the default output; it is text."""
    with pytest.raises(SystemExit):
        main(["optimize", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(the default)" not in text.split("--json", 1)[1].split("--", 1)[0]
    assert "not the text summary txntable optimize prints by default" in text


def test_no_flag_takes_a_bare_number() -> None:
    """Every numeric flag has a type that checks its range (``jobs.flags``), not bare ``int``
    or ``float``, which take 0 and negative numbers a flag cannot use."""
    bare = [where for where, action in options() if action.type in (int, float)]
    assert bare == []


BAD_NUMBERS = [
    (["demo", "--writers", "0"], "--writers: must be at least 1"),
    (["demo", "--appends", "-3"], "--appends: must be at least 1"),
    (["optimize", "{t}", "--workers", "0"], "--workers: must be at least 1"),
    (["optimize", "{t}", "--purge-deleted-percent", "150"], "a percentage in (0, 100]"),
    (["optimize", "{t}", "--purge-deleted-percent", "0"], "a percentage in (0, 100]"),
    (["optimize", "{t}", "--min-input-files", "1"], "--min-input-files: must be at least 2"),
    (["optimize", "{t}", "--max-attempts", "0"], "--max-attempts: must be at least 1"),
    (["optimize", "{t}", "--row-group-rows", "0"], "--row-group-rows: must be at least 1"),
    (["optimize", "{t}", "--vacuum-spark-min-files", "-1"], "must be at least 0"),
    (["optimize", "{t}", "--workers", "two"], "'two' is not a whole number"),
    (["optimize", "{t}", "--master", "bogus://x"], "Master must either be yarn"),
    (["optimize", "{t}", "--master", "mesos://x"], "Master must either be yarn"),
    (["checkpoint", "{t}", "--version", "-1"], "--version: must be at least 0"),
    (["checkpoint", "{t}", "--part-size", "0"], "--part-size: must be at least 1"),
    (["inspect", "{t}", "--max-files", "-1"], "--max-files: must be at least 0"),
    (["inspect", "{t}", "--version", "-2"], "--version: must be at least 0"),
    (["run", "--local", "{t}", "--interval", "0"], "--interval: must be a number of seconds"),
    (["run", "--local", "{t}", "--max-ticks", "-1"], "--max-ticks: must be at least 0"),
    (["vacuum", "{t}", "--executor", "spark", "--master", "local[x]"], "is not a Spark master"),
    (["optimize", "{t}", "--master", "local[0]"], "'local[0]' asks for 0 threads"),
    (["optimize", "{t}", "--master", "local[00,2]"], "'local[00,2]' asks for 0 threads"),
]


@pytest.mark.parametrize(("argv", "says"), BAD_NUMBERS, ids=readable)
def test_a_bad_number_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    """Exit 2, one ``error:`` line naming the flag, nothing created: ``demo --writers 0``
    used to fragment a table and run the controller loop before failing."""
    runs, table = tmp_path / "runs", tmp_path / "t"
    args = [a.format(t=table) for a in argv]
    if args[0] == "demo":
        args += ["--manifests", str(tmp_path / "m"), "--runs-dir", str(runs)]
    assert main(args) == EXIT_USAGE
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert says in lines[0]
    assert captured.out == ""
    assert not table.exists() and not runs.exists()


@pytest.mark.parametrize(
    ("job", "argv", "says"),
    [
        ("optimize", ["t", "--workers", "0"], "--workers: must be at least 1"),
        ("optimize", ["t", "--purge-deleted-percent", "101"], "(0, 100]"),
        ("optimize", ["t", "--vacuum-retention", "7x"], "unknown unit 'x'"),
        ("checkpoint", ["t", "--part-size", "0"], "--part-size: must be at least 1"),
        ("checkpoint", ["t", "--retention", "a while"], "is not a duration"),
    ],
    ids=readable,
)
def test_the_jobs_refuse_bad_numbers_alike(
    capsys: pytest.CaptureFixture[str], job: str, argv: list[str], says: str
) -> None:
    module = {"optimize": optimize_job, "checkpoint": checkpoint_job}[job]
    assert module.main(argv) == EXIT_USAGE
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: python -m txntable.jobs.") and says in line


def test_yarn_without_its_configuration_is_refused_as_spark_submit_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """spark-submit refused it after the JVM started: a Java stack trace, exit 1, and an error
    line saying only that the gateway exited."""
    for name in ("HADOOP_CONF_DIR", "YARN_CONF_DIR"):
        monkeypatch.delenv(name, raising=False)
    assert main(["optimize", str(tmp_path / "t"), "--master", "yarn"]) == EXIT_USAGE
    (line,) = capsys.readouterr().err.splitlines()
    assert "HADOOP_CONF_DIR or YARN_CONF_DIR must be set" in line
    monkeypatch.setenv("YARN_CONF_DIR", str(tmp_path))
    assert main(["optimize", str(tmp_path / "t"), "--master", "yarn"]) == 1  # no table there
    assert "HADOOP_CONF_DIR" not in capsys.readouterr().err
