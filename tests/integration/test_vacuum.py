"""VACUUM against deltalake as the oracle: what goes, what stays, and racing writers.

Reads go through deltalake in a child process (``tests.oracle_read``): it applies deletion vectors
and cannot abort the test process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests import oracle_read
from tests.integration.optimize_helpers import fragmented_table
from tests.soak.writer import SCHEMA, ids_of
from txntable.api.optimize_options import OptimizeOptions
from txntable.cli.main import main as cli
from txntable.engine.commit.transaction import Transaction
from txntable.engine.errors import InvalidArgumentError
from txntable.engine.model.deletion_vectors import z85_uuid
from txntable.engine.storage.base import FileInfo, Storage
from txntable.engine.table import Table
from txntable.engine.vacuum import InProcessSweeper, VacuumRules, vacuum
from txntable.engine.write.writer import write_data_files
from txntable.maintenance.executor_arrow import ArrowExecutor
from txntable.maintenance.optimize import optimize

pytestmark = pytest.mark.integration

DAY_MS = 86_400_000
ROOT = Path(__file__).resolve().parents[2]


def _deltalake_full_vacuum_dry_run(path: Path) -> list[str]:
    script = (
        "import json, sys, deltalake\n"
        "dt = deltalake.DeltaTable(sys.argv[1])\n"
        "print(json.dumps(sorted(dt.vacuum(retention_hours=0, dry_run=True,"
        " enforce_retention_duration=False, full=True))), flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True
    )
    result: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _files(path: Path) -> set[str]:
    return {
        str(p.relative_to(path))
        for p in path.rglob("*")
        if p.is_file() and not str(p.relative_to(path)).startswith("_delta_log")
    }


def _dv_files(path: Path) -> set[str]:
    """Deletion-vector files (not their Hadoop checksum files ``.<name>.crc``)."""
    names = {f: Path(f).name for f in _files(path)}
    return {f for f, n in names.items() if "deletion_vector_" in n and not n.startswith(".")}


def test_z85_ids_decode_to_the_dv_file_names_spark_wrote() -> None:
    # table-with-dv-small's descriptor and the file next to it
    assert z85_uuid("vBn[lx{q8@P<9BNH/isA") == "61d16c75-6994-46b7-a15b-8b538852e50e"


@pytest.mark.parametrize(
    "name",
    [
        "simple_table",
        "delta-0.8.0",
        "delta-0.8.0-partitioned",
        "table-with-dv-small",
        "basic-dv-with-checkpoint",
        "partitioned-table-with-dv-large",
        "table-with-dv-special-char",
    ],
)
def test_reference_tables_vacuum_what_deltalake_does_except_live_deletion_vectors(
    table_copy: Any, name: str
) -> None:
    """With zero retention we delete a subset of deltalake's full vacuum; what deltalake deletes
    beyond it are hidden files and the deletion vectors the latest version still applies
    (deltalake 1.6.6 deletes those: its reads afterwards fail). The latest version reads the
    same after our vacuum."""
    path = table_copy(name)
    theirs = set(_deltalake_full_vacuum_dry_run(path))
    readable = name not in ("partitioned-table-with-dv-large", "table-with-dv-special-char")
    before = oracle_read.read(path) if readable else None
    live_dv_files = _dv_files(path)
    result = vacuum(Table.open(str(path)).snapshot(), retention_ms=0, force=True)
    ours = set(result.files)
    assert ours <= theirs
    for extra in theirs - ours:
        base = extra.rsplit("/", 1)[-1]
        assert base.startswith((".", "_")) or "deletion_vector_" in base, extra
    assert not ours & _files(path)  # really deleted
    if readable:
        assert before is not None
        after = oracle_read.read(path)
        assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])
    still = _dv_files(path)
    assert still == live_dv_files - ours
    assert not _checksum_files(path)[1]  # each deleted file's Hadoop checksum went with it
    if name in ("table-with-dv-small", "partitioned-table-with-dv-large"):
        assert still  # every DV of these is live: none may go


def test_optimize_then_vacuum_reclaims_exactly_the_rewritten_files(tmp_path: Path) -> None:
    path = fragmented_table(tmp_path / "t", commits=8, rows=30, partitioned=True)
    result = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert result.error is None and result.num_files_removed > 0
    removed = {
        json.loads(line)["remove"]["path"]
        for version in result.commits
        for line in (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
        if '"remove"' in line
    }
    before = oracle_read.read(path)
    snapshot = Table.open(str(path)).snapshot()
    assert vacuum(snapshot, dry_run=True).files == ()  # all inside the 7-day retention
    later = int(time.time() * 1000) + 8 * DAY_MS
    _age_log(path, 8)
    dry = vacuum(snapshot, dry_run=True, now_ms=later)
    assert set(dry.files) == removed
    done = vacuum(snapshot, now_ms=later)
    assert done.num_deleted == len(removed) and done.logged
    assert not removed & _files(path)
    assert oracle_read.read(path)["digest"] == before["digest"]
    assert vacuum(Table.open(str(path)).snapshot(), now_ms=later).num_deleted == 0
    ops = [c["operation"] for c in Table.open(str(path)).history(4)]
    assert ops[:4] == ["VACUUM END", "VACUUM START", "VACUUM END", "VACUUM START"]


def _age_log(path: Path, days: int) -> None:
    old = time.time() - days * 86400
    for entry in (path / "_delta_log").iterdir():
        os.utime(entry, (old, old))


def test_retention_below_the_table_setting_needs_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = fragmented_table(tmp_path / "t", commits=3, rows=10, partitioned=False)
    orphan = path / "orphan.parquet"
    orphan.write_bytes(b"x")
    old = time.time() - 3600
    os.utime(orphan, (old, old))
    snapshot = Table.open(str(path)).snapshot()
    with pytest.raises(InvalidArgumentError, match="shorter than the table's"):
        vacuum(snapshot, retention_ms=60_000)
    assert cli(["vacuum", str(path), "--retention", "1 minute"]) == 1
    assert "--force" in capsys.readouterr().err
    assert orphan.exists()
    assert cli(["vacuum", str(path), "--retention", "1 minute", "--force", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["files"] == ["orphan.parquet"] and doc["numDeleted"] == 1
    assert not orphan.exists()


def test_log_hidden_young_and_outside_files_are_never_touched(tmp_path: Path) -> None:
    path = fragmented_table(tmp_path / "t", commits=3, rows=10, partitioned=True)
    outside = tmp_path / "elsewhere" / "data.parquet"
    outside.parent.mkdir()
    outside.write_bytes(b"x")
    planted = {
        "_delta_log/junk.txt": True,
        ".hidden.parquet": True,
        "_SUCCESS": True,
        "_tmp/inner.parquet": True,
        "young-orphan.parquet": False,  # young: a writer may be about to commit it
        "old-orphan.parquet": True,
        "_change_data/cdc-old.parquet": True,
    }
    old = time.time() - 30 * 86400
    for name, aged in planted.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"x")
        if aged:
            os.utime(target, (old, old))
    os.utime(outside, (old, old))
    result = vacuum(Table.open(str(path)).snapshot())
    assert set(result.files) == {"old-orphan.parquet", "_change_data/cdc-old.parquet"}
    for name in planted:
        assert (path / name).exists() == (name not in result.files), name
    assert outside.exists()


def test_a_remove_stamped_by_a_slow_clock_is_kept_while_its_commit_is_recent(
    tmp_path: Path,
) -> None:
    """Spark trusts deletionTimestamp; a writer whose clock is behind stamps its removes in the
    past, so the versions just before its commit would lose their files. The commit's own time
    keeps them until it leaves the retention."""
    path = fragmented_table(tmp_path / "t", commits=3, rows=10, partitioned=False)
    table = Table.open(str(path))
    victim = next(table.snapshot().add_actions())
    txn = table.transaction()
    txn.add(
        victim.to_remove(deletion_timestamp=int(time.time() * 1000) - 30 * DAY_MS, data_change=True)
    )
    version = txn.commit("DELETE").version
    file = path / victim.path
    old = time.time() - 30 * 86400
    os.utime(file, (old, old))
    assert vacuum(Table.open(str(path)).snapshot()).files == ()
    assert oracle_read.read(path, version - 1)["rows"] > 0  # time travel still works
    _age_log(path, 8)
    assert vacuum(Table.open(str(path)).snapshot()).files == (victim.path,)


def test_vacuum_racing_writers_and_optimize_keeps_every_retained_version_readable(
    tmp_path: Path,
) -> None:
    """deltalake and our writers append, OPTIMIZE and VACUUM (3 s retention, forced) run in a
    loop for ~12 s; afterwards every version current at any time inside the last vacuum's
    retention reads completely in deltalake, and every acknowledged row is in the table.

    Except what the forced retention gives up by design: a writer that held a file it wrote
    longer than the 3 s before committing it, and committed it after a VACUUM had listed it
    unnamed and old (on two busy cores a writer retrying commits can take that long). Such
    a file must have been older than the cutoff and named by no commit the VACUUM read; the
    versions that read it and the rows it held are left out, and counted."""
    path = tmp_path / "t"
    Table.create(str(path), SCHEMA, partition_by=["p"])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "operator")]))
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.soak.writer",
                str(path),
                "--engine",
                engine,
                "--writer",
                str(n),
                "--ack",
                str(tmp_path / f"ack-{n}"),
                "--pause",
                "0.05",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for n, engine in ((1, "ours"), (2, "deltalake"))
    ]
    cutoffs = []
    #: deleted file -> (the version of the snapshot its VACUUM read, its mtime, that cutoff)
    deleted: dict[str, tuple[int, int, int]] = {}
    try:
        deadline = time.monotonic() + 12
        while time.monotonic() < deadline:
            table = Table.open(str(path))
            optimize(table, OptimizeOptions(target_file_size=1 << 20), ArrowExecutor())
            snapshot = Table.open(str(path)).snapshot()
            sweeper = _Listing()
            result = vacuum(snapshot, retention_ms=3000, force=True, sweeper=sweeper)
            cutoffs.append(result.cutoff_ms)
            for name in result.files:
                deleted[name] = (snapshot.version, sweeper.mtimes[name], result.cutoff_ms)
            time.sleep(0.5)
    finally:
        for proc in writers:
            proc.kill()
            proc.wait()
    assert deleted  # the race really reclaimed files
    assert all(mtime < cutoff for _, mtime, cutoff in deleted.values())
    log = path / "_delta_log"
    commits = sorted(int(p.name[:20]) for p in log.glob("*.json") if p.name[:20].isdigit())
    named = _named_by_commits(log, commits)
    # committed after the VACUUM that deleted it had read the log: lost to the forced retention
    late = {n for n, (seen, _, _) in deleted.items() if named[n].added > seen}
    for name in late:
        assert named[name].added == min(named[name].versions), name  # first named by its add
    recent = [v for v in commits if (log / f"{v:020d}.json").stat().st_mtime * 1000 > cutoffs[-1]]
    first = max(0, recent[0] - 1) if recent else commits[-1]
    given_up = [v for v in range(first, commits[-1] + 1) if any(named[n].live(v) for n in late)]
    print(f"files committed after a VACUUM deleted them: {len(late)}; versions: {given_up}")
    read = oracle_read.read_versions(
        path, [v for v in range(first, commits[-1] + 1) if v not in given_up]
    )
    assert not {v: r["error"] for v, r in read.items() if "error" in r}
    assert read or late  # only the files given up keep versions from being read
    acked = set()
    for n in (1, 2):
        for line in (tmp_path / f"ack-{n}").read_text().splitlines():
            if len(line.split()) == 2:
                acked.update(ids_of(n, int(line.split()[0])))
    lost = {i for name in late for i in named[name].ids}
    from deltalake import DeltaTable

    uris = DeltaTable(str(path)).file_uris()
    present = [u for u in uris if Path(u.removeprefix("file://")).exists()]
    assert {os.path.relpath(u.removeprefix("file://"), path) for u in uris} - {
        os.path.relpath(u.removeprefix("file://"), path) for u in present
    } <= late
    ids = (
        pa.concat_tables(
            [pq.read_table(u.removeprefix("file://"), columns=["id"]) for u in present]
        )
        .column("id")
        .to_pylist()
    )
    assert acked - lost <= set(ids) and len(ids) == len(set(ids))


class _Listing(InProcessSweeper):
    """The in-process sweeper, remembering the modification time of each file it listed."""

    def __init__(self) -> None:
        self.mtimes: dict[str, int] = {}

    def doomed(self, storage: Storage, rules: VacuumRules) -> list[FileInfo]:
        found = super().doomed(storage, rules)
        self.mtimes.update({f.name: f.mtime_ms for f in found})
        return found


@dataclass
class _Named:
    """Where the log names one data file: the commit adding it, every commit naming it, the
    commit removing it, and the ids its add's stats span (each writer batch is consecutive)."""

    added: int = -1
    removed: int | None = None
    versions: list[int] = field(default_factory=list)
    ids: range = range(0)

    def live(self, version: int) -> bool:
        return self.added <= version and (self.removed is None or version < self.removed)


