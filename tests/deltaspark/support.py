"""What the delta-spark reference tests share: our CLI as a user runs it, the versions a table
still retains, and the check that delta-spark reads each of them as expected.

``Expected`` keeps, per table version, the digest of the rows that version must hold (from what
the test wrote, never from a reader under test); ``check_reads`` asks delta-spark for every
retained version in one request and compares.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from tests.deltaspark.client import DeltaSpark
from txntable.engine.model.deletion_vectors import dv_file
from txntable.engine.table import Table

CLI = Path(sys.executable).with_name("txntable")
_COMMIT = re.compile(r"^(\d{20})\.json$")


@dataclass
class CliResult:
    code: int
    doc: dict[str, Any] | None
    stdout: str
    stderr: str


def txntable(*args: str, check: bool = True) -> CliResult:
    """Run ``txntable ARGS --json`` as a user would; ``check`` asserts exit 0."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [str(CLI), *args, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    doc = None
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            doc = json.loads(line)
            break
    result = CliResult(done.returncode, doc, done.stdout, done.stderr)
    if check:
        assert done.returncode == 0, f"txntable {' '.join(args)}: {done.stderr[-2000:]}"
    return result


def commit_versions(path: Path) -> list[int]:
    """Versions whose commit file is still in the log."""
    found = (_COMMIT.match(p.name) for p in (path / "_delta_log").iterdir())
    return sorted(int(m.group(1)) for m in found if m)


def retained_versions(path: Path) -> list[int]:
    """Versions a reader can still time-travel to: the log reconstructs them (our engine loads
    the snapshot) and every data file and deletion-vector file they read is still there."""
    table = Table.open(str(path))
    out = []
    for version in commit_versions(path):
        try:
            snapshot = table.snapshot(version=version)
        except Exception:  # cleaned up: no checkpoint before it
            continue
        files = [_local(u) for u in snapshot.file_uris()]
        for add in snapshot.add_actions():
            dv = add.deletion_vector
            name = dv and dv_file(dv.storage_type, dv.path_or_inline_dv)
            if name:
                files.append(str(path / unquote(name)))
        if all(Path(f).exists() for f in files):
            out.append(version)
    return out


def _local(uri: str) -> str:
    return unquote(uri[len("file://") :]) if uri.startswith("file://") else uri


@dataclass
class Expected:
    """The digest of the rows each version must hold."""

    digests: dict[int, str] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)

    def record(self, version: int, digest: str, count: int) -> None:
        self.digests[version] = digest
        self.counts[version] = count

    def same_as(self, version: int, previous: int) -> None:
        """``version`` changed no row (OPTIMIZE, a DV purge)."""
        self.record(version, self.digests[previous], self.counts[previous])


def check_reads(
    ds: DeltaSpark,
    path: Path,
    expected: Expected,
    step: str,
    *,
    every: bool = True,
    since: int = 0,
) -> list[int]:
    """delta-spark reads every retained version (``every=False``: those from ``since`` on, at
    least the latest) with the rows expected; returns the versions read."""
    versions = [v for v in retained_versions(path) if v in expected.digests]
    assert versions, f"{step}: no retained version to read"
    if not every:
        versions = [v for v in versions if v >= since] or versions[-1:]
    got = ds.call("read_versions", path=str(path), versions=versions)["versions"]
    wrong = {
        v: (got[str(v)], expected.counts[v], expected.digests[v])
        for v in versions
        if (got[str(v)]["count"], got[str(v)]["digest"])
        != (expected.counts[v], expected.digests[v])
    }
    assert not wrong, f"{step}: delta-spark read other rows at versions {wrong}"
    return versions


def check_history(ds: DeltaSpark, path: Path, step: str) -> list[dict[str, Any]]:
    """DESCRIBE HISTORY lists every commit still in the log, with the operation each recorded."""
    rows = ds.history(path)
    listed = sorted(int(r["version"]) for r in rows)
    assert listed == commit_versions(path), f"{step}: history lists {listed}"
    for row in rows:
        info = _commit_info(path, int(row["version"]))
        assert row["operation"] == info.get("operation"), (step, row, info)
        if "readVersion" in info:
            assert row["readVersion"] == info["readVersion"], (step, row, info)
        if "isBlindAppend" in info:
            assert row["isBlindAppend"] == info["isBlindAppend"], (step, row, info)
    return rows


def _commit_info(path: Path, version: int) -> dict[str, Any]:
    with open(path / "_delta_log" / f"{version:020d}.json") as f:
        for line in f:
            action = json.loads(line)
            if "commitInfo" in action:
                info: dict[str, Any] = action["commitInfo"]
                return info
    return {}


def log_bytes(path: Path) -> dict[str, bytes]:
    """Every file of the log with its bytes (a refused step must leave them all as they were)."""
    log = path / "_delta_log"
    return {str(p.relative_to(log)): p.read_bytes() for p in sorted(log.rglob("*")) if p.is_file()}


class LogGuard:
    """What was in the log before a step; ``check`` asserts the step rewrote none of it (a commit
    file or checkpoint is never rewritten; only ``_last_checkpoint`` moves, and log cleanup may
    delete what it expired)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.before = log_bytes(path)

    def check(self, step: str, *, deletes: bool = False) -> None:
        after = log_bytes(self.path)
        for name, data in self.before.items():
            if name == "_last_checkpoint" or name.endswith(".crc"):
                continue
            if name not in after:
                assert deletes, f"{step}: deleted {name} from the log"
                continue
            assert after[name] == data, f"{step}: rewrote {name}"


def hadoop_refusals(ds: DeltaSpark, path: Path) -> dict[str, str]:
    """The files under ``path`` (a table's ``_delta_log``, or the whole table) that Hadoop's
    ``LocalFileSystem`` refuses to read in delta-spark's JVM, with the reason (a checksum file
    that no longer matches: ``ChecksumException``). Asserts it read something."""
    got = ds.call("hadoop_read", path=str(path))
    assert got["files"] > 0, f"Hadoop found no file under {path}"
    errors: dict[str, str] = got["errors"]
    return errors


def checksum_files(path: Path) -> tuple[list[str], list[str]]:
    """Hadoop's checksum files ``.<name>.crc`` under ``path``, and those whose file is gone
    (orphans: Hadoop deletes a file's checksum with it), relative to ``path``."""
    found = sorted(str(p.relative_to(path)) for p in path.rglob(".*.crc") if p.is_file())
    orphans = [c for c in found if not (path / c).with_name(Path(c).name[1:-4]).exists()]
    return found, orphans


def age_log(path: Path, days: float) -> None:
    """Move the log's modification times ``days`` back, keeping their order (version ``v`` gets
    ``v`` seconds more), so log cleanup, which keeps whole days, has something to expire."""
    base = time.time() - days * 86_400
    for entry in (path / "_delta_log").iterdir():
        head = entry.name.split(".", 1)[0]
        if head.isdigit() and len(head) == 20:
            stamp = base + int(head)
            os.utime(entry, (stamp, stamp))
