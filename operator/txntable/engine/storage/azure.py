"""Azure Blob Storage and ADLS Gen2 tables, with commits by conditional PUT.

Azure's Put Blob with ``If-None-Match: *`` creates a blob only if none exists under the name and
answers 409 ``BlobAlreadyExists`` otherwise: the atomic put-if-absent a Delta commit needs. The
official client (azure-storage-blob) sends exactly that for ``upload_blob(overwrite=False)``.
ADLS Gen2 accounts (``abfss://container@account.dfs.core.windows.net/...``) are reached through
their Blob endpoint, which serves hierarchical-namespace accounts too.

The client retries timeouts itself, so a 409 can answer our own earlier PUT whose response was
lost: on 409 the stored blob is read back and compared with ours. Commit bodies carry a unique
``txnId``, so equal bytes mean our PUT won and the commit is neither lost nor written twice.

Options use object_store's names (``azure_options.parse_azure_options``); without a key, SAS
or token, credentials come from azure-identity's default chain (workload identity, managed
identity, environment, Azure CLI). Secrets never reach a log line or an error message.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from txntable.engine.errors import InvalidArgumentError, StorageError
from txntable.engine.storage.azure_options import (
    EMULATOR_ACCOUNT,
    AzureSettings,
    azure_options_with_environment,
    parse_azure_options,
)
from txntable.engine.storage.base import FileExistsInStoreError, FileInfo
from txntable.engine.storage.object_store import ObjectStorage
from txntable.engine.storage.options import AZURE_SCHEMES, report_without_effect
from txntable.engine.storage.paths import LOG_DIR

log = logging.getLogger(__name__)


def azure_target(uri: str, settings: AzureSettings) -> tuple[str, str, str, str]:
    """``(account URL, account, container, key prefix)`` of an Azure table URI.

    ``abfs[s]://container@account.dfs.core.windows.net/path`` names both; ``az://container/path``,
    ``azure://container/path`` and ``abfs[s]://container/path`` take the account from the
    options (``AZURE_STORAGE_ACCOUNT_NAME`` or ``AZURE_STORAGE_ENDPOINT``)."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme not in AZURE_SCHEMES:
        raise InvalidArgumentError(f"not an Azure URI: {uri!r}")
    host = parts.netloc
    prefix = parts.path.strip("/")
    container, at, host_part = host.partition("@")
    if not container:
        raise InvalidArgumentError(f"Azure URI has no container: {uri!r}")
    account_url = settings.endpoint
    account = settings.account_name or ""
    if at:
        account, _, suffix = host_part.partition(".")
        if settings.account_name and settings.account_name != account:
            raise InvalidArgumentError(
                f"storage option account_name names {settings.account_name!r}, the URI {account!r}"
            )
        if account_url is None and settings.emulator_url is None:
            # ADLS Gen2 (dfs) accounts answer the Blob API on their blob host
            blob_suffix = suffix.replace("dfs.", "blob.", 1) if suffix else "blob.core.windows.net"
            account_url = f"https://{account}.{blob_suffix}"
    if account_url is None and settings.emulator_url is not None:
        account = account or EMULATOR_ACCOUNT
        account_url = f"{settings.emulator_url}/{account}"
    elif account_url is None:
        if not account:
            raise InvalidArgumentError(
                f"{uri!r} names no storage account: use abfss://container@account.dfs."
                "core.windows.net/path or set AZURE_STORAGE_ACCOUNT_NAME"
            )
        account_url = f"https://{account}.blob.core.windows.net"
    if not account:
        # an explicit endpoint: Azurite's path-style URL carries the account in its path
        parsed = urlsplit(account_url)
        account = parsed.path.strip("/").split("/")[0] or parsed.netloc.split(".")[0]
    if settings.container is not None and settings.container != container:
        raise InvalidArgumentError(
            f"storage option container_name names {settings.container!r}, the URI {container!r}"
        )
    return account_url, account, container, prefix


def _credential(settings: AzureSettings, account: str) -> Any:
    if settings.auth == "key":
        return {"account_name": account, "account_key": settings.secrets["account_key"]}
    if settings.auth == "sas":
        return settings.secrets["sas"]
    if settings.auth == "anonymous":
        return None
    if settings.auth == "token":
        from azure.core.credentials import AccessToken

        token = settings.secrets["token"]

        class _Static:
            def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
                return AccessToken(token, int(time.time()) + 3600)

        return _Static()
    try:
        from azure import identity
    except ImportError as exc:
        raise StorageError(
            "Azure tables without an account key, SAS or token need azure-identity "
            "(pip install 'txntable[azure]'; the released images include it)"
        ) from exc
    extra: dict[str, Any] = {}
    if settings.authority_host:
        extra["authority"] = settings.authority_host
    if settings.auth == "client_secret":
        return identity.ClientSecretCredential(
            settings.tenant_id or "",
            settings.client_id or "",
            settings.secrets["client_secret"],
            **extra,
        )
    if settings.auth == "workload_identity":
        return identity.WorkloadIdentityCredential(
            tenant_id=settings.tenant_id,
            client_id=settings.client_id,
            token_file_path=settings.federated_token_file,
            **extra,
        )
    if settings.auth == "cli":
        return identity.AzureCliCredential()
    if settings.client_id:
        extra["managed_identity_client_id"] = settings.client_id
        extra["workload_identity_client_id"] = settings.client_id
    return identity.DefaultAzureCredential(**extra)


