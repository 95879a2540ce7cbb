"""Azure storage options (object_store's names) as Azure SDK settings.

The names of each setting, the ones that do nothing here and why, the ones refused and what to
do instead, and ``parse_azure_options``, which picks the one credential a table's options
choose and the blob client's transport settings. The sorting itself is ``options``'s.
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

_PROXY_ENV: Final = proxy_env("REQUESTS_CA_BUNDLE")
_HTTP_TUNING: Final = "HTTP tuning of object_store's client; the Azure SDK has its own transport"

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
    **http_tuning("azure_", _HTTP_TUNING, "allow_invalid_certificates"),
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
    sorted_options, without_effect, unknown = sort_options(
        options, _AZURE_REFUSED, _AZURE_WITHOUT_EFFECT, _AZURE_CANONICAL
    )
    if unknown:
        raise InvalidArgumentError(
            f"unknown Azure storage option{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(sorted(unknown))}; accepted (any case, with their object_store "
            f"aliases): {', '.join(a[0].upper() for a in _AZURE_ALIASES.values())}"
        )
    given = GivenOptions(sorted_options)
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


def _azure_credential(given: GivenOptions) -> tuple[str, dict[str, str]]:
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


def _check_azure_endpoint(given: GivenOptions, endpoint: str) -> None:
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


def _azure_client(given: GivenOptions) -> dict[str, Any]:
    """Transport settings: timeouts, proxy, user agent."""
    client: dict[str, Any] = {}
    if "connect_timeout" in given:
        client["connection_timeout"] = seconds_option(*given["connect_timeout"])
    if "timeout" in given:
        client["read_timeout"] = seconds_option(*given["timeout"])
    proxy = given.text("proxy_url")
    if proxy is not None:
        client["proxies"] = {"http": proxy, "https": proxy}
    agent = given.text("user_agent")
    if agent is not None:
        client["user_agent"] = agent
    return client


def azure_options_with_environment(
    options: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Azure options completed from ``AZURE_*`` environment variables (options win)."""
    return with_environment(options, _AZURE_CANONICAL, "AZURE_", environ)
