"""The local backend: each run is a subprocess (Spark ``local[N]``) under a runs directory.

Used by the embedded default (``txntable run --local``), the CLI and the tests. A run lives
in ``<runs_dir>/<namespace>/<name>/``::

    request.json   name, labels, annotations, command, creation time (written before start)
    pid.json       pid and kernel start time of the supervisor (the process-group leader)
    stdout.log     the job's output; its last JSON line is the run's result
    stderr.log     the job's logs (a failed run's reason is the result's ``error``, else the
                   stderr line that says it, never Spark's log noise: ``failure_detail``)
    exit.json      exit code and finish time, written atomically by the supervisor

The directory is created by an atomic rename, so a second ``launch`` of the same run finds it
and adopts the run (the local analogue of 409). A supervisor process (``_local_runner.py``)
waits for the job and records its exit code, so a restarted controller finds every run, its
state and its result from the files alone. ``delete`` ends the whole process group.
Credentials: a local run inherits the controller's environment; ``secret_ref`` is not read.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from txntable.api.common import Backend, RunKind
from txntable.api.constants import LABEL_TABLE
from txntable.arrow_pool import one_shot_environment
from txntable.launch.base import Launcher, check_adoptable
from txntable.launch.errors import PermanentLaunchError, RunNotFoundError
from txntable.launch.names import check_dns_label, label_value
from txntable.launch.run import (
    RunRequest,
    RunState,
    RunStatus,
    failure_detail,
    last_json_line,
    out_of_memory,
    result_error,
)
from txntable.processes import stop_marked

log = logging.getLogger(__name__)

RUNNER: Final = Path(__file__).with_name("_local_runner.py")
ENV_SPARK_MASTER: Final = "TXNTABLE_SPARK_MASTER"
#: Every process of a local run carries its run directory in this variable (``processes``):
#: how ``stop_started`` finds what a job left after its supervisor ended.
ENV_RUN: Final = "TXNTABLE_LOCAL_RUN"
ENV_SPARK_CONF: Final = "TXNTABLE_SPARK_CONF"
#: How long a stopped run's job gets to end its Spark session and exit (``stop_started``):
#: its JVM stops Spark and deletes its temporary files first.
STOP_SECONDS: Final = 30.0
#: A run directory without a pid this long after creation was never started (crash).
START_TIMEOUT: Final = timedelta(seconds=60)
TAIL_BYTES: Final = 64 * 1024


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _write_json(path: Path, value: Mapping[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - TAIL_BYTES))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _proc_stat(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat (state, ppid, pgrp, ...), or None without /proc."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()


def _start_ticks(pid: int) -> str | None:
    fields = _proc_stat(pid)
    return fields[19] if fields and len(fields) > 19 else None


def _alive(pid: int, ticks: str | None) -> bool:
    """Whether ``pid`` still runs and is the same process (not a zombie, not a reused pid)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = _proc_stat(pid)
    if fields is None:
        return True  # no /proc to look closer: trust kill(0)
    if fields[0] == "Z":
        return False
    return ticks is None or (len(fields) > 19 and fields[19] == ticks)


def _group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is left in process group ``pgid``."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for entry in proc.iterdir():
        if entry.name.isdigit():
            fields = _proc_stat(int(entry.name))
            if fields and len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
                return True
    return False


