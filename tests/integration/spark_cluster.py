"""A real Spark standalone cluster on 127.0.0.1: one master and N workers, each its own JVM.

Started from PySpark's own distribution (``$SPARK_HOME/bin/spark-class``), as a platform team
would run one, so jobs run with executors in JVMs (and Python workers) of their own, apart from
the driver: nothing is shared through one process the way ``local[N]`` shares it.

* Ports: every daemon binds port 0 on 127.0.0.1 (the system picks a free one, no race with
  other processes); the master's log says which it got. Its REST submission server (port 6066,
  fixed) is off.
* Ready when the master's ``/json/`` lists every worker ``ALIVE``; a daemon that exits or a
  cluster that is not ready within the timeout fails the start with the tail of its log, and
  what was started is stopped.
* Logs: each daemon's output goes to ``<workdir>/logs/<name>.log``; executors log into the
  workers' work directories (``<workdir>/work-<n>/<app>/<executor>/stderr``). They stay on disk
  for a failed test to be read (``SparkCluster.log_tail``).
* Nothing survives: each daemon is the leader of its own process group (its executors join it;
  PySpark's Python worker daemon makes a group of its own under its executor) and is started
  with ``PR_SET_PDEATHSIG``, so it gets SIGKILL when the process that started it dies, even by
  SIGKILL; an executor ends when its worker goes, its Python workers when it goes. ``stop``
  sends SIGTERM to every group of the cluster's process tree, then SIGKILL, and returns whatever
  still runs (a test asserts it is nothing);
  ``python -m tests.integration.spark_cluster`` runs a cluster until interrupted (the tests of
  Ctrl-C and of a killed parent use it).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_PR_SET_PDEATHSIG = 1
START_TIMEOUT_S = 120.0


def spark_home() -> Path:
    """PySpark's distribution: ``bin/spark-class``, ``jars/``."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    """A port nothing listens at right now (for tests that need one nobody answers at)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    os.setsid()
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class SparkCluster:
    """A running cluster: its master URL and the daemons' processes."""

    workdir: Path
    master_url: str
    web_url: str
    workers: int
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    #: seconds from the first spawn to every worker ALIVE
    start_seconds: float = 0.0

    @property
    def log_dir(self) -> Path:
        return self.workdir / "logs"

    def pgids(self) -> set[int]:
        """The process groups of the daemons (their executors and Python workers join them)."""
        return {p.pid for p in self.procs.values()}

    def state(self) -> dict[str, Any]:
        """The master's JSON status (workers, applications)."""
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as answer:
            doc: dict[str, Any] = json.load(answer)
            return doc

    def alive_workers(self) -> int:
        try:
            state = self.state()
        except (OSError, ValueError):
            return 0
        if state.get("url") != self.master_url:  # pragma: no cover - not our master's UI
            raise RuntimeError(f"{self.web_url} serves {state.get('url')}, not {self.master_url}")
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def log_tail(self, chars: int = 4000) -> str:
        """The end of every daemon's and executor's log, for a failing test's message."""
        out = []
        for path in sorted(self.workdir.rglob("*")):
            if path.is_file() and (path.suffix == ".log" or path.name == "stderr"):
                text = path.read_text(errors="replace")[-chars:]
                out.append(f"--- {path.relative_to(self.workdir)}\n{text}")
        return "\n".join(out)

    def executor_logs(self) -> list[Path]:
        """The executors' stderr files: one per executor any application ran here."""
        return sorted(self.workdir.glob("work-*/app-*/*/stderr"))

    def job_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """An environment for a job process on this cluster: this interpreter for the Python
        workers (a standalone master does not choose one), the driver bound to 127.0.0.1, the
        cluster's ``spark-defaults.conf``."""
        env = dict(os.environ if base is None else base)
        env.update(
            {
                "PYSPARK_PYTHON": sys.executable,
                "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_CONF_DIR": str(self.workdir / "conf"),  # JAVA_OPTIONS for its JVMs
            }
        )
        return env


