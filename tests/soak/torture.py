"""The soak driver: one seeded run of writers, killed maintenance, aging and skew, with checks.

Each step picks one action with the run's random generator (OPTIMIZE, checkpoint, multi-part
checkpoint, log cleanup, VACUUM with a forced 30 s retention, aging the log, skewing a commit's
time, killing a writer), runs the maintenance ones as ``txntable`` processes that are SIGKILLed at
a random moment with probability ``kill_rate``, then checks every invariant. A run is
reproducible in its choices (the seed), not in its interleavings (the processes race for real):
that is the point.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from tests.soak.writer import SCHEMA, ids_of

ROOT = Path(__file__).resolve().parents[2]
DAY_S = 86_400
RETENTION_S = 2 * DAY_S
PROPERTIES = {
    "delta.logRetentionDuration": "interval 2 days",
    "delta.checkpointInterval": "15",  # deltalake checkpoints (and cleans up) on its own too
}
ACTIONS = (
    "optimize",
    "optimize",
    "checkpoint",
    "checkpoint-multipart",
    "cleanup",
    "cleanup",
    "vacuum",
    "age",
    "skew",
    "kill-writer",
    "wait",
)
_LOAD_SAMPLE = 12
_FINAL_SAMPLE = 80
_MAX_VIOLATIONS = 50


@dataclass
class Report:
    """What one run did and found."""

    seed: int
    steps: int = 0
    seconds: float = 0.0
    actions: Counter[str] = field(default_factory=Counter)
    kills: Counter[str] = field(default_factory=Counter)
    maintenance_failures: Counter[str] = field(default_factory=Counter)
    acked_commits: Counter[str] = field(default_factory=Counter)
    writer_errors: Counter[str] = field(default_factory=Counter)
    invariant_checks: int = 0
    versions_loaded: Counter[str] = field(default_factory=Counter)
    commits_hashed: int = 0
    final_version: int = -1
    violations: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "steps": self.steps,
            "seconds": round(self.seconds, 1),
            "actions": dict(self.actions),
            "kills": dict(self.kills),
            "maintenanceFailures": dict(self.maintenance_failures),
            "ackedCommits": dict(self.acked_commits),
            "writerErrors": dict(self.writer_errors),
            "invariantChecks": self.invariant_checks,
            "versionsLoaded": dict(self.versions_loaded),
            "commitsHashed": self.commits_hashed,
            "finalVersion": self.final_version,
            "numViolations": len(self.violations),
            "violations": self.violations[:_MAX_VIOLATIONS],
        }


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "operator")])
    return env


class Soak:
    """One run over a fresh table in ``workdir``."""

    def __init__(
        self,
        workdir: Path,
        seed: int,
        *,
        ours: int = 2,
        deltalake: int = 1,
        kill_rate: float = 0.35,
    ) -> None:
        self.rng = random.Random(seed)
        self.workdir = workdir
        self.table = workdir / "table"
        self.log_dir = self.table / "_delta_log"
        self.report = Report(seed)
        self.kill_rate = kill_rate
        self.engines = {w: "ours" for w in range(1, ours + 1)}
        self.engines |= {w: "deltalake" for w in range(ours + 1, ours + deltalake + 1)}
        self.writers: dict[int, subprocess.Popen[bytes]] = {}
        self.starts: Counter[int] = Counter()
        self.hashes: dict[int, str] = {}
        self.retained: set[int] = set()
        self.live: set[str] = set()
        self.gone: set[str] = set()

    # -- processes -----------------------------------------------------------------------------
    def _start_writer(self, writer: int) -> None:
        engine = self.engines[writer]
        args = [
            sys.executable,
            "-m",
            "tests.soak.writer",
            str(self.table),
            "--engine",
            engine,
            "--writer",
            str(writer),
            "--first-seq",
            str(self.starts[writer] * 10**6),
            "--ack",
            str(self.workdir / f"ack-{writer}.txt"),
            "--seed",
            str(self.report.seed),
            "--pause",
            "0.3",
        ]
        if engine == "ours" and writer == 1:
            # one of our writers runs a day ahead and often commits from an old snapshot
            args += ["--clock-skew-ms", str(DAY_S * 1000), "--old-snapshot-rate", "0.3"]
        out = open(self.workdir / f"writer-{writer}.log", "ab")  # noqa: SIM115 - owned by Popen
        self.writers[writer] = subprocess.Popen(
            args, cwd=ROOT, env=_env(), stdout=out, stderr=subprocess.STDOUT
        )
        self.starts[writer] += 1

    def _kill_writer(self, writer: int) -> None:
        proc = self.writers[writer]
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def _maintenance(self, name: str, args: list[str]) -> None:
        proc = subprocess.Popen(
            [sys.executable, "-m", "txntable.cli.main", *args],
            cwd=ROOT,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        if self.rng.random() < self.kill_rate:
            try:
                proc.wait(timeout=self.rng.uniform(0.05, 1.5))
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.communicate()
                self.report.kills[name] += 1
                return
        try:
            _, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            self.report.violations.append(f"{name} hung for 300 s")
            return
        if proc.returncode != 0:
            line = err.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
            self.report.maintenance_failures[f"{name}: {line[0][:120]}"] += 1

    # -- actions -------------------------------------------------------------------------------
    def step(self) -> None:
        action = self.rng.choice(ACTIONS)
        self.report.actions[action] += 1
        table = str(self.table)
        if action == "optimize":
            extra = ["--zorder-by", "id"] if self.rng.random() < 0.3 else []
            self._maintenance(
                action, ["optimize", table, "--executor", "arrow", "--target-size", "64Ki", *extra]
            )
        elif action == "checkpoint":
            self._maintenance(action, ["checkpoint", table])
        elif action == "checkpoint-multipart":
            self._maintenance(action, ["checkpoint", table, "--part-size", "4"])
        elif action == "cleanup":
            self._maintenance(action, ["cleanup", table])
        elif action == "vacuum":
            # forced short retention: only files older than 30 s that nothing retained reads go
            retention = ["--retention", "30 seconds", "--force"]
            self._maintenance(action, ["vacuum", table, *retention])
        elif action == "age":
            self._age()
        elif action == "skew":
            self._skew()
        elif action == "kill-writer":
            writer = self.rng.choice(sorted(self.writers))
            self._kill_writer(writer)
            self.report.kills["writer"] += 1
            self._start_writer(writer)
        else:
            time.sleep(self.rng.uniform(0.2, 1.0))

    def _versions(self) -> dict[int, list[Path]]:
        out: dict[int, list[Path]] = {}
        for entry in self.log_dir.iterdir():
            head = entry.name.split(".", 1)[0]
            if len(head) == 20 and head.isdigit() and entry.is_file():
                out.setdefault(int(head), []).append(entry)
        return out

    def _age(self) -> None:
        """Set all but the newest few versions' log files days back, older versions older."""
        versions = self._versions()
        if not versions:
            return
        latest = max(versions)
        keep = self.rng.randint(3, 20)
        base = time.time() - RETENTION_S - self.rng.uniform(0.5, 3) * DAY_S
        for version, files in versions.items():
            if version > latest - keep:
                continue
            stamp = base - (latest - version)
            for path in files:
                with contextlib.suppress(FileNotFoundError):  # cleaned up meanwhile
                    os.utime(path, (stamp, stamp))
            self.retained.discard(version)

    def _skew(self) -> None:
        """The newest commit's time a day ahead: a writer whose clock runs fast on a store that
        takes the client's time."""
        versions = self._versions()
        if not versions:
            return
        latest = max(versions)
        ahead = time.time() + DAY_S
        commit = self.log_dir / f"{latest:020d}.json"
        with contextlib.suppress(FileNotFoundError):
            os.utime(commit, (ahead, ahead))

    # -- invariants ----------------------------------------------------------------------------
    def _acked_ids(self) -> set[int]:
        ids: set[int] = set()
        counts: Counter[str] = Counter()
        for writer, engine in self.engines.items():
            path = self.workdir / f"ack-{writer}.txt"
            if not path.exists():
                continue
            for line in path.read_text().splitlines():
                parts = line.split()
                if len(parts) == 2:  # a torn last line was never acknowledged
                    ids.update(ids_of(writer, int(parts[0])))
                    counts[engine] += 1
        self.report.acked_commits = counts
        return ids

    def _oracle(self, versions: list[int]) -> dict[str, Any]:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.soak.oracle",
                str(self.table),
                ",".join(map(str, versions)),
            ],
            cwd=ROOT,
            env=_env(),
            capture_output=True,
            timeout=300,
            check=False,
        )
        lines = [ln for ln in done.stdout.decode().splitlines() if ln.startswith("{")]
        if not lines:
            return {"error": f"oracle exited {done.returncode}: {done.stderr.decode()[-300:]}"}
        result: dict[str, Any] = json.loads(lines[-1])
        return result

    def check(self, *, final: bool = False) -> None:
        from txntable.engine.errors import EngineError
        from txntable.engine.read.snapshot import Snapshot
        from txntable.engine.storage.base import LocalStorage

        violations = self.report.violations
        self.report.invariant_checks += 1
        acked = self._acked_ids()  # read before the table: everything acked is in it
        versions = self._versions()
        commits = {v: f for v, fs in versions.items() for f in fs if f.name.endswith(".json")}
        commits = {v: p for v, p in commits.items() if p.name == f"{v:020d}.json"}
        present = sorted(commits)
        if present and present != list(range(present[0], present[-1] + 1)):
            missing = sorted(set(range(present[0], present[-1] + 1)) - set(present))
            violations.append(f"versions not contiguous: missing {missing[:10]}")
        cutoff = time.time() - RETENTION_S
        retained_now: set[int] = set()
        for version, path in commits.items():
            try:
                data = path.read_bytes()
                mtime = path.stat().st_mtime
            except FileNotFoundError:
                continue
            digest = hashlib.sha1(data).hexdigest()
            if self.hashes.setdefault(version, digest) != digest:
                violations.append(f"commit {version} was overwritten")
                self.hashes[version] = digest
            if mtime > cutoff:
                retained_now.add(version)
        self.report.commits_hashed = len(self.hashes)
        for version in sorted(self.retained - set(present)):
            violations.append(f"commit {version}, inside the retention, was deleted")
        self.retained = retained_now | (self.retained & set(present))
        # versions to load: a seeded sample of the retained ones (a larger one at the end),
        # always the oldest and the newest
        candidates = sorted(self.retained | ({present[-1]} if present else set()))
        size = _FINAL_SAMPLE if final else _LOAD_SAMPLE
        if len(candidates) > size:
            sample = set(self.rng.sample(candidates, size - 2))
            sample |= {candidates[0], candidates[-1]}
            candidates = sorted(sample)
        storage = LocalStorage(str(self.table))
        for version in candidates:
            try:
                Snapshot.load(storage, version)
                self.report.versions_loaded["ours"] += 1
            except EngineError as exc:
                if version in commits and (self.log_dir / commits[version].name).exists():
                    violations.append(f"ours cannot load retained version {version}: {exc}")
        oracle = self._oracle(candidates)
        if "error" in oracle:
            violations.append(f"deltalake cannot load the latest version: {oracle['error']}")
            return
        for version, error in oracle["versions"].items():
            if error is None:
                self.report.versions_loaded["deltalake"] += 1
            elif (self.log_dir / f"{int(version):020d}.json").exists():
                violations.append(f"deltalake cannot load retained version {version}: {error}")
        ids: list[int] = oracle["ids"]
        unique = set(ids)
        if len(unique) != len(ids):
            dupes = [i for i, n in Counter(ids).items() if n > 1]
            violations.append(f"{len(ids) - len(unique)} duplicate rows (resurrected), {dupes[:5]}")
        lost = acked - unique
        if lost:
            violations.append(f"{len(lost)} acknowledged rows are missing, e.g. {sorted(lost)[:5]}")
        self._check_resurrection(storage)

    def _check_resurrection(self, storage: Any) -> None:
        from txntable.engine.errors import EngineError
        from txntable.engine.read.snapshot import Snapshot

        try:
            live = set(Snapshot.load(storage).files().column("path").to_pylist())
        except EngineError as exc:
            self.report.violations.append(f"ours cannot load the latest version: {exc}")
            return
        back = live & self.gone
        if back:
            self.report.violations.append(f"removed files are live again: {sorted(back)[:3]}")
        self.gone |= self.live - live
        self.live = live

    # -- the run -------------------------------------------------------------------------------
    def run(self, steps: int) -> Report:
        from txntable.engine.table import Table

        started = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        Table.create(str(self.table), SCHEMA, partition_by=["p"], properties=PROPERTIES)
        Table.open(str(self.table)).append(
            pa.table({"id": [-1], "writer": ["0"], "p": ["a"]}, SCHEMA)
        )
        for writer in self.engines:
            self._start_writer(writer)
        try:
            time.sleep(1.0)
            for _ in range(steps):
                self.step()
                self.report.steps += 1
                self.check()
        finally:
            for writer in list(self.writers):
                self._kill_writer(writer)
        self.check(final=True)
        self._writer_errors()
        versions = self._versions()
        self.report.final_version = max(versions) if versions else -1
        self.report.seconds = time.monotonic() - started
        return self.report

    def _writer_errors(self) -> None:
        for writer in self.engines:
            path = self.workdir / f"writer-{writer}.log"
            if not path.exists():
                continue
            for line in path.read_text(errors="replace").splitlines():
                if line.startswith("writer ") and ": " in line:
                    kind = line.split(": ", 2)[1]
                    self.report.writer_errors[f"{self.engines[writer]}: {kind}"] += 1
