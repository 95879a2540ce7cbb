"""What a maintenance run is (``RunRequest``) and what became of it (``RunState``, ``RunStatus``).

``RunRequest`` is the one typed input of every launcher: it is validated when built (a bad
request raises ``PermanentLaunchError`` and nothing is created), carries only non-secret
values (credentials stay in the Secret named by ``secret_ref``) and derives the run's
deterministic name, labels and annotations. ``RunStatus`` is the launcher-neutral view of a
run that the controller reads: state, message, the job's JSON result line when known, times.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from txntable.api.common import Backend, RunKind, is_reserved_spark_conf
from txntable.api.constants import (
    ANNOTATION_ATTEMPT,
    ANNOTATION_POLICY,
    ANNOTATION_SCHEDULED_TIME,
    ANNOTATION_SIZING,
    ANNOTATION_TABLE,
    LABEL_KIND,
    LABEL_MANAGED_BY,
    LABEL_POLICY,
    LABEL_RUN,
    LABEL_TABLE,
    MANAGED_BY,
)
from txntable.launch.errors import PermanentLaunchError
from txntable.launch.names import check_dns_label, check_dns_subdomain, label_value, run_name
from txntable.launch.sizing import Sizing

# Environment every job process receives (non-secret; credentials come from the Secret).
ENV_RUN_ID: Final = "TXNTABLE_RUN_ID"
ENV_RUN_KIND: Final = "TXNTABLE_RUN_KIND"
ENV_TABLE_NAME: Final = "TXNTABLE_TABLE_NAME"  # namespace/name: the jobs' metrics label
ENV_TABLE_URI: Final = "TXNTABLE_TABLE_URI"
ENV_STORAGE_OPTIONS: Final = "TXNTABLE_STORAGE_OPTIONS"

# Option keys that name a credential (same rule as the CRDs' CEL rule on option maps).
SECRET_KEY: Final = re.compile(
    r"(?i)(secret|passw|token|credential|private[._-]?key|access[._-]?key"
    r"|account[._-]?key|session[._-]?key)"
)
MIB: Final = 1024 * 1024


def parse_backend(value: str) -> Backend:
    """The backend ``value`` names, in any case (the CRD's ``SparkApplication``, the
    configuration's ``sparkapplication``); an unknown name is a permanent launch error."""
    try:
        return Backend(value)
    except ValueError:
        raise PermanentLaunchError(
            f"unknown backend {value!r} (one of {', '.join(b.config_name for b in Backend)})",
            reason="InvalidBackend",
        ) from None


@dataclass(frozen=True, kw_only=True)
class Resources:
    """CPU cores and memory (bytes, JVM heap) of the driver or of one executor."""

    cores: int = 1
    memory: int = 1024 * MIB
    core_limit: str | None = None

    @property
    def memory_mib(self) -> int:
        """Heap in MiB, rounded up (Spark's ``spark.*.memory`` unit)."""
        return -(-self.memory // MIB)

    @property
    def spark_memory(self) -> str:
        """Heap in Spark's notation, e.g. ``2048m``."""
        return f"{self.memory_mib}m"

    @property
    def pod_memory_mib(self) -> int:
        """Heap plus Spark's default non-heap overhead (10 %, at least 384 MiB)."""
        return self.memory_mib + max(384, self.memory_mib // 10)

    def check(self, what: str) -> None:
        if self.cores < 1:
            raise PermanentLaunchError(f"{what}.cores must be >= 1")
        if self.memory < MIB:
            raise PermanentLaunchError(f"{what}.memory must be at least 1 MiB")


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    """Everything a launcher needs to start one maintenance run of one table."""

    kind: RunKind
    backend: Backend
    namespace: str
    table: str
    table_uid: str
    policy: str
    table_uri: str
    scheduled_time: datetime
    attempt: int = 0
    args: tuple[str, ...] = ()
    storage_options: Mapping[str, str] = field(default_factory=dict)
    secret_ref: str | None = None
    image: str | None = None
    image_pull_policy: str = "IfNotPresent"
    service_account: str | None = None
    driver: Resources = field(default_factory=Resources)
    executor: Resources = field(default_factory=Resources)
    executor_instances: int = 1
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    #: Retries by the backend itself (Job backoffLimit, SparkApplication OnFailure); the
    #: controller's own retries (new attempt, new name, ``backoff.py``) are the default.
    backend_retries: int = 0
    #: Seconds a finished run is kept before the cluster deletes it.
    ttl_seconds: int = 86_400
    #: Wall-clock limit of the run (Job ``activeDeadlineSeconds``); None = no limit.
    deadline_seconds: int | None = None
    #: How ``driver``/``executor``/``spark_conf`` were sized (``launch.sizing``), kept on the
    #: run object as an annotation; None for runs sized by the policy alone (checkpoints).
    sizing: Sizing | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, RunKind):
            object.__setattr__(self, "kind", RunKind(self.kind))
        if not isinstance(self.backend, Backend):
            object.__setattr__(self, "backend", parse_backend(self.backend))
        check_dns_label(self.namespace, "namespace")
        check_dns_subdomain(self.table, "table")
        check_dns_subdomain(self.policy, "policy")
        if self.secret_ref is not None:
            check_dns_subdomain(self.secret_ref, "secretRef")
        if self.service_account is not None:
            check_dns_subdomain(self.service_account, "serviceAccount")
        if not self.table_uid:
            raise PermanentLaunchError("the table's uid is required (owner reference)")
        if not self.table_uri:
            raise PermanentLaunchError("the table URI is required")
        if self.image_pull_policy not in ("Always", "IfNotPresent", "Never"):
            raise PermanentLaunchError(f"imagePullPolicy {self.image_pull_policy!r} is invalid")
        self.driver.check("driver")
        self.executor.check("executor")
        if self.executor_instances < 1:
            raise PermanentLaunchError("executor instances must be >= 1")
        if self.backend_retries < 0 or self.ttl_seconds < 0:
            raise PermanentLaunchError("backend retries and TTL must be >= 0")
        if self.deadline_seconds is not None and self.deadline_seconds < 1:
            raise PermanentLaunchError("deadline must be >= 1 second")
        _check_options(self.storage_options, "storage option")
        _check_options(self.spark_conf, "sparkConf")
        for key in self.spark_conf:
            if is_reserved_spark_conf(key):
                raise PermanentLaunchError(
                    f"sparkConf {key!r} is set by txntable and cannot be overridden",
                    reason="ReservedSparkConf",
                )
        run_name(self.kind.value, self.policy, self.table, self.scheduled_time, self.attempt)

    @property
    def name(self) -> str:
        """The run's deterministic name (also its run id in the table's commitInfo)."""
        return run_name(self.kind.value, self.policy, self.table, self.scheduled_time, self.attempt)

    @property
    def labels(self) -> dict[str, str]:
        """Labels of the run object and of every pod it starts."""
        return {
            LABEL_TABLE: label_value(self.table),
            LABEL_POLICY: label_value(self.policy),
            LABEL_RUN: self.name,
            LABEL_KIND: self.kind.value,
            LABEL_MANAGED_BY: MANAGED_BY,
        }

    @property
    def annotations(self) -> dict[str, str]:
        """Full names and the identity a label cannot hold (labels are cut at 63 chars)."""
        out = {
            ANNOTATION_TABLE: self.table,
            ANNOTATION_POLICY: self.policy,
            ANNOTATION_SCHEDULED_TIME: self.scheduled_time.isoformat(),
            ANNOTATION_ATTEMPT: str(self.attempt),
        }
        if self.sizing is not None:
            out[ANNOTATION_SIZING] = self.sizing.to_annotation()
        return out

    @property
    def job_env(self) -> dict[str, str]:
        """Non-secret environment of the job process (driver and executors)."""
        return {
            ENV_RUN_ID: self.name,
            ENV_TABLE_NAME: f"{self.namespace}/{self.table}",
            ENV_RUN_KIND: self.kind.value,
            ENV_TABLE_URI: self.table_uri,
            ENV_STORAGE_OPTIONS: json.dumps(dict(self.storage_options), sort_keys=True),
        }


def _check_options(options: Mapping[str, str], what: str) -> None:
    for key, value in options.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise PermanentLaunchError(f"{what} {key!r}: keys and values must be strings")
        if SECRET_KEY.search(key):
            raise PermanentLaunchError(
                f"{what} {key!r}: credentials must come from the Secret (secretRef), never inline",
                reason="InlineCredentials",
            )


class RunState(StrEnum):
    """The launcher-neutral lifecycle of a run: Pending → Running → Succeeded | Failed."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"

    @property
    def finished(self) -> bool:
        """Succeeded and Failed are final; the others may still change."""
        return self in (RunState.SUCCEEDED, RunState.FAILED)


@dataclass(frozen=True, kw_only=True)
class RunStatus:
    """What a launcher knows about one run."""

    name: str
    namespace: str
    state: RunState
    message: str = ""
    #: The job's final JSON line (``{"runId": ..., ...}``) when it could be read.
    result: Mapping[str, Any] | None = None
    created: datetime | None = None
    started: datetime | None = None
    finished: datetime | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: True when ``launch`` found the run already there (409) and adopted it.
    adopted: bool = False
    #: True when the run failed because a container or process ran out of memory
    #: (``out_of_memory``): the controller retries it once with more memory.
    out_of_memory: bool = False
    #: Why a run in flight has a pod that cannot start (its image cannot be pulled, it cannot
    #: be scheduled, its configuration is refused): ``Launcher.waiting``; empty when none.
    waiting: str = ""

    @property
    def attempt(self) -> int:
        try:
            return int(self.annotations.get(ANNOTATION_ATTEMPT, "0"))
        except ValueError:
            return 0

    @property
    def kind(self) -> RunKind | None:
        """The run's kind from its ``txntable.io/kind`` label (None: missing or unknown)."""
        return RunKind.of(self.labels.get(LABEL_KIND))

    @property
    def sizing(self) -> Sizing | None:
        """The resources the run was launched with, when it recorded them."""
        return Sizing.from_annotation(self.annotations.get(ANNOTATION_SIZING))

    @property
    def policy(self) -> str | None:
        return self.annotations.get(ANNOTATION_POLICY) or self.labels.get(LABEL_POLICY)


#: Lines of a job's stderr that are log output, never the reason it failed: Spark's and log4j's
#: timestamped ``WARN``/``INFO`` lines (``NativeCodeLoader`` ...), their start-up banners, py4j's
#: and Python logging's records, JVM warnings, Spark's progress bars.
LOG_NOISE: Final = re.compile(
    r"^\s*$"
    r"|^\d{2}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}\s+(TRACE|DEBUG|INFO|WARN|WARNING)\b"
    r"|^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}\S*\s+(TRACE|DEBUG|INFO|WARN|WARNING)\b"
    r"|^(TRACE|DEBUG|INFO|WARN|WARNING):\S*:"
    r"|^(WARNING|NOTE|Picked up JAVA_TOOL_OPTIONS):? "
    r"|^SLF4J:|^log4j:|\bpy4j\b|^Setting default log level|^To adjust logging level"
    r"|^Using Spark's default log4j profile|^\[Stage \d+"
)


def failure_detail(stderr: str) -> str:
    """The line of a failed job's stderr that says why: its ``error: ...`` line (every job
    prints one on a refused input), else the last line that is not ``LOG_NOISE`` (a Python
    exception's last line); empty when there is none."""
    lines = [ln.strip() for ln in stderr.splitlines()]
    said = [ln for ln in lines if ln.startswith("error: ")]
    if said:
        return said[-1]
    meaningful = [ln for ln in lines if ln and not LOG_NOISE.search(ln)]
    return meaningful[-1] if meaningful else ""


def result_error(result: Mapping[str, Any] | None) -> str:
    """The ``error`` a job's result line reports (empty when none)."""
    error = result.get("error") if result else None
    return error.strip() if isinstance(error, str) else ""


def last_json_line(text: str) -> dict[str, Any] | None:
    """The last line of ``text`` that is a JSON object: a job's result line, if it printed one."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if not (line.startswith("{") and line.endswith("}")):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


#: A line Spark's default log4j layout writes at ERROR: ``26/11/29 00:20:37 ERROR Logger: text``.
SPARK_ERROR_LINE: Final = re.compile(r"^\d{2}/\d{2}/\d{2} \d{2}:\d{2}:\d{2} ERROR (\S+): (.+)$")


#: ERROR lines that only say an earlier error stopped Spark ("Error initializing SparkContext."
#: follows "Max number of executor failures (3) reached" when no executor ever started)
SPARK_CONSEQUENCES: Final = re.compile(r"^Error initializing SparkContext\.?$")


def spark_error(text: str | None) -> str | None:
    """The last error Spark logged in ``text`` (a driver's log), as ``Logger: message``,
    passing over the lines that only say an earlier error stopped Spark.

    A job whose executors all failed, or whose context Spark stopped, sees only "Job 0
    cancelled because SparkContext was shut down" (or, before its context started, "Spark
    context stopped while waiting for backend"); the reason is what Spark logged at ERROR
    before that (on a real node: "Max number of executor failures (4) reached")."""
    consequence = None
    for line in reversed((text or "").splitlines()):
        found = SPARK_ERROR_LINE.match(line.strip())
        if found:
            said = f"{found.group(1)}: {found.group(2).strip()}"[:500]
            if not SPARK_CONSEQUENCES.match(found.group(2).strip()):
                return said
            consequence = consequence or said
    return consequence


#: What backends and runtimes say when a container or process runs out of memory: the
#: kubelet's ``OOMKilled`` (exit code 137 = killed by SIGKILL), the JVM's
#: ``java.lang.OutOfMemoryError``, YARN/Spark's "Container killed ... memory", Python's
#: ``MemoryError`` (Spark's ``ExecutorLostFailure`` reasons quote the kubelet's), and Spark 4's
#: Kubernetes backend's "OOM is detected" when an executor pod it started was OOMKilled (the
#: pod itself is deleted at once, so the driver's log is what is left to tell).
OOM_PATTERN: Final = re.compile(
    r"OOMKilled|OutOfMemoryError|\bMemoryError\b|Container killed[^\n]*memory"
    r"|KubernetesClusterSchedulerBackend: OOM is detected"
    r"|(exit ?code|ExitCode)[:= ]*137\b|exit code -9\b|killed by signal 9\b"
)


def out_of_memory(*texts: str | None) -> bool:
    """Whether any of ``texts`` (a backend's message, a log tail) says the run ran out of
    memory (``OOM_PATTERN``)."""
    return any(text and OOM_PATTERN.search(text) for text in texts)