class LocalLauncher(Launcher):
    """Runs ``python -m txntable.jobs.<kind> ARGS`` as supervised local processes."""

    backend = Backend.LOCAL

    def __init__(
        self,
        runs_dir: Path,
        *,
        python: str = sys.executable,
        modules: Mapping[RunKind, str] | None = None,
        env: Mapping[str, str] | None = None,
        grace_seconds: float = 10.0,
    ) -> None:
        self.runs_dir = Path(runs_dir)
        self.python = python
        self.modules = dict(modules or {})
        self.env = dict(env or {})
        self.grace_seconds = grace_seconds
        self._children: dict[Path, subprocess.Popen[bytes]] = {}

    def _dir(self, namespace: str, name: str) -> Path:
        check_dns_label(namespace, "namespace")
        check_dns_label(name, "run name")  # also keeps paths inside runs_dir
        return self.runs_dir / namespace / name

    def command(self, req: RunRequest) -> list[str]:
        """The job's command line."""
        module = self.modules.get(req.kind, f"txntable.jobs.{req.kind.value}")
        return [self.python, "-m", module, *req.args]

    def environment(self, req: RunRequest) -> dict[str, str]:
        """The job's environment: ours, then the run's (Spark ``local[N]`` settings) and the
        run's marker (``ENV_RUN``)."""
        threads = req.executor_instances * req.executor.cores
        conf = {"spark.driver.memory": req.driver.spark_memory, **req.spark_conf}
        return {
            **one_shot_environment(os.environ),  # the run pods' Arrow pool (txntable.arrow_pool)
            **self.env,
            **req.job_env,
            ENV_SPARK_MASTER: f"local[{threads}]",
            ENV_SPARK_CONF: json.dumps(conf, sort_keys=True),
            ENV_RUN: str(self._dir(req.namespace, req.name).resolve()),
        }

    def launch(self, req: RunRequest) -> RunStatus:
        final = self._dir(req.namespace, req.name)
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = final.parent / f".{req.name}.{uuid.uuid4().hex}"
        staging.mkdir()
        command = self.command(req)
        record = {
            "name": req.name,
            "namespace": req.namespace,
            "labels": req.labels,
            "annotations": req.annotations,
            "command": command,
            "created": datetime.now(UTC).isoformat(),
        }
        _write_json(staging / "request.json", record)
        try:
            os.rename(staging, final)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            if not final.is_dir():
                raise
            existing = self.status(req.namespace, req.name)
            check_adoptable(existing, req)
            log.info("adopted existing local run", extra={"run": req.name, "table": req.table})
            return replace(existing, adopted=True)
        deadline = ["--deadline", str(req.deadline_seconds)] if req.deadline_seconds else []
        try:
            proc = subprocess.Popen(
                [self.python, str(RUNNER), *deadline, str(final), "--", *command],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=self.environment(req),
                start_new_session=True,
            )
        except OSError as exc:
            _write_json(final / "exit.json", {"exitCode": -1, "error": str(exc)})
            raise PermanentLaunchError(
                f"cannot start {command[0]}: {exc}", reason="StartFailed"
            ) from exc
        self._children[final] = proc
        started = datetime.now(UTC).isoformat()
        _write_json(
            final / "pid.json",
            {"pid": proc.pid, "startTicks": _start_ticks(proc.pid), "started": started},
        )
        log.info("launched local run", extra={"run": req.name, "table": req.table})
        return self.status(req.namespace, req.name)

    def status(self, namespace: str, name: str) -> RunStatus:
        run_dir = self._dir(namespace, name)
        record = _read_json(run_dir / "request.json")
        if record is None:
            raise RunNotFoundError(namespace, name)
        base = RunStatus(
            name=name,
            namespace=namespace,
            state=RunState.PENDING,
            created=_time(record.get("created")),
            labels=dict(record.get("labels") or {}),
            annotations=dict(record.get("annotations") or {}),
        )
        child = self._children.get(run_dir)
        if child is not None and child.poll() is not None:
            self._children.pop(run_dir, None)  # reaped; exit.json tells the outcome
        pid_info = _read_json(run_dir / "pid.json")
        if pid_info is None:
            exited = self._finished(run_dir, base)
            if exited is not None:
                return exited
            if base.created and datetime.now(UTC) - base.created > START_TIMEOUT:
                return replace(base, state=RunState.FAILED, message="the run never started")
            return replace(base, message="starting")
        started = _time(pid_info.get("started"))
        base = replace(base, started=started)
        exited = self._finished(run_dir, base)
        if exited is not None:
            return exited
        pid = int(pid_info.get("pid") or 0)
        if pid > 0 and _alive(pid, pid_info.get("startTicks")):
            return replace(base, state=RunState.RUNNING)
        exited = self._finished(run_dir, base)  # it may have ended between the two reads
        if exited is not None:
            return exited
        return replace(
            base,
            state=RunState.FAILED,
            message="the run's process ended without recording an exit code",
        )

    def _finished(self, run_dir: Path, base: RunStatus) -> RunStatus | None:
        exit_info = _read_json(run_dir / "exit.json")
        if exit_info is None:
            return None
        code = exit_info.get("exitCode")
        result = last_json_line(_tail(run_dir / "stdout.log"))
        finished = _time(exit_info.get("finished"))
        if code == 0:
            return replace(
                base, state=RunState.SUCCEEDED, result=result, finished=finished, message=""
            )
        stderr = _tail(run_dir / "stderr.log")
        errors = [ln for ln in stderr.splitlines() if ln.strip()]
        # why: the supervisor's own reason (a deadline), the job's result line, its stderr
        detail = exit_info.get("error") or result_error(result) or failure_detail(stderr)
        message = f"exit code {code}" + (f": {detail}" if detail else "")
        # the kernel's OOM killer sends SIGKILL (-9; 137 through a shell); a deadline kill
        # says so in ``error``; Python's MemoryError and the JVM's OutOfMemoryError in stderr
        oom = not exit_info.get("error") and (
            code in (-9, 137) or out_of_memory("\n".join(errors[-50:]))
        )
        return replace(
            base,
            state=RunState.FAILED,
            result=result,
            finished=finished,
            message=message[:1024],
            out_of_memory=bool(oom),
        )

    def delete(self, namespace: str, name: str) -> None:
        run_dir = self._dir(namespace, name)
        if not run_dir.is_dir():
            return
        pid_info = _read_json(run_dir / "pid.json") or {}
        pid = int(pid_info.get("pid") or 0)
        if pid > 0 and _alive(pid, pid_info.get("startTicks")):
            self._stop_group(pid, self._children.get(run_dir))
        stop_marked(ENV_RUN, str(run_dir.resolve()), grace_seconds=self.grace_seconds)
        self._children.pop(run_dir, None)
        shutil.rmtree(run_dir, ignore_errors=True)

    def _stop_group(self, pgid: int, child: subprocess.Popen[bytes] | None) -> None:
        for sig, wait in ((signal.SIGTERM, self.grace_seconds), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if child is not None:
                    child.poll()
                if not _group_alive(pgid):
                    return
                time.sleep(0.05)
        log.warning("process group %d survived SIGKILL", pgid)

    def stop_started(self, timeout: float = STOP_SECONDS) -> list[str]:
        """Stop the runs this launcher started that still run (``txntable run --local`` ends:
        whatever it started, it stops). Each supervisor gets SIGTERM, forwards it to its job
        and records the exit code, so the run's directory tells it was stopped; after
        ``timeout`` s the group gets SIGKILL (its exit code recorded as -9, with the
        reason), and any process still carrying the run's marker (a Python worker of the job's
        Spark, in a group of its own) is stopped too.
        Returns ``namespace/name`` of each run stopped. Runs adopted from an earlier process
        are left alone."""
        stopped = []
        for run_dir, child in list(self._children.items()):
            if child.poll() is not None:
                continue
            try:
                child.send_signal(signal.SIGTERM)
                child.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                if not (run_dir / "exit.json").exists():  # the supervisor died before it wrote
                    _write_json(
                        run_dir / "exit.json",
                        {
                            "exitCode": -signal.SIGKILL,
                            "finished": datetime.now(UTC).isoformat(),
                            "error": f"did not stop within {timeout:g} s of SIGTERM; killed",
                        },
                    )
            stop_marked(ENV_RUN, str(run_dir.resolve()), grace_seconds=self.grace_seconds)
            self._children.pop(run_dir, None)
            stopped.append(f"{run_dir.parent.name}/{run_dir.name}")
        return stopped

    def list_runs(self, namespace: str, table: str) -> list[RunStatus]:
        check_dns_label(namespace, "namespace")
        folder = self.runs_dir / namespace
        if not folder.is_dir():
            return []
        want = label_value(table)
        runs = []
        for entry in sorted(folder.iterdir()):
            if entry.name.startswith(".") or not entry.is_dir():
                continue
            record = _read_json(entry / "request.json") or {}
            if (record.get("labels") or {}).get(LABEL_TABLE) == want:
                try:
                    runs.append(self.status(namespace, entry.name))
                except (RunNotFoundError, PermanentLaunchError):
                    continue  # deleted meanwhile, or not a run directory
        return sorted(runs, key=lambda r: (r.created.timestamp() if r.created else 0.0, r.name))


def _time(value: object) -> datetime | None:
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    return None
