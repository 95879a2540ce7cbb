"""A table's storage credentials in the cluster: its Secret, read through ``SecretCache``.

The driver (``handlers.driver``) asks its credentials source for a table's storage options at
every tick. In the cluster that source is ``SecretCredentials``: the keys of the Secret the
table names (``spec.storage.secretRef``), read with the controller's API client and cached by
``SecretCache``. It also notices a rotated Secret (a new resourceVersion since the table was
opened) and has the table opened again, so new credentials replace the old client; and it
forgets a cached Secret when the table's storage failed, so a rotated one is read at the next
tick. Local mode has no Secrets (``txntable run --local`` reads no secretRef: docs/cli.md) and
passes no source. Kopf-free; the Kubernetes client is imported where a Secret is read.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from txntable.api.types import TxnTable
from txntable.controller.memory import TableMemories
from txntable.handlers.secret_cache import SecretCache, SecretData, SecretUnavailable

log = logging.getLogger(__name__)

_UNREAD = object()


@dataclass
class SecretSeen:
    """One table's sub-record (``controller.memory``): the resourceVersion of the Secret its
    cached table was opened with (unread: none yet)."""

    version: object = _UNREAD


def read_secret(api_client: Any, namespace: str, name: str) -> SecretData:
    """The Secret ``namespace/name``, decoded; ``SecretUnavailable`` when it cannot be had."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        secret = client.CoreV1Api(api_client).read_namespaced_secret(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            raise SecretUnavailable(
                f"Secret {namespace}/{name} (spec.storage.secretRef) does not exist", missing=True
            ) from None
        why = "the controller may not read it" if exc.status == 403 else "it could not be read"
        raise SecretUnavailable(
            f"Secret {namespace}/{name} (spec.storage.secretRef): {why} "
            f"(HTTP {exc.status} {exc.reason or ''})".rstrip(),
            missing=False,
        ) from None
    data = secret.data or {}
    version = secret.metadata.resource_version if secret.metadata else None
    try:
        decoded = {k: base64.b64decode(v).decode("utf-8") for k, v in data.items()}
    except (ValueError, UnicodeDecodeError):
        raise SecretUnavailable(
            f"Secret {namespace}/{name} (spec.storage.secretRef): a value is not UTF-8 text",
            missing=False,
        ) from None
    return SecretData(decoded, version)


class SecretCredentials:
    """The cluster's credentials source for the driver."""

    def __init__(
        self, cache: SecretCache, memories: TableMemories, reopen: Callable[[str], None]
    ) -> None:
        self.cache = cache
        self.memories = memories
        self.reopen = reopen

    def options(self, key: str, table: TxnTable) -> dict[str, str]:
        """The table's storage options from its Secret (cached: ``SecretCache``). A Secret whose
        resourceVersion changed since the table was opened makes the controller open it again,
        so new credentials replace the old client, not only the options of a later open.
        Raises ``SecretUnavailable``."""
        ref = table.spec.storage.secret_ref
        if ref is None:
            return {}
        namespace = table.metadata.namespace or "default"
        secret = self.cache.get(namespace, ref.name)
        seen = self.memories.of(key, SecretSeen)
        if seen.version is not _UNREAD and seen.version != secret.resource_version:
            log.info("Secret %s/%s changed: reopening the table", namespace, ref.name)
            self.reopen(key)
        seen.version = secret.resource_version
        return dict(secret.data)

    def storage_failed(self, table: TxnTable) -> None:
        """The table's storage failed (maybe stale credentials): read its Secret again next."""
        ref = table.spec.storage.secret_ref
        if ref is not None:
            self.cache.invalidate(table.metadata.namespace or "default", ref.name)
