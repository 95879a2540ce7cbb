"""Pieces every custom resource shares: patterns, references, selectors, the Spark template,
run records and the policy status.

Each dataclass mirrors one object of the CRD schema (field names are the camelCase of the
attributes, see ``_codec``); ``check(path)`` methods mirror the CEL rules with the same
messages.
"""

# ruff: noqa: RUF009  (spec_field is our dataclasses.field wrapper; its defaults are immutable)

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final

from txntable.api import defaults as d
from txntable.api._codec import DURATION, SIZE, from_obj, spec_field, to_obj
from txntable.api.conditions import Condition
from txntable.api.errors import InvalidSpecError

DNS_SUBDOMAIN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
HINT_DNS_SUBDOMAIN: Final = "a Kubernetes name (lower-case letters, digits, '-' and '.')"
HINT_LABEL_KEY: Final = "a label key ([prefix/]name: letters, digits, '-', '_', '.')"
LABEL_KEY: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
# Option keys that carry credentials (fsspec, delta-rs/object_store, Hadoop/Spark). Their
# values belong in the Secret named by secretRef, never in a manifest. The CEL rule uses exact
# names and prefixes (map lookups and startsWith) rather than a regex over every key: a regex
# over unbounded map keys can exceed the API server's CEL cost budget and the CRD would be
# refused. SECRET_RULE is built from these tuples and test_crds checks the YAML carries it.
SECRET_OPTION_NAMES: Final = (
    "key", "secret", "token", "password", "credentials", "access_key_id",
    "secret_access_key", "session_token", "account_key", "client_secret", "sas_token",
    "sas_key", "service_account_key", "bearer_token", "fs.azure.account.key",
    "spark.hadoop.fs.azure.account.key",
)  # fmt: skip
SECRET_OPTION_PREFIXES: Final = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
    "aws_access_key_id", "aws_secret_access_key", "aws_session_token",
    "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_ACCESS_KEY", "AZURE_STORAGE_SAS",
    "AZURE_CLIENT_SECRET", "AZURE_STORAGE_TOKEN", "azure_storage_account_key",
    "azure_storage_access_key", "azure_storage_sas", "azure_client_secret",
    "azure_storage_token", "GOOGLE_SERVICE_ACCOUNT_KEY", "google_service_account_key",
    "fs.s3a.access.key", "fs.s3a.secret.key", "fs.s3a.session.token",
    "fs.azure.account.key.", "fs.azure.sas.fixed.token",
    "fs.azure.account.oauth2.client.secret", "fs.gs.auth.service.account.private.key",
    "spark.hadoop.fs.s3a.access.key", "spark.hadoop.fs.s3a.secret.key",
    "spark.hadoop.fs.s3a.session.token",
    "spark.hadoop.fs.azure.account.key.", "spark.hadoop.fs.azure.sas.fixed.token",
    "spark.hadoop.fs.azure.account.oauth2.client.secret",
    "spark.hadoop.fs.gs.auth.service.account.private.key",
)  # fmt: skip


