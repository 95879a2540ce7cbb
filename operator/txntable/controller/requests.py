"""Turn a table, its policy and a decision into a ``RunRequest`` for a launcher.

The job's command line is built here, once, from the policy (its OPTIMIZE settings as one
document, ``api.optimize_options``; the commit attempts and VACUUM as flags) so that every
backend runs exactly the same job; the run's deterministic name doubles
as the run id the job writes into ``commitInfo``.
"""

from __future__ import annotations

from txntable.api.optimize_options import OptimizeOptions
from txntable.api.types import CheckpointPolicy, CompactionPolicy, SparkTemplate, TxnTable
from txntable.config import Config
from txntable.launch import Backend, Resources, RunKind, RunRequest
from txntable.launch.errors import PermanentLaunchError
from txntable.launch.sizing import Sizing
from txntable.reconcile.decide import Decision


def _backend(template: SparkTemplate, config: Config) -> Backend:
    return template.backend or Backend(config.default_backend)


def _master(backend: Backend, template: SparkTemplate, sizing: Sizing | None = None) -> str:
    if backend is Backend.LOCAL:
        slots = (
            sizing.parallelism if sizing else template.executor.instances * template.executor.cores
        )
        return f"local[{slots}]"
    return ""  # spark-submit / the Spark Operator configures the master


def _base(
    table: TxnTable,
    template: SparkTemplate,
    kind: RunKind,
    *,
    policy: str,
    decision: Decision,
    config: Config,
    args: list[str],
    sizing: Sizing | None = None,
) -> RunRequest:
    if decision.scheduled_time is None:
        raise PermanentLaunchError("a launch decision carries its scheduled time")
    if table.metadata.uid is None and table.metadata.namespace is None:
        raise PermanentLaunchError("the table has neither uid nor namespace")
    backend = _backend(template, config)
    secret = table.spec.storage.secret_ref
    return RunRequest(
        kind=kind,
        backend=backend,
        namespace=table.metadata.namespace or "default",
        table=table.metadata.name,
        table_uid=table.metadata.uid or f"local-{table.metadata.name}",
        policy=policy,
        table_uri=table.spec.location,
        scheduled_time=decision.scheduled_time,
        attempt=decision.attempt,
        args=(*args, "--master", _master(backend, template, sizing)),
        storage_options=dict(table.spec.storage.options),
        secret_ref=secret.name if secret else None,
        image=template.image or config.spark_image,
        ttl_seconds=config.run_ttl_seconds,
        image_pull_policy=(
            template.image_pull_policy.value if template.image_pull_policy else "IfNotPresent"
        ),
        service_account=template.service_account_name or config.spark_service_account,
        driver=Resources(
            cores=template.driver.cores,
            memory=sizing.driver_memory if sizing else template.driver.memory,
        ),
        executor=Resources(
            cores=sizing.executor_cores if sizing else template.executor.cores,
            memory=sizing.executor_heap if sizing else template.executor.memory,
        ),
        executor_instances=sizing.executor_instances if sizing else template.executor.instances,
        spark_conf={**(sizing.spark_conf() if sizing else {}), **template.spark_conf},
        deadline_seconds=template.timeout or None,
        sizing=sizing,
    )


def compaction_request(
    table: TxnTable,
    policy: CompactionPolicy,
    decision: Decision,
    config: Config,
    sizing: Sizing | None = None,
) -> RunRequest:
    """The OPTIMIZE run for ``decision``, with the resources of ``sizing`` when given
    (``controller.foresee``), else the policy's ``spec.spark`` as written."""
    spec = policy.spec
    args = [
        table.spec.location,
        "--options-json",
        OptimizeOptions.from_spec(spec).dumps(),
        "--max-attempts",
        str(spec.commit.max_attempts),
        "--executor",
        "spark",
    ]
    if spec.vacuum.enabled:
        args += ["--vacuum"]
        if spec.vacuum.retention is not None:
            args += ["--vacuum-retention", f"interval {spec.vacuum.retention} seconds"]
        if spec.vacuum.dry_run:
            args += ["--vacuum-dry-run"]
    for key, value in sorted(table.spec.storage.options.items()):
        args += ["--storage-option", f"{key}={value}"]
    req = _base(
        table,
        spec.spark,
        RunKind.OPTIMIZE,
        policy=policy.metadata.name,
        decision=decision,
        config=config,
        args=args,
        sizing=sizing,
    )
    return _with_run_id(req)


def vacuum_request(
    table: TxnTable, policy: CompactionPolicy, decision: Decision, config: Config
) -> RunRequest:
    """The VACUUM-only run for ``decision`` (``txntable.jobs.vacuum``: the optimize job with
    ``--vacuum-only``), with the policy's VACUUM settings, Spark template and backend."""
    vac = policy.spec.vacuum
    args = [table.spec.location, "--executor", "spark"]
    if vac.retention is not None:
        args += ["--vacuum-retention", f"interval {vac.retention} seconds"]
    if vac.dry_run:
        args += ["--vacuum-dry-run"]
    for key, value in sorted(table.spec.storage.options.items()):
        args += ["--storage-option", f"{key}={value}"]
    req = _base(
        table,
        policy.spec.spark,
        RunKind.VACUUM,
        policy=policy.metadata.name,
        decision=decision,
        config=config,
        args=args,
    )
    return _with_run_id(req)


def checkpoint_request(
    table: TxnTable, policy: CheckpointPolicy, decision: Decision, config: Config
) -> RunRequest:
    """The Spark checkpoint run for ``decision`` (large logs; small ones are written inline)."""
    args = [table.spec.location, "--part-size", str(policy.spec.part_size)]
    if policy.spec.log_cleanup.enabled:
        retention = f"interval {policy.spec.log_cleanup.log_retention} seconds"
        args += ["--cleanup", "--retention", retention]
    for key, value in sorted(table.spec.storage.options.items()):
        args += ["--storage-option", f"{key}={value}"]
    return _base(
        table,
        policy.spec.spark,
        RunKind.CHECKPOINT,
        policy=policy.metadata.name,
        decision=decision,
        config=config,
        args=args,
    )


def _with_run_id(req: RunRequest) -> RunRequest:
    from dataclasses import replace

    return replace(req, args=(*req.args, "--run-id", req.name))
