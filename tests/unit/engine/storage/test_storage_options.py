"""Storage options under the names users bring from delta-rs/object_store and fsspec.

Every example manifest's options (and its Secret's keys, which the controller adds) go through
the engine's parser and open a real S3 client; the names documented in the CRD and in
docs/writing-and-storage.md are accepted; names without effect are reported with a reason;
unknown and refused names fail with an error naming them and never a credential's value; schemes
txntable does not serve (gs://, abfss://) fail with the list of the supported ones.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.case_ids import readable
from tests.unit.crdtools import EXAMPLES, load_examples
from txntable.engine.errors import InvalidArgumentError, StorageError
from txntable.engine.storage.azure_options import parse_azure_options
from txntable.engine.storage.base import LocalStorage
from txntable.engine.storage.factory import check_storage_options, open_storage
from txntable.engine.storage.options import report_without_effect
from txntable.engine.storage.s3 import S3Storage
from txntable.engine.storage.s3_options import parse_s3_options, primary_s3_option_names
from txntable.engine.table import Table

REPO = Path(__file__).resolve().parents[4]
AZURE_BOOLEAN_NAMES = {
    "AZURE_ALLOW_HTTP",
    "AZURE_USE_AZURE_CLI",
    "AZURE_SKIP_SIGNATURE",
    "AZURE_STORAGE_USE_EMULATOR",
    "AZURE_DISABLE_TAGGING",
}
BOOLEAN_NAMES = {
    "AWS_ALLOW_HTTP",
    "AWS_ALLOW_INVALID_CERTIFICATES",
    "AWS_VIRTUAL_HOSTED_STYLE_REQUEST",
    "AWS_SKIP_SIGNATURE",
    "AWS_SSE_BUCKET_KEY_ENABLED",
    "AWS_REQUEST_PAYER",
    "AWS_S3_ALLOW_UNSAFE_RENAME",
}
SECRET_VALUE = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"


def _tables() -> list[tuple[Path, dict[str, Any], dict[str, str]]]:
    """(file, TxnTable, options the controller would pass: spec options | Secret keys)."""
    docs = load_examples()
    out = []
    for path, doc in docs:
        if doc.get("kind") != "TxnTable":
            continue
        storage = doc["spec"].get("storage") or {}
        options = {str(k): str(v) for k, v in (storage.get("options") or {}).items()}
        secret_name = (storage.get("secretRef") or {}).get("name")
        if secret_name:
            secrets = [
                d
                for p, d in docs
                if p == path and d.get("kind") == "Secret" and d["metadata"]["name"] == secret_name
            ]
            assert secrets, f"{path}: Secret {secret_name} is not in the same file"
            options |= {str(k): str(v) for k, v in secrets[0]["stringData"].items()}
        out.append((path, doc, options))
    return out


TABLES = _tables()


def test_the_s3_example_is_among_them() -> None:
    assert any(doc["spec"]["location"].startswith("s3://") for _, doc, _ in TABLES)
    assert {str(p.relative_to(EXAMPLES)) for p, _, _ in TABLES} >= {"table-s3.yaml"}


@pytest.mark.parametrize(
    "item", TABLES, ids=[f"{p.relative_to(EXAMPLES)}:{d['metadata']['name']}" for p, d, _ in TABLES]
)
def test_every_example_table_opens_with_its_storage_options(
    item: tuple[Path, dict[str, Any], dict[str, str]], tmp_path: Path
) -> None:
    """Before: examples/table-s3.yaml's AWS_CONDITIONAL_PUT=etag was an unknown option."""
    _, doc, options = item
    location = doc["spec"]["location"]
    check_storage_options(location, options)
    if location.startswith(("s3://", "s3a://")):
        storage = open_storage(location, options)  # a real boto3 client; no request is sent
        assert isinstance(storage, S3Storage)
        assert storage.atomic_put_if_absent
        assert storage.client.meta.region_name == options.get("AWS_REGION", "us-east-1")
    else:
        assert isinstance(open_storage(str(tmp_path / "t"), options), LocalStorage)