def _cel_list(items: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{i}'" for i in items) + "]"


SECRET_RULE: Final = (
    f"!{_cel_list(SECRET_OPTION_NAMES)}.exists(n, n in self) && "
    f"!self.exists(k, {_cel_list(SECRET_OPTION_PREFIXES)}.exists(p, k.startsWith(p)))"
)
MSG_SECRET_OPTION: Final = (
    "credentials must come from a Secret (secretRef), not from inline options"
)

#: sparkConf keys the run builders set themselves (``launch.manifests``, the local launcher):
#: a policy setting one would break the run or fight the sizing, so the CRDs refuse them
#: (``RESERVED_SPARK_CONF_RULE``), the models mirror the rule and the launcher refuses them too.
RESERVED_SPARK_CONF: Final = (
    "spark.master", "spark.submit.deployMode", "spark.app.name", "spark.kubernetes.namespace",
    "spark.kubernetes.container.image", "spark.kubernetes.driver.pod.name",
    "spark.kubernetes.executor.podNamePrefix", "spark.kubernetes.executor.podTemplateFile",
    "spark.driver.host", "spark.driver.bindAddress", "spark.driver.cores", "spark.driver.memory",
    "spark.executor.cores", "spark.executor.memory", "spark.executor.instances",
)  # fmt: skip
RESERVED_SPARK_CONF_PREFIX: Final = "spark.kubernetes.authenticate."
RESERVED_SPARK_CONF_RULE: Final = (
    f"!self.exists(k, k in {_cel_list(RESERVED_SPARK_CONF)} "
    f"|| k.startsWith('{RESERVED_SPARK_CONF_PREFIX}'))"
)
MSG_RESERVED_SPARK_CONF: Final = (
    "sparkConf keys txntable sets itself (spark.master, spark.driver.*/spark.executor.* "
    "cores, memory and instances, spark.kubernetes.* names and credentials) cannot be set: "
    "use spec.spark.driver and spec.spark.executor"
)

MSG_SELECTOR_VALUES: Final = (
    "operators In and NotIn require values; Exists and DoesNotExist take none"
)

EMPTY: Final[Mapping[str, str]] = MappingProxyType({})


def is_secret_option(key: str) -> bool:
    """True for an option key that carries a credential (exact name or known prefix)."""
    return key in SECRET_OPTION_NAMES or key.startswith(SECRET_OPTION_PREFIXES)


def is_reserved_spark_conf(key: str) -> bool:
    """True for a sparkConf key the run builders set (``RESERVED_SPARK_CONF``)."""
    return key in RESERVED_SPARK_CONF or key.startswith(RESERVED_SPARK_CONF_PREFIX)


def reject_secret_keys(options: Mapping[str, str], path: str) -> None:
    """Mirror of the CEL rule ``SECRET_RULE`` on option maps."""
    for key in options:
        if is_secret_option(key):
            raise InvalidSpecError(f"{path}[{key}]", MSG_SECRET_OPTION)


class Backend(StrEnum):
    """Where a maintenance run executes (architecture.md, "Launch backends"): the one
    definition for the CRDs (``spec.spark.backend``, spelled as the values here), the
    operator's configuration and the chart (``TXNTABLE_DEFAULT_BACKEND``, ``rbac.backends``,
    spelled in lower case: ``Backend("job")`` is ``Backend.JOB``) and the launchers."""

    SPARK_APPLICATION = "SparkApplication"
    JOB = "Job"
    LOCAL = "Local"

    @property
    def config_name(self) -> str:
        """The lower-case spelling of the configuration and the chart."""
        return self.value.lower()

    @classmethod
    def _missing_(cls, value: object) -> Backend | None:
        """Any case: the configuration's ``sparkapplication`` is ``SparkApplication``."""
        if isinstance(value, str):
            for member in cls:
                if member.value.lower() == value.lower():
                    return member
        return None


class PullPolicy(StrEnum):
    """Kubernetes image pull policy."""

    ALWAYS = "Always"
    IF_NOT_PRESENT = "IfNotPresent"
    NEVER = "Never"


class SelectorOperator(StrEnum):
    """Operators of a label selector requirement."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


class RunKind(StrEnum):
    """What a maintenance run does: the ``txntable.io/kind`` label of its objects, and the job
    module ``txntable.jobs.<kind>`` it runs."""

    OPTIMIZE = "optimize"
    CHECKPOINT = "checkpoint"
    #: VACUUM only, for a table with nothing to compact (the optimize job's ``--vacuum-only``)
    VACUUM = "vacuum"

    @property
    def noun(self) -> str:
        """The word messages and events use: compaction, checkpoint, vacuum."""
        return "compaction" if self is RunKind.OPTIMIZE else self.value

    @classmethod
    def of(cls, value: str | None) -> RunKind | None:
        """The kind named by a label value; None for a missing or unknown one."""
        return cls._value2member_map_.get(value) if value is not None else None  # type: ignore[return-value]


class RunOutcome(StrEnum):
    """How a maintenance run ended (or that it still runs)."""

    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    NOTHING_TO_DO = "NothingToDo"
    CONFLICTED = "Conflicted"
    FAILED = "Failed"


class PolicyPhase(StrEnum):
    """Short state of a policy, for the printer column."""

    ACTIVE = "Active"
    SUSPENDED = "Suspended"
    INVALID = "Invalid"


@dataclass(frozen=True, kw_only=True)
class LocalObjectReference:
    """A reference by name to an object in the same namespace."""

    name: str = spec_field(
        pattern=DNS_SUBDOMAIN, hint=HINT_DNS_SUBDOMAIN, min_length=1, max_length=253
    )


@dataclass(frozen=True, kw_only=True)
class SecretReference:
    """A Secret in the same namespace whose keys become storage options (credentials)."""

    name: str = spec_field(
        pattern=DNS_SUBDOMAIN, hint=HINT_DNS_SUBDOMAIN, min_length=1, max_length=253
    )


@dataclass(frozen=True, kw_only=True)
class LabelSelectorRequirement:
    """One ``matchExpressions`` entry of a label selector."""

    key: str = spec_field(pattern=LABEL_KEY, hint=HINT_LABEL_KEY, max_length=317)
    operator: SelectorOperator = spec_field()
    values: tuple[str, ...] = spec_field((), max_items=64, max_length=63)

    def check(self, path: str) -> None:
        """In/NotIn need values; Exists/DoesNotExist take none (as metav1 requires)."""
        wants = self.operator in (SelectorOperator.IN, SelectorOperator.NOT_IN)
        if wants != bool(self.values):
            raise InvalidSpecError(path, MSG_SELECTOR_VALUES)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement."""
        present = self.key in labels
        if self.operator is SelectorOperator.EXISTS:
            return present
        if self.operator is SelectorOperator.DOES_NOT_EXIST:
            return not present
        inside = present and labels[self.key] in self.values
        return inside if self.operator is SelectorOperator.IN else not inside


@dataclass(frozen=True, kw_only=True)
class LabelSelector:
    """A standard label selector over TxnTable labels; empty matches every table."""

    match_labels: Mapping[str, str] = spec_field(EMPTY, max_items=64, max_length=63)
    match_expressions: tuple[LabelSelectorRequirement, ...] = spec_field((), max_items=32)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether an object with ``labels`` is selected."""
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        return all(req.matches(labels) for req in self.match_expressions)


@dataclass(frozen=True, kw_only=True)
class DriverSpec:
    """Resources of the Spark driver."""

    cores: int = spec_field(d.DRIVER_CORES, minimum=1, maximum=64)
    memory: int = spec_field(kind=SIZE, minimum=1, text_default=d.DRIVER_MEMORY)


@dataclass(frozen=True, kw_only=True)
class ExecutorSpec:
    """Resources and count of Spark executors (``Local`` runs use instances x cores threads)."""

    instances: int = spec_field(d.EXECUTOR_INSTANCES, minimum=1, maximum=1000)
    cores: int = spec_field(d.EXECUTOR_CORES, minimum=1, maximum=64)
    memory: int = spec_field(kind=SIZE, minimum=1, text_default=d.EXECUTOR_MEMORY)


@dataclass(frozen=True, kw_only=True)
class SparkTemplate:
    """How a maintenance run is launched; unset fields use the operator's configuration."""

    backend: Backend | None = spec_field(None)
    image: str | None = spec_field(None, min_length=1, max_length=512)
    image_pull_policy: PullPolicy | None = spec_field(None)
    service_account_name: str | None = spec_field(
        None, pattern=DNS_SUBDOMAIN, hint=HINT_DNS_SUBDOMAIN, min_length=1, max_length=253
    )
    driver: DriverSpec = spec_field(factory=DriverSpec)
    executor: ExecutorSpec = spec_field(factory=ExecutorSpec)
    spark_conf: Mapping[str, str] = spec_field(EMPTY, max_items=128, max_length=4096)
    timeout: int = spec_field(kind=DURATION, text_default=d.RUN_TIMEOUT)

    def check(self, path: str) -> None:
        """Credentials never travel in sparkConf, nor the keys txntable sets itself (mirror
        of the CEL rules ``SECRET_RULE`` and ``RESERVED_SPARK_CONF_RULE``)."""
        reject_secret_keys(self.spark_conf, f"{path}.sparkConf")
        for key in self.spark_conf:
            if is_reserved_spark_conf(key):
                raise InvalidSpecError(f"{path}.sparkConf[{key}]", MSG_RESERVED_SPARK_CONF)


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """The last finished (or running) maintenance run, as reported in status."""

    run_name: str = spec_field(max_length=253)
    table: str | None = spec_field(None, max_length=253)
    outcome: RunOutcome | None = spec_field(None)
    start_time: datetime | None = spec_field(None)
    completion_time: datetime | None = spec_field(None)
    version: int | None = spec_field(None, minimum=0)
    message: str | None = spec_field(None, max_length=4096)


@dataclass(frozen=True, kw_only=True)
class PolicyStatus:
    """Observed state of a CompactionPolicy or CheckpointPolicy."""

    observed_generation: int | None = spec_field(None, minimum=0)
    phase: PolicyPhase | None = spec_field(None)
    conditions: tuple[Condition, ...] = spec_field((), max_items=16)
    matched_tables: tuple[str, ...] = spec_field((), max_items=1000, max_length=253)
    matched_table_count: int | None = spec_field(None, minimum=0)
    last_schedule_time: datetime | None = spec_field(None)
    next_schedule_time: datetime | None = spec_field(None)
    active_runs: tuple[RunRecord, ...] = spec_field((), max_items=1000)
    last_run: RunRecord | None = spec_field(None)

    def to_status(self) -> dict[str, Any]:
        """The JSON object for the status subresource (unset fields omitted)."""
        return to_obj(self)

    @classmethod
    def from_dict(cls, obj: object) -> PolicyStatus:
        """Read a status written by ``to_status``; unknown top-level keys are ignored."""
        return from_obj(cls, obj, "status", ignore_unknown=True)
