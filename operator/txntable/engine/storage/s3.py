"""Amazon S3 (and S3-compatible stores) with commits by conditional PUT.

S3 has no rename, but it does have an atomic "create only if absent": ``PUT`` with
``If-None-Match: *`` fails with 412 when the key exists, exactly once across all writers. That is
the one primitive a Delta commit needs (two writers may never both create version ``v``). Two S3
answers need care:

* 409 ``ConditionalRequestConflict`` means another conditional write to the key is in flight;
  the outcome is unknown, so the PUT is retried after a short backoff until S3 answers 200 or 412.
* A timeout or dropped connection after the request was sent is ambiguous: the object may have
  landed. The PUT is retried; if it then meets 412, the stored object is read back and compared
  with ours. Commit bodies carry a unique ``txnId``, so equal bytes mean the first PUT won and
  the commit succeeded, and it is never written twice or reported as lost.

Stores that do not implement conditional writes can be declared with
``storage_options={"AWS_CONDITIONAL_PUT": "disabled"}`` (or ``conditional_put=false``); the
commit path then refuses to commit unless the table opts into single-writer mode. Option names
are those of delta-rs/object_store or fsspec (``storage/s3_options.py`` names them). Credentials
come from ``storage_options`` or boto3's standard chain and are never logged or put into error
messages.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from txntable.engine.errors import InvalidArgumentError, StorageError
from txntable.engine.storage.base import FileExistsInStoreError, FileInfo
from txntable.engine.storage.object_store import ObjectStorage
from txntable.engine.storage.options import report_without_effect
from txntable.engine.storage.paths import LOG_DIR
from txntable.engine.storage.s3_options import (
    S3Settings,
    parse_s3_options,
    s3_options_with_environment,
)

log = logging.getLogger(__name__)

_CONFLICT_RETRIES = 20
_AMBIGUOUS_RETRIES = 5


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``(bucket, key prefix)`` of ``s3://bucket/prefix`` or ``s3a://…``."""
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme.lower() not in ("s3", "s3a"):
        raise InvalidArgumentError(f"not an S3 URI: {uri!r}")
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise InvalidArgumentError(f"S3 URI has no bucket: {uri!r}")
    return bucket, prefix.strip("/")