def _documented_names() -> set[str]:
    crd = yaml.safe_load((REPO / "crds" / "txntable.io_txntables.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    described = spec["properties"]["storage"]["properties"]["options"]["description"]
    names = set(re.findall(r"\bAWS_[A-Z_]+\b", described))
    doc = (REPO / "docs" / "writing-and-storage.md").read_text()
    section = doc.split("### S3 storage options", 1)[1].split("Refused with the reason", 1)[0]
    names |= set(re.findall(r"`((?:AWS|aws|DELTA)_[A-Za-z0-9_]+)`", section))
    return names


def test_every_documented_option_name_is_accepted() -> None:
    names = _documented_names()
    assert {"AWS_ALLOW_HTTP", "AWS_ENDPOINT_URL", "AWS_CONDITIONAL_PUT"} <= names
    assert set(primary_s3_option_names()) - {"USE_SSL", "MAX_RETRIES"} <= names
    for name in names:
        value = {
            "AWS_ENDPOINT_URL": "https://s3.example.com",
            "AWS_ENDPOINT": "https://s3.example.com",
            "AWS_CONDITIONAL_PUT": "etag",
            "AWS_S3_ADDRESSING_STYLE": "path",
            "AWS_CONNECT_TIMEOUT": "5s",
            "AWS_TIMEOUT": "30s",
            "AWS_CHECKSUM_ALGORITHM": "sha256",
            "AWS_SERVER_SIDE_ENCRYPTION": "aws:kms",
            "AWS_BUCKET": "b",
            "AWS_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt",
        }.get(name, "x")
        if name in BOOLEAN_NAMES:
            value = "true"
        options = {name: value}
        if name == "AWS_SSE_KMS_KEY_ID":
            options["AWS_SERVER_SIDE_ENCRYPTION"] = "aws:kms"
        check_storage_options("s3://b/t", options)


def test_every_documented_azure_option_name_is_accepted() -> None:
    doc = (REPO / "docs" / "writing-and-storage.md").read_text()
    section = doc.split("### Azure storage options", 1)[1].split("Refused with the reason", 1)[0]
    names = set(re.findall(r"`(AZURE_[A-Z_]+)`", section))
    assert {"AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_USE_EMULATOR"} <= names
    uri = "abfss://data@lake.dfs.core.windows.net/t"
    for name in names:
        options = {name: "true" if name in AZURE_BOOLEAN_NAMES else "x"}
        if name in ("AZURE_CONNECT_TIMEOUT", "AZURE_TIMEOUT"):
            options[name] = "5s"
        elif name == "AZURE_STORAGE_ENDPOINT":
            options[name] = "https://lake.blob.core.windows.net"
        elif name == "AZURE_STORAGE_ACCOUNT_NAME":
            options[name] = "lake"
        elif name == "AZURE_CONTAINER_NAME":
            options[name] = "data"
        elif name == "AZURE_CONDITIONAL_PUT":
            options[name] = "etag"
        elif name in ("AZURE_CLIENT_SECRET", "AZURE_FEDERATED_TOKEN_FILE"):
            options |= {"AZURE_CLIENT_ID": "c", "AZURE_TENANT_ID": "t"}
        check_storage_options(uri, options)


def test_delta_rs_names_map_to_client_settings_in_any_case() -> None:
    upper = parse_s3_options(
        {
            "AWS_ACCESS_KEY_ID": "AKID",
            "AWS_SECRET_ACCESS_KEY": SECRET_VALUE,
            "AWS_SESSION_TOKEN": "tok",
            "AWS_REGION": "eu-central-1",
            "AWS_ENDPOINT_URL": "http://minio:9000",
            "AWS_ALLOW_HTTP": "true",
            "AWS_CONDITIONAL_PUT": "etag",
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
            "AWS_SERVER_SIDE_ENCRYPTION": "aws:kms",
            "AWS_SSE_KMS_KEY_ID": "alias/lake",
            "AWS_REQUEST_PAYER": "true",
            "timeout": "2m",
            "connect_timeout": "500ms",
        }
    )
    lower = parse_s3_options(
        {
            "aws_access_key_id": "AKID",
            "aws_secret_access_key": SECRET_VALUE,
            "aws_token": "tok",
            "region": "eu-central-1",
            "aws_endpoint": "http://minio:9000",
            "aws_allow_http": "TRUE",
            "conditional_put": "etag",
            "virtual_hosted_style_request": "0",
            "server_side_encryption": "AWS:KMS",
            "sse_kms_key_id": "alias/lake",
            "request_payer": "yes",
            "aws_timeout": "120 seconds",
            "aws_connect_timeout": "0.5s",
        }
    )
    assert upper == lower
    assert upper.session == {
        "aws_access_key_id": "AKID",
        "aws_secret_access_key": SECRET_VALUE,
        "aws_session_token": "tok",
    }
    assert upper.client == {"endpoint_url": "http://minio:9000", "region_name": "eu-central-1"}
    assert upper.config == {
        "s3": {"addressing_style": "path"},
        "read_timeout": 120.0,
        "connect_timeout": 0.5,
    }
    assert upper.put_args == {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "alias/lake"}
    assert upper.request_args == {"RequestPayer": "requester"}
    assert upper.conditional_put and not upper.without_effect
    assert SECRET_VALUE not in repr(upper)


def test_the_client_gets_the_settings() -> None:
    storage = S3Storage(
        "s3://lake/t",
        {
            "AWS_ENDPOINT_URL": "https://objects.example.com",
            "AWS_REGION": "eu-west-3",
            "AWS_S3_ADDRESSING_STYLE": "virtual",
            "AWS_ALLOW_INVALID_CERTIFICATES": "true",
            "AWS_SKIP_SIGNATURE": "true",
            "max_retries": "2",
        },
    )
    client = storage.client
    assert client.meta.endpoint_url == "https://objects.example.com"
    assert client.meta.region_name == "eu-west-3"
    assert client.meta.config.s3 == {"addressing_style": "virtual"}
    assert client.meta.config.retries == {"mode": "standard", "total_max_attempts": 3}
    from botocore import UNSIGNED

    assert client.meta.config.signature_version is UNSIGNED
    assert client._endpoint.http_session._verify is False


@pytest.mark.parametrize(
    ("value", "conditional"),
    [("etag", True), ("true", True), ("disabled", False), ("false", False), ("ETag", True)],
)
def test_conditional_put_values(value: str, conditional: bool) -> None:
    assert S3Storage("s3://b/t", {"AWS_CONDITIONAL_PUT": value}).atomic_put_if_absent is conditional


def test_locking_options_are_accepted_without_effect_and_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    options = {
        "AWS_S3_LOCKING_PROVIDER": "dynamodb",
        "DELTA_DYNAMO_TABLE_NAME": "delta_log",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
        "pool_idle_timeout": "15s",
        "AWS_SECRET_ACCESS_KEY_DYNAMODB": SECRET_VALUE,
    }
    with caplog.at_level(logging.INFO, logger="txntable.engine.storage.options"):
        storage = S3Storage("s3://reported-bucket/t", options)
    assert set(storage.options_without_effect) == set(options)
    assert "conditional writes" in storage.options_without_effect["AWS_S3_LOCKING_PROVIDER"]
    assert storage.atomic_put_if_absent  # the locking provider does not turn conditional PUT off
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "s3://reported-bucket" in lines[0]
    for name in options:
        assert name in lines[0]
    assert SECRET_VALUE not in lines[0]
    report_without_effect("again", storage.options_without_effect)  # once per set of names
    assert len(caplog.records) == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"AWS_ACCES_KEY_ID": SECRET_VALUE}, r"unknown S3 storage option AWS_ACCES_KEY_ID; .*"),
        ({"AWS_ROLE_ARN": "arn:aws:iam::1:role/x"}, "AWS_ROLE_ARN: assuming a role"),
        ({"AWS_IAM_ROLE_ARN": "arn:aws:iam::1:role/x"}, "workload identity"),
        ({"AWS_SSE_CUSTOMER_KEY_BASE64": SECRET_VALUE}, "SSE-C"),
        ({"AWS_CONDITIONAL_PUT": "dynamo:delta_log"}, "DynamoDB lock is not used"),
        ({"AWS_CONDITIONAL_PUT": "maybe"}, "must be etag or true"),
        ({"AWS_ALLOW_HTTP": "sometimes"}, "AWS_ALLOW_HTTP must be true or false"),
        (
            {"AWS_ENDPOINT_URL": "http://minio:9000", "AWS_ALLOW_HTTP": "false"},
            "plain http:// but AWS_ALLOW_HTTP is false",
        ),
        ({"AWS_ENDPOINT_URL": "minio:9000"}, "must be an http:// or https:// URL"),
        ({"AWS_REGION": "eu-west-1", "region": "us-east-1"}, "set the same thing"),
        ({"timeout": "soon"}, "must be a duration"),
        ({"AWS_SSE_KMS_KEY_ID": "k"}, "needs server_side_encryption"),
        ({"AWS_BUCKET": "other"}, "bucket names 'other', the URI 'b'"),
        ({"AWS_REGION": " "}, "AWS_REGION is empty"),
    ],
    ids=readable,
)
def test_bad_options_fail_with_the_name_and_never_a_secret(
    options: dict[str, str], message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message) as info:
        open_storage("s3://b/t", options)
    assert SECRET_VALUE not in str(info.value)
    with pytest.raises(InvalidArgumentError):
        check_storage_options("s3://b/t", options)


