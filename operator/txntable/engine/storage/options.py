"""Storage options as users already write them: what the S3 and Azure option sets share.

People come to txntable with the option names of delta-rs and object_store
(``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``, ``AWS_CONDITIONAL_PUT``, ``AZURE_STORAGE_ACCOUNT_NAME``
...), in upper or lower case, or with fsspec/s3fs names (``key``, ``secret``, ``endpoint_url``).
Every name is sorted into one of three groups, so no option is silently dropped:

* **mapped**: it changes how our client talks to the store (endpoint, region, credentials,
  TLS, timeouts, addressing style, encryption and checksums of the objects we write, ...);
* **without effect**: the name is known and harmless here, and the reason is reported (a
  DynamoDB locking provider is not needed because commits are conditional writes; the HTTP
  tuning knobs of object_store's client do not apply to boto3 or the Azure SDK);
* **refused**: the option asks for something our client cannot honour (assuming a role from
  options, SSE-C); the error says what to do instead.

Anything else is an error that lists the accepted names. Values of credentials never appear in
an error, a log line or ``repr``: only option names do. Parsing needs no SDK, so manifests can
be checked anywhere (``factory.check_storage_options``).

This module holds the sorting, the value parsers, the environment fallback and the reporting;
``s3_options`` and ``azure_options`` hold each store's names and settings.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from txntable.engine.errors import InvalidArgumentError, StorageError

log = logging.getLogger(__name__)

#: object_store's HTTP client settings, which our clients (boto3, the Azure SDK) do not have;
#: each store accepts them bare and with its prefix, and says why they do nothing
HTTP_TUNING_NAMES: Final = (
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


def proxy_env(ca_bundle: str) -> str:
    """Why a proxy option is refused: the environment names the proxy and, as ``ca_bundle``
    (the variable the store's SDK reads), the CA certificates."""
    return f"not supported: set HTTPS_PROXY, NO_PROXY and {ca_bundle} in the environment"


_TRUE: Final = frozenset({"true", "1", "yes", "y", "on"})
_FALSE: Final = frozenset({"false", "0", "no", "n", "off"})
_DURATION: Final = re.compile(
    r"^\s*(\d+(?:\.\d+)?)\s*(ms|msec|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hours?)?\s*$"
)
_UNIT_SECONDS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}

#: schemes ``open_storage`` serves; everything else is refused with this list
SUPPORTED_SCHEMES: Final = (
    "a local path or file:// (local disk)",
    "s3:// or s3a:// (Amazon S3 and S3-compatible stores with conditional writes)",
    "abfss://, abfs://, az:// or azure:// (Azure Blob Storage and ADLS Gen2)",
    "memory:// (in-process, for tests)",
)
AZURE_SCHEMES: Final = ("abfss", "abfs", "az", "azure")


def http_tuning(prefix: str, why: str, *more: str) -> dict[str, str]:
    """The without-effect entries of object_store's HTTP tuning names (and ``more``), bare and
    with ``prefix`` (``aws_``, ``azure_``), each with the reason ``why``."""
    return {f"{p}{name}": why for p in ("", prefix) for name in (*HTTP_TUNING_NAMES, *more)}


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


def seconds_option(name: str, value: Any) -> float:
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


def sort_options(
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
class GivenOptions:
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


def with_environment(
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
