"""The one error of the custom-resource API: a manifest that breaks the schema or a rule.

Hierarchy::

    ApiError
    └── InvalidSpecError     fields break a schema or CEL rule: ``errors`` lists every
                             (field path, reason), as the API server reports them all;
                             ``field_path``/``reason`` are the first

The CRDs reject the same manifests at admission; these errors exist so code that reads
manifests without an API server (local mode, tests, the CLI) fails the same way, and so the
controller can turn a spec that slipped through into a condition with a reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


class ApiError(Exception):
    """Base of every error raised by ``txntable.api``."""


class InvalidSpecError(ApiError):
    """Invalid manifest fields: ``errors`` says where and why; ``field_path``/``reason`` first."""

    def __init__(
        self, field_path: str, reason: str, *, more: Sequence[tuple[str, str]] = ()
    ) -> None:
        self.errors: tuple[tuple[str, str], ...] = ((field_path, reason), *more)
        super().__init__("; ".join(f"{p}: {r}" if p else r for p, r in self.errors))
        self.field_path = field_path
        self.reason = reason

    @classmethod
    def combine(cls, errors: Iterable[InvalidSpecError]) -> InvalidSpecError:
        """One error holding every (path, reason) of ``errors``, in order, without repeats."""
        pairs = list(dict.fromkeys(pair for error in errors for pair in error.errors))
        if not pairs:
            raise ValueError("combine() needs at least one error")
        (path, reason), *rest = pairs
        return cls(path, reason, more=rest)

    def within(self, prefix: str) -> InvalidSpecError:
        """The same errors with ``prefix.`` before every path."""
        return InvalidSpecError.combine(
            InvalidSpecError(f"{prefix}.{p}" if p else prefix, r) for p, r in self.errors
        )
