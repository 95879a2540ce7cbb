"""``make soak``: seeded torture runs; exit 1 when any invariant broke.

python -m tests.soak [--seeds 1,2,3] [--steps 60] [--workdir DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from tests.soak.torture import Soak


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak")
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated seeds, one run each")
    parser.add_argument("--steps", type=int, default=60, help="steps per run")
    parser.add_argument("--kill-rate", type=float, default=0.35, help="maintenance kill chance")
    parser.add_argument("--workdir", default=None, help="keep the tables here (default: temp)")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="txntable-soak-"))
    failed = False
    totals = {"runs": 0, "steps": 0, "kills": 0, "invariantChecks": 0, "violations": 0}
    for seed in (int(s) for s in args.seeds.split(",") if s):
        report = Soak(workdir / f"seed-{seed}", seed, kill_rate=args.kill_rate).run(args.steps)
        doc = report.to_json()
        print(json.dumps(doc), flush=True)
        totals["runs"] += 1
        totals["steps"] += report.steps
        totals["kills"] += sum(report.kills.values())
        totals["invariantChecks"] += report.invariant_checks
        totals["violations"] += len(report.violations)
        failed |= bool(report.violations)
    print(json.dumps({"totals": totals, "workdir": str(workdir)}), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
