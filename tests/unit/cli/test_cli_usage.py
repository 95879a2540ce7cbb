"""The command line explains itself: ``txntable --version`` tells the one version the package,
the image and the chart share, and every flag of every subcommand has a help text."""

from __future__ import annotations

import argparse
import importlib.metadata
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

import txntable
from txntable.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[3]


def _pyproject_version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def test_version_flag_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert out == f"txntable {importlib.metadata.version('txntable')}\n"


def test_one_version_for_package_module_and_chart() -> None:
    version = _pyproject_version()
    assert importlib.metadata.version("txntable") == version, "reinstall: pip install -e ."
    assert txntable.__version__ == version
    chart = yaml.safe_load((ROOT / "charts/txntable-operator/Chart.yaml").read_text())
    assert str(chart["appVersion"]) == version
    assert str(chart["version"]) == version


def _parsers(
    parser: argparse.ArgumentParser, prefix: str
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{prefix} {name}")


def test_every_flag_of_every_subcommand_has_help() -> None:
    missing = []
    seen = 0
    for where, parser in _parsers(build_parser(), "txntable"):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helped = {a.dest for a in action._choices_actions if a.help}
                missing += [f"{where} {n}" for n in action.choices if n not in helped]
                continue
            seen += 1
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{where} {'/'.join(action.option_strings) or action.dest}")
    assert seen > 50  # the walk reached the subcommands
    assert missing == []
