"""Storage options on a command line, the same way for every job and ``txntable`` subcommand.

Object-store tables need options (endpoint, region, conditional-put mode). They come from the
``TXNTABLE_STORAGE_OPTIONS`` environment variable (a JSON object: how the launchers pass values read
from Secrets, so credentials never appear in a process's arguments) and then from repeatable
``--storage-option KEY=VALUE`` flags, which win.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from txntable.engine import InvalidArgumentError

if TYPE_CHECKING:
    from txntable.engine import Table

STORAGE_OPTIONS_ENV = "TXNTABLE_STORAGE_OPTIONS"


def add_storage_option_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=(
            "storage option for object stores (repeatable; e.g. AWS_ENDPOINT_URL=...); "
            f"{STORAGE_OPTIONS_ENV} may hold more as a JSON object (default: none)"
        ),
    )


def storage_options(
    pairs: Sequence[str], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Options from the environment variable, then the ``KEY=VALUE`` pairs."""
    env = (os.environ if environ is None else environ).get(STORAGE_OPTIONS_ENV)
    out: dict[str, Any] = {}
    if env:
        try:
            loaded = json.loads(env)
        except ValueError as exc:
            raise InvalidArgumentError(f"{STORAGE_OPTIONS_ENV} is not JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise InvalidArgumentError(f"{STORAGE_OPTIONS_ENV} must be a JSON object")
        out.update(loaded)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidArgumentError(f"storage option {pair!r} is not KEY=VALUE")
        out[key] = value
    return out


def open_table(args: argparse.Namespace) -> Table:
    """The table ``args.uri`` names, opened with the options of ``args.storage_option``."""
    from txntable.engine import Table  # here: building a parser must not load the engine

    return Table.open(args.uri, storage_options(args.storage_option))
