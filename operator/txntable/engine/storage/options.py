"""Storage options as users already write them, turned into settings of our S3 and Azure clients.

People come to txntable with the option names of delta-rs and object_store
(``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``, ``AWS_CONDITIONAL_PUT``, ``AZURE_STORAGE_ACCOUNT_NAME``
...), in upper or lower case, or with fsspec/s3fs names (``key``, ``secret``, ``endpoint_url``).
Every name is sorted into one of three groups, so no option is silently dropped:

* **mapped**: it changes how boto3 talks to S3 (endpoint, region, credentials, TLS, timeouts,
  addressing style, encryption and checksums of the objects we write, ...);
* **without effect**: the name is known and harmless here, and the reason is reported (a
  DynamoDB locking provider is not needed because commits are S3 conditional writes; the HTTP
  tuning knobs of object_store's client do not apply to boto3);
* **refused**: the option asks for something this client cannot honour (assuming a role from
  options, SSE-C); the error says what to do instead.

Anything else is an error that lists the accepted names. Values of credentials never appear in
an error, a log line or ``repr``: only option names do. Parsing needs no boto3, so manifests
can be checked anywhere (``factory.check_storage_options``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from txntable.engine.errors import InvalidArgumentError, StorageError

log = logging.getLogger(__name__)

#: canonical setting -> accepted names (compared in lower case)
_S3_ALIASES: Final[dict[str, tuple[str, ...]]] = {
    "endpoint": ("aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint"),
    "region": ("aws_region", "region", "region_name"),
    "default_region": ("aws_default_region", "default_region"),
    "access_key_id": ("aws_access_key_id", "access_key_id", "key"),
    "secret_access_key": ("aws_secret_access_key", "secret_access_key", "secret"),
    "session_token": ("aws_session_token", "aws_token", "session_token", "token"),
    "profile": ("aws_profile", "profile", "profile_name"),
    "allow_http": ("aws_allow_http", "allow_http"),
    "use_ssl": ("use_ssl",),
    "ca_bundle": ("aws_ca_bundle", "ca_bundle"),
    "allow_invalid_certificates": (
        "aws_allow_invalid_certificates",
        "allow_invalid_certificates",
    ),
    "virtual_hosted_style_request": (
        "aws_virtual_hosted_style_request",
        "virtual_hosted_style_request",
    ),
    "addressing_style": ("aws_s3_addressing_style",),
    "connect_timeout": ("aws_connect_timeout", "connect_timeout"),
    "timeout": ("aws_timeout", "timeout"),
    "proxy_url": ("aws_proxy_url", "proxy_url"),
    "user_agent": ("aws_user_agent", "user_agent"),
    "skip_signature": ("aws_skip_signature", "skip_signature", "anon"),
    "checksum_algorithm": ("aws_checksum_algorithm", "checksum_algorithm"),
    "server_side_encryption": ("aws_server_side_encryption", "server_side_encryption"),
    "sse_kms_key_id": ("aws_sse_kms_key_id", "sse_kms_key_id"),
    "sse_bucket_key_enabled": ("aws_sse_bucket_key_enabled", "sse_bucket_key_enabled"),
    "request_payer": ("aws_request_payer", "request_payer"),
    "conditional_put": ("aws_conditional_put", "conditional_put"),
    "bucket": ("aws_bucket", "aws_bucket_name", "bucket", "bucket_name"),
    "max_retries": ("max_retries",),
}

_NO_LOCK: Final = "no locking provider is needed: commits are S3 conditional writes"
_HTTP_TUNING: Final = "HTTP tuning of object_store's client; boto3 uses its own connection pool"
_CREDENTIAL_CHAIN: Final = "boto3's credential chain reads it from the environment itself"

#: names that are understood and have no effect here -> why
_S3_WITHOUT_EFFECT: Final[dict[str, str]] = {
    "aws_s3_allow_unsafe_rename": "commits never rename: they are conditional writes, safe "
    "with concurrent writers",
    "aws_s3_locking_provider": _NO_LOCK,
    "delta_dynamo_table_name": _NO_LOCK,
    "delta_dynamo_billing_mode": _NO_LOCK,
    "delta_dynamo_max_elapsed_request_time": _NO_LOCK,
    "aws_endpoint_url_dynamodb": _NO_LOCK,
    "aws_region_dynamodb": _NO_LOCK,
    "aws_access_key_id_dynamodb": _NO_LOCK,
    "aws_secret_access_key_dynamodb": _NO_LOCK,
    "aws_session_token_dynamodb": _NO_LOCK,
    "aws_copy_if_not_exists": "commits use conditional PUT, never copy",
    "copy_if_not_exists": "commits use conditional PUT, never copy",
    "aws_disable_tagging": "txntable never tags objects",
    "disable_tagging": "txntable never tags objects",
    "aws_unsigned_payload": "boto3 decides payload signing itself",
    "unsigned_payload": "boto3 decides payload signing itself",
    "aws_s3_express": "boto3 recognises S3 Express directory buckets by their name",
    "s3_express": "boto3 recognises S3 Express directory buckets by their name",
    "aws_imdsv1_fallback": _CREDENTIAL_CHAIN,
    "imdsv1_fallback": _CREDENTIAL_CHAIN,
    "aws_metadata_endpoint": _CREDENTIAL_CHAIN,
    "metadata_endpoint": _CREDENTIAL_CHAIN,
    "aws_ec2_metadata_disabled": _CREDENTIAL_CHAIN,
    "aws_ec2_metadata_timeout": _CREDENTIAL_CHAIN,
    "aws_force_credential_load": _CREDENTIAL_CHAIN,
    "aws_container_credentials_relative_uri": _CREDENTIAL_CHAIN,
    "container_credentials_relative_uri": _CREDENTIAL_CHAIN,
    "aws_container_credentials_full_uri": _CREDENTIAL_CHAIN,
    "container_credentials_full_uri": _CREDENTIAL_CHAIN,
    "aws_container_authorization_token_file": _CREDENTIAL_CHAIN,
    "container_authorization_token_file": _CREDENTIAL_CHAIN,
    "aws_s3_pool_idle_timeout_seconds": _HTTP_TUNING,
    "aws_sts_pool_idle_timeout_seconds": _HTTP_TUNING,
    "aws_s3_get_internal_server_error_retries": "boto3's standard retry mode retries 5xx "
    "answers itself",
    "retry_timeout": _HTTP_TUNING,
    "backoff_config.init_backoff": _HTTP_TUNING,
    "backoff_config.max_backoff": _HTTP_TUNING,
    "backoff_config.base": _HTTP_TUNING,
    **{
        f"{prefix}{name}": _HTTP_TUNING
        for prefix in ("", "aws_")
        for name in (
            "pool_idle_timeout",
            "pool_max_idle_per_host",
            "http1_only",
            "http2_only",
            "http2_keep_alive_interval",
            "http2_keep_alive_timeout",
            "http2_keep_alive_while_idle",
            "http2_max_frame_size",
            "randomize_addresses",
            "default_content_type",
        )
    },
}

_ASSUME_ROLE: Final = (
    "assuming a role from storage options is not supported: use workload identity (IRSA puts "
    "AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE into the pod's environment, which boto3 "
    "reads) or a profile with role_arn"
)
_SSE_C: Final = "server-side encryption with customer keys (SSE-C) is not supported"
_PROXY_ENV: Final = "not supported: set HTTPS_PROXY, NO_PROXY and AWS_CA_BUNDLE in the environment"

#: names that are understood and cannot be honoured -> what to do instead
_S3_REFUSED: Final[dict[str, str]] = {
    **{
        name: _ASSUME_ROLE
        for name in (
            "aws_role_arn",
            "role_arn",
            "aws_role_session_name",
            "role_session_name",
            "aws_web_identity_token_file",
            "web_identity_token_file",
            "aws_endpoint_url_sts",
            "endpoint_url_sts",
            "aws_iam_role_arn",
            "aws_iam_role_session_name",
            "aws_s3_assume_role_arn",
            "aws_s3_role_session_name",
        )
    },
    "aws_sse_customer_key_base64": _SSE_C,
    "sse_customer_key_base64": _SSE_C,
    "aws_proxy_ca_certificate": _PROXY_ENV,
    "proxy_ca_certificate": _PROXY_ENV,
    "aws_proxy_excludes": _PROXY_ENV,
    "proxy_excludes": _PROXY_ENV,
}

_CANONICAL: Final = {alias: name for name, aliases in _S3_ALIASES.items() for alias in aliases}
_TRUE: Final = frozenset({"true", "1", "yes", "y", "on"})
_FALSE: Final = frozenset({"false", "0", "no", "n", "off"})
_DURATION: Final = re.compile(
    r"^\s*(\d+(?:\.\d+)?)\s*(ms|msec|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hours?)?\s*$"
)
_UNIT_SECONDS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_SSE: Final = {"aes256": "AES256", "aws:kms": "aws:kms", "aws:kms:dsse": "aws:kms:dsse"}
_CHECKSUMS: Final = {"sha256": "SHA256", "sha1": "SHA1", "crc32": "CRC32", "crc32c": "CRC32C"}

#: schemes ``open_storage`` serves; everything else is refused with this list
SUPPORTED_SCHEMES: Final = (
    "a local path or file:// (local disk)",
    "s3:// or s3a:// (Amazon S3 and S3-compatible stores with conditional writes)",
    "abfss://, abfs://, az:// or azure:// (Azure Blob Storage and ADLS Gen2)",
    "memory:// (in-process, for tests)",
)
AZURE_SCHEMES: Final = ("abfss", "abfs", "az", "azure")


def primary_s3_option_names() -> list[str]:
    """One name per setting, as delta-rs writes it (``AWS_ENDPOINT_URL``, ...)."""
    return [aliases[0].upper() for aliases in _S3_ALIASES.values()]


@dataclass(frozen=True)
class S3Settings:
    """What the options of one S3 table ask of the client. ``repr`` shows no credential."""

    #: boto3 ``Session`` arguments (credentials, profile)
    session: dict[str, str] = field(default_factory=dict, repr=False)
    #: ``session.client("s3", ...)`` arguments (endpoint, region, TLS)
    client: dict[str, Any] = field(default_factory=dict)
    #: ``botocore.config.Config`` arguments (timeouts, addressing, proxies, retries, signing)
    config: dict[str, Any] = field(default_factory=dict)
    #: extra ``PutObject`` parameters (server-side encryption, checksum)
    put_args: dict[str, Any] = field(default_factory=dict)
    #: extra parameters of every request (``RequestPayer``)
    request_args: dict[str, str] = field(default_factory=dict)
    conditional_put: bool = True
    #: the bucket the options name, if any (must be the URI's)
    bucket: str | None = None
    #: options given that have no effect here -> why (names as the user wrote them)
    without_effect: dict[str, str] = field(default_factory=dict)


def bool_option(name: str, value: Any) -> bool:
    """A true/false option as object_store spells it (``true``, ``1``, ``yes``, ``on``, ...)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise InvalidArgumentError(f"storage option {name} must be true or false, got {value!r}")