def test_unknown_option_error_lists_the_accepted_names() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        parse_s3_options({"AWS_FOO": "1", "bar": "2"})
    text = str(info.value)
    assert text.startswith("unknown S3 storage options AWS_FOO, bar;")
    for name in ("AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP", "AWS_CONDITIONAL_PUT", "AWS_REGION"):
        assert name in text


@pytest.mark.parametrize(
    "uri",
    ["gs://bucket/t", "gcs://bucket/t", "hdfs://nn/t", "https://host/t", "adl://acct/t"],
)
def test_unsupported_schemes_name_the_supported_ones(uri: str) -> None:
    scheme = uri.split("://", maxsplit=1)[0]
    for attempt in (
        lambda: open_storage(uri),
        lambda: Table.open(uri),
        lambda: check_storage_options(uri, {}),
    ):
        with pytest.raises(StorageError) as info:
            attempt()
        text = str(info.value)
        assert text.startswith(f"{scheme}:// tables are not supported")
        assert "s3://" in text and "file://" in text and "abfss://" in text


def test_local_tables_report_options_that_do_nothing(tmp_path: Path) -> None:
    assert check_storage_options(str(tmp_path), {"fsync": "false"}) == {}
    assert set(check_storage_options(str(tmp_path), {"AWS_REGION": "x"})) == {"AWS_REGION"}
    with pytest.raises(InvalidArgumentError, match="fsync must be true or false"):
        check_storage_options(str(tmp_path), {"fsync": "maybe"})


