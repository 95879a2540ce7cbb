"""The launch layer's one error module: what can go wrong when starting or watching a run.

Hierarchy::

    LaunchError                 base of every error raised by ``txntable.launch``
    ├── TransientLaunchError    the API server or the machine is briefly unable (5xx, 429,
    │                           timeouts, refused connections): retry after ``delay`` seconds
    ├── PermanentLaunchError    the request or its manifest is wrong, or the cluster lacks
    │                           something (4xx, missing CRD, forbidden): retrying cannot help;
    │                           ``reason`` is a CamelCase constant for a condition
    └── RunNotFoundError        the named run does not exist (never created, or already
                                deleted by a TTL or a history limit)

Handlers turn ``TransientLaunchError`` into ``kopf.TemporaryError(delay=...)`` and
``PermanentLaunchError`` into a condition with ``reason`` plus ``kopf.PermanentError``.
"""

from __future__ import annotations


class LaunchError(Exception):
    """Base of every error raised by ``txntable.launch``."""


class TransientLaunchError(LaunchError):
    """A failure that may pass: retry the same call after ``delay`` seconds."""

    def __init__(self, message: str, *, delay: float = 10.0) -> None:
        super().__init__(message)
        self.delay = delay


class PermanentLaunchError(LaunchError):
    """A failure that retrying cannot fix; ``reason`` names it for a status condition."""

    def __init__(self, message: str, *, reason: str = "InvalidRun") -> None:
        super().__init__(message)
        self.reason = reason


class RunNotFoundError(LaunchError):
    """The run ``namespace/name`` does not exist."""

    def __init__(self, namespace: str, name: str) -> None:
        super().__init__(f"run {namespace}/{name} not found")
        self.namespace = namespace
        self.name = name
