"""The Spark image's entrypoint (docker/spark-entrypoint.sh) turns Spark on Kubernetes' pod
roles into the right commands: run against stand-in ``java`` and ``spark-submit`` programs that
print their arguments, since there is no image or cluster here."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ENTRYPOINT = Path(__file__).resolve().parents[2] / "docker" / "spark-entrypoint.sh"
ECHO = '#!/bin/sh\nfor a in "$0" "$@"; do printf "%s\\n" "$a"; done\n'


def _fake(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(ECHO)
    path.chmod(0o755)


def run(tmp_path: Path, args: list[str], env: dict[str, str]) -> list[str]:
    _fake(tmp_path / "java" / "bin" / "java")
    _fake(tmp_path / "spark" / "bin" / "spark-submit")
    base = {"PATH": os.environ["PATH"], "JAVA_HOME": str(tmp_path / "java")}
    base["SPARK_HOME"] = str(tmp_path / "spark")
    out = subprocess.run(
        [str(ENTRYPOINT), *args], env={**base, **env}, capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines()


def test_driver_runs_spark_submit_in_client_mode(tmp_path: Path) -> None:
    lines = run(
        tmp_path,
        ["driver", "--properties-file", "/opt/spark/conf/spark.properties", "local:///a b.py"],
        {"SPARK_DRIVER_BIND_ADDRESS": "10.0.0.7"},
    )
    assert lines == [
        str(tmp_path / "spark" / "bin" / "spark-submit"),
        "--conf",
        "spark.driver.bindAddress=10.0.0.7",
        "--deploy-mode",
        "client",
        "--properties-file",
        "/opt/spark/conf/spark.properties",
        "local:///a b.py",
    ]


def test_executor_runs_the_kubernetes_backend_with_ordered_java_options(tmp_path: Path) -> None:
    env = {
        "SPARK_JAVA_OPT_10": "-Dten=10",
        "SPARK_JAVA_OPT_2": "-Dtwo=with space",
        "SPARK_JAVA_OPT_0": "-Dzero=0",
        "SPARK_EXECUTOR_MEMORY": "2g",
        "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@driver:7078",
        "SPARK_EXECUTOR_ID": "3",
        "SPARK_EXECUTOR_CORES": "2",
        "SPARK_APPLICATION_ID": "spark-app",
        "SPARK_EXECUTOR_POD_IP": "10.0.0.8",
        "SPARK_RESOURCE_PROFILE_ID": "0",
        "SPARK_EXECUTOR_POD_NAME": "opt-x-exec-3",
    }
    lines = run(tmp_path, ["executor"], env)
    assert lines[0] == str(tmp_path / "java" / "bin" / "java")
    assert lines[1:4] == ["-Dzero=0", "-Dtwo=with space", "-Dten=10"]
    assert lines[4:8] == ["-Xms2g", "-Xmx2g", "-cp", f"{tmp_path / 'spark'}/jars/*"]
    assert lines[8] == "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
    flags = dict(zip(lines[9::2], lines[10::2], strict=True))
    assert flags == {
        "--driver-url": env["SPARK_DRIVER_URL"],
        "--executor-id": "3",
        "--cores": "2",
        "--app-id": "spark-app",
        "--hostname": "10.0.0.8",
        "--resourceProfileId": "0",
        "--podName": "opt-x-exec-3",
    }


def test_missing_executor_settings_fail_loudly(tmp_path: Path) -> None:
    with pytest.raises(subprocess.CalledProcessError) as err:
        run(tmp_path, ["executor"], {"SPARK_EXECUTOR_MEMORY": "1g"})
    assert "SPARK_DRIVER_URL" in err.value.stderr


def test_other_commands_run_as_given(tmp_path: Path) -> None:
    assert run(tmp_path, ["/bin/echo", "hello"], {}) == ["hello"]


@pytest.mark.parametrize("kind", ["optimize", "checkpoint"])
def test_job_shim_runs_the_package_module(tmp_path: Path, kind: str) -> None:
    """docker/job.py copied as /opt/txntable/jobs/<kind>.py runs ``txntable.jobs.<kind>``."""
    import shutil
    import sys

    shim = tmp_path / f"{kind}.py"
    shutil.copyfile(ENTRYPOINT.parent / "job.py", shim)
    out = subprocess.run(
        [sys.executable, str(shim), "--help"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("usage:")
    bad = subprocess.run(
        [sys.executable, str(shim), "--no-such-flag"], check=False, capture_output=True
    )
    assert bad.returncode == 2  # argparse of the job module itself refused it