def _named_by_commits(log: Path, commits: list[int]) -> defaultdict[str, _Named]:
    """Each data file's ``_Named``, read from the commit files themselves."""
    named: defaultdict[str, _Named] = defaultdict(_Named)
    for version in commits:
        for line in (log / f"{version:020d}.json").read_text().splitlines():
            action = json.loads(line)
            for kind in ("add", "remove"):
                if kind in action:
                    entry = named[unquote(action[kind]["path"])]
                    entry.versions.append(version)
                    if kind == "remove":
                        entry.removed = version
                        continue
                    entry.added = version
                    stats = json.loads(action["add"].get("stats") or "{}")
                    if "minValues" in stats:
                        low, high = stats["minValues"]["id"], stats["maxValues"]["id"]
                        entry.ids = range(low, high + 1)
    return named


class _CommitsWhileListing(InProcessSweeper):
    """Lists as the in-process sweeper does, and while it lists a slow writer commits the file
    it wrote long ago (the race of a forced short retention)."""

    def __init__(self, commit: Callable[[], None]) -> None:
        self.commit = commit
        self.listed: list[str] = []

    def doomed(self, storage: Storage, rules: VacuumRules) -> list[FileInfo]:
        found = super().doomed(storage, rules)
        self.listed += [f.name for f in found]
        self.commit()
        return found