#: Every JVM of the cluster and its jobs compiles with C1 only and collects with the serial
#: collector: on two shared cores that starts a JVM noticeably faster, and a test's work is too
#: small for C2 to pay off. Only speed changes; the processes are the same.
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _env(workdir: Path) -> dict[str, str]:
    conf = workdir / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    # read by the jobs' spark-submit (driver and executors), not by the daemons; a job's first
    # stage waits until both workers' executors registered, so every job uses both
    (conf / "spark-defaults.conf").write_text(
        f"spark.driver.extraJavaOptions {JAVA_OPTIONS}\n"
        f"spark.executor.extraJavaOptions {JAVA_OPTIONS}\n"
        "spark.scheduler.minRegisteredResourcesRatio 1.0\n"
    )
    env = dict(os.environ)
    env.update(
        {
            "SPARK_HOME": str(spark_home()),
            "SPARK_CONF_DIR": str(conf),  # ours only: nothing from the machine's Spark settings
            "SPARK_DAEMON_JAVA_OPTS": JAVA_OPTIONS,
            # the REST submission server would take port 6066 (fixed): nothing here uses it
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": "256m",  # master and worker daemons; executors get 1g
            "SPARK_NO_DAEMONIZE": "1",
            "PYSPARK_PYTHON": sys.executable,
        }
    )
    return env


def _spawn(cluster: SparkCluster, name: str, args: list[str], env: dict[str, str]) -> None:
    cluster.log_dir.mkdir(parents=True, exist_ok=True)
    with (cluster.log_dir / f"{name}.log").open("wb") as log:
        cluster.procs[name] = subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=cluster.workdir,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - no threads start before exec
        )


class ClusterStartError(RuntimeError):
    """The cluster did not come up; ``pgids`` are the process groups it had started (stopped)."""

    def __init__(self, message: str, pgids: set[int]) -> None:
        super().__init__(message)
        self.pgids = pgids


def start(
    workdir: Path,
    workers: int = 2,
    timeout: float = START_TIMEOUT_S,
    worker_options: Sequence[str] = (),
) -> SparkCluster:
    """Start a master and ``workers`` workers (1 core, 1 GiB each); wait until all are ALIVE.
    ``worker_options`` go to each worker's command line after ours."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = _env(workdir)
    cluster = SparkCluster(workdir=workdir, master_url="", web_url="", workers=workers)
    began = time.monotonic()

    def check(deadline_s: float) -> None:
        for name, proc in cluster.procs.items():
            if proc.poll() is not None:
                raise ClusterStartError(
                    f"Spark {name} exited with status {proc.returncode} while starting:\n"
                    + cluster.log_tail(),
                    cluster.pgids(),
                )
        if time.monotonic() - began > deadline_s:
            raise ClusterStartError(
                f"the Spark cluster was not ready within {deadline_s:.0f} s:\n"
                + cluster.log_tail(),
                cluster.pgids(),
            )
        time.sleep(0.1)

    try:
        # port 0: the master binds free ports itself (no race with other processes picking
        # "free" ports) and says which in its log
        _spawn(
            cluster,
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
            ],
            env,
        )
        while not (ports := _bound_ports(cluster.log_dir / "master.log")):
            check(timeout)
        cluster.master_url = f"spark://127.0.0.1:{ports[0]}"
        cluster.web_url = f"http://127.0.0.1:{ports[1]}"
        for n in range(workers):
            work = workdir / f"work-{n}"
            work.mkdir(exist_ok=True)
            _spawn(
                cluster,
                f"worker-{n}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
                    *("--cores", "1", "--memory", "1g", "--work-dir", str(work)),
                    *worker_options,
                    cluster.master_url,
                ],
                env,
            )
        while cluster.alive_workers() < workers:
            check(timeout)
    except BaseException:
        stop(cluster)
        raise
    cluster.start_seconds = time.monotonic() - began
    return cluster


_BOUND = re.compile(r"Successfully started service '(sparkMaster|MasterUI)' on port (\d+)")


def _bound_ports(log: Path) -> tuple[int, int] | None:
    """(RPC port, web UI port) the master's log reports, once it reports both."""
    try:
        found = dict(_BOUND.findall(log.read_text(errors="replace")))
    except OSError:
        return None
    if "sparkMaster" in found and "MasterUI" in found:
        return int(found["sparkMaster"]), int(found["MasterUI"])
    return None


