"""Manifest builders: every SparkApplication validates against the Spark Operator's CRD schema,
every Job and executor pod template against Kubernetes 1.33 (strict), names are deterministic,
labels and owner references are set, and credentials appear only as a Secret reference."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.support.launch_requests import CASES, GIB, WHEN, request
from tests.unit.case_ids import readable
from txntable.api.common import Backend as ApiBackend
from txntable.api.constants import LABEL_MANAGED_BY, LABEL_POLICY, LABEL_RUN, LABEL_TABLE
from txntable.config import Config
from txntable.launch import manifests
from txntable.launch.errors import PermanentLaunchError
from txntable.launch.names import MAX_RUN_NAME, label_value, run_name
from txntable.launch.run import (
    ENV_RUN_ID,
    LABEL_KIND,
    Backend,
    Resources,
    RunRequest,
)

CRD = Path(__file__).resolve().parents[3].parent / "shared/testdata/k8s"
CRD_FILE = CRD / "sparkoperator.k8s.io_sparkapplications.yaml"
K8S_VERSION = "1.33"
CANARY = "canary-secret-value-8c1f"


def strict(schema: Any) -> Any:
    """The CRD schema with unknown fields rejected (the API server would silently prune them)."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


@pytest.fixture(scope="module")
def spark_app_validator() -> jsonschema.protocols.Validator:
    crd = yaml.safe_load(CRD_FILE.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
    schema = strict(version["schema"]["openAPIV3Schema"])
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    return cls(schema)


@pytest.fixture(autouse=True)
def credentials_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Builders must never copy the controller's own credentials into a manifest."""
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CANARY)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", CANARY)