def test_a_file_committed_while_vacuum_lists_is_kept(tmp_path: Path) -> None:
    """A writer wrote a file longer than the retention ago and commits it while VACUUM lists
    the table: the listing found it unreferenced, but VACUUM reads the commits after its
    snapshot again before deleting, keeps it, and still deletes a file nothing names."""
    path = tmp_path / "t"
    table = Table.create(str(path), SCHEMA, partition_by=["p"])
    rows = pa.table({"id": [1, 2], "writer": ["1", "1"], "p": ["a", "a"]}, SCHEMA)
    snapshot = table.snapshot()
    late = write_data_files(table.storage, snapshot.metadata, rows)
    orphan = write_data_files(table.storage, snapshot.metadata, rows)
    old = time.time() - 3600
    for add in (*late, *orphan):
        os.utime(path / add.path, (old, old))

    def commit() -> None:
        txn = Transaction(table, snapshot)
        txn.add(*late)
        txn.commit("WRITE")

    sweeper = _CommitsWhileListing(commit)
    result = vacuum(table.snapshot(), retention_ms=1000, force=True, sweeper=sweeper)
    assert {a.path for a in (*late, *orphan)} <= set(sweeper.listed)
    assert list(result.files) == [a.path for a in orphan]
    assert all((path / a.path).exists() for a in late)
    assert not any((path / a.path).exists() for a in orphan)
    assert oracle_read.read(path)["rows"] == 2


