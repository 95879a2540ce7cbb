"""A run's container as a local process: what the kubelet would start in the Spark image.

Why: no kubelet runs pods here, yet the table must really be compacted by the program the
controller's manifest names. ``job_process`` takes a batch Job as the API server returns it and
runs its container's ``command`` and ``args`` with its ``env`` (values, ``fieldRef``s,
``envFrom`` Secrets), after the kubelet's ``$(VAR)`` expansion. ``driver_process`` does what the
Spark Operator and Spark's submission client do with a SparkApplication: a properties file from
the spec and the image's entrypoint (docker/spark-entrypoint.sh) with the ``driver`` role, as
the driver pod runs it.

What differs from a pod, and only that (``Adaptation`` lists it for each run):

* paths of the image and of mounted volumes: ``/opt/spark`` is PySpark's own distribution
  (as in the image), ``/opt/txntable/jobs/<kind>.py`` are copies of docker/job.py (as the
  Dockerfile makes them), the ``/tmp`` emptyDir and the properties ConfigMap at
  ``/opt/spark/conf`` are directories of the run;
* the pod's network: its IP is 127.0.0.1, and the fixed driver and block-manager ports are free
  ports of this machine (a pod has its own network namespace, this host is shared);
* the Spark master: ``local[N]`` instead of ``k8s://``, since no kubelet would ever run the
  executor pods spark-submit asks the API server for.

The process's stdout and stderr go to one file, as a container runtime keeps a container's log;
the stand-in kubelet (``tests.controlplane.standins``) serves it to the API server's pods/log.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.controlplane.plane import free_port

REPO = Path(__file__).resolve().parents[2]
JOB_SCRIPT = REPO / "docker" / "job.py"
ENTRYPOINT = REPO / "docker" / "spark-entrypoint.sh"
#: run kinds (``txntable.api.common.RunKind``) whose program the image has under /opt/txntable/jobs
JOB_KINDS = ("optimize", "checkpoint", "vacuum")
#: the Spark master that stands in for executor pods (two slots: the machines have two cores)
LOCAL_MASTER = "local[2]"
_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(text: str, env: Mapping[str, str]) -> str:
    """The kubelet's expansion of ``$(VAR)`` in a container's command and args: a defined
    variable is replaced, ``$$`` is a literal ``$``, anything else stays as written."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)

    return _VAR.sub(one, text)


def spark_home() -> Path:
    """PySpark's distribution (bin/spark-submit, jars/): the image's /opt/spark."""
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class Adaptation:
    """Where a container's paths and network differ here; applied to every string."""

    paths: dict[str, str]
    replace: dict[str, str] = field(default_factory=dict)
    #: never rewritten: the table's location is shared storage, the same path in a pod
    keep: tuple[str, ...] = ()

    def __call__(self, text: str) -> str:
        for old, new in self.replace.items():
            text = text.replace(old, new)
        table = {k: k for k in self.keep if k}
        paths = self.paths | table
        if not paths:
            return text
        # one pass, longest path first: a path at a word boundary ("/tmp", "/tmp/x",
        # "dir=/tmp", not "/tmpfoo"), never a host path that replaced one
        names = sorted(paths, key=len, reverse=True)
        pattern = "|".join(re.escape(n) for n in names)
        return re.sub(rf"(?<![\w.-])({pattern})(?![\w.-])", lambda m: paths[m.group(1)], text)


def image_root(workdir: Path) -> Path:
    """A directory standing for the image's /opt/txntable/jobs: docker/job.py under each run
    kind's name, as the Dockerfile copies it."""
    jobs = workdir / "image-jobs"
    if not jobs.is_dir():
        jobs.mkdir(parents=True)
        for kind in JOB_KINDS:
            shutil.copyfile(JOB_SCRIPT, jobs / f"{kind}.py")
    return jobs