def test_absolute_data_file_uris_open_through_the_table_storage(tmp_path: Path) -> None:
    """A data file named by absolute URI is read with the same classes and option names as
    tables (fsspec would take neither delta-rs names nor find an S3 client in the images)."""
    from txntable.engine.storage.factory import open_uri_input

    (tmp_path / "a b.parquet").write_bytes(b"PAR1")
    # the URI as paths.decode_path returns it (no percent-encoding left)
    assert open_uri_input(f"file://{tmp_path}/a b.parquet") == str(tmp_path / "a b.parquet")
    assert open_uri_input(str(tmp_path / "a b.parquet"), {"fsync": "false"}) == str(
        tmp_path / "a b.parquet"
    )
    with pytest.raises(InvalidArgumentError, match="unknown S3 storage option AWS_NOPE"):
        open_uri_input("s3://b/t/x.parquet", {"AWS_NOPE": "1"})
    with pytest.raises(StorageError, match="gs:// tables are not supported"):
        open_uri_input("gs://b/t/x.parquet")
    with pytest.raises(InvalidArgumentError, match="not a file URI"):
        open_uri_input("x.parquet")


# ----------------------------------------------------------------------------------- Azure


def test_azure_names_choose_the_account_endpoint_and_credential() -> None:
    from txntable.engine.storage.azure import azure_target

    key = parse_azure_options(
        {"AZURE_STORAGE_ACCOUNT_NAME": "lake", "AZURE_STORAGE_ACCOUNT_KEY": SECRET_VALUE}
    )
    assert key.auth == "key" and key.secrets == {"account_key": SECRET_VALUE}
    assert SECRET_VALUE not in repr(key)
    assert azure_target("az://data/events", key) == (
        "https://lake.blob.core.windows.net",
        "lake",
        "data",
        "events",
    )
    # ADLS Gen2 URIs name the account; its Blob endpoint serves the same data
    default = parse_azure_options({})
    assert default.auth == "default"  # azure-identity: workload or managed identity
    assert azure_target("abfss://data@lake.dfs.core.windows.net/a/b", default) == (
        "https://lake.blob.core.windows.net",
        "lake",
        "data",
        "a/b",
    )
    assert azure_target("abfs://data@lake.dfs.core.chinacloudapi.cn/t", default)[0] == (
        "https://lake.blob.core.chinacloudapi.cn"
    )
    sas = parse_azure_options({"azure_storage_sas_token": "?sv=2024&sig=" + SECRET_VALUE})
    assert sas.auth == "sas" and sas.secrets["sas"].startswith("sv=")
    wi = parse_azure_options(
        {
            "AZURE_CLIENT_ID": "c",
            "AZURE_TENANT_ID": "t",
            "AZURE_FEDERATED_TOKEN_FILE": "/var/run/secrets/azure/tokens/azure-identity-token",
        }
    )
    assert wi.auth == "workload_identity" and wi.client_id == "c"
    emulator = parse_azure_options(
        {"use_emulator": "true"}, environ={"AZURITE_BLOB_STORAGE_URL": "http://127.0.0.1:9"}
    )
    assert emulator.auth == "key"
    assert azure_target("az://data/t", emulator)[:2] == (
        "http://127.0.0.1:9/devstoreaccount1",
        "devstoreaccount1",
    )
    quiet = parse_azure_options({"azure_disable_tagging": "true", "pool_idle_timeout": "5s"})
    assert set(quiet.without_effect) == {"azure_disable_tagging", "pool_idle_timeout"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"AZURE_STORAGE_ACOUNT_KEY": SECRET_VALUE}, "unknown Azure storage option"),
        (
            {"AZURE_STORAGE_ACCOUNT_KEY": SECRET_VALUE, "AZURE_STORAGE_SAS_KEY": SECRET_VALUE},
            "each choose a credential; keep one",
        ),
        ({"AZURE_CLIENT_SECRET": SECRET_VALUE}, "needs AZURE_CLIENT_ID and AZURE_TENANT_ID"),
        ({"AZURE_USE_FABRIC_ENDPOINT": "true"}, "Fabric OneLake is not supported"),
        (
            {"account_name": "lake", "AZURE_STORAGE_ENDPOINT": "http://10.0.0.1/lake"},
            "plain http://",
        ),
        ({"AZURE_STORAGE_ACCOUNT_NAME": "other"}, "names 'other', the URI 'lake'"),
        ({"AZURE_CONTAINER_NAME": "other"}, "names 'other', the URI 'data'"),
    ],
    ids=readable,
)
def test_bad_azure_options_fail_with_the_name_and_never_a_secret(
    options: dict[str, str], message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message) as info:
        check_storage_options("abfss://data@lake.dfs.core.windows.net/t", options)
    assert SECRET_VALUE not in str(info.value)