def _optimize_job(path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "txntable.jobs.optimize", str(path), "--executor", "arrow", *extra],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    assert lines, done.stderr
    return done.returncode, json.loads(lines[-1])


def test_a_compaction_run_with_vacuum_reclaims_what_earlier_runs_left(tmp_path: Path) -> None:
    """The policy's vacuum section: the optimize job vacuums after committing, with the table's
    retention (here one second), so the files of the previous run go and its own stay."""
    path = fragmented_table(tmp_path / "t", commits=6, rows=20, partitioned=False)
    table = Table.open(str(path))
    txn = table.transaction()
    txn.set_metadata(
        _with_config(table, {"delta.deletedFileRetentionDuration": "interval 1 second"})
    )
    txn.commit("SET TBLPROPERTIES")
    code, first = _optimize_job(path)
    assert code == 0 and first["numFilesRemoved"] == 6 and "vacuum" not in first
    time.sleep(1.5)
    for i in range(3):
        Table.open(str(path)).append(_one_row(path, i))
    before = oracle_read.read(path)
    code, second = _optimize_job(path, "--vacuum")
    assert code == 0, second
    assert second["numFilesRemoved"] == 4  # run 1's output and the three appends
    vac = second["vacuum"]
    assert vac["numDeleted"] == 6 and not vac["dryRun"] and vac["logged"]
    assert oracle_read.read(path)["digest"] == before["digest"]


