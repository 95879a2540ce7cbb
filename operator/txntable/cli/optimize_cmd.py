"""``txntable optimize URI``: compact small files (optionally Z-order), in Spark or in-process.

Runs the same driver as ``python -m txntable.jobs.optimize`` in this process: Spark
``local[2]`` by default (``--master`` for another), ``--executor arrow`` for small tables without a
JVM. ``--json`` prints the job's result line; otherwise a short summary.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from txntable.cli.errors import CliError
from txntable.jobs.optimize import add_arguments, execute


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "optimize", help="compact small files (bin-packing or Z-order) without blocking writers"
    )
    add_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from txntable.maintenance.errors import MaintenanceError

    try:
        result, code = execute(args)
    except MaintenanceError as exc:
        raise CliError(str(exc)) from exc
    doc = result.to_json()
    if args.json:
        print(json.dumps(doc, separators=(",", ":")))
        _say_why(result.error)
        return code
    if result.dry_run and result.plan is not None:
        p = result.plan
        print(
            f"{result.table} @ v{result.read_version}: would rewrite {p['numInputFiles']} files "
            f"({p['numInputBytes']} bytes) in {p['numBins']} bins"
            f"{'; ' + '; '.join(p['notes']) if p['notes'] else ''}"
        )
        _say_why(result.error)
        return code
    print(
        f"{result.table}: v{result.read_version} -> v{result.version}, "
        f"{result.num_files_removed} files ({result.num_bytes_removed} bytes) -> "
        f"{result.num_files_added} files ({result.num_bytes_added} bytes); "
        f"bins committed {result.bins_committed}, skipped {result.bins_skipped}; "
        f"{result.seconds:.1f}s"
    )
    for skip in result.skipped:
        print(f"  skipped bin {skip['binId']}: {skip['reason']}")
    for deferred in result.deferred_partitions or ():
        print(f"  deferred partition {deferred['partitionValues']}: {deferred['reason']}")
    _say_why(result.error)
    return code


def _say_why(error: str | None) -> None:
    """A run that failed says why on stderr, as one ``error:`` line, whatever the output mode
    (``--json`` keeps the result document alone on stdout)."""
    if error:
        one_line = " ".join(error.splitlines())
        print(f"error: {one_line}", file=sys.stderr)