@dataclass(frozen=True)
class Proc:
    """A live process as /proc shows it; ``started`` (clock ticks after boot) tells a pid
    that was reused apart."""

    pid: int
    ppid: int
    pgid: int
    started: int
    command: str

    def __str__(self) -> str:
        return f"{self.pid} {self.command[:300]}"


def _processes() -> list[Proc]:
    """Every live process (zombies aside)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ... starttime (22nd): comm may hold spaces, split after ')'
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z":
            found.append(
                Proc(int(entry.name), int(fields[1]), int(fields[2]), int(fields[19]), command)
            )
    return found


def processes_in(pgids: set[int]) -> list[str]:
    """``pid command`` of every live process in one of ``pgids``."""
    return [str(p) for p in _processes() if p.pgid in pgids]


def cluster_processes(cluster: SparkCluster) -> list[Proc]:
    """The daemons' process groups and every descendant of the daemons: PySpark's Python
    worker daemon puts itself in a group of its own, under the executor."""
    procs = _processes()
    children: dict[int, list[Proc]] = {}
    for proc in procs:
        children.setdefault(proc.ppid, []).append(proc)
    groups = cluster.pgids()
    found = {p.pid: p for p in procs if p.pgid in groups}
    todo = list(found)
    while todo:
        for child in children.get(todo.pop(), []):
            if child.pid not in found:
                found[child.pid] = child
                todo.append(child.pid)
    return list(found.values())


def _alive(tracked: list[Proc]) -> list[str]:
    now = {(p.pid, p.started) for p in _processes()}
    return [str(p) for p in tracked if (p.pid, p.started) in now]


def _signal_all(tracked: list[Proc], sig: signal.Signals) -> None:
    for pgid in {p.pgid for p in tracked}:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)


def stop(cluster: SparkCluster, grace: float = 15.0) -> list[str]:
    """SIGTERM every process of the cluster (``cluster_processes``: daemons, executors, Python
    workers), SIGKILL what remains after ``grace`` seconds; returns what still lives after
    that (nothing, unless something is badly wrong)."""
    tracked = cluster_processes(cluster)
    _signal_all(tracked, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while _alive(tracked) and time.monotonic() < deadline:
        time.sleep(0.1)
    _signal_all(cluster_processes(cluster) + tracked, signal.SIGKILL)
    for proc in cluster.procs.values():
        with suppress(subprocess.TimeoutExpired):  # SIGKILL was sent
            proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while _alive(tracked) and time.monotonic() < deadline:
        time.sleep(0.1)
    survivors = _alive(tracked)
    return survivors + [p for p in processes_in(cluster.pgids()) if p not in survivors]


@contextmanager
def running(workdir: Path, workers: int = 2) -> Iterator[SparkCluster]:
    """A cluster for the ``with`` block; stopped on the way out, whatever the way."""
    cluster = start(workdir, workers)
    try:
        yield cluster
    finally:
        survivors = stop(cluster)
        if survivors:
            raise RuntimeError(f"Spark processes survived the cluster's stop: {survivors}")


def main() -> int:
    """Run a cluster until SIGINT or SIGTERM; print its state as one JSON line once ready."""
    workdir = Path(sys.argv[1])
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with running(workdir, workers) as cluster:
        print(
            json.dumps(
                {
                    "master": cluster.master_url,
                    "pgids": sorted(cluster.pgids()),
                    "seconds": cluster.start_seconds,
                }
            ),
            flush=True,
        )
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    print(json.dumps({"stopped": True}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