def _seconds(name: str, value: Any) -> float:
    match = _DURATION.match(str(value))
    if match is None:
        raise InvalidArgumentError(
            f"storage option {name} must be a duration such as 30s, 500ms or 2m, got {value!r}"
        )
    unit = (match.group(2) or "s").lower()
    factor = 0.001 if unit.startswith("ms") or unit.startswith("milli") else _UNIT_SECONDS[unit[0]]
    seconds = float(match.group(1)) * factor
    if seconds <= 0:
        raise InvalidArgumentError(f"storage option {name} must be longer than 0")
    return seconds


def _conditional_put(name: str, value: Any) -> bool:
    text = str(value).strip().lower()
    if text in ("etag", "disabled", "none") or text in _TRUE or text in _FALSE:
        return text == "etag" or text in _TRUE
    if text.startswith("dynamo"):
        raise InvalidArgumentError(
            f"storage option {name}={value!r}: commits use S3's own conditional writes "
            "(If-None-Match); a DynamoDB lock is not used. Use etag (or leave it out)."
        )
    raise InvalidArgumentError(
        f"storage option {name} must be etag or true (the store supports conditional writes, "
        f"the default) or disabled or false (it does not), got {value!r}"
    )


def _sort_options(
    options: Mapping[str, Any],
    refused: Mapping[str, str],
    without_effect_names: Mapping[str, str],
    canonical_names: Mapping[str, str],
) -> tuple[dict[str, tuple[str, Any]], dict[str, str], list[str]]:
    """Sort option names (any case) into (given by canonical name, without effect, unknown);
    raise on a refused option or on two aliases set to different values."""
    given: dict[str, tuple[str, Any]] = {}
    without_effect: dict[str, str] = {}
    unknown: list[str] = []
    for raw_name, value in options.items():
        name = str(raw_name)
        lower = name.strip().lower()
        if lower in refused:
            raise InvalidArgumentError(f"storage option {name}: {refused[lower]}")
        if lower in without_effect_names:
            without_effect[name] = without_effect_names[lower]
            continue
        canonical = canonical_names.get(lower)
        if canonical is None:
            unknown.append(name)
            continue
        if canonical in given and str(given[canonical][1]) != str(value):
            raise InvalidArgumentError(
                f"storage options {given[canonical][0]} and {name} set the same thing; keep one"
            )
        given[canonical] = (name, value)
    return given, without_effect, unknown