def test_a_vacuum_retention_below_the_tables_fails_the_run_after_the_compaction(
    tmp_path: Path,
) -> None:
    path = fragmented_table(tmp_path / "t", commits=4, rows=20, partitioned=False)
    code, result = _optimize_job(path, "--vacuum", "--vacuum-retention", "interval 1 hour")
    assert code == 1
    assert result["binsCommitted"] == 1  # the compaction stands
    assert result["error"].startswith("vacuum: retention 1 h is shorter")


def _with_config(table: Table, extra: dict[str, str]) -> Any:
    from dataclasses import replace

    metadata = table.snapshot().metadata
    return replace(metadata, configuration={**metadata.configuration, **extra})


def _one_row(path: Path, i: int) -> pa.Table:
    """Row ``i`` of the table's first file: data shaped exactly like the table's."""
    import pyarrow.parquet as pq

    return pq.read_table(Table.open(str(path)).snapshot().file_uris()[0]).slice(i, 1)


def _checksum_files(path: Path) -> tuple[set[str], set[str]]:
    """Hadoop's checksum files ``.<name>.crc`` under the table, and those whose file is gone."""
    found = {str(p.relative_to(path)) for p in path.rglob(".*.crc")}
    orphans = {c for c in found if not (path / c).with_name(Path(c).name[1:-4]).exists()}
    return found, orphans


def test_vacuum_deletes_hadoops_checksum_file_with_each_file(table_copy: Any) -> None:
    """delta-spark wrote ``.<name>.crc`` beside each of the reference table's 48 data and
    deletion-vector files; our OPTIMIZE and a zero-retention VACUUM used to leave all 48 beside
    the one file left (issue 33). Each goes with its file now; none is reported or counted as a
    file VACUUM deleted, and the checksums of what stays (the log's) are kept."""
    path = table_copy("basic-dv-with-checkpoint")
    checksums, orphans = _checksum_files(path)
    assert len(checksums) == 100 and not orphans
    optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor(workers=1))
    gone_data = _files(path)
    dry = vacuum(Table.open(str(path)).snapshot(), retention_ms=0, force=True, dry_run=True)
    result = vacuum(Table.open(str(path)).snapshot(), retention_ms=0, force=True)
    gone_data -= _files(path)
    deleted = {f for f in gone_data if not Path(f).name.startswith(".")}
    assert set(result.files) == set(dry.files) == deleted and result.num_deleted == 48
    assert not [f for f in result.files if f.endswith(".crc")]
    left, orphans = _checksum_files(path)
    assert not orphans, sorted(orphans)[:5]
    assert left == {c for c in checksums if c.startswith("_delta_log/")} and len(left) == 52