class AzureStorage(ObjectStorage):
    """A table in an Azure container; commits use ``If-None-Match: *``."""

    atomic_put_if_absent = True

    def __init__(
        self, uri: str, storage_options: Mapping[str, Any] | None = None, client: Any = None
    ) -> None:
        super().__init__(uri)
        settings = parse_azure_options(azure_options_with_environment(storage_options or {}))
        self.account_url, self.account, self.container, self.prefix = azure_target(uri, settings)
        self.atomic_put_if_absent = settings.conditional_put
        #: options given that do nothing here (name -> why); also logged once at info
        self.options_without_effect = dict(settings.without_effect)
        report_without_effect(f"{self.container} in {self.account_url}", settings.without_effect)
        self.client = client if client is not None else self._make_client(settings)

    def _make_client(self, settings: AzureSettings) -> Any:
        try:
            from azure.storage.blob import BlobServiceClient
        except ImportError as exc:
            raise StorageError(
                "Azure tables need azure-storage-blob, which this installation lacks "
                "(pip install 'txntable[azure]'; the released images include it)"
            ) from exc
        # azure-core logs every request and response at INFO: keep the controller's log for
        # what it does, unless someone configured that logger on purpose
        http_log = logging.getLogger("azure.core.pipeline.policies.http_logging_policy")
        if http_log.level == logging.NOTSET:
            http_log.setLevel(logging.WARNING)
        options: dict[str, Any] = {"connection_timeout": 10, "read_timeout": 30}
        options.update(settings.client)
        service = BlobServiceClient(
            self.account_url, credential=_credential(settings, self.account), **options
        )
        return service.get_container_client(self.container)

    def _where(self) -> str:
        return f"container {self.container} of {self.account_url}"

    # -- reads ------------------------------------------------------------------------------
    def list_dir(self, relative_dir: str, start_at: str = "") -> list[FileInfo]:
        prefix = self._key(relative_dir).rstrip("/") + "/"
        out: list[FileInfo] = []
        try:
            for item in self.client.walk_blobs(name_starts_with=prefix, delimiter="/"):
                name = str(item.name)[len(prefix) :]
                if not name or "/" in name or name < start_at or not hasattr(item, "size"):
                    continue  # a "directory" (BlobPrefix) or outside the range
                out.append(FileInfo(name, int(item.size), _mtime_ms(item)))
        except Exception as exc:
            raise self._storage_error(f"listing {relative_dir}", exc) from exc
        out.sort(key=lambda f: f.name)
        return out

    def list_tree(self, skip_dir: Callable[[str], bool] | None = None) -> Iterator[FileInfo]:
        prefix = self._key("").rstrip("/")
        prefix = prefix + "/" if prefix else ""
        try:
            for item in self.client.list_blobs(name_starts_with=prefix):
                name = str(item.name)[len(prefix) :]
                if not name or name.endswith("/"):
                    continue
                if skip_dir is not None and any(skip_dir(d) for d in name.split("/")[:-1]):
                    continue
                yield FileInfo(name, int(item.size), _mtime_ms(item))
        except Exception as exc:
            raise self._storage_error("listing the table", exc) from exc

    def has_log_files(self) -> bool:
        prefix = self._key(LOG_DIR) + "/"
        try:
            pages = self.client.list_blobs(name_starts_with=prefix, results_per_page=1)
            return next(iter(pages), None) is not None
        except Exception as exc:
            raise self._storage_error(f"listing {LOG_DIR}", exc) from exc

    def _get(self, key: str) -> bytes:
        data: bytes = self.client.download_blob(key).readall()
        return data

    def _get_tail(self, key: str, length: int) -> bytes:
        # Blob storage has no suffix range: the size first, then the range
        size = int(self.client.get_blob_client(key).get_blob_properties().size)
        if size == 0:
            return b""
        offset = max(0, size - length)
        data: bytes = self.client.download_blob(key, offset=offset, length=size - offset).readall()
        return data

    def _missing(self, exc: Exception) -> bool:
        return _status(exc) == 404

    # -- writes -----------------------------------------------------------------------------
    def write_if_absent(self, relative: str, data: bytes) -> None:
        self._require_conditional_put()
        try:
            self.client.upload_blob(self._key(relative), data, overwrite=False)
            return
        except Exception as exc:
            if _status(exc) not in (409, 412):
                raise self._storage_error(f"writing {relative}", exc) from exc
        # taken: by another writer, or by our own PUT whose answer the client's retry lost
        if self._holds(relative, data):
            log.info("commit %s landed before its response was lost", relative)
            return
        raise FileExistsInStoreError(f"{relative} already exists")

    def _put(self, key: str, data: bytes) -> None:
        self.client.upload_blob(key, data, overwrite=True)

    def _remove(self, key: str) -> None:
        self.client.delete_blob(key)

    def _storage_error(self, what: str, exc: Exception) -> StorageError:
        status = _status(exc)
        code = str(getattr(exc, "error_code", "") or "")
        detail = f"{code or type(exc).__name__} (HTTP {status})" if status else type(exc).__name__
        if status in (401, 403) or type(exc).__name__ == "ClientAuthenticationError":
            return StorageError(f"permission denied while {what} in {self._where()}: {detail}")
        return StorageError(f"Azure error while {what} in {self._where()}: {detail}")


def _status(exc: Exception) -> int:
    return int(getattr(exc, "status_code", 0) or 0)


def _mtime_ms(item: Any) -> int:
    modified = getattr(item, "last_modified", None)
    return int(modified.timestamp() * 1000) if modified is not None else 0