def image_env() -> dict[str, str]:
    """The Spark image's ENV (Dockerfile), pointing at this machine's Java, PySpark, Python."""
    env = {
        "PATH": f"{spark_home() / 'bin'}:{Path(sys.executable).parent}:{os.environ['PATH']}",
        "SPARK_HOME": str(spark_home()),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if "JAVA_HOME" in os.environ:
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return env


@dataclass
class LocalPod:
    """One container of a pod, running (or run) as a local process."""

    name: str
    command: list[str]
    env: dict[str, str]
    log: Path
    cwd: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> LocalPod:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.command, env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=self.cwd
            )
        return self

    def wait(self, timeout: float = 600.0) -> int:
        """The exit code (the container's), once the process ends."""
        assert self.proc is not None, "not started"
        return int(self.proc.wait(timeout=timeout))

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def _container_env(
    container: Mapping[str, Any], pod: Mapping[str, Any], secrets: Mapping[str, Mapping[str, str]]
) -> dict[str, str]:
    """A container's environment as the kubelet builds it: ``envFrom`` Secrets first, then
    ``env`` in order (values expanded against what came before, ``fieldRef``s from the pod)."""
    env: dict[str, str] = {}
    for source in container.get("envFrom") or ():
        ref = source.get("secretRef") or {}
        env.update(secrets.get(ref.get("name", ""), {}))
    fields = {
        "metadata.name": pod["metadata"]["name"],
        "metadata.namespace": pod["metadata"]["namespace"],
        "status.podIP": "127.0.0.1",
    }
    for item in container.get("env") or ():
        if "value" in item:
            env[item["name"]] = expand(str(item["value"]), env)
        elif "fieldRef" in (item.get("valueFrom") or {}):
            env[item["name"]] = fields[item["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def job_process(
    job: Mapping[str, Any],
    pod: Mapping[str, Any],
    workdir: Path,
    secrets: Mapping[str, Mapping[str, str]] | None = None,
) -> LocalPod:
    """The Job's (only) container, as the kubelet would start it in ``pod``."""
    spec = job["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    rundir = workdir / pod["metadata"]["name"]
    env = _container_env(container, pod, secrets or {})
    adapt = _adaptation(rundir, spec.get("volumes") or (), container.get("volumeMounts") or (), env)
    command = [expand(a, env) for a in [*container.get("command", []), *container.get("args", [])]]
    local = [adapt(a) for a in command]
    local = _local_master(local)
    name = pod["metadata"]["name"]
    return LocalPod(name, local, image_env() | env, rundir / "container.log", rundir)


def _adaptation(
    rundir: Path,
    volumes: Any,
    mounts: Any,
    env: Mapping[str, str],
    extra: Mapping[str, str] | None = None,
) -> Adaptation:
    """Image paths, emptyDir mounts and the pod's network, as they are on this machine."""
    paths = {
        "/opt/txntable/jobs": str(image_root(rundir.parent)),
        "/opt/spark": str(spark_home()),
    }
    empty = {v["name"] for v in volumes if "emptyDir" in v}
    for mount in mounts:
        if mount["name"] in empty:
            host = rundir / "volumes" / mount["name"]
            host.mkdir(parents=True, exist_ok=True)
            paths[mount["mountPath"]] = str(host)
    paths.update(extra or {})
    network = {
        "spark.driver.port=7078": f"spark.driver.port={free_port()}",
        "spark.blockManager.port=7079": f"spark.blockManager.port={free_port()}",
    }
    return Adaptation(paths, network, keep=(env.get("TXNTABLE_TABLE_URI", ""),))


def _local_master(command: list[str]) -> list[str]:
    """``--master k8s://...`` replaced by ``local[N]`` (no kubelet runs executor pods)."""
    out = list(command)
    for i, arg in enumerate(out[:-1]):
        if arg == "--master" and out[i + 1].startswith("k8s://"):
            out[i + 1] = LOCAL_MASTER
    return out


def driver_process(
    app: Mapping[str, Any],
    workdir: Path,
    secrets: Mapping[str, Mapping[str, str]] | None = None,
) -> LocalPod:
    """The SparkApplication's driver pod: the Spark Operator submits it (spark-submit in
    cluster mode), Spark's submission client writes the run's properties to a ConfigMap mounted
    at /opt/spark/conf and starts the driver pod, whose entrypoint runs spark-submit in client
    mode with them. Here the properties are written from the spec and the image's entrypoint is
    run with the ``driver`` role."""
    meta, spec = app["metadata"], app["spec"]
    driver = spec["driver"]
    pod_name = (app.get("status") or {}).get("driverInfo", {}).get("podName") or (
        f"{meta['name']}-driver"
    )
    pod = {"metadata": {"name": pod_name, "namespace": meta["namespace"]}}
    rundir = workdir / pod_name
    conf_dir = rundir / "volumes" / "spark-conf-volume-driver"
    conf_dir.mkdir(parents=True, exist_ok=True)
    env = _container_env(driver, pod, secrets or {})
    adapt = _adaptation(
        rundir,
        spec.get("volumes") or (),
        driver.get("volumeMounts") or (),
        env,
        extra={"/opt/spark/conf": str(conf_dir)},
    )
    props = {
        "spark.master": LOCAL_MASTER,
        "spark.submit.deployMode": "client",
        "spark.app.name": meta["name"],
        "spark.kubernetes.namespace": meta["namespace"],
        "spark.kubernetes.driver.pod.name": pod_name,
        "spark.driver.memory": str(driver.get("memory", "1g")),
        "spark.driver.cores": str(driver.get("cores", 1)),
        "spark.submit.pyFiles": "",
        **{str(k): str(v) for k, v in (spec.get("sparkConf") or {}).items()},
    }
    (conf_dir / "spark.properties").write_text(
        "".join(f"{k}={adapt(v)}\n" for k, v in sorted(props.items()))
    )
    env |= {"SPARK_DRIVER_BIND_ADDRESS": "127.0.0.1", "SPARK_CONF_DIR": str(conf_dir)}
    main = str(spec["mainApplicationFile"])
    command = [
        str(ENTRYPOINT),
        "driver",
        "--properties-file",
        "/opt/spark/conf/spark.properties",
        "--class",
        "org.apache.spark.deploy.PythonRunner",
        main,
        *[str(a) for a in spec.get("arguments") or ()],
    ]
    local = [adapt(a) for a in command]
    return LocalPod(pod_name, local, image_env() | env, rundir / "container.log", rundir)