@dataclass(frozen=True)
class _Given:
    """The options a table sets, by canonical name: (the name as written, the value)."""

    options: Mapping[str, tuple[str, Any]]

    def __contains__(self, canonical: str) -> bool:
        return canonical in self.options

    def __getitem__(self, canonical: str) -> tuple[str, Any]:
        return self.options[canonical]

    def name(self, canonical: str) -> str:
        """The option's name as written (the canonical name when not given)."""
        return self.options[canonical][0] if canonical in self.options else canonical

    def text(self, canonical: str) -> str | None:
        """The value stripped, None when not given; an empty value is an error."""
        if canonical not in self.options:
            return None
        name, value = self.options[canonical]
        out = str(value).strip()
        if not out:
            raise InvalidArgumentError(f"storage option {name} is empty")
        return out

    def flag(self, canonical: str) -> bool | None:
        """The value as a boolean, None when not given."""
        return bool_option(*self.options[canonical]) if canonical in self.options else None

    def conditional_put(self) -> bool:
        """Whether the store takes conditional writes (the default: yes)."""
        return _conditional_put(*self["conditional_put"]) if "conditional_put" in self else True


def parse_s3_options(options: Mapping[str, Any]) -> S3Settings:
    """Sort the options of an S3 table into client settings; raise on unknown or refused ones.

    Raises ``InvalidArgumentError`` naming the option (never a credential's value)."""
    given, without_effect, unknown = _sort_options(
        options, _S3_REFUSED, _S3_WITHOUT_EFFECT, _CANONICAL
    )
    if unknown:
        raise InvalidArgumentError(
            f"unknown S3 storage option{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(sorted(unknown))}; accepted (any case, with their object_store and "
            f"fsspec aliases): {', '.join(primary_s3_option_names())}; and, without effect, "
            "the delta-rs locking and HTTP tuning options (docs/writing-and-storage.md)"
        )
    return _settings(_Given(given), without_effect)


