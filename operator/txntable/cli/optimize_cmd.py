"""``txntable optimize URI``: compact small files (optionally Z-order), in Spark or in-process.

Runs the same driver as ``python -m txntable.jobs.optimize`` in this process: Spark
``local[2]`` by default (``--master`` for another), ``--executor arrow`` for small tables without a
JVM. By default a text summary (a dry run: every bin with its files; with ``--vacuum``: what was,
or would be, deleted); ``--json`` prints the job's result line instead.
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
    from txntable.maintenance.errors import MaintenanceError, SparkStartError

    try:
        result, code = execute(args)
    except SparkStartError as exc:  # Spark's reason, one line: bad usage for a bad --master
        if exc.bad_argument:
            raise CliError(str(exc)) from None
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except MaintenanceError as exc:
        raise CliError(str(exc)) from exc
    doc = result.to_json()
    if args.json:
        print(json.dumps(doc, separators=(",", ":")))
        _say_why(result.error)
        return code
    if result.dry_run and result.plan is not None:
        print("\n".join(plan_lines(result.table, result.read_version, result.plan)))
        _say_why(result.error)
        return code
    if not args.vacuum_only:
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
    if result.vacuum and "error" not in result.vacuum:
        print("\n".join(vacuum_lines(result.vacuum)))
    _say_why(result.error)
    return code


def plan_lines(table: str, version: int, plan: dict[str, Any]) -> list[str]:
    """The dry run as text: the totals, then every bin with its files (``--json`` has the same
    and the policy)."""
    notes = "; ".join(plan["notes"])
    lines = [
        f"{table} @ v{version}: would rewrite {plan['numInputFiles']} files "
        f"({plan['numInputBytes']} bytes) in {plan['numBins']} bins"
        + (f"; {notes}" if notes else "")
    ]
    for b in plan["bins"]:
        where = _partition(b["partitionValues"])
        kind = " z-order" if b["zOrder"] else " clustering" if b["clustered"] else ""
        lines.append(f"  bin {b['binId']}{where}:{kind} {b['numFiles']} files, {b['bytes']} bytes")
        lines += [f"    {path}" for path in b["files"]]
    if plan["deferredBins"]:
        lines.append(
            f"  {plan['deferredBins']} more bins ({plan['deferredBytes']} bytes) wait for a "
            "later run (--max-bytes)"
        )
    return lines


def vacuum_lines(vacuum: dict[str, Any]) -> list[str]:
    """The VACUUM that ended the run, as text: what it deleted, or would delete in a dry run,
    with the files the result names (the first ones; ``--json`` names the same)."""
    from txntable.durations import format_seconds

    seconds = vacuum["retentionMs"] // 1000
    kept = format_seconds(seconds) if seconds > 0 else f"{vacuum['retentionMs']}ms"
    verb = "would delete" if vacuum["dryRun"] else "deleted"
    count = vacuum["numFiles"] if vacuum["dryRun"] else vacuum["numDeleted"]
    lines = [
        f"vacuum: {verb} {count} files ({vacuum['bytes']} bytes) that no version of the last "
        f"{kept} reads; {vacuum['numReferenced']} referenced files kept"
    ]
    lines += [f"  {path}" for path in vacuum["files"]]
    if len(vacuum["files"]) < count:
        lines.append(f"  ... and {count - len(vacuum['files'])} more")
    return lines + iceberg_lines(vacuum.get("iceberg"))


def iceberg_lines(iceberg: dict[str, Any] | None) -> list[str]:
    """On a UniForm table: the files VACUUM kept because the current Iceberg metadata still
    reads them (docs/adr/0010), with the first ones named."""
    from txntable.engine import iceberg_hold_note

    note = iceberg_hold_note(iceberg)
    if iceberg is None or note is None:
        return []
    held = iceberg.get("held") or []
    lines = [f"vacuum: {note}", *(f"  {path}" for path in held)]
    if len(held) < iceberg["numHeld"]:
        lines.append(f"  ... and {iceberg['numHeld'] - len(held)} more")
    return lines


def _partition(values: dict[str, str | None]) -> str:
    if not values:
        return ""
    return " [" + ",".join(f"{k}={'null' if v is None else v}" for k, v in values.items()) + "]"


def _say_why(error: str | None) -> None:
    """A run that failed says why on stderr, as one ``error:`` line, whatever the output mode
    (``--json`` keeps the result document alone on stdout)."""
    if error:
        one_line = " ".join(error.splitlines())
        print(f"error: {one_line}", file=sys.stderr)
