"""Errors of the command line itself (bad usage), apart from the engine's errors.

Hierarchy::

    CliError            bad arguments or an impossible request; exits with status 2
"""

from __future__ import annotations


class CliError(Exception):
    """The command line was used wrongly; the message is shown as ``error: ...``."""
