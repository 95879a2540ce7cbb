"""The one error of the custom-resource API: a manifest that breaks the schema or a rule.

Hierarchy::

    ApiError
    └── InvalidSpecError     a field (``field_path``) breaks a schema or CEL rule (``reason``)

The CRDs reject the same manifests at admission; these errors exist so code that reads
manifests without an API server (local mode, tests, the CLI) fails the same way, and so the
controller can turn a spec that slipped through into a condition with a reason.
"""

from __future__ import annotations


class ApiError(Exception):
    """Base of every error raised by ``txntable.api``."""


class InvalidSpecError(ApiError):
    """A manifest field is invalid; ``field_path`` says where, ``reason`` says why."""

    def __init__(self, field_path: str, reason: str) -> None:
        super().__init__(f"{field_path}: {reason}" if field_path else reason)
        self.field_path = field_path
        self.reason = reason