def _error_code(exc: Exception) -> tuple[str, int]:
    response = getattr(exc, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return code, status


class S3Storage(ObjectStorage):
    """A table under ``s3://bucket/prefix``; commits use ``If-None-Match: *``."""

    atomic_put_if_absent = True

    def __init__(
        self, uri: str, storage_options: Mapping[str, Any] | None = None, client: Any = None
    ) -> None:
        super().__init__(uri)
        self.bucket, self.prefix = parse_s3_uri(uri)
        settings = parse_s3_options(s3_options_with_environment(storage_options or {}))
        if settings.bucket is not None and settings.bucket != self.bucket:
            raise InvalidArgumentError(
                f"storage option bucket names {settings.bucket!r}, the URI {self.bucket!r}"
            )
        self.atomic_put_if_absent = settings.conditional_put
        #: options given that do nothing here (name -> why); also logged once at info
        self.options_without_effect = dict(settings.without_effect)
        report_without_effect(f"s3://{self.bucket}", settings.without_effect)
        self._put_args = dict(settings.put_args)
        self.client = client if client is not None else self._make_client(settings)

    @staticmethod
    def _make_client(settings: S3Settings) -> Any:
        try:
            import boto3
            from botocore import UNSIGNED
            from botocore.config import Config
        except ImportError as exc:
            raise StorageError(
                "s3:// tables need boto3, which this installation lacks "
                "(pip install 'txntable[s3]'; the released images include it)"
            ) from exc
        session = boto3.session.Session(**settings.session)
        options: dict[str, Any] = {
            "retries": {"mode": "standard", "max_attempts": 5},
            "connect_timeout": 10,
            "read_timeout": 30,
        }
        options.update(settings.config)
        if options.get("signature_version") == "unsigned":
            options["signature_version"] = UNSIGNED
        client = session.client("s3", config=Config(**options), **settings.client)
        if settings.request_args:
            extra = dict(settings.request_args)

            def add_request_args(params: dict[str, Any], **_: Any) -> None:
                params.update(extra)

            client.meta.events.register("provide-client-params.s3.*", add_request_args)
        return client

    # -- reads ------------------------------------------------------------------------------
    def list_dir(self, relative_dir: str, start_at: str = "") -> list[FileInfo]:
        prefix = self._key(relative_dir).rstrip("/") + "/"
        params: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix, "Delimiter": "/"}
        if start_at and start_at[-1] > "\x00":
            # StartAfter is exclusive: start just below ``start_at``, then filter exactly.
            params["StartAfter"] = prefix + start_at[:-1] + chr(ord(start_at[-1]) - 1)
        out: list[FileInfo] = []
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(**params):
                for obj in page.get("Contents", ()):
                    name = obj["Key"][len(prefix) :]
                    if not name or "/" in name or name < start_at:
                        continue
                    mtime = int(obj["LastModified"].timestamp() * 1000)
                    out.append(FileInfo(name, int(obj["Size"]), mtime))
        except Exception as exc:
            raise self._storage_error(f"listing {relative_dir}", exc) from exc
        out.sort(key=lambda f: f.name)
        return out

    def list_tree(self, skip_dir: Callable[[str], bool] | None = None) -> Iterator[FileInfo]:
        prefix = self._key("").rstrip("/")
        prefix = prefix + "/" if prefix else ""
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=prefix
            )
            for page in pages:
                for obj in page.get("Contents", ()):
                    name = obj["Key"][len(prefix) :]
                    if not name or name.endswith("/"):
                        continue
                    if skip_dir is not None and any(skip_dir(d) for d in name.split("/")[:-1]):
                        continue
                    mtime = int(obj["LastModified"].timestamp() * 1000)
                    yield FileInfo(name, int(obj["Size"]), mtime)
        except Exception as exc:
            raise self._storage_error("listing the table", exc) from exc

    def has_log_files(self) -> bool:
        prefix = self._key(LOG_DIR) + "/"
        try:
            page = self.client.list_objects_v2(Bucket=self.bucket, Prefix=prefix, MaxKeys=1)
        except Exception as exc:
            raise self._storage_error(f"listing {LOG_DIR}", exc) from exc
        return bool(page.get("Contents"))

    def _get(self, key: str) -> bytes:
        data: bytes = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        return data

    def _get_tail(self, key: str, length: int) -> bytes:
        # a suffix range: S3 answers the whole object when it is shorter
        response = self.client.get_object(Bucket=self.bucket, Key=key, Range=f"bytes=-{length}")
        data: bytes = response["Body"].read()
        return data

    def _missing(self, exc: Exception) -> bool:
        code, status = _error_code(exc)
        return code in ("NoSuchKey", "404") or status == 404

    # -- writes -----------------------------------------------------------------------------
    def write_if_absent(self, relative: str, data: bytes) -> None:
        self._require_conditional_put()
        key = self._key(relative)
        ambiguous = 0
        conflicts = 0
        while True:
            try:
                self.client.put_object(
                    Bucket=self.bucket, Key=key, Body=data, IfNoneMatch="*", **self._put_args
                )
                return
            except Exception as exc:
                code, status = _error_code(exc)
                if code == "PreconditionFailed" or status in (412, 304):
                    # botocore retries timeouts itself: a 412 on its retry is ambiguous too.
                    retried = _retry_attempts(exc) > 0
                    if (ambiguous or retried) and self._holds(relative, data):
                        log.info("commit %s landed before its response was lost", relative)
                        return
                    raise FileExistsInStoreError(f"{relative} already exists") from None
                if code == "ConditionalRequestConflict" or status == 409:
                    conflicts += 1
                    if conflicts > _CONFLICT_RETRIES:
                        raise self._storage_error(f"writing {relative}", exc) from exc
                    _sleep(conflicts)
                    continue
                if _is_ambiguous(exc) and ambiguous < _AMBIGUOUS_RETRIES:
                    ambiguous += 1
                    log.warning("no answer to the PUT of %s; checking whether it landed", relative)
                    _sleep(ambiguous)
                    continue
                raise self._storage_error(f"writing {relative}", exc) from exc

    def _put(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data, **self._put_args)

    def _remove(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=key)

    def _endpoint(self) -> str:
        """The endpoint the client talks to, without any user info a URL could carry."""
        parts = urlsplit(str(getattr(self.client.meta, "endpoint_url", "") or ""))
        return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")

    def _storage_error(self, what: str, exc: Exception) -> StorageError:
        code, status = _error_code(exc)
        detail = f"{code} (HTTP {status})" if code else type(exc).__name__
        if type(exc).__name__ in ("EndpointConnectionError", "ConnectTimeoutError"):
            detail += f" (no connection to {self._endpoint()})"
        if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
            return StorageError(f"permission denied while {what} in s3://{self.bucket}: {detail}")
        return StorageError(f"S3 error while {what} in s3://{self.bucket}: {detail}")


def _retry_attempts(exc: Exception) -> int:
    response = getattr(exc, "response", None) or {}
    return int(response.get("ResponseMetadata", {}).get("RetryAttempts", 0) or 0)


def _is_ambiguous(exc: Exception) -> bool:
    """A failure after which the request may have reached S3 and taken effect."""
    name = type(exc).__name__
    return name in (
        "ReadTimeoutError",
        "ConnectionClosedError",
        "ResponseStreamingError",
        "EndpointConnectionError",
        "ConnectTimeoutError",
    ) or isinstance(exc, TimeoutError | ConnectionError)


def _sleep(attempt: int) -> None:
    time.sleep(min(1.0, 0.01 * 2**attempt) * (0.5 + random.random()))