@pytest.mark.parametrize("case", CASES)
def test_spark_application_matches_the_operator_crd(case: str, spark_app_validator: Any) -> None:
    req = request(**CASES[case])
    app = manifests.spark_application(req, Config())
    errors = sorted(spark_app_validator.iter_errors(app), key=str)
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]
    spec = app["spec"]
    assert spec["type"] == "Python"
    assert spec["mainApplicationFile"] == f"local:///opt/txntable/jobs/{req.kind.value}.py"
    assert spec["arguments"] == list(req.args)
    assert spec["timeToLiveSeconds"] == req.ttl_seconds
    assert spec["executor"]["instances"] == req.executor_instances
    assert spec["driver"]["memory"] == req.driver.spark_memory
    expected_restart = "OnFailure" if req.backend_retries else "Never"
    assert spec["restartPolicy"]["type"] == expected_restart
    for role in ("driver", "executor"):
        pod = spec[role]
        assert pod["labels"] == req.labels
        assert pod["podSecurityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert pod["securityContext"]["allowPrivilegeEscalation"] is False
        assert {"name": ENV_RUN_ID, "value": req.name} in pod["env"]
    assert spec["sparkConf"]["spark.kubernetes.executor.podNamePrefix"] == req.name
    assert_common(app, req)


@pytest.mark.parametrize("case", CASES)
def test_spark_submit_job_is_a_valid_strict_job(case: str) -> None:
    req = request(backend=Backend.JOB, **CASES[case])
    job = manifests.spark_submit_job(req, Config())
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    spec = job["spec"]
    assert spec["backoffLimit"] == req.backend_retries
    assert spec["ttlSecondsAfterFinished"] == req.ttl_seconds
    # a disrupted driver (eviction, preemption, drain) fails the Job with a reason naming it
    assert spec["podFailurePolicy"] == {
        "rules": [
            {
                "action": "FailJob",
                "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
            }
        ]
    }
    assert spec.get("activeDeadlineSeconds") == req.deadline_seconds
    pod = spec["template"]["spec"]
    assert spec["template"]["metadata"]["labels"] == req.labels
    assert pod["restartPolicy"] == "Never"
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    args = container["args"]
    assert args[:5] == [
        manifests.SPARK_SUBMIT,
        "--master",
        manifests.K8S_MASTER,
        "--deploy-mode",
        "client",
    ]
    assert args[args.index(manifests.main_file(req)) + 1 :] == list(req.args)
    confs = dict(a.split("=", 1) for a in args[1::] if "=" in a and a.startswith("spark."))
    assert confs["spark.kubernetes.namespace"] == req.namespace
    assert confs["spark.executor.instances"] == str(req.executor_instances)
    assert confs["spark.kubernetes.executor.podNamePrefix"] == req.name
    assert confs["spark.driver.host"] == "$(POD_IP)"  # expanded by the kubelet
    # executors connect to what the driver binds (useDriverPodIP): never 0.0.0.0
    assert confs["spark.driver.bindAddress"] == "$(POD_IP)"
    if "spark.x" in confs:
        assert confs["spark.x"] == "$$(NOT_EXPANDED)"  # user values are not
    assert_common(job, req)


@pytest.mark.parametrize("case", CASES)
def test_executor_pod_template_is_a_valid_strict_pod(case: str) -> None:
    req = request(backend=Backend.JOB, **CASES[case])
    template = manifests.executor_pod_template(req)
    kubernetes_validate.validate(template, K8S_VERSION, strict=True)
    assert template["metadata"]["labels"] == req.labels
    assert template["spec"]["automountServiceAccountToken"] is False
    job = manifests.spark_submit_job(req, Config())
    env = {e["name"]: e for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert json.loads(env[manifests.TEMPLATE_ENV]["value"]) == template


def assert_common(obj: dict[str, Any], req: RunRequest) -> None:
    meta = obj["metadata"]
    assert meta["name"] == req.name
    assert meta["namespace"] == req.namespace
    assert meta["labels"][LABEL_TABLE] == label_value(req.table)
    assert meta["labels"][LABEL_POLICY] == label_value(req.policy)
    assert meta["labels"][LABEL_RUN] == req.name
    assert meta["labels"][LABEL_KIND] == req.kind.value
    assert meta["labels"][LABEL_MANAGED_BY]
    for value in meta["labels"].values():
        assert len(value) <= 63 and re.fullmatch(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", value)
    (owner,) = meta["ownerReferences"]
    assert owner == {
        "apiVersion": "txntable.io/v1alpha1",
        "kind": "TxnTable",
        "name": req.table,
        "uid": req.table_uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert_secret_only_by_reference(obj, req)


def walk(value: Any, path: str = "") -> Any:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from walk(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from walk(v, f"{path}[{i}]")
    else:
        yield path, value


def assert_secret_only_by_reference(obj: dict[str, Any], req: RunRequest) -> None:
    text = json.dumps(obj)
    assert CANARY not in text
    refs = [v for p, v in walk(obj) if p.endswith("secretRef.name")]
    embedded = json.loads(
        next(
            (v for p, v in walk(obj) if isinstance(v, str) and v.startswith('{"apiVersion"')), "{}"
        )
    )
    refs += [v for p, v in walk(embedded) if p.endswith("secretRef.name")]
    if req.secret_ref:
        assert refs and set(refs) == {req.secret_ref}
    else:
        assert not refs
    for path, _ in walk(obj):
        assert not re.search(r"secretKeyRef|\.data\.|stringData", path), path


def test_names_are_deterministic_and_fit() -> None:
    name = run_name("optimize", "nightly", "sales", WHEN)
    assert re.fullmatch(r"opt-sales-nightly-[0-9a-f]{6}-20261122t020000", name)
    assert (
        run_name("optimize", "nightly", "sales", WHEN.astimezone(timezone(timedelta(hours=5))))
        == name
    )
    assert run_name("optimize", "nightly", "sales", WHEN, attempt=2) == name + "-r2"
    assert run_name("checkpoint", "nightly", "sales", WHEN).startswith("ckpt-")
    assert run_name("optimize", "nightly", "sales", WHEN + timedelta(seconds=1)) != name


@pytest.mark.parametrize(
    ("table", "policy"),
    [
        ("t" * 253, "p"),
        ("a.b", "p"),
        ("a-b", "p"),
        ("x" * 40, "y" * 40),
        ("x" * 40, "y" * 41),
        ("orders.eu-west", "compaction-" + "z" * 60),
    ],
    ids=readable,
)
def test_long_or_dotted_names_are_valid_and_distinct(table: str, policy: str) -> None:
    name = run_name("checkpoint", policy, table, WHEN, attempt=12)
    assert len(name) <= MAX_RUN_NAME
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name)
    assert name.endswith("20261122t020000-r12")
    assert len(name + "-driver") <= 63 and len(name + "-exec-1000") <= 63


def test_names_that_would_collide_stay_apart() -> None:
    pairs = [("a.b", "p"), ("a-b", "p"), ("a", "b-p"), ("a-b-p", "x")]
    names = {run_name("optimize", p, t, WHEN) for t, p in pairs}
    assert len(names) == len(pairs)
    long = {run_name("optimize", "p", "x" * 60 + str(i), WHEN) for i in range(20)}
    assert len(long) == 20


def test_naive_times_and_bad_kinds_are_refused() -> None:
    with pytest.raises(PermanentLaunchError, match="time zone"):
        run_name("optimize", "p", "t", datetime(2026, 1, 1))
    with pytest.raises(PermanentLaunchError, match="kind"):
        run_name("restore", "p", "t", WHEN)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"storage_options": {"aws_secret_access_key": "x"}}, "credentials"),
        ({"storage_options": {"AWS_ACCESS_KEY_ID": "x"}}, "credentials"),
        ({"spark_conf": {"spark.hadoop.fs.s3a.secret.key": "x"}}, "credentials"),
        ({"spark_conf": {"spark.master": "local"}}, "set by txntable"),
        ({"spark_conf": {"spark.kubernetes.authenticate.oauthToken": "x"}}, "credentials"),
        ({"namespace": "Lake"}, "DNS-1123"),
        ({"table": "../etc"}, "DNS-1123"),
        ({"secret_ref": "bad_name"}, "DNS-1123"),
        ({"table_uid": ""}, "uid"),
        ({"executor_instances": 0}, "instances"),
        ({"driver": Resources(cores=0)}, "cores"),
        ({"backend": "yarn"}, "backend"),
        ({"image_pull_policy": "Sometimes"}, "imagePullPolicy"),
        ({"deadline_seconds": 0}, "deadline"),
        ({"scheduled_time": datetime(2026, 1, 1)}, "time zone"),
    ],
    ids=readable,
)
def test_bad_requests_are_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(PermanentLaunchError, match=message):
        request(**changes)


def test_backend_names_from_config_and_crd_both_parse() -> None:
    assert request(backend="SparkApplication").backend is Backend.SPARK_APPLICATION
    assert request(backend="job").backend is Backend.JOB
    assert {b.config_name for b in Backend} == set(__import__("txntable.config").config.BACKENDS)
    # one enum: the CRD's spelling is the launchers' backend
    assert Backend is ApiBackend
    with pytest.raises(PermanentLaunchError, match="unknown backend 'yarn'"):
        request(backend="yarn")


def test_memory_is_rounded_up_and_pods_get_overhead() -> None:
    r = Resources(memory=GIB + 1)
    assert r.spark_memory == "1025m"
    assert Resources(memory=GIB).pod_memory_mib == 1024 + 384
    assert Resources(memory=8 * GIB).pod_memory_mib == 8192 + 819
