"""``python -m txntable.jobs.vacuum URI ...``: the controller's VACUUM-only run, one JSON line out.

Launchers start ``txntable.jobs.<kind>`` for a run of that kind, so a run of kind ``vacuum`` needs
a module of that name. It is the optimize job with ``--vacuum-only``: the same arguments (the
controller builds them as for a compaction run), the same VACUUM (``jobs.optimize.run_vacuum``,
on Spark for huge tables), the same result line and exit statuses.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from txntable.jobs import optimize


def main(argv: Sequence[str] | None = None) -> int:
    """Run the optimize job's VACUUM-only path with ``argv`` (default: the command line)."""
    args = list(sys.argv[1:] if argv is None else argv)
    return optimize.main([*args, "--vacuum-only"])


if __name__ == "__main__":
    sys.exit(main())