def test_azure_uri_without_an_account_says_how_to_name_one() -> None:
    with pytest.raises(InvalidArgumentError, match="AZURE_STORAGE_ACCOUNT_NAME"):
        check_storage_options("az://data/t", {})


def test_environment_fills_what_the_options_leave_open(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run pods get the Secret's keys as environment variables (envFrom): as object_store's
    from_env, known AWS_*/AZURE_* variables complete the options, which win; IRSA's
    AWS_ROLE_ARN and other variables that are not options are left to the SDKs."""
    from txntable.engine.storage.azure_options import azure_options_with_environment
    from txntable.engine.storage.s3_options import s3_options_with_environment

    environ = {
        "AWS_REGION": "eu-north-1",
        "AWS_ENDPOINT_URL": "https://from-env.example.com",
        "AWS_ROLE_ARN": "arn:aws:iam::1:role/irsa",
        "AWS_EXECUTION_ENV": "x",
        "aws_profile": "lower-case is not an environment option",
        "AZURE_STORAGE_ACCOUNT_KEY": SECRET_VALUE,
        "AZURE_FEDERATED_TOKEN_FILE": "/var/run/secrets/token",
    }
    s3 = s3_options_with_environment({"endpoint_url": "https://given.example.com"}, environ)
    assert s3 == {"endpoint_url": "https://given.example.com", "AWS_REGION": "eu-north-1"}
    settings = parse_s3_options(s3)
    assert settings.client["endpoint_url"] == "https://given.example.com"
    azure = azure_options_with_environment({"account_name": "lake"}, environ)
    assert parse_azure_options(azure).auth == "key"  # the key wins over the token file
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    storage = S3Storage("s3://b/t", {})
    assert storage.client.meta.region_name == "eu-north-1"
    assert storage.client.meta.endpoint_url == "https://from-env.example.com"


def test_each_store_gives_its_own_reasons_for_http_tuning_and_proxy_options() -> None:
    """The HTTP tuning names are shared, the reasons are each client's: an Azure table is not
    told about boto3, nor pointed at AWS_CA_BUNDLE."""
    s3 = parse_s3_options({"pool_idle_timeout": "5s", "AWS_HTTP2_ONLY": "true"})
    azure = parse_azure_options(
        {"azure_storage_account_name": "acct", "pool_idle_timeout": "5s", "AZURE_HTTP2_ONLY": "1"}
    )
    assert set(s3.without_effect) == {"pool_idle_timeout", "AWS_HTTP2_ONLY"}
    assert set(azure.without_effect) == {"pool_idle_timeout", "AZURE_HTTP2_ONLY"}
    assert all("boto3" in why for why in s3.without_effect.values())
    assert all("Azure SDK" in why and "boto3" not in why for why in azure.without_effect.values())
    with pytest.raises(InvalidArgumentError, match="AWS_CA_BUNDLE"):
        parse_s3_options({"aws_proxy_excludes": "x"})
    with pytest.raises(InvalidArgumentError, match="REQUESTS_CA_BUNDLE") as refused:
        parse_azure_options({"azure_proxy_excludes": "x"})
    assert "AWS_" not in str(refused.value)
