"""How calls to the Kubernetes client and their failures become launch values.

One place maps client exceptions to the launch errors (``translate``): 429, 5xx, status 0,
timeouts and refused connections are transient (``Retry-After`` is honoured); other 4xx and
client-side parameter errors are permanent, with the HTTP reason as a CamelCase constant.
Client models are turned into the API server's JSON (camelCase dicts) so the launchers read
one shape whether a client returns dicts (custom objects) or models (built-in kinds).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final, TypeVar

import urllib3.exceptions
from kubernetes.client.exceptions import ApiException, OpenApiException

from txntable.launch.errors import LaunchError, PermanentLaunchError, TransientLaunchError

T = TypeVar("T")

TRANSIENT_STATUS: Final = frozenset({0, 408, 425, 429, 500, 502, 503, 504})
PERMANENT_REASONS: Final = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    422: "Invalid",
}


def _api_message(exc: ApiException) -> str:
    try:
        body = json.loads(exc.body or "")
    except (TypeError, ValueError):
        body = None
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return str(exc.reason or "")


def translate(exc: BaseException, what: str) -> LaunchError:
    """The launch error for a client exception raised while doing ``what``."""
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        message = f"{what}: HTTP {status} {_api_message(exc)}".rstrip()
        if status in TRANSIENT_STATUS:
            delay = 10.0
            retry_after = (exc.headers or {}).get("Retry-After")
            if retry_after and str(retry_after).isdigit():
                delay = float(retry_after)
            return TransientLaunchError(message, delay=delay)
        return PermanentLaunchError(message, reason=PERMANENT_REASONS.get(status, "ApiError"))
    if isinstance(exc, urllib3.exceptions.HTTPError | OSError | TimeoutError):
        return TransientLaunchError(f"{what}: {exc}")
    if isinstance(exc, OpenApiException):
        return PermanentLaunchError(f"{what}: {exc}", reason="ClientError")
    return LaunchError(f"{what}: {exc}")


def call(what: str, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except (ApiException, OpenApiException, urllib3.exceptions.HTTPError, OSError) as exc:
        raise translate(exc, what) from exc


def status_code(exc: BaseException) -> int | None:
    cause = exc.__cause__
    return int(cause.status or 0) if isinstance(cause, ApiException) else None


def parse_time(value: object) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


def dig(obj: Mapping[str, Any], *path: str) -> Any:
    cur: Any = obj
    for key in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur


def serialize(api: Any, obj: Any) -> dict[str, Any]:
    """A client model as the API server's JSON (camelCase keys); dicts pass through."""
    if isinstance(obj, dict):
        return obj
    client = getattr(api, "api_client", None)
    if client is None:
        return {}
    plain = client.sanitize_for_serialization(obj)
    return plain if isinstance(plain, dict) else {}