def _settings(given: _Given, without_effect: dict[str, str]) -> S3Settings:
    # keyword arguments are evaluated in order: a bad option is reported as before
    return S3Settings(
        session=_s3_session(given),
        client=_s3_client(given),
        config=_s3_config(given),
        put_args=_s3_put_args(given),
        request_args={"RequestPayer": "requester"} if given.flag("request_payer") else {},
        conditional_put=given.conditional_put(),
        bucket=given.text("bucket"),
        without_effect=without_effect,
    )


def _s3_session(given: _Given) -> dict[str, str]:
    """boto3 session arguments: the credentials or the profile."""
    session: dict[str, str] = {}
    for canonical, arg in (
        ("access_key_id", "aws_access_key_id"),
        ("secret_access_key", "aws_secret_access_key"),
        ("session_token", "aws_session_token"),
        ("profile", "profile_name"),
    ):
        value = given.text(canonical)
        if value is not None:
            session[arg] = value
    return session


def _s3_client(given: _Given) -> dict[str, Any]:
    """boto3 client arguments: endpoint (http:// only when allowed), region, TLS."""
    client: dict[str, Any] = {}
    allow_http = given.flag("allow_http")
    endpoint = given.text("endpoint")
    if endpoint is not None:
        scheme = urlsplit(endpoint).scheme.lower()
        if scheme not in ("http", "https"):
            raise InvalidArgumentError(
                f"storage option {given.name('endpoint')} must be an http:// or https:// URL, "
                f"got {endpoint!r}"
            )
        if scheme == "http" and allow_http is False:
            raise InvalidArgumentError(
                f"storage option {given.name('endpoint')} is plain http:// but "
                f"{given.name('allow_http')} is false"
            )
        client["endpoint_url"] = endpoint
    region = given.text("region") or given.text("default_region")
    if region is not None:
        client["region_name"] = region
    if given.flag("use_ssl") is False:
        client["use_ssl"] = False
    ca_bundle = given.text("ca_bundle")
    if ca_bundle is not None:
        client["verify"] = ca_bundle
    if given.flag("allow_invalid_certificates"):
        client["verify"] = False
    return client


