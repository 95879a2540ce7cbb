"""The delta-spark environment: its own virtualenv and jars, built once per machine and version.

delta-spark (Delta Lake's reference implementation) supports no PySpark the product uses
(PySpark 4.3): delta-spark 4.4 needs ``pyspark>=4.0.1,<=4.2.0`` and its jars are built per Spark
release, a patch mismatch failing with ``NoSuchMethodError``. So it lives apart, in
``~/.cache/txntable/delta-spark-<delta>-spark-<spark>/``:

* ``venv/``: ``pyspark==SPARK`` and the ``delta-spark`` Python package of the same release;
* ``jars/``: ``io.delta:delta-spark_<spark minor>_2.13`` and its runtime dependencies, fetched
  once by Maven (``mvn dependency:copy-dependencies`` from a pom written here) and passed to the
  session as ``spark.jars`` (no Ivy at test time). Jars whose artifact Spark already ships
  (Jackson, Parquet, Hadoop, Scala ...) are left out: the session's own classes win anyway, and
  two versions of one artifact on a classpath is a trap;
* ``READY``: written last, so a half-built cache is built again.

Maven Central serves delta-spark 4.4.0 as the newest build for Spark 4.2 (4.4.1 is on PyPI only),
so the Python package is pinned to the jars' release. ``python -m tests.deltaspark.env`` (the
Makefile's ``deltaspark`` target) builds it; a file lock keeps two builders (two worktrees, two
make runs) from racing; ``--print`` prints the paths as JSON for other tools (a Spark cluster
test can reuse the venv and jars).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

DELTA_VERSION = "4.4.0"
SPARK_VERSION = "4.2.0"
SCALA_VERSION = "2.13"
CACHE_ROOT = Path(os.environ.get("TXNTABLE_CACHE", Path.home() / ".cache" / "txntable"))


@dataclass(frozen=True)
class DeltaSparkEnv:
    """Where one delta-spark environment lives and what is in it."""

    root: Path

    @property
    def python(self) -> Path:
        return self.root / "venv" / "bin" / "python"

    @property
    def jars_dir(self) -> Path:
        return self.root / "jars"

    @property
    def ready(self) -> bool:
        return (self.root / "READY").is_file() and self.python.is_file()

    def jars(self) -> list[Path]:
        return sorted(self.jars_dir.glob("*.jar"))

    def describe(self) -> dict[str, str | list[str]]:
        return {
            "root": str(self.root),
            "python": str(self.python),
            "jars": [str(p) for p in self.jars()],
            "delta": DELTA_VERSION,
            "spark": SPARK_VERSION,
        }


def default_env() -> DeltaSparkEnv:
    return DeltaSparkEnv(CACHE_ROOT / f"delta-spark-{DELTA_VERSION}-spark-{SPARK_VERSION}")


def artifact() -> str:
    minor = ".".join(SPARK_VERSION.split(".")[:2])
    return f"delta-spark_{minor}_{SCALA_VERSION}"


_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>txntable.tests</groupId>
  <artifactId>delta-spark-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>io.delta</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


def _artifact_name(jar: str) -> str:
    """``jackson-core-2.13.5.jar`` -> ``jackson-core`` (the name without its version)."""
    return re.sub(r"-\d[\w.\-]*\.jar$", "", jar)


def _run(cmd: list[str], cwd: Path | None = None) -> None:
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, cwd=cwd, check=True)


def _build_venv(env: DeltaSparkEnv) -> None:
    venv = env.root / "venv"
    shutil.rmtree(venv, ignore_errors=True)
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", str(venv)])
    pip = [str(env.python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    _run([*pip, f"pyspark=={SPARK_VERSION}", f"delta-spark=={DELTA_VERSION}"])


def _spark_jar_names(env: DeltaSparkEnv) -> set[str]:
    found = subprocess.run(
        [str(env.python), "-c", "import pyspark, os; print(os.path.dirname(pyspark.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    )
    spark_jars = Path(found.stdout.strip()) / "jars"
    return {_artifact_name(p.name) for p in spark_jars.glob("*.jar")}


def _fetch_jars(env: DeltaSparkEnv) -> None:
    work = env.root / "maven"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "pom.xml").write_text(_POM.format(artifact=artifact(), version=DELTA_VERSION))
    every = work / "jars"
    _run(
        [
            "mvn",
            "-B",
            "-q",
            "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={every}",
        ],
        cwd=work,
    )
    spark_has = _spark_jar_names(env)
    shutil.rmtree(env.jars_dir, ignore_errors=True)
    env.jars_dir.mkdir()
    for jar in sorted(every.glob("*.jar")):
        if _artifact_name(jar.name) not in spark_has:
            shutil.copy2(jar, env.jars_dir / jar.name)
    if not any(p.name.startswith(artifact()) for p in env.jars()):
        raise RuntimeError(f"Maven fetched no {artifact()} jar into {every}")


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure(env: DeltaSparkEnv | None = None) -> DeltaSparkEnv:
    """Build the environment unless it is already there; returns it."""
    env = env or default_env()
    if env.ready:
        return env
    with _locked(env.root):
        if env.ready:
            return env
        started = time.monotonic()
        env.root.mkdir(parents=True, exist_ok=True)
        _build_venv(env)
        _fetch_jars(env)
        (env.root / "READY").write_text(json.dumps(env.describe(), indent=1) + "\n")
        print(
            f"delta-spark {DELTA_VERSION} (Spark {SPARK_VERSION}) ready in {env.root} "
            f"after {time.monotonic() - started:.0f} s",
            file=sys.stderr,
        )
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.deltaspark.env", description=__doc__)
    parser.add_argument("--print", action="store_true", help="print the paths as JSON")
    args = parser.parse_args(argv)
    env = ensure()
    if args.print:
        print(json.dumps(env.describe(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
