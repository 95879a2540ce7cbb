"""S3 storage options (delta-rs, object_store and fsspec names) as boto3 settings.

The names of each setting, the ones that do nothing here and why, the ones refused and what to
do instead, and ``parse_s3_options``, which turns a table's options into the arguments of
boto3's session, client, ``Config`` and ``PutObject``. The sorting itself is ``options``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from txntable.engine.errors import InvalidArgumentError
from txntable.engine.storage.options import (
    GivenOptions,
    http_tuning,
    proxy_env,
    seconds_option,
    sort_options,
    with_environment,
)

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
_PROXY_ENV: Final = proxy_env("AWS_CA_BUNDLE")
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
    **http_tuning("aws_", _HTTP_TUNING),
}

_ASSUME_ROLE: Final = (
    "assuming a role from storage options is not supported: use workload identity (IRSA puts "
    "AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE into the pod's environment, which boto3 "
    "reads) or a profile with role_arn"
)
_SSE_C: Final = "server-side encryption with customer keys (SSE-C) is not supported"

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
_SSE: Final = {"aes256": "AES256", "aws:kms": "aws:kms", "aws:kms:dsse": "aws:kms:dsse"}
_CHECKSUMS: Final = {"sha256": "SHA256", "sha1": "SHA1", "crc32": "CRC32", "crc32c": "CRC32C"}


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


def parse_s3_options(options: Mapping[str, Any]) -> S3Settings:
    """Sort the options of an S3 table into client settings; raise on unknown or refused ones.

    Raises ``InvalidArgumentError`` naming the option (never a credential's value)."""
    given, without_effect, unknown = sort_options(
        options, _S3_REFUSED, _S3_WITHOUT_EFFECT, _CANONICAL
    )
    if unknown:
        raise InvalidArgumentError(
            f"unknown S3 storage option{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(sorted(unknown))}; accepted (any case, with their object_store and "
            f"fsspec aliases): {', '.join(primary_s3_option_names())}; and, without effect, "
            "the delta-rs locking and HTTP tuning options (docs/writing-and-storage.md)"
        )
    return _settings(GivenOptions(given), without_effect)


def _settings(given: GivenOptions, without_effect: dict[str, str]) -> S3Settings:
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


def _s3_session(given: GivenOptions) -> dict[str, str]:
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


def _s3_client(given: GivenOptions) -> dict[str, Any]:
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


def _s3_config(given: GivenOptions) -> dict[str, Any]:
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
        config["connect_timeout"] = seconds_option(*given["connect_timeout"])
    if "timeout" in given:
        config["read_timeout"] = seconds_option(*given["timeout"])
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


def _s3_put_args(given: GivenOptions) -> dict[str, Any]:
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


def s3_options_with_environment(
    options: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """S3 options completed from ``AWS_*`` environment variables (options win)."""
    return with_environment(options, _CANONICAL, "AWS_", environ)