def _s3_config(given: _Given) -> dict[str, Any]:
    """botocore Config arguments: addressing, timeouts, proxy, signing, retries."""
    config: dict[str, Any] = {}
    style = given.flag("virtual_hosted_style_request")
    addressing = given.text("addressing_style")
    if addressing is not None:
        if addressing.lower() not in ("path", "virtual"):
            raise InvalidArgumentError(
                f"storage option {given.name('addressing_style')} must be path or virtual, "
                f"got {addressing!r}"
            )
        config["s3"] = {"addressing_style": addressing.lower()}
    elif style is not None:
        config["s3"] = {"addressing_style": "virtual" if style else "path"}
    if "connect_timeout" in given:
        config["connect_timeout"] = _seconds(*given["connect_timeout"])
    if "timeout" in given:
        config["read_timeout"] = _seconds(*given["timeout"])
    proxy = given.text("proxy_url")
    if proxy is not None:
        config["proxies"] = {"http": proxy, "https": proxy}
    agent = given.text("user_agent")
    if agent is not None:
        config["user_agent"] = agent
    if given.flag("skip_signature"):
        config["signature_version"] = "unsigned"
    if "max_retries" in given:
        name, value = given["max_retries"]
        if not str(value).strip().isdigit():
            raise InvalidArgumentError(f"storage option {name} must be a whole number >= 0")
        # botocore's max_attempts counts retries, not the first request
        config["retries"] = {"mode": "standard", "max_attempts": int(str(value).strip())}
    return config


def _s3_put_args(given: _Given) -> dict[str, Any]:
    """Arguments of every PUT: checksum and server-side encryption."""
    put_args: dict[str, Any] = {}
    checksum = given.text("checksum_algorithm")
    if checksum is not None:
        if checksum.lower() not in _CHECKSUMS:
            raise InvalidArgumentError(
                f"storage option {given.name('checksum_algorithm')} must be one of "
                f"{', '.join(sorted(_CHECKSUMS))}, got {checksum!r}"
            )
        put_args["ChecksumAlgorithm"] = _CHECKSUMS[checksum.lower()]
    sse = given.text("server_side_encryption")
    if sse is not None:
        if sse.lower() not in _SSE:
            raise InvalidArgumentError(
                f"storage option {given.name('server_side_encryption')} must be one of "
                f"AES256, aws:kms, aws:kms:dsse (SSE-C is not supported), got {sse!r}"
            )
        put_args["ServerSideEncryption"] = _SSE[sse.lower()]
    kms_key = given.text("sse_kms_key_id")
    if kms_key is not None:
        if not str(put_args.get("ServerSideEncryption", "")).startswith("aws:kms"):
            raise InvalidArgumentError(
                f"storage option {given.name('sse_kms_key_id')} needs server_side_encryption "
                "aws:kms or aws:kms:dsse"
            )
        put_args["SSEKMSKeyId"] = kms_key
    bucket_key = given.flag("sse_bucket_key_enabled")
    if bucket_key is not None:
        put_args["BucketKeyEnabled"] = bucket_key
    return put_args


