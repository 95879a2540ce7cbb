"""Which store serves a URI: the one place that turns a location and its options into a Storage.

``storage`` defines the interface and the local and in-memory stores; ``s3`` and ``azure``
implement it for object stores on top of ``storage``. Choosing among them by URI scheme lives
here, above all of them, so the interface never imports its own implementations (which once made
an import cycle hidden behind function-level imports). Opening (``open_storage``,
``open_uri_input``) and checking without touching the store (``check_storage_options``) dispatch
on the scheme side by side, so they cannot drift apart. Importing ``s3`` and ``azure`` costs no
SDK: boto3 and azure-storage-blob are imported only when a client is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any
from urllib.parse import unquote, urlsplit

from txntable.engine.errors import InvalidArgumentError
from txntable.engine.storage.azure import AzureStorage, azure_target
from txntable.engine.storage.azure_options import parse_azure_options
from txntable.engine.storage.base import LocalStorage, MemoryStorage, Storage
from txntable.engine.storage.options import (
    AZURE_SCHEMES,
    bool_option,
    unsupported_scheme_error,
    uri_scheme,
)
from txntable.engine.storage.s3 import S3Storage, parse_s3_uri
from txntable.engine.storage.s3_options import parse_s3_options


def _flag(options: Mapping[str, Any], key: str, default: bool) -> bool:
    value = options.get(key, default)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise InvalidArgumentError(f"storage option {key} must be true or false, got {value!r}")
    return text == "true"


def open_uri_input(uri: str, storage_options: Mapping[str, Any] | None = None) -> IO[bytes] | str:
    """What ``pyarrow.parquet`` can read for an absolute file URI (a data file a log names
    outside the table root), through the same storage classes and option names as tables:
    fsspec would neither understand delta-rs option names nor have an S3 client installed.
    ``uri`` is decoded (as ``paths.decode_path`` returns it): its file name is taken as is."""
    parent, sep, name = uri.rstrip("/").rpartition("/")
    if not sep or not name:
        raise InvalidArgumentError(f"not a file URI: {uri!r}")
    return open_storage(parent or "/", storage_options).open_input(name)


def open_storage(uri: str, storage_options: Mapping[str, Any] | None = None) -> Storage:
    """The storage for a table URI: a local path, ``file://``, ``s3://``/``s3a://``, Azure
    (``abfss://``, ``abfs://``, ``az://``, ``azure://``) or ``memory://``. Other schemes
    (``gs://``, ``hdfs://``, ...) are refused with an error that names the supported ones:
    txntable cannot commit safely there (no put-if-absent)."""
    if not uri:
        raise InvalidArgumentError("table URI is empty")
    options = dict(storage_options or {})
    parts = urlsplit(uri)
    scheme = parts.scheme.lower() if len(parts.scheme) > 1 else ""  # 'C:' is a drive
    if scheme in ("", "file", "local"):
        # a file: URI is percent-encoded (file:///data/a%20b is "/data/a b"); a plain path is not
        path = unquote(parts.path) if scheme else uri
        return LocalStorage(path, fsync=_flag(options, "fsync", default=True))
    if scheme in ("s3", "s3a"):
        return S3Storage(uri, options)
    if scheme in AZURE_SCHEMES:
        return AzureStorage(uri, options)
    if scheme != "memory":
        raise unsupported_scheme_error(uri)
    # fsspec only here: it serves memory:// (tests) alone, and costs every other process ~50 ms
    import fsspec
    from fsspec.implementations.memory import MemoryFileSystem

    fs, path = fsspec.core.url_to_fs(uri)
    if not isinstance(fs, MemoryFileSystem):  # pragma: no cover - fsspec maps memory:// so
        raise unsupported_scheme_error(uri)
    return MemoryStorage(fs, path, uri.rstrip("/"))


def check_storage_options(uri: str, options: Mapping[str, Any] | None) -> dict[str, str]:
    """Validate a table's location and storage options without touching the store.

    Returns the options that have no effect (name -> why); raises ``InvalidArgumentError`` for
    a bad option and ``StorageError`` for a scheme txntable does not serve."""
    options = dict(options or {})
    scheme = uri_scheme(uri)
    if scheme in ("s3", "s3a"):
        settings = parse_s3_options(options)
        bucket, _ = parse_s3_uri(uri)
        if settings.bucket is not None and settings.bucket != bucket:
            raise InvalidArgumentError(
                f"storage option bucket names {settings.bucket!r}, the URI {bucket!r}"
            )
        return dict(settings.without_effect)
    if scheme in AZURE_SCHEMES:
        settings_az = parse_azure_options(options)
        azure_target(uri, settings_az)  # the account and container must be known
        return dict(settings_az.without_effect)
    if scheme in ("", "file", "local"):
        if "fsync" in options:
            bool_option("fsync", options["fsync"])
        return {k: "local disk takes only fsync" for k in options if k != "fsync"}
    if scheme == "memory":
        return {k: "the in-memory store takes no options" for k in options}
    raise unsupported_scheme_error(uri)