def _with_environment(
    options: Mapping[str, Any],
    canonical: Mapping[str, str],
    prefix: str,
    environ: Mapping[str, str] | None,
) -> dict[str, Any]:
    """``options`` plus the environment variables (``AWS_*``/``AZURE_*``, upper case) that name
    a setting the options leave open, as object_store's ``from_env`` does: run pods receive the
    Secret's keys as environment variables. Options win; unknown variables are left alone."""
    import os

    env = os.environ if environ is None else environ
    given = {canonical.get(str(k).strip().lower()) for k in options}
    merged = dict(options)
    for name, value in env.items():
        if not name.startswith(prefix) or name != name.upper() or not value:
            continue
        setting = canonical.get(name.lower())
        if setting is not None and setting not in given:
            merged[name] = value
            given.add(setting)
    return merged


def s3_options_with_environment(
    options: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """S3 options completed from ``AWS_*`` environment variables (options win)."""
    return _with_environment(options, _CANONICAL, "AWS_", environ)


def azure_options_with_environment(
    options: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Azure options completed from ``AZURE_*`` environment variables (options win)."""
    return _with_environment(options, _AZURE_CANONICAL, "AZURE_", environ)


_reported: set[frozenset[str]] = set()


def report_without_effect(where: str, without_effect: Mapping[str, str]) -> None:
    """One info line per process and set of names: which options do nothing, and why."""
    if not without_effect:
        return
    names = frozenset(without_effect)
    if names in _reported:
        return
    _reported.add(names)
    log.info(
        "storage options without effect for %s: %s",
        where,
        "; ".join(f"{name} ({why})" for name, why in sorted(without_effect.items())),
    )


def uri_scheme(uri: str) -> str:
    """The lower-case scheme of a table URI; ``""`` for a plain path."""
    scheme = urlsplit(uri).scheme
    return scheme.lower() if len(scheme) > 1 else ""  # 'C:' is a drive, not a scheme


def unsupported_scheme_error(uri: str) -> StorageError:
    """The error for a URI whose store txntable does not serve, naming the ones it does."""
    return StorageError(
        f"{uri_scheme(uri)}:// tables are not supported: commits need an atomic put-if-absent, "
        f"which txntable implements for {'; '.join(SUPPORTED_SCHEMES)}"
    )


# ------------------------------------------------------------------------------- Azure

_AZURE_ALIASES: Final[dict[str, tuple[str, ...]]] = {
    "account_name": ("azure_storage_account_name", "account_name"),
    "account_key": (
        "azure_storage_account_key",
        "azure_storage_access_key",
        "azure_storage_master_key",
        "master_key",
        "account_key",
        "access_key",
    ),
    "sas": ("azure_storage_sas_key", "azure_storage_sas_token", "sas_key", "sas_token"),
    "token": ("azure_storage_token", "bearer_token", "token"),
    "client_id": ("azure_storage_client_id", "azure_client_id", "client_id"),
    "client_secret": ("azure_storage_client_secret", "azure_client_secret", "client_secret"),
    "tenant_id": (
        "azure_storage_tenant_id",
        "azure_storage_authority_id",
        "azure_tenant_id",
        "azure_authority_id",
        "tenant_id",
        "authority_id",
    ),
    "authority_host": ("azure_storage_authority_host", "azure_authority_host", "authority_host"),
    "federated_token_file": ("azure_federated_token_file", "federated_token_file"),
    "use_azure_cli": ("azure_use_azure_cli", "use_azure_cli"),
    "use_emulator": ("azure_storage_use_emulator", "use_emulator"),
    "endpoint": ("azure_storage_endpoint", "azure_endpoint", "endpoint"),
    "allow_http": ("azure_allow_http", "allow_http"),
    "skip_signature": ("azure_skip_signature", "skip_signature"),
    "container_name": ("azure_container_name", "container_name"),
    "connect_timeout": ("azure_connect_timeout", "connect_timeout"),
    "timeout": ("azure_timeout", "timeout"),
    "proxy_url": ("azure_proxy_url", "proxy_url"),
    "user_agent": ("azure_user_agent", "user_agent"),
    "conditional_put": ("azure_conditional_put", "conditional_put"),
}
_AZURE_CANONICAL: Final = {a: name for name, aliases in _AZURE_ALIASES.items() for a in aliases}
_AZURE_WITHOUT_EFFECT: Final[dict[str, str]] = {
    "azure_disable_tagging": "txntable never tags blobs",
    "disable_tagging": "txntable never tags blobs",
    "azure_msi_endpoint": "the managed identity is found by azure-identity itself",
    "azure_identity_endpoint": "the managed identity is found by azure-identity itself",
    "identity_endpoint": "the managed identity is found by azure-identity itself",
    "msi_endpoint": "the managed identity is found by azure-identity itself",
    **{
        f"{prefix}{name}": _HTTP_TUNING
        for prefix in ("", "azure_")
        for name in (
            "pool_idle_timeout",
            "pool_max_idle_per_host",
            "http1_only",
            "http2_only",
            "http2_keep_alive_interval",
            "http2_keep_alive_timeout",
            "http2_keep_alive_while_idle",
            "http2_max_frame_size",
            "randomize_addresses",
            "default_content_type",
            "allow_invalid_certificates",
        )
    },
    "retry_timeout": _HTTP_TUNING,
    "max_retries": _HTTP_TUNING,
}
_AZURE_REFUSED: Final[dict[str, str]] = {
    "azure_use_fabric_endpoint": "Microsoft Fabric OneLake is not supported",
    "use_fabric_endpoint": "Microsoft Fabric OneLake is not supported",
    "azure_object_id": "pick a user-assigned managed identity with azure_client_id",
    "object_id": "pick a user-assigned managed identity with azure_client_id",
    "azure_msi_resource_id": "pick a user-assigned managed identity with azure_client_id",
    "msi_resource_id": "pick a user-assigned managed identity with azure_client_id",
    "azure_proxy_ca_certificate": _PROXY_ENV,
    "proxy_ca_certificate": _PROXY_ENV,
    "azure_proxy_excludes": _PROXY_ENV,
    "proxy_excludes": _PROXY_ENV,
}

#: Azurite's documented development account (public, not a secret)
EMULATOR_ACCOUNT: Final = "devstoreaccount1"
EMULATOR_KEY: Final = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


@dataclass(frozen=True)
class AzureSettings:
    """What the options of one Azure table ask of the blob client. ``repr`` shows no secret."""

    account_name: str | None = None
    #: the account URL containers hang off (``https://<account>.blob.core.windows.net``)
    endpoint: str | None = None
    #: Azurite's base URL when the emulator is asked for (the account is appended)
    emulator_url: str | None = None
    #: one of: "key", "sas", "token", "client_secret", "workload_identity", "cli",
    #: "anonymous", "default" (azure-identity's DefaultAzureCredential)
    auth: str = "default"
    secrets: dict[str, str] = field(default_factory=dict, repr=False)
    client_id: str | None = None
    tenant_id: str | None = None
    authority_host: str | None = None
    federated_token_file: str | None = None
    #: ``BlobServiceClient`` keyword arguments (timeouts, proxies, user agent)
    client: dict[str, Any] = field(default_factory=dict)
    container: str | None = None
    conditional_put: bool = True
    without_effect: dict[str, str] = field(default_factory=dict)


def parse_azure_options(
    options: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> AzureSettings:
    """Sort the options of an Azure table into client settings (object_store's names).

    ``AZURITE_BLOB_STORAGE_URL`` in ``environ`` moves the emulator from its default
    ``http://127.0.0.1:10000``, as object_store does. Raises ``InvalidArgumentError``."""
    import os

    env = os.environ if environ is None else environ
    sorted_options, without_effect, unknown = _sort_options(
        options, _AZURE_REFUSED, _AZURE_WITHOUT_EFFECT, _AZURE_CANONICAL
    )
    if unknown:
        raise InvalidArgumentError(
            f"unknown Azure storage option{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(sorted(unknown))}; accepted (any case, with their object_store "
            f"aliases): {', '.join(a[0].upper() for a in _AZURE_ALIASES.values())}"
        )
    given = _Given(sorted_options)
    account = given.text("account_name")
    endpoint = given.text("endpoint")
    emulator_url = None
    if given.flag("use_emulator"):
        emulator_url = env.get("AZURITE_BLOB_STORAGE_URL", "http://127.0.0.1:10000").rstrip("/")
    auth, secrets = _azure_credential(given)
    if endpoint is not None:
        _check_azure_endpoint(given, endpoint)
    # keyword arguments are evaluated in order: a bad option is reported as before
    return AzureSettings(
        account_name=account,
        endpoint=endpoint.rstrip("/") if endpoint else None,
        emulator_url=emulator_url,
        auth=auth,
        secrets=secrets,
        client=_azure_client(given),
        conditional_put=given.conditional_put(),
        client_id=given.text("client_id"),
        tenant_id=given.text("tenant_id"),
        authority_host=given.text("authority_host"),
        federated_token_file=given.text("federated_token_file"),
        container=given.text("container_name"),
        without_effect=without_effect,
    )


def _azure_credential(given: _Given) -> tuple[str, dict[str, str]]:
    """(auth, secrets): the one credential the options choose (the emulator's well-known key
    when none is given to the emulator; ``default``: the Azure SDK's chain)."""
    auth, secrets = "default", {}
    if given.flag("use_emulator") and "account_key" not in given and "sas" not in given:
        auth, secrets = "key", {"account_key": EMULATOR_KEY}
    chosen: list[str] = [c for c in ("account_key", "sas", "token", "client_secret") if c in given]
    if given.flag("skip_signature"):
        chosen.append("skip_signature")
    if given.flag("use_azure_cli"):
        chosen.append("use_azure_cli")
    if len(chosen) > 1:
        names = ", ".join(given.name(c) for c in chosen)
        raise InvalidArgumentError(f"storage options {names} each choose a credential; keep one")
    if "account_key" in given:
        return "key", {"account_key": given.text("account_key") or ""}
    if "sas" in given:
        return "sas", {"sas": (given.text("sas") or "").lstrip("?")}
    if "token" in given:
        return "token", {"token": given.text("token") or ""}
    if "client_secret" in given or "federated_token_file" in given:
        canonical = "client_secret" if "client_secret" in given else "federated_token_file"
        if "client_id" not in given or "tenant_id" not in given:
            raise InvalidArgumentError(
                f"storage option {given.name(canonical)} needs AZURE_CLIENT_ID and "
                "AZURE_TENANT_ID too"
            )
        if canonical == "client_secret":
            return "client_secret", {"client_secret": given.text("client_secret") or ""}
        return "workload_identity", secrets  # the emulator's key stays, as before
    if given.flag("skip_signature"):
        return "anonymous", secrets
    if given.flag("use_azure_cli"):
        return "cli", secrets
    return auth, secrets


def _check_azure_endpoint(given: _Given, endpoint: str) -> None:
    """An http(s) URL; plain http only when allowed or for the emulator."""
    scheme = urlsplit(endpoint).scheme.lower()
    if scheme not in ("http", "https"):
        raise InvalidArgumentError(
            f"storage option {given.name('endpoint')} must be an http:// or https:// URL, "
            f"got {endpoint!r}"
        )
    if scheme == "http" and not given.flag("allow_http") and not given.flag("use_emulator"):
        raise InvalidArgumentError(
            f"the Azure endpoint {endpoint!r} is plain http://: set AZURE_ALLOW_HTTP=true "
            "to allow it"
        )


def _azure_client(given: _Given) -> dict[str, Any]:
    """Transport settings: timeouts, proxy, user agent."""
    client: dict[str, Any] = {}
    if "connect_timeout" in given:
        client["connection_timeout"] = _seconds(*given["connect_timeout"])
    if "timeout" in given:
        client["read_timeout"] = _seconds(*given["timeout"])
    proxy = given.text("proxy_url")
    if proxy is not None:
        client["proxies"] = {"http": proxy, "https": proxy}
    agent = given.text("user_agent")
    if agent is not None:
        client["user_agent"] = agent
    return client
